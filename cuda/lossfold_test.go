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

// lossFoldCases are TestHostLossFold's cases of n trajectories: a
// gradient with 30 save times (40 for Kepler) whose loss's value is, or
// is not (fold false), a left fold over the save times that the forward
// pass can run (kernelgen's lossfold.go); every one's cotangents are
// computed in the sweep (savecot.go).
func lossFoldCases(n int) []struct {
	c    engineCase
	fold bool
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
	// Weights by component (k%3 is the component at d = 3), from save
	// time 0's term.
	weighted := saves(lorenzCase(n, 1e-7), "lorenz-fold-weighted")
	weighted.loss = ode.Loss{Name: "fold-weighted-loss", F: func(_, ys, _ []tape.V) tape.V {
		s := ys[0].Square()
		for k, x := range ys[1:] {
			s = s.Add(x.Square().MulC(1 + float64((k+1)%3)))
		}
		return s
	}}
	vern := weighted
	vern.name += "-vern7"
	vern.set.Method = ode.Vern7
	// Squared distances from each save time's data row weighted by a
	// parameter, from a parameter's seed; after the fold a term of the
	// final state and a parameter, and a mean: the value reads the
	// parameters and the data, the VJP's dL/dp the saved states.
	data := saves(lorenzCase(n, 1e-7), "lorenz-fold-data")
	r := rand.New(rand.NewPCG(46, 2))
	data.loss = ode.Loss{Name: "fold-data-loss", Mean: true, DataDim: 3 * k, Data: make([]float64, n*3*k),
		FP: func(y, ys, d, p, _ []tape.V) tape.V {
			s := p[2].Mul(p[0])
			for k, x := range ys {
				s = s.Add(x.Sub(d[k]).Square().Mul(p[0]))
			}
			return s.Add(p[1].Mul(y[0])).MulC(0.5)
		}}
	for j := range data.loss.Data {
		data.loss.Data[j] = 10 * r.Float64()
	}
	// Shared parameters in the terms and after the fold (the loss VJP
	// accumulates dL/ds).
	shared := saves(lorenzSharedCase(n), "lorenz-fold-shared")
	shared.loss = ode.Loss{Name: "fold-shared-loss", Mean: true, FP: func(y, ys, _, _, s []tape.V) tape.V {
		u := ys[0].Square().Mul(s[1])
		for _, x := range ys[1:] {
			u = u.Add(x.Square().Mul(s[1]))
		}
		return u.Mul(s[0]).Add(y[1])
	}}
	// dL/ds of a form the loss VJP accumulates (planAcc), with the fold
	// and without.
	sharedAcc := saves(lorenzSharedCase(n), "lorenz-fold-shared-acc")
	sharedAcc.loss = ode.Loss{Name: "fold-shared-acc-loss", Mean: true, FP: func(_, ys, _, p, s []tape.V) tape.V {
		u := ys[0].Square().Mul(s[1])
		for _, x := range ys[1:] {
			u = u.Add(x.Square().Mul(s[1]))
		}
		return u.Add(s[0].Mul(p[0]))
	}}
	// A fold from the final state: cotangents in the sweep, the value in
	// the loss VJP.
	seeded := saves(lorenzCase(n, 1e-7), "lorenz-fold-seeded")
	seeded.loss = ode.Loss{Name: "fold-seeded-loss", F: func(y, ys, _ []tape.V) tape.V {
		s := y[0].Mul(y[1])
		for _, x := range ys {
			s = s.Add(x.Square())
		}
		return s
	}}
	kepler := keplerSavesCase(40)
	kepler.prob.N = n
	return []struct {
		c    engineCase
		fold bool
	}{{kepler, true}, {weighted, true}, {vern, true}, {data, true}, {shared, true}, {sharedAcc, true}, {seeded, false}}
}

// TestHostLossFold checks the loss's value folded in the forward pass
// (kernelgen's lossfold.go, session 46): the gradient kernel folds
// exactly where the loss is of the form (KernelInfo.LossFold), its loss
// is that of Solver.Loss (the loss kernel's, no fold) bit for bit, in
// float64, float32 and on a simulated warp, and its solutions, losses
// and gradients, with the record and on its mesh, are the CPU engine's.
func TestHostLossFold(t *testing.T) {
	needHost(t)
	for _, tc := range lossFoldCases(6) {
		c := tc.c
		t.Run(c.name, func(t *testing.T) {
			src, info := kernelSourceInfo(t, c, ode.OpGrad, func(*kernelgen.Config) {})
			if !info.SaveCots {
				t.Fatal("the cotangents are not computed in the sweep")
			}
			if got := strings.Contains(src, "gs_a_fold_first("); got != tc.fold || info.LossFold != tc.fold {
				t.Fatalf("gs_a_fold_first( in the gradient kernel %t, KernelInfo.LossFold %t, want %t", got, info.LossFold, tc.fold)
			}
			const acc = "gs_a_loss_grad(sh, GS_LOSS_ACC_AT"
			if want := c.name == "lorenz-fold-shared-acc"; strings.Contains(src, acc) != want {
				t.Fatalf("the loss VJP accumulates dL/ds: %t, want %t", strings.Contains(src, acc), want)
			}
			if !tc.fold {
				return
			}
			sameLossAsGrad(t, c, "cuda-host")
			switch c.name {
			case "lorenz-fold-data":
				c := c
				c.set.RelTol, c.set.AbsTol = 1e-4, 1e-7
				sameLossAsGrad(t, c, "cuda-host-f32")
			case "lorenz-fold-shared":
				sameLossAsGrad(t, c, tuned(t, "cuda-host-sim", Tuning{Layout: LayoutThread}))
			}
			if c.name != "kepler-saves" { // (its orbits amplify the host libm's last bits: the Lorenz cases compare)
				compareEngines(t, "cuda-host", c, caseOpts{ops: []string{"grad", "gradmesh"}})
			}
		})
	}
}

// TestGPULossFold is TestHostLossFold's comparisons on the device
// ("cuda", 1,000 trajectories): the loss's value folded in the forward
// pass that of Solver.Loss bit for bit, and the results against the CPU
// engine.
//
//	cuda.test -test.run 'TestGPULossFold' -test.v
func TestGPULossFold(t *testing.T) {
	needGPUEngine(t)
	for _, tc := range lossFoldCases(1000) {
		c := tc.c
		if !tc.fold {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			sameLossAsGrad(t, c, "cuda")
			if c.name != "kepler-saves" {
				compareEngines(t, "cuda", c, caseOpts{ops: []string{"grad", "gradmesh"}})
			}
		})
	}
}

// sameLossAsGrad checks that Solver.Loss of case c on engine (the loss
// kernel's value, gs_a_loss: no fold) is Grad's loss bit for bit.
func sameLossAsGrad(t *testing.T, c engineCase, engine string) {
	t.Helper()
	p := c.prob
	sv := c.solver(t, engine)
	l, _, err := sv.Loss(&p, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := sv.Grad(nil, &p, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	if math.Float64bits(l) != math.Float64bits(g.Loss) {
		t.Errorf("%s: Loss %v, Grad's loss %v", engine, l, g.Loss)
	}
}
