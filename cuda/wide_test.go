package cuda

import (
	"fmt"
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

// BenchmarkGPUWide times the forward solve of Lorenz-96 (Tsit5, rtol
// 1e-6, n = 4096, t ∈ [0, 2]) in the wide layout against the thread
// layout, d = 64 and 256: kernel-ms is the trace's kernel time, ms/op the
// whole call's.
func BenchmarkGPUWide(b *testing.B) {
	needGPUEngine(b)
	for _, d := range []int{64, 256} {
		c := lorenz96Case(4096, d, ode.Tsit5)
		c.prob.SaveAt, c.prob.T1 = nil, 2
		for _, wide := range []bool{false, true} {
			name, engine := "thread", tuned(b, "cuda", Tuning{Layout: LayoutThread})
			if wide {
				name, engine = "wide", tuned(b, "cuda", Tuning{Wide: true})
			}
			b.Run(fmt.Sprintf("d=%d/%s", d, name), func(b *testing.B) {
				set := c.set
				set.Engine = engine
				sv, err := ode.NewSolver(c.prob.Field, &set)
				if err != nil {
					b.Fatal(err)
				}
				var sol ode.Solution
				var tr Trace
				ctx := WithTrace(b.Context(), &tr)
				if _, err := sv.SolveToContext(ctx, &sol, &c.prob); err != nil { // warm: the kernel
					b.Fatal(err)
				}
				if got := tr.Stats().Layout; got != name {
					b.Fatalf("layout %q, want %q", got, name)
				}
				tr.Reset()
				b.ResetTimer()
				for range b.N {
					if _, err := sv.SolveToContext(ctx, &sol, &c.prob); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(tr.Stats().Kernel)/1e6/float64(b.N), "kernel-ms/op")
			})
		}
	}
}
