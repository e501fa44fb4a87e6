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

// TestHostWideLanesSame runs the wide layout with a trajectory on fewer
// lanes than a warp's (Tuning.wideLanes, kernelgen.Config.WideLanes: 32 /
// lanes trajectories a warp, each group of lanes with its own part of the
// warp's shared memory and its own __syncwarp()s and butterflies) on a
// simulated warp, five trajectories (so that the groups of a warp run
// different trajectories, and different numbers of steps, at once),
// against a warp per trajectory (the default): bit for bit where the
// state has at most twice as many components as the lanes (HIRES, d = 8,
// on 16, 8 and 4 lanes: a lane's partial sum of components c and c + l
// is the butterfly's step of offset l, the other steps the same), to
// rounding where it has more (HIRES on 2 lanes, Lorenz-96 with d = 64 on
// 16: a lane's partial sums add three or more components in a row where
// the butterfly adds pairs; relTol of max(|x|, 1e-3 × the largest
// result)). It fails if a variant's kernel is the default's (the knob
// not reaching the source) or if the groups' collectives mix their lanes
// (a deadlock or other results).
func TestHostWideLanesSame(t *testing.T) {
	needHost(t)
	t.Parallel()
	hires := wideRosCase(t, "hires", ode.Rodas5P, 5, 0.5, false)
	type tc struct {
		c      engineCase
		lanes  int
		ops    []string
		relTol float64 // 0: bit for bit
	}
	cases := []tc{
		{hires, 8, []string{"solve", "grad"}, 0},
		{hires, 16, []string{"grad"}, 0},
		{hires, 4, []string{"grad"}, 0},
	}
	if !testing.Short() {
		l96 := lorenz96Case(5, 64, ode.Tsit5)
		l96.prob.T1 = 0.25
		cases = append(cases, tc{hires, 2, []string{"grad"}, 0}, tc{l96, 16, []string{"solve", "grad"}, 0}, tc{l96, 8, []string{"grad"}, 0})
	}
	for _, x := range cases {
		t.Run(fmt.Sprintf("%s-d=%d/lanes=%d", x.c.name, x.c.prob.Field.Dim, x.lanes), func(t *testing.T) {
			t.Parallel()
			def := kernelSourceWith(t, x.c, ode.OpGrad, func(v *kernelgen.Config) { v.Wide, v.RowMajor = true, true })
			src := kernelSourceWith(t, x.c, ode.OpGrad, func(v *kernelgen.Config) { v.Wide, v.RowMajor, v.WideLanes = true, true, x.lanes })
			if def == src || !strings.Contains(src, fmt.Sprintf("#define GS_WIDE_LANES %d\n", x.lanes)) {
				t.Fatalf("WideLanes %d: the gradient kernel's source does not define GS_WIDE_LANES", x.lanes)
			}
			// The simulated warp with an H100's shared memory a block, so
			// that HIRES's 16 groups of 2 lanes fit (wideLanesFor).
			per, err := kernelgen.WideSharedPerWarp(jobOf(t, x.c, ode.OpGrad).Plan, true, false)
			if err != nil {
				t.Fatal(err)
			}
			if l := wideLanesFor(x.lanes, per, 227<<10); l != x.lanes {
				t.Fatalf("%d lanes asked, %d run (wideLanesFor): the case checks nothing", x.lanes, l)
			}
			ref := tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide, wideLanes: -1})
			eng := tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide, wideLanes: x.lanes})
			for _, op := range x.ops {
				want := wideResults(t, x.c, ref, op)
				got := wideResults(t, x.c, eng, op)
				form := fmt.Sprintf("%d lanes a trajectory", x.lanes)
				if x.relTol == 0 {
					sameWideResults(t, op, form, "a warp", got, want)
					continue
				}
				closeWideResults(t, op, form, "a warp", got, want, x.relTol)
			}
		})
	}
}

// TestHostWideLanesShared is TestHostWideLanesSame with shared
// parameters: Lorenz-96 with a damping and a coupling shared by every
// trajectory and five save times (wideSavesCase: the shared gradient's
// sums over the reverse steps and the loss's own term), d = 20 and d = 64,
// eight trajectories, the first run to t = 2 and the others to 0.5 (so
// that on fewer lanes the warp's other groups finish several
// trajectories while its first group still runs trajectory 0), on the
// simulated warp: by default (defaultWideLanes: 16 lanes at d = 20, and at
// d = 64 up to wideLanesMaxDim) and on 16 and 8 lanes against a warp per
// trajectory, the gradient with the record bit for bit (the loss, dL/dy0,
// dL/dp and dL/dShared). The simulated warp's groups run their
// trajectories at once; they add to the shared gradient's sums in
// trajectory order (wide.cuh's gs_sim_turn_wait), as one simulated warp
// a trajectory does (session 47 saw dL/dShared differ in the last bits
// where they added in the order they finished). With -short d = 20 only.
func TestHostWideLanesShared(t *testing.T) {
	needHost(t)
	t.Parallel()
	dims := []int{20, 64}
	if testing.Short() {
		dims = dims[:1]
	}
	for _, d := range dims {
		c := wideSavesCase(8, d)
		c.prob.T1s = slices.Repeat([]float64{c.prob.T1}, c.prob.N)
		c.prob.T1s[0] = 2
		for _, lanes := range []int{0, 16, 8} {
			t.Run(fmt.Sprintf("d=%d/lanes=%d", d, lanes), func(t *testing.T) {
				t.Parallel()
				if lanes > 0 {
					per, err := kernelgen.WideSharedPerWarp(jobOf(t, c, ode.OpGrad).Plan, true, true)
					if err != nil {
						t.Fatal(err)
					}
					if l := wideLanesFor(lanes, per, 227<<10); l != lanes {
						t.Fatalf("%d lanes asked, %d run (wideLanesFor): the case checks nothing", lanes, l)
					}
				}
				want := wideResults(t, c, tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide, wideLanes: -1}), "grad")
				got := wideResults(t, c, tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide, wideLanes: lanes}), "grad")
				if n := 1 + c.prob.N*(d+1); len(want) != n+2 {
					t.Fatalf("%d results, want %d with dL/dShared's 2", len(want), n+2)
				}
				sameWideResults(t, "grad", fmt.Sprintf("%d lanes a trajectory (0: the default)", lanes), "a warp", got, want)
			})
		}
	}
}

// TestGPUWideLanesSame is TestHostWideLanesSame's bit-for-bit cases on
// the device: the large-state suite's HIRES (d = 8) on 16, 8 and 4 lanes a
// trajectory and Pollution (d = 20) on 16 (d ≤ 2·lanes) against a warp
// per trajectory, 1,000 trajectories (layoutFillCase, the whole
// interval, Rodas5P): the solve, the gradient with the record and the
// gradient on the mesh (the thread layout's kernel, the same both times),
// bit for bit (sameRuns). It skips without a GPU.
func TestGPUWideLanesSame(t *testing.T) {
	needGPUEngine(t)
	for _, x := range []struct {
		name  string
		lanes []int
	}{{"hires", []int{16, 8, 4}}, {"pollution", []int{16}}} {
		c := layoutFillCase(t, x.name, 1000)
		for _, lanes := range x.lanes {
			t.Run(fmt.Sprintf("%s/lanes=%d", x.name, lanes), func(t *testing.T) {
				sameRuns(t, c, c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide, wideLanes: lanes})), c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide, wideLanes: -1})))
			})
		}
	}
}

// TestGPUWideLanesShared is TestHostWideLanesShared on the device:
// Lorenz-96 with shared parameters and five save times (wideSavesCase,
// 1,000 trajectories) at d = 20 (forced wide) and d = 64, by default
// (defaultWideLanes: 16 lanes at both) and on 16 and 8 lanes against a
// warp per trajectory: the solve, the gradient with the record and on
// the mesh bit for bit but for dL/dShared, within 1e-12 relative
// (sameRunsShared: the warps' atomics add the trajectories' terms in no
// fixed order, on a warp per trajectory too). It skips without a GPU.
func TestGPUWideLanesShared(t *testing.T) {
	needGPUEngine(t)
	for _, d := range []int{20, 64} {
		c := wideSavesCase(1000, d)
		warp := c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide, wideLanes: -1}))
		for _, lanes := range []int{0, 16, 8} {
			t.Run(fmt.Sprintf("d=%d/lanes=%d", d, lanes), func(t *testing.T) {
				sameRunsShared(t, c, c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide, wideLanes: lanes})), warp, 1e-12)
			})
		}
	}
}

// closeWideResults checks that the results got of op with form are
// those of ref, want, within relTol of max(|x|, 1e-3 × the largest
// result), and logs how many differ in their bits.
func closeWideResults(t *testing.T, op, form, ref string, got, want []float64, relTol float64) {
	t.Helper()
	if len(got) != len(want) || len(want) == 0 {
		t.Fatalf("%s: %d results with %s, %d with %s", op, len(got), form, len(want), ref)
	}
	var big float64
	for _, w := range want {
		big = max(big, math.Abs(w))
	}
	var worst float64
	diff := 0
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			diff++
		}
		e := math.Abs(got[i]-want[i]) / max(math.Abs(want[i]), 1e-3*big)
		if !(e <= relTol) {
			t.Errorf("%s: result %d: %v with %s, %v with %s (%.2g relative)", op, i, got[i], form, want[i], ref, e)
		}
		worst = max(worst, e)
	}
	t.Logf("%s, %s against %s: %d results, %d differ, at most %.2g relative", op, form, ref, len(want), diff, worst)
}

// TestWideLanesLayout checks chooseLayout's part of Tuning.wideLanes: a
// forced wide kernel gets the lanes asked (a power of two below 32) where
// the warp's groups' shared memory fits the device, the launch bounds
// and a round's blocks then counted in the warps of those groups; the
// default asks for defaultWideLanes' (8 for HIRES); negative values, 32
// and values that are not a power of two below 32 keep a warp per
// trajectory, and so does a job whose groups would not fit.
func TestWideLanesLayout(t *testing.T) {
	c := wideRosCase(t, "hires", ode.Rodas5P, 4096, 0.5, false)
	j := jobOf(t, c, ode.OpGrad)
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	per, err := kernelgen.WideSharedPerWarp(j.Plan, true, false)
	if err != nil {
		t.Fatal(err)
	}
	h100 := device{sms: 132, sharedLimit: 227 << 10}
	for _, x := range []struct {
		lanes int
		dev   device
		want  int
	}{
		{0, h100, 8}, // the default: defaultWideLanes(8)
		{-1, h100, 0},
		{8, h100, 8},
		{16, h100, 16},
		{4, h100, 4},
		{32, h100, 0},
		{12, h100, 0},
		{8, device{sms: 132, sharedLimit: 4*per - 1}, 0}, // four groups' parts pass the limit
		{8, device{}, 8}, // a host backend: no limit
	} {
		v := chooseLayout(kernelgen.ConfigOf(j), j.Plan, sp, layoutJob{n: 4096}, Float64, false, x.dev, Tuning{Layout: LayoutWide, wideLanes: x.lanes, wideRound: true})
		if !v.Wide {
			t.Fatalf("lanes %d: not wide", x.lanes)
		}
		if v.WideLanes != x.want {
			t.Errorf("lanes %d on %+v: Config.WideLanes %d, want %d", x.lanes, x.dev, v.WideLanes, x.want)
		}
		if x.dev.sms == 0 || x.dev.sharedLimit < 4*per {
			continue
		}
		g := kernelgen.LaneWidth / v.WideLanesOf()
		def := wideMinBlocks(g*per, x.dev.sharedLimit, 0)
		if want := wideRoundBlocks(def, g*per, (4096+g-1)/g, x.dev); v.WideMinBlocks != want {
			t.Errorf("lanes %d: launch bounds of %d blocks, want %d (one round of %d warps)", x.lanes, v.WideMinBlocks, want, (4096+g-1)/g)
		}
	}
}

// wideLanesVariants are BenchmarkGPUWideLanes's tunings by case: the
// default (defaultWideLanes' lanes a trajectory since session 46; 16 for
// Lorenz-96 with d = 64 since session 47), the neighbours through index
// tables (Tuning.wideTables) on the default's lanes and on a warp, the
// window loops rolled (Tuning.wideRolled), both on a warp (warp-old), a warp
// per trajectory (launch bounds of wideMinBlocks: the default before),
// with the bounds of one round (Tuning.wideRound), and a trajectory on 16
// or 8 lanes (Tuning.wideLanes), with and without those bounds, on 8
// without bounds (HIRES only: its 1,024 warps of 8-lane groups fit 8 a
// multiprocessor at its 173 registers, where the default's 6 blocks cap
// them at 168), and on 4 (HIRES only: d = 8 in two passes); for neural Robertson (tile mode at 4,096)
// the layouts with fewer lanes a trajectory that exist for neural fields:
// tile mode forced (a warp per tile of 8 trajectories, 4 lanes each, the
// layers as tensor-core products; chosen by default from 3 tiles a
// multiprocessor, n ≥ 3,168 on an H100)
// and the thread layout forced.
var wideLanesVariants = []struct {
	name   string
	tun    Tuning
	layout string // the layout it runs in; "": the case's own
}{
	{"default", Tuning{}, ""},
	{"warp", Tuning{wideLanes: -1}, ""},
	{"round", Tuning{wideLanes: -1, wideRound: true}, ""},
	{"lanes16", Tuning{wideLanes: 16}, ""},
	{"lanes16-round", Tuning{wideLanes: 16, wideRound: true}, ""},
	{"lanes8", Tuning{wideLanes: 8}, ""},
	{"lanes8-round", Tuning{wideLanes: 8, wideRound: true}, ""},
	{"lanes8-b0", Tuning{wideLanes: 8, WideMinBlocks: -1}, ""},
	{"lanes4", Tuning{wideLanes: 4}, ""},
	{"dense", Tuning{denseLU: true}, ""},                // the LU factors dense (session 47)
	{"pivots", Tuning{widePivots: pollutionPivots}, ""}, // the sparse LU with Pollution's interchanges (session 48)

	{"tables", Tuning{wideTables: true}, ""},
	{"warp-tables", Tuning{wideLanes: -1, wideTables: true}, ""},
	{"rolled", Tuning{wideRolled: true}, ""},
	{"warp-old", Tuning{wideLanes: -1, wideTables: true, wideRolled: true}, ""},
	{"blocked", Tuning{wideBlocked: true}, ""},                              // the blocked element split (session 48)
	{"warp-blocked", Tuning{wideLanes: -1, wideBlocked: true}, ""},          // the same on a warp
	{"blocked-s48", Tuning{wideBlocked: true, wideCyclicWindows: true}, ""}, // blocked, its window loops cyclic (session 48's form)
	{"recy", Tuning{wideRecY: true}, ""},                                    // the reverse steps' y from the record (session 49)
	{"outplace", Tuning{wideOutPlace: true}, ""},                            // the functions' returned arrays at their outputs (session 49)
	{"recy-outplace", Tuning{wideRecY: true, wideOutPlace: true}, ""},
	// A trajectory on several warps, a block each (Tuning.wideWarps,
	// session 53): by default's launch bounds (wideTrajMinBlocks), without
	// bounds (-b0: the registers the compiler wants), with bounds of 128
	// registers (-b8 on 2 warps, -b4 on 4: Lorenz-96 d = 256's kernel on a
	// warp used 164 of its 168), and on 2 warps with
	// the reverse steps' y from the record and the returned arrays at
	// their outputs (less shared memory a trajectory: more of them a
	// multiprocessor).
	{"warps=2", Tuning{wideWarps: 2}, ""},
	{"warps=2-b0", Tuning{wideWarps: 2, WideMinBlocks: -1}, ""},
	{"warps=2-b8", Tuning{wideWarps: 2, WideMinBlocks: 8}, ""}, // 128 registers
	{"warps=2-recy-outplace", Tuning{wideWarps: 2, wideRecY: true, wideOutPlace: true}, ""},
	{"warps=4", Tuning{wideWarps: 4}, ""},
	{"warps=4-b0", Tuning{wideWarps: 4, WideMinBlocks: -1}, ""},
	{"warps=4-b4", Tuning{wideWarps: 4, WideMinBlocks: 4}, ""}, // 128 registers
	{"tile", Tuning{Layout: LayoutTile}, "tile"},
	{"thread", Tuning{Layout: LayoutThread}, "thread"},
}

// wideLanesRuns reports whether BenchmarkGPUWideLanes times variant v
// on case c: every variant on HIRES (d = 8) but pivots (its factors
// never interchange rows), all but lanes4 and lanes8-b0 on Pollution (d =
// 20), pivots only there; on Lorenz-96 with d = 64 (16 lanes by default) the
// default, a warp, lanes16, lanes8, the neighbours read
// through index tables on the default lanes (tables) and on a warp (warp-tables),
// the window loops rolled (rolled), and both on a warp (warp-old: the
// default before session 47); on Lorenz-96 with d = 256 (a warp by
// default) the default, tables, rolled, warp-old (the kernel before
// session 47) and lanes16; on both Lorenz-96 cases the blocked element
// split (Tuning.wideBlocked, session 48: blocked; with its window loops
// cyclic as session 48 built it: blocked-s48), on d = 64 also on a
// warp (warp-blocked), and the reverse steps' y read from the record
// (Tuning.wideRecY, session 49: recy), the functions' returned arrays at
// their outputs (Tuning.wideOutPlace: outplace) and both
// (recy-outplace), and a trajectory on 2 or 4 warps (Tuning.wideWarps,
// session 53: warps=2, warps=4; without launch bounds warps=2-b0,
// warps=4-b0; with bounds of 128 registers warps=2-b8, warps=4-b4; on 2
// with recy-outplace's shared memory warps=2-recy-outplace); on the
// Brusselator (d = 64: its 70 KB
// trajectories would run 2 a multiprocessor in groups of 16 lanes where
// 3 run a warp each, so wideLanesFor keeps a warp each and lanes16 is
// the default's kernel) the default, lanes16 and dense (its band's
// sparse factor since session 48 against the dense one); on
// neural Robertson (tile mode at 4,096, not wide: the tunings change nothing)
// the default and lanes8, the same kernel twice (the noise), and tile
// and thread (its layouts forced).
func wideLanesRuns(c, v string) bool {
	switch {
	case v == "tile" || v == "thread":
		return c == "neural-robertson"
	case v == "tables" || v == "rolled" || v == "warp-old":
		return c == "lorenz96-64" || c == "lorenz96-256"
	case v == "warp-tables" || v == "warp-blocked":
		return c == "lorenz96-64"
	case v == "pivots":
		return c == "pollution"
	case v == "blocked" || v == "blocked-s48" || v == "recy" || v == "outplace" || v == "recy-outplace":
		return c == "lorenz96-64" || c == "lorenz96-256"
	case strings.HasPrefix(v, "warps="):
		return c == "lorenz96-64" || c == "lorenz96-256"
	case c == "hires":
		return true
	case c == "pollution":
		return v != "lanes4" && v != "lanes8-b0"
	case c == "neural-robertson":
		return v == "default" || v == "lanes8"
	case c == "lorenz96-64":
		return v == "default" || v == "warp" || v == "lanes16" || v == "lanes8"
	case c == "brusselator":
		return v == "default" || v == "lanes16" || v == "dense"
	}
	return v == "default" || v == "lanes16"
}

// BenchmarkGPUWideLanes times the gradient with the record (kernel-ms/op;
// ms/op the whole call) of issue 26's cases at n = 4096 (the gpu-large
// suite's ensembles and tolerances, layoutFillCase: Pollution, HIRES,
// neural Robertson, Rodas5P, the whole interval) beside Lorenz-96 (d =
// 64 and 256, Tsit5, n = 4096: wideBenchGradCase) and the Brusselator (d = 64,
// Rodas5P, n = 1024, t ≤ 0.5: wideRosBenchCase), each in its default
// layout (LayoutAuto: the wide layout but for neural Robertson's lanes
// mode) or the variant's, with wideLanesVariants in turn (wideLanesRuns), three rounds
// (later rounds' names end in #01, #02). It reports the kernel's lanes
// a trajectory (lanes; 32 on several warps), warps a trajectory
// (warps), launch bounds' blocks (bounds-blocks) and warps
// a multiprocessor by shared memory (warps/SM) as chooseLayout sets them
// on an H100's 132 multiprocessors, and in the first round the compiled
// kernel's registers (regs) and local memory (local-B) a thread.
//
// One device call (each variant compiles its kernel: Pollution's about a
// minute, HIRES's about 20 s, on an empty cache):
//
//	cuda.test -test.run XXX -test.bench 'GPUWideLanes' -test.benchtime 5x -test.timeout 40m
func BenchmarkGPUWideLanes(b *testing.B) {
	needGPUEngine(b)
	caseOf := func(name string) engineCase {
		switch name {
		case "brusselator":
			return wideRosBenchCase(b, name, 1024)
		case "lorenz96-64":
			return wideBenchGradCase(4096, 64)
		case "lorenz96-256":
			return wideBenchGradCase(4096, 256)
		}
		return layoutFillCase(b, name, 4096)
	}
	cases := map[string]engineCase{}
	for round := range wideSplitRounds {
		for _, name := range []string{"pollution", "hires", "neural-robertson", "lorenz96-64", "lorenz96-256", "brusselator"} {
			c, ok := cases[name]
			if !ok {
				c = caseOf(name)
				cases[name] = c
			}
			for _, x := range wideLanesVariants {
				if !wideLanesRuns(name, x.name) {
					continue
				}
				layout := "wide"
				switch {
				case x.layout != "":
					layout = x.layout
				case name == "neural-robertson":
					layout = "lanes"
				}
				engine := tuned(b, "cuda", x.tun)
				b.Run(fmt.Sprintf("grad/%s/%s", name, x.name), func(b *testing.B) {
					benchWide(b, c, "grad", engine, layout)
					if layout != "wide" {
						return
					}
					v, per := wideLanesConfig(b, c, x.tun)
					_, on := kernelgen.WideOccupancy(per, 227<<10)
					if w := v.WideWarpsOf(); w > 1 {
						on = w * kernelgen.WideTrajOccupancy(w, per, 227<<10)
					}
					b.ReportMetric(float64(v.WideLanesOf()), "lanes")
					b.ReportMetric(float64(v.WideWarpsOf()), "warps")
					b.ReportMetric(float64(v.WideMinBlocks), "bounds-blocks")
					b.ReportMetric(float64(on), "warps/SM")
					if round == 0 {
						a := wideKernelAttrs(b, c, x.tun)
						b.ReportMetric(float64(a.Registers), "regs")
						b.ReportMetric(float64(a.LocalBytes), "local-B")
					}
				})
			}
		}
	}
}

// wideLanesConfig returns case c's gradient kernel as chooseLayout
// configures it under tun on an H100 (132 multiprocessors, 227 KiB of
// shared memory a block) and the shared memory of its warps in bytes (a
// trajectory's, kernelgen.WideSharedPerWarp, or with the reverse steps'
// y from the record or the returned arrays at their outputs,
// Config.WideRecordY and WideOutInPlace, its own; times the trajectories
// a warp; on several warps a trajectory, Config.WideTrajWarps, a
// block's: the trajectory's and its exchange slots; 0 for a kernel of
// another layout).
func wideLanesConfig(tb testing.TB, c engineCase, tun Tuning) (kernelgen.Config, int) {
	tb.Helper()
	j := jobOf(tb, c, ode.OpGrad)
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		tb.Fatal(err)
	}
	v := chooseLayout(kernelgen.ConfigOf(j), j.Plan, sp, layoutJob{n: c.prob.N}, Float64, false, device{sms: 132, sharedLimit: 227 << 10}, tun)
	if !v.Wide {
		return v, 0
	}
	per, err := sp.WideSharedPerWarpFor(kernelgen.Config{Grad: true, WideRecordY: v.WideRecordY, WideOutInPlace: v.WideOutInPlace})
	if err != nil {
		tb.Fatal(err)
	}
	if w := v.WideWarpsOf(); w > 1 {
		return v, per + 8*kernelgen.WideExchange(w) // a block's: the trajectory's and its exchange slots
	}
	return v, kernelgen.LaneWidth / v.WideLanesOf() * per
}

// TestNeuralRobertsonLayouts checks BenchmarkGPUWideLanes's layouts of
// neural Robertson's gradient at n = 4096 on an H100: tile mode by
// default (3 tiles a multiprocessor or more: kernelgen.TileModeFills)
// and where forced, the thread layout where forced.
func TestNeuralRobertsonLayouts(t *testing.T) {
	c := layoutFillCase(t, "neural-robertson", 4096)
	for _, x := range wideLanesVariants {
		if !wideLanesRuns("neural-robertson", x.name) {
			continue
		}
		v, _ := wideLanesConfig(t, c, x.tun)
		want := x.layout
		if want == "" {
			want = "tile"
		}
		if got := v.Layout(); got != want {
			t.Errorf("%s: the %s layout, want %s", x.name, got, want)
		}
	}
}

// TestWideLanesShapes logs what wideLanesConfig gives
// BenchmarkGPUWideLanes's cases under its variants on an H100: the lanes
// a trajectory, the launch bounds' blocks and the registers they cap, the
// shared memory of a warp, the warps a multiprocessor runs by it and by
// the registers (65,536 a multiprocessor, an estimate: ptxas may use
// fewer than the cap), the trajectories that makes, and the rounds of n
// trajectories. It fails where the lanes are not wideLanesFor's.
func TestWideLanesShapes(t *testing.T) {
	for _, name := range []string{"pollution", "hires", "lorenz96-64", "brusselator"} {
		var c engineCase
		switch name {
		case "brusselator":
			c = problemCase(t, name, ode.Rodas5P, 1024)
			c.prob.T1, c.prob.SaveAt, c.loss = c.prob.T0+0.5, nil, ode.SumSquares()
		case "lorenz96-64":
			c = wideBenchGradCase(4096, 64)
		default:
			c = layoutFillCase(t, name, 4096)
		}
		for _, x := range wideLanesVariants {
			if x.layout != "" {
				continue // (neural Robertson's layouts: TestNeuralRobertsonLayouts)
			}
			v, per := wideLanesConfig(t, c, x.tun)
			if !v.Wide {
				t.Fatalf("%s/%s: not wide", name, x.name)
			}
			_, on := kernelgen.WideOccupancy(per, 227<<10)
			g := kernelgen.LaneWidth / v.WideLanesOf()
			if w := v.WideWarpsOf(); w > 1 {
				on = w * kernelgen.WideTrajOccupancy(w, per, 227<<10)
			}
			want := wideLanesFor(x.tun.lanesFor(jobOf(t, c, ode.OpGrad).Plan), per/g, 227<<10)
			if v.WideWarpsOf() > 1 {
				want = kernelgen.LaneWidth // a trajectory on several warps: whole warps
			}
			if v.WideLanesOf() != want {
				t.Errorf("%s/%s: %d lanes, want %d (wideLanesFor)", name, x.name, v.WideLanesOf(), want)
			}
			// The warps the registers let run: the bounds' cap (255 without).
			regs := 255
			if v.WideMinBlocks > 0 {
				regs = kernelgen.BoundsRegs(v.WideBlockWarps()*kernelgen.LaneWidth, v.WideMinBlocks)
			}
			byRegs := min(64, 65536/(regs*kernelgen.LaneWidth))
			w := min(on, byRegs) / v.WideWarpsOf() // in units of a trajectory's warps (1 unless WideTrajWarps)
			t.Logf("%s/%s: %d lanes, bounds %d blocks (%d registers), %d B a warp; warps a multiprocessor %d by shared memory, %d by registers: %d trajectories, n = %d in %.2f rounds",
				name, x.name, v.WideLanesOf(), v.WideMinBlocks, regs, per, on, byRegs, w*g, c.prob.N, float64(c.prob.N)/float64(max(w*g*132, 1)))
		}
	}
}

// TestDefaultWideLanes checks defaultWideLanes: the fewest lanes, at
// least 8, that hold two components each; for an explicit method 16 up
// to d = 64 (wideLanesMaxDim); a warp beyond.
func TestDefaultWideLanes(t *testing.T) {
	for _, x := range []struct {
		d       int
		factors bool
		want    int
	}{
		{1, true, 8}, {8, true, 8}, {16, true, 8}, {17, true, 16}, {20, true, 16}, {32, true, 16}, {33, true, 32}, {64, true, 32}, {256, true, 32},
		{8, false, 8}, {32, false, 16}, {33, false, 16}, {64, false, 16}, {65, false, 32}, {256, false, 32},
	} {
		if got := defaultWideLanes(x.d, x.factors); got != x.want {
			t.Errorf("defaultWideLanes(%d, %v) = %d, want %d", x.d, x.factors, got, x.want)
		}
	}
}
