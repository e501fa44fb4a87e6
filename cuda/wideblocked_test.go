package cuda

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// TestHostWideBlockedSame checks the blocked element split of the wide
// layout (Tuning.wideBlocked, kernelgen.Config.WideBlocked: a block of
// consecutive components a lane, Lorenz-96's stage inputs and
// derivatives in registers, their neighbours across the blocks' ends by
// shuffles) against the default's cyclic split on the simulated warp, bit
// for bit: Lorenz-96 with Tsit5 at d = 64 (by default: 16 lanes a
// trajectory) and d = 256 (a warp), per-trajectory forcing
// only (wideCase), with two shared parameters (wideSharedCase), with
// save times and shared parameters (wideSavesCase) and lorenz96Case's
// one save time, and at d = 64 with Vern7 (lorenz96Case); the gradient
// with the record and (d = 64) the solve, at d = 64 also on a warp (2
// rows a lane). Without -long four of these run (d = 64 with shared
// parameters, by default and on a warp, d = 64 on 16 lanes with save
// times, d = 256 with shared parameters). The sources: the blocked
// kernel runs some loops blocked (GS_WNB's neighbours, block-private
// arrays) and the reverse step's window loops with sums blocked, their
// neighbours' reads from the lane's block (GS_WNBF), the default's none.
// It fails if a bit of a result differs or if the switch does not reach
// the source.
func TestHostWideBlockedSame(t *testing.T) {
	needHost(t)
	t.Parallel()
	type variant struct {
		name string
		c    engineCase
		tun  Tuning
		ops  []string
	}
	var vs []variant
	for _, d := range []int{64, 256} {
		l96 := lorenz96Case(3, d, ode.Tsit5)
		l96.prob.T1 = 0.25
		cases := []engineCase{wideCase(3, d), wideSharedCase(3, d), wideSavesCase(3, d), l96}
		if d == 64 {
			v7 := lorenz96Case(3, d, ode.Vern7)
			v7.prob.T1 = 0.25
			cases = append(cases, v7)
		}
		for i, c := range cases {
			c.name = []string{"final", "shared", "saves", "save", "vern7"}[i]
			c.prob.T1 = min(c.prob.T1, 0.5)
			if d == 256 {
				c.prob.N, c.prob.Y0, c.prob.P = 2, c.prob.Y0[:2*d], c.prob.P[:2*c.prob.Field.Params]
				vs = append(vs, variant{fmt.Sprintf("%s-%d", c.name, d), c, Tuning{Layout: LayoutWide}, []string{"grad"}})
				continue
			}
			vs = append(vs, variant{fmt.Sprintf("%s-%d", c.name, d), c, Tuning{Layout: LayoutWide}, []string{"grad", "solve"}},
				variant{fmt.Sprintf("%s-%d-lanes16", c.name, d), c, Tuning{Layout: LayoutWide, wideLanes: 16}, []string{"grad"}},
				// On a warp: 2 rows a lane, fewer than a window loop's
				// reach (GS_WNBF's shared reads).
				variant{fmt.Sprintf("%s-%d-warp", c.name, d), c, Tuning{Layout: LayoutWide, wideLanes: -1}, []string{"grad"}})
		}
	}
	if !longTests() {
		// Three of them (minutes of g++ on two cores each); -long: all.
		vs = slices.DeleteFunc(vs, func(x variant) bool {
			return x.name != "shared-64" && x.name != "saves-64-lanes16" && x.name != "shared-64-warp" && x.name != "shared-256"
		})
	}
	for _, x := range vs {
		t.Run(x.name, func(t *testing.T) {
			t.Parallel()
			blk := x.tun
			blk.wideBlocked = true
			for _, op := range x.ops {
				want := wideResults(t, x.c, tuned(t, "cuda-host-sim-227k", x.tun), op)
				got := wideResults(t, x.c, tuned(t, "cuda-host-sim-227k", blk), op)
				sameWideResults(t, op, "blocked", "cyclic", got, want)
			}
		})
	}
	for _, d := range []int{64, 256} {
		c := wideSharedCase(3, d)
		for _, blocked := range []bool{false, true} {
			src := kernelSourceWith(t, c, ode.OpGrad, func(v *kernelgen.Config) {
				v.Wide, v.RowMajor, v.WideRows, v.WideBlocked = true, true, true, blocked
			})
			nb, decl := strings.Count(src, "GS_WNB(gs_"), strings.Count(src, "block-private: ")
			// The reverse step's window loops with sums (the field VJP's
			// six of its ten: the other four touch the lanes' own rows).
			// Their reads of the stage inputs and the state at their
			// neighbours: from the lane's block (GS_WNBF), 3 a loop.
			win, cyc, regs := strings.Count(src, "a window loop blocked: "), strings.Count(src, "gs_c0 += GS_WSTRIDE"), strings.Count(src, "GS_WNBF(gs_")
			if blocked != (nb > 0) || blocked != (decl > 0) || blocked != (win >= 6) || blocked != (regs >= 3*6) || !blocked && win > 0 {
				t.Errorf("d = %d, WideBlocked %v: %d neighbours' reads by GS_WNB, %d block-private arrays, %d window loops blocked, %d of their reads from the lane's block", d, blocked, nb, decl, win, regs)
			}
			t.Logf("d = %d, WideBlocked %v: %d B of source, %d neighbours' reads by GS_WNB, %d block-private arrays, %d window loops blocked (%d cyclic), %d of their reads from the lane's block", d, blocked, len(src), nb, decl, win, cyc, regs)
		}
		// Tuning.wideCyclicWindows: blocked, the window loops cyclic
		// (session 48's form, the device's A/B).
		src := kernelSourceWith(t, c, ode.OpGrad, func(v *kernelgen.Config) {
			v.Wide, v.RowMajor, v.WideRows, v.WideBlocked, v.WideWindowsCyclic = true, true, true, true, true
		})
		if nb, win := strings.Count(src, "GS_WNB(gs_"), strings.Count(src, "a window loop blocked: "); nb == 0 || win > 0 || strings.Contains(src, "GS_WNBF(gs_") {
			t.Errorf("d = %d, WideWindowsCyclic: %d neighbours' reads by GS_WNB, %d window loops blocked", d, nb, win)
		}
	}
}

// TestGPUWideBlockedSame is TestHostWideBlockedSame on the device:
// Lorenz-96 (d = 64 and 256, 1,000 trajectories, the large-state suite's
// tolerances, wideBenchGradCase) in the blocked element split
// (Tuning.wideBlocked) against the default: the solve, the gradient with
// the record and the gradient on the mesh bit for bit (sameRuns). It
// skips without a GPU.
func TestGPUWideBlockedSame(t *testing.T) {
	needGPUEngine(t)
	for _, d := range []int{64, 256} {
		c := wideBenchGradCase(1000, d)
		t.Run(fmt.Sprintf("d=%d", d), func(t *testing.T) {
			sameRuns(t, c, c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide, wideBlocked: true})), c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide})))
		})
	}
}
