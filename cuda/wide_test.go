package cuda

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestHostWide runs Lorenz-96 with Tsit5 through the engine in the wide
// layout (Tuning.Wide) on a simulated warp, d = 64 and 70 (not a
// multiple of 32), with and without shared parameters: its solve,
// record, loss and gradient with the record against the CPU engine's
// (compareEngines: the same steps; states, losses and gradients, shared
// ones included, to the case's tolerance), in the wide layout (the trace
// says so), while a solve with save times, which the layout does not
// run, stays in the thread layout; d = 256 the gradient only (but for
// -short), on a simulated warp with an H100's shared memory (a warp's
// 51 KiB pass the default 48 KiB).
func TestHostWide(t *testing.T) {
	needHost(t)
	t.Parallel()
	for _, d := range []int{64, 70} {
		testWide(t, "cuda-host-sim", wideCase(7, d), nil)
		testWide(t, "cuda-host-sim", wideSharedCase(5, d), nil)
	}
	if !testing.Short() {
		testWide(t, "cuda-host-sim-227k", wideSharedCase(3, 256), []string{"grad"})
	}
}

// TestGPUWide is TestHostWide on the device (engine "cuda"), d = 64 and
// 256 with 1,000 trajectories.
func TestGPUWide(t *testing.T) {
	needGPUEngine(t)
	for _, d := range []int{64, 256} {
		testWide(t, "cuda", wideCase(1000, d), nil)
		testWide(t, "cuda", wideSharedCase(1000, d), nil)
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

// wideSharedCase is wideCase with two shared parameters, a damping a and
// a coupling b (y_i' = b·(y_{i+1} − y_{i−2})·y_{i−1} − a·y_i + F), and a
// loss that reads the parameters too: the shared gradient's sums, the
// steps' and the loss's own.
func wideSharedCase(n, d int) engineCase {
	c := wideCase(n, d)
	idx := func(i int) int { return (i + d) % d }
	c.name = "lorenz96-shared"
	c.prob.Field = ode.Field{Name: fmt.Sprintf("lorenz96-shared-%d", d), Dim: d, Params: 1, Shared: 2,
		F: func(_ tape.V, y, p []tape.V) []tape.V {
			dy := make([]tape.V, d)
			for i := range dy {
				dy[i] = p[2].Mul(y[idx(i+1)].Sub(y[idx(i-2)])).Mul(y[idx(i-1)]).Sub(p[1].Mul(y[i])).Add(p[0])
			}
			return dy
		}}
	c.prob.Shared = []float64{1.05, 0.95}
	c.loss = ode.Loss{Name: "l96-shared", FP: func(y, _, _, p, s []tape.V) tape.V {
		return y[0].Square().Add(y[d-1]).Add(y[1].Mul(y[2])).Add(s[0].Mul(s[1]).Mul(p[0]))
	}}
	return c
}

// testWide runs case c in the wide layout on engine name (see
// TestHostWide): ops (nil: solve, record, loss, grad).
func testWide(t *testing.T, name string, c engineCase, ops []string) {
	sim := tuned(t, name, Tuning{Wide: true})
	d := c.prob.Field.Dim
	if ops == nil {
		ops = []string{"solve", "record", "loss", "grad"}
	}
	compareEngines(t, sim, c, caseOpts{ops: ops})
	for _, x := range []struct {
		op, want string
	}{{"solve", "wide"}, {"record", "wide"}, {"grad", "wide"}, {"saves", "thread"}} {
		if !slices.Contains(ops, x.op) && x.op != "saves" {
			continue
		}
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
	if slices.Contains(ops, "grad") {
		wideAgainstThread(t, name, c)
	}
}

// wideAgainstThread compares the gradient with the record of case c on
// engine name in the wide layout with the thread layout's: the same
// steps, and the loss and gradients within 1e-10 relative (closeRows'
// measure): the wide layout sums over the components in another order,
// and Lorenz-96 amplifies the rounding (on a simulated warp, to t = 0.5:
// dL/dy0 within 2e-12 at d = 64 and 70, 2.4e-11 at d = 256, dL/dp within
// 1.5e-14). It logs the largest differences.
func wideAgainstThread(t *testing.T, name string, c engineCase) {
	t.Helper()
	p := c.prob
	var grads [2]*ode.Gradient
	for k, tun := range []Tuning{{Layout: LayoutThread}, {Wide: true}} {
		g, err := c.solver(t, tuned(t, name, tun)).Grad(nil, &p, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		grads[k] = g
	}
	thread, wide := grads[0], grads[1]
	d, np := c.prob.Field.Dim, c.prob.Field.Params
	what := fmt.Sprintf("%s d = %d, wide against thread", c.name, d)
	if skip := compareCounts(t, what, wide.Mesh.Stats, thread.Mesh.Stats, 0); len(skip) > 0 {
		return
	}
	const tol = 1e-10
	closeRows(t, what+" dL/dY0", wide.Y0, thread.Y0, d, tol, nil)
	closeRows(t, what+" dL/dP", wide.P, thread.P, np, tol, nil)
	closeRows(t, what+" dL/dShared", wide.Shared, thread.Shared, len(thread.Shared), tol, nil)
	closeRows(t, what+" loss", []float64{wide.Loss}, []float64{thread.Loss}, 1, tol, nil)
	t.Logf("%s: largest relative differences dL/dy0 %.2g, dL/dp %.2g, dL/ds %.2g, loss %.2g", what,
		largestRel(wide.Y0, thread.Y0, d), largestRel(wide.P, thread.P, np),
		largestRel(wide.Shared, thread.Shared, len(thread.Shared)), largestRel([]float64{wide.Loss}, []float64{thread.Loss}, 1))
}

// largestRel returns the largest difference of got from want, rows of w,
// relative to max(|want entry|, 1e-3 × the row's largest), as closeRows
// measures it.
func largestRel(got, want []float64, w int) float64 {
	worst := 0.0
	for i := 0; w > 0 && i*w < len(want); i++ {
		row := want[i*w : (i+1)*w]
		scale := 0.0
		for _, x := range row {
			scale = math.Max(scale, math.Abs(x))
		}
		for c, x := range row {
			if den := math.Max(math.Abs(x), 1e-3*scale); den > 0 {
				worst = math.Max(worst, math.Abs(got[i*w+c]-x)/den)
			}
		}
	}
	return worst
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
