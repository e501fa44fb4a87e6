package cuda

import (
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// divideSavesCases are TestHostEngineDivideSaves' cases: Lorenz with 40
// save times (on mesh points, repeated, at T0 and T1: quotients 0, and
// groups that divide), Lorenz with Vern7 and 300 save times (groups of
// four full and not), Kepler with the benchmark's 1,000 save times
// (BenchmarkGPUSaveSplit, about ten a step), Lorenz over [0, 1e-280]
// (steps and quotients below gs_quot's range: every group divides) and
// bouncing balls with events (the dense step of gs_saves).
func divideSavesCases(t *testing.T, n int) []engineCase {
	lorenz := saveTimesCase(t, lorenzCase(n, 1e-6), 40)
	lorenz.name = "lorenz-40"
	vern7 := saveTimesCase(t, lorenzCase(n, 1e-6), 300)
	vern7.name, vern7.set.Method = "lorenz-vern7-300", ode.Vern7
	kepler := keplerSavesCase(1000)
	kepler.prob.N = n
	tiny := lorenzCase(n, 1e-6)
	tiny.name = "lorenz-tiny"
	tiny.prob.T1 = 1e-280
	tiny.prob.SaveAt = make([]float64, 30)
	for k := range tiny.prob.SaveAt {
		tiny.prob.SaveAt[k] = tiny.prob.T1 * float64(k+1) / 30
	}
	return []engineCase{lorenz, vern7, kepler, tiny, withSaves(ballCase(n, ode.Tsit5), 9, 1.6)}
}

// TestHostEngineDivideSaves checks the dense step's save times of
// session 49 (gs_step_saves: quotients from the step's reciprocal,
// gs_quot, and a group's interpolants in one block; gs_inside without a
// division) against the form before (Tuning.divideSaves, a division a
// save time) bit for bit: solutions, losses, gradients and meshes
// (sameRuns: solve, grad with its record and on the mesh) of
// divideSavesCases on the host engine, Lorenz's also with the
// gradient's quotients kept (Tuning.keepThetas, which stores the forward
// pass's), in float32, and in lanes mode on the simulated warp; and that
// the sources differ only where the kernel has dense save times.
func TestHostEngineDivideSaves(t *testing.T) {
	needHost(t)
	for _, c := range divideSavesCases(t, 5) {
		t.Run(c.name, func(t *testing.T) {
			src, _ := kernelSourceInfo(t, c, ode.OpGrad, func(*kernelgen.Config) {})
			old, _ := kernelSourceInfo(t, c, ode.OpGrad, func(v *kernelgen.Config) { v.DivideSaves = true })
			if !strings.Contains(src, "gs_quot(tau") || strings.Contains(old, "gs_quot(tau") {
				t.Fatalf("gs_quot in the default source %t, in Config.DivideSaves' %t", strings.Contains(src, "gs_quot(tau"), strings.Contains(old, "gs_quot(tau"))
			}
			sameRuns(t, c, c.solver(t, hostF64.name), c.solver(t, tuned(t, hostF64.name, Tuning{divideSaves: true})))
			if c.name != "lorenz-40" {
				return
			}
			kept := Tuning{Layout: LayoutThread, keepThetas: true}
			keptOld := kept
			keptOld.divideSaves = true
			sameRuns(t, c, c.solver(t, tuned(t, hostF64.name, kept)), c.solver(t, tuned(t, hostF64.name, keptOld)))
			lanes := Tuning{Layout: LayoutLanes}
			lanesOld := lanes
			lanesOld.divideSaves = true
			sameRuns(t, c, c.solver(t, tuned(t, hostSim.name, lanes)), c.solver(t, tuned(t, hostSim.name, lanesOld)))
			c.set.RelTol, c.set.AbsTol = 1e-4, 1e-7
			sameRuns(t, c, c.solver(t, hostF32.name), c.solver(t, tuned(t, hostF32.name, Tuning{divideSaves: true})))
		})
	}
	t.Run("no-saves", func(t *testing.T) {
		// Without save times the key's part is left out and the
		// source is the same.
		c := lorenzCase(5, 1e-6)
		c.prob.SaveAt = nil
		c.loss = ode.Loss{}
		src, _ := kernelSourceInfo(t, c, ode.OpSolve, func(*kernelgen.Config) {})
		old, _ := kernelSourceInfo(t, c, ode.OpSolve, func(v *kernelgen.Config) { v.DivideSaves = true })
		if src != old {
			t.Error("a kernel without save times: the sources differ with Config.DivideSaves")
		}
	})
}
