package cuda

import (
	"fmt"
	"math"
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
		cases = append(cases, tc{hires, 2, []string{"grad"}, 1e-12}, tc{l96, 16, []string{"grad"}, 1e-12})
	}
	for _, x := range cases {
		t.Run(fmt.Sprintf("%s-d=%d/lanes=%d", x.c.name, x.c.prob.Field.Dim, x.lanes), func(t *testing.T) {
			t.Parallel()
			def := kernelSourceWith(t, x.c, ode.OpGrad, func(v *kernelgen.Config) { v.Wide, v.RowMajor = true, true })
			src := kernelSourceWith(t, x.c, ode.OpGrad, func(v *kernelgen.Config) { v.Wide, v.RowMajor, v.WideLanes = true, true, x.lanes })
			if def == src || !strings.Contains(src, fmt.Sprintf("#define GS_WIDE_LANES %d\n", x.lanes)) {
				t.Fatalf("WideLanes %d: the gradient kernel's source does not define GS_WIDE_LANES", x.lanes)
			}
			ref := tuned(t, "cuda-host-sim", Tuning{Layout: LayoutWide})
			eng := tuned(t, "cuda-host-sim", Tuning{Layout: LayoutWide, wideLanes: x.lanes})
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
// default, 32 and values that are not a power of two below 32 keep a
// warp per trajectory, and so does a job whose groups would not fit.
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
		{0, h100, 0},
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
