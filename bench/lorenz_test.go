package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestRunLorenz runs the protocol on tiny ensembles and checks that every
// field of every row is filled and plausible.
func TestRunLorenz(t *testing.T) {
	var buf bytes.Buffer
	cfg := LorenzConfig{N: []int{8, 20}, RelTol: []float64{1e-4, 1e-6}, Reps: 1, RefSample: 5, Workers: 2}
	rows, err := RunLorenz(&buf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("got %d rows, want 4", len(rows))
	}
	for _, r := range rows {
		pos := map[string]float64{
			"Steps": r.Steps, "Forward": r.Forward, "Forward1": r.Forward1, "Baseline": r.Baseline,
			"Baseline1": r.Baseline1, "Record": r.Record, "Grad": r.Grad, "GradRecord": r.GradRecord,
			"GradRatio": r.GradRatio, "GradRecordRatio": r.GradRecordRatio, "ForwardRatio": r.ForwardRatio,
			"ForwardRatio1": r.ForwardRatio1, "Err": r.Err, "AbsTol": r.AbsTol,
			"Forward1CPU": r.Forward1CPU, "Baseline1CPU": r.Baseline1CPU, "ForwardRatio1CPU": r.ForwardRatio1CPU,
		}
		for name, v := range pos {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("n=%d rtol=%g: %s = %v, want positive and finite", r.N, r.RelTol, name, v)
			}
		}
		if r.Rejected < 0 || r.BaselineDiff > 1e-11 || r.StoredBytes <= 0 || r.Workers != 2 {
			t.Errorf("n=%d rtol=%g: Rejected %v, BaselineDiff %v, StoredBytes %d, Workers %d",
				r.N, r.RelTol, r.Rejected, r.BaselineDiff, r.StoredBytes, r.Workers)
		}
		if want := min(r.N, 5); r.RefSample != want {
			t.Errorf("n=%d: RefSample = %d, want %d", r.N, r.RefSample, want)
		}
		if r.AbsTol != r.RelTol*1e-3 {
			t.Errorf("atol = %v, want rtol·1e-3", r.AbsTol)
		}
		// The achieved error tracks the tolerance.
		if r.Err > 100*r.RelTol || r.Err < 1e-4*r.RelTol {
			t.Errorf("n=%d rtol=%g: median error %.2g is implausible", r.N, r.RelTol, r.Err)
		}
	}
	if got := strings.Count(buf.String(), "\n"); got != 2+len(rows) {
		t.Errorf("table has %d lines, want %d:\n%s", got, 2+len(rows), buf.String())
	}

	buf.Reset()
	cfg.JSON, cfg.N, cfg.RelTol = true, []int{4}, []float64{1e-5}
	if _, err := RunLorenz(&buf, cfg); err != nil {
		t.Fatal(err)
	}
	var row map[string]any
	if err := json.Unmarshal(buf.Bytes(), &row); err != nil {
		t.Fatalf("JSON output %q: %v", buf.String(), err)
	}
	for _, k := range []string{"n", "rtol", "forward_ms", "grad_ms", "baseline_ms", "median_rel_err", "steps_per_traj"} {
		if _, ok := row[k]; !ok {
			t.Errorf("JSON row lacks %q: %s", k, buf.String())
		}
	}
}
