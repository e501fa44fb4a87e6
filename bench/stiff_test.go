package bench

import (
	"bytes"
	"math"
	"testing"
)

// TestRunStiff runs the stiff suite on tiny ensembles and checks that every
// field of every row is filled and plausible.
func TestRunStiff(t *testing.T) {
	var buf bytes.Buffer
	rows, err := RunStiff(&buf, StiffConfig{N: []int{6}, RelTol: []float64{1e-5}, Reps: 1, RefSample: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("got %d rows, want 4 (2 problems × Rodas5P, Rosenbrock23):\n%s", len(rows), buf.String())
	}
	for _, r := range rows {
		pos := map[string]float64{
			"Steps": r.Steps, "Forward": r.Forward, "Record": r.Record, "Grad": r.Grad,
			"GradRecord": r.GradRecord, "GradRatio": r.GradRatio, "GradRecordRatio": r.GradRecordRatio,
			"Err": r.Err, "AbsTol": r.AbsTol,
		}
		for name, v := range pos {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("%s %s: %s = %v, want positive and finite", r.Problem, r.Method, name, v)
			}
		}
		if r.N != 6 || r.RefSample != 3 || r.StoredBytes <= 0 || r.Rejected < 0 || r.Workers < 1 {
			t.Errorf("%s %s: N %d, RefSample %d, StoredBytes %d, Rejected %v, Workers %d",
				r.Problem, r.Method, r.N, r.RefSample, r.StoredBytes, r.Rejected, r.Workers)
		}
		if r.Err > 100*r.RelTol {
			t.Errorf("%s %s rtol %g: median error %.2g", r.Problem, r.Method, r.RelTol, r.Err)
		}
	}
	if _, _, err := StiffEnsemble("vdp", 3, 0); err == nil {
		t.Error("StiffEnsemble accepted an unknown problem")
	}
}

// TestRunStiffLarge runs the stiff suite's larger problems, POLL (d = 20)
// and the Brusselator (d = 64), on tiny ensembles: both methods complete,
// the sweeps are StiffEnsemble's, and the achieved error is within 100·rtol
// of the Radau5 reference.
func TestRunStiffLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the Rodas5P and Rosenbrock23 plans of a d = 64 field; skipped with -short")
	}
	var buf bytes.Buffer
	rows, err := RunStiff(&buf, StiffConfig{Problems: []string{"pollution", "brusselator"}, N: []int{3},
		RelTol: []float64{1e-6}, Reps: 1, RefSample: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("got %d rows, want 4 (2 problems × Rodas5P, Rosenbrock23):\n%s", len(rows), buf.String())
	}
	for _, r := range rows {
		if !(r.Steps > 0 && r.Grad > 0 && r.Err > 0) || r.Err > 100*r.RelTol || r.RefSample != 2 {
			t.Errorf("%s %s rtol %g: steps %v, grad %v ms, median error %.2g, ref sample %d",
				r.Problem, r.Method, r.RelTol, r.Steps, r.Grad, r.Err, r.RefSample)
		}
	}
	for _, tc := range []struct {
		name   string
		np     int
		lo, hi float64
	}{{"pollution", 25, 0.28, 0.42}, {"brusselator", 1, 0.01, 0.03}} {
		p, _, err := StiffEnsemble(tc.name, 5, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.N != 5 || len(p.P) != 5*tc.np || p.P[0] != tc.lo || p.P[4*tc.np] != tc.hi {
			t.Errorf("%s: N %d, len(P) %d, swept %v to %v", tc.name, p.N, len(p.P), p.P[0], p.P[4*tc.np])
		}
	}
}

// TestRunMemory runs the memory case on a small ensemble.
func TestRunMemory(t *testing.T) {
	var buf bytes.Buffer
	for _, cfg := range []MemoryConfig{{N: 3000}, {N: 3000, Checkpoint: 4}} {
		r, err := RunMemory(&buf, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Steps <= 0 || r.Rows <= 0 || r.Wall <= 0 || r.Record <= 0 || r.Grad <= 0 || r.MeshBytes <= 0 ||
			r.StoredBytes <= 0 || r.InputBytes <= 0 || r.HeapSys == 0 || r.TotalAlloc == 0 || r.PeakHeap == 0 {
			t.Errorf("row not filled: %+v", r)
		}
		if r.N != 3000 || r.RelTol != DefaultMemoryRelTol {
			t.Errorf("N %d, RelTol %g", r.N, r.RelTol)
		}
	}
}
