package ode

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

var lorenzField = Field{Name: "lorenz", Dim: 3, Params: 3, F: func(t tape.V, y, p []tape.V) []tape.V {
	return []tape.V{
		p[0].Mul(y[1].Sub(y[0])),
		y[0].Mul(p[1].Sub(y[2])).Sub(y[1]),
		y[0].Mul(y[1]).Sub(p[2].Mul(y[2])),
	}
}}

func TestQuickLorenz(t *testing.T) {
	n := 50
	p := Problem{Field: lorenzField, N: n, Y0: []float64{1, 0, 0}, P: make([]float64, 3*n), T0: 0, T1: 1}
	for i := 0; i < n; i++ {
		p.P[3*i], p.P[3*i+1], p.P[3*i+2] = 10, 21*float64(i)/float64(n-1), 8.0/3
	}
	set := &Settings{RelTol: 1e-8, AbsTol: 1e-11}
	for _, meth := range []Method{Tsit5, Vern7} {
		set.Method = meth
		sv, err := NewSolver(p.Field, set)
		if err != nil {
			t.Fatal(err)
		}
		m, sol, err := sv.Record(&p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: accepted %d rejected %d rows %d", meth.Name(), m.Stats.TotalAccepted(), m.Stats.TotalRejected(), m.Rows)
		rs, err := sv.Replay(&p, m)
		if err != nil {
			t.Fatal(err)
		}
		for i := range sol.Y {
			if sol.Y[i] != rs.Y[i] {
				t.Fatalf("%s: record %v replay %v at %d", meth.Name(), sol.Y[i], rs.Y[i], i)
			}
		}
		g, err := sv.Grad(nil, &p, SumSquares(), m)
		if err != nil {
			t.Fatal(err)
		}
		// FD on rho of trajectory 17.
		j := 17
		lossAt := func() float64 {
			s, err := sv.Replay(&p, m)
			if err != nil {
				t.Fatal(err)
			}
			l := 0.0
			for _, v := range s.Y {
				l += v * v
			}
			return l
		}
		x := &p.P[3*j+1]
		hh := 1e-6 * math.Max(1, math.Abs(*x))
		old := *x
		*x = old + hh
		lp := lossAt()
		*x = old - hh
		lm := lossAt()
		*x = old
		fd := (lp - lm) / (2 * hh)
		if math.Abs(fd-g.P[3*j+1]) > 1e-6*math.Abs(fd) {
			t.Errorf("%s: grad rho %v fd %v", meth.Name(), g.P[3*j+1], fd)
		}
		t.Logf("%s: loss %v grad %v fd %v", meth.Name(), g.Loss, g.P[3*j+1], fd)
	}
}
