package ode_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

const gravity = problems.Gravity

// ball is problems.BouncingBall; ballClosedForm its closed form.
var (
	ball           = problems.BouncingBall
	ballClosedForm = problems.BouncingBallClosedForm
)

// TestEventBouncingBall checks the height at T of balls with several
// bounces, and its gradient with respect to the restitution coefficient,
// against the closed form and against central differences of re-solves.
func TestEventBouncingBall(t *testing.T) {
	t.Parallel()
	f, ev := ball()
	rng := rand.New(rand.NewPCG(1, 1))
	const n, T = 16, 1.6 // before the balls come to rest (T < t1·(1+e)/(1−e))
	h0 := make([]float64, 2*n)
	e := make([]float64, n)
	for i := range e {
		h0[2*i] = 0.8 + 0.4*rng.Float64()
		e[i] = 0.65 + 0.25*rng.Float64()
	}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P} {
		t.Run(m.Name(), func(t *testing.T) {
			set := &ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}}
			sv, err := ode.NewSolver(f, set)
			if err != nil {
				t.Fatal(err)
			}
			p := ode.Problem{Field: f, N: n, Y0: h0, P: e, T1: T}
			g, err := sv.Grad(nil, &p, ode.Component(0), nil)
			if err != nil {
				t.Fatal(err)
			}
			var worstX, worstG float64
			for i := 0; i < n; i++ {
				x, dx, bounces := ballClosedForm(h0[2*i], e[i], T)
				worstX = max(worstX, math.Abs(g.Solution.Y[2*i]-x))
				worstG = max(worstG, math.Abs(g.P[i]-dx)/math.Max(1, math.Abs(dx)))
				if bounces < 2 {
					t.Fatalf("trajectory %d: %d bounces, want several", i, bounces)
				}
				if got := g.Solution.Events[i]; got != bounces {
					t.Errorf("trajectory %d: %d events, want %d", i, got, bounces)
				}
				if got := g.Solution.Y[2*i]; math.Abs(got-x) > 1e-8 {
					t.Errorf("trajectory %d: x(T) = %.12g, closed form %.12g", i, got, x)
				}
				if got := g.P[i]; math.Abs(got-dx) > 1e-6*math.Max(1, math.Abs(dx)) {
					t.Errorf("trajectory %d: dx(T)/de = %.12g, closed form %.12g", i, got, dx)
				}
			}
			t.Logf("x(T): max abs error %.2g; dx(T)/de: max rel error %.2g against the closed form", worstX, worstG)
			// Central differences of the adaptive solve, bounces included.
			const h = 1e-6
			pp, pm := p, p
			pp.P, pm.P = append([]float64(nil), e...), append([]float64(nil), e...)
			for i := range e {
				pp.P[i] += h
				pm.P[i] -= h
			}
			sp, err := sv.Solve(&pp)
			if err != nil {
				t.Fatal(err)
			}
			sm, err := sv.Solve(&pm)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				fd := (sp.Y[2*i] - sm.Y[2*i]) / (2 * h)
				if got := g.P[i]; math.Abs(got-fd) > 1e-5*math.Max(1, math.Abs(fd)) {
					t.Errorf("trajectory %d: dx(T)/de = %.10g, central difference %.10g", i, got, fd)
				}
			}
		})
	}
}

// TestEventBallsAtRest solves balls that come to rest (infinitely many
// bounces before T) with MaxEvents 30, reached long before the bounces
// get shorter than the time's resolution: every ball bounces on the
// floor 31 times (TooManyEvents) and none falls through it. A step after
// a bounce starts from the value the fired condition leaves with, no
// value of the condition; a secant from it used to take the next bounce's
// bracket down to a step of size 0 (the state of an event step lies
// below the floor by rounding), after which the ball fell: 3 to 13 of
// these 4000.
func TestEventBallsAtRest(t *testing.T) {
	t.Parallel()
	f, ev := ball()
	n := 4000
	rng := rand.New(rand.NewPCG(9, 9))
	y0, e := make([]float64, 2*n), make([]float64, n)
	for i := range e {
		y0[2*i] = 0.2 + rng.Float64()
		e[i] = 0.5 + 0.4*rng.Float64()
	}
	for _, rtol := range []float64{1e-4, 1e-6, 1e-8} {
		sv, err := ode.NewSolver(f, &ode.Settings{RelTol: rtol, Events: []ode.Event{ev}, MaxEvents: 30, AllowFailures: true})
		if err != nil {
			t.Fatal(err)
		}
		sol, err := sv.Solve(&ode.Problem{Field: f, N: n, Y0: y0, P: e, T1: 20})
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i, st := range sol.Status {
			if st != ode.TooManyEvents || sol.Events[i] != 31 {
				if bad++; bad <= 3 {
					t.Errorf("rtol %g: ball %d (h0 %v, e %v): status %v after %d bounces at t = %v, height %v; want TooManyEvents after 31",
						rtol, i, y0[2*i], e[i], st, sol.Events[i], sol.T[i], sol.Y[2*i])
				}
			}
		}
		if bad > 3 {
			t.Errorf("rtol %g: %d of %d balls did not come to rest", rtol, bad, n)
		}
	}
}

// TestEventThreshold checks the time a one-compartment pharmacokinetic
// model, C' = −k·C, takes to fall to a threshold (a terminal event),
// and its derivative with respect to the elimination rate k, against the
// closed forms t* = ln(C0/c)/k and dt*/dk = −t*/k. A clock component
// τ' = 1 carries the time into the final state.
func TestEventThreshold(t *testing.T) {
	t.Parallel()
	const c = 0.25
	f := ode.Field{Name: "pk", Dim: 2, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0]), y[0].Const(1)}
	}}
	ev := ode.Event{Name: "threshold", Direction: -1, Terminal: true,
		G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].Sub(y[0].Const(c)) }}
	rng := rand.New(rand.NewPCG(2, 2))
	const n = 12
	y0 := make([]float64, 2*n)
	k := make([]float64, n)
	for i := range k {
		y0[2*i] = 1 + rng.Float64()
		k[i] = 0.2 + rng.Float64()
	}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P} {
		t.Run(m.Name(), func(t *testing.T) {
			sv, err := ode.NewSolver(f, &ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-14, Events: []ode.Event{ev}})
			if err != nil {
				t.Fatal(err)
			}
			p := ode.Problem{Field: f, N: n, Y0: y0, P: k, T1: 100}
			g, err := sv.Grad(nil, &p, ode.Component(1), nil)
			if err != nil {
				t.Fatal(err)
			}
			var worstT, worstG float64
			defer func() {
				t.Logf("t*: max rel error %.2g; dt*/dk: max rel error %.2g against the closed forms", worstT, worstG)
			}()
			for i := 0; i < n; i++ {
				ts := math.Log(y0[2*i]/c) / k[i]
				worstT = max(worstT, math.Abs(g.Solution.T[i]-ts)/ts)
				worstG = max(worstG, math.Abs(g.P[i]+ts/k[i])/(ts/k[i]))
				if got := g.Solution.T[i]; math.Abs(got-ts) > 1e-10*ts {
					t.Errorf("trajectory %d: event at t = %.15g, closed form %.15g (rel %.2g)", i, got, ts, math.Abs(got-ts)/ts)
				}
				if g.Solution.Events[i] != 1 {
					t.Errorf("trajectory %d: %d events, want 1", i, g.Solution.Events[i])
				}
				want := -ts / k[i]
				if got := g.P[i]; math.Abs(got-want) > 1e-6*math.Abs(want) {
					t.Errorf("trajectory %d: dt*/dk = %.12g, closed form %.12g", i, got, want)
				}
				wy := 1 / (k[i] * y0[2*i]) // dt*/dC0
				if got := g.Y0[2*i]; math.Abs(got-wy) > 1e-6*math.Abs(wy) {
					t.Errorf("trajectory %d: dt*/dC0 = %.12g, closed form %.12g", i, got, wy)
				}
			}
		})
	}
}

// TestEventBadInput checks that bad events end in a per-trajectory status
// or a clear error, and that nothing hangs: a non-finite condition, a
// condition zero at T0, one that depends on nothing, one that never
// fires, a ball coming to rest (infinitely many bounces in finite time),
// events with save times or a given mesh, and an engine without events.
func TestEventBadInput(t *testing.T) {
	t.Parallel()
	f, bounce := ball()
	y0 := []float64{1, 0}
	run := func(ev ode.Event, set ode.Settings, T float64) (*ode.Solution, error) {
		set.Events = []ode.Event{ev}
		set.AllowFailures = true
		sv, err := ode.NewSolver(f, &set)
		if err != nil {
			return nil, err
		}
		return sv.Solve(&ode.Problem{Field: f, N: 1, Y0: y0, P: []float64{0.8}, T1: T})
	}
	status := []struct {
		name string
		ev   ode.Event
		max  int
		T    float64
		want ode.Status
		n    int
	}{
		{"non-finite", ode.Event{G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].Sub(y[0].Const(0.5)).Sqrt().Add(y[0].Const(1)) }}, 0, 1, ode.EventNonFinite, 0},
		{"zero at T0", ode.Event{G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].Sub(y[0].Const(1)) }}, 0, 1, ode.EventAtStart, 0},
		{"never fires", ode.Event{G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].Add(y[0].Const(10)) }, Direction: 1}, 0, 1, ode.OK, 0},
		{"ball at rest", bounce, 20, 5, ode.TooManyEvents, 21},
		{"jump to NaN", ode.Event{Direction: -1, G: bounce.G, Apply: func(_ tape.V, y, _ []tape.V) []tape.V {
			return []tape.V{y[0], y[1].AddC(2).Log()} // v < −2 at the floor
		}}, 0, 1, ode.NonFinite, 1},
	}
	for _, c := range status {
		sol, err := run(c.ev, ode.Settings{MaxEvents: c.max}, c.T)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if sol.Status[0] != c.want || sol.Events[0] != c.n {
			t.Errorf("%s: status %v with %d events, want %v with %d", c.name, sol.Status[0], sol.Events[0], c.want, c.n)
		}
		if c.want != ode.OK {
			te := &ode.TrajectoryError{Status: sol.Status[0]}
			if !errors.Is(te, c.want.Err()) || c.want.Err() == nil {
				t.Errorf("%s: status %v does not unwrap to its sentinel error", c.name, c.want)
			}
			if c.want == ode.NonFinite && !strings.Contains(te.Error(), "Apply") {
				t.Errorf("%s: error %q does not point at the event's Apply", c.name, te)
			}
		}
	}
	errs := []struct {
		name string
		set  ode.Settings
		prob func(p *ode.Problem)
		want string
	}{
		{"constant condition", ode.Settings{Events: []ode.Event{{G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].Const(1) }}}}, nil, "depends on neither t nor y"},
		{"parameter-only condition", ode.Settings{Events: []ode.Event{{G: func(_ tape.V, _, p []tape.V) tape.V { return p[0] }, Terminal: true}}}, nil, "depends on neither t nor y"},
		{"terminal with Apply", ode.Settings{Events: []ode.Event{{G: bounce.G, Apply: bounce.Apply, Terminal: true}}}, nil, "terminal and has Apply"},
		{"other engine", ode.Settings{Events: []ode.Event{bounce}, Engine: "scalar-test"}, nil, "cannot run events"},
		{"re-stepped saves", ode.Settings{Events: []ode.Event{bounce}, Saves: ode.SaveStep}, nil, "continuous extension"},
		{"Method Auto", ode.Settings{Events: []ode.Event{bounce}, Method: ode.Auto}, nil, "Method Auto does not run events"},
	}
	for _, c := range errs {
		sv, err := ode.NewSolver(f, &c.set)
		if err == nil {
			p := ode.Problem{Field: f, N: 1, Y0: y0, P: []float64{0.8}, T1: 1}
			if c.prob != nil {
				c.prob(&p)
			}
			_, err = sv.Solve(&p)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if c.name == "other engine" && !errors.Is(err, ode.ErrNoEvents) {
			t.Errorf("%s: error %v does not wrap ErrNoEvents", c.name, err)
		}
	}
}

// TestEventNonAutonomous checks the gradient through events where the
// field and the condition depend on time (a ball driven by a periodic
// force, bouncing on a moving floor), so that every step after an event
// starts at a time that moves with it, against central differences of
// re-solves, with respect to the initial state and both parameters.
func TestEventNonAutonomous(t *testing.T) {
	t.Parallel()
	f, ev := drivenBall()
	const n = 6
	rng := rand.New(rand.NewPCG(3, 3))
	y0, prm := make([]float64, 2*n), make([]float64, 2*n)
	for i := 0; i < n; i++ {
		y0[2*i], y0[2*i+1] = 0.8+0.4*rng.Float64(), 0.5*rng.Float64()
		prm[2*i], prm[2*i+1] = 0.7+0.2*rng.Float64(), 1+rng.Float64()
	}
	for _, m := range []ode.Method{ode.Tsit5, ode.Rodas5P} {
		t.Run(m.Name(), func(t *testing.T) {
			sv, err := ode.NewSolver(f, &ode.Settings{Method: m, RelTol: 1e-11, AbsTol: 1e-13, Events: []ode.Event{ev}})
			if err != nil {
				t.Fatal(err)
			}
			p := ode.Problem{Field: f, N: n, Y0: y0, P: prm, T1: 1.5}
			g, err := sv.Grad(nil, &p, ode.SumSquares(), nil)
			if err != nil {
				t.Fatal(err)
			}
			loss := func(q ode.Problem) []float64 {
				sol, err := sv.Solve(&q)
				if err != nil {
					t.Fatal(err)
				}
				l := make([]float64, n)
				for i := range l {
					l[i] = sol.Y[2*i]*sol.Y[2*i] + sol.Y[2*i+1]*sol.Y[2*i+1]
				}
				return l
			}
			checkEventFD(t, p, g, loss)
		})
	}
}

// checkEventFD checks the gradient g of the two-component problem p
// (initial states and two parameters per trajectory) against central
// differences of per, each trajectory's loss from a solve of a perturbed
// copy of p, to 1e-5 relative (at least 1 absolute).
func checkEventFD(t *testing.T, p ode.Problem, g *ode.Gradient, per func(ode.Problem) []float64) {
	t.Helper()
	const h = 1e-6
	n := p.N
	worst := 0.0
	for _, which := range []string{"y0", "p"} {
		for c := 0; c < 2; c++ {
			pp, pm := p, p
			pp.Y0, pm.Y0 = slices.Clone(p.Y0), slices.Clone(p.Y0)
			pp.P, pm.P = slices.Clone(p.P), slices.Clone(p.P)
			xp, xm, got := pp.Y0, pm.Y0, g.Y0
			if which == "p" {
				xp, xm, got = pp.P, pm.P, g.P
			}
			for i := 0; i < n; i++ {
				xp[2*i+c] += h
				xm[2*i+c] -= h
			}
			lp, lm := per(pp), per(pm)
			for i := 0; i < n; i++ {
				fd := (lp[i] - lm[i]) / (2 * h)
				rel := math.Abs(got[2*i+c]-fd) / math.Max(1, math.Abs(fd))
				worst = max(worst, rel)
				if rel > 1e-5 {
					t.Errorf("trajectory %d (%d events): ∂L/∂%s[%d] = %.10g, central difference %.10g", i, g.Solution.Events[i], which, c, got[2*i+c], fd)
				}
			}
		}
	}
	t.Logf("max rel difference from central differences: %.2g (events per trajectory %v)", worst, g.Solution.Events)
}
