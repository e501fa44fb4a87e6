package ode_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestLateInputErrors checks the input errors that a call finds only
// while it runs, after its checks of the inputs (save times past where a
// terminal event ends a trajectory, a chunk or a dense output beyond
// Settings.MemoryLimit): they wrap ErrInput, as the checks' errors do,
// with their messages and other sentinels kept. Before, none of them
// wrapped ErrInput, so errors.Is(err, ErrInput) told them from run-time
// failures wrongly.
func TestLateInputErrors(t *testing.T) {
	t.Parallel()
	f, bounce := ball()
	floor := ode.Event{Name: "floor", Direction: -1, Terminal: true, G: bounce.G}
	term := mustSolver(t, f, &ode.Settings{Events: []ode.Event{floor}})
	// Trajectory 1 starts lower and lands before the last save time.
	past := ode.Problem{Field: f, N: 2, Y0: []float64{1, 0, 0.05, 0}, P: []float64{0.8, 0.8}, T1: 1, SaveAt: []float64{0.05, 0.5}}

	decay := ode.Field{Name: "decay", Dim: 2, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Neg(), y[0]}
	}}
	half := []ode.Event{{Name: "half", G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].AddC(-0.5) },
		Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0].MulC(2), y[1]} }}}
	pd := ode.Problem{Field: decay, Y0: []float64{1, 0, 2, 0, 3, 0}, P: []float64{1, 2, 3}, T1: 2, SaveAt: []float64{0.5, 1}}
	small := mustSolver(t, decay, &ode.Settings{Events: half, MemoryLimit: 100, Exec: tape.ExecSettings{Workers: 1}})
	dense := mustSolver(t, decay, &ode.Settings{MemoryLimit: 1000})
	plain := ode.Problem{Field: decay, N: 100, Y0: []float64{1, 0}, P: []float64{1}, T1: 10}

	for _, c := range []struct {
		name string
		err  func() error
		also error // another sentinel the error wraps (nil: none checked)
	}{
		{"Grad: save time past a terminal event", func() error { _, err := term.Grad(nil, &past, savedHeights(), nil); return err }, nil},
		{"Loss: save time past a terminal event", func() error { _, _, err := term.Loss(&past, savedHeights(), nil); return err }, nil},
		{"GradPartial: save time past a terminal event", func() error {
			_, _, err := term.GradPartial(context.Background(), nil, &past, savedHeights(), nil, nil)
			return err
		}, nil},
		{"Grad with events beyond MemoryLimit", func() error { _, err := small.Grad(nil, &pd, ode.SumSquares(), nil); return err }, ode.ErrTooLarge},
		{"SolveDense beyond MemoryLimit", func() error { _, err := dense.SolveDense(&plain); return err }, ode.ErrTooLarge},
	} {
		err := c.err()
		wantInput(t, c.name, err, true)
		if c.also != nil && !errors.Is(err, c.also) {
			t.Errorf("Case %s: %v, want it to wrap %v too", c.name, err, c.also)
		}
	}
}
