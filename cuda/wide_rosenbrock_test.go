package cuda

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// wideRosCase is the built-in problem name with method m, n trajectories
// (problemCase: rows spread over ±10%), to t1, with one save time at a
// third of the way (saves) or none and a loss of the final state only.
func wideRosCase(t *testing.T, name string, m ode.Method, n int, t1 float64, saves bool) engineCase {
	t.Helper()
	c := problemCase(t, name, m, n)
	c.prob.T1 = t1
	c.prob.SaveAt = []float64{c.prob.T0 + (t1-c.prob.T0)/3}
	d := c.prob.Field.Dim
	if !saves {
		c.name += "-nosaves"
		c.prob.SaveAt = nil
		c.loss = ode.Loss{Name: "problem-final", F: func(y, _, _ []tape.V) tape.V {
			l := y[0].Mul(y[d-1])
			for k := range y {
				l = l.Add(y[k].Square().MulC(float64(k + 1)))
			}
			return l
		}}
	}
	return c
}

// TestHostWideRosenbrock runs Rosenbrock methods in the wide layout (the
// factor of W in the warp's shared memory: kernelgen's widelu.go) on a
// simulated warp, two trajectories each: Pollution (d = 20; wide by default
// from kernelgen.WideMinDimFactor) to t = 0.2 with Rosenbrock23 and
// Rodas5P (with a save time: solve, record and gradient; without: the
// gradient), Robertson (d = 3, the explicit factor of W and its VJP's d²
// terms; the wide layout forced: LayoutWide) to t = 10 with
// Rodas5P and Rosenbrock23 likewise, and HIRES (d = 8, forced likewise)
// to t = 5 with Rodas5P (the gradient without a save time: 170 s; with
// one: solve, record and gradient). By default only Pollution and
// Robertson with Rosenbrock23; with -short Pollution with Rosenbrock23
// only; with -long (or GRADSOLVE_LONG_TESTS=1) every case and the
// Brusselator (d = 64) with Rodas5P too. See testWideRos for what is
// compared. The long run takes about 12 minutes on two shared cores (the simulated warp's 32 threads meet at every
// __syncwarp(): a solve of Pollution's W takes 40).
func TestHostWideRosenbrock(t *testing.T) {
	needHost(t)
	t.Parallel()
	type tc struct {
		name   string
		m      ode.Method
		n      int
		t1     float64
		saves  bool
		engine string
		ops    []string
	}
	small := tuned(t, "cuda-host-sim", Tuning{Layout: LayoutWide})
	stiff := "cuda-host-sim"
	cases := []tc{
		{"pollution", ode.Rosenbrock23, 2, 0.2, false, stiff, []string{"grad"}},
		{"pollution", ode.Rodas5P, 2, 0.2, true, stiff, nil},
		{"pollution", ode.Rodas5P, 2, 0.2, false, stiff, []string{"grad"}},
		{"robertson", ode.Rodas5P, 2, 10, true, small, nil},
		{"robertson", ode.Rosenbrock23, 2, 10, false, small, []string{"grad"}},
		{"hires", ode.Rodas5P, 2, 5, false, small, []string{"grad"}},
		{"hires", ode.Rodas5P, 2, 5, true, small, nil},
	}
	switch {
	case longTests():
		cases = append(cases, tc{"brusselator", ode.Rodas5P, 2, 0.5, false, "cuda-host-sim-227k", []string{"grad"}})
	case testing.Short():
		cases = cases[:1]
	default:
		// The plain run (CI's): Pollution with Rosenbrock23 and Robertson
		// with Rosenbrock23 (the factor, its solves and their VJPs at d =
		// 20 and 3); Rodas5P's Pollution cases take minutes each on a
		// simulated warp.
		cases = []tc{cases[0], cases[4]}
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s-%s-saves=%t", c.name, c.m.Name(), c.saves), func(t *testing.T) {
			t.Parallel()
			testWideRos(t, c.engine, wideRosCase(t, c.name, c.m, c.n, c.t1, c.saves), c.ops)
		})
	}
}

// testWideRos runs case c (a Rosenbrock method) on engine, whose
// default for it is the wide layout: ops (nil: solve, record, grad), each
// in the wide layout (the trace says so), against the CPU engine. The
// step sizes of stiff problems carry their error estimates' rounding (the
// wide layout's solves subtract in another order, its sums run across
// the lanes; the thread layout's meshes part from the CPU's likewise,
// Pollution with Rodas5P by 3e-10 by t = 0.5): so the solve's and the
// record's states are compared with the CPU's to c.tol, the same step
// counts, with the step sizes logged where they part (compareMeshDrift);
// the gradient with the record on the CPU's and the thread layout's
// gradients on the wide layout's own mesh (wideOnMesh).
func testWideRos(t *testing.T, engine string, c engineCase, ops []string) {
	t.Helper()
	if ops == nil {
		ops = []string{"solve", "record", "grad"}
	}
	cpu, dev := c.solver(t, "cpu"), c.solver(t, engine)
	p := c.prob
	d := p.Field.Dim
	for _, op := range ops {
		var tr Trace
		ctx := WithTrace(t.Context(), &tr)
		what := c.name + " " + op
		switch op {
		case "solve":
			got, err := dev.SolveContext(ctx, &p)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			want, err := cpu.Solve(&p)
			if err != nil {
				t.Fatal(err)
			}
			compareSolutions(t, what, got, want, c.tol, 0)
		case "record":
			got, sol, err := dev.RecordContext(ctx, &p)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			want, wsol, err := cpu.Record(&p)
			if err != nil {
				t.Fatal(err)
			}
			skip := compareCounts(t, what, got.Stats, want.Stats, 0)
			compareMeshDrift(t, what, got, want, skip, true)
			closeRows(t, what+" Y", sol.Y, wsol.Y, d, c.tol, skip)
		case "grad":
			got, err := dev.GradContext(ctx, nil, &p, c.loss, nil)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			wideOnMesh(t, engine, c, got)
		default:
			t.Fatalf("testWideRos: op %q", op)
		}
		if got := tr.Stats().Layout; got != "wide" {
			t.Errorf("%s: trace layout %q, want wide", what, got)
		}
	}
}

// wideOnMesh checks the gradient with the record g of case c (the wide
// layout's, on engine): its mesh against the CPU's record (the same
// step counts, the step sizes within meshDeviations' bounds), and its
// final and saved states, loss and gradients against the CPU engine's
// gradient on g's mesh and the thread layout's on g's mesh (the same
// engine's backend, Tuning.Layout = LayoutThread): within c.tol relative
// (closeRows' measure) but for dL/dy0, which may also differ by a hundred
// times its own rounding sensitivity: the largest change of the CPU's dL/dy0
// (on the same mesh) when y0 moves by one ulp, up or down (Pollution's
// dL/dy0[15] with Rodas5P, where y[15] ≈ 1e-17, moves by 4e-6 relative
// so; the wide layout's forward states differ from the CPU's by such
// rounding). It logs the largest differences.
func wideOnMesh(t *testing.T, engine string, c engineCase, g *ode.Gradient) {
	t.Helper()
	base := engine // the engine that tuned engine is a tuning of
	if i := strings.IndexByte(engine, '/'); i >= 0 {
		base = engine[:i]
	}
	p := c.prob
	cpu := c.solver(t, "cpu")
	rec, _, err := cpu.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	what := c.name + " grad"
	skip := compareCounts(t, what, g.Mesh.Stats, rec.Stats, 0)
	parted := meshDeviations(t, what, g.Mesh, rec, skip)
	if len(skip)+len(parted) > 0 {
		t.Errorf("%s: %d of %d trajectories take other steps than on the CPU: %v", what, len(skip)+len(parted), p.N, parted)
	}
	want, err := cpu.Grad(nil, &p, c.loss, g.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	thread, err := c.solver(t, tuned(t, base, Tuning{Layout: LayoutThread})).Grad(nil, &p, c.loss, g.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	// A hundred times the spread (closeSpread allows ten times what it is
	// given): the wide layout's factorisation and solves sum in another
	// order than the thread layout's, which moves a component near 1e-17
	// (Pollution's y[15]) more than a one-ulp move of y0 does. On an H100
	// (session 37) six of 20,000 entries of Pollution's dL/dY0 with
	// Rodas5P, all its entry 15, differed from the CPU's and the thread
	// layout's by up to 29 times the spread (6.5e-6 relative), y and
	// dL/dp by at most 1.9e-15.
	spread := ulpSpread(t, cpu, c, g.Mesh, want)
	for i := range spread {
		spread[i] *= 10
	}
	d, np := p.Field.Dim, p.Field.Params
	for _, ref := range []struct {
		name string
		g    *ode.Gradient
	}{{"the CPU", want}, {"the thread layout", thread}} {
		w := fmt.Sprintf("%s, wide against %s on the wide mesh", c.name, ref.name)
		closeRows(t, w+" Y", g.Solution.Y, ref.g.Solution.Y, d, c.tol, nil)
		closeRows(t, w+" Ys", g.Solution.Ys, ref.g.Solution.Ys, d*len(p.SaveAt), c.tol, nil)
		closeRows(t, w+" dL/dP", g.P, ref.g.P, np, c.tol, nil)
		closeRows(t, w+" dL/dShared", g.Shared, ref.g.Shared, len(ref.g.Shared), c.tol, nil)
		closeRows(t, w+" loss", []float64{g.Loss}, []float64{ref.g.Loss}, 1, c.tol, nil)
		worst := closeSpread(t, w+" dL/dY0", g.Y0, ref.g.Y0, spread, d, c.tol)
		t.Logf("%s: largest relative differences y %.2g, dL/dy0 %.2g (%.2g of its bound), dL/dp %.2g, loss %.2g", w,
			largestRel(g.Solution.Y, ref.g.Solution.Y, d), largestRel(g.Y0, ref.g.Y0, d), worst, largestRel(g.P, ref.g.P, np),
			largestRel([]float64{g.Loss}, []float64{ref.g.Loss}, 1))
	}
}

// TestWideRosenbrockSource checks the form of the wide layout's
// Rosenbrock kernels (Pollution, d = 20, and the Brusselator, d = 64,
// with Rodas5P and Rosenbrock23; the gradient with the record and a save
// time, as the engine configures it): the layout allows them; the
// factor and the solves are the warp's in the sparse form (gs_wlus_*:
// Pollution's d ≤ 32, the Brusselator's thin band since session 48),
// none a thread's
// local tuple; a warp's shared memory holds at least the factor's
// kernelgen.WideFactorReals(d) reals; and an H100's 227 KiB fits a block.
func TestWideRosenbrockSource(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"pollution", "brusselator"} {
		for _, m := range []ode.Method{ode.Rodas5P, ode.Rosenbrock23} {
			c := wideRosCase(t, name, m, 4, 0.2, true)
			j := jobOf(t, c, ode.OpGrad)
			pl := j.Plan
			d := pl.Dim
			if !kernelgen.WideFactors(pl) {
				t.Fatalf("%s: WideFactors false", c.name)
			}
			v := kernelgen.ConfigOf(j)
			if !kernelgen.WideAllowed(v, pl, Float64) {
				t.Fatalf("%s: the wide layout refuses %s", c.name, v.Key())
			}
			sp, err := kernelgen.NewStepPrograms(pl)
			if err != nil {
				t.Fatal(err)
			}
			v.Wide, v.RowMajor = true, true
			src, info, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
			if err != nil {
				t.Fatal(err)
			}
			// Either form: dense (gs_wide_lu_*<d>) or, for d ≤
			// kernelgen.WideSparseMaxDim or a thin pattern (the
			// Brusselator's band), sparse (gs_wlus_*_<d>_<pattern>).
			count := func(dense, sparse string) int {
				return strings.Count(src, fmt.Sprintf("%s<%d>(t", dense, d)) + len(regexp.MustCompile(fmt.Sprintf(`%s_%d_[0-9a-f]+\(t`, sparse, d)).FindAllString(src, -1))
			}
			factors := count("gs_wide_lu_factor", "gs_wlus_factor")
			solves := count("gs_wide_lu_solve", "gs_wlus_solve")
			tsolves := count("gs_wide_lu_solve_t", "gs_wlus_solve_t")
			if sparse := strings.Contains(src, "gs_wlus_factor_"); !sparse {
				t.Errorf("%s: sparse factors %v at d = %d", c.name, sparse, d)
			}
			// Trial, DenseStep, Reverse and DenseStepReverse factor W once
			// each (Init takes no implicit step); the reverse steps solve
			// with Wᵀ too.
			if factors != 4 || solves == 0 || tsolves == 0 {
				t.Errorf("%s: %d wide factors, %d solves, %d transposed; want 4, some, some", c.name, factors, solves, tsolves)
			}
			for _, local := range []string{"gs_lu_factor<", "gs_lu_solve<", "gs_lu_solve_t<", "gs_lu_shift<"} {
				if n := strings.Count(src, "  "+local); n > 0 {
					t.Errorf("%s: %d calls of the thread layout's %s", c.name, n, local)
				}
			}
			if min := 8 * kernelgen.WideFactorReals(d); info.WideShared < min {
				t.Errorf("%s: %d bytes of shared memory per warp, less than the factor's %d", c.name, info.WideShared, min)
			}
			_, block, shmem := kernelgen.WideLaunch(4096, kernelgen.LaneWidth, info.WideShared, 227<<10)
			if shmem > 227<<10 || block < kernelgen.LaneWidth {
				t.Errorf("%s: a block of %d threads, %d bytes", c.name, block, shmem)
			}
			t.Logf("%s: %d bytes of source, %d of shared memory per warp (the factor %d), blocks of %d warps", c.name, len(src), info.WideShared, 8*kernelgen.WideFactorReals(d), block/kernelgen.LaneWidth)
		}
	}
}
