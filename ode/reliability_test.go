package ode_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// This file checks that no setting or size crashes the library or runs
// silently with a meaningless value: every invalid setting is an error
// naming the setting, its value and the fix; sizes far beyond the machine
// are refused before anything is allocated; extreme but valid sizes (a
// block or checkpoint interval past the ensemble) run and give the same
// numbers as the defaults.

// lorenzProblem is one Lorenz trajectory at the classic parameters,
// t ∈ [0, 1].
func lorenzProblem() ode.Problem {
	return ode.Problem{Field: lorenzField(), Y0: []float64{1, 0, 0}, P: []float64{10, 28, 8.0 / 3}, T1: 1}
}

// lorenzEnsemble is lorenzProblem with field f and one trajectory per
// value of ρ (σ and β the classic ones).
func lorenzEnsemble(f ode.Field, rho []float64) ode.Problem {
	p := lorenzProblem()
	p.Field, p.N, p.P = f, len(rho), make([]float64, 0, 3*len(rho))
	for _, r := range rho {
		p.P = append(p.P, 10, r, 8.0/3)
	}
	return p
}

// TestSettingsValidation checks each setting that used to be accepted
// silently (NaN or infinite controller constants, negative sizes, RelTol
// ≥ 1 or below what float64 can meet, an infinite Dt0) and each problem
// that used to run into a failure or a crash (a span that overflows or
// that float64 cannot resolve, an ensemble larger than the machine): each
// is an error from NewSolver, Solve and Grad that names the quantity, its
// value and the fix.
func TestSettingsValidation(t *testing.T) {
	t.Parallel()
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name   string
		modify func(p *ode.Problem, s *ode.Settings)
		want   []string
	}{
		{"Beta1 NaN", func(_ *ode.Problem, s *ode.Settings) { s.Controller.Beta1 = nan },
			[]string{"lorenz", "controller", "Beta1 = NaN must be positive and finite"}},
		{"Beta1 infinite", func(_ *ode.Problem, s *ode.Settings) { s.Controller.Beta1 = inf },
			[]string{"Beta1 = +Inf must be positive and finite"}},
		{"Beta2 NaN", func(_ *ode.Problem, s *ode.Settings) { s.Controller.Beta2 = nan },
			[]string{"Beta2 = NaN must be finite"}},
		{"Beta2 infinite", func(_ *ode.Problem, s *ode.Settings) { s.Controller.Beta2 = -inf },
			[]string{"Beta2 = -Inf must be finite"}},
		{"Safety NaN", func(_ *ode.Problem, s *ode.Settings) { s.Controller.Safety = nan },
			[]string{"Safety = NaN must be in (0, 1]"}},
		{"FactorMin NaN", func(_ *ode.Problem, s *ode.Settings) { s.Controller.FactorMin = nan },
			[]string{"FactorMin = NaN must be in (0, 1)"}},
		{"FactorMax NaN", func(_ *ode.Problem, s *ode.Settings) { s.Controller.FactorMax = nan },
			[]string{"FactorMax = NaN must be finite and greater than 1"}},
		{"FactorMax infinite", func(_ *ode.Problem, s *ode.Settings) { s.Controller.FactorMax = inf },
			[]string{"FactorMax = +Inf must be finite and greater than 1"}},
		{"Workers negative", func(_ *ode.Problem, s *ode.Settings) { s.Exec.Workers = -1 },
			[]string{"Exec.Workers = -1 is negative", "use 0 for runtime.GOMAXPROCS(0)"}},
		{"BlockSize negative", func(_ *ode.Problem, s *ode.Settings) { s.Exec.BlockSize = -8 },
			[]string{"Exec.BlockSize = -8 is negative", "use 0 to size blocks automatically"}},
		{"Checkpoint negative", func(_ *ode.Problem, s *ode.Settings) { s.Checkpoint = -2 },
			[]string{"Checkpoint = -2 is negative", "use 0 to choose the interval from MemoryLimit"}},
		{"MemoryLimit negative", func(_ *ode.Problem, s *ode.Settings) { s.MemoryLimit = -1 },
			[]string{"MemoryLimit = -1 is negative", "use 0 for the default"}},
		{"Saves not a mode", func(_ *ode.Problem, s *ode.Settings) { s.Saves = 7 },
			[]string{"Saves = SaveMode(7) is not a save mode", "SaveInterpolate (the zero value) or SaveStep"}},
		{"AbsTols empty", func(_ *ode.Problem, s *ode.Settings) { s.AbsTols = []float64{} },
			[]string{"len(AbsTols) = 0, want Dim = 3"}},
		{"MaxSteps negative", func(_ *ode.Problem, s *ode.Settings) { s.MaxSteps = -1 },
			[]string{"MaxSteps = -1 is negative", "use 0 for the default 100000"}},
		{"RelTol 1", func(_ *ode.Problem, s *ode.Settings) { s.RelTol = 1 },
			[]string{"RelTol = 1 must be below 1", "accepts any step"}},
		{"RelTol 2", func(_ *ode.Problem, s *ode.Settings) { s.RelTol = 2 },
			[]string{"RelTol = 2 must be below 1"}},
		{"RelTol below float64", func(_ *ode.Problem, s *ode.Settings) { s.RelTol = 1e-17 },
			[]string{"RelTol = 1e-17 is below 10ε = 2.2e-15", "float64", "use RelTol ≥ 2.2e-15"}},
		{"RelTol NaN", func(_ *ode.Problem, s *ode.Settings) { s.RelTol = nan },
			[]string{"RelTol = NaN must be positive and finite"}},
		{"AbsTol infinite", func(_ *ode.Problem, s *ode.Settings) { s.AbsTol = inf },
			[]string{"AbsTol = +Inf must be positive and finite", "pure relative tolerance"}},
		{"AbsTols NaN", func(_ *ode.Problem, s *ode.Settings) { s.AbsTols = []float64{1e-9, nan, 1e-9} },
			[]string{"AbsTols[1] = NaN must be positive and finite"}},
		{"Dt0 infinite", func(_ *ode.Problem, s *ode.Settings) { s.Dt0 = inf },
			[]string{"Dt0 = +Inf must be positive (or 0 for automatic) and finite"}},
		{"Dt0 NaN", func(_ *ode.Problem, s *ode.Settings) { s.Dt0 = nan },
			[]string{"Dt0 = NaN must be positive"}},
		{"span overflows", func(p *ode.Problem, _ *ode.Settings) { p.T0, p.T1 = -1e308, 1e308 },
			[]string{"lorenz", "span T1 − T0 = 1e+308 − (-1e+308) of trajectory 0 overflows float64", "rescale time"}},
		{"span below the resolution of t", func(p *ode.Problem, _ *ode.Settings) { p.T0, p.T1 = 1e20, 1e20+16384 },
			[]string{"span [T0, T1] = [1e+20, 1.0000000000000002e+20] of trajectory 0 is 1.64e+04 long",
				"smallest step float64 resolves at those times (4ε·max(|T0|, |T1|) = 8.88e+04)", "shift the time origin"}},
		{"span of one trajectory unresolved", func(p *ode.Problem, _ *ode.Settings) { p.N, p.T0, p.T1s = 2, 1e16, []float64{2e16, 1e16 + 2} },
			[]string{"of trajectory 1 is 2 long", "shift the time origin"}},
		{"N = MaxInt", func(p *ode.Problem, _ *ode.Settings) { p.N = math.MaxInt },
			[]string{"lorenz", "N = 9223372036854775807 trajectories need at least", "bytes each", "more than the", "split the ensemble"}},
		{"N = 1e12", func(p *ode.Problem, _ *ode.Settings) { p.N = 1e12 },
			[]string{"N = 1000000000000 trajectories need at least 109 TiB", "solve at most"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, set := lorenzProblem(), ode.Settings{}
			tc.modify(&p, &set)
			_, err := ode.Solve(p, &set)
			wantErr(t, tc.name+" (Solve)", err, tc.want...)
			wantInput(t, tc.name+" (Solve)", err, true)
			_, err = ode.Grad(nil, p, ode.SumSquares(), nil, &set)
			wantErr(t, tc.name+" (Grad)", err, tc.want...)
			wantInput(t, tc.name+" (Grad)", err, true)
			var te *ode.TrajectoryError
			if errors.As(err, &te) {
				t.Errorf("Case %v: want an input error before any work, got a trajectory failure %v", tc.name, err)
			}
		})
	}
}

// TestEnsembleTooLarge checks that an ensemble beyond the machine's memory
// wraps ErrTooLarge, so that callers can tell it from other input errors.
func TestEnsembleTooLarge(t *testing.T) {
	t.Parallel()
	p := lorenzProblem()
	p.N = math.MaxInt / 2
	_, err := ode.Solve(p, nil)
	if !errors.Is(err, ode.ErrTooLarge) {
		t.Errorf("Case N = MaxInt/2: want an error wrapping ErrTooLarge, got %v", err)
	}
}

// TestExtremeSizes checks that extreme but valid sizes run and give the
// defaults' numbers bit for bit: a BlockSize of 2⁴⁰ (capped at N), a
// Checkpoint interval of MaxInt while the recorder keeps every state, a
// memory limit of 1 byte (checkpoints recomputed step by step) on a given
// mesh, MaxSteps = MaxInt and more workers than chunks.
func TestExtremeSizes(t *testing.T) {
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
		name   string
		set    ode.Settings
		replay bool // differentiate on the default mesh
	}{
		{"BlockSize 2^40", ode.Settings{Exec: tape.ExecSettings{BlockSize: 1 << 40}}, false},
		{"BlockSize MaxInt", ode.Settings{Exec: tape.ExecSettings{BlockSize: math.MaxInt}}, false},
		{"Checkpoint MaxInt, no limit", ode.Settings{Checkpoint: math.MaxInt}, false},
		{"MemoryLimit 1, given mesh", ode.Settings{MemoryLimit: 1}, true},
		{"MemoryLimit MaxInt64", ode.Settings{MemoryLimit: math.MaxInt64}, false},
		{"MaxSteps MaxInt", ode.Settings{MaxSteps: math.MaxInt}, false},
		{"Workers 1000", ode.Settings{Exec: tape.ExecSettings{Workers: 1000}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m *ode.Mesh
			if tc.replay {
				m = want.Mesh
			}
			got, err := gradNoPanic(p, m, &tc.set)
			if err != nil {
				t.Fatalf("Case %v: %v", tc.name, err)
			}
			if got.Loss != want.Loss || !slices.Equal(got.Y0, want.Y0) || !slices.Equal(got.P, want.P) {
				t.Errorf("Case %v: gradient differs from the defaults': loss %v (want %v), ∂L/∂P[0:3] %v (want %v)",
					tc.name, got.Loss, want.Loss, got.P[:3], want.P[:3])
			}
		})
	}
}

// gradNoPanic is ode.Grad with a panic turned into a test error.
func gradNoPanic(p ode.Problem, m *ode.Mesh, s *ode.Settings) (g *ode.Gradient, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError{r}
		}
	}()
	return ode.Grad(nil, p, ode.SumSquares(), m, s)
}

type panicError struct{ v any }

func (e panicError) Error() string { return fmt.Sprint("panic: ", e.v) }

// TestFailureHints checks that a failed trajectory's message names the
// likely cause from what the error knows, where it used to say "the
// problem may be stiff" for every step-size underflow: the cases are the
// errors of real runs (lorenz with T1 = 1e300, with ρ = 1e300, with
// Dt0 = 1e-300 at t = 1, on [1e20, 1e20 + 1e6]; y' = y² from y(0) = 1;
// Tsit5 on Robertson; Rosenbrock23 on HIRES at RelTol 1e-12; Tsit5 on
// Lotka–Volterra with populations of 1e-12 at the default AbsTol), and errors
// that know only their time and step fall back to the general advice.
func TestFailureHints(t *testing.T) {
	t.Parallel()
	lorenz := func(e ode.TrajectoryError) *ode.TrajectoryError {
		e.Method, e.Failed, e.MaxSteps, e.RelTol = "Tsit5", 1, 100000, 1e-6
		e.Y0 = []float64{1, 0, 0}
		if e.Y == nil {
			e.Y = []float64{1, 0, 0}
		}
		return &e
	}
	for _, tc := range []struct {
		name   string
		err    *ode.TrajectoryError
		want   []string
		reject []string
	}{
		{"span far beyond the time scale (T1 = 1e300)", lorenz(ode.TrajectoryError{Status: ode.MaxStepsReached, T: 2112.45, H: 0.0164,
			T1: 1e300, Accepted: 89082, Rejected: 10918, Y: []float64{-3, -5, 17}}),
			[]string{"max steps reached", "100000 steps for t from 0 to 2112.45", "span T1 − T0 = 1e+300 needs about 4.7e+301 steps",
				"far beyond the field's time scale", "shorten the span or rescale time"},
			[]string{"stiffness test", "increase Settings.MaxSteps"}},
		{"field out of scale (ρ = 1e300)", lorenz(ode.TrajectoryError{Status: ode.StepSizeUnderflow, T: 0, H: 0, T1: 1, Accepted: 1}),
			[]string{"step size underflow", "the step size shrank to zero", "extreme parameter or initial value", "overflow inside the field"},
			[]string{"stiff"}},
		{"first step below the resolution of t (Dt0 = 1e-300 at t = 1)", lorenz(ode.TrajectoryError{Status: ode.StepSizeUnderflow, T: 1, H: 1e-300,
			T0: 1, T1: 2, Accepted: 1}),
			[]string{"the first step (h=1e-300) did not advance t=1", "4ε·|t| = 8.88e-16", "Settings.Dt0"},
			[]string{"stiff"}},
		{"time origin far from the span", lorenz(ode.TrajectoryError{Status: ode.StepSizeUnderflow, T: 1e20, H: 88817.84,
			T0: 1e20, T1: 1e20 + 1e6, Accepted: 1, Rejected: 1}),
			[]string{"at t=1e+20 float64 resolves no step below 4ε·|t| = 8.88e+04", "far from the time origin",
				"solving from 0 to T1 − T0 = 999424", "t replaced by t + T0"},
			[]string{"stiff"}},
		{"non-finite at the smallest step, far from the time origin", lorenz(ode.TrajectoryError{Status: ode.NonFinite, T: 1e300, H: 8.92e284,
			T0: 1e300, T1: 1.0000000000001e300, Rejected: 1}),
			[]string{"non-finite state", "(h=8.92e+284) was the smallest float64 resolves at t=1e+300", "far from the time origin",
				"solving from 0 to T1 − T0 = 9.99275e+286", "else check the field and parameters for overflow"}, nil},
		{"non-finite near the origin", lorenz(ode.TrajectoryError{Status: ode.NonFinite, T: 1.5, H: 4.66e-15, T0: 0, T1: 2, Accepted: 30}),
			[]string{"non-finite state", "check the field and parameters for overflow"}, []string{"far from the time origin", "smallest float64 resolves"}},
		{"blow-up", &ode.TrajectoryError{Status: ode.StepSizeUnderflow, T: 1.000001, H: 1.07e-15, Method: "Tsit5", Failed: 1,
			T1: 2, Accepted: 168, Rejected: 168, Y0: []float64{1}, Y: []float64{2.12e14}},
			[]string{"grew from max|y0| = 1 to max|y| = 2.12e+14", "blow up near this time", "singularity near t=1", "end the span before it"},
			[]string{"stiff"}},
		{"blow-up with Rodas5P", &ode.TrajectoryError{Status: ode.StepSizeUnderflow, T: 1.0000007, H: 9.3e-16, Method: "Rodas5P", Failed: 1,
			T1: 2, Accepted: 328, Y0: []float64{1}, Y: []float64{1.12e14}},
			[]string{"blow up near this time"}, []string{"Rodas5P;", "use Rodas5P", "try Rodas5P"}},
		{"stiff for Tsit5 (Robertson)", &ode.TrajectoryError{Status: ode.MaxStepsReached, T: 3.0077, H: 0.00168, Method: "Tsit5", Failed: 1,
			T1: 1e5, Accepted: 1892, Rejected: 108, MaxSteps: 2000, Stiff: true, Y0: []float64{1, 0, 0}, Y: []float64{0.9, 1e-5, 0.1}},
			[]string{"stiffness test fired", "Tsit5 is held to small steps by its stability", "use Rodas5P"},
			[]string{"far beyond"}},
		{"Rosenbrock23 at a tight tolerance (HIRES)", &ode.TrajectoryError{Status: ode.MaxStepsReached, T: 314.957, H: 0.00129,
			Method: "Rosenbrock23", Failed: 1, T1: 321.8122, Accepted: 100000, MaxSteps: 100000, RelTol: 1e-12},
			[]string{"Rosenbrock23 is a low-order method (order 2", "at RelTol = 1e-12", "use Rodas5P (order 5)",
				"increase Settings.MaxSteps (to about 130000", "needs about 103000 steps"}, nil},
		{"max steps on the controller's ramp (vdp on [0, 1], MaxSteps 1)", &ode.TrajectoryError{Status: ode.MaxStepsReached, T: 0.00049975, H: 0.0005,
			Method: "Tsit5", Failed: 1, T1: 1, Accepted: 1, MaxSteps: 1},
			[]string{"increase Settings.MaxSteps, loosen the tolerances"}, []string{"far beyond", "needs about"}},
		{"max steps, explicit, nothing known", &ode.TrajectoryError{Status: ode.MaxStepsReached, T: 2, H: 0.01, Method: "Tsit5", Failed: 2},
			[]string{"(2 trajectories failed)", "increase Settings.MaxSteps, loosen the tolerances, or, if the problem is stiff, use Rodas5P"}, nil},
		{"max steps, Rodas5P, pace known", &ode.TrajectoryError{Status: ode.MaxStepsReached, T: 5, H: 0.01, Method: "Rodas5P", Failed: 1,
			T1: 10, Accepted: 90, Rejected: 10, MaxSteps: 100},
			[]string{"increase Settings.MaxSteps (to about 240: at its pace so far the trajectory needs about 200 steps) or loosen the tolerances"},
			[]string{"use Rodas5P"}},
		{"initial state below AbsTol (Lotka–Volterra with populations of 1e-12)", &ode.TrajectoryError{Status: ode.StepSizeUnderflow, T: 7.60572,
			H: 7.11e-15, Method: "Tsit5", Failed: 1, T1: 10, Accepted: 60, RelTol: 1e-6, Y0: []float64{1e-12, 1e-12}, Y: []float64{3e-10, -2e-9},
			AbsTol: []float64{1e-9, 1e-9}},
			[]string{"step size underflow", "no larger than the absolute tolerance (max|y0| = 1e-12, AbsTol 1e-09)", "no relative accuracy",
				"set AbsTol (or AbsTols, per component) well below the states' scale, as RelTol·max|y0| = 1e-18"},
			[]string{"stiff"}},
		{"non-finite, initial state below AbsTols", &ode.TrajectoryError{Status: ode.NonFinite, T: 2, H: 0.5, Method: "Rodas5P", Failed: 1,
			T1: 10, Accepted: 6, RelTol: 1e-6, Y0: []float64{0, 3e-13}, AbsTol: []float64{1e-12, 1e-12}},
			[]string{"non-finite state", "max|y0| = 3e-13, AbsTol 1e-12", "else check the field and parameters for overflow"}, nil},
		{"initial state zero, below AbsTol: not the cause", &ode.TrajectoryError{Status: ode.StepSizeUnderflow, T: 3.2, H: 1e-15, Method: "Tsit5",
			Failed: 1, T1: 10, Accepted: 50, Y0: []float64{0, 0}, Y: []float64{1, 2}, AbsTol: []float64{1e-9, 1e-9}},
			[]string{"the problem may be stiff (try Rodas5P)"}, []string{"absolute tolerance"}},
		{"one component above its AbsTol: not the cause", &ode.TrajectoryError{Status: ode.StepSizeUnderflow, T: 3.2, H: 1e-15, Method: "Tsit5",
			Failed: 1, T1: 10, Accepted: 50, Y0: []float64{1e-12, 1e-3}, Y: []float64{1, 2}, AbsTol: []float64{1e-9, 1e-9}},
			[]string{"the problem may be stiff (try Rodas5P)"}, []string{"absolute tolerance"}},
		{"underflow, explicit, nothing known", &ode.TrajectoryError{Status: ode.StepSizeUnderflow, T: 3.2, H: 1e-15, Method: "Tsit5", Failed: 1},
			[]string{"the problem may be stiff (try Rodas5P) or the solution may blow up near this time"}, nil},
		{"underflow, step unknown (Solution.Err)", &ode.TrajectoryError{Status: ode.StepSizeUnderflow, T: 1, Method: "Tsit5", Failed: 1},
			[]string{"the problem may be stiff (try Rodas5P) or the solution may blow up near this time"}, []string{"shrank to zero"}},
		{"underflow, explicit, stiffness test fired", &ode.TrajectoryError{Status: ode.StepSizeUnderflow, T: 3.2, H: 1e-15, Method: "Vern7", Failed: 1,
			T1: 10, Accepted: 500, Stiff: true, Y0: []float64{1}, Y: []float64{2}},
			[]string{"stiffness test fired", "stiff for Vern7; use Rodas5P"}, nil},
		{"underflow, Rosenbrock, nothing known", &ode.TrajectoryError{Status: ode.StepSizeUnderflow, T: 3.2, H: 1e-15, Method: "Rosenbrock23", Failed: 1},
			[]string{"blow up near this time", "too tight for float64"}, []string{"Rodas5P;"}},
	} {
		wantErr(t, tc.name, tc.err, tc.want...)
		for _, r := range tc.reject {
			if strings.Contains(tc.err.Error(), r) {
				t.Errorf("Case %v: want no %q in the message, got %q", tc.name, r, tc.err)
			}
		}
	}
}

// TestPollutionRelativeTolerance checks the published POLL problem (20
// species spanning 4e-18 to 0.3) with a pure relative tolerance, AbsTol
// 1e-25, and with per-component AbsTols: Rodas5P and Rosenbrock23
// complete (with a step-size floor relative to the span, 4ε·(T1 − T0),
// they stopped with "step size underflow" at t = 1.15e-16, right after
// the first step) and every component of y(60) matches the published
// reference to within 100·RelTol relative, the tiny ones included.
func TestPollutionRelativeTolerance(t *testing.T) {
	t.Parallel()
	pr := problems.Pollution()
	p := ode.Problem{Field: pr.Field, Y0: pr.Y0, P: pr.P, T1: pr.T1}
	scaled := func(f float64) []float64 { // AbsTols f·|y(60)|
		a := make([]float64, len(problems.PollutionRef))
		for i, y := range problems.PollutionRef {
			a[i] = f * y
		}
		return a
	}
	for _, tc := range []struct {
		name string
		set  ode.Settings
	}{
		{"Rodas5P rtol 1e-6 atol 1e-25", ode.Settings{Method: ode.Rodas5P, RelTol: 1e-6, AbsTol: 1e-25}},
		{"Rodas5P rtol 1e-8 atol 1e-25", ode.Settings{Method: ode.Rodas5P, RelTol: 1e-8, AbsTol: 1e-25}},
		{"Rodas5P rtol 1e-8 AbsTols 1e-11·|y|", ode.Settings{Method: ode.Rodas5P, RelTol: 1e-8, AbsTols: scaled(1e-11)}},
		{"Rosenbrock23 rtol 1e-6 atol 1e-25", ode.Settings{Method: ode.Rosenbrock23, RelTol: 1e-6, AbsTol: 1e-25}},
	} {
		sol, err := ode.Solve(p, &tc.set)
		if err != nil {
			t.Errorf("Case %v: %v", tc.name, err)
			continue
		}
		for i, want := range problems.PollutionRef {
			if got := sol.Y[i]; !(math.Abs(got-want) <= 100*tc.set.RelTol*want) {
				t.Errorf("Case %v: y%d(60): Want: %v, Got: %v (relative error %.2g).", tc.name, i+1, want, got, math.Abs(got-want)/want)
			}
		}
	}
}

// TestPollutionGradient checks the gradient of POLL at a pure relative
// tolerance (Rodas5P, RelTol 1e-8, AbsTol 1e-25): the loss is the ozone
// y4(60) plus 100·y16(60) (a 4e-18 species, so the tiny components
// count), differentiated with respect to rate constants spanning 3.5e-4
// to 4.4e11 and two initial states, against central differences (steps
// of 1e-4 relative) of Replay on the same mesh (the map whose exact
// derivative Grad is).
func TestPollutionGradient(t *testing.T) {
	t.Parallel()
	pr := problems.Pollution()
	p := ode.Problem{Field: pr.Field, Y0: append([]float64(nil), pr.Y0...), P: append([]float64(nil), pr.P...), T1: pr.T1}
	set := &ode.Settings{Method: ode.Rodas5P, RelTol: 1e-8, AbsTol: 1e-25}
	loss := ode.Loss{Name: "ozone", F: func(y, _, _ []tape.V) tape.V { return y[3].Add(y[15].MulC(100)) }}
	value := func(sol *ode.Solution) float64 { return sol.Y[3] + 100*sol.Y[15] }
	// One Solver for the gradient and the 14 replays: each Solver builds
	// its programs once.
	sv, err := ode.NewSolver(p.Field, set)
	if err != nil {
		t.Fatal(err)
	}
	g, err := sv.Grad(nil, &p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		slot *float64
		grad float64
	}{
		{"k1", &p.P[0], g.P[0]},
		{"k3", &p.P[2], g.P[2]},
		{"k16", &p.P[15], g.P[15]},
		{"k19", &p.P[18], g.P[18]},
		{"k25", &p.P[24], g.P[24]},
		{"y2(0)", &p.Y0[1], g.Y0[1]},
		{"y17(0)", &p.Y0[16], g.Y0[16]},
	} {
		x := *tc.slot
		h := 1e-4 * math.Abs(x)
		*tc.slot = x + h
		up, err := sv.Replay(&p, g.Mesh)
		if err != nil {
			t.Fatal(err)
		}
		*tc.slot = x - h
		down, err := sv.Replay(&p, g.Mesh)
		if err != nil {
			t.Fatal(err)
		}
		*tc.slot = x
		fd := (value(up) - value(down)) / (2 * h)
		// Each derivative to 5e-4 of itself: the central difference's
		// rounding noise is at most 8e-5 of the smallest (k16).
		if d := math.Abs(fd - tc.grad); !(d <= 5e-4*math.Abs(tc.grad)) {
			t.Errorf("Case %v: ∂L/∂%s: Grad %v, central difference %v (relative difference %.2g)", tc.name, tc.name, tc.grad, fd, d/math.Abs(tc.grad))
		}
	}
}
