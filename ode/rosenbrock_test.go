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

func TestRosenbrockRobertsonGradient(t *testing.T) {
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
				t.Errorf("%s: ∂y0/∂k%d: want %v (frozen-mesh finite differences), got %v", meth.Name(), j, fd, g.P[j])
			}
		}
	}
}

func TestRodas5PDenseSaveAt(t *testing.T) {
	k := [3]float64{0.04, 3e7, 1e4}
	ts := []float64{0, 0.5, 3, 10, 40, 40, 100}
	p := Problem{Field: robertsonField, Y0: []float64{1, 0, 0}, P: k[:], T0: 0, T1: 100, SaveAt: ts}
	set := &Settings{Method: Rodas5P, RelTol: 1e-8, AbsTol: 1e-14}
	sv, err := NewSolver(p.Field, set)
	if err != nil {
		t.Fatal(err)
	}
	sol, err := sv.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	for i, tau := range ts {
		if tau == 0 {
			continue
		}
		ref, _, _ := refode.RobertsonRef(k, [3]float64{1, 0, 0}, tau)
		for c := 0; c < 3; c++ {
			got := sol.Ys[i*3+c]
			rel := math.Abs(got-ref[c]) / math.Abs(ref[c])
			if rel > 1e-6 {
				t.Errorf("tau %v comp %d: got %v ref %v rel %v", tau, c, got, ref[c], rel)
			}
		}
	}
	m, _, _ := sv.Record(&p)
	loss := Loss{Name: "obs", F: func(y, ys, _ []tape.V) tape.V {
		s := ys[0].Square()
		for _, v := range ys[1:] {
			s = s.Add(v.Square())
		}
		return s
	}}
	g, err := sv.Grad(nil, &p, loss, m)
	if err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 3; j++ {
		x := &p.P[j]
		hh := 1e-6 * math.Abs(*x)
		old := *x
		lossAt := func() float64 {
			s, err := sv.Replay(&p, m)
			if err != nil {
				t.Fatal(err)
			}
			l := 0.0
			for _, v := range s.Ys {
				l += v * v
			}
			return l
		}
		*x = old + hh
		lp := lossAt()
		*x = old - hh
		lm := lossAt()
		*x = old
		fd := (lp - lm) / (2 * hh)
		if math.Abs(fd-g.P[j]) > 1e-5*math.Abs(fd) {
			t.Errorf("∂L/∂k%d through dense save times: want %v (finite differences), got %v", j, fd, g.P[j])
		}
	}
}
