package ode

import (
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

// PlanOf returns sv's plan, for the external tests.
func PlanOf(sv *Solver) *Plan { return sv.plan }

// SetPlanCacheMax sets the plan cache's bound (0: off) and returns the
// previous one, for the external tests.
func SetPlanCacheMax(n int) int {
	old := planCacheMax
	planCacheMax = n
	return old
}
