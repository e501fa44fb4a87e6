package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestGPULargeFlow runs the large-state suite on the CPU engine (its
// kernel times are then zero) at a few trajectories: every problem's
// ensemble, reference and row; the GPU and CPU columns then run the same
// engine, so their gradients agree exactly.
func TestGPULargeFlow(t *testing.T) {
	names := LargeCases()
	var out bytes.Buffer
	rows, err := RunGPULarge(&out, LargeConfig{GPUConfig: GPUConfig{N: []int{3}, Reps: 1, RefSample: 2, Engine: "cpu"}, Problems: names, CPUReps: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(names) {
		t.Fatalf("%d rows for %d problems", len(rows), len(names))
	}
	for k, r := range rows {
		// Lorenz-96 at rtol 1e-6 reaches 6e-4 (its error grows along the
		// chaotic flow; 1e-9 at rtol 1e-11), the stiff problems 1e-5.
		if r.Problem != names[k] || r.N != 3 || r.Steps <= 0 || !(r.Err < 1e-3) || r.GradRecordCall <= 0 ||
			r.CPUGradRecordCall <= 0 || r.CPUReps != 1 || r.MaxGradDiff != 0 || r.GradKeepCall <= 0 {
			t.Errorf("row %d: %+v", k, r)
		}
		if !strings.Contains(out.String(), names[k]) {
			t.Errorf("the table has no row of %s:\n%s", names[k], out.String())
		}
	}
	if _, err := RunGPULarge(&out, LargeConfig{GPUConfig: GPUConfig{Engine: "cpu"}, Problems: []string{"lorenz"}}); err == nil || !strings.Contains(err.Error(), "lorenz96-64") {
		t.Errorf("an unknown problem: %v, want an error listing the valid ones", err)
	}
}
