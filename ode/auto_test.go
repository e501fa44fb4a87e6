package ode_test

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// vdpScaled is the Van der Pol field with μ = p·s, p per trajectory and
// s shared (s = 1 in most tests), non-autonomous through a small forcing
// ε·sin(t) so that the switch time enters the stiff steps' f_t terms.
func vdpScaled() ode.Field {
	return ode.Field{Name: "vdp-scaled", Dim: 2, Params: 1, Shared: 1, F: func(t tape.V, y, p []tape.V) []tape.V {
		mu := p[0].Mul(p[1])
		return []tape.V{
			y[1],
			mu.Mul(t.Const(1).Sub(y[0].Square()).Mul(y[1])).Sub(y[0]).Add(t.Sin().MulC(0.01)),
		}
	}}
}

// mixedVdP returns an ensemble of n Van der Pol trajectories on [0, 2]
// whose μ alternates between non-stiff (1 to 4) and stiff (300 to 1000).
func mixedVdP(n int) ode.Problem {
	y0 := make([]float64, 0, 2*n)
	p := make([]float64, n)
	for i := range p {
		y0 = append(y0, 2, 0.1*float64(i%3))
		if i%2 == 0 {
			p[i] = 1 + float64(i%4)
		} else {
			p[i] = 300 + 100*float64(i%7)
		}
	}
	return ode.Problem{Field: vdpScaled(), N: n, Y0: y0, P: p, Shared: []float64{1}, T1: 2}
}

func TestAutoSmoke(t *testing.T) {
	p := mixedVdP(6)
	sv := solverT(t, p.Field, &ode.Settings{Method: ode.Auto})
	m, sol, err := sv.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("method %s switch %v len %v stiff %v", sol.Method, m.Switch, m.Len, sol.Stiff)
	ref, err := ode.Solve(p, &ode.Settings{Method: ode.Rodas5P, RelTol: 1e-10, AbsTol: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	for i := range sol.Y {
		if d := math.Abs(sol.Y[i] - ref.Y[i]); d > 1e-3*(1+math.Abs(ref.Y[i])) {
			t.Errorf("y[%d] = %v, want %v", i, sol.Y[i], ref.Y[i])
		}
	}
	rep, err := sv.Replay(&p, m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sol.Y {
		if rep.Y[i] != sol.Y[i] {
			t.Errorf("replay y[%d] = %v, want %v", i, rep.Y[i], sol.Y[i])
		}
	}
	g, err := sv.Grad(nil, &p, ode.SumSquares(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("grad %v %v %v", g.Y0, g.P, g.Shared)
}
