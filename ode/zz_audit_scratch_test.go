package ode_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

var auditEngine = os.Getenv("AUDIT_ENGINE")

func try(t *testing.T, name string, fn func() string) {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Sprintf("PANIC: %v", r)
			}
		}()
		done <- fn()
	}()
	select {
	case s := <-done:
		t.Logf("%-45s | %s", name, s)
	case <-time.After(60 * time.Second):
		t.Logf("%-45s | HANG (>60s)", name)
	}
}

func desc(err error) string {
	if err == nil {
		return "nil error"
	}
	var te *ode.TrajectoryError
	k := "untyped"
	if errors.As(err, &te) {
		k = "TrajectoryError"
	}
	return fmt.Sprintf("err(%s): %v", k, err)
}

func decay() ode.Field {
	return ode.Field{Name: "decay", Dim: 2, Params: 1, Shared: 1, F: func(t tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0]), p[1].Neg().Mul(y[1])}
	}}
}

func st(s *ode.Settings) *ode.Settings {
	if s == nil {
		s = &ode.Settings{}
	}
	s.Engine = auditEngine
	return s
}

func solveDesc(p ode.Problem, s *ode.Settings) string {
	sol, err := ode.Solve(p, st(s))
	r := desc(err)
	if sol != nil {
		r += fmt.Sprintf(" | status %v T %v Y %.6g Ys %.6g", sol.Status, sol.T, sol.Y, sol.Ys)
	}
	return r
}

func base() ode.Problem {
	return ode.Problem{Field: decay(), N: 3, Y0: []float64{1, 2}, P: []float64{1}, Shared: []float64{0.5}, T0: 0, T1: 1}
}

func TestAuditScratch(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	mod := func(f func(p *ode.Problem)) ode.Problem { p := base(); f(&p); return p }
	cases := []struct {
		name string
		p    ode.Problem
		s    *ode.Settings
	}{
		{"valid", base(), nil},
		{"y0 NaN", mod(func(p *ode.Problem) { p.Y0 = []float64{nan, 1} }), nil},
		{"y0 rows Inf", mod(func(p *ode.Problem) { p.Y0 = []float64{1, 1, 1, inf, 1, 1} }), nil},
		{"P NaN", mod(func(p *ode.Problem) { p.P = []float64{1, nan, 1} }), nil},
		{"shared Inf", mod(func(p *ode.Problem) { p.Shared = []float64{inf} }), nil},
		{"T0 NaN", mod(func(p *ode.Problem) { p.T0 = nan }), nil},
		{"T1 NaN", mod(func(p *ode.Problem) { p.T1 = nan }), nil},
		{"T1 Inf", mod(func(p *ode.Problem) { p.T1 = inf }), nil},
		{"T0 -Inf", mod(func(p *ode.Problem) { p.T0 = -inf }), nil},
		{"T1==T0", mod(func(p *ode.Problem) { p.T1 = 0 }), nil},
		{"T1<T0", mod(func(p *ode.Problem) { p.T1 = -1 }), nil},
		{"T1s mixed", mod(func(p *ode.Problem) { p.T1s = []float64{1, 2, nan} }), nil},
		{"T1s short", mod(func(p *ode.Problem) { p.T1s = []float64{1, 2} }), nil},
		{"save unsorted", mod(func(p *ode.Problem) { p.SaveAt = []float64{0.5, 0.2} }), nil},
		{"save dup", mod(func(p *ode.Problem) { p.SaveAt = []float64{0.5, 0.5} }), nil},
		{"save outside", mod(func(p *ode.Problem) { p.SaveAt = []float64{1.5} }), nil},
		{"save before", mod(func(p *ode.Problem) { p.SaveAt = []float64{-0.5} }), nil},
		{"save at t0,t1", mod(func(p *ode.Problem) { p.SaveAt = []float64{0, 1} }), nil},
		{"save NaN", mod(func(p *ode.Problem) { p.SaveAt = []float64{nan} }), nil},
		{"save -0", mod(func(p *ode.Problem) { p.SaveAt = []float64{math.Copysign(0, -1)} }), nil},
		{"rtol neg", base(), &ode.Settings{RelTol: -1}},
		{"rtol NaN", base(), &ode.Settings{RelTol: nan}},
		{"rtol 1e-16", base(), &ode.Settings{RelTol: 1e-16}},
		{"rtol huge", base(), &ode.Settings{RelTol: 1e10}},
		{"atol neg", base(), &ode.Settings{AbsTol: -1}},
		{"atol NaN", base(), &ode.Settings{AbsTol: nan}},
		{"atol huge", base(), &ode.Settings{AbsTol: 1e300}},
		{"atol Inf", base(), &ode.Settings{AbsTol: inf}},
		{"maxsteps -1", base(), &ode.Settings{MaxSteps: -1}},
		{"maxsteps 1", base(), &ode.Settings{MaxSteps: 1}},
		{"maxsteps 1 allowfail", base(), &ode.Settings{MaxSteps: 1, AllowFailures: true}},
		{"n 0 empty y0", mod(func(p *ode.Problem) { p.N = 0; p.Y0 = nil }), nil},
		{"n 1", mod(func(p *ode.Problem) { p.N = 1 }), nil},
		{"n -1", mod(func(p *ode.Problem) { p.N = -1 }), nil},
		{"y0 wrong len", mod(func(p *ode.Problem) { p.Y0 = []float64{1, 2, 3} }), nil},
		{"P wrong len", mod(func(p *ode.Problem) { p.P = []float64{1, 2} }), nil},
		{"shared missing", mod(func(p *ode.Problem) { p.Shared = nil }), nil},
		{"Dim 0", mod(func(p *ode.Problem) { p.Field.Dim = 0 }), nil},
		{"F nil", mod(func(p *ode.Problem) { p.Field.F = nil }), nil},
		{"F wrong outs", mod(func(p *ode.Problem) {
			p.Field.F = func(t tape.V, y, p []tape.V) []tape.V { return y[:1] }
		}), nil},
		{"F panics", mod(func(p *ode.Problem) {
			p.Field.F = func(t tape.V, y, p []tape.V) []tape.V { return []tape.V{y[5], y[0]} }
		}), nil},
		{"F NaN at t>0.5 traj1", mod(func(p *ode.Problem) {
			p.P = []float64{1, -1, 1}
			p.Field.F = func(t tape.V, y, p []tape.V) []tape.V {
				// sqrt(p0*(0.5 - t)) NaN for p0<0 always... use log
				return []tape.V{(p[0]).Sqrt().Mul(y[0]), y[1].Neg()}
			}
		}), &ode.Settings{AllowFailures: true}},
		{"F NaN traj1 noallow", mod(func(p *ode.Problem) {
			p.P = []float64{1, -1, 1}
			p.Field.F = func(t tape.V, y, p []tape.V) []tape.V {
				return []tape.V{(p[0]).Sqrt().Mul(y[0]), y[1].Neg()}
			}
		}), nil},
		{"dt0 neg", base(), &ode.Settings{Dt0: -1}},
		{"dt0 huge", base(), &ode.Settings{Dt0: 1e10}},
		{"memlimit 1", base(), &ode.Settings{MemoryLimit: 1}},
		{"workers huge", base(), &ode.Settings{Exec: tape.ExecSettings{Workers: 1 << 20}}},
		{"T0 huge", mod(func(p *ode.Problem) { p.T0 = 1e300; p.T1 = 1.1e300 }), nil},
		{"span overflow", mod(func(p *ode.Problem) { p.T0 = -1.7e308; p.T1 = 1.7e308 }), nil},
		{"tiny span", mod(func(p *ode.Problem) { p.T1 = 1e-300 }), nil},
	}
	for _, c := range cases {
		c := c
		try(t, "Solve/"+c.name, func() string { return solveDesc(c.p, c.s) })
	}
	// Grad
	for _, c := range cases {
		c := c
		try(t, "Grad/"+c.name, func() string {
			g, err := ode.Grad(nil, c.p, ode.SumSquares(), nil, st(c.s))
			r := desc(err)
			if g != nil && err == nil {
				r += fmt.Sprintf(" | L %.6g gP %.6g gS %.6g", g.Loss, g.P, g.Shared)
			}
			return r
		})
	}
}

func TestAuditLoss(t *testing.T) {
	nan := math.NaN()
	p := base()
	p.SaveAt = []float64{0.5}
	try(t, "loss NaN constant", func() string {
		l := ode.Loss{F: func(y, ys, d []tape.V) tape.V { return y[0].Mul(y[0].Const(nan)) }}
		g, err := ode.Grad(nil, p, l, nil, st(nil))
		if err != nil {
			return desc(err)
		}
		return fmt.Sprintf("nil | L %v gP %v", g.Loss, g.P)
	})
	try(t, "loss sqrt(-y)", func() string {
		l := ode.Loss{F: func(y, ys, d []tape.V) tape.V { return (y[0].Neg()).Sqrt() }}
		g, err := ode.Grad(nil, p, l, nil, st(nil))
		if err != nil {
			return desc(err)
		}
		return fmt.Sprintf("nil | L %v gP %v", g.Loss, g.P)
	})
	try(t, "loss data NaN", func() string {
		l := ode.Loss{F: func(y, ys, d []tape.V) tape.V { return y[0].Sub(d[0]).Square() }, Data: []float64{1, nan, 2}, DataDim: 1}
		g, err := ode.Grad(nil, p, l, nil, st(nil))
		if err != nil {
			return desc(err)
		}
		return fmt.Sprintf("nil | L %v gP %v", g.Loss, g.P)
	})
	try(t, "loss data wrong len", func() string {
		l := ode.Loss{F: func(y, ys, d []tape.V) tape.V { return y[0].Sub(d[0]).Square() }, Data: []float64{1, 2}, DataDim: 1}
		_, err := ode.Grad(nil, p, l, nil, st(nil))
		return desc(err)
	})
	try(t, "loss Component(5)", func() string {
		_, err := ode.Grad(nil, p, ode.Component(5), nil, st(nil))
		return desc(err)
	})
	try(t, "loss returns nil V", func() string {
		l := ode.Loss{F: func(y, ys, d []tape.V) tape.V { var v tape.V; return v }}
		_, err := ode.Grad(nil, p, l, nil, st(nil))
		return desc(err)
	})
	try(t, "loss reads ys oob", func() string {
		l := ode.Loss{F: func(y, ys, d []tape.V) tape.V { return ys[10] }}
		_, err := ode.Grad(nil, p, l, nil, st(nil))
		return desc(err)
	})
}

func TestAuditDense(t *testing.T) {
	sv, err := ode.NewSolver(decay(), st(nil))
	if err != nil {
		t.Fatal(err)
	}
	p := base()
	ds, err := sv.SolveDense(&p)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []float64{math.NaN(), math.Inf(1), -1, 0, 1, 1 + 1e-16, 0.5, math.Copysign(0, -1)} {
		tt := tt
		try(t, fmt.Sprintf("Evaluate t=%v", tt), func() string {
			y, err := ds.Evaluate(nil, 0, tt)
			return fmt.Sprintf("%s | %v", desc(err), y)
		})
	}
	try(t, "Evaluate i=-1", func() string { _, err := ds.Evaluate(nil, -1, 0.5); return desc(err) })
	try(t, "Evaluate dst short", func() string { _, err := ds.Evaluate(make([]float64, 1), 0, 0.5); return desc(err) })
	try(t, "SolveDense memlimit 1", func() string {
		sv, _ := ode.NewSolver(decay(), st(&ode.Settings{MemoryLimit: 1}))
		_, err := sv.SolveDense(&p)
		return desc(err)
	})
	try(t, "SolveDense bad p", func() string {
		q := base()
		q.T1 = math.NaN()
		_, err := sv.SolveDense(&q)
		return desc(err)
	})
	try(t, "SolveDense allowfail NaN traj", func() string {
		f := decay()
		f.F = func(t tape.V, y, p []tape.V) []tape.V { return []tape.V{(p[0]).Sqrt().Mul(y[0]), y[1].Neg()} }
		sv, _ := ode.NewSolver(f, st(&ode.Settings{AllowFailures: true}))
		q := base()
		q.P = []float64{1, -1, 1}
		ds, err := sv.SolveDense(&q)
		if err != nil {
			return desc(err)
		}
		_, e1 := ds.Evaluate(nil, 1, 0.5)
		y0, e0 := ds.Evaluate(nil, 0, 0.5)
		return fmt.Sprintf("status %v; traj1 %s; traj0 %v %v", ds.Status, desc(e1), y0, e0)
	})
}

func aball() ode.Field {
	return ode.Field{Name: "ball", Dim: 2, Params: 1, F: func(t tape.V, y, p []tape.V) []tape.V {
		return []tape.V{y[1], t.Const(-9.81)}
	}}
}

func TestAuditEvents(t *testing.T) {
	p := ode.Problem{Field: aball(), N: 2, Y0: []float64{1, 0}, P: []float64{0.8}, T0: 0, T1: 5}
	bounce := func(y []tape.V, p []tape.V) []tape.V { return []tape.V{y[0], y[1].Neg().Mul(p[0])} }
	ev := func(e ode.Event) *ode.Settings { return st(&ode.Settings{Events: []ode.Event{e}}) }
	cases := []struct {
		name string
		p    ode.Problem
		s    *ode.Settings
	}{
		{"ball at rest (zeno)", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return y[0] }, Direction: -1,
			Apply: func(t tape.V, y, p []tape.V) []tape.V { return bounce(y, p) }})},
		{"ball zeno maxevents 1e6", p, st(&ode.Settings{MaxEvents: 1000000, Events: []ode.Event{{G: func(t tape.V, y, p []tape.V) tape.V { return y[0] }, Direction: -1,
			Apply: func(t tape.V, y, p []tape.V) []tape.V { return bounce(y, p) }}}})},
		{"cond NaN", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return y[0].Sub(t.Const(0.5)).Sqrt() }, Terminal: true})},
		{"cond Inf always", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return t.Const(1).Div(y[0].Sub(y[0])) }, Terminal: true})},
		{"fires at t0", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return y[0].Sub(t.Const(1)) }, Terminal: true})},
		{"cond const", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return t.Const(1) }, Terminal: true})},
		{"cond only p", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return p[0] }, Terminal: true})},
		{"never fires", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return y[0].Add(t.Const(1000)) }, Terminal: true})},
		{"dir +1 only (falling cross)", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return y[0].Sub(t.Const(0.5)) }, Direction: 1, Terminal: true})},
		{"dir -1", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return y[0].Sub(t.Const(0.5)) }, Direction: -1, Terminal: true})},
		{"dir 2", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return y[0].Sub(t.Const(0.5)) }, Direction: 2, Terminal: true})},
		{"G nil", p, ev(ode.Event{Terminal: true})},
		{"terminal+apply", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return y[0] }, Terminal: true, Apply: func(t tape.V, y, p []tape.V) []tape.V { return y }})},
		{"apply wrong len", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return y[0] }, Apply: func(t tape.V, y, p []tape.V) []tape.V { return y[:1] }})},
		{"apply NaN", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return y[0] }, Direction: -1, Apply: func(t tape.V, y, p []tape.V) []tape.V {
			return []tape.V{y[0], (t.Const(-1)).Sqrt()}
		}})},
		{"apply keeps going below (no jump)", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return y[0] }, Apply: func(t tape.V, y, p []tape.V) []tape.V { return y }})},
		{"time event t-1", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return t.Sub(t.Const(1)) }, Apply: func(t tape.V, y, p []tape.V) []tape.V { return []tape.V{y[0].Add(t.Const(1)), y[1]} }})},
		{"maxevents -1", p, st(&ode.Settings{MaxEvents: -1, Events: []ode.Event{{G: func(t tape.V, y, p []tape.V) tape.V { return y[0] }, Terminal: true}}})},
		{"sin(t*1e6) many", p, ev(ode.Event{G: func(t tape.V, y, p []tape.V) tape.V { return (t.Mul(t.Const(1e4))).Sin() }, Apply: func(t tape.V, y, p []tape.V) []tape.V { return y }})},
	}
	for _, c := range cases {
		c := c
		try(t, "Solve/"+c.name, func() string {
			sol, err := ode.Solve(c.p, c.s)
			r := desc(err)
			if sol != nil {
				r += fmt.Sprintf(" | st %v T %.6g ev %v Y %.4g", sol.Status, sol.T, sol.Events, sol.Y)
			}
			return r
		})
		try(t, "Grad/"+c.name, func() string {
			g, err := ode.Grad(nil, c.p, ode.SumSquares(), nil, c.s)
			r := desc(err)
			if g != nil && err == nil {
				r += fmt.Sprintf(" | L %.6g gP %.4g", g.Loss, g.P)
			}
			return r
		})
	}
}

func TestAuditConcurrent(t *testing.T) {
	sv, err := ode.NewSolver(decay(), st(nil))
	if err != nil {
		t.Fatal(err)
	}
	want, err := sv.Solve(ptr(base()))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var bad strings.Builder
	var mu sync.Mutex
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				p := base()
				if k%2 == 0 {
					p.SaveAt = []float64{0.3}
				}
				sol, err := sv.Solve(&p)
				gr, err2 := sv.Grad(nil, &p, ode.SumSquares(), nil)
				mu.Lock()
				if err != nil || err2 != nil {
					fmt.Fprintf(&bad, "err %v %v;", err, err2)
				} else if sol.Y[0] != want.Y[0] || gr == nil {
					fmt.Fprintf(&bad, "mismatch;")
				}
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	t.Logf("concurrent: %q", bad.String())
}

func ptr[T any](x T) *T { return &x }

func TestAuditResident(t *testing.T) {
	sv, _ := ode.NewSolver(decay(), st(&ode.Settings{KeepSaves: true}))
	p := base()
	p.SaveAt = []float64{0.5}
	try(t, "mesh release then grad", func() string {
		m, _, err := sv.Record(&p)
		if err != nil {
			return desc(err)
		}
		m.Release()
		g, err := sv.Grad(nil, &p, ode.SumSquares(), m)
		if err != nil {
			return desc(err)
		}
		return fmt.Sprintf("nil | L %v", g.Loss)
	})
	try(t, "mesh release twice, host", func() string {
		m, _, err := sv.Record(&p)
		if err != nil {
			return desc(err)
		}
		m.Release()
		m.Release()
		return desc(m.Host())
	})
	try(t, "solution release then hostsaves", func() string {
		s, err := sv.Solve(&p)
		if err != nil {
			return desc(err)
		}
		s.Release()
		err = s.HostSaves()
		return fmt.Sprintf("%s | Ys %v", desc(err), s.Ys)
	})
	try(t, "mesh from other problem", func() string {
		m, _, err := sv.Record(&p)
		if err != nil {
			return desc(err)
		}
		q := base()
		q.N = 5
		_, err = sv.Grad(nil, &q, ode.SumSquares(), m)
		return desc(err)
	})
	try(t, "mesh different T1", func() string {
		m, _, err := sv.Record(&p)
		if err != nil {
			return desc(err)
		}
		q := p
		q.T1 = 2
		g, err := sv.Grad(nil, &q, ode.SumSquares(), m)
		if err != nil {
			return desc(err)
		}
		return fmt.Sprintf("nil | L %v", g.Loss)
	})
	try(t, "mesh different y0 (ok)", func() string {
		m, _, err := sv.Record(&p)
		if err != nil {
			return desc(err)
		}
		q := p
		q.Y0 = []float64{1e6, 2}
		g, err := sv.Grad(nil, &q, ode.SumSquares(), m)
		if err != nil {
			return desc(err)
		}
		return fmt.Sprintf("nil | L %v", g.Loss)
	})
	try(t, "solver other field", func() string {
		q := p
		q.Field = aball()
		q.P = []float64{1}
		q.Shared = nil
		_, err := sv.Solve(&q)
		return desc(err)
	})
}
