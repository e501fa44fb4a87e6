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
