package cuda

import (
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
)

// cotGroupCases are TestHostCotGroups' cases of n trajectories: the
// gradients whose save times' cotangents the sweep computes
// (saveCotsCases' fused ones: Kepler, d = 4, and Lorenz, d = 3, with
// Tsit5 and Vern7, a data loss, shared parameters), Lorenz with tens of
// save times on a step, seven at T0 and some repeated (theta 0 inside a
// group, groups cut short by the step's last save time), and
// Lorenz-96 of d = 6, 12 and 20 with 40 save times (groups of 2 and of
// 1; at d = 20 the sweep does not compute the cotangents, so no group):
// each with the group its kernel reads (kernelgen's kernelPlan.CotGroup;
// 0 where the kernel has no SaveCots).
func cotGroupCases(n int) []struct {
	c     engineCase
	group int
} {
	type groupCase = struct {
		c     engineCase
		group int
	}
	var cs []groupCase
	for _, tc := range saveCotsCases(n) {
		if tc.fused {
			cs = append(cs, groupCase{tc.c, 4})
		}
	}
	many := lorenzCase(n, 1e-4)
	many.name = "lorenz-many-saves-grouped"
	many.prob.Field.Name = many.name
	many.prob.SaveAt = nil
	for range 7 {
		many.prob.SaveAt = append(many.prob.SaveAt, 0) // at T0
	}
	for j := 1; j <= 300; j++ {
		many.prob.SaveAt = append(many.prob.SaveAt, float64(j)/300)
		if j%37 == 0 {
			many.prob.SaveAt = append(many.prob.SaveAt, float64(j)/300, float64(j)/300) // repeated
		}
	}
	many.loss = odetest.SavedSquares()
	cs = append(cs, groupCase{many, 4})
	for _, g := range []struct{ d, group int }{{6, 2}, {12, 1}, {20, 0}} {
		c := lorenz96Case(n, g.d, ode.Tsit5)
		c.name = "lorenz96-grouped-" + string(rune('0'+g.d/10)) + string(rune('0'+g.d%10))
		c.prob.Field.Name = c.name
		c.prob.SaveAt = make([]float64, 40)
		for j := range c.prob.SaveAt {
			c.prob.SaveAt[j] = c.prob.T1 * float64(j+1) / 41
		}
		c.loss = odetest.SavedSquares()
		cs = append(cs, groupCase{c, g.group})
	}
	return cs
}

// TestHostCotGroups checks the reverse sweep that reads a group of save
// times' times and cotangents at once (kernelgen's gs_save_cots, the
// default) against the form that reads them one save time at a time
// (Tuning.ungroupedCots): the kernel's group is the case's
// (KernelInfo.CotGroup), the form with the switch, or without a group,
// is the source of the other bit for bit but for Config.Key's
// "ungrouped", and the solutions, losses and gradients of the two forms
// are the same bit for bit, with the record and on its mesh, in the
// thread layout, on a simulated warp and in float32 (Lorenz's data
// loss).
func TestHostCotGroups(t *testing.T) {
	needHost(t)
	thread := Tuning{Layout: LayoutThread}
	ungrouped := Tuning{Layout: LayoutThread, ungroupedCots: true}
	for _, tc := range cotGroupCases(6) {
		c := tc.c
		t.Run(c.name, func(t *testing.T) {
			src, info := kernelSourceInfo(t, c, ode.OpGrad, func(*kernelgen.Config) {})
			if info.SaveCots != (tc.group > 0) || info.CotGroup != tc.group {
				t.Fatalf("KernelInfo.SaveCots %t, CotGroup %d, want %t, %d", info.SaveCots, info.CotGroup, tc.group > 0, tc.group)
			}
			if got := strings.Contains(src, "gs_save_cots("); got != (tc.group > 0) {
				t.Fatalf("gs_save_cots in the gradient kernel %t, want %t", got, tc.group > 0)
			}
			old, oldInfo := kernelSourceInfo(t, c, ode.OpGrad, func(v *kernelgen.Config) { v.UngroupedCots = true })
			if strings.Contains(old, "gs_save_cots") || oldInfo.CotGroup != 0 {
				t.Fatal("Config.UngroupedCots: the sweep reads the cotangents in groups")
			}
			if tc.group == 0 {
				if src != strings.Replace(old, " ungrouped ", " ", 1) {
					t.Error("a kernel without a group: the sources differ with Config.UngroupedCots")
				}
				return
			}
			sameRunsLoss(t, c, c.solver(t, tuned(t, "cuda-host", thread)), c.solver(t, tuned(t, "cuda-host", ungrouped)), "ungrouped cotangents")
			switch c.name {
			case "lorenz-data":
				c := c
				c.set.RelTol, c.set.AbsTol = 1e-4, 1e-7
				sameRuns(t, c, c.solver(t, tuned(t, "cuda-host-f32", thread)), c.solver(t, tuned(t, "cuda-host-f32", ungrouped)))
			case "lorenz-shared-saves", "lorenz-many-saves-grouped":
				sameRuns(t, c, c.solver(t, tuned(t, "cuda-host-sim", thread)), c.solver(t, tuned(t, "cuda-host-sim", ungrouped)))
			}
		})
	}
}

// TestGPUCotGroups is TestHostCotGroups' comparisons on the device
// ("cuda", 1,000 trajectories): the grouped sweep against
// Tuning.ungroupedCots bit for bit but the shared gradients (to 1e-13
// relative: the device adds them with atomics in no fixed order).
//
//	cuda.test -test.run 'TestGPUCotGroups' -test.v
func TestGPUCotGroups(t *testing.T) {
	needGPUEngine(t)
	ungrouped := tuned(t, "cuda", Tuning{ungroupedCots: true})
	for _, tc := range cotGroupCases(1000) {
		c := tc.c
		if tc.group == 0 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			sameRunsShared(t, c, c.solver(t, "cuda"), c.solver(t, ungrouped), 1e-13)
		})
	}
}

// TestHostKeptThetas checks the reverse sweep that reads its save times'
// quotients theta = (tau - t_s) / h from the forward pass
// (Tuning.keepThetas: kernelgen's Config.KeepThetas, where the sweep
// reads its cotangents in groups) against the default that divides
// again, on cotGroupCases (Tsit5 and Vern7, a data loss, shared
// parameters, save times at T0, on step 0 and repeated, groups of 4, 2
// and 1): the kernel with the switch keeps them where it has a group
// (KernelInfo.KeepThetas), the default never, a kernel without a group
// is the default's source bit for bit but for Config.Key's "thetas",
// and the solutions, losses and gradients of the two forms are the same
// bit for bit, with the record and on its mesh, in the thread layout, in
// the lanes layout on a simulated warp (one lane writes the quotients,
// every lane reads them), and in float32 (Lorenz's data loss).
func TestHostKeptThetas(t *testing.T) {
	needHost(t)
	thread := Tuning{Layout: LayoutThread}
	kept := Tuning{Layout: LayoutThread, keepThetas: true}
	for _, tc := range cotGroupCases(6) {
		c := tc.c
		t.Run(c.name, func(t *testing.T) {
			const write = "a.tb[(long long)(k + j) * a.n + i] = th[j];"
			src, info := kernelSourceInfo(t, c, ode.OpGrad, func(v *kernelgen.Config) { v.KeepThetas = true })
			if info.KeepThetas != (tc.group > 0) || strings.Contains(src, write) != (tc.group > 0) {
				t.Fatalf("KernelInfo.KeepThetas %t, the forward pass writes the quotients %t, want %t", info.KeepThetas, strings.Contains(src, write), tc.group > 0)
			}
			def, defInfo := kernelSourceInfo(t, c, ode.OpGrad, func(*kernelgen.Config) {})
			if defInfo.KeepThetas || strings.Contains(def, write) || strings.Contains(def, "bool kept") {
				t.Fatal("the default kernel keeps the quotients")
			}
			if tc.group == 0 {
				if def != strings.Replace(src, " thetas ", " ", 1) {
					t.Error("a kernel without a group: the sources differ with Config.KeepThetas")
				}
				return
			}
			sameRunsLoss(t, c, c.solver(t, tuned(t, "cuda-host", kept)), c.solver(t, tuned(t, "cuda-host", thread)), "divided quotients")
			switch c.name {
			case "lorenz-data":
				c := c
				c.set.RelTol, c.set.AbsTol = 1e-4, 1e-7
				sameRuns(t, c, c.solver(t, tuned(t, "cuda-host-f32", kept)), c.solver(t, tuned(t, "cuda-host-f32", thread)))
			case "lorenz-weighted-vern7", "lorenz-many-saves-grouped":
				lanes := Tuning{Layout: LayoutLanes}
				lanesKept := lanes
				lanesKept.keepThetas = true
				sameRuns(t, c, c.solver(t, tuned(t, "cuda-host-sim", lanesKept)), c.solver(t, tuned(t, "cuda-host-sim", lanes)))
			case "lorenz-shared-saves":
				sameRuns(t, c, c.solver(t, tuned(t, "cuda-host-sim", kept)), c.solver(t, tuned(t, "cuda-host-sim", thread)))
			}
		})
	}
}

// TestGPUKeptThetas is TestHostKeptThetas' comparisons on the device
// ("cuda", 1,000 trajectories): the sweep that reads the forward pass's
// quotients (Tuning.keepThetas) against the default's bit for bit but the shared
// gradients (to 1e-13 relative: the device adds them with atomics in no
// fixed order).
//
//	cuda.test -test.run 'TestGPUKeptThetas' -test.v
func TestGPUKeptThetas(t *testing.T) {
	needGPUEngine(t)
	kept := tuned(t, "cuda", Tuning{keepThetas: true})
	for _, tc := range cotGroupCases(1000) {
		c := tc.c
		if tc.group == 0 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			sameRunsShared(t, c, c.solver(t, kept), c.solver(t, "cuda"), 1e-13)
		})
	}
}

// TestHostDivideSaves checks the save times' quotients from one
// reciprocal of the step's size a step (prelude's gs_rcp and gs_quot,
// the default) against a division a save time (Tuning.divideSaves:
// kernelgen's Config.DivideSaves), in the forward pass's gs_step_saves
// (solves, records and gradients) and the grouped sweep's gs_coef_bar,
// on cotGroupCases (Kepler and Lorenz with Tsit5 and Vern7, a data loss,
// shared parameters, save times at T0, on mesh points and repeated, where
// x = tau - t is 0 and gs_quot refuses the group, groups of 4, 2 and 1,
// d = 20 without a group): the switch's sources hold no gs_quot, the
// default's gradient kernel does, and the solutions, losses and
// gradients are the same bit for bit, with the record and on its mesh,
// in the thread layout, on a simulated warp in the lanes layout (Vern7,
// many save times) and in float32 (Lorenz's data loss).
func TestHostDivideSaves(t *testing.T) {
	needHost(t)
	thread := Tuning{Layout: LayoutThread}
	divide := Tuning{Layout: LayoutThread, divideSaves: true}
	for _, tc := range cotGroupCases(6) {
		c := tc.c
		t.Run(c.name, func(t *testing.T) {
			src := kernelSourceWith(t, c, ode.OpGrad, func(*kernelgen.Config) {})
			old := kernelSourceWith(t, c, ode.OpGrad, func(v *kernelgen.Config) { v.DivideSaves = true })
			if !strings.Contains(src, "gs_quot(tau[j] - t, h, rh") || strings.Contains(old, "gs_quot(tau") {
				t.Fatal("gs_quot: in the default's forward pass, not with Config.DivideSaves")
			}
			if got := strings.Contains(src, "gs_quot(tau[j] - ts, h, rh"); got != (tc.group > 0) {
				t.Fatalf("gs_quot in the grouped sweep %t, want %t", got, tc.group > 0)
			}
			sameRunsLoss(t, c, c.solver(t, tuned(t, "cuda-host", thread)), c.solver(t, tuned(t, "cuda-host", divide)), "divided quotients")
			switch c.name {
			case "lorenz-data":
				c := c
				c.set.RelTol, c.set.AbsTol = 1e-4, 1e-7
				sameRuns(t, c, c.solver(t, tuned(t, "cuda-host-f32", thread)), c.solver(t, tuned(t, "cuda-host-f32", divide)))
			case "lorenz-weighted-vern7", "lorenz-many-saves-grouped":
				lanes := Tuning{Layout: LayoutLanes}
				lanesDivide := lanes
				lanesDivide.divideSaves = true
				sameRuns(t, c, c.solver(t, tuned(t, "cuda-host-sim", lanes)), c.solver(t, tuned(t, "cuda-host-sim", lanesDivide)))
			}
		})
	}
}

// TestGPUDivideSaves is TestHostDivideSaves' and
// TestHostEngineDivideSaves' comparisons on the device ("cuda", 1,000
// trajectories, the engine's layout for each case): the quotients from
// one reciprocal a step (__drcp_rn and gs_quot) against
// Tuning.divideSaves bit for bit but the shared gradients (to 1e-13
// relative: the device adds them with atomics in no fixed order).
//
//	cuda.test -test.run 'TestGPUDivideSaves' -test.v
func TestGPUDivideSaves(t *testing.T) {
	needGPUEngine(t)
	divide := tuned(t, "cuda", Tuning{divideSaves: true})
	for _, tc := range cotGroupCases(1000) {
		c := tc.c
		t.Run(c.name, func(t *testing.T) {
			sameRunsShared(t, c, c.solver(t, "cuda"), c.solver(t, divide), 1e-13)
		})
	}
	for _, c := range divideSavesCases(t, 1000) {
		t.Run(c.name, func(t *testing.T) {
			sameRunsShared(t, c, c.solver(t, "cuda"), c.solver(t, divide), 1e-13)
		})
	}
}
