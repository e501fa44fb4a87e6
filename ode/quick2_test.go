package ode

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/tape"
)

var robertsonField = Field{Name: "robertson", Dim: 3, Params: 3, Stiff: true, F: func(t tape.V, y, p []tape.V) []tape.V {
	a := p[0].Mul(y[0])
	b := p[2].Mul(y[1]).Mul(y[2])
	c := p[1].Mul(y[1].Square())
	return []tape.V{b.Sub(a), a.Sub(b).Sub(c), c}
}}

func TestQuickRobertson(t *testing.T) {
	k := [3]float64{0.04, 3e7, 1e4}
	for _, meth := range []Method{Rodas5P, Rosenbrock23} {
		tol := 1e-8
		if meth == Rosenbrock23 {
			tol = 1e-6
		}
		p := Problem{Field: robertsonField, Y0: []float64{1, 0, 0}, P: k[:], T0: 0, T1: 100}
		set := &Settings{Method: meth, RelTol: tol, AbsTol: tol * 1e-6}
		sv, err := NewSolver(p.Field, set)
		if err != nil {
			t.Fatal(err)
		}
		m, sol, err := sv.Record(&p)
		if err != nil {
			t.Fatal(err)
		}
		ref, _, _ := refode.RobertsonRef(k, [3]float64{1, 0, 0}, 100)
		t.Logf("%s: acc %d rej %d y %v ref %v", meth.Name(), m.Stats.TotalAccepted(), m.Stats.TotalRejected(), sol.Y, ref)
		g, err := sv.Grad(nil, &p, Component(0), m)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 3; j++ {
			x := &p.P[j]
			hh := 1e-6 * math.Abs(*x)
			old := *x
			*x = old + hh
			sp, _ := sv.Replay(&p, m)
			*x = old - hh
			sm, _ := sv.Replay(&p, m)
			*x = old
			fd := (sp.Y[0] - sm.Y[0]) / (2 * hh)
			t.Logf("%s: dy0/dk%d grad %v fd %v", meth.Name(), j, g.P[j], fd)
			if math.Abs(fd-g.P[j]) > 1e-5*math.Abs(fd) {
				t.Errorf("mismatch")
			}
		}
	}
}
