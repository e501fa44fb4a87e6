package cuda

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// saveCotsCases are TestHostSaveCots' cases of n trajectories: a
// gradient with 30 save times (40 for Kepler) whose loss is, or is not
// (fused false), a sum of terms of one save time each (kernelgen's
// savecot.go).
func saveCotsCases(n int) []struct {
	c     engineCase
	fused bool
} {
	const k = 30
	saves := func(c engineCase, name string) engineCase {
		c.name = name
		c.prob.SaveAt = make([]float64, k)
		for j := range c.prob.SaveAt {
			c.prob.SaveAt[j] = float64(j+1) / (k + 1)
		}
		c.prob.Field.Name = name
		return c
	}
	weighted := saves(lorenzCase(n, 1e-7), "lorenz-weighted")
	// Weights by component (k%3 is the component at d = 3), a term of
	// the final state besides.
	weighted.loss = ode.Loss{Name: "weighted-loss", F: func(y, ys, _ []tape.V) tape.V {
		s := y[0].Mul(y[1])
		for k, x := range ys {
			s = s.Add(x.Square().MulC(1 + float64(k%3)))
		}
		return s
	}}
	vern := weighted
	vern.name += "-vern7"
	vern.set.Method = ode.Vern7
	data := saves(lorenzCase(n, 1e-7), "lorenz-data")
	r := rand.New(rand.NewPCG(7, 8))
	// Squared distances from each save time's data row, weighted by a
	// parameter (read at every save time), and a mean.
	data.loss = ode.Loss{Name: "data-loss", Mean: true, DataDim: 3 * k, Data: make([]float64, n*3*k),
		FP: func(y, ys, d, p, _ []tape.V) tape.V {
			s := p[1].Mul(y[0])
			for k, x := range ys {
				s = s.Add(x.Sub(d[k]).Square().Mul(p[0]))
			}
			return s
		}}
	for j := range data.loss.Data {
		data.loss.Data[j] = 10 * r.Float64()
	}
	// Residuals weighted by component (a constant shared by the save
	// times: lossform compares the cones with their constants first).
	dataW := saves(lorenzCase(n, 1e-7), "lorenz-data-weighted")
	dataW.loss = ode.Loss{Name: "data-weighted-loss", DataDim: 3 * k, Data: data.loss.Data,
		F: func(_, ys, d []tape.V) tape.V {
			s := ys[0].Sub(d[0]).Square().MulC(0.5)
			for k, x := range ys[1:] {
				s = s.Add(x.Sub(d[k+1]).Square().MulC(0.5 + float64((k+1)%3)))
			}
			return s
		}}
	shared := saves(lorenzSharedCase(n), "lorenz-shared-saves")
	// The terms read a shared parameter and the final state.
	shared.loss = ode.Loss{Name: "shared-saves-loss", Mean: true, FP: func(y, ys, _, p, s []tape.V) tape.V {
		u := s[0].Mul(y[1]).Add(p[0])
		for _, x := range ys {
			u = u.Add(x.Square().Mul(s[1]).Mul(y[0]))
		}
		return u
	}}
	// Weights that do not repeat with the save times (k%5 at d = 3): each
	// save time's cotangents a function of its own.
	uneven := saves(lorenzCase(n, 1e-7), "lorenz-uneven")
	uneven.loss = ode.Loss{Name: "uneven-loss", F: func(_, ys, _ []tape.V) tape.V {
		s := ys[0].Square()
		for k, x := range ys[1:] {
			s = s.Add(x.Square().MulC(1 + float64((k+1)%5)))
		}
		return s
	}}
	// The square of a sum: every cotangent reads every save time.
	mixed := saves(lorenzCase(n, 1e-7), "lorenz-mixed")
	mixed.loss = ode.Loss{Name: "mixed-loss", F: func(_, ys, _ []tape.V) tape.V {
		s := ys[0]
		for _, x := range ys[1:] {
			s = s.Add(x)
		}
		return s.Square()
	}}
	kepler := keplerSavesCase(40)
	kepler.prob.N = n
	return []struct {
		c     engineCase
		fused bool
	}{{kepler, true}, {weighted, true}, {vern, true}, {data, true}, {dataW, true}, {shared, true}, {uneven, false}, {mixed, false}}
}

// TestHostSaveCots checks the save times' cotangents computed in the
// reverse sweep (kernelgen's savecot.go, the default) against the loss
// VJP's stored ones (Tuning.StoreSaveCots): the gradient kernel has
// gs_save_cot exactly where the loss is a sum of one save time's terms
// (KernelInfo.SaveCots: no array of cotangents), and the solutions,
// losses and gradients of the two forms are the same bit for bit, with
// the record and on its mesh, in float64 and float32 and on a simulated
// warp; and against the CPU engine.
func TestHostSaveCots(t *testing.T) {
	needHost(t)
	stored := Tuning{StoreSaveCots: true}
	for _, tc := range saveCotsCases(6) {
		c := tc.c
		t.Run(c.name, func(t *testing.T) {
			src, info := kernelSourceInfo(t, c, ode.OpGrad, func(*kernelgen.Config) {})
			if got := strings.Contains(src, "gs_save_cot("); got != tc.fused || info.SaveCots != tc.fused {
				t.Fatalf("gs_save_cot in the gradient kernel %t, KernelInfo.SaveCots %t, want %t", got, info.SaveCots, tc.fused)
			}
			old, oldInfo := kernelSourceInfo(t, c, ode.OpGrad, func(v *kernelgen.Config) { v.StoreSaveCots = true })
			if strings.Contains(old, "gs_save_cot") || oldInfo.SaveCots {
				t.Fatal("Config.StoreSaveCots: the kernel computes the cotangents in the sweep")
			}
			if !tc.fused {
				// (Config.Key, in the source's head, names the switch.)
				if src != strings.Replace(old, " storecots ", " ", 1) {
					t.Error("a loss without the form: the sources differ with Config.StoreSaveCots")
				}
				return
			}
			want, got := c.solver(t, tuned(t, "cuda-host", stored)), c.solver(t, "cuda-host")
			sameRunsLoss(t, c, got, want, "stored cotangents")
			switch c.name {
			case "lorenz-data":
				c := c
				c.set.RelTol, c.set.AbsTol = 1e-4, 1e-7
				sameRuns(t, c, c.solver(t, "cuda-host-f32"), c.solver(t, tuned(t, "cuda-host-f32", stored)))
			case "lorenz-shared-saves":
				sim := Tuning{Layout: LayoutThread}
				simStored := Tuning{Layout: LayoutThread, StoreSaveCots: true}
				sameRuns(t, c, c.solver(t, tuned(t, "cuda-host-sim", sim)), c.solver(t, tuned(t, "cuda-host-sim", simStored)))
			}
			if c.name != "kepler-saves" { // (its orbits amplify the host libm's last bits: the Lorenz cases compare)
				compareEngines(t, "cuda-host", c, caseOpts{ops: []string{"grad", "gradmesh"}})
			}
		})
	}
}

// TestGPUSaveCots is TestHostSaveCots' comparisons on the device
// ("cuda", 1,000 trajectories): the save times' cotangents computed in
// the sweep against the stored ones (Tuning.StoreSaveCots) bit for bit
// but the shared gradients (to 1e-13 relative: the device adds them
// with atomics in no fixed order; session 44's call 2 found the two forms'
// dL/dShared apart in the last bits), and against the CPU engine.
//
//	cuda.test -test.run 'TestGPUSaveCots' -test.v
func TestGPUSaveCots(t *testing.T) {
	needGPUEngine(t)
	stored := tuned(t, "cuda", Tuning{StoreSaveCots: true})
	for _, tc := range saveCotsCases(1000) {
		c := tc.c
		if !tc.fused {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			if c.name == "lorenz-shared-saves" {
				// The shared sums of two runs of one form, then the two
				// forms' largest relative difference: whether a
				// difference between the forms is theirs or the
				// device's order of summation.
				sharedDiff(t, c, stored, stored)
				sharedDiff(t, c, "cuda", stored)
			}
			// (The shared sums' atomics: dL/dShared to rounding.)
			sameRunsShared(t, c, c.solver(t, "cuda"), c.solver(t, stored), 1e-13)
			if c.name != "kepler-saves" {
				compareEngines(t, "cuda", c, caseOpts{ops: []string{"grad", "gradmesh"}})
			}
		})
	}
}

// sharedDiff logs the largest relative difference between the shared
// gradients of case c's gradient with the record on engines a and b
// (their own solvers).
func sharedDiff(t *testing.T, c engineCase, a, b string) {
	t.Helper()
	p := c.prob
	ga, err := c.solver(t, a).Grad(nil, &p, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := c.solver(t, b).Grad(nil, &p, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	var worst float64
	for i := range ga.Shared {
		worst = math.Max(worst, math.Abs(ga.Shared[i]-gb.Shared[i])/math.Max(math.Abs(gb.Shared[i]), 1e-300))
	}
	t.Logf("%s: dL/dShared of %s against %s: largest relative difference %.3g (%d entries)", c.name, a, b, worst, len(ga.Shared))
}
