package cuda

import (
	"fmt"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestHostWide runs Lorenz-96 with Tsit5 through the engine in the wide
// layout (Tuning.Wide) on a simulated warp, d = 64 and 70 (not a
// multiple of 32): its solve, record, loss and gradient with the record
// against the CPU engine's (compareEngines: the same steps, states,
// losses and gradients to the case's tolerance), in the wide layout (the
// trace says so), while a solve with save times, which the layout does
// not run, stays in the thread layout.
func TestHostWide(t *testing.T) {
	needHost(t)
	t.Parallel()
	for _, d := range []int{64, 70} {
		testWide(t, "cuda-host-sim", 7, d)
	}
}

// TestGPUWide is TestHostWide on the device (engine "cuda"), d = 64 and
// 256 with 1,000 trajectories.
func TestGPUWide(t *testing.T) {
	needGPUEngine(t)
	for _, d := range []int{64, 256} {
		testWide(t, "cuda", 1000, d)
	}
}

// wideCase is Lorenz-96 with n trajectories of d components and Tsit5,
// without save times, with a loss of the final state.
func wideCase(n, d int) engineCase {
	c := lorenz96Case(n, d, ode.Tsit5)
	c.prob.SaveAt = nil
	c.loss = ode.Loss{Name: "l96-final", F: func(y, _, _ []tape.V) tape.V {
		return y[0].Square().Add(y[d-1]).Add(y[1].Mul(y[2]))
	}}
	return c
}

// testWide runs Lorenz-96 with n trajectories of d components in the
// wide layout on engine name (see TestHostWide).
func testWide(t *testing.T, name string, n, d int) {
	sim := tuned(t, name, Tuning{Wide: true})
	c := wideCase(n, d)
	compareEngines(t, sim, c, caseOpts{ops: []string{"solve", "record", "loss", "grad"}})
	for _, x := range []struct {
		op, want string
	}{{"solve", "wide"}, {"record", "wide"}, {"grad", "wide"}, {"saves", "thread"}} {
		var tr Trace
		ctx := WithTrace(t.Context(), &tr)
		sv := c.solver(t, sim)
		p := c.prob
		var err error
		switch x.op {
		case "solve":
			_, err = sv.SolveContext(ctx, &p)
		case "record":
			_, _, err = sv.RecordContext(ctx, &p)
		case "grad":
			_, err = sv.GradContext(ctx, nil, &p, c.loss, nil)
		case "saves":
			p.SaveAt = []float64{0.25}
			_, err = sv.SolveContext(ctx, &p)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.Stats().Layout; got != x.want {
			t.Errorf("d = %d, %s: trace layout %q, want %q", d, x.op, got, x.want)
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
