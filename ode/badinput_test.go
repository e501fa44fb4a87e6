package ode_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Tests of inputs a demanding user gives by mistake (session 50's audit):
// each class returns an error that names the problem, never a panic or a
// misleading message.

// TestSolveDenseInputErrors checks that SolveDense returns the error of an
// input that makes the record fail as a whole (a field the solver was not
// made with, a non-finite end time, an Y0 of the wrong length), with and
// without AllowFailures: with it, only failed trajectories are statuses.
func TestSolveDenseInputErrors(t *testing.T) {
	t.Parallel()
	decay := ode.Field{Name: "decay", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{p[0].Mul(y[0]).Neg()} }}
	other := decay
	other.F = func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{p[0].Sqrt().Mul(y[0])} }
	good := ode.Problem{Field: decay, N: 2, Y0: []float64{1}, P: []float64{1}, T1: 1}
	cases := []struct {
		name string
		mod  func(p *ode.Problem)
		want string
	}{
		{"other field", func(p *ode.Problem) { p.Field = other }, "traced programs differ"},
		{"NaN end time", func(p *ode.Problem) { p.T1 = math.NaN() }, "end time NaN"},
		{"Y0 length", func(p *ode.Problem) { p.Y0 = []float64{1, 2, 3} }, "len(Y0) = 3"},
		{"non-finite P", func(p *ode.Problem) { p.P = []float64{math.Inf(1)} }, "P[0] = +Inf is not finite"},
	}
	for _, allow := range []bool{false, true} {
		sv, err := ode.NewSolver(decay, &ode.Settings{AllowFailures: allow})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			p := good
			c.mod(&p)
			var ds *ode.DenseSolution
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s (AllowFailures %t): SolveDense panicked: %v", c.name, allow, r)
					}
				}()
				ds, err = sv.SolveDense(&p)
			}()
			if ds != nil || err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ode.ErrInput) {
				t.Errorf("%s (AllowFailures %t): got %v, %v; want an error containing %q, wrapping ErrInput", c.name, allow, ds, err, c.want)
			}
		}
	}
}

// TestGradPartialCauseNamed checks the failures GradPartial reports for
// trajectories whose solve ended well but whose loss term or gradient
// rows are not finite: each is NonFinite (errors.Is ErrNonFinite) and its
// message names the loss term or the gradient, not the state.
func TestGradPartialCauseNamed(t *testing.T) {
	t.Parallel()
	// y0' = −√p0·y0, y1' = 0: the state stays finite for p0 ≥ 0 whatever
	// the loss; at p0 = 0 its derivative with respect to p0 is infinite.
	f := ode.Field{Name: "decay", Dim: 2, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Sqrt().Mul(y[0]).Neg(), y[1].Const(0)}
	}}
	cases := []struct {
		name string
		loss ode.Loss
		y0   []float64 // trajectory 1's y0; trajectory 0 is (1, 1)
		p    float64   // trajectory 1's p0; trajectory 0's is 1
		want string
	}{
		{"loss term NaN", ode.Loss{Name: "log", F: func(y, _, _ []tape.V) tape.V { return y[1].Log() }}, []float64{1, -1}, 1, "its loss term is not finite"},
		{"loss derivative infinite", ode.Loss{Name: "sqrt", F: func(y, _, _ []tape.V) tape.V { return y[1].Sqrt().Add(y[0]) }}, []float64{1, 0}, 1, "the derivative of its loss term is not finite"},
		{"gradient row infinite", ode.Loss{Name: "y0", F: func(y, _, _ []tape.V) tape.V { return y[0] }}, []float64{1, 1}, 0, "its gradient with respect to P (parameter 0) is"},
	}
	sv, err := ode.NewSolver(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		p := ode.Problem{Field: f, Y0: append([]float64{1, 1}, c.y0...), P: []float64{1, c.p}}
		p.T1 = 1
		g, fails, err := sv.GradPartial(context.Background(), nil, &p, c.loss, nil, nil)
		if err != nil || g == nil || len(fails) != 1 || fails[0].Index != 1 {
			t.Fatalf("%s: GradPartial: %v, %v, %v; want trajectory 1 to fail alone", c.name, g, fails, err)
		}
		e := fails[0]
		msg := e.Error()
		if !errors.Is(e, ode.ErrNonFinite) || !strings.Contains(msg, c.want) || strings.Contains(msg, "non-finite state") || !strings.Contains(msg, "loss") {
			t.Errorf("%s: failure %q (status %v); want NonFinite naming %q and the loss, not the state", c.name, msg, e.Status, c.want)
		}
	}
}

// TestNilProblem checks that every Solver method taking a *Problem
// returns an error naming it when given nil, and that NewTrainer does for
// a nil TrainSpec, instead of a nil-pointer panic.
func TestNilProblem(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "decay", Dim: 1, F: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0].Neg()} }}
	sv, err := ode.NewSolver(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	loss := ode.SumSquares()
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Solve", func() error { _, err := sv.Solve(nil); return err }},
		{"SolveContext", func() error { _, err := sv.SolveContext(ctx, nil); return err }},
		{"SolveTo", func() error { _, err := sv.SolveTo(nil, nil); return err }},
		{"Record", func() error { _, _, err := sv.Record(nil); return err }},
		{"Grad", func() error { _, err := sv.Grad(nil, nil, loss, nil); return err }},
		{"GradPartial", func() error { _, _, err := sv.GradPartial(ctx, nil, nil, loss, nil, nil); return err }},
		{"Replay", func() error { _, err := sv.Replay(nil, &ode.Mesh{}); return err }},
		{"Loss", func() error { _, _, err := sv.Loss(nil, loss, nil); return err }},
		{"CheckLoss", func() error { return sv.CheckLoss(nil, loss) }},
		{"SolveDense", func() error { _, err := sv.SolveDense(nil); return err }},
	} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s(nil problem) panicked: %v", c.name, r)
				}
			}()
			err = c.call()
		}()
		if err == nil || !strings.Contains(err.Error(), "the problem is nil") || !errors.Is(err, ode.ErrInput) {
			t.Errorf("%s(nil problem): error %v, want one saying the problem is nil, wrapping ErrInput", c.name, err)
		}
	}
}

// TestLossRegErrors checks a Loss whose Reg term fails: one that does not
// trace is refused by CheckLoss and by Grad, Loss and GradPartial before
// any work (it was found after the solve, and CheckLoss passed it; with
// every trajectory skipped GradPartial returned a loss of 0), and one
// that is not finite is an error naming Reg (Loss returned NaN with no
// error, Grad "the loss is NaN"). A term that indexes past its arguments
// is told their lengths (it was told that the saved states were empty
// whatever it read).
func TestLossRegErrors(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "decay", Dim: 2, Params: 1, Shared: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Neg(), y[1].Mul(p[1])}
	}}
	term := func(y, _, _ []tape.V) tape.V { return y[0] }
	var outside tape.V
	cases := []struct {
		name  string
		loss  ode.Loss
		input bool   // a bad input: CheckLoss refuses it too, and no work is done
		want  string // in every call's error
	}{
		{"Reg panics", ode.Loss{F: term, Reg: func([]tape.V) tape.V { panic("no prior") }}, true, "Reg: tape: tracing loss.reg: panic: no prior"},
		{"Reg returns the zero V", ode.Loss{F: term, Reg: func([]tape.V) tape.V { return tape.V{} }}, true, "Reg: tape: Build: argument 1 is the zero V"},
		{"Reg reads the term's trace", ode.Loss{F: func(y, _, _ []tape.V) tape.V { outside = y[0]; return y[0] }, Reg: func(s []tape.V) tape.V { return s[0].Add(outside) }}, true, "Reg: tape: Add at"},
		{"Reg NaN", ode.Loss{F: term, Reg: func(s []tape.V) tape.V { return s[0].Log() }}, false, "its Reg term is NaN"},
		{"Reg infinite", ode.Loss{F: term, Reg: func(s []tape.V) tape.V { return s[0].Const(1).Div(s[0].Add(s[0].Const(1))) }}, false, "its Reg term is +Inf"},
		{"term reads data past DataDim", ode.Loss{F: func(_, _, d []tape.V) tape.V { return d[0] }}, true, "lengths y 2 (Dim), ys 0 (Problem.SaveAt is empty, so ys has no values), data 0 (DataDim))"},
		{"term reads p past Params", ode.Loss{FP: func(_, _, _, p, _ []tape.V) tape.V { return p[3] }}, true, "data 0 (DataDim), p 1 (Params), s 1 (Shared))"},
	}
	for _, c := range cases {
		done := 0
		sv, err := ode.NewSolver(f, &ode.Settings{Progress: func(int, int) { done++ }, Exec: tape.ExecSettings{Workers: 1}})
		if err != nil {
			t.Fatal(err)
		}
		p := ode.Problem{Field: f, Y0: []float64{1, 2, 3, 4}, P: []float64{1, 2}, Shared: []float64{-1}, T1: 1}
		calls := []struct {
			name string
			run  func() error
		}{
			{"Grad", func() error { _, err := sv.Grad(nil, &p, c.loss, nil); return err }},
			{"Loss", func() error { _, _, err := sv.Loss(&p, c.loss, nil); return err }},
			{"GradPartial", func() error {
				_, _, err := sv.GradPartial(context.Background(), nil, &p, c.loss, nil, nil)
				return err
			}},
			{"GradPartial skipping all", func() error {
				_, _, err := sv.GradPartial(context.Background(), nil, &p, c.loss, nil, []bool{true, true})
				return err
			}},
		}
		if c.input {
			calls = append(calls, struct {
				name string
				run  func() error
			}{"CheckLoss", func() error { return sv.CheckLoss(&p, c.loss) }})
		}
		for _, call := range calls {
			done = 0
			err := call.run()
			if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, ode.ErrInput) != c.input {
				t.Errorf("%s, %s: error %v; want one containing %q, wrapping ErrInput: %t", c.name, call.name, err, c.want, c.input)
			}
			if c.input && done != 0 {
				t.Errorf("%s, %s: %d trajectories solved before the error", c.name, call.name, done)
			}
		}
	}
}

// TestMeshFailureSaysWhere checks the time a failed trajectory's error
// names where the error is built from a mesh's statuses or a dense
// solution: a recorded mesh's steps say where the trajectory stopped; a
// GradPartial mesh keeps no steps of it, and the message then names no
// time; an unknown last step is not printed as h=0. (Both read "stopped
// at t=0 (h=0, Tsit5)" for a trajectory that stopped at t = 0.5.)
func TestMeshFailureSaysWhere(t *testing.T) {
	t.Parallel()
	// y' = −y + log(p − t): NaN from t = p.
	f := ode.Field{Name: "logwall", Dim: 1, Params: 1, F: func(tt tape.V, y, p []tape.V) []tape.V {
		return []tape.V{y[0].Neg().Add(p[0].Sub(tt).Log())}
	}}
	sv, err := ode.NewSolver(f, &ode.Settings{AllowFailures: true})
	if err != nil {
		t.Fatal(err)
	}
	p := ode.Problem{Field: f, Y0: []float64{1, 1, 1}, P: []float64{10, 0.5, 10}, T1: 1}
	m, sol, err := sv.Record(&p)
	if err != nil || sol.Status[1] != ode.NonFinite {
		t.Fatalf("Record: %v, statuses %v; want trajectory 1 non-finite", err, sol.Status)
	}
	stopped := fmt.Sprintf("trajectory 1 stopped at t=%.6g (Tsit5): non-finite state", sol.T[1])
	g, _, err := sv.GradPartial(context.Background(), nil, &p, ode.SumSquares(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := sv.SolveDense(&p)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		err  func() error
		want string
	}{
		{"Grad on the recorded mesh", func() error { _, err := sv.Grad(nil, &p, ode.SumSquares(), m); return err }, stopped},
		{"Replay of the recorded mesh", func() error { _, err := sv.Replay(&p, m); return err }, stopped},
		{"Grad on GradPartial's mesh", func() error { _, err := sv.Grad(nil, &p, ode.SumSquares(), g.Mesh); return err }, "trajectory 1 failed (Tsit5): non-finite state"},
		{"Evaluate", func() error { _, err := ds.Evaluate(nil, 1, 0.25); return err }, stopped},
	} {
		err := c.err()
		var te *ode.TrajectoryError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "h=0") {
			t.Errorf("%s: error %v; want a *TrajectoryError containing %q, without h=0", c.name, err, c.want)
		}
	}
}

// TestEventGradMemoryLimit checks the error of a gradient with events
// whose chunk's states do not fit in Settings.MemoryLimit (its reverse
// sweep keeps every state; there are no checkpoints through events): it
// wraps ErrTooLarge and says how much the chunk needs and what to raise
// MemoryLimit to (it said "raise MemoryLimit", and not by how much); with
// that limit the gradient is the default's, bit for bit.
func TestEventGradMemoryLimit(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "decay", Dim: 2, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Neg(), y[0]}
	}}
	ev := []ode.Event{{Name: "half", G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].Sub(y[0].Const(0.5)) },
		Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0].MulC(2), y[1]} }}}
	p := ode.Problem{Field: f, Y0: []float64{1, 0, 2, 0, 3, 0}, P: []float64{1, 2, 3}, T1: 2, SaveAt: []float64{0.5, 1}}
	grad := func(limit int64) (*ode.Gradient, error) {
		sv, err := ode.NewSolver(f, &ode.Settings{Events: ev, MemoryLimit: limit, Exec: tape.ExecSettings{Workers: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return sv.Grad(nil, &p, ode.SumSquares(), nil)
	}
	want, err := grad(0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = grad(100)
	if err == nil || !errors.Is(err, ode.ErrTooLarge) || !strings.Contains(err.Error(), "more than Settings.MemoryLimit = 100 bytes allows a worker") ||
		!strings.Contains(err.Error(), "raise MemoryLimit to ") {
		t.Fatalf("MemoryLimit 100: error %v; want one wrapping ErrTooLarge that says what to raise MemoryLimit to", err)
	}
	// "trajectories 0 to 2 need B (S steps of V values each)": B = 8·S·V.
	var lo, hi, steps, vals int
	var need, unit string
	msg := err.Error()
	if _, err := fmt.Sscanf(msg[strings.Index(msg, "trajectories "):], "trajectories %d to %d need %s %s (%d steps of %d values each;", &lo, &hi, &need, &unit, &steps, &vals); err != nil {
		t.Fatalf("%v: %q", err, msg)
	}
	limit := int64(2 * 8 * steps * vals) // twice the need: the buffer grows by doubling
	got, err := grad(limit)
	if err != nil {
		t.Fatalf("MemoryLimit %d (what the error said to raise it to): %v", limit, err)
	}
	if !slices.Equal(got.P, want.P) || !slices.Equal(got.Y0, want.Y0) || got.Loss != want.Loss {
		t.Errorf("MemoryLimit %d: gradient %v, %v; want the default's %v, %v", limit, got.Y0, got.P, want.Y0, want.P)
	}
}
