package cuda

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// TestHostLanesRolled: a network past kernelgen.LaneRollMinShared
// weights, widths not multiples of 32, has its lanes kernels' repeated
// statements (the layers' reverse row by row) rolled into loops, and the
// host engine's gradient and solution with them are the unrolled
// kernels' (Tuning.unrolled) bit for bit and near the CPU engine's; a
// network below the bound is not rolled.
func TestHostLanesRolled(t *testing.T) {
	needHost(t)
	t.Parallel()
	// A network size no other test uses (8,274 weights).
	c := mlpCase(3, []int{2, 88, 88, 2})
	c.prob.T1, c.prob.SaveAt = 0.3, []float64{0.1}
	if c.prob.Field.Shared < kernelgen.LaneRollMinShared {
		t.Fatalf("%d weights: below LaneRollMinShared", c.prob.Field.Shared)
	}
	src := func(c engineCase, unrolled bool) string {
		return kernelSourceWith(t, c, ode.OpGrad, func(v *kernelgen.Config) { v.Lanes, v.Unrolled = true, unrolled })
	}
	rolled, unrolled := src(c, false), src(c, true)
	t.Logf("gradient kernel source: %d bytes unrolled, %d rolled (%d loops)", len(unrolled), len(rolled), strings.Count(rolled, "// rolled: "))
	if !strings.Contains(rolled, "// rolled: ") || strings.Contains(unrolled, "// rolled: ") || 5*len(rolled) > 4*len(unrolled) {
		t.Errorf("rolled source %d bytes (loops %v), unrolled %d (loops %v): want loops only in the rolled one, and it at most 4/5 of the unrolled one",
			len(rolled), strings.Contains(rolled, "// rolled: "), len(unrolled), strings.Contains(unrolled, "// rolled: "))
	}
	if small := src(mlpCase(3, []int{2, 32, 32, 2}), false); strings.Contains(small, "// rolled: ") {
		t.Errorf("2-32-32-2 (%d weights) rolled, below LaneRollMinShared", mlpCase(3, []int{2, 32, 32, 2}).prob.Field.Shared)
	}
	grad := func(unrolled bool) *ode.Gradient {
		g, err := c.solver(t, tuned(t, "cuda-host", Tuning{Layout: LayoutLanes, unrolled: unrolled})).Grad(nil, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	on, off := grad(false), grad(true)
	if on.Loss != off.Loss {
		t.Errorf("loss: rolled %v, unrolled %v", on.Loss, off.Loss)
	}
	for _, x := range []struct {
		name   string
		on, of []float64
	}{{"dL/dy0", on.Y0, off.Y0}, {"dL/dshared", on.Shared, off.Shared}, {"y", on.Solution.Y, off.Solution.Y}} {
		if len(x.on) != len(x.of) || len(x.on) == 0 {
			t.Fatalf("%s: %d and %d values", x.name, len(x.on), len(x.of))
		}
		for k := range x.on {
			if x.on[k] != x.of[k] {
				t.Errorf("%s[%d]: rolled %v, unrolled %v", x.name, k, x.on[k], x.of[k])
				break
			}
		}
	}
	kinds := map[bool]bool{}
	for _, s := range hostGradSources(t, c.prob.Field.Shared) {
		kinds[strings.Contains(s, "// rolled: ")] = true
	}
	if !kinds[true] || !kinds[false] {
		t.Fatalf("gradient kernels compiled: rolled %v, unrolled %v; want both", kinds[true], kinds[false])
	}
	want, err := c.solver(t, "cpu").Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	closeRows(t, "dL/dy0", on.Y0, want.Y0, c.prob.Field.Dim, 1e-10, nil)
	closeRows(t, "dL/dshared", on.Shared, want.Shared, len(want.Shared), 1e-10, nil)
}

// TestGPULanesRolled measures, on the device with the disk cache off,
// the gradient of MLP fields 2-w-w-2 (w = 128; mlpCase, Tsit5, n =
// 4096) with lanes kernels rolled (the default from LaneRollMinShared
// weights) and unrolled (Tuning.unrolled): the first Grad's compile
// time, then warm Grads alternating between the two (kernel time,
// median of 7), and checks that both give the same loss and dL/dy0 bit
// for bit, dL/dshared to the rounding of the device's atomics. Since
// LaneRollMinShared rose past 2-64-64-2 (rolled, its kernel was slower)
// only w = 128 is measured. It skips without a GPU.
func TestGPULanesRolled(t *testing.T) {
	needGPUEngine(t)
	t.Setenv("GRADSOLVE_CUDA_CACHE", "off")
	for _, w := range []int{128} {
		c := mlpCase(4096, []int{2, w, w, 2})
		var svs [2]*ode.Solver
		var gs [2]*ode.Gradient
		var kernels [2][]float64
		for k, unrolled := range []bool{false, true} {
			// (Engines of their own, FastCompileFrom as the default's:
			// no kernel an earlier test compiled in this process.)
			svs[k] = c.solver(t, tuned(t, "cuda", Tuning{unrolled: unrolled, FastCompileFrom: defaultFastCompileFrom}))
			g, st := c.tracedGrad(t, svs[k])
			gs[k] = g
			t.Logf("2-%d-%d-2 rolled %v: first Grad compile %.2f s, layout %s", w, w, !unrolled, st.Compile.Seconds(), st.Layout)
		}
		for range 7 {
			for k := range svs {
				_, st := c.tracedGrad(t, svs[k])
				kernels[k] = append(kernels[k], st.Kernel.Seconds()*1e3)
			}
		}
		for k := range kernels {
			slices.Sort(kernels[k])
		}
		t.Logf("2-%d-%d-2 warm Grad kernels: rolled %.3f ms, unrolled %.3f ms (medians of 7, alternated)", w, w, kernels[0][3], kernels[1][3])
		if gs[0].Loss != gs[1].Loss {
			t.Errorf("2-%d-%d-2 loss: rolled %v, unrolled %v", w, w, gs[0].Loss, gs[1].Loss)
		}
		// (The device adds the warps' weight gradients with atomics in
		// no fixed order: two calls' dL/dshared agree to rounding.)
		closeShared(t, fmt.Sprintf("2-%d-%d-2 dL/dshared, rolled against unrolled", w, w), gs[0].Shared, gs[1].Shared, int64(c.prob.N))
		for k := range gs[0].Y0 {
			if gs[0].Y0[k] != gs[1].Y0[k] {
				t.Errorf("2-%d-%d-2 dL/dy0[%d]: rolled %v, unrolled %v", w, w, k, gs[0].Y0[k], gs[1].Y0[k])
				break
			}
		}
	}
}
