package ode_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// penaltyLoss is Σ_i |y_i(t1)|² + a·Σ_i ρ_i·y_i,0(t1) (FP reads the
// per-trajectory ρ) + b·(σ² + β²) per trajectory (FP reads the shared
// parameters) and Reg = c·σ·β once.
func penaltyLoss(a, b, c float64, mean bool) ode.Loss {
	return ode.Loss{Name: "penalty", Mean: mean,
		FP: func(y, _, _, p, s []tape.V) tape.V {
			l := y[0].Square().Add(y[1].Square()).Add(y[2].Square())
			l = l.Add(p[0].Mul(y[0]).MulC(a))
			return l.Add(s[0].Square().Add(s[1].Square()).MulC(b))
		},
		Reg: func(s []tape.V) tape.V { return s[0].Mul(s[1]).MulC(c) },
	}
}

// TestLossSeesParameters checks the gradient of a loss whose terms read
// the per-trajectory and shared parameters (FP) and a regulariser of the
// shared parameters (Reg) against central finite differences of
// Solver.Loss on the same frozen mesh.
func TestLossSeesParameters(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 5
	f := lorenzSharedField()
	pr := ode.Problem{Field: f, N: n, T1: 0.5, Y0: make([]float64, 3*n), P: make([]float64, n), Shared: []float64{10, 8.0 / 3}}
	for i := 0; i < n; i++ {
		pr.Y0[3*i], pr.Y0[3*i+1], pr.Y0[3*i+2] = 1+rng.Float64(), rng.Float64(), rng.Float64()
		pr.P[i] = 20 + 8*rng.Float64()
	}
	for _, mean := range []bool{false, true} {
		loss := penaltyLoss(0.3, 0.01, 0.7, mean)
		sv, err := ode.NewSolver(f, &ode.Settings{RelTol: 1e-8, AbsTol: 1e-10})
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := sv.Record(&pr)
		if err != nil {
			t.Fatal(err)
		}
		g, err := sv.Grad(nil, &pr, loss, m)
		if err != nil {
			t.Fatal(err)
		}
		val, _, err := sv.Loss(&pr, loss, m)
		if err != nil {
			t.Fatal(err)
		}
		if val != g.Loss {
			t.Errorf("mean=%v: Solver.Loss = %v, Grad's loss = %v; want them equal", mean, val, g.Loss)
		}
		fd := func(x *float64) float64 {
			h := 1e-6 * math.Max(math.Abs(*x), 1)
			x0 := *x
			*x = x0 + h
			lp, _, err := sv.Loss(&pr, loss, m)
			if err != nil {
				t.Fatal(err)
			}
			*x = x0 - h
			lm, _, err := sv.Loss(&pr, loss, m)
			if err != nil {
				t.Fatal(err)
			}
			*x = x0
			return (lp - lm) / (2 * h)
		}
		check := func(what string, got, want float64) {
			if d := math.Abs(got - want); d > 1e-6*math.Max(1, math.Abs(want)) {
				t.Errorf("mean=%v: %s: gradient %v, finite differences %v (diff %.2g)", mean, what, got, want, d)
			}
		}
		for i := 0; i < n; i++ {
			check("dL/drho", g.P[i], fd(&pr.P[i]))
		}
		for c := range pr.Shared {
			check("dL/dshared", g.Shared[c], fd(&pr.Shared[c]))
		}
		check("dL/dy0", g.Y0[4], fd(&pr.Y0[4]))
	}
}

// TestLossErrors checks the messages of losses that cannot be traced.
func TestLossErrors(t *testing.T) {
	t.Parallel()
	f := lorenzField()
	pr := ode.Problem{Field: f, Y0: []float64{1, 0, 0}, P: []float64{10, 28, 8.0 / 3}, T1: 0.1}
	cases := []struct {
		loss ode.Loss
		want string
	}{
		{ode.Loss{}, "ode: the loss has no F"},
		{ode.Loss{Name: "obs"}, "ode: loss obs has no F"},
		{ode.Loss{Name: "obs", F: func(_, ys, _ []tape.V) tape.V { return ys[0] }}, "ode: loss obs: tape: tracing obs: runtime error: index out of range"},
		{ode.Loss{F: func(_, ys, _ []tape.V) tape.V { return ys[0] }}, "ode: the loss: tape: tracing loss: runtime error: index out of range"},
		{ode.Loss{F: func(y, _, _ []tape.V) tape.V { return y[0] }, DataDim: -1}, "ode: the loss: DataDim = -1 is negative"},
		{ode.Loss{F: func(y, _, _ []tape.V) tape.V { return y[0].Neg().Log() }}, "ode: the loss: "}, // a run-time failure: log of −y(T)[0] < 0
	}
	for _, c := range cases {
		_, err := ode.Grad(nil, pr, c.loss, nil, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "loss loss") {
			t.Errorf("loss %q: error %v, want one containing %q", c.loss.Name, err, c.want)
		}
	}
}

// TestAbsTols checks per-component absolute tolerances: equal to AbsTol
// they give the same mesh bit for bit; a looser tolerance on one
// component takes fewer steps; bad values are errors.
func TestAbsTols(t *testing.T) {
	t.Parallel()
	f := lorenzField()
	pr := ode.Problem{Field: f, Y0: []float64{1, 0, 0, 2, 1, 0}, P: []float64{10, 28, 8.0 / 3}, T1: 1}
	base, err := ode.Record(pr, &ode.Settings{RelTol: 1e-3, AbsTol: 1e-2})
	if err != nil {
		t.Fatal(err)
	}
	same, err := ode.Record(pr, &ode.Settings{RelTol: 1e-3, AbsTol: 5, AbsTols: []float64{1e-2, 1e-2, 1e-2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(same.H) != len(base.H) {
		t.Fatalf("AbsTols equal to AbsTol: %d steps, want %d", len(same.H), len(base.H))
	}
	for i := range base.H {
		if math.Float64bits(base.H[i]) != math.Float64bits(same.H[i]) {
			t.Fatalf("AbsTols equal to AbsTol: H[%d] = %v, want %v", i, same.H[i], base.H[i])
		}
	}
	loose, err := ode.Record(pr, &ode.Settings{RelTol: 1e-3, AbsTol: 1e-2, AbsTols: []float64{1e-2, 1e-2, 1e3}})
	if err != nil {
		t.Fatal(err)
	}
	if loose.Stats.TotalAccepted() > base.Stats.TotalAccepted() {
		t.Errorf("a looser tolerance on y[2] took %d steps, more than %d", loose.Stats.TotalAccepted(), base.Stats.TotalAccepted())
	}
	for _, bad := range [][]float64{{1e-9, 1e-9}, {1e-9, 0, 1e-9}, {1e-9, math.NaN(), 1e-9}, {math.Inf(1), 1, 1}} {
		if _, err := ode.Record(pr, &ode.Settings{AbsTols: bad}); err == nil || !strings.Contains(err.Error(), "AbsTols") {
			t.Errorf("AbsTols %v: error %v, want one naming AbsTols", bad, err)
		}
	}
}

// TestLossChangesBetweenCalls passes one Solver losses that change from
// call to call, the same one again, another, and one whose closure reads
// a variable changed between calls (the same func value, another trace),
// and checks each call's loss and gradients bit for bit against a fresh
// Solver's: a solver reuses what it derived from a loss only where the
// loss traces to the same program.
func TestLossChangesBetweenCalls(t *testing.T) {
	t.Parallel()
	const n = 4
	f := lorenzSharedField()
	pr := ode.Problem{Field: f, N: n, T1: 0.3, Y0: make([]float64, 3*n), P: make([]float64, n), Shared: []float64{10, 8.0 / 3}}
	rng := rand.New(rand.NewPCG(3, 9))
	for i := range n {
		pr.Y0[3*i], pr.Y0[3*i+1], pr.Y0[3*i+2] = 1+rng.Float64(), rng.Float64(), rng.Float64()
		pr.P[i] = 20 + 8*rng.Float64()
	}
	set := &ode.Settings{RelTol: 1e-6, AbsTol: 1e-9}
	k := 0
	byRef := ode.Loss{Name: "byref", F: func(y, _, _ []tape.V) tape.V { return y[k].Square() }}
	sv, err := ode.NewSolver(f, set)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := sv.Record(&pr)
	if err != nil {
		t.Fatal(err)
	}
	var g ode.Gradient
	for step, c := range []struct {
		loss ode.Loss
		k    int
	}{
		{ode.Component(0), 0}, {ode.Component(0), 0}, {ode.Component(1), 0}, {ode.SumSquares(), 0},
		{byRef, 0}, {byRef, 2}, {byRef, 2}, {penaltyLoss(0.3, 0.01, 0.7, false), 0}, {ode.Component(1), 0},
	} {
		k = c.k
		if _, err := sv.Grad(&g, &pr, c.loss, m); err != nil {
			t.Fatal(err)
		}
		fresh, err := ode.NewSolver(f, set)
		if err != nil {
			t.Fatal(err)
		}
		want, err := fresh.Grad(nil, &pr, c.loss, m)
		if err != nil {
			t.Fatal(err)
		}
		if g.Loss != want.Loss || !slices.Equal(g.Y0, want.Y0) || !slices.Equal(g.P, want.P) || !slices.Equal(g.Shared, want.Shared) {
			t.Errorf("call %d (%s, k = %d): loss %v, want %v; gradients equal %t %t %t", step, c.loss.Name, k, g.Loss, want.Loss,
				slices.Equal(g.Y0, want.Y0), slices.Equal(g.P, want.P), slices.Equal(g.Shared, want.Shared))
		}
	}
}
