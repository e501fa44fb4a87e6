package ode_test

import (
	"math"
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
	all := ode.Loss{Name: "all", F: func(y, ys, _ []tape.V) tape.V {
		s := y[0]
		for _, v := range ys {
			s = s.Add(v)
		}
		return s
	}}
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
		})
	}
}
