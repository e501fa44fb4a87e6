package ode_test

import (
	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// timedDose is y' = −k·y with a dose of 1 at t = td (an event on time,
// rising, non-terminal): p = (k, td). Its closed form, the right-hand
// limit at a dose, is y(t) = y0·e^{−kt} + [t ≥ td]·e^{−k(t−td)}.
func timedDose() (ode.Field, ode.Event) {
	f := ode.Field{Name: "decay", Dim: 1, Params: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0])}
	}}
	ev := ode.Event{Name: "dose", Direction: 1, G: func(tt tape.V, _, p []tape.V) tape.V { return tt.Sub(p[1]) },
		Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0].AddC(1)} }}
	return f, ev
}

// timedDoseClosedForm returns y(τ) of timedDose and its derivatives with
// respect to y0, k and td, on the branch where a dose at td ≤ τ has
// already been given (the right-hand limit, as a save time at an event
// time reads it).
func timedDoseClosedForm(y0, k, td, tau float64) (y, dy0, dk, dtd float64) {
	e0 := math.Exp(-k * tau)
	y, dy0, dk = y0*e0, e0, -tau*y0*e0
	if tau >= td {
		e1 := math.Exp(-k * (tau - td))
		y, dk, dtd = y+e1, dk-(tau-td)*e1, k*e1
	}
	return y, dy0, dk, dtd
}

// TestEventSaveAtEventTimeGrad checks the gradient of saved states where
// a save time is exactly an event time (a dose given at an observation
// time, the common case of a dosing schedule), or exactly a mesh point
// after an event, against the closed form of the branch the value is
// read on (after the jump, see Event): with respect to the initial state,
// the rate and the dose time, per trajectory. The save at an event time
// is read at the start of the step after it, whose start moves with the
// event time; its gradient used to leave out that motion (θ = 0's term
// −f·dt*/dp), giving d y(τ)/d td = −k·y⁻ where k·(y⁺ − y⁻) is right.
func TestEventSaveAtEventTimeGrad(t *testing.T) {
	t.Parallel()
	f, ev := timedDose()
	const k, T = 0.7, 2.0
	saveAt := []float64{0.5, 1, 1.25, 1.5, 1.75}
	tds := []float64{0.3, 1, 1.5, 1.75, 2} // at a save time, then at T1
	n := len(tds)
	y0, p := make([]float64, n), make([]float64, 2*n)
	for i, td := range tds {
		y0[i], p[2*i], p[2*i+1] = 1+0.1*float64(i), k, td
	}
	all := odetest.EndPlusSaves()
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23} {
		t.Run(m.Name(), func(t *testing.T) {
			t.Parallel()
			sv := solverT(t, f, &ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}})
			pr := ode.Problem{Field: f, N: n, Y0: y0, P: p, T1: T, SaveAt: saveAt}
			g, err := sv.Grad(nil, &pr, all, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Rosenbrock23's global error at this tolerance is ~1e-7
			// (an order-2 method), the others' ~1e-11.
			tol := 1e-8
			if m == ode.Rosenbrock23 {
				tol = 1e-6
			}
			for i, td := range tds {
				var want [4]float64
				for _, tau := range append([]float64{T}, saveAt...) {
					y, a, b, c := timedDoseClosedForm(y0[i], k, td, tau)
					want[0], want[1], want[2], want[3] = want[0]+y, want[1]+a, want[2]+b, want[3]+c
				}
				got := [4]float64{0, g.Y0[i], g.P[2*i], g.P[2*i+1]}
				if g.Solution.Events[i] != 1 {
					t.Errorf("td %v: %d events, want 1", td, g.Solution.Events[i])
				}
				for x, name := range []string{"", "∂L/∂y0", "∂L/∂k", "∂L/∂td"} {
					if x == 0 {
						continue
					}
					if math.Abs(got[x]-want[x]) > tol*math.Max(1, math.Abs(want[x])) {
						t.Errorf("td %v: %s = %.12g, closed form %.12g", td, name, got[x], want[x])
					}
				}
			}
		})
	}
}

// TestEventSaveAtTerminalTimeGrad checks the gradient of a save time
// exactly at a terminal event (a stop at t = te, te per trajectory, some
// at a save time): y' = −k·y, the loss the saves and the final state.
// The final state is the state at the event and moves with it,
// d y(te)/d te = −k·y(te); a save at a fixed τ = te reads the same value
// but on the branch where the trajectory reaches τ (te ≥ τ) it does not
// move with te: its derivative is 0, not −k·y.
func TestEventSaveAtTerminalTimeGrad(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "decay", Dim: 1, Params: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0])}
	}}
	ev := ode.Event{Name: "stop", Direction: 1, Terminal: true, G: func(tt tape.V, _, p []tape.V) tape.V { return tt.Sub(p[1]) }}
	const k = 0.7
	saveAt := []float64{0.5, 1, 1.5}
	tes := []float64{0.75, 1, 1.5, 2}
	n := len(tes)
	y0, p := make([]float64, n), make([]float64, 2*n)
	for i, te := range tes {
		y0[i], p[2*i], p[2*i+1] = 1+0.1*float64(i), k, te
	}
	upTo := ode.Loss{Name: "upto", F: func(y, ys, _ []tape.V) tape.V { return y[0].Add(ys[0]) }} // the final state and y(0.5)
	at := ode.Loss{Name: "at", F: func(y, ys, _ []tape.V) tape.V { return y[0].Add(ys[0]).Add(ys[1]) }}
	for _, m := range []ode.Method{ode.Tsit5, ode.Rodas5P} {
		sv := solverT(t, f, &ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}})
		for i, te := range tes {
			loss, sp := upTo, saveAt[:1]
			if te == 1 {
				loss, sp = at, saveAt[:2] // y(te) saved at τ = te = 1
			}
			pr := ode.Problem{Field: f, N: 1, Y0: y0[i : i+1], P: p[2*i : 2*i+2], T1: 3, SaveAt: sp}
			g, err := sv.Grad(nil, &pr, loss, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := -k * y0[i] * math.Exp(-k*te) // the final state's; a save at τ = te adds 0
			if got := g.P[1]; math.Abs(got-want) > 1e-8*math.Abs(want) {
				t.Errorf("%s te %v: ∂L/∂te = %.12g, closed form %.12g", m.Name(), te, got, want)
			}
		}
	}
}

// TestEventJumpOffRoot checks events whose jump moves their own
// condition off its root: y' = −k·y refilled to twice the level whenever
// it falls to 0.5 (the condition y − 0.5 goes from 0 to +0.5 at each
// event). Closed form: events at n·ln2/k, y(t) = e^{−k(t − n·ln2/k)} after
// the n-th (with y0 = 1). With Direction 0 (or +1), the condition's
// rise on the jump was taken as a crossing: the event fired again at its
// own time and the trajectory ended with TooManyEvents at the first
// event. Every direction now gives the closed form, and the gradient
// with respect to k its derivative; a jump that sets the condition to 0
// exactly (a ball's height reset to the floor) still leaves with the
// sign of its motion, as a bounce does.
func TestEventJumpOffRoot(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "refill", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0])}
	}}
	ks := []float64{0.3, 1, 1.7, 2.2, 3.1}
	const T1 = 2.0
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P} {
		for _, dir := range []int{0, -1, 1} {
			ev := ode.Event{Name: "refill", Direction: dir, G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].AddC(-0.5) },
				Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0].MulC(2)} }}
			sv, err := ode.NewSolver(f, &ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}})
			if err != nil {
				t.Fatal(err)
			}
			p := ode.Problem{Field: f, N: len(ks), Y0: []float64{1}, P: ks, T1: T1}
			g, err := sv.Grad(nil, &p, ode.Component(0), nil)
			if err != nil {
				t.Fatalf("%s, Direction %d: %v", m.Name(), dir, err)
			}
			for i, k := range ks {
				n := math.Floor(k * T1 / math.Ln2) // falling crossings
				if dir == 1 {
					n = 0 // the level only falls through 0.5: no rising crossing
				}
				tn := n * math.Ln2 / k
				y := math.Exp(-k * (T1 - tn))
				dydk := -T1 * y // d/dk of e^{−k·T1 + n·ln2}
				if got := g.Solution.Events[i]; got != int(n) || math.Abs(g.Solution.Y[i]-y) > 1e-8 || math.Abs(g.P[i]-dydk) > 1e-7*math.Abs(dydk) {
					t.Errorf("%s, Direction %d, k = %v: %d events, y(T1) = %v, ∂y/∂k = %v; want %v, %v, %v",
						m.Name(), dir, k, got, g.Solution.Y[i], g.P[i], n, y, dydk)
				}
			}
		}
	}
	// A ball whose bounce sets its height to 0 exactly bounces as one
	// whose bounce leaves the height (within rounding of 0) alone.
	ball := ode.Field{Name: "ball", Dim: 2, F: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[1], y[1].Const(-9.81)} }}
	counts := make([]int, 2)
	for r, reset := range []bool{false, true} {
		ev := ode.Event{Name: "floor", G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0] },
			Apply: func(_ tape.V, y, _ []tape.V) []tape.V {
				h := y[0]
				if reset {
					h = y[0].Const(0)
				}
				return []tape.V{h, y[1].MulC(-0.8)}
			}}
		sol, err := ode.Solve(ode.Problem{Field: ball, Y0: []float64{1, 0}, T1: 3}, &ode.Settings{RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}})
		if err != nil {
			t.Fatalf("reset %t: %v", reset, err)
		}
		counts[r] = sol.Events[0]
	}
	if counts[0] != counts[1] || counts[0] < 5 {
		t.Errorf("bounces: %d with the height left, %d with it reset to 0; want the same, at least 5", counts[0], counts[1])
	}
}
