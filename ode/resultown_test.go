package ode_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// resultArrays returns copies of the arrays of a call's results that
// record its inputs or its outputs (nil entries for results absent), by
// name, for TestResultsOwnTheirArrays.
func resultArrays(sol *ode.Solution, m *ode.Mesh, g *ode.Gradient) map[string][]float64 {
	a := map[string][]float64{}
	if sol != nil {
		a["Solution.T"], a["Solution.Y"] = slices.Clone(sol.T), slices.Clone(sol.Y)
		a["Solution.SaveAt"], a["Solution.Ys"] = slices.Clone(sol.SaveAt), slices.Clone(sol.Ys)
	}
	if m != nil {
		a["Mesh.H"], a["Mesh.T1"] = slices.Clone(m.H), slices.Clone(m.T1)
		a["Mesh.SaveAt"], a["Mesh.AbsTols"] = slices.Clone(m.SaveAt), slices.Clone(m.AbsTols)
	}
	if g != nil {
		a["Gradient.Y0"], a["Gradient.P"] = slices.Clone(g.Y0), slices.Clone(g.P)
		a["Gradient.Shared"] = append(slices.Clone(g.Shared), g.Loss)
	}
	return a
}

// scribble writes random values over x.
func scribble(rnd *rand.Rand, x []float64) {
	for i := range x {
		x[i] = rnd.NormFloat64()
	}
}

// TestResultsOwnTheirArrays checks that the results of every call
// (Solution, Mesh, Gradient, DenseSolution) own their arrays: writing
// over the caller's inputs after the call (Y0, P, Shared, T1s, SaveAt,
// Settings.AbsTols), as a loop that reuses its slices does, and over the
// returned record of what the call was for (Solution.SaveAt,
// Mesh.SaveAt, Mesh.AbsTols) leaves every result unchanged, and a
// second call on the same Solver gives the first's results. Before the
// fix, Solution.SaveAt was the problem's SaveAt slice (a caller that
// reused it changed the solution's record), GradPartial's mesh of
// skipped trajectories shared it too, and Mesh.AbsTols was the Solver's
// own copy of the settings' (writing into one mesh's changed the
// tolerances of the Solver's later calls).
func TestResultsOwnTheirArrays(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "own", Dim: 2, Params: 2, Shared: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[1]).Mul(p[2]), p[1].Mul(y[0]).Neg()}
	}}
	loss := ode.Loss{F: func(y, ys, _ []tape.V) tape.V {
		l := y[0].Mul(y[1])
		for _, v := range ys {
			l = l.Add(v.Mul(v))
		}
		return l
	}}
	problem := func() *ode.Problem {
		return &ode.Problem{Field: f, T1s: []float64{1, 1.5, 2},
			Y0: []float64{1, 0, 2, 1, 0.5, -1}, P: []float64{1, 2, 0.5, 1, 2, 0.3},
			Shared: []float64{1.1}, SaveAt: []float64{0, 0.25, 0.5, 0.7}}
	}
	ctx := context.Background()
	type result struct {
		sol *ode.Solution
		m   *ode.Mesh
		g   *ode.Gradient
	}
	calls := []struct {
		name string
		run  func(sv *ode.Solver, p *ode.Problem) (result, error)
	}{
		{"Solve", func(sv *ode.Solver, p *ode.Problem) (result, error) {
			s, err := sv.Solve(p)
			return result{sol: s}, err
		}},
		{"SolveTo", func(sv *ode.Solver, p *ode.Problem) (result, error) {
			dst, err := sv.Solve(problem()) // an earlier call's solution, reused
			if err != nil {
				return result{}, err
			}
			s, err := sv.SolveTo(dst, p)
			return result{sol: s}, err
		}},
		{"Record", func(sv *ode.Solver, p *ode.Problem) (result, error) {
			m, s, err := sv.Record(p)
			return result{sol: s, m: m}, err
		}},
		{"Grad", func(sv *ode.Solver, p *ode.Problem) (result, error) {
			g, err := sv.Grad(nil, p, loss, nil)
			if err != nil {
				return result{}, err
			}
			return result{sol: g.Solution, m: g.Mesh, g: g}, nil
		}},
		{"Grad reused", func(sv *ode.Solver, p *ode.Problem) (result, error) {
			g, err := sv.Grad(nil, problem(), loss, nil)
			if err != nil {
				return result{}, err
			}
			g, err = sv.Grad(g, p, loss, nil)
			if err != nil {
				return result{}, err
			}
			return result{sol: g.Solution, m: g.Mesh, g: g}, nil
		}},
		{"Loss", func(sv *ode.Solver, p *ode.Problem) (result, error) {
			_, s, err := sv.Loss(p, loss, nil)
			return result{sol: s}, err
		}},
		{"GradPartial", func(sv *ode.Solver, p *ode.Problem) (result, error) {
			g, _, err := sv.GradPartial(ctx, nil, p, loss, nil, nil)
			if err != nil {
				return result{}, err
			}
			return result{sol: g.Solution, m: g.Mesh, g: g}, nil
		}},
		{"GradPartial all skipped", func(sv *ode.Solver, p *ode.Problem) (result, error) {
			g, _, err := sv.GradPartial(ctx, nil, p, loss, nil, []bool{true, true, true})
			if err != nil {
				return result{}, err
			}
			return result{sol: g.Solution, m: g.Mesh, g: g}, nil
		}},
		{"SolveDense", func(sv *ode.Solver, p *ode.Problem) (result, error) {
			d, err := sv.SolveDense(p)
			if err != nil {
				return result{}, err
			}
			return result{sol: d.Solution}, nil
		}},
	}
	for _, method := range []ode.Method{ode.Tsit5, ode.Rodas5P, ode.Auto} {
		for _, c := range calls {
			name := fmt.Sprintf("%s/%s", method.Name(), c.name)
			rnd := rand.New(rand.NewPCG(7, uint64(len(name))))
			set := ode.Settings{Method: method, AbsTols: []float64{1e-7, 1e-8}}
			sv, err := ode.NewSolver(f, &set)
			if err != nil {
				t.Fatal(err)
			}
			p := problem()
			r, err := c.run(sv, p)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			want := resultArrays(r.sol, r.m, r.g)
			// The caller reuses its slices and the settings'.
			for _, x := range [][]float64{p.Y0, p.P, p.Shared, p.SaveAt, set.AbsTols} {
				scribble(rnd, x)
			}
			for i := range p.T1s {
				p.T1s[i] = 5 + rnd.Float64()
			}
			got := resultArrays(r.sol, r.m, r.g)
			// And writes over the returned record of the call's inputs.
			if r.sol != nil {
				scribble(rnd, r.sol.SaveAt)
			}
			if r.m != nil {
				scribble(rnd, r.m.SaveAt)
				scribble(rnd, r.m.AbsTols)
			}
			// A second call on the same solver.
			r2, err := c.run(sv, problem())
			if err != nil {
				t.Fatalf("%s: second call: %v", name, err)
			}
			got2 := resultArrays(r2.sol, r2.m, r2.g)
			for k, w := range want {
				if !bitsEqualT(got[k], w) {
					t.Errorf("%s: %s changed when the caller wrote over its inputs: %v, was %v", name, k, got[k], w)
				}
				if !bitsEqualT(got2[k], w) {
					t.Errorf("%s: a second call's %s is %v, the first's %v", name, k, got2[k], w)
				}
			}
		}
	}
}
