package ode_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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

// meshState is a copy of what a mesh records, for TestReusedResultsLeaveMeshes.
type meshState struct {
	h, t1  []float64
	ints   [][]int // Len, Stats.Accepted, Stats.Rejected, Stats.FieldEvals
	status []ode.Status
	stiff  []bool
}

func meshStateOf(m *ode.Mesh) meshState {
	return meshState{h: slices.Clone(m.H), t1: slices.Clone(m.T1),
		ints:   [][]int{slices.Clone(m.Len), slices.Clone(m.Stats.Accepted), slices.Clone(m.Stats.Rejected), slices.Clone(m.Stats.FieldEvals)},
		status: slices.Clone(m.Status), stiff: slices.Clone(m.Stiff)}
}

// same reports what of m differs from s ("" if nothing).
func (s meshState) same(m *ode.Mesh) string {
	now := meshStateOf(m)
	var d []string
	if !bitsEqualT(s.h, now.h) {
		d = append(d, "H")
	}
	if !bitsEqualT(s.t1, now.t1) {
		d = append(d, "T1")
	}
	for k, name := range []string{"Len", "Stats.Accepted", "Stats.Rejected", "Stats.FieldEvals"} {
		if !slices.Equal(s.ints[k], now.ints[k]) {
			d = append(d, name)
		}
	}
	if !slices.Equal(s.status, now.status) {
		d = append(d, "Status")
	}
	if !slices.Equal(s.stiff, now.stiff) {
		d = append(d, "Stiff")
	}
	return strings.Join(d, ", ")
}

// TestReusedResultsLeaveMeshes checks results passed back as dst of a
// later call (a Solution to SolveTo, a Gradient to Grad or GradPartial)
// when they share arrays with a mesh the caller holds: Record's mesh (its
// Solution's statuses and step counts are the mesh's), a mesh given to
// Grad, Replay or Loss. The later call, of another problem, must leave
// that mesh as it was, and its own results must be those of a fresh dst.
// Before the fix SolveTo wrote its statuses and step counts over the
// mesh's, which then claimed failed trajectories, and Grad with a
// Gradient that had replayed a given mesh recorded into that mesh's
// arrays (its steps, lengths and end times became another problem's).
func TestReusedResultsLeaveMeshes(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "decay", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{p[0].Mul(y[0]).Neg()} }}
	p := ode.Problem{Field: f, N: 2, Y0: []float64{1, 2}, P: []float64{1, 0.5}, T1: 1}
	// Another problem: other steps, and with MaxSteps 20 failed trajectories.
	p2 := ode.Problem{Field: f, N: 2, Y0: []float64{1, 2}, P: []float64{300, 4000}, T1: 2}
	// And one whose gradient exists, with other steps.
	p3 := ode.Problem{Field: f, N: 2, Y0: []float64{1, 2}, P: []float64{2, 3}, T1: 1.5}
	ctx := context.Background()
	loss := ode.SumSquares()
	for _, method := range []ode.Method{ode.Tsit5, ode.Rodas5P, ode.Auto} {
		sv := mustSolver(t, f, &ode.Settings{Method: method, MaxSteps: 20, AllowFailures: true})
		fresh, err := sv.Solve(&p2)
		if err != nil {
			t.Fatal(err)
		}
		freshG, err := sv.Grad(nil, &p3, loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			// first makes the results and returns the mesh the caller
			// holds; then reuses them for a call of p2 (for Grad, of p3).
			first func() (*ode.Mesh, func() (*ode.Solution, *ode.Gradient, error))
		}{
			{"Record, then SolveTo(sol)", func() (*ode.Mesh, func() (*ode.Solution, *ode.Gradient, error)) {
				m, sol, err := sv.Record(&p)
				if err != nil {
					t.Fatal(err)
				}
				return m, func() (*ode.Solution, *ode.Gradient, error) { s, err := sv.SolveTo(sol, &p2); return s, nil, err }
			}},
			{"Replay(m), then SolveTo(sol)", func() (*ode.Mesh, func() (*ode.Solution, *ode.Gradient, error)) {
				m, _, err := sv.Record(&p)
				if err != nil {
					t.Fatal(err)
				}
				sol, err := sv.Replay(&p, m)
				if err != nil {
					t.Fatal(err)
				}
				return m, func() (*ode.Solution, *ode.Gradient, error) { s, err := sv.SolveTo(sol, &p2); return s, nil, err }
			}},
			{"Loss(m), then SolveTo(sol)", func() (*ode.Mesh, func() (*ode.Solution, *ode.Gradient, error)) {
				m, _, err := sv.Record(&p)
				if err != nil {
					t.Fatal(err)
				}
				_, sol, err := sv.Loss(&p, loss, m)
				if err != nil {
					t.Fatal(err)
				}
				return m, func() (*ode.Solution, *ode.Gradient, error) { s, err := sv.SolveTo(sol, &p2); return s, nil, err }
			}},
			{"Grad(m), then SolveTo(g.Solution)", func() (*ode.Mesh, func() (*ode.Solution, *ode.Gradient, error)) {
				m, _, err := sv.Record(&p)
				if err != nil {
					t.Fatal(err)
				}
				g, err := sv.Grad(nil, &p, loss, m)
				if err != nil {
					t.Fatal(err)
				}
				return m, func() (*ode.Solution, *ode.Gradient, error) {
					s, err := sv.SolveTo(g.Solution, &p2)
					return s, nil, err
				}
			}},
			{"Grad(m), then Grad(g) recording", func() (*ode.Mesh, func() (*ode.Solution, *ode.Gradient, error)) {
				m, _, err := sv.Record(&p)
				if err != nil {
					t.Fatal(err)
				}
				g, err := sv.Grad(nil, &p, loss, m)
				if err != nil {
					t.Fatal(err)
				}
				return m, func() (*ode.Solution, *ode.Gradient, error) { g, err := sv.Grad(g, &p3, loss, nil); return nil, g, err }
			}},
			{"GradPartial(m), then GradPartial(g) recording", func() (*ode.Mesh, func() (*ode.Solution, *ode.Gradient, error)) {
				m, _, err := sv.Record(&p)
				if err != nil {
					t.Fatal(err)
				}
				g, _, err := sv.GradPartial(ctx, nil, &p, loss, m, nil)
				if err != nil {
					t.Fatal(err)
				}
				return m, func() (*ode.Solution, *ode.Gradient, error) {
					g, _, err := sv.GradPartial(ctx, g, &p3, loss, nil, nil)
					return nil, g, err
				}
			}},
			{"Grad recording, then SolveTo(g.Solution)", func() (*ode.Mesh, func() (*ode.Solution, *ode.Gradient, error)) {
				g, err := sv.Grad(nil, &p, loss, nil)
				if err != nil {
					t.Fatal(err)
				}
				return g.Mesh, func() (*ode.Solution, *ode.Gradient, error) {
					s, err := sv.SolveTo(g.Solution, &p2)
					return s, nil, err
				}
			}},
		} {
			name := method.Name() + "/" + c.name
			m, again := c.first()
			was := meshStateOf(m)
			sol, g, err := again()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if d := was.same(m); d != "" {
				t.Errorf("%s: the mesh's %s changed", name, d)
			}
			switch {
			case sol != nil:
				if !bitsEqualT(sol.Y, fresh.Y) || !slices.Equal(sol.Status, fresh.Status) || !slices.Equal(sol.Stats.Accepted, fresh.Stats.Accepted) {
					t.Errorf("%s: SolveTo gave Y %v, statuses %v, accepted %v; a fresh dst %v, %v, %v", name, sol.Y, sol.Status, sol.Stats.Accepted, fresh.Y, fresh.Status, fresh.Stats.Accepted)
				}
			case g != nil:
				if !bitsEqualT(g.P, freshG.P) || !bitsEqualT(g.Mesh.H, freshG.Mesh.H) || !slices.Equal(g.Mesh.Len, freshG.Mesh.Len) {
					t.Errorf("%s: Grad gave dL/dP %v, a fresh dst %v", name, g.P, freshG.P)
				}
			}
		}
	}
}

// TestDenseSolutionOwnsItsState checks that a DenseSolution's Evaluate
// does not change when its embedded Solution is passed to SolveTo as dst
// (or changed by the caller): before the fix, Evaluate at a trajectory's
// end returned the later solve's final state, and read its span and
// status from the later solve.
func TestDenseSolutionOwnsItsState(t *testing.T) {
	t.Parallel()
	f := decayField()
	p := ode.Problem{Field: f, N: 2, Y0: []float64{1, 2}, P: []float64{1, 0.5}, T1: 1}
	p2 := ode.Problem{Field: f, N: 2, Y0: []float64{1, 2}, P: []float64{3, 4}, T1: 0.5}
	for _, method := range []ode.Method{ode.Tsit5, ode.Rodas5P, ode.Auto} {
		sv := mustSolver(t, f, &ode.Settings{Method: method})
		ds, err := sv.SolveDense(&p)
		if err != nil {
			t.Fatal(err)
		}
		times := []float64{0, 0.3, 0.75, 1}
		eval := func() []float64 {
			var out []float64
			for i := range p.N {
				for _, tau := range times {
					y, err := ds.Evaluate(nil, i, tau)
					if err != nil {
						t.Fatalf("%s: Evaluate(%d, %v): %v", method.Name(), i, tau, err)
					}
					out = append(out, y...)
				}
			}
			return out
		}
		want := eval()
		if _, err := sv.SolveTo(ds.Solution, &p2); err != nil {
			t.Fatal(err)
		}
		if got := eval(); !bitsEqualT(got, want) {
			t.Errorf("%s: Evaluate after SolveTo(ds.Solution) %v, before %v", method.Name(), got, want)
		}
	}
}
