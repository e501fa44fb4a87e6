package cuda

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// wideWarpsResults returns the results of op (solve or grad) of case c on
// engine (wideResults') and the trajectories' accepted and rejected
// steps, in the wide layout.
func wideWarpsResults(t *testing.T, c engineCase, engine, op string) ([]float64, ode.Stats) {
	t.Helper()
	var tr Trace
	ctx := WithTrace(t.Context(), &tr)
	sv := c.solver(t, engine)
	p := c.prob
	var got []float64
	var st ode.Stats
	switch op {
	case "solve":
		sol, err := sv.SolveContext(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(append(append([]float64{}, sol.Y...), sol.Ys...), sol.T...)
		st = sol.Stats
	case "grad":
		g, err := sv.GradContext(ctx, nil, &p, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(append(append([]float64{g.Loss}, g.Y0...), g.P...), g.Shared...)
		hostMesh(t, g.Mesh)
		st = g.Mesh.Stats
	default:
		t.Fatalf("wideWarpsResults: operation %q", op)
	}
	if l := tr.Stats().Layout; l != "wide" {
		t.Fatalf("%s on %s: the %s layout, not wide", op, engine, l)
	}
	return got, st
}

// TestHostWideWarps runs the wide layout with a trajectory on several
// warps (Tuning.wideWarps, kernelgen.Config.WideTrajWarps: a block of 2
// or 4 warps a trajectory, the component loops strided by 64 or 128
// threads, the block's barriers for __syncwarp(), the carried sums'
// butterflies finished across the warps through the block's exchange
// slots) on a simulated block (kerneltest.WarpSim: 64 or 128 threads,
// each warp's shuffles its own), three trajectories (every component of
// y0 its own: sums of equal terms would hide the order), forward (solve)
// and gradient with the record (grad), against a warp per trajectory:
// the same accepted and rejected steps of every trajectory, and every
// result within 1e-12 relative (of max(|x|, 1e-3 × the largest): the
// lanes' partial sums are added in another order, so the bits may
// differ). Cases: Lorenz-96 with d = 64 and 256 (Tsit5, its loss of the
// final state) and Lorenz-96 with two shared parameters and five save
// times (wideWarpsSaves: the dense step forward and reverse, the shared
// gradient's sums), all to t = 0.25; on 2 warps also with every array in
// shared memory (Tuning.NoWidePrivate), with the replicated scalars
// past 4 in shared slots (WideScalars 4), and (d = 256) with the reverse
// steps' y from the record and the returned arrays at their outputs
// (wideRecY, wideOutPlace). It fails if the layout does not give the kernel the
// warps asked (chooseLayout) or its source does not define
// GS_WIDE_WARPS, or where the simulated block's collectives mix its
// warps (a deadlock or other results).
func TestHostWideWarps(t *testing.T) {
	needHost(t)
	t.Parallel()
	l96 := func(d int) engineCase {
		c := wideWarpsSpread(wideCase(3, d))
		c.prob.T1 = 0.25
		return c
	}
	saves := wideWarpsSaves(3)
	cases := []wideWarpsCase{{c: l96(64), warps: 2}, {c: l96(64), warps: 4}, {c: saves, warps: 2}}
	if !testing.Short() {
		cases = append(cases, wideWarpsCase{c: l96(256), warps: 2}, wideWarpsCase{c: l96(256), warps: 4}, wideWarpsCase{c: saves, warps: 4},
			// Every array in shared memory (the copies' layout), and the
			// replicated scalars past 4 in the trajectory's slots
			// (widespill.go: slots shared by the block's warps).
			wideWarpsCase{c: l96(64), warps: 2, tun: Tuning{NoWidePrivate: true}}, wideWarpsCase{c: saves, warps: 2, tun: Tuning{WideScalars: 4}},
			// The reverse steps' y from the record and the returned
			// arrays at their outputs (BenchmarkGPUWideLanes'
			// warps=2-recy-outplace).
			wideWarpsCase{c: l96(256), warps: 2, tun: Tuning{wideRecY: true, wideOutPlace: true}})
	}
	testWideWarps(t, "cuda-host-sim", device{sharedLimit: maxShared}, cases)
}

// TestGPUWideWarps is TestHostWideWarps on the device, 1,000
// trajectories to t = 0.25 (Lorenz-96 with d = 64 and 256 on 2 and 4
// warps a trajectory; with shared parameters and save times, d = 64, on
// 2 and 4): the same steps of every trajectory as on a warp each, every
// result within 1e-12 relative (of max(|x|, 1e-3 × the largest); the
// shared gradient's atomics add in no fixed order either way). It skips
// without a GPU.
func TestGPUWideWarps(t *testing.T) {
	needGPUEngine(t)
	l96 := func(d int) engineCase {
		c := wideWarpsSpread(wideCase(1000, d))
		c.prob.T1 = 0.25
		return c
	}
	saves := wideWarpsSaves(1000)
	testWideWarps(t, "cuda", device{sms: 132, sharedLimit: 227 << 10}, []wideWarpsCase{
		{c: l96(64), warps: 2}, {c: l96(64), warps: 4}, {c: l96(256), warps: 2}, {c: l96(256), warps: 4}, {c: saves, warps: 2}, {c: saves, warps: 4},
		{c: l96(256), warps: 2, tun: Tuning{WideScalars: 4}},
	})
}

// wideWarpsCase is a case of testWideWarps: an ensemble and the warps a
// trajectory.
type wideWarpsCase struct {
	c     engineCase
	warps int
	// tun is the tuning of both kernels, but for their layout and warps.
	tun Tuning
}

// wideWarpsSpread returns c with every component of y0 its own
// (lorenz96Case's differ in one only, whose equal terms a sum adds
// exactly in any order).
func wideWarpsSpread(c engineCase) engineCase {
	d := c.prob.Field.Dim
	c.prob.Y0 = slices.Clone(c.prob.Y0)
	for k := range c.prob.Y0 {
		c.prob.Y0[k] += 0.5 * math.Sin(1.7*float64(k%d)+0.3*float64(k/d))
	}
	return c
}

// wideWarpsSaves is wideSavesCase with d = 64 and n trajectories to t =
// 0.25 (Lorenz-96's chaos amplifies the sums' rounding: to 0.5 its
// dL/dShared moved 1.1e-12 relative between the two orders), its save
// times at t0, inside steps, one twice and at T1, y0 spread
// (wideWarpsSpread).
func wideWarpsSaves(n int) engineCase {
	c := wideWarpsSpread(wideSavesCase(n, 64))
	c.prob.T1 = 0.25
	c.prob.SaveAt = []float64{0, 0.1, 0.2, 0.2, 0.25}
	return c
}

// testWideWarps runs the cases on engine (TestHostWideWarps,
// TestGPUWideWarps), whose layouts chooseLayout makes as on dev.
func testWideWarps(t *testing.T, engine string, dev device, cases []wideWarpsCase) {
	const relTol = 1e-12
	for _, x := range cases {
		name := fmt.Sprintf("%s-d=%d/warps=%d", x.c.name, x.c.prob.Field.Dim, x.warps)
		switch {
		case x.tun.NoWidePrivate:
			name += "-shared"
		case x.tun.WideScalars != 0:
			name += fmt.Sprintf("-scalars=%d", x.tun.WideScalars)
		case x.tun.wideRecY:
			name += "-recy-outplace"
		}
		t.Run(name, func(t *testing.T) {
			if engine != "cuda" {
				t.Parallel()
			}
			src := kernelSourceWith(t, x.c, ode.OpGrad, func(v *kernelgen.Config) {
				v.Wide, v.RowMajor, v.WideRows, v.WideTrajWarps = true, true, true, int8(x.warps)
			})
			if !strings.Contains(src, fmt.Sprintf("#define GS_WIDE_WARPS %d\n", x.warps)) {
				t.Fatalf("WideTrajWarps %d: the gradient kernel's source does not define GS_WIDE_WARPS", x.warps)
			}
			tun := x.tun
			tun.Layout, tun.wideWarps = LayoutWide, x.warps
			j := jobOf(t, x.c, ode.OpGrad)
			sp, err := kernelgen.NewStepPrograms(j.Plan)
			if err != nil {
				t.Fatal(err)
			}
			v := chooseLayout(kernelgen.ConfigOf(j), j.Plan, sp, layoutJob{n: x.c.prob.N}, Float64, false, dev, tun)
			if !v.Wide || v.WideWarpsOf() != x.warps {
				t.Fatalf("wideWarps %d: chooseLayout gives wide %v on %d warps a trajectory", x.warps, v.Wide, v.WideWarpsOf())
			}
			one := x.tun
			one.Layout, one.wideLanes, one.wideWarps = LayoutWide, -1, -1
			ref := tuned(t, engine, one)
			eng := tuned(t, engine, tun)
			for _, op := range []string{"solve", "grad"} {
				want, wst := wideWarpsResults(t, x.c, ref, op)
				got, gst := wideWarpsResults(t, x.c, eng, op)
				form := fmt.Sprintf("%d warps a trajectory", x.warps)
				if skip := compareCounts(t, op+", "+form+" against a warp", gst, wst, 0); len(skip) > 0 {
					continue
				}
				closeWideResults(t, op, form, "a warp", got, want, relTol)
			}
		})
	}
}

// TestWideWarpsOneSame checks that a trajectory on one warp is the wide
// layout as it was: kernelgen.Config.WideTrajWarps 0, 1 and values it
// does not take (3, 16, negative) give the default's source, byte for
// byte, with no trace of several warps (GS_WIDE_WARPS, GS_WX), for
// Lorenz-96's gradient and record kernels (d = 64 and 256) and the
// gradient with save times; 2 gives another source. (Session 53 also
// compared the default's sources of these kernels, of HIRES's on 8 lanes
// and of the blocked, record-y and bounded forms with those of the
// commit before it: the same bytes; docs/more-results.md.)
func TestWideWarpsOneSame(t *testing.T) {
	t.Parallel()
	base := func(v *kernelgen.Config) { v.Wide, v.RowMajor, v.WideRows = true, true, true }
	for _, c := range []engineCase{wideCase(5, 64), wideCase(5, 256), wideSavesCase(5, 64)} {
		for _, op := range []ode.Op{ode.OpGrad, ode.OpRecord} {
			def := kernelSourceWith(t, c, op, base)
			if strings.Contains(def, "GS_WIDE_WARPS") || strings.Contains(def, "GS_WX") {
				t.Errorf("%s d = %d %v: the default's source names GS_WIDE_WARPS or GS_WX", c.name, c.prob.Field.Dim, op)
			}
			for _, w := range []int8{1, 3, 16, -2} {
				src := kernelSourceWith(t, c, op, func(v *kernelgen.Config) { base(v); v.WideTrajWarps = w })
				if src != def {
					t.Errorf("%s d = %d %v: WideTrajWarps %d changes the source", c.name, c.prob.Field.Dim, op, w)
				}
			}
			if src := kernelSourceWith(t, c, op, func(v *kernelgen.Config) { base(v); v.WideTrajWarps = 2 }); src == def {
				t.Errorf("%s d = %d %v: WideTrajWarps 2 gives the default's source", c.name, c.prob.Field.Dim, op)
			}
		}
	}
}

// TestWideWarpsLayout checks chooseLayout's part of Tuning.wideWarps: a
// power of two from 2 to kernelgen.WideMaxTrajWarps gives an explicit
// method's wide kernel that many warps a trajectory (WideLanes then
// 32), its launch bounds at most wideTrajMaxWarps warps' worth of blocks
// (as many as the shared memory runs); the default, 1, negative values,
// values it does not take, a Rosenbrock method (HIRES) and the blocked
// element split keep a warp or fewer lanes; and kernelgen refuses a
// Rosenbrock method's kernel on several warps with an error that names
// them.
func TestWideWarpsLayout(t *testing.T) {
	h100 := device{sms: 132, sharedLimit: 227 << 10}
	l96 := wideBenchGradCase(4096, 256)
	hires := layoutFillCase(t, "hires", 4096)
	for _, x := range []struct {
		c    engineCase
		tun  Tuning
		want int
	}{
		{l96, Tuning{}, 1},
		{l96, Tuning{wideWarps: 1}, 1},
		{l96, Tuning{wideWarps: -1}, 1},
		{l96, Tuning{wideWarps: 3}, 1},
		{l96, Tuning{wideWarps: 16}, 1},
		{l96, Tuning{wideWarps: 2}, 2},
		{l96, Tuning{wideWarps: 4}, 4},
		{l96, Tuning{wideWarps: 8}, 8},
		{l96, Tuning{wideWarps: 2, wideBlocked: true}, 1},
		{hires, Tuning{wideWarps: 2}, 1},
	} {
		j := jobOf(t, x.c, ode.OpGrad)
		sp, err := kernelgen.NewStepPrograms(j.Plan)
		if err != nil {
			t.Fatal(err)
		}
		v := chooseLayout(kernelgen.ConfigOf(j), j.Plan, sp, layoutJob{n: x.c.prob.N}, Float64, false, h100, x.tun)
		if !v.Wide {
			t.Fatalf("%s %+v: not wide", x.c.name, x.tun)
		}
		if got := v.WideWarpsOf(); got != x.want {
			t.Errorf("%s wideWarps %d: %d warps a trajectory, want %d", x.c.name, x.tun.wideWarps, got, x.want)
		}
		if x.want > 1 {
			if v.WideLanesOf() != kernelgen.LaneWidth {
				t.Errorf("%s wideWarps %d: %d lanes", x.c.name, x.tun.wideWarps, v.WideLanesOf())
			}
			per, err := sp.WideSharedPerWarpFor(kernelgen.Config{Grad: true})
			if err != nil {
				t.Fatal(err)
			}
			per += 8 * kernelgen.WideExchange(x.want)
			on := kernelgen.WideTrajOccupancy(x.want, per, h100.sharedLimit)
			if want := min(on, wideTrajMaxWarps/x.want); v.WideMinBlocks != want {
				t.Errorf("%s wideWarps %d: bounds of %d blocks, want %d (%d trajectories a multiprocessor by shared memory, %d B each)", x.c.name, x.want, v.WideMinBlocks, want, on, per)
			}
			t.Logf("%s on %d warps: %d B a trajectory, %d a multiprocessor by shared memory, bounds %d blocks (%d registers)", x.c.name, x.want, per, on, v.WideMinBlocks, kernelgen.BoundsRegs(x.want*kernelgen.LaneWidth, v.WideMinBlocks))
		}
	}
	// kernelgen refuses what chooseLayout never asks.
	j := jobOf(t, hires, ode.OpGrad)
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	v := kernelgen.ConfigOf(j)
	v.Wide, v.RowMajor, v.WideTrajWarps = true, true, 2
	if _, _, err := kernelgen.KernelSource(sp, v, j.Loss, Float64); err == nil || !strings.Contains(err.Error(), "several warps") {
		t.Errorf("HIRES (Rodas5P) on 2 warps a trajectory: error %v, want one that names several warps", err)
	}
}
