package ode_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Tests of the stability probe (Plan.Probe): gradient records of Tsit5
// and Vern7 on problems with a fast mode that the solution does not
// excite, whose steps follow the slow modes far outside the method's
// stability region (the controller's stiffness test, reading the stages,
// never fires), and on non-stiff problems, where the probe must change
// nothing. The tests switch the probe off (ode.SetProbeOff), so they do
// not run in parallel.

// unexcitedCase is an ensemble whose trajectories all have a fast mode
// the solution does not excite, with the closed form of the gradient of
// its loss with respect to y0.
type unexcitedCase struct {
	name string
	f    ode.Field
	loss ode.Loss
	n    int
	y0   []float64 // [n×Dim]
	p    []float64 // [n×Params]
	t1   float64
	// grad returns ∂L/∂y0 of trajectory i in closed form.
	grad func(i int) []float64
}

// pkField is the one-compartment pharmacokinetic model with first-order
// absorption: a' = −ka·a (the gut), c' = ka·a − ke·c; p = (ka, ke).
func pkField() ode.Field {
	return ode.Field{Name: "pk-probe", Dim: 2, Params: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0]), p[0].Mul(y[0]).Sub(p[1].Mul(y[1]))}
	}}
}

// lastComponent is the loss y(T1)[k].
func lastComponent(k int) ode.Loss {
	return ode.Loss{Name: fmt.Sprintf("y%d", k), F: func(y, _, _ []tape.V) tape.V { return y[k] }}
}

// unexcitedCases returns the cases, their parameters drawn from rng:
// the PK model with nothing in the gut (a0 = 0; absorption 200–1000,
// elimination 0.2–0.5), a linear system y0' = −λ·y0, y1' = κ·y0 − y1
// with λ = 1e3–1e5 and y0(0) = 0, and Robertson's kinetics at rest
// (y = (0, 0, s), an equilibrium whose linearization has the mode
// −(k1 + k3·s) ≈ −1e4·s).
func unexcitedCases(rng *rand.Rand) []unexcitedCase {
	const n = 6
	var cs []unexcitedCase

	pk := unexcitedCase{name: "pk", f: pkField(), loss: lastComponent(1), n: n, t1: 1 + 2*rng.Float64()}
	for range n {
		pk.y0 = append(pk.y0, 0, 0.5+rng.Float64())
		pk.p = append(pk.p, 200+800*rng.Float64(), 0.2+0.3*rng.Float64())
	}
	pk.grad = func(i int) []float64 {
		ka, ke, T := pk.p[2*i], pk.p[2*i+1], pk.t1
		return []float64{ka / (ke - ka) * (math.Exp(-ka*T) - math.Exp(-ke*T)), math.Exp(-ke * T)}
	}
	cs = append(cs, pk)

	lin := unexcitedCase{name: "linear", loss: lastComponent(1), n: n, t1: 2 + 3*rng.Float64(),
		f: ode.Field{Name: "lin-probe", Dim: 2, Params: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
			return []tape.V{p[0].Neg().Mul(y[0]), p[1].Mul(y[0]).Sub(y[1])}
		}}}
	for range n {
		lin.y0 = append(lin.y0, 0, 1+rng.Float64())
		lin.p = append(lin.p, math.Pow(10, 3+2*rng.Float64()), 1+rng.Float64())
	}
	lin.grad = func(i int) []float64 {
		l, k, T := lin.p[2*i], lin.p[2*i+1], lin.t1
		return []float64{k / (1 - l) * (math.Exp(-l*T) - math.Exp(-T)), math.Exp(-T)}
	}
	cs = append(cs, lin)

	rob := problems.Robertson()
	rest := unexcitedCase{name: "robertson-at-rest", f: rob.Field, n: n, t1: 1 + 99*rng.Float64(),
		loss: ode.Loss{Name: "y1+2y2", F: func(y, _, _ []tape.V) tape.V { return y[0].Add(y[1].MulC(2)) }}}
	for range n {
		rest.y0 = append(rest.y0, 0, 0, 0.5+rng.Float64())
		rest.p = append(rest.p, rob.P...)
	}
	rest.grad = func(i int) []float64 {
		// At the rest state J = [[−k1, k3·s, 0], [k1, −k3·s, 0], [0, 0, 0]],
		// J² = −σJ (σ = k1 + k3·s), so ∂y(T)/∂y0 = e^{JT} = I + (1 − e^{−σT})/σ·J.
		k1, k3, s := rest.p[3*i], rest.p[3*i+2], rest.y0[3*i+2]
		sigma := k1 + k3*s
		c := -math.Expm1(-sigma*rest.t1) / sigma
		J := [3][3]float64{{-k1, k3 * s, 0}, {k1, -k3 * s, 0}}
		w := [3]float64{1, 2, 0} // the loss's weights
		g := make([]float64, 3)
		for col := range g {
			g[col] = c * (w[0]*J[0][col] + w[1]*J[1][col])
			g[col] += w[col]
		}
		return g
	}
	cs = append(cs, rest)
	return cs
}

// relErr returns the largest relative error of got against want
// (relative to max(|want|, floor)).
func relErr(got, want []float64, floor float64) float64 {
	e := 0.0
	for k := range want {
		e = math.Max(e, math.Abs(got[k]-want[k])/math.Max(math.Abs(want[k]), floor))
	}
	if math.IsNaN(e) {
		return math.Inf(1)
	}
	return e
}

// TestProbeUnexcitedStiff checks that Grad refuses, with Status Stiff
// and a hint that names Rodas5P, every trajectory of Tsit5 and Vern7
// whose fast mode the solution does not excite (unexcitedCases), at
// three tolerances, although the controller's stiffness test does not
// fire on them (Solve's Solution.Stiff is false); that without the probe
// the gradient is the unstable discrete map's (off from the closed form
// by more than 100 times its size, or not finite: what the probe
// prevents); and that
// the fixes the hint names, Rodas5P and Method Auto (which the probe
// switches to Rodas5P before the first unstable step), give the closed
// form.
func TestProbeUnexcitedStiff(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 1))
	for _, c := range unexcitedCases(rng) {
		pr := &ode.Problem{Field: c.f, N: c.n, Y0: c.y0, P: c.p, T1: c.t1}
		d := c.f.Dim
		for _, tol := range []float64{1e-3, 1e-6, 1e-9} {
			for _, m := range []ode.Method{ode.Tsit5, ode.Vern7} {
				name := fmt.Sprintf("%s/%s/rtol=%.0e", c.name, m.Name(), tol)
				set := &ode.Settings{Method: m, RelTol: tol, AbsTol: tol * 1e-3}
				sv, err := ode.NewSolver(c.f, set)
				if err != nil {
					t.Fatal(err)
				}
				sol, err := sv.Solve(pr)
				if err != nil {
					t.Fatalf("%s: Solve: %v", name, err)
				}
				if slices.Contains(sol.Stiff, true) {
					t.Errorf("%s: the controller's stiffness test fired (%v): not a case of an unexcited mode", name, sol.Stiff)
				}
				_, err = sv.Grad(nil, pr, c.loss, nil)
				var te *ode.TrajectoryError
				if !errors.As(err, &te) || !errors.Is(err, ode.ErrStiff) || te.Status != ode.Stiff || te.Failed != c.n {
					t.Errorf("%s: Grad: err %v, want all %d trajectories stiff", name, err, c.n)
				} else if msg := err.Error(); !strings.Contains(msg, "Rodas5P") || !strings.Contains(msg, "does not excite") {
					t.Errorf("%s: the message names neither the fix nor the cause: %s", name, msg)
				}
				g, fails, err := sv.GradPartial(context.Background(), nil, pr, c.loss, nil, nil)
				if err != nil || len(fails) != c.n {
					t.Errorf("%s: GradPartial: %d failures, err %v; want %d", name, len(fails), err, c.n)
				} else {
					for i, f := range fails {
						if f.Index != i || f.Status != ode.Stiff || g.Solution.Status[i] != ode.Stiff {
							t.Errorf("%s: GradPartial's failure %d: trajectory %d, status %v", name, i, f.Index, f.Status)
						}
					}
				}

				// Without the probe: the unstable map's derivative.
				restore := ode.SetProbeOff(true)
				g, err = sv.Grad(nil, pr, c.loss, nil)
				restore()
				if err != nil {
					// The amplification overflowed: a non-finite gradient,
					// an error that names the field, not the method.
					if !strings.Contains(err.Error(), "NaN") && !strings.Contains(err.Error(), "Inf") {
						t.Errorf("%s: Grad without the probe: %v", name, err)
					}
					continue
				}
				for i := range c.n {
					want := c.grad(i)
					if e := relErr(g.Y0[i*d:(i+1)*d], want, 1e-3); e < 100 {
						t.Errorf("%s: trajectory %d: without the probe ∂L/∂y0 = %.4g, closed form %.4g (relative error %.2g): the probe refused a gradient that was right",
							name, i, g.Y0[i*d:(i+1)*d], want, e)
					}
				}
			}
		}
		// The fixes.
		for _, m := range []ode.Method{ode.Rodas5P, ode.Auto} {
			g, err := ode.Grad(nil, *pr, c.loss, nil, &ode.Settings{Method: m, RelTol: 1e-9, AbsTol: 1e-12})
			if err != nil {
				t.Errorf("%s/%s: %v", c.name, m.Name(), err)
				continue
			}
			for i := range c.n {
				want := c.grad(i)
				if e := relErr(g.Y0[i*d:(i+1)*d], want, 1e-3); e > 1e-5 {
					t.Errorf("%s/%s: trajectory %d: ∂L/∂y0 = %.10g, closed form %.10g (relative error %.2g)", c.name, m.Name(), i, g.Y0[i*d:(i+1)*d], want, e)
				}
			}
		}
	}
}

// nonStiffCase is a non-stiff ensemble on which the probe must change
// nothing.
type nonStiffCase struct {
	name   string
	f      ode.Field
	y0, p  []float64 // one row each, perturbed per trajectory
	shared []float64
	t1     float64
	// spread is the relative perturbation of y0 and p (1e-3 if 0).
	spread float64
}

// nonStiffCases returns the non-stiff problems of the suite: Lorenz over
// a chaotic span, Kepler over 16 orbits, the Arenstorf orbit (a close
// approach to the Moon, where ∂f/∂y is large), a neural ODE (a 2-16-16-2
// tanh MLP with shared weights), Lotka–Volterra and Van der Pol at
// μ = 1, 3 and 10.
func nonStiffCases() []nonStiffCase {
	lor, kep, vdp := problems.Lorenz(), problems.Kepler(), problems.VanDerPol()
	const mu = 0.012277471 // Arenstorf's Moon-to-total mass ratio
	arenstorf := ode.Field{Name: "arenstorf", Dim: 4, F: func(_ tape.V, y, _ []tape.V) []tape.V {
		x, yy, vx, vy := y[0], y[1], y[2], y[3]
		c := func(v float64) tape.V { return x.Const(v) }
		r1 := x.Add(c(mu)).Square().Add(yy.Square())
		r1 = r1.Mul(r1.Sqrt())
		r2 := x.Sub(c(1 - mu)).Square().Add(yy.Square())
		r2 = r2.Mul(r2.Sqrt())
		ax := x.Add(vy.MulC(2)).Sub(c(1 - mu).Mul(x.Add(c(mu))).Div(r1)).Sub(c(mu).Mul(x.Sub(c(1 - mu))).Div(r2))
		ay := yy.Sub(vx.MulC(2)).Sub(c(1 - mu).Mul(yy).Div(r1)).Sub(c(mu).Mul(yy).Div(r2))
		return []tape.V{vx, vy, ax, ay}
	}}
	mlp := nn.NewMLP([]int{2, 16, 16, 2}, nn.Tanh, nn.Identity)
	neural := ode.Field{Name: "neural", Dim: 2, Shared: mlp.NumParams(), F: func(_ tape.V, y, p []tape.V) []tape.V {
		return mlp.Apply(p, y)
	}}
	lv := ode.Field{Name: "lotka-volterra", Dim: 2, Params: 4, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Sub(p[1].Mul(y[0]).Mul(y[1])), p[3].Mul(y[0]).Mul(y[1]).Sub(p[2].Mul(y[1]))}
	}}
	cs := []nonStiffCase{
		{name: "lorenz", f: lor.Field, y0: lor.Y0, p: lor.P, t1: 60},
		{name: "kepler", f: kep.Field, y0: kep.Y0, p: kep.P, t1: 32 * math.Pi},
		{name: "arenstorf", f: arenstorf, y0: []float64{0.994, 0, 0, -2.00158510637908252240537862224}, t1: 17.0652165601579625588917206249,
			spread: 1e-7}, // (a larger one sends some orbits into the Moon)
		{name: "neural", f: neural, y0: []float64{1, -0.5}, shared: mlp.Init(nil, rand.New(rand.NewPCG(53, 2))), t1: 10},
		{name: "lotka-volterra", f: lv, y0: []float64{1, 1}, p: []float64{1.5, 1, 3, 1}, t1: 30},
	}
	for _, m := range []float64{1, 3, 10} {
		cs = append(cs, nonStiffCase{name: fmt.Sprintf("vdp-mu%g", m), f: vdp.Field, y0: []float64{2, 0}, p: []float64{m}, t1: 10})
	}
	return cs
}

// TestProbeNonStiff checks that on the non-stiff problems of the suite
// (nonStiffCases; four trajectories each, their initial states and
// parameters perturbed by up to 1e-3 relative (Arenstorf's 1e-7),
// seeded), with Tsit5 and
// Vern7 at RelTol 1e-3, 1e-6 and 1e-9, the probe marks no trajectory
// and changes nothing: Grad succeeds, and its loss, gradients, mesh and
// solution are those without the probe, bit for bit.
func TestProbeNonStiff(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 3))
	const n = 4
	for _, c := range nonStiffCases() {
		var y0, p []float64
		spread := c.spread
		if spread == 0 {
			spread = 1e-3
		}
		for range n {
			for _, v := range c.y0 {
				y0 = append(y0, v*(1+spread*(2*rng.Float64()-1)))
			}
			for _, v := range c.p {
				p = append(p, v*(1+spread*(2*rng.Float64()-1)))
			}
		}
		pr := &ode.Problem{Field: c.f, N: n, Y0: y0, P: p, Shared: c.shared, T1: c.t1}
		for _, tol := range []float64{1e-3, 1e-6, 1e-9} {
			for _, m := range []ode.Method{ode.Tsit5, ode.Vern7} {
				name := fmt.Sprintf("%s/%s/rtol=%.0e", c.name, m.Name(), tol)
				sv, err := ode.NewSolver(c.f, &ode.Settings{Method: m, RelTol: tol, AbsTol: tol * 1e-3, MaxSteps: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				loss := ode.SumSquares()
				g, err := sv.Grad(nil, pr, loss, nil)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				restore := ode.SetProbeOff(true)
				g0, err := sv.Grad(nil, pr, loss, nil)
				restore()
				if err != nil {
					t.Fatalf("%s: without the probe: %v", name, err)
				}
				same := g.Loss == g0.Loss && slices.Equal(g.Y0, g0.Y0) && slices.Equal(g.P, g0.P) && slices.Equal(g.Shared, g0.Shared) &&
					slices.Equal(g.Mesh.H, g0.Mesh.H) && slices.Equal(g.Solution.Y, g0.Solution.Y) && slices.Equal(g.Solution.Stiff, g0.Solution.Stiff)
				if !same {
					t.Errorf("%s: the gradient with the probe differs from the one without it", name)
				}
				if slices.Contains(g.Solution.Stiff, true) {
					t.Errorf("%s: stiff trajectories %v", name, g.Solution.Stiff)
				}
			}
		}
	}
}

// TestProbeGradientsLeftRight checks the gradients of the trajectories
// the probe does not mark, against closed forms and finite differences:
// in a PK ensemble that alternates unexcited stiff trajectories (a0 = 0,
// absorption 200–1000) with non-stiff ones (a0 > 0, absorption 0.5–3),
// GradPartial with Tsit5 and Vern7 leaves out exactly the stiff ones and
// gives the others' ∂c(T)/∂(a0, c0, ka, ke) within 1e-6 of the closed
// form (central differences of it for ka and ke); and on Van der Pol at
// μ = 3, Grad with Tsit5 and Vern7 at RelTol 1e-10 agrees with central
// differences of Vern7 solves at RelTol 1e-13 within 1e-5.
func TestProbeGradientsLeftRight(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 4))
	const n, T = 8, 2.0
	var y0, p []float64
	for i := range n {
		if i%2 == 0 {
			y0 = append(y0, 0, 0.5+rng.Float64())
			p = append(p, 200+800*rng.Float64(), 0.2+0.3*rng.Float64())
		} else {
			y0 = append(y0, 0.5+rng.Float64(), 0.5+rng.Float64())
			p = append(p, 0.5+2.5*rng.Float64(), 0.2+0.3*rng.Float64())
		}
	}
	cT := func(a0, c0, ka, ke float64) float64 {
		return c0*math.Exp(-ke*T) + a0*ka/(ke-ka)*(math.Exp(-ka*T)-math.Exp(-ke*T))
	}
	f := pkField()
	pr := &ode.Problem{Field: f, N: n, Y0: y0, P: p, T1: T}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7} {
		sv, err := ode.NewSolver(f, &ode.Settings{Method: m, RelTol: 1e-9, AbsTol: 1e-12})
		if err != nil {
			t.Fatal(err)
		}
		g, fails, err := sv.GradPartial(context.Background(), nil, pr, lastComponent(1), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var left []int
		for _, e := range fails {
			left = append(left, e.Index)
			if e.Status != ode.Stiff {
				t.Errorf("%s: trajectory %d: %v", m.Name(), e.Index, e)
			}
		}
		if want := []int{0, 2, 4, 6}; !slices.Equal(left, want) {
			t.Errorf("%s: left out %v, want %v", m.Name(), left, want)
		}
		for i := 1; i < n; i += 2 {
			a0, c0, ka, ke := y0[2*i], y0[2*i+1], p[2*i], p[2*i+1]
			dk, de := 1e-6*ka, 1e-6*ke
			want := []float64{
				ka / (ke - ka) * (math.Exp(-ka*T) - math.Exp(-ke*T)),
				math.Exp(-ke * T),
				(cT(a0, c0, ka+dk, ke) - cT(a0, c0, ka-dk, ke)) / (2 * dk),
				(cT(a0, c0, ka, ke+de) - cT(a0, c0, ka, ke-de)) / (2 * de),
			}
			got := []float64{g.Y0[2*i], g.Y0[2*i+1], g.P[2*i], g.P[2*i+1]}
			if e := relErr(got, want, 1e-3); e > 1e-6 {
				t.Errorf("%s: trajectory %d: ∂c(T)/∂(a0, c0, ka, ke) = %.10g, closed form %.10g (relative error %.2g)", m.Name(), i, got, want, e)
			}
		}
	}

	vdp := problems.VanDerPol()
	loss := ode.Loss{Name: "x+v/10", F: func(y, _, _ []tape.V) tape.V { return y[0].Add(y[1].MulC(0.1)) }}
	const tv = 3.0
	in := []float64{2, 0, 3} // x0, v0, μ
	ref, err := ode.NewSolver(vdp.Field, &ode.Settings{Method: ode.Vern7, RelTol: 1e-13, AbsTol: 1e-15, MaxSteps: 1 << 22})
	if err != nil {
		t.Fatal(err)
	}
	at := func(x []float64) float64 {
		sol, err := ref.Solve(&ode.Problem{Field: vdp.Field, N: 1, Y0: x[:2], P: x[2:], T1: tv})
		if err != nil {
			t.Fatal(err)
		}
		return sol.Y[0] + 0.1*sol.Y[1]
	}
	fd := make([]float64, 3)
	for k := range fd {
		const h = 1e-5
		xp, xm := slices.Clone(in), slices.Clone(in)
		xp[k] += h
		xm[k] -= h
		fd[k] = (at(xp) - at(xm)) / (2 * h)
	}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7} {
		g, err := ode.Grad(nil, ode.Problem{Field: vdp.Field, N: 1, Y0: in[:2], P: in[2:], T1: tv}, loss, nil,
			&ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, MaxSteps: 1 << 20})
		if err != nil {
			t.Fatalf("vdp %s: %v", m.Name(), err)
		}
		got := []float64{g.Y0[0], g.Y0[1], g.P[0]}
		if e := relErr(got, fd, 1e-2); e > 1e-5 {
			t.Errorf("vdp %s: gradient %.10g, central differences %.10g (relative error %.2g)", m.Name(), got, fd, e)
		}
	}
}

// TestProbeAutoPollution checks Method Auto's gradient on POLL (the
// pollution problem, 20 species, most of them 0 at T0: fast modes the
// first steps do not excite), at RelTol 1e-8, against Rodas5P's at
// 1e-11: with the probe, which switches it to Rodas5P at its first step,
// within 1e-4 (ℓ∞ of ∂L/∂y0, relative to its largest entry; 4.0e-6
// measured); without, Tsit5's first steps outside the stability region
// left it 3.2e-2 off (22 Tsit5 steps before the switch), more than 1e-3.
func TestProbeAutoPollution(t *testing.T) {
	pb := problems.Pollution()
	pr := &ode.Problem{Field: pb.Field, N: 1, Y0: pb.Y0, P: pb.P, Shared: pb.Shared, T1: pb.T1}
	ref, err := ode.Grad(nil, *pr, ode.SumSquares(), nil, &ode.Settings{Method: ode.Rodas5P, RelTol: 1e-11, AbsTol: 1e-14, MaxSteps: 1 << 22})
	if err != nil {
		t.Fatal(err)
	}
	errOf := func(g *ode.Gradient) float64 {
		e, s := 0.0, 0.0
		for k := range ref.Y0 {
			e, s = math.Max(e, math.Abs(g.Y0[k]-ref.Y0[k])), math.Max(s, math.Abs(ref.Y0[k]))
		}
		return e / s
	}
	sv, err := ode.NewSolver(pb.Field, &ode.Settings{Method: ode.Auto, RelTol: 1e-8, AbsTol: 1e-11, MaxSteps: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	g, err := sv.Grad(nil, pr, ode.SumSquares(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restore := ode.SetProbeOff(true)
	g0, err := sv.Grad(nil, pr, ode.SumSquares(), nil)
	restore()
	if err != nil {
		t.Fatal(err)
	}
	if e, e0 := errOf(g), errOf(g0); !(e < 1e-4) || !(e0 > 1e-3) {
		t.Errorf("Auto's ∂L/∂y0 off by %.2g with the probe (want < 1e-4), %.2g without (want > 1e-3: else the test checks nothing); switched after %v steps",
			e, e0, g.Solution.Switch)
	} else {
		t.Logf("Auto's ∂L/∂y0 off by %.2g with the probe (switched after %v Tsit5 steps), %.2g without (after %v)", e, g.Solution.Switch, e0, g0.Solution.Switch)
	}
}
