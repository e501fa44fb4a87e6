package ode_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// wantInput fails unless errors.Is(err, ode.ErrInput) is input, for a
// non-nil err.
func wantInput(t *testing.T, name string, err error, input bool) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("Case %v: want an error, got nil", name)
	case errors.Is(err, ode.ErrInput) != input:
		t.Errorf("Case %v: errors.Is(err, ErrInput) = %t, want %t, for %q", name, !input, input, err)
	}
}

// TestErrInputKinds checks that the errors about each kind of input
// (settings, field, events, problem, mesh, loss, GradPartial's skip,
// NewTrainer's spec, DenseSolution.Evaluate's time) wrap ErrInput with
// their messages unchanged, and that run-time failures (trajectory
// failures, a non-finite loss, a cancelled context) and an engine's
// limits (ErrNoTrainer) do not. The tables of TestInputErrors,
// TestSettingsValidation, TestMeshAndLossErrors and TestTrajectoryFailures
// check the same on their cases.
func TestErrInputKinds(t *testing.T) {
	t.Parallel()
	decay := decayField()
	good := ode.Problem{Field: decay, N: 2, Y0: []float64{1, 2}, P: []float64{1, 0.5}, T1: 1}
	sv, err := ode.NewSolver(decay, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := sv.Record(&good)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := sv.SolveDense(&good)
	if err != nil {
		t.Fatal(err)
	}
	// A mesh with a failed trajectory (MaxSteps 1 cannot reach T1).
	failedMesh, _, err := mustSolver(t, decay, &ode.Settings{MaxSteps: 1, AllowFailures: true}).Record(&good)
	if err != nil {
		t.Fatal(err)
	}
	// A mesh of another field of the same shape.
	grow := ode.Field{Name: "grow", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{p[0].Mul(y[0])} }}
	growGood := good
	growGood.Field = grow
	otherMesh, _, err := mustSolver(t, grow, nil).Record(&growGood)
	if err != nil {
		t.Fatal(err)
	}
	cross := ode.Event{Name: "cross", G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].AddC(-0.5) }}
	withEvents := mustSolver(t, decay, &ode.Settings{Events: []ode.Event{cross}})
	bad := func(f func(m *ode.Mesh)) *ode.Mesh {
		c := *m
		c.Len, c.H = append([]int(nil), m.Len...), append([]float64(nil), m.H...)
		f(&c)
		return &c
	}
	newSolver := func(s ode.Settings) error { _, err := ode.NewSolver(decay, &s); return err }
	grad := func(p ode.Problem, l ode.Loss, m *ode.Mesh) error { _, err := sv.Grad(nil, &p, l, m); return err }
	replay := func(m *ode.Mesh) error { _, err := sv.Replay(&good, m); return err }
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	for _, c := range []struct {
		name  string
		err   func() error
		input bool
	}{
		// Settings and fields (NewSolver).
		{"RelTol NaN", func() error { return newSolver(ode.Settings{RelTol: math.NaN()}) }, true},
		{"controller", func() error { return newSolver(ode.Settings{Controller: ode.Controller{FactorMin: 2}}) }, true},
		{"unknown engine", func() error { return newSolver(ode.Settings{Engine: "nosuch"}) }, true},
		{"field without F", func() error { _, err := ode.NewSolver(ode.Field{Name: "none", Dim: 1}, nil); return err }, true},
		{"field panics", func() error {
			_, err := ode.NewSolver(ode.Field{Name: "boom", Dim: 1, F: func(_ tape.V, _, _ []tape.V) []tape.V { panic("boom") }}, nil)
			return err
		}, true},
		// Events.
		{"event without G", func() error { return newSolver(ode.Settings{Events: []ode.Event{{Name: "e"}}}) }, true},
		{"event direction", func() error { return newSolver(ode.Settings{Events: []ode.Event{{G: cross.G, Direction: 2}}}) }, true},
		{"terminal event with Apply", func() error {
			return newSolver(ode.Settings{Events: []ode.Event{{G: cross.G, Terminal: true, Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return y }}}})
		}, true},
		{"event Apply of the wrong length", func() error {
			return newSolver(ode.Settings{Events: []ode.Event{{G: cross.G, Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return append(y, y[0]) }}}})
		}, true},
		{"constant event condition", func() error {
			return newSolver(ode.Settings{Events: []ode.Event{{G: func(_ tape.V, _, p []tape.V) tape.V { return p[0] }}}})
		}, true},
		{"events with Method Auto", func() error { return newSolver(ode.Settings{Method: ode.Auto, Events: []ode.Event{cross}}) }, true},
		{"events with SaveStep", func() error { return newSolver(ode.Settings{Saves: ode.SaveStep, Events: []ode.Event{cross}}) }, true},
		// Problems (every Solver method checks them).
		{"nil problem", func() error { _, err := sv.Solve(nil); return err }, true},
		{"problem of another shape", func() error {
			p := good
			p.Field = lorenzField()
			_, _, err := sv.Record(&p)
			return err
		}, true},
		{"problem of another field", func() error { _, err := sv.Solve(&growGood); return err }, true},
		{"Y0 NaN (CheckLoss)", func() error {
			p := good
			p.Y0 = []float64{1, math.NaN()}
			return sv.CheckLoss(&p, ode.SumSquares())
		}, true},
		{"T1s length (SolveDense)", func() error {
			p := good
			p.T1s = []float64{1}
			_, err := sv.SolveDense(&p)
			return err
		}, true},
		{"SolveDense with SaveStep", func() error {
			_, err := mustSolver(t, decay, &ode.Settings{Saves: ode.SaveStep}).SolveDense(&good)
			return err
		}, true},
		{"Evaluate outside the span", func() error { _, err := ds.Evaluate(nil, 0, 2); return err }, true},
		// Meshes (Replay, Grad, Loss).
		{"mesh Len beyond Rows", func() error { return replay(bad(func(m *ode.Mesh) { m.Len[1] = m.Rows + 1 })) }, true},
		{"mesh step NaN", func() error { return replay(bad(func(m *ode.Mesh) { m.H[0] = math.NaN() })) }, true},
		{"mesh step missing", func() error { return grad(good, ode.SumSquares(), bad(func(m *ode.Mesh) { m.Len[0]-- })) }, true},
		{"mesh of another field", func() error { return replay(otherMesh) }, true},
		{"mesh with a failed trajectory", func() error { return grad(good, ode.SumSquares(), failedMesh) }, true},
		{"mesh without the solver's events", func() error { _, err := withEvents.Replay(&good, m); return err }, true},
		{"mesh of another N (Loss)", func() error {
			p := good
			p.N, p.Y0, p.P = 3, []float64{1}, []float64{1}
			_, _, err := sv.Loss(&p, ode.SumSquares(), m)
			return err
		}, true},
		// Losses.
		{"loss without F", func() error { return grad(good, ode.Loss{Name: "empty"}, m) }, true},
		{"loss Data length", func() error {
			return grad(good, ode.Loss{Name: "d", DataDim: 1, Data: []float64{1, 2, 3}, F: func(y, _, d []tape.V) tape.V { return y[0].Sub(d[0]) }}, m)
		}, true},
		{"loss Data NaN", func() error {
			return grad(good, ode.Loss{Name: "d", DataDim: 1, Data: []float64{1, math.NaN()}, F: func(y, _, d []tape.V) tape.V { return y[0].Sub(d[0]) }}, m)
		}, true},
		{"loss component out of range", func() error { return grad(good, ode.Component(1), m) }, true},
		{"loss Reg panics", func() error {
			p := ode.Problem{Field: lorenzSharedField(), Y0: []float64{1, 0, 20}, P: []float64{28}, Shared: []float64{10, 8.0 / 3}, T1: 0.1}
			l := ode.SumSquares()
			l.Reg = func(s []tape.V) tape.V { return s[5] }
			_, err := ode.Grad(nil, p, l, nil, nil)
			return err
		}, true},
		// GradPartial and NewTrainer.
		{"GradPartial skip length", func() error {
			_, _, err := sv.GradPartial(context.Background(), nil, &good, ode.SumSquares(), nil, []bool{true})
			return err
		}, true},
		{"GradPartial mesh of another N", func() error {
			p := good
			p.N, p.Y0, p.P = 3, []float64{1}, []float64{1}
			_, _, err := sv.GradPartial(context.Background(), nil, &p, ode.SumSquares(), m, nil)
			return err
		}, true},
		{"NewTrainer on the CPU engine (ErrNoTrainer)", func() error {
			_, err := sv.NewTrainer(&good, ode.SumSquares(), &ode.TrainSpec{})
			return err
		}, false},
		// Run-time failures of valid inputs.
		{"max steps", func() error { _, err := mustSolver(t, decay, &ode.Settings{MaxSteps: 1}).Solve(&good); return err }, false},
		{"non-finite state", func() error {
			_, err := ode.Solve(ode.Problem{Field: sqrtField(), Y0: []float64{1}, P: []float64{1}, T1: 1}, nil)
			return err
		}, false},
		{"non-finite loss", func() error {
			return grad(good, ode.Loss{Name: "badlog", F: func(y, _, _ []tape.V) tape.V { return y[0].AddC(-10).Log() }}, m)
		}, false},
		{"cancelled context", func() error { _, err := sv.SolveContext(cancelled, &good); return err }, false},
	} {
		wantInput(t, c.name, c.err(), c.input)
	}
	// A mesh with a failed trajectory is a bad input that also names the
	// failure.
	if err := grad(good, ode.SumSquares(), failedMesh); !errors.Is(err, ode.ErrMaxSteps) {
		t.Errorf("mesh with a failed trajectory: %v, want it to wrap ErrMaxSteps too", err)
	}
}

// mustSolver returns NewSolver(f, s), failing the test on an error.
func mustSolver(t *testing.T, f ode.Field, s *ode.Settings) *ode.Solver {
	t.Helper()
	sv, err := ode.NewSolver(f, s)
	if err != nil {
		t.Fatal(err)
	}
	return sv
}
