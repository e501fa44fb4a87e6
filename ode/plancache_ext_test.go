package ode_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestPlanCacheBitwise checks that solvers sharing a cached plan compute
// what solvers with plans of their own do, bit for bit, also when they
// run side by side.
func TestPlanCacheBitwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	const n = 40
	lzP := make([]float64, 3*n)
	for i := range n {
		lzP[3*i], lzP[3*i+1], lzP[3*i+2] = 10+rng.Float64(), 28+rng.Float64(), 8.0/3
	}
	robP := make([]float64, 3*n)
	for i := range n {
		robP[3*i], robP[3*i+1], robP[3*i+2] = 0.04*(1+0.1*rng.Float64()), 3e7, 1e4
	}
	robJ := problems.Robertson().Field
	robJ.Jac = func(_ tape.V, y, p []tape.V) []tape.V { // ∂f/∂y by rows
		z, two := y[0].Const(0), y[0].Const(2)
		return []tape.V{
			p[0].Neg(), p[2].Mul(y[2]), p[2].Mul(y[1]),
			p[0], p[2].Mul(y[2]).Neg().Sub(two.Mul(p[1]).Mul(y[1])), p[2].Mul(y[1]).Neg(),
			z, two.Mul(p[1]).Mul(y[1]), z,
		}
	}
	for _, c := range []struct {
		name string
		f    func() ode.Field
		set  ode.Settings
		p    ode.Problem
	}{
		{"lorenz Tsit5", lorenzField, ode.Settings{Method: ode.Tsit5, RelTol: 1e-7},
			ode.Problem{N: n, Y0: []float64{1, 0, 0}, P: lzP, T1: 1, SaveAt: []float64{0.25, 0.5}}},
		{"lorenz Vern7", lorenzField, ode.Settings{Method: ode.Vern7, RelTol: 1e-8},
			ode.Problem{N: n, Y0: []float64{1, 0, 0}, P: lzP, T1: 1}},
		{"robertson Rodas5P", func() ode.Field { return problems.Robertson().Field }, ode.Settings{Method: ode.Rodas5P, RelTol: 1e-6},
			ode.Problem{N: n, Y0: []float64{1, 0, 0}, P: robP, T1: 10}},
		{"robertson Rodas5P Jac", func() ode.Field { return robJ }, ode.Settings{Method: ode.Rodas5P, RelTol: 1e-6},
			ode.Problem{N: n, Y0: []float64{1, 0, 0}, P: robP, T1: 10}},
	} {
		run := func(sv *ode.Solver) *ode.Gradient {
			p := c.p
			p.Field = c.f()
			g, err := sv.Grad(nil, &p, ode.SumSquares(), nil)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			return g
		}
		old := ode.SetPlanCacheMax(0)
		own, err := ode.NewSolver(c.f(), &c.set)
		ode.SetPlanCacheMax(old)
		if err != nil {
			t.Fatal(err)
		}
		want := run(own)
		var shared [3]*ode.Solver
		for k := range shared {
			if shared[k], err = ode.NewSolver(c.f(), &c.set); err != nil {
				t.Fatal(err)
			}
		}
		if ode.PlanOf(shared[0]) != ode.PlanOf(shared[2]) || ode.PlanOf(shared[0]) == ode.PlanOf(own) {
			t.Fatalf("%s: the cached solvers do not share one plan, or share the uncached one's", c.name)
		}
		got := make([]*ode.Gradient, len(shared))
		done := make(chan int)
		for k, sv := range shared {
			go func() { got[k] = run(sv); done <- k }()
		}
		for range shared {
			<-done
		}
		for k, g := range got {
			what := fmt.Sprintf("%s: solver %d sharing the cached plan", c.name, k)
			sameBitsF(t, what+": loss", []float64{want.Loss}, []float64{g.Loss})
			sameBitsF(t, what+": ∂L/∂P", want.P, g.P)
			sameBitsF(t, what+": ∂L/∂Y0", want.Y0, g.Y0)
			sameBitsF(t, what+": states", want.Solution.Y, g.Solution.Y)
			sameBitsF(t, what+": saves", want.Solution.Ys, g.Solution.Ys)
			sameBitsF(t, what+": steps", want.Mesh.H, g.Mesh.H)
		}
	}
}
