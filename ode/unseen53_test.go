package ode_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Session 53 (H4): defects a new user met on problems the package had not
// seen.

// TestGradPartialCauseIndex checks that where GradPartial runs again on
// the trajectories that did not fail, a non-finite loss term found in
// that run is reported with the ensemble's index in the cause too (the
// *tape.NonFiniteError it wraps, and so the message), not the index of
// the re-run subset. The field is y' = a·y², whose solution y0/(1 −
// a·y0·t) blows up at t = 1/(a·y0): trajectory 1 fails (its span passes
// the blow-up) and trajectory 3 ends negative, where the loss log y is
// NaN. Before session 53 its error read "trajectory 3 ... tape: program
// loss.grad: trajectory 2: ...", the index of trajectory 3 in the re-run.
func TestGradPartialCauseIndex(t *testing.T) {
	f := ode.Field{Name: "riccati", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0].Square())}
	}}
	loss := ode.Loss{F: func(y, _, _ []tape.V) tape.V { return y[0].Log() }}
	for _, m := range []ode.Method{ode.Tsit5, ode.Rodas5P} {
		sv, err := ode.NewSolver(f, &ode.Settings{Method: m, RelTol: 1e-8})
		if err != nil {
			t.Fatal(err)
		}
		prob := ode.Problem{Field: f, Y0: []float64{1, 2, 0.5, -1}, P: []float64{1, 1, 1, 1}, T1s: []float64{0.5, 0.7, 1.5, 3}}
		g, fails, err := sv.GradPartial(context.Background(), nil, &prob, loss, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", m.Name(), err)
		}
		if len(fails) != 2 || fails[0].Index != 1 || fails[1].Index != 3 {
			t.Fatalf("%s: failures %v, want trajectories 1 (blow-up) and 3 (log of a negative)", m.Name(), fails)
		}
		var nf *tape.NonFiniteError
		if !errors.As(fails[1].Cause, &nf) || nf.Trajectory != 3 {
			t.Errorf("%s: trajectory 3's cause %v: want a *tape.NonFiniteError of trajectory 3", m.Name(), fails[1].Cause)
		}
		if msg := fails[1].Error(); strings.Contains(msg, "trajectory 2") {
			t.Errorf("%s: trajectory 3's error names trajectory 2: %s", m.Name(), msg)
		}
		if st := g.Solution.Status; st[0] != ode.OK || st[2] != ode.OK || st[3] != ode.NonFinite {
			t.Errorf("%s: statuses %v", m.Name(), st)
		}
	}
}
