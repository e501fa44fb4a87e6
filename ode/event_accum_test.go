package ode_test

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestEventAccumulation checks balls that come to rest (infinitely many
// bounces in finite time) with a MaxEvents they never reach: the bounces
// accumulate at the rest time, where, once they are below the rounding
// of the height, an event would fire again at the time it fired; each
// trajectory must end there with TooManyEvents, for every method, not go
// on through the floor with status OK.
func TestEventAccumulation(t *testing.T) {
	t.Parallel()
	f, bounce := ball()
	e := []float64{0.3, 0.8, 0.95}
	y0 := []float64{1, 0}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23} {
		sv, err := ode.NewSolver(f, &ode.Settings{Method: m, Events: []ode.Event{bounce}, MaxEvents: 1 << 20, AllowFailures: true})
		if err != nil {
			t.Fatal(err)
		}
		sol, err := sv.Solve(&ode.Problem{Field: f, N: len(e), Y0: y0, P: e, T1: 40})
		if err != nil {
			t.Fatal(err)
		}
		for i, ei := range e {
			rest := math.Sqrt(2/gravity) * (1 + 2*ei/(1-ei))
			if sol.Status[i] != ode.TooManyEvents || math.Abs(sol.T[i]-rest) > 1e-6*rest {
				t.Errorf("%s, e = %v: status %v at t = %v after %d events (state %v), want %v at the rest time %v",
					m.Name(), ei, sol.Status[i], sol.T[i], sol.Events[i], sol.Y[2*i:2*i+2], ode.TooManyEvents, rest)
			}
		}
	}
}
