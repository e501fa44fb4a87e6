package ode

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// lorenzLike returns the Lorenz field built afresh (a new closure each
// call), with the constant c in its first component (c = 1: Lorenz).
func lorenzLike(name string, c float64) Field {
	return Field{Name: name, Dim: 3, Params: 3, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{
			p[0].Mul(y[1].Sub(y[0])).Mul(y[0].Const(c)),
			y[0].Mul(p[1].Sub(y[2])).Sub(y[1]),
			y[0].Mul(y[1]).Sub(p[2].Mul(y[2])),
		}
	}}
}

// robertsonJac is Robertson's analytic Jacobian ∂f/∂y by rows, with the
// constant k scaling its last row (k = 1: exact).
func robertsonJac(k float64) func(t tape.V, y, p []tape.V) []tape.V {
	return func(t tape.V, y, p []tape.V) []tape.V {
		z := t.Const(0)
		two := t.Const(2)
		return []tape.V{
			p[0].Neg(), p[2].Mul(y[2]), p[2].Mul(y[1]),
			p[0], p[2].Mul(y[2]).Neg().Sub(two.Mul(p[1]).Mul(y[1])), p[2].Mul(y[1]).Neg(),
			z, two.Mul(p[1]).Mul(y[1]).Mul(t.Const(k)), z,
		}
	}
}

func TestPlanCacheShares(t *testing.T) {
	rob := func(jac func(t tape.V, y, p []tape.V) []tape.V) Field {
		f := robertsonField
		f.Jac = jac
		return f
	}
	base := &Settings{Method: Tsit5, RelTol: 1e-6}
	with := func(edit func(s *Settings)) *Settings {
		s := *base
		edit(&s)
		return &s
	}
	for _, c := range []struct {
		name   string
		f, g   Field
		sf, sg *Settings
		same   bool
	}{
		{"same field, new closure", lorenzLike("lorenz", 1), lorenzLike("lorenz", 1), base, base, true},
		{"tolerances do not enter", lorenzLike("lorenz", 1), lorenzLike("lorenz", 1), base, with(func(s *Settings) { s.RelTol, s.MaxSteps = 1e-9, 10 }), true},
		{"another constant", lorenzLike("lorenz", 1), lorenzLike("lorenz", 2), base, base, false},
		{"another name", lorenzLike("lorenz", 1), lorenzLike("lorenz2", 1), base, base, false},
		{"another method", lorenzLike("lorenz", 1), lorenzLike("lorenz", 1), base, with(func(s *Settings) { s.Method = Vern7 }), false},
		{"another controller", lorenzLike("lorenz", 1), lorenzLike("lorenz", 1), base, with(func(s *Settings) { s.Controller.Beta1 = 0.1 }), false},
		{"a first step", lorenzLike("lorenz", 1), lorenzLike("lorenz", 1), base, with(func(s *Settings) { s.Dt0 = 1e-3 }), false},
		{"another first step", lorenzLike("lorenz", 1), lorenzLike("lorenz", 1), with(func(s *Settings) { s.Dt0 = 1e-3 }), with(func(s *Settings) { s.Dt0 = 2e-3 }), false},
		{"saves by steps", lorenzLike("lorenz", 1), lorenzLike("lorenz", 1), base, with(func(s *Settings) { s.Saves = SaveStep }), false},
		{"Rodas5P, same Jac", rob(robertsonJac(1)), rob(robertsonJac(1)), with(func(s *Settings) { s.Method = Rodas5P }), with(func(s *Settings) { s.Method = Rodas5P }), true},
		{"Rodas5P, another Jac", rob(robertsonJac(1)), rob(robertsonJac(2)), with(func(s *Settings) { s.Method = Rodas5P }), with(func(s *Settings) { s.Method = Rodas5P }), false},
		{"Rodas5P, derived against analytic Jac", rob(nil), rob(robertsonJac(1)), with(func(s *Settings) { s.Method = Rodas5P }), with(func(s *Settings) { s.Method = Rodas5P }), false},
		{"Tsit5 reads no Jac", rob(robertsonJac(1)), rob(robertsonJac(2)), base, base, true},
	} {
		a, err := NewSolver(c.f, c.sf)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, err := NewSolver(c.g, c.sg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := a.plan == b.plan; got != c.same {
			t.Errorf("%s: shared plan %v, want %v", c.name, got, c.same)
		}
	}
}

// TestPlanCacheMatrixFree checks that a plan built at another matrix-free
// threshold is not reused.
func TestPlanCacheMatrixFree(t *testing.T) {
	s := &Settings{Method: Rodas5P}
	a, err := NewSolver(robertsonField, s)
	if err != nil {
		t.Fatal(err)
	}
	old := matrixFreeDim
	matrixFreeDim = 2
	defer func() { matrixFreeDim = old }()
	b, err := NewSolver(robertsonField, s)
	if err != nil {
		t.Fatal(err)
	}
	if a.plan == b.plan {
		t.Error("a plan built at another matrix-free threshold was reused")
	}
}

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
	robJ := robertsonField
	robJ.Jac = robertsonJac(1)
	for _, c := range []struct {
		name string
		f    func() Field
		set  Settings
		p    Problem
	}{
		{"lorenz Tsit5", func() Field { return lorenzLike("lorenz", 1) }, Settings{Method: Tsit5, RelTol: 1e-7},
			Problem{N: n, Y0: []float64{1, 0, 0}, P: lzP, T1: 1, SaveAt: []float64{0.25, 0.5}}},
		{"lorenz Vern7", func() Field { return lorenzLike("lorenz", 1) }, Settings{Method: Vern7, RelTol: 1e-8},
			Problem{N: n, Y0: []float64{1, 0, 0}, P: lzP, T1: 1}},
		{"robertson Rodas5P", func() Field { return robertsonField }, Settings{Method: Rodas5P, RelTol: 1e-6},
			Problem{N: n, Y0: []float64{1, 0, 0}, P: robP, T1: 10}},
		{"robertson Rodas5P Jac", func() Field { return robJ }, Settings{Method: Rodas5P, RelTol: 1e-6},
			Problem{N: n, Y0: []float64{1, 0, 0}, P: robP, T1: 10}},
	} {
		run := func(sv *Solver) *Gradient {
			p := c.p
			p.Field = c.f()
			g, err := sv.Grad(nil, &p, SumSquares(), nil)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			return g
		}
		max := planCacheMax
		planCacheMax = 0
		own, err := NewSolver(c.f(), &c.set)
		planCacheMax = max
		if err != nil {
			t.Fatal(err)
		}
		want := run(own)
		var shared [3]*Solver
		for k := range shared {
			if shared[k], err = NewSolver(c.f(), &c.set); err != nil {
				t.Fatal(err)
			}
		}
		if shared[0].plan != shared[2].plan || shared[0].plan == own.plan {
			t.Fatalf("%s: the cached solvers do not share one plan, or share the uncached one's", c.name)
		}
		got := make([]*Gradient, len(shared))
		done := make(chan int)
		for k, sv := range shared {
			go func() { got[k] = run(sv); done <- k }()
		}
		for range shared {
			<-done
		}
		for k, g := range got {
			what := fmt.Sprintf("%s: solver %d sharing the cached plan", c.name, k)
			samePlanBits(t, what+": loss", []float64{want.Loss}, []float64{g.Loss})
			samePlanBits(t, what+": ∂L/∂P", want.P, g.P)
			samePlanBits(t, what+": ∂L/∂Y0", want.Y0, g.Y0)
			samePlanBits(t, what+": states", want.Solution.Y, g.Solution.Y)
			samePlanBits(t, what+": saves", want.Solution.Ys, g.Solution.Ys)
			samePlanBits(t, what+": steps", want.Mesh.H, g.Mesh.H)
		}
	}
}

func TestPlanCacheBound(t *testing.T) {
	max := planCacheMax
	planCacheMax = 3
	defer func() { planCacheMax = max }()
	var first *Solver
	for k := range 5 {
		sv, err := NewSolver(lorenzLike("bound", float64(k+10)), &Settings{Method: Tsit5})
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			first = sv
		}
	}
	plans.Lock()
	got := len(plans.list)
	plans.Unlock()
	if got > 3 {
		t.Errorf("%d plans cached, bound 3", got)
	}
	again, err := NewSolver(lorenzLike("bound", 10), &Settings{Method: Tsit5})
	if err != nil {
		t.Fatal(err)
	}
	if again.plan == first.plan {
		t.Error("the oldest plan was kept past the bound")
	}
}

// samePlanBits fails unless got equals want bit for bit.
func samePlanBits(t *testing.T, what string, want, got []float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
			t.Fatalf("%s[%d] = %v, want %v bit for bit", what, i, got[i], want[i])
		}
	}
}
