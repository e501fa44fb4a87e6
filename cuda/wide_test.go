package cuda

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestHostWide runs Lorenz-96 with Tsit5 through the engine in the wide
// layout (the default from d = 64; Tuning.NoWide turns it off) on a
// simulated warp, d = 64 with and without
// shared parameters, without save times and with five (at t0, inside
// steps, twice the same, at T1), and d = 70 (not a multiple of 32) with
// shared parameters and save times: its
// solve, record, loss and gradient with the record against the CPU
// engine's (compareEngines: the same steps; states, saved states, losses
// and gradients, shared ones included, to the case's tolerance) and the
// gradient against the thread layout's (wideAgainstThread), in the wide
// layout (the trace says so), while a solve whose save times are steps
// (Settings.Saves = SaveStep), which the layout does not run, stays in the
// thread layout; d = 256 the gradient only (but for -short), on a
// simulated warp with an H100's shared memory (with save times a warp's
// 51 KiB pass the default 48 KiB).
func TestHostWide(t *testing.T) {
	needHost(t)
	t.Parallel()
	testWide(t, "cuda-host-sim", wideCase(7, 64), nil)
	testWide(t, "cuda-host-sim", wideSharedCase(5, 64), nil)
	testWide(t, "cuda-host-sim", wideSavesCase(5, 64), nil)
	testWide(t, "cuda-host-sim", wideSavesCase(5, 70), nil)
	if !testing.Short() {
		testWide(t, "cuda-host-sim-227k", wideSharedCase(3, 256), []string{"grad"})
		testWide(t, "cuda-host-sim-227k", wideSavesCase(3, 256), []string{"grad"})
	}
}

// TestGPUWide is TestHostWide on the device (engine "cuda"): d = 64 with
// 1,000 trajectories, d = 256 with 256 (the CPU engine's side of the
// comparison at d = 256 and 1,000 trajectories took most of a minute).
func TestGPUWide(t *testing.T) {
	needGPUEngine(t)
	for _, d := range []int{64, 256} {
		n := 1000
		if d > 64 {
			n = 256
		}
		testWide(t, "cuda", wideCase(n, d), nil)
		testWide(t, "cuda", wideSharedCase(n, d), nil)
		testWide(t, "cuda", wideSavesCase(n, d), nil)
	}
}

// TestGPUThreadSaves runs Lorenz-96 (d = 64, 1,000 trajectories) with
// save times in the thread layout on the device against the CPU engine:
// alone on a fresh engine, after the same trajectories without save times
// on that engine (TestGPUWide's order, where session 42's device call 2
// found the thread layout's gradient and loss off by up to 3 relative
// while the wide layout's matched the CPU), and in that order without
// input reuse (Tuning.NoInputReuse), and every kernel of the case alone
// ("ops"). The saved states inside steps came out up to 17% off, and the
// gradient with them, with the reverse sweep of session 41's merge
// 382738d, whose gs_coef_bar read each save time's d cotangents into a
// local array first; the merges before it pass, and so does the source
// since that array was undone (69b9693; session 43's device call 1).
// The host engine, the simulated warp and g++'s sanitizers pass on
// either source: keep this test, a device-only defect's only witness.
func TestGPUThreadSaves(t *testing.T) {
	needGPUEngine(t)
	for _, x := range []struct {
		name  string
		tun   Tuning
		cases []engineCase
	}{
		{"fresh", Tuning{Layout: LayoutThread, SplitFrom: -1}, []engineCase{wideSavesCase(1000, 64)}},
		// Every kernel of the case: the solve's, the record's, the
		// replay's, the loss's and the gradient's on a given mesh.
		{"ops", Tuning{Layout: LayoutThread, SplitFrom: -1}, []engineCase{wideSavesCase(1000, 64)}},
		{"after", Tuning{Layout: LayoutThread}, []engineCase{wideSharedCase(1000, 64), wideSavesCase(1000, 64)}},
		{"after-noreuse", Tuning{Layout: LayoutThread, NoInputReuse: true}, []engineCase{wideSharedCase(1000, 64), wideSavesCase(1000, 64)}},
	} {
		t.Run(x.name, func(t *testing.T) {
			e := tuned(t, "cuda", x.tun)
			for _, c := range x.cases {
				ops := []string{"grad"}
				if x.name == "ops" {
					ops = []string{"solve", "record", "replay", "loss", "lossmesh", "gradmesh"}
				}
				compareEngines(t, e, c, caseOpts{ops: ops})
			}
		})
	}
}

// TestGPUWideRosenbrock is TestHostWideRosenbrock on the device (engine
// "cuda": the wide layout for Rosenbrock methods
// from kernelgen.WideMinDimFactor): Pollution (d = 20) with Rodas5P (a save
// time) and Rosenbrock23 (none), 1,000 trajectories, and the Brusselator
// (d = 64) with Rodas5P, 256, to t = 0.5.
func TestGPUWideRosenbrock(t *testing.T) {
	needGPUEngine(t)
	stiff := "cuda"
	testWideRos(t, stiff, wideRosCase(t, "pollution", ode.Rodas5P, 1000, 0.5, true), nil)
	testWideRos(t, stiff, wideRosCase(t, "pollution", ode.Rosenbrock23, 1000, 0.5, false), []string{"grad"})
	testWideRos(t, stiff, wideRosCase(t, "brusselator", ode.Rodas5P, 256, 0.5, false), nil)
}

// wideSavesCase is wideSharedCase with five save times: at t0, inside
// steps, one twice, at T1; and a loss that reads four of them.
func wideSavesCase(n, d int) engineCase {
	c := wideSharedCase(n, d)
	c.name = "lorenz96-shared-saves"
	c.prob.SaveAt = []float64{0, 0.1, 0.25, 0.25, 0.5}
	c.loss = ode.Loss{Name: "l96-saves", FP: func(y, ys, _, p, s []tape.V) tape.V {
		return y[0].Square().Add(ys[5]).Add(ys[d+1].Mul(ys[2*d+2])).Add(ys[3*d+d-1].Square()).Add(ys[4*d+3]).Add(s[0].Mul(p[0]))
	}}
	return c
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
	testWideVs(t, name, tuned(t, name, Tuning{Layout: LayoutThread}), c, ops)
}

// testWideVs is testWide with the thread layout's engine for the
// gradient's comparison named (thread).
func testWideVs(t *testing.T, name, thread string, c engineCase, ops []string) {
	t.Helper()
	sim := name
	d := c.prob.Field.Dim
	if ops == nil {
		ops = []string{"solve", "record", "loss", "grad"}
	}
	compareEngines(t, sim, c, caseOpts{ops: ops})
	var err error
	for _, x := range []struct {
		op, want string
	}{{"solve", "wide"}, {"record", "wide"}, {"grad", "wide"}, {"stepped", "thread"}} {
		if !slices.Contains(ops, x.op) && x.op != "stepped" {
			continue
		}
		var tr Trace
		ctx := WithTrace(t.Context(), &tr)
		sv := c.solver(t, sim)
		p := c.prob
		if x.op == "stepped" {
			set := c.set
			set.Engine, set.Saves = sim, ode.SaveStep
			if sv, err = ode.NewSolver(c.prob.Field, &set); err != nil {
				t.Fatal(err)
			}
			p.SaveAt = []float64{0.25}
		}
		switch x.op {
		case "solve", "stepped":
			_, err = sv.SolveContext(ctx, &p)
		case "record":
			_, _, err = sv.RecordContext(ctx, &p)
		case "grad":
			_, err = sv.GradContext(ctx, nil, &p, c.loss, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.Stats().Layout; got != x.want {
			t.Errorf("d = %d, %s: trace layout %q, want %q", d, x.op, got, x.want)
		}
	}
	if slices.Contains(ops, "grad") {
		wideAgainst(t, thread, name, c)
	}
}

// wideAgainstThread compares the gradient with the record of case c on
// engine name in the wide layout with the thread layout's: the same
// steps, and the loss and gradients within 1e-10 relative (closeRows'
// measure): the wide layout sums over the components in another order,
// and Lorenz-96 amplifies the rounding (on a simulated warp, to t = 0.5:
// dL/dy0 within 2.1e-12 at d = 64 and 70, 2.4e-11 at d = 256, dL/dp
// within 1.5e-14). It logs the largest differences.
func wideAgainstThread(t *testing.T, name string, c engineCase) {
	t.Helper()
	wideAgainst(t, tuned(t, name, Tuning{Layout: LayoutThread}), name, c)
}

// wideAgainst is wideAgainstThread with the engines named: thread (the
// thread layout's) and wide (the wide layout's).
func wideAgainst(t *testing.T, threadEngine, wideEngine string, c engineCase) {
	t.Helper()
	p := c.prob
	var grads [2]*ode.Gradient
	for k, engine := range []string{threadEngine, wideEngine} {
		g, err := c.solver(t, engine).Grad(nil, &p, c.loss, nil)
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

// BenchmarkGPUWide times Lorenz-96 with Tsit5 (n = 4096, d = 64 and
// 256) in the wide layout against the thread layout, alternating the
// two engines' sub-benchmarks: kernel-ms is the trace's kernel time, ms/op
// the whole call's.
//
//   - solve: the forward solve, rtol 1e-6, t ∈ [0, 2] (lorenz96Case's
//     ensemble);
//   - grad: the gradient with the record (Solver.Grad with a nil mesh) of
//     the large-state suite's case (bench/large.go: problems.Lorenz96's
//     ensemble, F = linspace(7, 9), t ∈ [0, 1], rtol 1e-6, atol 1e-9,
//     loss Σ‖y(T)‖²), whose thread-layout kernels took 12.5 ms (d = 64)
//     and 141.8 ms (d = 256) on an H100 (bench/RESULTS.md).
func BenchmarkGPUWide(b *testing.B) {
	needGPUEngine(b)
	engines := []struct {
		name   string
		engine string
	}{{"thread", tuned(b, "cuda", Tuning{Layout: LayoutThread})}, {"wide", "cuda"}}
	for _, op := range []string{"solve", "grad"} {
		for _, d := range []int{64, 256} {
			c := lorenz96Case(4096, d, ode.Tsit5)
			c.prob.SaveAt, c.prob.T1 = nil, 2
			if op == "grad" {
				c = wideBenchGradCase(4096, d)
			}
			for _, e := range engines {
				b.Run(fmt.Sprintf("%s/d=%d/%s", op, d, e.name), func(b *testing.B) { benchWide(b, c, op, e.engine, e.name) })
			}
		}
	}
	// Rosenbrock methods (the factor of W in the warp's shared memory):
	// the gradient with the record of Pollution (d = 20, n = 4096) and the
	// Brusselator (d = 64, n = 1024) with Rodas5P, t ∈ [0, 0.5].
	for _, rc := range []struct {
		name string
		n    int
	}{{"pollution", 4096}, {"brusselator", 1024}} {
		c := wideRosBenchCase(b, rc.name, rc.n)
		for _, e := range []struct{ name, engine string }{{"thread", engines[0].engine}, {"wide", "cuda"}} {
			b.Run(fmt.Sprintf("grad/%s-Rodas5P/%s", rc.name, e.name), func(b *testing.B) { benchWide(b, c, "grad", e.engine, e.name) })
		}
	}
}

// wideRosBenchCase is BenchmarkGPUWide's Rosenbrock case: problem name
// with Rodas5P, n trajectories (problemCase's rows), t ∈ [T0, T0 + 0.5],
// no save times, loss Σ‖y(T)‖².
func wideRosBenchCase(b *testing.B, name string, n int) engineCase {
	c := problemCase(b, name, ode.Rodas5P, n)
	c.prob.T1, c.prob.SaveAt = c.prob.T0+0.5, nil
	c.loss = ode.SumSquares()
	return c
}

// benchWide times op ("solve" or "grad") of case c on engine, whose
// layout must be layout: kernel-ms is the trace's kernel time, ms/op the
// whole call's, copy-ms its copies, stage-ms and scatter-ms its host work
// before and after the batch (TraceStats.Stage, Scatter).
func benchWide(b *testing.B, c engineCase, op, engine, layout string) {
	if err := benchLayout(b, c, op, engine, layout); err != nil {
		b.Fatal(err)
	}
}

// benchLayout is benchWide, returning an error, before it times anything,
// where the warm-up call runs in another layout than layout.
func benchLayout(b *testing.B, c engineCase, op, engine, layout string) error {
	set := c.set
	set.Engine = engine
	sv, err := ode.NewSolver(c.prob.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	var sol ode.Solution
	var g ode.Gradient
	var tr Trace
	ctx := WithTrace(b.Context(), &tr)
	call := func() error {
		if op == "grad" {
			_, err := sv.GradContext(ctx, &g, &c.prob, c.loss, nil)
			return err
		}
		_, err := sv.SolveToContext(ctx, &sol, &c.prob)
		return err
	}
	if err := call(); err != nil { // warm: the kernel
		b.Fatal(err)
	}
	if got := tr.Stats().Layout; got != layout {
		return fmt.Errorf("%s ran in the %s layout, not %s", c.name, got, layout)
	}
	tr.Reset()
	b.ResetTimer()
	for range b.N {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	st := tr.Stats()
	b.ReportMetric(float64(st.Kernel)/1e6/float64(b.N), "kernel-ms/op")
	b.ReportMetric(float64(st.Transfer)/1e6/float64(b.N), "copy-ms/op")
	b.ReportMetric(float64(st.Upload+st.Download)/1e6/float64(b.N), "MB/op")
	b.ReportMetric(float64(st.Stage)/1e6/float64(b.N), "stage-ms/op")
	b.ReportMetric(float64(st.Scatter)/1e6/float64(b.N), "scatter-ms/op")
	return nil
}

// wideBenchGradCase is the large-state suite's Lorenz-96 gradient case
// (bench/large.go) with n trajectories of d components.
func wideBenchGradCase(n, d int) engineCase {
	pr := problems.Lorenz96(d)
	y0, p := pr.Ensemble(n)
	problems.LinSpace(p, 7, 9)
	return engineCase{
		name: fmt.Sprintf("lorenz96-%d-grad", d),
		prob: ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, T0: pr.T0, T1: pr.T1},
		set:  ode.Settings{Method: ode.Tsit5, RelTol: 1e-6, AbsTol: 1e-9},
		loss: ode.SumSquares(),
		tol:  1e-10,
	}
}

// TestWideGradSource checks the form of a wide gradient kernel
// (Lorenz-96 with shared parameters, Tsit5, d = 64 and 256, without save
// times and with): its reverse steps' component loops all split over the
// lanes (the field VJP's with windows), their sums over the components
// across the lanes, no local array of d or more reals (a sum's GS_WSUMS
// partial sums: one on a warp) in the reverse
// steps or the driver, and a warp's shared memory as the layout's
// formula states: the forward loop's, or 2 + 2d + 4np + 2ns reals (md
// more with save times, m = DenseTerms) for the reverse steps' inputs and
// outputs (their λ' in the lanes' own rows, not shared), the
// trajectory's gp and shared gradient's sum, plus the steps' scratch,
// whichever is larger.
func TestWideGradSource(t *testing.T) {
	t.Parallel()
	for _, saves := range []bool{false, true} {
		for _, d := range []int{64, 256} {
			c := wideSharedCase(4, d)
			if saves {
				c = wideSavesCase(4, d)
			}
			wideGradSource(t, c, saves)
		}
	}
}

// wideGradSource checks the wide gradient kernel of case c (see
// TestWideGradSource).
func wideGradSource(t *testing.T, c engineCase, saves bool) {
	d := c.prob.Field.Dim
	j := jobOf(t, c, ode.OpGrad)
	pl := j.Plan
	sp, err := kernelgen.NewStepPrograms(pl)
	if err != nil {
		t.Fatal(err)
	}
	v := kernelgen.ConfigOf(j)
	if !kernelgen.WideAllowed(v, pl, Float64) {
		t.Fatalf("%s d = %d: the wide layout refuses %s", c.name, d, v.Key())
	}
	v.Wide = true
	src, info, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`GS_FUNC void (\w+_rev_\w+)\(`).FindAllStringSubmatch(src, -1)
	if want := 1 + kernelgen.B2i(saves); len(names) != want {
		t.Fatalf("%s d = %d: %d wide reverse steps in the source, want %d: %q", c.name, d, len(names), want, regexp.MustCompile(`GS_FUNC void \w+`).FindAllString(src, -1))
	}
	texts := map[string]string{}
	for _, m := range names {
		_, rev, _ := strings.Cut(src, m[0])
		rev, _, _ = strings.Cut(rev, "\n}\n")
		texts[m[1]] = rev
		split := strings.Count(rev, "for (int gs_c = gs_lane; gs_c < ") + strings.Count(rev, "for (int gs_c0 = gs_lane; gs_c0 < ")
		windows := strings.Count(rev, ", a window of ")
		seq := strings.Count(rev, "sequential in every lane")
		sums := strings.Count(rev, "gs_wide_sums(")
		if split < 20 || windows < 7 || seq != 0 || sums < 7 {
			t.Errorf("%s d = %d: %s: %d loops split over the lanes (%d with windows), %d sequential, %d sums across the lanes; want ≥ 20 (≥ 7), 0, ≥ 7",
				c.name, d, m[1], split, windows, seq, sums)
		}
	}
	// Local arrays of d or more reals, in the reverse steps and the
	// driver (gs_body, gs_wide_backward).
	_, texts["driver"], _ = strings.Cut(src, "GS_DEVICE void gs_wide_backward(")
	for what, text := range texts {
		for _, a := range regexp.MustCompile(`gs_real \w+\[(\w+)\]`).FindAllStringSubmatch(text, -1) {
			if n, err := strconv.Atoi(a[1]); err != nil && a[1] != "GS_NSTATE" && a[1] != "GS_W_LEN" && a[1] != "GS_WSUMS" || err == nil && n >= d {
				t.Errorf("%s d = %d: %s: a local array %s", c.name, d, what, a[0])
			}
		}
	}
	if strings.Contains(src, "gs_rev_out") || strings.Contains(src, "gs_drev_out") {
		t.Errorf("%s d = %d: the source has the thread layout's reverse steps", c.name, d)
	}
	per, err := kernelgen.WideSharedPerWarp(pl, true, saves)
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := kernelgen.WideSharedPerWarp(pl, false, saves)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel's record runs the stability probe (v.Probe), whose
	// vector the forward loop keeps: the measure with it (per above is
	// the layout's without, for the reverse scratch below).
	withProbe, err := sp.WideSharedPerWarpFor(kernelgen.Config{Grad: true, Saves: kernelgen.B2i(saves), Probe: v.Probe})
	if err != nil {
		t.Fatal(err)
	}
	if withProbe != info.WideShared {
		t.Errorf("%s d = %d: WideSharedPerWarpFor (Probe %v) %d, the kernel's %d", c.name, d, v.Probe, withProbe, info.WideShared)
	}
	// The reverse steps write λ' into the lanes' own rows
	// (kernelgen's wideLayout.PrivOut), not the warp's shared memory.
	if !strings.Contains(src, ", gs_real* gs_po) {") || !strings.Contains(src, "lamo[c / GS_WSTRIDE]") {
		t.Errorf("%s d = %d: the reverse steps write lambda' into shared memory, not the lanes' own rows", c.name, d)
	}
	np, ns := pl.Params, pl.Shared
	fixed := 8 * (2 + 2*d + 4*np + 2*ns)
	if saves {
		fixed += 8 * pl.DenseTerms * d
	}
	revScratch := per - fixed
	// Tsit5's reverse steps keep their stages' inputs and some of the
	// field's intermediate products for the VJP (the others recomputed
	// where they are read): 14 d-long arrays live at once at most, 18
	// with the dense step's reverse (27 and 32 when every one was kept).
	if lim := 8 * (14 + 4*kernelgen.B2i(saves)) * d; per > fwd && (revScratch <= 0 || revScratch > lim) {
		t.Errorf("%s d = %d: reverse scratch %d bytes, want in (0, %d]", c.name, d, revScratch, lim)
	}
	_, block, shmem := kernelgen.WideLaunch(4096, kernelgen.LaneWidth, per, 227<<10)
	t.Logf("%s d = %d: %d bytes of source, %d bytes of shared memory per warp (forward %d; reverse scratch %d = %.1fd reals); on an H100 blocks of %d warps, %d bytes, %d warps per multiprocessor",
		c.name, d, len(src), per, fwd, revScratch, float64(revScratch)/8/float64(d), block/32, shmem, block/32*((228<<10)/(shmem+1024)))
	if per > 227<<10 {
		t.Errorf("%s d = %d: %d bytes of shared memory per warp, more than an H100's 227 KiB", c.name, d, per)
	}
}

// TestHostWideStopStiff runs a gradient with the record in the wide
// layout on a simulated warp where half the trajectories are stiff
// (Lorenz-96, d = 64, with a per-trajectory damping a: y_i' = (y_{i+1} −
// y_{i−2})·y_{i−1} − a·y_i + F, a = 1 or 5,000): the stiff ones stop as
// stiff (Job.StopOnStiff) at the CPU engine's steps, the others' gradients
// are the CPU engine's (GradPartial), and Grad refuses the ensemble.
func TestHostWideStopStiff(t *testing.T) {
	needHost(t)
	t.Parallel()
	const d, n = 64, 4
	idx := func(i int) int { return (i + d) % d }
	c := wideCase(n, d)
	c.name = "lorenz96-damped"
	c.prob.Field = ode.Field{Name: "lorenz96-damped-64", Dim: d, Params: 2,
		F: func(_ tape.V, y, p []tape.V) []tape.V {
			dy := make([]tape.V, d)
			for i := range dy {
				dy[i] = y[idx(i+1)].Sub(y[idx(i-2)]).Mul(y[idx(i-1)]).Sub(p[1].Mul(y[i])).Add(p[0])
			}
			return dy
		}}
	p := make([]float64, 2*n)
	for i := range n {
		p[2*i], p[2*i+1] = 8, 1
		if i%2 == 1 {
			p[2*i+1] = 5000
		}
	}
	c.prob.P = p
	wide := "cuda-host-sim"
	type run struct {
		g     *ode.Gradient
		fails []*ode.TrajectoryError
		err   error
	}
	var runs [2]run
	for k, engine := range []string{"cpu", wide} {
		sv := c.solver(t, engine)
		var tr Trace
		g, fails, err := sv.GradPartial(WithTrace(t.Context(), &tr), nil, &c.prob, c.loss, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", engine, err)
		}
		if engine == wide && tr.Stats().Layout != "wide" {
			t.Errorf("trace layout %q, want wide", tr.Stats().Layout)
		}
		_, gerr := sv.Grad(nil, &c.prob, c.loss, nil)
		runs[k] = run{g, fails, gerr}
	}
	want, got := runs[0], runs[1]
	if len(want.fails) != n/2 || len(got.fails) != len(want.fails) {
		t.Fatalf("failed trajectories: CPU %d, wide %d; want %d (the test checks nothing otherwise)", len(want.fails), len(got.fails), n/2)
	}
	skip := map[int]bool{}
	for k, w := range want.fails {
		g := got.fails[k]
		skip[w.Index] = true
		if w.Status != ode.Stiff || w.Index%2 != 1 {
			t.Fatalf("CPU trajectory %d: status %v; want the damped ones stopped as stiff (the test checks nothing otherwise)", w.Index, w.Status)
		}
		if g.Index != w.Index || g.Status != w.Status || g.Accepted != w.Accepted || g.Rejected != w.Rejected {
			t.Errorf("trajectory %d: wide %v after %d+%d steps; CPU %v after %d+%d", w.Index, g.Status, g.Accepted, g.Rejected, w.Status, w.Accepted, w.Rejected)
		}
	}
	closeRows(t, "lorenz96-damped dL/dY0", got.g.Y0, want.g.Y0, d, c.tol, skip)
	closeRows(t, "lorenz96-damped dL/dP", got.g.P, want.g.P, 2, c.tol, skip)
	if got.err == nil || want.err == nil || !strings.Contains(got.err.Error(), "stiff") {
		t.Errorf("Grad: wide %v, CPU %v; want both refused as stiff", got.err, want.err)
	}
}

// TestWideRowMajor checks that the engine's wide kernels keep y0, p, y,
// gy0 and gp row-major on the device (kernelgen.Config.RowMajor, set
// with Wide by chooseLayout): the configuration the executor chooses for
// a Lorenz-96 gradient (d = 64), and its source, whose loads and stores
// of those arrays go through GS_WAT's row-major form (the same kernel
// without RowMajor, component-major), while a kernel the thread layout
// runs is refused the flag.
func TestWideRowMajor(t *testing.T) {
	c := wideSharedCase(4, 64)
	j := jobOf(t, c, ode.OpGrad)
	ex := newExecutor(hostSim.be, j.Plan, Float64, "row-major-test", Tuning{})
	v := ex.variant(j)
	if !v.Wide || !v.RowMajor {
		t.Fatalf("the executor's gradient kernel: Wide %t, RowMajor %t; want both", v.Wide, v.RowMajor)
	}
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	const rows, cols = "#define GS_WAT(c, w, i, n) ((long long)(i) * (w) + (c))", "#define GS_WAT(c, w, i, n) ((long long)(c) * (n) + (i))"
	for _, rm := range []bool{true, false} {
		v.RowMajor = rm
		src, _, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
		if err != nil {
			t.Fatal(err)
		}
		want, not := rows, cols
		if !rm {
			want, not = cols, rows
		}
		if !strings.Contains(src, want) || strings.Contains(src, not) {
			t.Errorf("RowMajor %t: the source lacks %q or has %q", rm, want, not)
		}
		for _, use := range []string{"= a.y0[GS_WAT(c, GS_D, i, n)]", "= a.p[GS_WAT(c, GS_NP, i, n)]", "a.y[GS_WAT(c, GS_D, i, n)] = y[c]",
			"a.gy0[GS_WAT(c, GS_D, i, n)] = lam[c]", "a.gp[GS_WAT(c, GS_NP, i, n)] = gp[c]"} {
			if !strings.Contains(src, use) {
				t.Errorf("RowMajor %t: the source lacks %q", rm, use)
			}
		}
		if regexp.MustCompile(`a\.(y0|p|y|gy0|gp)\[\(long long\)c \* n \+ i\]`).MatchString(src) {
			t.Errorf("RowMajor %t: the source indexes a per-trajectory array component-major itself", rm)
		}
	}
	v.Wide, v.RowMajor = false, true
	if _, _, err := kernelgen.KernelSource(sp, v, j.Loss, Float64); err == nil {
		t.Error("a thread layout kernel with RowMajor: no error")
	}
}

// TestHostWideRowMajorPaths runs the wide layout's gradient with the
// record (Lorenz-96 with shared parameters, d = 64, on a simulated warp)
// through the host paths that fill and scatter its row-major arrays
// other than a first pass's runs of consecutive rows, against the CPU
// engine (compareEngines): reruns of the trajectories whose record
// overflowed (Tuning.firstRows: launches of scattered trajectories, rows
// copied one by one) with the general loops (Tuning.generic), n = 9
// (not a multiple of 32); and y0 and p given as one row each, broadcast
// on the device (Tuning.bcastSeed 1, n = 17: one seed row copied over
// the rest of the row-major array).
func TestHostWideRowMajorPaths(t *testing.T) {
	needHost(t)
	t.Parallel()
	const d = 64
	c := wideSharedCase(9, d)
	compareEngines(t, tuned(t, "cuda-host-sim", Tuning{firstRows: 2, generic: true}), c, caseOpts{ops: []string{"grad"}})
	b := wideSharedCase(17, d)
	row, prow := b.prob.Y0[:d], b.prob.P[:b.prob.Field.Params]
	for i := range b.prob.N {
		copy(b.prob.Y0[i*d:], row)
		copy(b.prob.P[i*len(prow):], prow)
	}
	eng := tuned(t, "cuda-host-sim", Tuning{bcastSeed: 1})
	compareEngines(t, eng, b, caseOpts{ops: []string{"grad"}})
	// The same rows given once, broadcast: the per-trajectory rows' results
	// bit for bit.
	want, err := b.solver(t, eng).Grad(nil, &b.prob, b.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	one := b.prob
	one.Y0, one.P = slices.Clone(row), slices.Clone(prow)
	var tr Trace
	got, err := b.solver(t, eng).GradContext(WithTrace(t.Context(), &tr), nil, &one, b.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := tr.Stats().Layout; l != "wide" {
		t.Errorf("broadcast: trace layout %q, want wide", l)
	}
	if !slices.Equal(got.Y0, want.Y0) || !slices.Equal(got.P, want.P) || !slices.Equal(got.Shared, want.Shared) || got.Loss != want.Loss {
		t.Errorf("y0 and p broadcast from one row: the gradient differs from the per-trajectory rows' (loss %v, want %v)", got.Loss, want.Loss)
	}
}

// BenchmarkWideHostWork measures the host's work in a whole Solver.Grad
// call in the wide layout (wideCase: Lorenz-96 with Tsit5, n = 4096, d =
// 64 and 256, the Gradient passed back) on the backend whose copies and
// kernels cost nothing (hostWork): the staging of y0 and p and the
// scatter of y and dL/dy0 that the wide layout's row-major arrays
// (kernelgen.Config.RowMajor) make straight row copies.
//
//	go test ./cuda -run XXX -bench WideHostWork -benchtime 200x
func BenchmarkWideHostWork(b *testing.B) {
	for _, d := range []int{64, 256} {
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) {
			c := wideCase(4096, d)
			set := c.set
			set.Engine = hostWork.name
			sv, err := ode.NewSolver(c.prob.Field, &set)
			if err != nil {
				b.Fatal(err)
			}
			var g ode.Gradient
			var tr Trace
			if _, err := sv.GradContext(WithTrace(b.Context(), &tr), &g, &c.prob, c.loss, nil); err != nil { // warm: the kernel's source
				b.Fatal(err)
			}
			if l := tr.Stats().Layout; l != "wide" {
				b.Fatalf("layout %q, want wide", l)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := sv.Grad(&g, &c.prob, c.loss, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
