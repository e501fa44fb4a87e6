package ode_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestCheckpointMaxInt checks that a Checkpoint interval of MaxInt (one
// checkpoint, the initial states) gives the default gradient bit for bit
// when the gradient recomputes from checkpoints: recording with a memory
// limit too small for the recorder to keep the states, and replaying a
// given mesh. Its interval arithmetic overflowed (rows + K − 1) and
// panicked with an index out of range.
func TestCheckpointMaxInt(t *testing.T) {
	t.Parallel()
	p := lorenzProblem()
	p.N, p.P = 20, nil
	for i := range 20 {
		p.P = append(p.P, 10, 20+float64(i), 8.0/3)
	}
	want, err := ode.Grad(nil, p, ode.SumSquares(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  ode.Settings
		mesh *ode.Mesh
	}{
		{"recorded", ode.Settings{Checkpoint: math.MaxInt, MemoryLimit: 1}, nil},
		{"given mesh", ode.Settings{Checkpoint: math.MaxInt}, want.Mesh},
		{"given mesh, interval just past the mesh", ode.Settings{Checkpoint: want.Mesh.Rows + 1}, want.Mesh},
	} {
		got, err := gradNoPanic(p, tc.mesh, &tc.set)
		if err != nil {
			t.Errorf("Case %v: %v", tc.name, err)
			continue
		}
		if got.Loss != want.Loss || !slices.Equal(got.Y0, want.Y0) || !slices.Equal(got.P, want.P) {
			t.Errorf("Case %v: gradient differs from the default's", tc.name)
		}
	}
}

// TestStepFloorAfterAcceptedStep checks the step-size floor 4ε·|t| after
// an accepted step: a first step below it (Dt0 = 1e-300 at t = 1, or
// Hairer's 3.6e-5 at t = 1e12, where the floor is 8.9e-4) used to end the
// trajectory with "step size underflow" right after that step; now the
// next step starts at the floor and the solve matches the same solve
// started at the time origin. Where the floor is far above every step the
// field allows (t = 1e20: 8.9e4), the solve still fails.
func TestStepFloorAfterAcceptedStep(t *testing.T) {
	t.Parallel()
	ref, err := ode.Solve(lorenzProblem(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		t0     float64
		set    ode.Settings
		tol    float64
		status ode.Status
		want   []string
	}{
		{"Dt0 1e-300 at t = 1", 1, ode.Settings{Dt0: 1e-300}, 1e-5, ode.OK, nil},
		// At t = 1e12 t itself rounds by up to 6e-5 at every step, so the
		// time integrated differs from 1 by about 1e-4.
		{"t from 1e12", 1e12, ode.Settings{}, 2e-3, ode.OK, nil},
		{"t from 1e20", 1e20, ode.Settings{}, 0, ode.StepSizeUnderflow, nil},
	} {
		p := lorenzProblem()
		p.T0, p.T1 = tc.t0, tc.t0+1
		if tc.t0 == 1e20 {
			p.T1 = tc.t0 + 1e6
		}
		sol, err := ode.Solve(p, &tc.set)
		if tc.status != ode.OK {
			var te *ode.TrajectoryError
			if !errors.As(err, &te) || te.Status != tc.status {
				t.Errorf("Case %v: want a %v failure, got %v", tc.name, tc.status, err)
			}
			wantErr(t, tc.name, err, tc.want...)
			continue
		}
		if err != nil {
			t.Errorf("Case %v: %v", tc.name, err)
			continue
		}
		for c := range ref.Y {
			if d := math.Abs(sol.Y[c] - ref.Y[c]); !(d <= tc.tol*math.Abs(ref.Y[c])) {
				t.Errorf("Case %v: y[%d](T1): Want: %v, Got: %v.", tc.name, c, ref.Y[c], sol.Y[c])
			}
		}
	}
}

// TestFailureHintsEndToEnd checks the hints of real failed runs, with the
// fields of the *TrajectoryError filled in by the engine: each names its
// cause (see TestFailureHints for the messages in full).
func TestFailureHintsEndToEnd(t *testing.T) {
	t.Parallel()
	lorenz := func(modify func(p *ode.Problem)) ode.Problem {
		p := lorenzProblem()
		modify(&p)
		return p
	}
	rob, hires := problems.Robertson(), problems.HIRES()
	for _, tc := range []struct {
		name string
		prob ode.Problem
		set  ode.Settings
		want []string
	}{
		{"T1 = 1e300", lorenz(func(p *ode.Problem) { p.T1 = 1e300 }), ode.Settings{MaxSteps: 2000},
			[]string{"max steps reached", "far beyond the field's time scale"}},
		{"ρ = 1e300", lorenz(func(p *ode.Problem) { p.P = []float64{10, 1e300, 8.0 / 3} }), ode.Settings{},
			[]string{"non-finite state", "check the field and parameters for overflow"}},
		{"t from 1e20", lorenz(func(p *ode.Problem) { p.T0, p.T1 = 1e20, 1e20+1e6 }), ode.Settings{},
			[]string{"step size underflow", "4ε·|t| = 8.88e+04", "far from the time origin"}},
		{"t from 1e300, non-finite at the smallest step", lorenz(func(p *ode.Problem) { p.T0, p.T1 = 1e300, 1.0000000000001e300 }), ode.Settings{},
			[]string{"non-finite state", "the smallest float64 resolves at t=1e+300", "far from the time origin", "t replaced by t + T0"}},
		{"blow-up", ode.Problem{Field: blowupField(), Y0: []float64{1}, P: []float64{1}, T1: 2}, ode.Settings{},
			[]string{"step size underflow", "grew from max|y0| = 1", "blow up near this time"}},
		{"blow-up, Rodas5P", ode.Problem{Field: blowupField(), Y0: []float64{1}, P: []float64{1}, T1: 2}, ode.Settings{Method: ode.Rodas5P},
			[]string{"step size underflow", "blow up near this time"}},
		{"Tsit5 on Robertson", ode.Problem{Field: rob.Field, Y0: rob.Y0, P: rob.P, T1: rob.T1}, ode.Settings{Method: ode.Tsit5, MaxSteps: 2000},
			[]string{"max steps reached", "stiffness test fired", "use Rodas5P"}},
		{"Rosenbrock23 on HIRES at rtol 1e-12", ode.Problem{Field: hires.Field, Y0: hires.Y0, T1: hires.T1},
			ode.Settings{Method: ode.Rosenbrock23, RelTol: 1e-12, AbsTol: 1e-14, MaxSteps: 20000},
			[]string{"max steps reached", "Rosenbrock23 is a low-order method", "use Rodas5P", "increase Settings.MaxSteps (to about"}},
		{"Lorenz, MaxSteps 40", lorenz(func(p *ode.Problem) { p.T1 = 5 }), ode.Settings{MaxSteps: 40},
			[]string{"max steps reached", "increase Settings.MaxSteps (to about", "at its pace so far"}},
	} {
		_, err := ode.Solve(tc.prob, &tc.set)
		wantErr(t, tc.name, err, tc.want...)
		var te *ode.TrajectoryError
		if errors.As(err, &te) && (te.T1 <= te.T0 || te.Accepted+te.Rejected == 0 || te.MaxSteps == 0 || te.Y0 == nil) {
			t.Errorf("Case %v: fields not filled: %+v", tc.name, te)
		}
	}
}

// TestMemoryLimitBelowWorkers checks that a MemoryLimit smaller than the
// number of workers stores the least, as any tiny limit does: each
// worker's share of the limit was 0 bytes, which scan read as its 4 GiB
// default, so MemoryLimit = 1 stored every state of each chunk.
func TestMemoryLimitBelowWorkers(t *testing.T) {
	t.Parallel()
	p := lorenzProblem()
	p.N = 64
	stored := func(limit int64) int64 {
		g, err := ode.Grad(nil, p, ode.SumSquares(), nil, &ode.Settings{MemoryLimit: limit, Exec: tape.ExecSettings{Workers: 2, BlockSize: 32}})
		if err != nil {
			t.Fatal(err)
		}
		return g.StoredBytes
	}
	one, small := stored(1), stored(64)
	if one != small {
		t.Errorf("StoredBytes with MemoryLimit 1: %d, with MemoryLimit 64: %d; want the same (one checkpoint per chunk)", one, small)
	}
}
