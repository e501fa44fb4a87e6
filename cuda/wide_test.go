package cuda

import (
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestHostWide runs Lorenz-96 (d = 64) with Tsit5 through the engine in
// the wide layout (Tuning.Wide) on a simulated warp: its forward solve
// against the CPU engine's (compareEngines: the same steps, states to the
// case's tolerance), in the wide layout (the trace says so), while a
// record, which the layout does not run, stays in the thread layout.
func TestHostWide(t *testing.T) {
	needHost(t)
	t.Parallel()
	testWide(t, "cuda-host-sim", 7, 64)
}

// TestGPUWide is TestHostWide on the device (engine "cuda"), d = 64 and
// 256 with 1,000 trajectories.
func TestGPUWide(t *testing.T) {
	needGPUEngine(t)
	for _, d := range []int{64, 256} {
		testWide(t, "cuda", 1000, d)
	}
}

// testWide runs Lorenz-96 with n trajectories of d components in the
// wide layout on engine name (see TestHostWide).
func testWide(t *testing.T, name string, n, d int) {
	sim := tuned(t, name, Tuning{Wide: true})
	c := lorenz96Case(n, d, ode.Tsit5)
	c.prob.SaveAt = nil
	compareEngines(t, sim, c, caseOpts{ops: []string{"solve"}})
	for _, x := range []struct {
		record bool
		want   string
	}{{false, "wide"}, {true, "thread"}} {
		var tr Trace
		sv := c.solver(t, sim)
		var err error
		if x.record {
			_, _, err = sv.RecordContext(WithTrace(t.Context(), &tr), &c.prob)
		} else {
			_, err = sv.SolveContext(WithTrace(t.Context(), &tr), &c.prob)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.Stats().Layout; got != x.want {
			t.Errorf("record %v: trace layout %q, want %q", x.record, got, x.want)
		}
	}
}
