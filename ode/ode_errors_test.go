package ode_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// This file checks the error paths: bad input is reported before any work,
// with a message that names what is wrong and what is expected; failed
// trajectories are reported as *TrajectoryError (index, time, status,
// hint) unwrapping to the sentinel errors; AllowFailures returns statuses
// instead; a failed mesh is never replayed.

// wantErr fails unless err is non-nil and its text contains every want.
func wantErr(t *testing.T, name string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("Case %v: want an error containing %q, got nil", name, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Case %v: want an error containing %q, got %q", name, w, err.Error())
		}
	}
}

// baseProblem is a valid two-trajectory Lorenz problem with shared σ, β.
func baseProblem() ode.Problem {
	return ode.Problem{Field: lorenzSharedField(), N: 2,
		Y0:     []float64{1, 0, 20, 2, 1, 15},
		P:      []float64{28, 21},
		Shared: []float64{10, 8.0 / 3},
		T1:     1,
	}
}

// strayV is a value of another trace, which a field must not use.
var strayV = func() tape.V {
	var v tape.V
	if _, err := tape.Trace("other", []tape.Input{{Name: "x"}}, func(in []tape.V) []tape.V {
		v = in[0]
		return in
	}); err != nil {
		panic(err)
	}
	return v
}()

// TestInputErrors checks that Solve, Record, Replay and Grad reject bad
// problems and settings before doing any work, with an error that names
// the field, the offending quantity and value, and what is expected.
func TestInputErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		modify func(p *ode.Problem, s *ode.Settings)
		want   []string
	}{
		{"Y0 not a multiple of Dim", func(p *ode.Problem, _ *ode.Settings) { p.N, p.Y0 = 0, p.Y0[:4] },
			[]string{"lorenz-shared", "len(Y0) = 4", "multiple of Dim = 3"}},
		{"Y0 length vs N", func(p *ode.Problem, _ *ode.Settings) { p.Y0 = append(p.Y0, 1, 2, 3) },
			[]string{"lorenz-shared", "len(Y0) = 9", "want Dim = 3 or N*Dim = 6"}},
		{"P length", func(p *ode.Problem, _ *ode.Settings) { p.P = []float64{1, 2, 3} },
			[]string{"lorenz-shared", "len(P) = 3", "want Params = 1 or N*Params = 2"}},
		{"P for a field without parameters", func(p *ode.Problem, _ *ode.Settings) {
			p.Field = lorenz96Field(4, true)
			p.Y0, p.P, p.Shared = []float64{1, 2, 3, 4}, []float64{1}, []float64{8}
		}, []string{"lorenz96-shared", "len(P) = 1", "no per-trajectory parameters"}},
		{"Shared length", func(p *ode.Problem, _ *ode.Settings) { p.Shared = p.Shared[:1] },
			[]string{"lorenz-shared", "len(Shared) = 1", "want 2"}},
		{"Shared missing", func(p *ode.Problem, _ *ode.Settings) { p.Shared = nil },
			[]string{"len(Shared) = 0", "want 2"}},
		{"negative N", func(p *ode.Problem, _ *ode.Settings) { p.N = -1 },
			[]string{"N = -1"}},
		{"T1 equal to T0", func(p *ode.Problem, _ *ode.Settings) { p.T0, p.T1 = 1, 1 },
			[]string{"lorenz-shared", "end time 1 of trajectory 0", "greater than T0 = 1", "span is empty"}},
		{"T1 before T0", func(p *ode.Problem, _ *ode.Settings) { p.T1 = -2 },
			[]string{"end time -2", "greater than T0 = 0", "forward in time only", "z' = −F(−s, z, p)", "from s = −T0 to −T1"}},
		{"empty ensemble", func(p *ode.Problem, _ *ode.Settings) { p.N, p.Y0, p.P = 0, nil, nil },
			[]string{"lorenz-shared", "ensemble is empty", "N = 0 and len(Y0) = 0", "Dim = 3"}},
		{"P rows without N", func(p *ode.Problem, _ *ode.Settings) { p.N, p.Y0, p.P = 0, p.Y0[:3], []float64{28, 21, 14} },
			[]string{"len(P) = 3", "want Params = 1 or N*Params = 1", "N = 1 from len(Y0) = 3", "set N = 3"}},
		{"T1 infinite", func(p *ode.Problem, _ *ode.Settings) { p.T1 = math.Inf(1) },
			[]string{"end time +Inf", "must be finite"}},
		{"T1s entry before T0", func(p *ode.Problem, _ *ode.Settings) { p.T1s = []float64{1, -1} },
			[]string{"end time -1 of trajectory 1", "greater than T0 = 0"}},
		{"T1s length", func(p *ode.Problem, _ *ode.Settings) { p.T1s = []float64{1, 2, 3} },
			[]string{"len(T1s) = 3", "want N = 2"}},
		{"T0 NaN", func(p *ode.Problem, _ *ode.Settings) { p.T0 = math.NaN() },
			[]string{"T0 = NaN", "not finite"}},
		{"Y0 NaN", func(p *ode.Problem, _ *ode.Settings) { p.Y0[4] = math.NaN() },
			[]string{"Y0[4] = NaN", "not finite", "trajectory 1, component 1"}},
		{"P infinite", func(p *ode.Problem, _ *ode.Settings) { p.P[1] = math.Inf(1) },
			[]string{"P[1] = +Inf", "not finite", "trajectory 1, parameter 0"}},
		{"Shared infinite", func(p *ode.Problem, _ *ode.Settings) { p.Shared[0] = math.Inf(-1) },
			[]string{"Shared[0] = -Inf", "not finite"}},
		{"RelTol negative", func(_ *ode.Problem, s *ode.Settings) { s.RelTol = -1e-6 },
			[]string{"RelTol = -1e-06", "must be positive"}},
		{"RelTol infinite", func(_ *ode.Problem, s *ode.Settings) { s.RelTol = math.Inf(1) },
			[]string{"RelTol = +Inf", "positive and finite"}},
		{"AbsTol negative", func(_ *ode.Problem, s *ode.Settings) { s.AbsTol = -1 },
			[]string{"AbsTol = -1", "must be positive"}},
		{"AbsTol NaN", func(_ *ode.Problem, s *ode.Settings) { s.AbsTol = math.NaN() },
			[]string{"AbsTol = NaN", "must be positive"}},
		{"MaxSteps negative", func(_ *ode.Problem, s *ode.Settings) { s.MaxSteps = -3 },
			[]string{"MaxSteps = -3", "negative"}},
		{"Dt0 negative", func(_ *ode.Problem, s *ode.Settings) { s.Dt0 = -0.1 },
			[]string{"Dt0 = -0.1", "must be positive (or 0 for automatic)"}},
		{"controller", func(_ *ode.Problem, s *ode.Settings) { s.Controller.FactorMin = 2 },
			[]string{"controller", "FactorMin:2", "need 0 < FactorMin < 1 < FactorMax"}},
		{"SaveAt after T1", func(p *ode.Problem, _ *ode.Settings) { p.SaveAt = []float64{0.5, 3} },
			[]string{"SaveAt[1] = 3", "outside [T0, T1] = [0, 1]"}},
		{"SaveAt before T0", func(p *ode.Problem, _ *ode.Settings) { p.T0 = 0.5; p.SaveAt = []float64{0.25} },
			[]string{"SaveAt[0] = 0.25", "outside [T0, T1] = [0.5, 1]"}},
		{"SaveAt after the smallest T1s", func(p *ode.Problem, _ *ode.Settings) { p.T1s = []float64{2, 0.5}; p.SaveAt = []float64{1} },
			[]string{"SaveAt[0] = 1", "outside [T0, min(T1s)] = [0, 0.5]", "trajectory 1 ends at 0.5"}},
		{"SaveAt unsorted", func(p *ode.Problem, _ *ode.Settings) { p.SaveAt = []float64{0.25, 0.75, 0.5} },
			[]string{"SaveAt is not sorted", "SaveAt[2] = 0.5 < SaveAt[1] = 0.75"}},
		{"SaveAt NaN", func(p *ode.Problem, _ *ode.Settings) { p.SaveAt = []float64{math.NaN()} },
			[]string{"SaveAt[0] = NaN", "not finite"}},
		{"field of 2^40 components", func(p *ode.Problem, _ *ode.Settings) { p.Field.Dim = 1 << 40 },
			[]string{"Dim + Params + Shared = 1099511627776 + 1 + 2 inputs", "more than the 16777216", "too large"}},
		{"field of MaxInt parameters", func(p *ode.Problem, _ *ode.Settings) { p.Field.Params = math.MaxInt },
			[]string{"inputs, more than the 16777216", "check the sizes"}},
		{"field returns too few values", func(p *ode.Problem, _ *ode.Settings) {
			p.Field.F = func(_ tape.V, y, _ []tape.V) []tape.V { return y[:2] }
		}, []string{"field lorenz-shared returned 2 values", "want Dim = 3"}},
		{"field returns too many values", func(p *ode.Problem, _ *ode.Settings) {
			p.Field.F = func(_ tape.V, y, _ []tape.V) []tape.V { return append(y, y[0]) }
		}, []string{"returned 4 values", "want Dim = 3"}},
		{"field mixes traces", func(p *ode.Problem, _ *ode.Settings) {
			p.Field.F = func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0].Mul(strayV), y[1], y[2]} }
		}, []string{"lorenz-shared", "Mul", "ode_errors_test.go", "argument 2 is from another trace", `"other"`}},
		{"field returns a zero V", func(p *ode.Problem, _ *ode.Settings) {
			p.Field.F = func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0], {}, y[2]} }
		}, []string{"lorenz-shared", "zero V"}},
		{"field panics", func(p *ode.Problem, _ *ode.Settings) {
			p.Field.F = func(_ tape.V, y, _ []tape.V) []tape.V { panic(errors.New("boom in F")) }
		}, []string{"lorenz-shared", "boom in F"}},
		{"field without F", func(p *ode.Problem, _ *ode.Settings) { p.Field.F = nil },
			[]string{"field lorenz-shared has no F"}},
		{"field with Dim 0", func(p *ode.Problem, _ *ode.Settings) { p.Field.Dim = 0 },
			[]string{"Dim = 0", "must be at least 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A valid mesh of the base problem, for Replay and Grad.
			base := baseProblem()
			m, err := ode.Record(base, nil)
			if err != nil {
				t.Fatal(err)
			}
			p := baseProblem()
			set := ode.Settings{}
			tc.modify(&p, &set)
			_, err = ode.Solve(p, &set)
			wantErr(t, tc.name+" (Solve)", err, tc.want...)
			wantInput(t, tc.name+" (Solve)", err, true)
			_, err = ode.Record(p, &set)
			wantErr(t, tc.name+" (Record)", err, tc.want...)
			wantInput(t, tc.name+" (Record)", err, true)
			_, err = ode.Replay(p, m, &set)
			wantErr(t, tc.name+" (Replay)", err, tc.want...)
			wantInput(t, tc.name+" (Replay)", err, true)
			_, err = ode.Grad(nil, p, ode.SumSquares(), nil, &set)
			wantErr(t, tc.name+" (Grad)", err, tc.want...)
			wantInput(t, tc.name+" (Grad)", err, true)
			if err != nil && !strings.HasPrefix(err.Error(), "ode: ") {
				t.Errorf("Case %v: want the error prefixed with \"ode: \", got %q", tc.name, err)
			}
		})
	}
}

// TestMeshAndLossErrors checks the errors of Grad and Replay for a mesh
// that does not fit the problem and for bad losses.
func TestMeshAndLossErrors(t *testing.T) {
	t.Parallel()
	p := baseProblem()
	m, err := ode.Record(p, &ode.Settings{Method: ode.Tsit5})
	if err != nil {
		t.Fatal(err)
	}
	three := baseProblem()
	three.N, three.Y0, three.P = 3, []float64{1, 0, 20}, []float64{28}
	late := baseProblem()
	late.T0 = 0.5
	short := *m
	short.Len = m.Len[:1]
	longer := baseProblem()
	longer.T1 = 2 * p.T1
	perTraj := baseProblem()
	perTraj.T1s = []float64{p.T1, 2 * p.T1}
	edited := *m // end times changed by hand; its steps still reach the recorded one
	edited.T1 = []float64{2 * p.T1, 2 * p.T1}
	mt, err := ode.Record(perTraj, &ode.Settings{Method: ode.Tsit5})
	if err != nil {
		t.Fatal(err)
	}
	otherT := perTraj
	otherT.T1s = []float64{p.T1, 3 * p.T1}
	for _, tc := range []struct {
		name string
		prob ode.Problem
		mesh *ode.Mesh
		set  *ode.Settings
		loss ode.Loss
		want []string
	}{
		{"mesh for another N", three, m, nil, ode.SumSquares(), []string{"mesh has 2 trajectories, problem 3"}},
		{"mesh for another T0", late, m, nil, ode.SumSquares(), []string{"mesh starts at T0 = 0, problem at 0.5"}},
		{"mesh of another method", p, m, &ode.Settings{Method: ode.Vern7}, ode.SumSquares(),
			[]string{"recorded with Tsit5 but the settings use Vern7", "replay it with the method that recorded it"}},
		{"inconsistent mesh", p, &short, nil, ode.SumSquares(), []string{"mesh arrays are inconsistent", "len(Len) 1"}},
		{"mesh for another T1", longer, m, nil, ode.SumSquares(), []string{"mesh was recorded to T1 = 1, but the problem ends at 2"}},
		{"mesh with edited T1", longer, &edited, nil, ode.SumSquares(), []string{"mesh was recorded to T1 = 1, but the problem ends at 2"}},
		{"mesh for other T1s", otherT, mt, nil, ode.SumSquares(), []string{"recorded to T1 = 2 for trajectory 1, but the problem ends at 3"}},
		{"loss without F", p, m, nil, ode.Loss{Name: "empty"}, []string{"loss empty has no F"}},
		{"loss data length", p, m, nil, ode.Loss{Name: "data", DataDim: 2, Data: []float64{1, 2, 3},
			F: func(y, _, d []tape.V) tape.V { return y[0].Mul(d[0]) }},
			[]string{"loss data", "len(Data) = 3", "want DataDim = 2 or N*DataDim = 4"}},
		{"loss data width negative", p, m, nil, ode.Loss{Name: "data", DataDim: -1, F: func(y, _, d []tape.V) tape.V { return y[0] }},
			[]string{"loss data", "DataDim = -1 is negative"}},
		{"loss data not finite", p, m, nil, ode.Loss{Name: "data", DataDim: 2, Data: []float64{1, 2, 3, math.NaN()},
			F: func(y, _, d []tape.V) tape.V { return y[0].Sub(d[1]).Square() }},
			[]string{"loss data", "Data[3] = NaN is not finite", "trajectory 1, column 1", "give missing observations a finite value"}},
		{"loss data row not finite", p, m, nil, ode.Loss{Name: "data", DataDim: 2, Data: []float64{math.Inf(1), 2},
			F: func(y, _, d []tape.V) tape.V { return y[0].Sub(d[0]).Square() }},
			[]string{"Data[0] = +Inf is not finite", "the row of every trajectory, column 0"}},
		{"loss component out of range", p, m, nil, ode.Component(3), []string{"y:3", "the state has 3 components"}},
		{"loss not finite", p, m, nil, ode.Loss{Name: "badlog", F: func(y, _, _ []tape.V) tape.V { return y[0].AddC(-1e6).Log() }},
			[]string{"loss badlog", "trajectory 0", "not finite", "Log"}},
	} {
		_, err := ode.Grad(nil, tc.prob, tc.loss, tc.mesh, tc.set)
		wantErr(t, tc.name+" (Grad)", err, tc.want...)
		input := tc.name != "loss not finite" // a run-time failure of valid inputs
		wantInput(t, tc.name+" (Grad)", err, input)
		if strings.HasPrefix(tc.name, "mesh") || tc.name == "inconsistent mesh" {
			_, err = ode.Replay(tc.prob, tc.mesh, tc.set)
			wantErr(t, tc.name+" (Replay)", err, tc.want...)
			wantInput(t, tc.name+" (Replay)", err, true)
		}
	}
	// A non-finite Data entry in a column the loss does not read is no
	// error.
	unread := ode.Loss{Name: "data", DataDim: 2, Data: []float64{1, math.NaN(), 3, math.NaN()},
		F: func(y, _, d []tape.V) tape.V { return y[0].Sub(d[0]).Square() }}
	if g, err := ode.Grad(nil, p, unread, m, nil); err != nil || math.IsNaN(g.Loss) {
		t.Errorf("NaN in a column the loss does not read: loss %v, error %v; want a finite loss", g, err)
	}
}

// TestHandBuiltMeshErrors checks that an inconsistent hand-built mesh
// (a trajectory longer than Rows) gives an error, not a panic, from Replay
// and Grad, with and without save times.
func TestHandBuiltMeshErrors(t *testing.T) {
	t.Parallel()
	for _, save := range [][]float64{nil, {1}} {
		pr := ode.Problem{Field: vdpField(), N: 2, Y0: []float64{1, 0}, P: []float64{1}, T1: 1, SaveAt: save}
		m := uniformMesh(ode.Tsit5, 0, 0.5, []int{4, 8}) // steps sum to 0.5 < T1
		m.Len[1] = 9                                     // > Rows = 8
		name := fmt.Sprintf("Len > Rows, SaveAt %v", save)
		for _, call := range []struct {
			what string
			f    func() error
		}{
			{"Replay", func() error { _, err := ode.Replay(pr, m, nil); return err }},
			{"Grad", func() error { _, err := ode.Grad(nil, pr, ode.SumSquares(), m, nil); return err }},
		} {
			panicked := false
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						panicked = true
						t.Errorf("Case %v (%s): want an error, got a panic: %v", name, call.what, r)
					}
				}()
				return call.f()
			}()
			if !panicked {
				wantErr(t, name+" ("+call.what+")", err, "trajectory 1", "9")
			}
		}
	}
}

// TestSolverProblemMismatch checks that a Solver refuses a problem whose
// field has another shape.
func TestSolverProblemMismatch(t *testing.T) {
	t.Parallel()
	sv, err := ode.NewSolver(lorenzField(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pr := ode.Problem{Field: vdpField(), Y0: []float64{1, 0}, P: []float64{1}, T1: 1}
	_, err = sv.Solve(&pr)
	wantErr(t, "Solve", err, "problem field vanderpol (Dim 2, Params 1, Shared 0)", "does not match the solver's lorenz (Dim 3, Params 3, Shared 0)")
	_, _, err = sv.Record(&pr)
	wantErr(t, "Record", err, "does not match the solver's lorenz")
	_, err = sv.Grad(nil, &pr, ode.SumSquares(), nil)
	wantErr(t, "Grad", err, "does not match the solver's lorenz")
	wantInput(t, "Grad", err, true)
}

// blowupField is y' = p·y², whose solution 1/(1/y0 − p·t) blows up at
// t = 1/(p·y0).
func blowupField() ode.Field {
	return ode.Field{Name: "blowup", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0].Square())}
	}}
}

// sqrtField is y' = −√y − p, whose solution reaches y = 0 with slope −p
// in finite time (2(1 − ln 2) for y0 = 1, p = 1) and then needs the square
// root of a negative number: NaN.
func sqrtField() ode.Field {
	return ode.Field{Name: "sqrt", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{y[0].Sqrt().Neg().Sub(p[0])}
	}}
}

// logField is y' = log(y − p), NaN from the start when y0 < p.
func logField() ode.Field {
	return ode.Field{Name: "log", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{y[0].Sub(p[0]).Log()}
	}}
}

// TestTrajectoryFailures checks each failure status: the error is a
// *TrajectoryError naming the first failed trajectory, the time it
// reached, the status and a hint; it unwraps to the status's sentinel;
// the other trajectories of the ensemble are unaffected.
func TestTrajectoryFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		prob     ode.Problem
		set      ode.Settings
		sentinel error
		status   ode.Status
		index    int
		failed   []int   // failed trajectories
		tWant    float64 // time of the first failure (NaN: not checked)
		tTol     float64
		want     []string
	}{
		{
			name: "max steps", prob: ode.Problem{Field: lorenzField(), N: 3, Y0: []float64{1, 0, 20},
				P: []float64{10, 28, 8.0 / 3}, T1s: []float64{0.01, 5, 10}},
			set: ode.Settings{MaxSteps: 40}, sentinel: ode.ErrMaxSteps, status: ode.MaxStepsReached,
			index: 1, failed: []int{1, 2}, tWant: math.NaN(),
			want: []string{"trajectory 1 stopped at t=", "Tsit5", "max steps reached", "(2 trajectories failed)", "increase Settings.MaxSteps"},
		},
		{
			name: "step size underflow (blow-up of y' = p·y²)", prob: ode.Problem{Field: blowupField(), N: 4, Y0: []float64{1},
				P: []float64{0.25, 1, 0.4, 2}, T1: 2},
			sentinel: ode.ErrStepSizeUnderflow, status: ode.StepSizeUnderflow,
			index: 1, failed: []int{1, 3}, tWant: 1, tTol: 1e-4,
			want: []string{"trajectory 1 stopped at t=1", "step size underflow", "blow up near this time"},
		},
		{
			name: "non-finite (√y of y < 0)", prob: ode.Problem{Field: sqrtField(), N: 2, Y0: []float64{4, 1},
				P: []float64{0.1, 1}, T1: 1},
			sentinel: ode.ErrNonFinite, status: ode.NonFinite,
			index: 1, failed: []int{1}, tWant: 2 * (1 - math.Ln2), tTol: 1e-6,
			want: []string{"trajectory 1 stopped at t=0.6137", "non-finite state", "log of a negative number"},
		},
		{
			name: "non-finite from the start (log(y − p) with y0 < p)", prob: ode.Problem{Field: logField(), N: 2, Y0: []float64{0.5, 3},
				P: []float64{1, 1}, T0: 0.5, T1: 1},
			set:      ode.Settings{Method: ode.Vern7},
			sentinel: ode.ErrNonFinite, status: ode.NonFinite,
			index: 0, failed: []int{0}, tWant: 0.5, tTol: 0,
			want: []string{"trajectory 0 stopped at t=0.5", "Vern7", "non-finite state"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := tc.name
			check := func(what string, err error) {
				t.Helper()
				wantErr(t, name+" ("+what+")", err, tc.want...)
				wantInput(t, name+" ("+what+")", err, false)
				if !errors.Is(err, tc.sentinel) {
					t.Errorf("Case %v (%s): errors.Is(err, %v) want true, got false for %v", name, what, tc.sentinel, err)
				}
				var te *ode.TrajectoryError
				if !errors.As(err, &te) {
					t.Fatalf("Case %v (%s): want a *TrajectoryError, got %T", name, what, err)
				}
				if te.Index != tc.index || te.Status != tc.status || te.Failed != len(tc.failed) {
					t.Errorf("Case %v (%s): (Index, Status, Failed) want (%v, %v, %v), got (%v, %v, %v)", name, what,
						tc.index, tc.status, len(tc.failed), te.Index, te.Status, te.Failed)
				}
				if !math.IsNaN(tc.tWant) && !(math.Abs(te.T-tc.tWant) <= tc.tTol) {
					t.Errorf("Case %v (%s): T want %v ± %v, got %v", name, what, tc.tWant, tc.tTol, te.T)
				}
				if !(te.T >= tc.prob.T0) || te.T >= tc.prob.T1+maxAbs(tc.prob.T1s) {
					t.Errorf("Case %v (%s): T want within the time span, got %v", name, what, te.T)
				}
			}
			set := tc.set
			sol, err := ode.Solve(tc.prob, &set)
			check("Solve", err)
			if sol == nil {
				t.Fatalf("Case %v: Solve returned no partial solution with its error", name)
			}
			m, err := ode.Record(tc.prob, &set)
			check("Record", err)
			_, err = ode.Grad(nil, tc.prob, ode.SumSquares(), nil, &set)
			check("Grad", err)
			if m == nil {
				t.Fatalf("Case %v: Record returned no mesh with its error", name)
			}
			failed := map[int]bool{}
			for _, i := range tc.failed {
				failed[i] = true
			}
			for i := 0; i < sol.N; i++ {
				if want := ode.OK; failed[i] {
					want = tc.status
					if sol.Status[i] != want || m.Status[i] != want {
						t.Errorf("Case %v: Status[%d] want %v, got %v (Solve) and %v (Record)", name, i, want, sol.Status[i], m.Status[i])
					}
					if d := tc.prob.Field.Dim; !math.IsNaN(sol.Y[i*d]) {
						t.Errorf("Case %v: Y of failed trajectory %d want NaN, got %v", name, i, sol.Y[i*d:(i+1)*d])
					}
				} else if sol.Status[i] != want || m.Status[i] != want {
					t.Errorf("Case %v: Status[%d] want %v, got %v (Solve) and %v (Record)", name, i, want, sol.Status[i], m.Status[i])
				}
			}
			if err := sol.Err(); !errors.Is(err, tc.sentinel) {
				t.Errorf("Case %v: Solution.Err want %v, got %v", name, tc.sentinel, err)
			} else {
				wantErr(t, name+" (Solution.Err)", err, tc.want...)
			}
			// The trajectories that succeeded are those of an ensemble
			// without the failures, bit for bit.
			d := tc.prob.Field.Dim
			for i := 0; i < sol.N; i++ {
				if failed[i] {
					continue
				}
				alone := tc.prob
				alone.N, alone.T1s = 0, nil
				alone.Y0 = pick(tc.prob.Y0, i, d, sol.N)
				alone.P = pick(tc.prob.P, i, tc.prob.Field.Params, sol.N)
				alone.T1 = tc.prob.T1
				if tc.prob.T1s != nil {
					alone.T1 = tc.prob.T1s[i]
				}
				one, err := ode.Solve(alone, &set)
				if err != nil {
					t.Fatalf("Case %v: trajectory %d alone: %v", name, i, err)
				}
				for c := 0; c < d; c++ {
					if one.Y[c] != sol.Y[i*d+c] {
						t.Errorf("Case %v: trajectory %d component %d: want %v (solved alone), got %v", name, i, c, one.Y[c], sol.Y[i*d+c])
					}
				}
			}
		})
	}
}

// pick returns row i of x ([n×w] or a single row).
func pick(x []float64, i, w, n int) []float64 {
	if len(x) == w*n {
		return append([]float64(nil), x[i*w:(i+1)*w]...)
	}
	return append([]float64(nil), x...)
}

// TestAllowFailures checks that with Settings.AllowFailures Record and
// Solve return per-trajectory statuses without an error (diffrax's
// throw=False), and that Grad and Replay still refuse the failed mesh.
func TestAllowFailures(t *testing.T) {
	t.Parallel()
	pr := ode.Problem{Field: blowupField(), N: 3, Y0: []float64{1}, P: []float64{0.25, 1, 0.4}, T1: 2}
	set := &ode.Settings{AllowFailures: true}
	m, err := ode.Record(pr, set)
	if err != nil {
		t.Errorf("Case Record: want no error with AllowFailures, got %v", err)
	}
	if m == nil {
		t.Fatal("Case Record: want a mesh, got nil")
	}
	if want := []ode.Status{ode.OK, ode.StepSizeUnderflow, ode.OK}; !equalStatus(m.Status, want) {
		t.Errorf("Case Record: Status want %v, got %v", want, m.Status)
	}
	sol, err := ode.Solve(pr, set)
	if err != nil {
		t.Errorf("Case Solve: want no error with AllowFailures, got %v", err)
	}
	if sol == nil {
		t.Fatal("Case Solve: want a solution, got nil")
	}
	if want := []ode.Status{ode.OK, ode.StepSizeUnderflow, ode.OK}; !equalStatus(sol.Status, want) {
		t.Errorf("Case Solve: Status want %v, got %v", want, sol.Status)
	}
	if math.IsNaN(sol.Y[0]) || math.IsNaN(sol.Y[2]) || !math.IsNaN(sol.Y[1]) {
		t.Errorf("Case Solve: Y want finite, NaN, finite, got %v", sol.Y)
	}
	for _, s := range []*ode.Settings{set, nil} {
		_, err = ode.Grad(nil, pr, ode.SumSquares(), m, s)
		wantErr(t, "Grad of a failed mesh", err, "not replaying a mesh with a failed trajectory", "trajectory 1", "step size underflow")
		if !errors.Is(err, ode.ErrStepSizeUnderflow) {
			t.Errorf("Case Grad of a failed mesh: errors.Is(err, ErrStepSizeUnderflow) want true, got false for %v", err)
		}
		_, err = ode.Replay(pr, m, s)
		wantErr(t, "Replay of a failed mesh", err, "not replaying a mesh with a failed trajectory", "trajectory 1")
	}
	_, err = ode.Grad(nil, pr, ode.SumSquares(), nil, set)
	wantErr(t, "Grad recording a failing ensemble with AllowFailures", err, "trajectory 1", "step size underflow")
}

// TestAllowFailuresSaveAt checks that with AllowFailures the saved states
// of the trajectories that succeeded are returned (those of failed ones
// are NaN), as the final states are.
func TestAllowFailuresSaveAt(t *testing.T) {
	t.Parallel()
	pr := ode.Problem{Field: blowupField(), N: 3, Y0: []float64{1}, P: []float64{0.25, 1, 0.4}, T1: 2, SaveAt: []float64{0.5, 2}}
	sol, _ := ode.Solve(pr, &ode.Settings{AllowFailures: true})
	if sol == nil {
		t.Fatal("Case Solve: want a solution, got nil")
	}
	ok := pr
	ok.P = []float64{0.25, 0.25, 0.4}
	want, err := ode.Solve(ok, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		for k := 0; k < 2; k++ {
			if got := sol.Ys[i*2+k]; got != want.Ys[i*2+k] {
				t.Errorf("Case trajectory %d, save time %v: want %v, got %v", i, pr.SaveAt[k], want.Ys[i*2+k], got)
			}
		}
	}
	if !math.IsNaN(sol.Ys[2]) || !math.IsNaN(sol.Ys[3]) {
		t.Errorf("Case failed trajectory 1: saved states want NaN, got %v", sol.Ys[2:4])
	}
}

func equalStatus(a, b []ode.Status) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestMaxStepsBoundary checks that MaxSteps caps attempted (accepted +
// rejected) steps: a budget equal to the attempts a solve needs succeeds,
// one less fails.
func TestMaxStepsBoundary(t *testing.T) {
	t.Parallel()
	pr := ode.Problem{Field: vdpField(), Y0: []float64{2, 0}, P: []float64{5}, T1: 5}
	for _, meth := range []ode.Method{ode.Tsit5, ode.Vern7} {
		m, err := ode.Record(pr, &ode.Settings{Method: meth})
		if err != nil {
			t.Fatal(err)
		}
		attempts := m.Stats.Accepted[0] + m.Stats.Rejected[0]
		if m.Stats.Rejected[0] == 0 {
			t.Errorf("Case %v: want rejected steps, got none", meth.Name())
		}
		if _, err := ode.Record(pr, &ode.Settings{Method: meth, MaxSteps: attempts}); err != nil {
			t.Errorf("Case %v, MaxSteps = %d attempts: want no error, got %v", meth.Name(), attempts, err)
		}
		m2, err := ode.Record(pr, &ode.Settings{Method: meth, MaxSteps: attempts - 1})
		if !errors.Is(err, ode.ErrMaxSteps) {
			t.Errorf("Case %v, MaxSteps = %d: want ErrMaxSteps, got %v", meth.Name(), attempts-1, err)
		}
		if m2 != nil && m2.Stats.Accepted[0]+m2.Stats.Rejected[0] != attempts-1 {
			t.Errorf("Case %v, MaxSteps = %d: attempts want %d, got %d", meth.Name(), attempts-1, attempts-1, m2.Stats.Accepted[0]+m2.Stats.Rejected[0])
		}
	}
}

// TestStatus checks the names and sentinels of the statuses and the
// hint of TrajectoryError.
func TestStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    ode.Status
		name string
		err  error
	}{
		{ode.OK, "ok", nil},
		{ode.MaxStepsReached, "max steps reached", ode.ErrMaxSteps},
		{ode.StepSizeUnderflow, "step size underflow", ode.ErrStepSizeUnderflow},
		{ode.NonFinite, "non-finite state", ode.ErrNonFinite},
		{ode.Status(200), "Status(200)", nil},
	} {
		if got := tc.s.String(); got != tc.name {
			t.Errorf("Case %v: String want %q, got %q", uint8(tc.s), tc.name, got)
		}
		if got := tc.s.Err(); got != tc.err {
			t.Errorf("Case %v: Err want %v, got %v", tc.name, tc.err, got)
		}
	}
	e := &ode.TrajectoryError{Index: 17, T: 3.2, H: 1e-15, Status: ode.StepSizeUnderflow, Method: "Tsit5", Failed: 1}
	wantErr(t, "TrajectoryError", e, "ode: trajectory 17 stopped at t=3.2", "step size underflow", "try Rodas5P")
	if !errors.Is(e, ode.ErrStepSizeUnderflow) || errors.Is(e, ode.ErrMaxSteps) {
		t.Errorf("Case TrajectoryError: errors.Is want (true, false), got (%v, %v)", errors.Is(e, ode.ErrStepSizeUnderflow), errors.Is(e, ode.ErrMaxSteps))
	}
}
