package ode_test

import (
	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// twoDoses is y' = −k·y with two timed doses, "dose1" of D1 at t1 and
// "dose2" of D2 at t2: p = (k, t1, t2, D1, D2) per trajectory, so their
// roots coincide where t1 = t2.
func twoDoses() (ode.Field, []ode.Event) {
	f := ode.Field{Name: "decay2", Dim: 1, Params: 5, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0])}
	}}
	dose := func(name string, at, amount int) ode.Event {
		return ode.Event{Name: name, Direction: 1, G: func(tt tape.V, _, p []tape.V) tape.V { return tt.Sub(p[at]) },
			Apply: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{y[0].Add(p[amount])} }}
	}
	return f, []ode.Event{dose("dose1", 1, 3), dose("dose2", 2, 4)}
}

// twoDosesClosedForm returns y(τ) of twoDoses (doses at or before τ
// given: the right-hand limit) and its derivatives with respect to y0
// and p.
func twoDosesClosedForm(y0 float64, p []float64, tau float64) (y, dy0 float64, dp [5]float64) {
	k := p[0]
	e0 := math.Exp(-k * tau)
	y, dy0, dp[0] = y0*e0, e0, -tau*y0*e0
	for x := 0; x < 2; x++ {
		td, amt := p[1+x], p[3+x]
		if tau < td {
			continue
		}
		e := math.Exp(-k * (tau - td))
		y += amt * e
		dp[0] -= (tau - td) * amt * e
		dp[1+x] = k * amt * e
		dp[3+x] = e
	}
	return y, dy0, dp
}

// TestEventCoincidingDoses checks events whose roots coincide (two doses
// at one time, with per-trajectory amounts, for some trajectories of the
// ensemble only): both fire (Solution.Events), the final and saved states
// (a save time at the doses reads the state after both) and the gradient
// with respect to y0, the rate, both dose times and both amounts equal
// the closed form, every method; the mesh marks one event per step (a
// step of size 0 for the second), and Replay and Grad on it give the
// record's values bit for bit.
func TestEventCoincidingDoses(t *testing.T) {
	t.Parallel()
	f, evs := twoDoses()
	const T = 2.0
	saveAt := []float64{0.5, 1, 1.5}
	times := [][2]float64{{1, 1}, {0.7, 1.3}, {1.5, 1.5}, {1, 1.5}, {2, 2}, {0.3, 0.3}}
	n := len(times)
	y0, p := make([]float64, n), make([]float64, 5*n)
	for i, tt := range times {
		y0[i] = 1 + 0.1*float64(i)
		copy(p[5*i:], []float64{0.7, tt[0], tt[1], 0.5 + 0.1*float64(i), 1.25 - 0.05*float64(i)})
	}
	all := odetest.EndPlusSaves()
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23} {
		t.Run(m.Name(), func(t *testing.T) {
			t.Parallel()
			sv := solverT(t, f, &ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: evs})
			pr := ode.Problem{Field: f, N: n, Y0: y0, P: p, T1: T, SaveAt: saveAt}
			g, err := sv.Grad(nil, &pr, all, nil)
			if err != nil {
				t.Fatal(err)
			}
			tol := 1e-8
			if m == ode.Rosenbrock23 {
				tol = 1e-6
			}
			sol := g.Solution
			for i, tt := range times {
				if sol.Events[i] != 2 {
					t.Errorf("doses at %v: %d events, want 2", tt, sol.Events[i])
				}
				var want [7]float64
				for _, tau := range append([]float64{T}, saveAt...) {
					y, a, dp := twoDosesClosedForm(y0[i], p[5*i:5*i+5], tau)
					want[0], want[1] = want[0]+y, want[1]+a
					for x := range dp {
						want[2+x] += dp[x]
					}
				}
				got := append([]float64{sol.Y[i], g.Y0[i]}, g.P[5*i:5*i+5]...)
				yT, _, _ := twoDosesClosedForm(y0[i], p[5*i:5*i+5], T)
				got[0], want[0] = sol.Y[i], yT
				for x, name := range []string{"y(T)", "∂L/∂y0", "∂L/∂k", "∂L/∂t1", "∂L/∂t2", "∂L/∂D1", "∂L/∂D2"} {
					if math.Abs(got[x]-want[x]) > tol*math.Max(1, math.Abs(want[x])) {
						t.Errorf("doses at %v: %s = %.12g, closed form %.12g", tt, name, got[x], want[x])
					}
				}
				for k, tau := range saveAt {
					y, _, _ := twoDosesClosedForm(y0[i], p[5*i:5*i+5], tau)
					if got := sol.Ys[i*len(saveAt)+k]; math.Abs(got-y) > tol*math.Max(1, math.Abs(y)) {
						t.Errorf("doses at %v: y(%v) = %.12g, closed form %.12g", tt, tau, got, y)
					}
				}
			}
			// The mesh: one mark a step; where the doses coincide, the
			// second's step has size 0 and follows the first's.
			ms := g.Mesh
			for i, tt := range times {
				var marks []int32
				var hs []float64
				for s := 0; s < ms.Len[i]; s++ {
					if e := ms.Events[s*ms.N+i]; e > 0 {
						marks = append(marks, e)
						hs = append(hs, ms.H[s*ms.N+i])
					}
				}
				if len(marks) != 2 || marks[0] != 1 || marks[1] != 2 || (tt[0] == tt[1]) != (hs[1] == 0) {
					t.Errorf("doses at %v: marks %v, steps %v", tt, marks, hs)
				}
			}
			rp, err := sv.Replay(&pr, ms)
			if err != nil {
				t.Fatal(err)
			}
			g2, err := sv.Grad(nil, &pr, all, ms)
			if err != nil {
				t.Fatal(err)
			}
			for x := range sol.Y {
				if rp.Y[x] != sol.Y[x] || g2.Solution.Y[x] != sol.Y[x] {
					t.Errorf("trajectory %d: replay y(T) %v, Grad on the mesh %v, record %v", x, rp.Y[x], g2.Solution.Y[x], sol.Y[x])
				}
			}
			for x := range sol.Ys {
				if rp.Ys[x] != sol.Ys[x] {
					t.Errorf("save %d: replay %v, record %v", x, rp.Ys[x], sol.Ys[x])
				}
			}
			for x := range g.P {
				if g2.P[x] != g.P[x] {
					t.Errorf("∂L/∂p[%d]: on the mesh %v, with the record %v", x, g2.P[x], g.P[x])
				}
			}
			// The dense solution reads the save times as Solve does, bit
			// for bit: at the doses, the state after both.
			ds, err := sv.SolveDense(&pr)
			if err != nil {
				t.Fatal(err)
			}
			for i := range times {
				for k, tau := range append(saveAt, T) {
					y, err := ds.Evaluate(nil, i, tau)
					if err != nil {
						t.Fatal(err)
					}
					want := sol.Y[i]
					if k < len(saveAt) {
						want = sol.Ys[i*len(saveAt)+k]
					}
					if y[0] != want {
						t.Errorf("doses at %v: Evaluate(%v) = %v, Solve %v", times[i], tau, y[0], want)
					}
				}
			}
		})
	}
}

// counterBallClosedForm returns the state (x, v, c) at time T of a ball
// from height x0 > 0 at speed v0 under gravity gr that bounces once before
// T, at t* (v → −e·v), where c adds the speed after the bounce (count +1:
// the counter fires after the bounce), before it (−1) or nothing (0), and
// its end time: T, or t* if stop (a terminal event at the impact, after
// the bounce).
func counterBallClosedForm(x0, v0, c0, e, gr, T float64, count int, stop bool) (x, v, c, tEnd float64) {
	ts := (v0 + math.Sqrt(v0*v0+2*gr*x0)) / gr
	vm := v0 - gr*ts
	vp := -e * vm
	switch c = c0; count {
	case 1:
		c += vp
	case -1:
		c += vm
	}
	if stop {
		return 0, vp, c, ts
	}
	s := T - ts
	return vp*s - gr/2*s*s, vp - gr*s, c, T
}

// TestEventCoincidingBall checks events with one condition and different
// jumps (a ball's bounce and a counter of its impact speed, both on its
// height falling to 0) and a bounce that coincides with a terminal event
// on the same condition: all fire, the non-terminal ones in
// Settings.Events order, a terminal one last; the final state, the end
// time and the gradient of x + v + c at the end with respect to the
// initial state and the restitution per trajectory equal the closed
// form's (central differences), every method.
func TestEventCoincidingBall(t *testing.T) {
	t.Parallel()
	const gr, T = 9.81, 0.7 // one bounce, at 0.35 to 0.55
	f := ode.Field{Name: "ball", Dim: 3, Params: 1, F: func(_ tape.V, y, _ []tape.V) []tape.V {
		return []tape.V{y[1], y[1].Const(-gr), y[1].Const(0)}
	}}
	height := func(_ tape.V, y, _ []tape.V) tape.V { return y[0] }
	bounce := ode.Event{Name: "bounce", Direction: -1, G: height,
		Apply: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{y[0], p[0].Neg().Mul(y[1]), y[2]} }}
	counter := ode.Event{Name: "counter", Direction: -1, G: height,
		Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0], y[1], y[2].Add(y[1])} }}
	stop := ode.Event{Name: "stop", Direction: -1, Terminal: true, G: height}
	sum := ode.Loss{Name: "sum", F: func(y, _, _ []tape.V) tape.V { return y[0].Add(y[1]).Add(y[2]) }}
	rng := rand.New(rand.NewPCG(25, 51))
	const n = 5
	y0, p := make([]float64, 3*n), make([]float64, n)
	for i := 0; i < n; i++ {
		y0[3*i], y0[3*i+1], y0[3*i+2] = 0.8+0.4*rng.Float64(), -0.5+rng.Float64(), rng.Float64()
		p[i] = 0.6 + 0.3*rng.Float64()
	}
	cases := []struct {
		name  string
		evs   []ode.Event
		count int
		stop  bool
	}{
		{"bounce,counter", []ode.Event{bounce, counter}, 1, false},
		{"counter,bounce", []ode.Event{counter, bounce}, -1, false},
		{"stop,bounce", []ode.Event{stop, bounce}, 0, true},
		{"stop,counter,bounce", []ode.Event{stop, counter, bounce}, -1, true},
		{"bounce,stop,counter", []ode.Event{bounce, stop, counter}, 1, true},
	}
	for _, tc := range cases {
		for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P} {
			t.Run(tc.name+"/"+m.Name(), func(t *testing.T) {
				t.Parallel()
				sv := solverT(t, f, &ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: tc.evs})
				pr := ode.Problem{Field: f, N: n, Y0: y0, P: p, T1: T}
				g, err := sv.Grad(nil, &pr, sum, nil)
				if err != nil {
					t.Fatal(err)
				}
				loss := func(x []float64) float64 { // x: x0, v0, c0, e
					a, b, c, _ := counterBallClosedForm(x[0], x[1], x[2], x[3], gr, T, tc.count, tc.stop)
					return a + b + c
				}
				for i := 0; i < n; i++ {
					x := []float64{y0[3*i], y0[3*i+1], y0[3*i+2], p[i]}
					a, b, c, tEnd := counterBallClosedForm(x[0], x[1], x[2], x[3], gr, T, tc.count, tc.stop)
					want := len(tc.evs)
					if got := g.Solution.Events[i]; got != want {
						t.Errorf("trajectory %d: %d events, want %d", i, got, want)
					}
					if math.Abs(g.Solution.T[i]-tEnd) > 1e-9 {
						t.Errorf("trajectory %d: ends at %.12g, closed form %.12g", i, g.Solution.T[i], tEnd)
					}
					for c, w := range []float64{a, b, c} {
						if got := g.Solution.Y[3*i+c]; math.Abs(got-w) > 1e-8 {
							t.Errorf("trajectory %d: y[%d] = %.12g, closed form %.12g", i, c, got, w)
						}
					}
					got := []float64{g.Y0[3*i], g.Y0[3*i+1], g.Y0[3*i+2], g.P[i]}
					for k := range x {
						const dx = 1e-6
						xp, xm := append([]float64(nil), x...), append([]float64(nil), x...)
						xp[k] += dx
						xm[k] -= dx
						fd := (loss(xp) - loss(xm)) / (2 * dx)
						if math.Abs(got[k]-fd) > 1e-6*math.Max(1, math.Abs(fd)) {
							t.Errorf("trajectory %d: ∂L/∂%s = %.10g, central differences of the closed form %.10g", i, []string{"x0", "v0", "c0", "e"}[k], got[k], fd)
						}
					}
				}
			})
		}
	}
}

// TestEventCoincidingMaxEvents checks that each event of a coinciding
// pair counts toward Settings.MaxEvents: with MaxEvents 1 two doses at
// one time end the trajectory with TooManyEvents (after both), where
// doses at two times end it at the second; with MaxEvents 2 both
// trajectories end OK.
func TestEventCoincidingMaxEvents(t *testing.T) {
	t.Parallel()
	f, evs := twoDoses()
	y0 := []float64{1, 1}
	p := []float64{0.7, 1, 1, 0.5, 0.5, 0.7, 1, 1.5, 0.5, 0.5}
	for _, c := range []struct {
		max  int
		want [2]ode.Status
		t    [2]float64
	}{
		{1, [2]ode.Status{ode.TooManyEvents, ode.TooManyEvents}, [2]float64{1, 1.5}},
		{2, [2]ode.Status{ode.OK, ode.OK}, [2]float64{2, 2}},
	} {
		sv := solverT(t, f, &ode.Settings{Events: evs, MaxEvents: c.max, AllowFailures: true})
		sol, err := sv.Solve(&ode.Problem{Field: f, N: 2, Y0: y0, P: p, T1: 2})
		if err != nil {
			t.Fatal(err)
		}
		for i := range y0 {
			if sol.Status[i] != c.want[i] || sol.Events[i] != 2 || math.Abs(sol.T[i]-c.t[i]) > 1e-12 {
				t.Errorf("MaxEvents %d, trajectory %d: status %v at t = %v after %d events, want %v at %v after 2", c.max, i, sol.Status[i], sol.T[i], sol.Events[i], c.want[i], c.t[i])
			}
		}
	}
}

// TestEventCoincidingOffRoot checks a group of events on one condition
// whose jump moves it off its root: y0' = −k·y0 refilled to 2·y0 when it
// falls to 0.5 ("refill"), and a counter y1 += 1 on the same condition
// ("count"), both Direction 0, in either order. After the group every
// fired condition stands at +0.5 (the refill's level), not at the fired
// marker, so neither fires again on the jump: ⌊k·T1/ln 2⌋ refills and as
// many counts, y0(T1) = e^{−k·(T1 − t_n)} and ∂y0(T1)/∂k = −T1·y0(T1).
func TestEventCoincidingOffRoot(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "refill-count", Dim: 2, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0]), y[1].Const(0)}
	}}
	level := func(_ tape.V, y, _ []tape.V) tape.V { return y[0].AddC(-0.5) }
	refill := ode.Event{Name: "refill", G: level, Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0].MulC(2), y[1]} }}
	count := ode.Event{Name: "count", G: level, Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0], y[1].AddC(1)} }}
	ks := []float64{0.3, 1, 1.7, 2.2, 3.1}
	const T1 = 2.0
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23} {
		for _, evs := range [][]ode.Event{{refill, count}, {count, refill}} {
			sv := solverT(t, f, &ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: evs})
			y0 := make([]float64, 2*len(ks))
			for i := range ks {
				y0[2*i] = 1
			}
			p := ode.Problem{Field: f, N: len(ks), Y0: y0, P: ks, T1: T1}
			g, err := sv.Grad(nil, &p, ode.Component(0), nil)
			if err != nil {
				t.Fatalf("%s, %s first: %v", m.Name(), evs[0].Name, err)
			}
			tol := 1e-7
			if m == ode.Rosenbrock23 {
				tol = 1e-5
			}
			for i, k := range ks {
				n := math.Floor(k * T1 / math.Ln2)
				y := math.Exp(-k * (T1 - n*math.Ln2/k))
				dydk := -T1 * y
				s := g.Solution
				if s.Status[i] != ode.OK || s.Events[i] != 2*int(n) || s.Y[2*i+1] != n ||
					math.Abs(s.Y[2*i]-y) > tol || math.Abs(g.P[i]-dydk) > tol*math.Abs(dydk) {
					t.Errorf("%s, %s first, k = %v: %v after %d events, y(T1) = (%v, %v), ∂y0/∂k = %v; want OK after %v, (%v, %v), %v",
						m.Name(), evs[0].Name, k, s.Status[i], s.Events[i], s.Y[2*i], s.Y[2*i+1], g.P[i], 2*n, y, n, dydk)
				}
			}
		}
	}
}
