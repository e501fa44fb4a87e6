package cuda

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// The wide layout for jobs too small to fill the device with threads
// (kernelgen.WideFillMinDim, WideFillMinDimFactor; useWide) and forced at
// any state size (LayoutWide).

// h100 is an H100's multiprocessors and shared memory per block, for
// chooseLayout.
var h100 = device{sms: 132, sharedLimit: 227 << 10}

// TestWideMinDim checks wideMinDim, the smallest state chooseLayout runs
// in the wide layout by default: kernelgen.WideMinDim for an explicit
// method (Lorenz, Tsit5) and WideMinDimFactor for a Rosenbrock method
// (Robertson, Rodas5P) in a job that fills an H100 with threads (n =
// 132·LanesThreadFill), on a host backend (no multiprocessors) and with
// tile sums at any n; in a job that does not fill it, the fill thresholds
// where they are set (kernelgen's constants; Tuning.wideFill in place of
// them); none with NoWide, or NoWideStiff for the Rosenbrock method.
func TestWideMinDim(t *testing.T) {
	t.Parallel()
	explicit := jobOf(t, lorenzCase(4, 1e-6), ode.OpGrad).Plan
	stiff := jobOf(t, problemCase(t, "robertson", ode.Rodas5P, 4), ode.OpGrad).Plan
	if kernelgen.WideFactors(explicit) || !kernelgen.WideFactors(stiff) {
		t.Fatalf("WideFactors: Tsit5 %t, Rodas5P %t; want false, true", kernelgen.WideFactors(explicit), kernelgen.WideFactors(stiff))
	}
	// fillOr is the threshold of a job that does not fill the device with
	// kernelgen's fill threshold fill (0: off) and the default from.
	fillOr := func(from, fill int) int {
		if fill > 0 {
			return min(from, fill)
		}
		return from
	}
	full := h100.sms * kernelgen.LanesThreadFill
	for _, c := range []struct {
		name     string
		pl       *ode.Plan
		n, sms   int
		tileSums bool
		tun      Tuning
		want     int
	}{
		{"explicit, filled", explicit, full, h100.sms, false, Tuning{}, kernelgen.WideMinDim},
		{"explicit, not filled", explicit, full - 1, h100.sms, false, Tuning{}, fillOr(kernelgen.WideMinDim, kernelgen.WideFillMinDim)},
		{"explicit, not filled, wideFill 3", explicit, 4096, h100.sms, false, Tuning{wideFill: 3}, 3},
		{"explicit, filled, wideFill 3", explicit, 65536, h100.sms, false, Tuning{wideFill: 3}, kernelgen.WideMinDim},
		{"explicit, host backend, wideFill 3", explicit, 4096, 0, false, Tuning{wideFill: 3}, kernelgen.WideMinDim},
		{"explicit, tile sums, wideFill 3", explicit, 4096, h100.sms, true, Tuning{wideFill: 3}, kernelgen.WideMinDim},
		{"explicit, wideFill above the default", explicit, 4096, h100.sms, false, Tuning{wideFill: 100}, kernelgen.WideMinDim},
		{"explicit, NoWide", explicit, 4096, h100.sms, false, Tuning{NoWide: true, wideFill: 3}, 0},
		{"explicit, NoWideStiff", explicit, 4096, h100.sms, false, Tuning{NoWideStiff: true, wideFill: 3}, 3},
		{"stiff, filled", stiff, full, h100.sms, false, Tuning{}, kernelgen.WideMinDimFactor},
		{"stiff, not filled", stiff, 4096, h100.sms, false, Tuning{}, fillOr(kernelgen.WideMinDimFactor, kernelgen.WideFillMinDimFactor)},
		{"stiff, not filled, wideFill 3", stiff, 4096, h100.sms, false, Tuning{wideFill: 3}, 3},
		{"stiff, filled, wideFill 3", stiff, full, h100.sms, false, Tuning{wideFill: 3}, kernelgen.WideMinDimFactor},
		{"stiff, NoWideStiff", stiff, 4096, h100.sms, false, Tuning{NoWideStiff: true, wideFill: 3}, 0},
		{"stiff, NoWide", stiff, 4096, h100.sms, false, Tuning{NoWide: true}, 0},
	} {
		if got := wideMinDim(c.pl, c.n, c.tileSums, c.sms, c.tun); got != c.want {
			t.Errorf("%s (n = %d, %d SMs): wideMinDim %d, want %d", c.name, c.n, c.sms, got, c.want)
		}
	}
}

// TestChooseLayoutWide checks chooseLayout's wide layout below the
// default thresholds, on an H100 (h100), for the gradient with the record
// of Robertson (d = 3, Rodas5P), the neural Robertson problem (d = 3,
// Rodas5P, a network of 337 shared weights: lanes mode by default at n =
// 4096) and Lorenz (d = 3, Tsit5): LayoutWide runs them wide (row-major
// arrays) at any n, LayoutAuto does not unless the fill rule applies
// (Tuning.wideFill 3: wide at n = 4096, not at 65536, where threads fill
// the device), but for the network's field, which lanes mode runs where
// threads do not fill the device (kernelgen.ThreadsFill). Either way a kernel the layout does not run (events), one
// whose warp's shared memory passes the device's limit and one whose
// wide functions do not emit stay in the thread layout.
func TestChooseLayoutWide(t *testing.T) {
	t.Parallel()
	fits := func(bool, bool, bool) (int, error) { return 4 << 10, nil }
	tooBig := func(bool, bool, bool) (int, error) { return h100.sharedLimit + 8, nil }
	fails := func(bool, bool, bool) (int, error) { return 0, errors.New("no wide functions") }
	for _, c := range []engineCase{
		problemCase(t, "robertson", ode.Rodas5P, 4),
		problemCase(t, "neural-robertson", ode.Rodas5P, 4),
		lorenzCase(4, 1e-6),
	} {
		j := jobOf(t, c, ode.OpGrad)
		pl := j.Plan
		sp, err := kernelgen.NewStepPrograms(pl)
		if err != nil {
			t.Fatal(err)
		}
		base := kernelgen.ConfigOf(j)
		layout := func(n int, tun Tuning, per func(bool, bool, bool) (int, error), events bool) kernelgen.Config {
			v := base
			v.Events = events
			return chooseLayout(v, pl, sp, layoutJob{n: n, widePer: per}, Float64, false, h100, tun)
		}
		// auto is the default threshold at n = 4096 (kernelgen's
		// constants; TestWideMinDim).
		auto := wideMinDim(pl, 4096, false, h100.sms, Tuning{})
		for _, x := range []struct {
			what   string
			n      int
			tun    Tuning
			per    func(bool, bool, bool) (int, error)
			events bool
			wide   bool
		}{
			{"LayoutWide, n = 4096", 4096, Tuning{Layout: LayoutWide}, fits, false, true},
			{"LayoutWide, n = 65536", 65536, Tuning{Layout: LayoutWide}, fits, false, true},
			{"LayoutWide with NoWide", 4096, Tuning{Layout: LayoutWide, NoWide: true}, fits, false, true},
			{"LayoutAuto, n = 4096", 4096, Tuning{}, fits, false, !sp.Lanes && auto > 0 && pl.Dim >= auto},
			{"LayoutAuto, wideFill 3, n = 4096", 4096, Tuning{wideFill: 3}, fits, false, !sp.Lanes},
			{"LayoutAuto, wideFill 3, n = 65536", 65536, Tuning{wideFill: 3}, fits, false, false},
			{"LayoutThread, wideFill 3", 4096, Tuning{Layout: LayoutThread, wideFill: 3}, fits, false, false},
			{"LayoutWide, events", 4096, Tuning{Layout: LayoutWide}, fits, true, false},
			{"LayoutWide, too large a warp", 4096, Tuning{Layout: LayoutWide}, tooBig, false, false},
			{"LayoutWide, no wide functions", 4096, Tuning{Layout: LayoutWide}, fails, false, false},
			{"LayoutAuto, wideFill 3, too large a warp", 4096, Tuning{wideFill: 3}, tooBig, false, false},
		} {
			v := layout(x.n, x.tun, x.per, x.events)
			if v.Wide != x.wide || v.RowMajor != x.wide || v.Wide && v.Lanes {
				t.Errorf("%s, %s: Wide %t, RowMajor %t, Lanes %t; want Wide and RowMajor %t", c.name, x.what, v.Wide, v.RowMajor, v.Lanes, x.wide)
			}
		}
	}
	if err := (&Tuning{Layout: Layout("wide")}).check(); err != nil {
		t.Errorf("Tuning{Layout: \"wide\"} (GRADSOLVE_CUDA_LAYOUT=wide): %v", err)
	}
}

// TestHostWideSmall runs explicit methods on small states in the wide
// layout (forced: LayoutWide; below kernelgen.WideMinDim the step
// programs are not rerolled, so every lane runs the whole step alike and
// lane 0 writes its outputs) on a simulated warp, five trajectories each:
// Van der Pol (d = 2, Tsit5, one save time), Lorenz (d = 3, Tsit5, three
// save times) and Lorenz-96 with d = 8 (Tsit5, one save time): the
// solve, record, loss and gradient with the record against the CPU engine
// and the gradient against the thread layout's (testWideVs: the same steps, results to the case's tolerance,
// the gradient within 1e-10 of the thread layout's), each in the wide
// layout (the trace says so), and a solve whose save times are steps in
// the thread layout. The Rosenbrock methods' small states (Robertson, d =
// 3; HIRES, d = 8) are TestHostWideRosenbrock's.
func TestHostWideSmall(t *testing.T) {
	needHost(t)
	t.Parallel()
	wide := tuned(t, "cuda-host-sim", Tuning{Layout: LayoutWide})
	thread := tuned(t, "cuda-host-sim", Tuning{Layout: LayoutThread})
	for _, c := range []engineCase{problemCase(t, "vdp", ode.Tsit5, 5), lorenzCase(5, 1e-6), lorenz96Case(5, 8, ode.Tsit5)} {
		t.Run(fmt.Sprintf("%s-d=%d", c.name, c.prob.Field.Dim), func(t *testing.T) {
			t.Parallel()
			testWideVs(t, wide, thread, c, nil)
		})
	}
}

// TestGPUWideSmall is TestHostWideSmall on the device (engine "cuda"
// with LayoutWide, 1,000 trajectories), with the small Rosenbrock cases
// of TestHostWideRosenbrock: Robertson (d = 3, Rodas5P, to t = 10, a save
// time: solve, record and gradient) and HIRES (d = 8, Rodas5P, to t = 5,
// the gradient), against the CPU engine and the thread layout
// (testWideRos).
func TestGPUWideSmall(t *testing.T) {
	needGPUEngine(t)
	wide := tuned(t, "cuda", Tuning{Layout: LayoutWide})
	thread := tuned(t, "cuda", Tuning{Layout: LayoutThread})
	testWideVs(t, wide, thread, lorenzCase(1000, 1e-6), nil)
	testWideVs(t, wide, thread, lorenz96Case(1000, 8, ode.Tsit5), nil)
	testWideRos(t, wide, wideRosCase(t, "robertson", ode.Rodas5P, 1000, 10, true), nil)
	testWideRos(t, wide, wideRosCase(t, "hires", ode.Rodas5P, 1000, 5, false), []string{"grad"})
}

// layoutFillSizes are BenchmarkGPULayoutFill's ensemble sizes: on an
// H100 (132 multiprocessors) threads fill the device from n = 33,792
// (kernelgen.ThreadsFillDevice).
var layoutFillSizes = []int{1024, 4096, 16384, 65536}

// layoutFillCases are BenchmarkGPULayoutFill's problems, with the layouts
// each is timed in: the large-state suite's (bench/large.go) where it has
// them, Robertson the stiff suite's sweep (bench/stiff.go), Lorenz-96
// with d = 16 (an explicit method below kernelgen.WideMinDim).
var layoutFillCases = []struct {
	name    string
	layouts []Layout
}{
	{"hires", []Layout{LayoutThread, LayoutWide}},
	{"pollution", []Layout{LayoutThread, LayoutWide}},
	{"robertson", []Layout{LayoutThread, LayoutWide}},
	{"neural-robertson", []Layout{LayoutThread, LayoutLanes, LayoutWide}},
	{"lorenz96-16", []Layout{LayoutThread, LayoutWide}},
}

// layoutFillCase is problem name's BenchmarkGPULayoutFill ensemble of n
// trajectories: its first parameter swept as the large-state suite
// sweeps it (HIRES: y8(0) in [0.005, 0.006]; Pollution: k1 in [0.28,
// 0.42]; neural Robertson: k1 its default ± 10%), Robertson's k1 in
// [0.03, 0.05] (the stiff suite's), Lorenz-96's F in [7, 9]; t ∈ [T0, T1]
// of the problem, no save times, loss Σ_i ‖y_i(T)‖²; Rodas5P at rtol
// 1e-6, atol 1e-10 for the stiff problems, Tsit5 at rtol 1e-6, atol
// 1e-9 for Lorenz-96.
func layoutFillCase(tb testing.TB, name string, n int) engineCase {
	tb.Helper()
	if name == "lorenz96-16" {
		c := wideBenchGradCase(n, 16)
		c.name = name
		return c
	}
	pr, err := problems.ByName(name)
	if err != nil {
		tb.Fatal(err)
	}
	y0, p := pr.Ensemble(n)
	d, np := pr.Field.Dim, pr.Field.Params
	sweep := func(dst []float64, stride int, lo, hi float64) {
		for i, x := range problems.LinSpace(make([]float64, n), lo, hi) {
			dst[i*stride] = x
		}
	}
	switch name {
	case "hires":
		sweep(y0[7:], d, 0.005, 0.006)
	case "pollution":
		sweep(p, np, 0.28, 0.42)
	case "robertson":
		sweep(p, np, 0.03, 0.05)
	case "neural-robertson":
		sweep(p, np, 0.9*pr.P[0], 1.1*pr.P[0])
	default:
		tb.Fatalf("layoutFillCase: problem %q", name)
	}
	return engineCase{
		name: name,
		prob: ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, Shared: pr.Shared, T0: pr.T0, T1: pr.T1},
		set:  ode.Settings{Method: ode.Rodas5P, RelTol: 1e-6, AbsTol: 1e-10},
		loss: ode.SumSquares(),
		tol:  1e-10,
	}
}

// BenchmarkGPULayoutFill times the gradient with the record (Solver.Grad
// with a nil mesh) of small and mid-sized states in the thread layout
// against the wide layout (LayoutWide; lanes mode too for the neural
// Robertson problem) at n = 1,024 to 65,536 (layoutFillSizes), where the
// thread layout's n/32 warps leave an H100's 132 multiprocessors
// underused (n = 4096: 128 warps): HIRES (d = 8), Pollution (d = 20),
// Robertson (d = 3) and the neural Robertson problem (d = 3) with Rodas5P,
// Lorenz-96 with d = 16 and Tsit5 (layoutFillCase), the layouts of one
// size side by side: kernel-ms is the trace's kernel time, ms/op the
// whole call's (benchLayout, BenchmarkGPUWide's). A layout the kernel
// does not run (its warp's shared memory passes the limit) is skipped,
// saying which ran. Its figures set kernelgen.WideFillMinDim and
// WideFillMinDimFactor.
//
// Each problem's kernels (11 in all, 98 to 883 kB of source: Pollution's
// wide gradient the largest) are compiled first, a problem's layouts side
// by side, by a call of 64 trajectories each (NVRTC: HIRES's and
// Pollution's took 21 and 35 s on an H100, three kernels side by side;
// the disk cache keeps them); a problem at a time:
//
//	go test ./cuda -run XXX -bench 'GPULayoutFill' -benchtime 3x -timeout 30m
//	go test ./cuda -run XXX -bench 'GPULayoutFill/(hires|robertson|lorenz96)/' -benchtime 3x
func BenchmarkGPULayoutFill(b *testing.B) {
	needGPUEngine(b)
	engines := map[Layout]string{}
	for _, c := range layoutFillCases {
		for _, l := range c.layouts {
			if engines[l] == "" {
				engines[l] = tuned(b, "cuda", Tuning{Layout: l})
			}
		}
	}
	for _, pc := range layoutFillCases {
		b.Run(pc.name, func(b *testing.B) {
			warm := layoutFillCase(b, pc.name, 64)
			solvers := make([]*ode.Solver, len(pc.layouts))
			for k, l := range pc.layouts {
				solvers[k] = warm.solver(b, engines[l])
			}
			errs := make([]error, len(pc.layouts))
			var wg sync.WaitGroup
			for k, sv := range solvers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := warm.prob
					_, errs[k] = sv.Grad(nil, &p, warm.loss, nil)
				}()
			}
			wg.Wait()
			for k, err := range errs {
				if err != nil {
					b.Fatalf("%s, %s layout: %v", pc.name, pc.layouts[k], err)
				}
			}
			for _, n := range layoutFillSizes {
				c := layoutFillCase(b, pc.name, n)
				for _, l := range pc.layouts {
					b.Run(fmt.Sprintf("n=%d/%s", n, l), func(b *testing.B) {
						if err := benchLayout(b, c, "grad", engines[l], string(l)); err != nil {
							b.Skip(err)
						}
					})
				}
			}
		})
	}
}

// TestHostThreadNeural runs the neural Robertson problem (a 2-16-16-1
// network of 337 shared weights) in the thread layout, forced, as an
// H100 runs it by default from 33,792 trajectories (kernelgen.ThreadsFill),
// against the CPU engine: its rerolled loops leave the shared gradient's
// reduced terms in arrays the accumulator's reductions read after the
// loops (the kernel did not compile while they were the loops' locals).
func TestHostThreadNeural(t *testing.T) {
	needHost(t)
	c := layoutFillCase(t, "neural-robertson", 8)
	dev := c.solver(t, tuned(t, "cuda-host", Tuning{Layout: LayoutThread}))
	cpu := c.solver(t, "cpu")
	p := c.prob
	got, err := dev.Grad(nil, &p, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cpu.Grad(nil, &p, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, np := c.prob.Field.Dim, c.prob.Field.Params
	closeRows(t, "thread layout: Y", got.Solution.Y, want.Solution.Y, d, 1e-10, nil)
	closeRows(t, "thread layout: dL/dY0", got.Y0, want.Y0, d, 1e-10, nil)
	closeRows(t, "thread layout: dL/dP", got.P, want.P, np, 1e-10, nil)
	if len(got.Shared) == 0 {
		t.Fatal("no shared gradient")
	}
	closeRows(t, "thread layout: dL/dShared", got.Shared, want.Shared, len(want.Shared), 1e-10, nil)
}
