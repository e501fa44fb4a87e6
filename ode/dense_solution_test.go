package ode_test

import (
	"errors"
	"fmt"
	"log"
	"math"
	"sort"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Keep the dense output of two Kepler orbits and evaluate them at any
// time afterwards, as Diffrax's sol.evaluate(t).
func ExampleDenseSolution_Evaluate() {
	kp := problems.Kepler()
	prob := ode.Problem{Field: kp.Field, N: 2, Y0: kp.Y0, P: []float64{1, 1.1}, T1: kp.T1}
	sv, err := ode.NewSolver(prob.Field, &ode.Settings{RelTol: 1e-10, AbsTol: 1e-13})
	if err != nil {
		log.Fatal(err)
	}
	sol, err := sv.SolveDense(&prob)
	if err != nil {
		log.Fatal(err)
	}
	y := make([]float64, 4)
	for _, t := range []float64{0.5, 2} {
		if _, err := sol.Evaluate(y, 0, t); err != nil {
			log.Fatal(err)
		}
		exact := problems.KeplerExact(nil, kp.Y0, 1, t)
		fmt.Printf("t = %.4g: x = %.6f, y = %.6f (exact %.6f, %.6f)\n", t, y[0], y[1], exact[0], exact[1])
	}
	fmt.Printf("%d steps kept, %d bytes\n", sol.Stats.TotalAccepted(), sol.Bytes)
	_, err = sol.Evaluate(y, 1, 7)
	fmt.Println(err)
	// Output:
	// t = 0.5: x = 0.131072, y = 0.671797 (exact 0.131072, 0.671797)
	// t = 2: x = -1.205725, y = 0.613566 (exact -1.205725, 0.613566)
	// 589 steps kept, 103664 bytes
	// ode: DenseSolution.Evaluate: t = 7 is outside trajectory 1's span [0, 6.283185307179586]
}

// TestDenseSolutionEvaluate checks that Evaluate gives, bit for bit, the
// states a Solve with the same times in SaveAt gives (for every method,
// ragged end times, T0 ≠ 0, times on mesh points, at T0 and at the ends),
// that Bytes is 8·(2 + Dim·(1 + Terms)) a step, and its errors.
func TestDenseSolutionEvaluate(t *testing.T) {
	t.Parallel()
	f := forcedField()
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23} {
		pr := ode.Problem{Field: f, N: 3, T0: 1, Y0: []float64{1, -0.5, 2}, P: []float64{0.5, 3, 30}, Shared: []float64{1.5},
			T1s: []float64{2, 6, 20}}
		set := &ode.Settings{Method: m, RelTol: 1e-7, AbsTol: 1e-10}
		sv := solverT(t, f, set)
		ds, err := sv.SolveDense(&pr)
		if err != nil {
			t.Fatalf("%s: %v", m.Name(), err)
		}
		mesh, _, err := sv.Record(&pr)
		if err != nil {
			t.Fatal(err)
		}
		steps := mesh.Stats.TotalAccepted()
		if want := int64(steps) * 8 * int64(2+f.Dim*(1+ds.Terms)); ds.Bytes != want {
			t.Errorf("%s: Bytes = %d, want %d for %d steps", m.Name(), ds.Bytes, want, steps)
		}
		tm := meshTimes(mesh, 0)
		ts := []float64{1, 1.0001, tm[1], tm[2], (tm[2] + tm[3]) / 2, 1.5, 1.999, 2}
		sort.Float64s(ts)
		pr.SaveAt = ts
		sol, err := sv.Solve(&pr)
		if err != nil {
			t.Fatal(err)
		}
		K := len(ts)
		for i := 0; i < pr.N; i++ {
			for k, tau := range ts {
				got, err := ds.Evaluate(nil, i, tau)
				if err != nil {
					t.Fatalf("%s: Evaluate(%d, %v): %v", m.Name(), i, tau, err)
				}
				for c, v := range got {
					if want := sol.Ys[(i*K+k)*f.Dim+c]; v != want {
						t.Errorf("%s: Evaluate(%d, %v)[%d] = %v, Solve saved %v", m.Name(), i, tau, c, v, want)
					}
				}
			}
			end, _ := ds.Evaluate(nil, i, pr.T1s[i])
			if end[0] != ds.Y[i] {
				t.Errorf("%s: Evaluate at the end of trajectory %d = %v, final state %v", m.Name(), i, end[0], ds.Y[i])
			}
		}
		for _, bad := range []float64{0.999, 20.5, math.NaN(), math.Inf(1)} {
			if _, err := ds.Evaluate(nil, 2, bad); err == nil {
				t.Errorf("%s: Evaluate(2, %v) gave no error", m.Name(), bad)
			}
		}
		if _, err := ds.Evaluate(nil, 0, 3); err == nil {
			t.Errorf("%s: Evaluate(0, 3) past trajectory 0's end 2 gave no error", m.Name())
		}
	}
}

// TestDenseSolutionLimits checks SolveDense's refusals: a dense output
// larger than MemoryLimit (ErrTooLarge, naming the size) and settings
// without a continuous extension (SaveStep, ErrNoDense).
func TestDenseSolutionLimits(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "decay", Dim: 1, F: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0].Neg()} }}
	pr := ode.Problem{Field: f, N: 100, Y0: []float64{1}, T1: 10}
	_, err := solverT(t, f, &ode.Settings{MemoryLimit: 1000}).SolveDense(&pr)
	if !errors.Is(err, ode.ErrTooLarge) {
		t.Errorf("SolveDense over MemoryLimit: error %v, want ErrTooLarge", err)
	}
	_, err = solverT(t, f, &ode.Settings{Saves: ode.SaveStep}).SolveDense(&pr)
	if !errors.Is(err, ode.ErrNoDense) {
		t.Errorf("SolveDense with SaveStep: error %v, want ErrNoDense", err)
	}
}

// TestDenseSolutionEvents checks Evaluate on solves with events against
// Solve with the same save times, bit for bit: between and exactly at the
// bounces of balls (the state after the jump at a non-terminal event
// time), a terminal event (its span ends there) and a ball whose bounces
// accumulate past MaxEvents (AllowFailures: its status, the others'
// states).
func TestDenseSolutionEvents(t *testing.T) {
	t.Parallel()
	f, bounce := problems.BouncingBall()
	floor := bounce
	floor.Apply, floor.Terminal = nil, true
	for _, c := range []struct {
		name string
		ev   ode.Event
		max  int
		T    float64
		e    []float64
	}{
		{"bounces", bounce, 0, 1.6, []float64{0.7, 0.85, 0.9}},
		{"terminal", floor, 0, 1.6, []float64{0.7, 0.85, 0.9}},
		{"at rest", bounce, 6, 5, []float64{0.3, 0.85, 0.9}}, // trajectory 0 passes MaxEvents
	} {
		for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23} {
			set := &ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-10, Events: []ode.Event{c.ev}, MaxEvents: c.max, AllowFailures: true}
			sv := solverT(t, f, set)
			pr := ode.Problem{Field: f, N: len(c.e), Y0: []float64{1, 0}, P: c.e, T1: c.T}
			ds, err := sv.SolveDense(&pr)
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, m.Name(), err)
			}
			mesh, _, err := sv.Record(&pr)
			if err != nil {
				t.Fatal(err)
			}
			for i := range pr.N {
				if ds.Status[i] != ode.OK {
					if _, err := ds.Evaluate(nil, i, 0.1); err == nil {
						t.Errorf("%s %s: Evaluate on failed trajectory %d (%v) gave no error", c.name, m.Name(), i, ds.Status[i])
					}
					continue
				}
				// Every mesh time (the event times among them), the
				// midpoints of the steps and the end.
				tm := meshTimes(mesh, i)
				var ts []float64
				for k, tau := range tm {
					ts = append(ts, tau)
					if k+1 < len(tm) {
						ts = append(ts, (tau+tm[k+1])/2)
					}
				}
				ts = append(ts, ds.T[i])
				sort.Float64s(ts)
				one := pr
				one.N, one.P, one.SaveAt = 1, c.e[i:i+1], ts
				sol, err := sv.Solve(&one)
				if err != nil {
					t.Fatal(err)
				}
				for k, tau := range ts {
					got, err := ds.Evaluate(nil, i, tau)
					if err != nil {
						t.Fatalf("%s %s: Evaluate(%d, %v): %v", c.name, m.Name(), i, tau, err)
					}
					for x, v := range got {
						if want := sol.Ys[k*f.Dim+x]; v != want {
							t.Fatalf("%s %s: Evaluate(%d, %v)[%d] = %v, Solve saved %v", c.name, m.Name(), i, tau, x, v, want)
						}
					}
				}
			}
		}
	}
}
