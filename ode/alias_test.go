package ode_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestDstAliasesInput checks calls whose dst shares storage with an
// input (a chained solve's p.Y0 = sol.Y with sol as dst, a Gradient whose
// Y0 is p.Y0): the results equal those of a fresh dst bit for bit and the
// input is left unchanged. Before the fix the engine wrote the results
// over the inputs it had still to read (a chained Tsit5 solve returned
// zeros, a gradient failed as non-finite at t = 0).
func TestDstAliasesInput(t *testing.T) {
	t.Parallel()
	// y0' = −p0·y0·s0, y1' = p1·y0 (two components, two parameters, one
	// shared), 5 trajectories of their own end times.
	f := ode.Field{Name: "alias", Dim: 2, Params: 2, Shared: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Mul(p[2]).Neg(), p[1].Mul(y[0])}
	}}
	loss := ode.Loss{
		FP: func(y, ys, data, p, s []tape.V) tape.V {
			l := y[0].Mul(y[1]).Add(p[0].Mul(s[0])).Add(data[0].Mul(y[1]))
			for _, v := range ys {
				l = l.Add(v.Mul(v))
			}
			return l
		},
		Reg:     func(s []tape.V) tape.V { return s[0].Mul(s[0]) },
		DataDim: 1,
	}
	problem := func() ode.Problem {
		return ode.Problem{Field: f, T1s: []float64{1, 1.5, 2, 0.7, 1.2},
			Y0:     []float64{1, 0, 2, 1, 0.5, -1, 3, 0.25, 1.5, 2},
			P:      []float64{0.3, 1, 0.5, 2, 1.2, 0.4, 0.9, 0.1, 2, 0.7},
			Shared: []float64{1.1}, SaveAt: []float64{0, 0.25, 0.5, 0.7}}
	}
	withData := func(l ode.Loss, d []float64) ode.Loss { l.Data = d; return l }
	data := []float64{0.5, -1, 2, 0.25, 1}
	type call struct {
		y, ys, t, g0, gp, gs []float64 // results compared bit for bit
		inputs               [][]float64
	}
	ctx := context.Background()
	for _, m := range []ode.Method{ode.Tsit5, ode.Rodas5P, ode.Auto} {
		sv, err := ode.NewSolver(f, &ode.Settings{Method: m, Exec: tape.ExecSettings{Workers: 2, BlockSize: 2}})
		if err != nil {
			t.Fatal(err)
		}
		solve := func(dst *ode.Solution, p ode.Problem) call {
			s, err := sv.SolveTo(dst, &p)
			if err != nil {
				t.Fatalf("%s: SolveTo: %v", m.Name(), err)
			}
			return call{y: s.Y, ys: s.Ys, t: s.T}
		}
		grad := func(dst *ode.Gradient, p ode.Problem, l ode.Loss, partial bool) call {
			var g *ode.Gradient
			var err error
			if partial {
				g, _, err = sv.GradPartial(ctx, dst, &p, l, nil, nil)
			} else {
				g, err = sv.Grad(dst, &p, l, nil)
			}
			if err != nil {
				t.Fatalf("%s: Grad (partial %t): %v", m.Name(), partial, err)
			}
			return call{y: g.Solution.Y, ys: g.Solution.Ys, t: g.Solution.T, g0: g.Y0, gp: g.P, gs: append(g.Shared, g.Loss)}
		}
		cases := []struct {
			name string
			run  func() (got call) // the aliased call; got.inputs the inputs it was given
			want func() call       // the same call with a fresh dst
		}{
			{"SolveTo dst.Y is Y0", func() call {
				p := problem()
				s, _ := sv.Solve(&p)
				p.Y0 = s.Y
				in := slices.Clone(s.Y)
				c := solve(s, p)
				c.inputs = [][]float64{p.Y0, in}
				return c
			}, func() call {
				p := problem()
				s, _ := sv.Solve(&p)
				p.Y0 = slices.Clone(s.Y)
				return solve(nil, p)
			}},
			{"SolveTo dst.Ys holds Y0 and P", func() call {
				p := problem()
				big := make([]float64, 2*5*4*2)
				copy(big, p.Y0)
				copy(big[10:], p.P)
				p.Y0, p.P = big[:10], big[10:20]
				c := solve(&ode.Solution{Ys: big}, p)
				c.inputs = [][]float64{p.Y0, problem().Y0, p.P, problem().P}
				return c
			}, func() call { return solve(nil, problem()) }},
			{"SolveTo dst.T is T1s", func() call {
				p := problem()
				c := solve(&ode.Solution{T: p.T1s}, p)
				c.inputs = [][]float64{p.T1s, problem().T1s}
				return c
			}, func() call { return solve(nil, problem()) }},
			{"Grad dst.Y0 is Y0", func() call {
				p := problem()
				c := grad(&ode.Gradient{Y0: p.Y0}, p, withData(loss, data), false)
				c.inputs = [][]float64{p.Y0, problem().Y0}
				return c
			}, func() call { return grad(nil, problem(), withData(loss, data), false) }},
			{"Grad dst.P is P, dst.Shared is Shared", func() call {
				p := problem()
				c := grad(&ode.Gradient{P: p.P, Shared: p.Shared}, p, withData(loss, data), false)
				c.inputs = [][]float64{p.P, problem().P, p.Shared, problem().Shared}
				return c
			}, func() call { return grad(nil, problem(), withData(loss, data), false) }},
			{"Grad dst.Solution.Ys is Loss.Data", func() call {
				p := problem()
				d := make([]float64, 5*4*2)
				copy(d, data)
				c := grad(&ode.Gradient{Solution: &ode.Solution{Ys: d}}, p, withData(loss, d[:5]), false)
				c.inputs = [][]float64{d[:5], data}
				return c
			}, func() call { return grad(nil, problem(), withData(loss, data), false) }},
			{"Grad dst.Mesh.T1 is T1s", func() call {
				p := problem()
				g, err := sv.Grad(nil, &p, withData(loss, data), nil)
				if err != nil {
					t.Fatal(err)
				}
				p.T1s = g.Mesh.T1
				in := slices.Clone(p.T1s)
				c := grad(g, p, withData(loss, data), false)
				c.inputs = [][]float64{p.T1s, in}
				return c
			}, func() call { return grad(nil, problem(), withData(loss, data), false) }},
			{"GradPartial dst.Y0 is Y0", func() call {
				p := problem()
				c := grad(&ode.Gradient{Y0: p.Y0}, p, withData(loss, data), true)
				c.inputs = [][]float64{p.Y0, problem().Y0}
				return c
			}, func() call { return grad(nil, problem(), withData(loss, data), true) }},
			{"GradPartial dst.Solution.Y is P", func() call {
				p := problem()
				c := grad(&ode.Gradient{Solution: &ode.Solution{Y: p.P}}, p, withData(loss, data), true)
				c.inputs = [][]float64{p.P, problem().P}
				return c
			}, func() call { return grad(nil, problem(), withData(loss, data), true) }},
		}
		for _, c := range cases {
			got, want := c.run(), c.want()
			for k, x := range [][2][]float64{{got.y, want.y}, {got.ys, want.ys}, {got.t, want.t}, {got.g0, want.g0}, {got.gp, want.gp}, {got.gs, want.gs}} {
				if !slices.EqualFunc(x[0], x[1], func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
					t.Errorf("%s, %s: result %d is %v, want %v (a fresh dst's)", m.Name(), c.name, k, x[0], x[1])
				}
			}
			if in := got.inputs; !slices.Equal(in[0], in[1]) {
				t.Errorf("%s, %s: the input changed to %v, was %v", m.Name(), c.name, in[0], in[1])
			}
			if len(got.inputs) == 4 && !slices.Equal(got.inputs[2], got.inputs[3]) {
				t.Errorf("%s, %s: the second input changed to %v, was %v", m.Name(), c.name, got.inputs[2], got.inputs[3])
			}
		}
	}
}

// TestDstReusedWithoutAlias checks that a dst that shares no storage with
// the inputs is still filled in place (the alias check takes nothing away
// from the reuse of SolveTo's and Grad's dst).
func TestDstReusedWithoutAlias(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "decay", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{p[0].Mul(y[0]).Neg()} }}
	sv, err := ode.NewSolver(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := ode.Problem{Field: f, Y0: []float64{1, 2, 3}, P: []float64{1, 2, 3}, T1: 1, SaveAt: []float64{0.5}}
	s, err := sv.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	y, ys := s.Y, s.Ys
	if s, err = sv.SolveTo(s, &p); err != nil || &s.Y[0] != &y[0] || &s.Ys[0] != &ys[0] {
		t.Errorf("SolveTo: %v; its Y and Ys are not dst's storage", err)
	}
	g, err := sv.Grad(nil, &p, ode.SumSquares(), nil)
	if err != nil {
		t.Fatal(err)
	}
	g0, gp, gy := g.Y0, g.P, g.Solution.Y
	if g, err = sv.Grad(g, &p, ode.SumSquares(), nil); err != nil || &g.Y0[0] != &g0[0] || &g.P[0] != &gp[0] || &g.Solution.Y[0] != &gy[0] {
		t.Errorf("Grad: %v; its Y0, P and Solution.Y are not dst's storage", err)
	}
}
