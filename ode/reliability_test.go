package ode_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
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
			_, err = ode.Grad(nil, p, ode.SumSquares(), nil, &set)
			wantErr(t, tc.name+" (Grad)", err, tc.want...)
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
// Checkpoint interval of MaxInt (one checkpoint, the initial states; its
// interval arithmetic must not overflow) both when the gradient records
// the mesh (with a memory limit small enough that the recorder cannot keep
// the states) and when it replays a given mesh, and MaxSteps = MaxInt.
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
		{"Checkpoint MaxInt, recorded", ode.Settings{Checkpoint: math.MaxInt, MemoryLimit: 1}, false},
		{"Checkpoint MaxInt, given mesh", ode.Settings{Checkpoint: math.MaxInt}, true},
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
