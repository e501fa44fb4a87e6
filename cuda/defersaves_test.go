package cuda

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
)

// deferSavesCases are TestHostEngineDeferSaves' cases: divideSavesCases
// (Lorenz with 40 save times on mesh points, repeated, at T0 and T1;
// Lorenz with Vern7 and 300; Kepler with the benchmark's 1,000; Lorenz
// over [0, 1e-280]; bouncing balls with events, which do not defer), the
// Lorenz case with a step budget that about half the trajectories
// exhaust (their saves past the failure NaN), Kepler with Vern7, and
// Lorenz's 40 save times with the saved states' squares as the loss
// (folded in the forward pass: its gradient defers, with save times at
// T0, on mesh points and repeated). Their initial states are perturbed
// at random (seeded), so that the trajectories of a launch differ.
func deferSavesCases(t *testing.T, n int) []engineCase {
	cases := divideSavesCases(t, n)
	failing := saveTimesCase(t, lorenzCase(n, 1e-4), 20)
	failing.name = "lorenz-failures"
	failing.set.MaxSteps = medianSteps(t, failing, "cpu")
	failing.set.AllowFailures = true
	vern7 := keplerSavesCase(1000)
	vern7.name, vern7.prob.N, vern7.set.Method = "kepler-vern7", n, ode.Vern7
	squares := saveTimesCase(t, lorenzCase(n, 1e-6), 40)
	squares.name, squares.loss = "lorenz-40-squares", odetest.SavedSquares()
	cases = append(cases, failing, vern7, squares)
	rng := rand.New(rand.NewPCG(51, 3))
	for k := range cases {
		y0 := slices.Clone(cases[k].prob.Y0)
		for i := range y0 {
			y0[i] *= 1 + 1e-3*rng.Float64()
		}
		cases[k].prob.Y0 = y0
	}
	return cases
}

// deferGradCases are the deferSavesCases whose gradient kernel defers
// its save times (kernelgen's DeferGrad: a loss folded in the forward
// pass, LossFold): the sum of the saved states' squares.
var deferGradCases = []string{"kepler-saves", "kepler-vern7", "lorenz-40-squares"}

// inlineSaves is the tuning whose kernels evaluate save times in the
// forward pass (Tuning.inlineSaves), the form the deferred saves are
// compared with.
var inlineSaves = Tuning{inlineSaves: true}

// deferTunings are the tunings TestHostEngineDeferSaves compares with
// the inline form (inlineSaves), on the cases named in only (nil: all):
// the default (deferByDefault: the cases from deferSavesFrom save times
// defer their solves, Vern7's gradient too), deferred wherever the
// kernel can as the engine chooses (rows a little more than the longest trajectory
// seen), with 3 rows (every trajectory's later steps evaluated in the
// forward pass), with the results in pipelined chunks of 32
// trajectories (a kernel and a saves kernel per chunk: launchChunks),
// and compiled in parts (Tuning.SplitUnits, every function its own unit:
// both kernels linked from them).
var deferTunings = []struct {
	name string
	tun  Tuning
	only []string
}{
	{"default", Tuning{}, nil},
	{"defer", Tuning{deferSaves: true}, nil},
	{"defer-rows3", Tuning{deferSaves: true, firstRows: 3}, []string{"lorenz-vern7-300", "kepler-saves"}},
	{"defer-chunks", Tuning{deferSaves: true, pipeChunk: 32}, nil},
	{"defer-units", Tuning{deferSaves: true, SplitUnits: true, SplitFrom: 1}, []string{"kepler-vern7"}},
}

// TestHostEngineDeferSaves checks the save times evaluated by the saves
// kernel (Tuning.deferSaves: the forward pass keeps what each step's
// save times need, gs_engine_saves interpolates them, and in a gradient
// whose loss is folded computes the steps' coefficient cotangents, the
// fold and the adjoint running in gs_engine_rev) against the default
// (the trajectory's thread does it all in turn) bit for bit on the host
// engine: solutions and gradients with the record and on its mesh
// (sameRuns), SolveTo and, where the gradient defers (deferGradCases),
// Grad with the saves kept on the device (KeepSaves, read back with
// HostSaves), for deferSavesCases and each of deferTunings, in float64
// and float32 (Lorenz, Kepler), and under a MemoryLimit; that the solve's
// and the folded gradient's sources defer where the switch is on (the
// events' and a kernel's without save times do not), and that without
// save times the source is the same.
func TestHostEngineDeferSaves(t *testing.T) {
	needHost(t)
	for _, c := range deferSavesCases(t, 70) {
		t.Run(c.name, func(t *testing.T) {
			events := len(c.set.Events) > 0
			src, info := kernelSourceInfo(t, c, ode.OpSolve, func(*kernelgen.Config) {})
			def, dinfo := kernelSourceInfo(t, c, ode.OpSolve, func(v *kernelgen.Config) { v.DeferSaves = true })
			if strings.Contains(src, "gs_defer_step(a, k") || info.DeferRow != 0 {
				t.Fatal("the default solve defers its save times")
			}
			if got := strings.Contains(def, "gs_defer_step(a, k") && dinfo.DeferRow > 0; got == events {
				t.Fatalf("the solve with Config.DeferSaves defers %t (DeferRow %d), want %t", got, dinfo.DeferRow, !events)
			}
			grad, ginfo := kernelSourceInfo(t, c, ode.OpGrad, func(v *kernelgen.Config) { v.DeferSaves = true })
			if got, want := strings.Contains(grad, "gs_defer_grad_step(a, k") && ginfo.DeferGradRow > 0, slices.Contains(deferGradCases, c.name); got != want {
				t.Fatalf("the gradient kernel with Config.DeferSaves defers %t (DeferGradRow %d), want %t", got, ginfo.DeferGradRow, want)
			}
			for _, dt := range deferTunings {
				if dt.only != nil && !slices.Contains(dt.only, c.name) {
					continue
				}
				sameDeferRuns(t, c, c.solver(t, tuned(t, hostF64.name, dt.tun)), c.solver(t, tuned(t, hostF64.name, inlineSaves)), 0)
				sameKeptSolveTo(t, c, tuned(t, residentEngine.name, dt.tun), tuned(t, residentEngine.name, inlineSaves))
				if slices.Contains(deferGradCases, c.name) {
					sameKeptGrad(t, c, tuned(t, residentEngine.name, dt.tun), tuned(t, residentEngine.name, inlineSaves), 0)
				}
			}
			if c.name == "lorenz-40" {
				deferUnderLimit(t, c)
			}
			if c.name == "lorenz-40" || c.name == "kepler-saves" {
				c32 := c
				c32.set.RelTol, c32.set.AbsTol = 1e-4, 1e-7
				sameRuns(t, c32, c32.solver(t, tuned(t, hostF32.name, Tuning{deferSaves: true})), c32.solver(t, tuned(t, hostF32.name, inlineSaves)))
			}
		})
	}
	t.Run("no-saves", func(t *testing.T) {
		c := lorenzCase(5, 1e-6)
		c.prob.SaveAt = nil
		c.loss = ode.Loss{}
		src, _ := kernelSourceInfo(t, c, ode.OpSolve, func(*kernelgen.Config) {})
		def, _ := kernelSourceInfo(t, c, ode.OpSolve, func(v *kernelgen.Config) { v.DeferSaves = true })
		if src != def {
			t.Error("a kernel without save times: the sources differ with Config.DeferSaves")
		}
	})
}

// sameDeferRuns is sameRunsShared (shared gradients to sharedTol), or,
// for a case whose trajectories may fail (Settings.AllowFailures: no
// gradient), the two solvers' solves bit for bit.
func sameDeferRuns(t *testing.T, c engineCase, got, want *ode.Solver, sharedTol float64) {
	t.Helper()
	if !c.set.AllowFailures {
		sameRunsShared(t, c, got, want, sharedTol)
		return
	}
	sameSolves(t, c, got, want)
}

// deferUnderLimit checks case c (70 trajectories of Lorenz, 40 save
// times) under a MemoryLimit of 1 MiB, which its launch fits with 64
// rows of deferred steps but not with the first guess's 128: the rows
// are halved (deferRows; Trace's Rows), not the launch split, and the
// results are the default's bit for bit.
func deferUnderLimit(t *testing.T, c engineCase) {
	t.Helper()
	c.name += "-limit"
	c.set.MemoryLimit = 1 << 20
	eng := tuned(t, hostF64.name, Tuning{deferSaves: true, firstRows: 128})
	var tr Trace
	p := c.prob
	if _, err := c.solver(t, eng).SolveContext(WithTrace(t.Context(), &tr), &p); err != nil {
		t.Fatal(err)
	}
	if s := tr.Stats(); s.Rows <= 0 || s.Rows >= 128 || s.Launches != 1 {
		t.Errorf("%s: %d rows of deferred steps in %d launches, want fewer than 128, more than 0, in 1", c.name, s.Rows, s.Launches)
	}
	sameRuns(t, c, c.solver(t, eng), c.solver(t, tuned(t, hostF64.name, inlineSaves)))
}

// sameKeptSolveTo checks SolveTo of case c with its saves kept on the
// device (KeepSaves) on the engine got against engine want, its saves
// read back (HostSaves), bit for bit (sameSolution).
func sameKeptSolveTo(t *testing.T, c engineCase, got, want string) {
	t.Helper()
	c.set.KeepSaves = true
	var sols [2]ode.Solution
	for k, eng := range []string{got, want} {
		if _, err := c.solver(t, eng).SolveTo(&sols[k], &c.prob); err != nil {
			t.Fatalf("%s: SolveTo on %s: %v", c.name, eng, err)
		}
		if err := sols[k].HostSaves(); err != nil {
			t.Fatalf("%s: HostSaves on %s: %v", c.name, eng, err)
		}
	}
	sameSolution(t, c.name+" kept solveto", &sols[0], &sols[1])
}

// sameKeptGrad checks Grad of case c with its saves kept on the device
// (KeepSaves) on the engine got against engine want, the saves read back
// (HostSaves), bit for bit: loss, gradients (the shared ones to
// sharedTol relative) and solution.
func sameKeptGrad(t *testing.T, c engineCase, got, want string, sharedTol float64) {
	t.Helper()
	c.set.KeepSaves = true
	var gs [2]*ode.Gradient
	for k, eng := range []string{got, want} {
		g, err := c.solver(t, eng).Grad(nil, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatalf("%s: Grad on %s: %v", c.name, eng, err)
		}
		if err := g.Solution.HostSaves(); err != nil {
			t.Fatalf("%s: HostSaves on %s: %v", c.name, eng, err)
		}
		gs[k] = g
	}
	what := c.name + " kept grad"
	sameSolution(t, what, gs[0].Solution, gs[1].Solution)
	for _, f := range []struct {
		name      string
		got, want []float64
		tol       float64
	}{{"loss", []float64{gs[0].Loss}, []float64{gs[1].Loss}, 0}, {"dL/dY0", gs[0].Y0, gs[1].Y0, 0},
		{"dL/dP", gs[0].P, gs[1].P, 0}, {"dL/dShared", gs[0].Shared, gs[1].Shared, sharedTol}} {
		if len(f.got) != len(f.want) {
			t.Fatalf("%s: %s has %d values, want %d", what, f.name, len(f.got), len(f.want))
		}
		for q := range f.got {
			if math.Float64bits(f.got[q]) != math.Float64bits(f.want[q]) && !(f.tol > 0 && math.Abs(f.got[q]-f.want[q]) <= f.tol*math.Abs(f.want[q])) {
				t.Fatalf("%s: %s differs at %d: %v, want %v", what, f.name, q, f.got[q], f.want[q])
			}
		}
	}
}

// TestGPUDeferSaves is TestHostEngineDeferSaves' comparisons on the
// device ("cuda", 1,000 trajectories, the engine's layout for each
// case): the save times evaluated by the saves kernel
// (Tuning.deferSaves) against the default bit for bit, solutions and
// gradients (sameRunsShared: the shared gradients to 1e-13 relative, the
// device's atomics add them in no fixed order), the kept SolveTo and the
// kept Grad. It skips without a GPU.
//
//	cuda.test -test.run 'TestGPUDeferSaves' -test.v
func TestGPUDeferSaves(t *testing.T) {
	needGPUEngine(t)
	for _, c := range deferSavesCases(t, 1000) {
		t.Run(c.name, func(t *testing.T) {
			for _, dt := range deferTunings {
				if dt.only != nil && !slices.Contains(dt.only, c.name) {
					continue
				}
				inline := tuned(t, "cuda", inlineSaves)
				sameDeferRuns(t, c, c.solver(t, tuned(t, "cuda", dt.tun)), c.solver(t, inline), 1e-13)
				sameKeptSolveTo(t, c, tuned(t, "cuda", dt.tun), inline)
				if slices.Contains(deferGradCases, c.name) {
					sameKeptGrad(t, c, tuned(t, "cuda", dt.tun), inline, 1e-13)
				}
			}
		})
	}
}

// TestDeferByDefault checks deferByDefault's rule on the plans of Tsit5
// and Vern7 (extensions of 4 and 7 terms): solves from deferSavesFrom
// save times, gradients only with Vern7's extension.
func TestDeferByDefault(t *testing.T) {
	for _, tc := range []struct {
		method      ode.Method
		saves       int
		solve, grad bool
	}{
		{ode.Tsit5, 1, false, false}, {ode.Tsit5, deferSavesFrom - 1, false, false}, {ode.Tsit5, deferSavesFrom, true, false}, {ode.Tsit5, 1000, true, false},
		{ode.Vern7, 1, false, false}, {ode.Vern7, deferSavesFrom, true, true}, {ode.Vern7, 1000, true, true},
	} {
		c := lorenzCase(4, 1e-6)
		c.set.Method = tc.method
		pl := jobOf(t, c, ode.OpGrad).Plan
		for _, grad := range []bool{false, true} {
			v := kernelgen.Config{Adaptive: true, Saves: tc.saves, Grad: grad}
			want := tc.solve
			if grad {
				want = tc.grad
			}
			if got := deferByDefault(v, pl); got != want {
				t.Errorf("%v, %d save times, gradient %t: defers %t, want %t (extension of %d terms)", tc.method, tc.saves, grad, got, want, pl.DenseTerms)
			}
		}
	}
}
