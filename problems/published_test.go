package problems

import (
	"fmt"
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Published test problems against their published reference solutions,
// on the CPU engine: the explicit methods on the non-stiff problems, the
// Rosenbrock methods on the stiff ones. TestPublishedSolutions checks the
// error of y(T1) against the reference; TestPublishedGradients checks the
// gradient of a loss with respect to one parameter (or initial value)
// against central differences of solves at tight tolerance, the
// derivative of the exact solution, not of the discrete one.

// Arenstorf orbit (Hairer, Nørsett & Wanner I, §II.0, eq. (0.1)): the
// restricted three-body problem of a satellite in the rotating frame of
// the Earth and Moon, mass ratio μ, state (y1, y2, y1', y2'):
//
//	y1'' = y1 + 2y2' − μ'(y1 + μ)/D1 − μ(y1 − μ')/D2
//	y2'' = y2 − 2y1' − μ'y2/D1 − μy2/D2
//
// with μ' = 1 − μ, D1 = ((y1 + μ)² + y2²)^{3/2}, D2 = ((y1 − μ')² +
// y2²)^{3/2}. From arenstorfY0 with μ = 0.012277471 the orbit is periodic
// with period arenstorfT (both as printed there, to 30 digits).
var (
	arenstorfY0 = []float64{0.994, 0, 0, -2.00158510637908252240537862224}
	arenstorfT  = 17.0652165601579625588917206249
	arenstorfMu = 0.012277471
)

func arenstorf() Problem {
	return Problem{
		Name: "arenstorf",
		Field: ode.Field{Name: "arenstorf", Dim: 4, Params: 1,
			F: func(_ tape.V, y, p []tape.V) []tape.V {
				mu := p[0]
				mup := mu.Const(1).Sub(mu)
				a, b := y[0].Add(mu), y[0].Sub(mup)
				y2 := y[1].Square()
				r1, r2 := a.Square().Add(y2), b.Square().Add(y2)
				d1, d2 := r1.Mul(r1.Sqrt()), r2.Mul(r2.Sqrt())
				return []tape.V{
					y[2],
					y[3],
					y[0].Add(y[3].MulC(2)).Sub(mup.Mul(a).Div(d1)).Sub(mu.Mul(b).Div(d2)),
					y[1].Sub(y[2].MulC(2)).Sub(mup.Mul(y[1]).Div(d1)).Sub(mu.Mul(y[1]).Div(d2)),
				}
			}},
		Y0: append([]float64(nil), arenstorfY0...),
		P:  []float64{arenstorfMu},
		T1: arenstorfT,
	}
}

// arenstorfRef is the Arenstorf field in plain Go, as printed in Hairer,
// Nørsett & Wanner I, eq. (0.1), with p = (μ).
func arenstorfRef(y, p, _ []float64) []float64 {
	mu := p[0]
	mup := 1 - mu
	d1 := math.Pow((y[0]+mu)*(y[0]+mu)+y[1]*y[1], 1.5)
	d2 := math.Pow((y[0]-mup)*(y[0]-mup)+y[1]*y[1], 1.5)
	return []float64{
		y[2],
		y[3],
		y[0] + 2*y[3] - mup*(y[0]+mu)/d1 - mu*(y[0]-mup)/d2,
		y[1] - 2*y[2] - mup*y[1]/d1 - mu*y[1]/d2,
	}
}

// Oregonator (Field & Noyes 1974; Hairer & Wanner II, §IV.1, problem
// OREGO), the Belousov–Zhabotinskii reaction, with p = (s, w, q):
//
//	y1' = s·(y2 + y1·(1 − q·y1 − y2))
//	y2' = (y3 − (1 + y1)·y2)/s
//	y3' = w·(y1 − y3)
//
// s = 77.27, w = 0.161, q = 8.375e-6, y0 = (1, 2, 3), t ∈ [0, 360]: stiff
// relaxation oscillations whose y2 spans 1 to 1e5. oregoRef is y(360) as
// printed with Hairer's OREGO driver; RADAU5 of internal/refode at rtol
// 1e-13 reproduces it to 1.3e-13.
var oregoRef = []float64{0.1000814870318523e+01, 0.1228178521549917e+04, 0.1320554942846706e+03}

func oregonator() Problem {
	return Problem{
		Name: "oregonator",
		Field: ode.Field{Name: "oregonator", Dim: 3, Params: 3, Stiff: true,
			F: func(_ tape.V, y, p []tape.V) []tape.V {
				s, w, q := p[0], p[1], p[2]
				return []tape.V{
					s.Mul(y[1].Add(y[0].Mul(y[0].Const(1).Sub(q.Mul(y[0])).Sub(y[1])))),
					y[2].Sub(y[0].AddC(1).Mul(y[1])).Div(s),
					w.Mul(y[0].Sub(y[2])),
				}
			}},
		Y0: []float64{1, 2, 3},
		P:  []float64{77.27, 0.161, 8.375e-6},
		T1: 360,
	}
}

// publishedRun is one method at one tolerance.
type publishedRun struct {
	m    ode.Method
	rtol float64
	// bound is the largest error accepted, in units of rtol (solutions),
	// or the largest relative difference from the central differences
	// (gradients).
	bound float64
	short bool // also run with -short
}

// publishedCase is a problem with its published y(T1).
type publishedCase struct {
	name   string
	pr     Problem // Y0, P, T1 as published
	ref    []float64
	source string
	// floor: the error of component i is |y_i − ref_i|/max(|ref_i|,
	// floor) (0: componentwise relative, as the test set's scd).
	floor float64
	atol  func(rtol float64) float64
	runs  []publishedRun

	// The gradient of loss (lossF in plain Go) with respect to
	// P[k] (Y0[k] if inY0), against a fourth-order central difference of
	// fdMethod's solves at fdRtol with step fdRel·|x|.
	inY0      bool
	k         int
	loss      ode.Loss
	lossF     func(y []float64) float64
	fdMethod  ode.Method
	fdRtol    float64
	fdRel     float64
	gradRuns  []publishedRun
	gradNotes string
}

func sumSquares(y []float64) float64 {
	s := 0.0
	for _, v := range y {
		s += v * v
	}
	return s
}

func publishedCases() []publishedCase {
	vdp := StiffVanDerPol(1e6)
	rob := Robertson()
	rob.T1 = 1e11
	ar := arenstorf()
	same := func(r float64) float64 { return r }
	pure := func(float64) float64 { return 1e-30 }
	return []publishedCase{
		// Pleiades errs by 8–100 tolerances (relative to max(|y_i|, 1));
		// close encounters of the bodies amplify the local errors.
		{name: "pleiades", pr: Pleiades(), ref: PleiadesRef[:], source: "plei.f, PSIDE at rtol = atol = 1e-16",
			floor: 1, atol: same,
			runs: []publishedRun{{ode.Tsit5, 1e-8, 300, true}, {ode.Tsit5, 1e-10, 300, false},
				{ode.Vern7, 1e-8, 300, false}, {ode.Vern7, 1e-10, 300, true}},
			k: 6, loss: ode.SumSquares(), lossF: sumSquares, fdMethod: ode.Vern7, fdRtol: 1e-12, fdRel: 1e-5,
			gradRuns: []publishedRun{{ode.Tsit5, 1e-10, 1e-5, false}, {ode.Vern7, 1e-10, 1e-5, true}}},
		// The Arenstorf orbit amplifies a perturbation some 4e5-fold over a
		// period (one ulp of y0[3] moves y(T) by 1.8e-10), so its global
		// error is thousands of tolerances for any method (Hairer's DOP853
		// of internal/refode: 8.6e-7 at rtol = atol = 1e-10, 8.6e3·rtol;
		// Tsit5 and Vern7 here 250–9400·rtol; Vern7 at 1e-12 3,000·rtol), and
		// float64 rounding alone leaves about 1e-9 (DOP853 at 1e-12 and
		// 1e-13).
		{name: "arenstorf", pr: ar, ref: arenstorfY0, source: "periodic: y(T) = y0 (HNW I, II.0)",
			floor: 1, atol: same,
			runs: []publishedRun{{ode.Tsit5, 1e-8, 2e4, false}, {ode.Tsit5, 1e-10, 2e4, true},
				{ode.Vern7, 1e-8, 2e4, true}, {ode.Vern7, 1e-10, 2e4, false}, {ode.Vern7, 1e-12, 2e4, false}},
			k: 0, loss: ode.SumSquares(), lossF: sumSquares, fdMethod: ode.Vern7, fdRtol: 1e-12, fdRel: 1e-7,
			gradRuns: []publishedRun{{ode.Tsit5, 1e-10, 1e-5, true}, {ode.Vern7, 1e-10, 1e-5, false}}},
		// HIRES has no parameters: the gradient is with respect to y8(0).
		{name: "hires", pr: HIRES(), ref: HIRESRef[:], source: "hires.f, RADAU5 at rtol = atol = 1.1e-18",
			atol: func(r float64) float64 { return 1e-4 * r },
			runs: []publishedRun{{ode.Rodas5P, 1e-8, 10, true}, {ode.Rosenbrock23, 1e-6, 20, true}},
			inY0: true, k: 7, loss: ode.SumSquares(), lossF: sumSquares, fdMethod: ode.Rodas5P, fdRtol: 1e-12, fdRel: 1e-4,
			gradRuns: []publishedRun{{ode.Rodas5P, 1e-8, 1e-5, true}, {ode.Rosenbrock23, 1e-8, 1e-5, false}}},
		// POLL at a pure relative tolerance: its species span 4e-18 to 0.3.
		{name: "pollution", pr: Pollution(), ref: PollutionRef[:], source: "pollu.f, RADAU5 at rtol = atol = 1.1e-18",
			atol: pure,
			runs: []publishedRun{{ode.Rodas5P, 1e-8, 10, true}, {ode.Rosenbrock23, 1e-6, 10, false}},
			k:    0, loss: ode.SumSquares(), lossF: sumSquares, fdMethod: ode.Rodas5P, fdRtol: 1e-12, fdRel: 1e-4,
			gradRuns: []publishedRun{{ode.Rodas5P, 1e-8, 1e-5, true}, {ode.Rosenbrock23, 1e-6, 1e-5, false}}},
		// VDPOL: ε = 1e-6, i.e. μ = 1e6 (StiffVanDerPol's scaling is the
		// test set's), y0 = (2, 0), t ∈ [0, 2]: two fast transitions.
		{name: "vdpol", pr: vdp, ref: []float64{0.1706167732170483e+01, -0.8928097010247975e+00},
			source: "vdpol.f, RADAU at rtol = atol = h0 = 1.1e-18",
			atol:   func(r float64) float64 { return 1e-4 * r },
			runs:   []publishedRun{{ode.Rodas5P, 1e-8, 10, true}, {ode.Rosenbrock23, 1e-6, 100, false}},
			inY0:   true, k: 0, loss: ode.SumSquares(), lossF: sumSquares, fdMethod: ode.Rodas5P, fdRtol: 1e-12, fdRel: 1e-4,
			gradRuns: []publishedRun{{ode.Rodas5P, 1e-11, 1e-5, true}},
			gradNotes: "the gradient through the fast transitions converges slowly: Rodas5P errs by 1.5 (rtol 1e-6), " +
				"3.4e-3 (1e-8), 5e-6 (1e-11); Rosenbrock23 by 385×, 3.2× (1e-8) and 0.10 (1e-10)"},
		// OREGO: Rosenbrock23 (second order) errs by 370 tolerances at
		// 1e-6 and 1,100 at 1e-8 over the 360 time units of relaxation
		// oscillations; Rodas5P and Auto by 0.16–0.4.
		{name: "oregonator", pr: oregonator(), ref: oregoRef, source: "Hairer's OREGO driver; RADAU5 of internal/refode at rtol 1e-13",
			atol: func(r float64) float64 { return 1e-4 * r },
			runs: []publishedRun{{ode.Rodas5P, 1e-8, 10, true}, {ode.Auto, 1e-8, 10, false}, {ode.Rosenbrock23, 1e-6, 1000, false}},
			k:    1, loss: ode.SumSquares(), lossF: sumSquares, fdMethod: ode.Rodas5P, fdRtol: 1e-12, fdRel: 1e-5,
			gradRuns: []publishedRun{{ode.Rodas5P, 1e-10, 1e-5, true}}},
		// CHEMAKZO (more_test.go) as an ODE on y1…y5, y6 = Ks·y1·y4 (checked
		// by TestChemAkzo). Measured: Rodas5P errs by 0.16 tolerances at
		// 1e-6 and 0.07 at 1e-8, Rosenbrock23 by 2.5 at 1e-4 and 9.5 at
		// 1e-6, Tsit5 by 1.1 at 1e-8 (the problem is only mildly stiff),
		// Vern7 by 0.04 at 1e-10.
		{name: "chemakzo", pr: chemAkzo(), ref: chemAkzoRef[:5], source: "chemakzo.f, PSIDE at rtol = atol = 1e-19",
			atol: func(r float64) float64 { return 1e-4 * r },
			runs: []publishedRun{{ode.Rodas5P, 1e-6, 2, true}, {ode.Rodas5P, 1e-8, 2, false},
				{ode.Rosenbrock23, 1e-4, 15, true}, {ode.Rosenbrock23, 1e-6, 50, false},
				{ode.Tsit5, 1e-8, 5, false}, {ode.Vern7, 1e-10, 1, true}},
			k: 0, loss: ode.SumSquares(), lossF: sumSquares, fdMethod: ode.Rodas5P, fdRtol: 1e-12, fdRel: 1e-4,
			gradRuns: []publishedRun{{ode.Rodas5P, 1e-8, 1e-5, true}, {ode.Rosenbrock23, 1e-6, 5e-5, false}, {ode.Vern7, 1e-10, 1e-5, false}}},
		// ROBER to t = 1e11 at a pure relative tolerance (y2 falls to 8e-14).
		// The loss is y1(T) = 2e-8, whose central differences are not
		// swamped by the rounding of a component near 1.
		{name: "robertson", pr: rob, ref: refode.RobertsonRef1e11[:], source: "rober.f (Bari test set)",
			atol: pure,
			runs: []publishedRun{{ode.Rodas5P, 1e-8, 10, true}, {ode.Rosenbrock23, 1e-6, 100, false}},
			k:    2, loss: ode.Component(0), lossF: func(y []float64) float64 { return y[0] },
			fdMethod: ode.Rodas5P, fdRtol: 1e-12, fdRel: 1e-3,
			gradRuns: []publishedRun{{ode.Rodas5P, 1e-8, 1e-5, true}, {ode.Rosenbrock23, 1e-8, 1e-5, false}}},
	}
}

// publishedError returns max_i |y_i − ref_i|/max(|ref_i|, floor).
func publishedError(y, ref []float64, floor float64) float64 {
	e := 0.0
	for i, r := range ref {
		e = math.Max(e, math.Abs(y[i]-r)/math.Max(math.Abs(r), floor))
	}
	return e
}

// TestPublishedSolutions solves each published problem with each of its
// methods and checks y(T1) against the published reference: error (see
// publishedCase.floor) at most bound·rtol. Pleiades and Arenstorf with
// Tsit5 and Vern7; HIRES, POLL, VDPOL (μ = 1e6) and ROBER (t = 1e11) with
// Rodas5P and Rosenbrock23; CHEMAKZO with all four. Rosenbrock23 is second order: its global
// error grows as rtol^{2/3}, 8 tolerances on HIRES at 1e-6 and 35 at 1e-8.
func TestPublishedSolutions(t *testing.T) {
	t.Parallel()
	for _, c := range publishedCases() {
		for _, r := range c.runs {
			name := fmt.Sprintf("%s/%s/%g", c.name, r.m.Name(), r.rtol)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				if testing.Short() && !r.short {
					t.Skip("-short")
				}
				sol, err := ode.Solve(ode.Problem{Field: c.pr.Field, Y0: c.pr.Y0, P: c.pr.P, T0: c.pr.T0, T1: c.pr.T1},
					&ode.Settings{Method: r.m, RelTol: r.rtol, AbsTol: c.atol(r.rtol)})
				if err != nil {
					t.Fatal(err)
				}
				e := publishedError(sol.Y, c.ref, c.floor)
				t.Logf("%s: %d steps (%d rejected), error %.2e = %.3g·rtol against %s",
					name, sol.Stats.Accepted[0], sol.Stats.Rejected[0], e, e/r.rtol, c.source)
				if !(e <= r.bound*r.rtol) {
					t.Errorf("%s: error of y(%v) %.3g = %.3g·rtol against the published reference, want ≤ %g·rtol\n got %v\nwant %v",
						name, c.pr.T1, e, e/r.rtol, r.bound, sol.Y, c.ref)
				}
			})
		}
	}
}

// TestPublishedGradients checks, on each published problem, the gradient
// of its loss with respect to one parameter or initial value (Pleiades:
// m7; Arenstorf: μ; HIRES: y8(0); POLL: k1; VDPOL: x(0); CHEMAKZO: k1;
// ROBER at t = 1e11: ∂y1/∂k3) against the fourth-order central difference of solves
// at tight tolerance (fdRtol 1e-12), whose own error is checked by a
// second difference at a step ten times larger (agreement to 1e-6).
// Grad's gradient is the exact derivative of the discrete solution on its
// mesh; this checks that it is also within bound (relative) of the
// derivative of the exact solution, at the tolerance given.
func TestPublishedGradients(t *testing.T) {
	t.Parallel()
	for _, c := range publishedCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if testing.Short() {
				t.Skip("-short: central differences of four solves at rtol 1e-12")
			}
			fd := publishedFD(t, c, c.fdRel)
			fd10 := publishedFD(t, c, 10*c.fdRel)
			if e := math.Abs(fd10-fd) / math.Abs(fd); !(e <= 1e-6) {
				t.Fatalf("central differences with steps %g and %g: %.12g and %.12g (relative difference %.2g): the reference is not converged",
					c.fdRel, 10*c.fdRel, fd, fd10, e)
			}
			what := fmt.Sprintf("∂L/∂P[%d]", c.k)
			if c.inY0 {
				what = fmt.Sprintf("∂L/∂Y0[%d]", c.k)
			}
			for _, r := range c.gradRuns {
				g, err := ode.Grad(nil, ode.Problem{Field: c.pr.Field, Y0: c.pr.Y0, P: c.pr.P, T0: c.pr.T0, T1: c.pr.T1},
					c.loss, nil, &ode.Settings{Method: r.m, RelTol: r.rtol, AbsTol: c.atol(r.rtol)})
				if err != nil {
					t.Fatal(err)
				}
				got := g.P
				if c.inY0 {
					got = g.Y0
				}
				e := math.Abs(got[c.k]-fd) / math.Abs(fd)
				t.Logf("%s %s rtol %g: %s = %.12g, central difference %.12g, relative difference %.2g (%d steps)",
					c.name, r.m.Name(), r.rtol, what, got[c.k], fd, e, g.Mesh.Stats.Accepted[0])
				if !(e <= r.bound) {
					t.Errorf("%s %s rtol %g: %s = %.12g, central difference of solves at rtol %g %.12g: relative difference %.2g, want ≤ %g",
						c.name, r.m.Name(), r.rtol, what, got[c.k], c.fdRtol, fd, e, r.bound)
				}
			}
			if c.gradNotes != "" {
				t.Logf("%s: %s", c.name, c.gradNotes)
			}
		})
	}
}

// publishedFD returns the fourth-order central difference
// (−L(x+2h) + 8L(x+h) − 8L(x−h) + L(x−2h))/(12h), h = rel·|x| (x ≠ 0),
// of c's loss with respect to its parameter x, from one solve of the four
// trajectories with c.fdMethod at c.fdRtol (each on its own adaptive
// mesh).
func publishedFD(t *testing.T, c publishedCase, rel float64) float64 {
	t.Helper()
	d, np := c.pr.Field.Dim, c.pr.Field.Params
	y0, p := c.pr.Ensemble(4)
	x0 := c.pr.P
	if c.inY0 {
		x0 = c.pr.Y0
	}
	h := rel * math.Abs(x0[c.k])
	for i, s := range []float64{2, 1, -1, -2} {
		if c.inY0 {
			y0[i*d+c.k] = x0[c.k] + s*h
		} else {
			p[i*np+c.k] = x0[c.k] + s*h
		}
	}
	sol, err := ode.Solve(ode.Problem{Field: c.pr.Field, N: 4, Y0: y0, P: p, T0: c.pr.T0, T1: c.pr.T1},
		&ode.Settings{Method: c.fdMethod, RelTol: c.fdRtol, AbsTol: c.atol(c.fdRtol)})
	if err != nil {
		t.Fatal(err)
	}
	l := func(i int) float64 { return c.lossF(sol.Y[i*d : (i+1)*d]) }
	return (-l(0) + 8*l(1) - 8*l(2) + l(3)) / (12 * h)
}

// TestPleiades checks PleiadesY0 and the symmetry of the traced field:
// the total momentum Σ m_i·v_i is conserved, so Σ m_i·a_i = 0 at any
// state and masses, and the arenstorf field of these tests against its
// plain-Go transcription.
func TestPleiades(t *testing.T) {
	t.Parallel()
	pr := Pleiades()
	// plei.f's init: x, y, x', y' of the seven bodies.
	want := []float64{3, 3, -1, -3, 2, -2, 2, 3, -3, 2, 0, 0, -4, 4, 0, 0, 0, 0, 0, 1.75, -1.5, 0, 0, 0, -1.25, 1, 0, 0}
	for i, w := range want {
		if pr.Y0[i] != w {
			t.Errorf("y%d(0): Want: %v, Got: %v.", i+1, w, pr.Y0[i])
		}
	}
	prog, err := pr.Field.Program()
	if err != nil {
		t.Fatal(err)
	}
	for trial := 0; trial < 5; trial++ {
		y := append([]float64(nil), pr.Y0...)
		m := append([]float64(nil), pr.P...)
		for i := range y {
			y[i] += 0.3 * math.Sin(float64(7*trial+i))
		}
		for i := range m {
			m[i] *= 1 + 0.5*math.Cos(float64(3*trial+i))
		}
		f := prog.Eval(nil, append(append([]float64{0}, y...), m...))
		for c := 0; c < 2; c++ {
			s, a := 0.0, 0.0
			for i := 0; i < 7; i++ {
				s += m[i] * f[14+7*c+i]
				a += math.Abs(m[i] * f[14+7*c+i])
			}
			if math.Abs(s) > 1e-14*a {
				t.Errorf("trial %d: Σ m_i·a_i (%c) = %v, want 0 (Σ|m_i·a_i| = %v)", trial, "xy"[c], s, a)
			}
		}
	}
	ar := arenstorf()
	aprog, err := ar.Field.Program()
	if err != nil {
		t.Fatal(err)
	}
	y := []float64{0.5, 0.3, -0.2, 1.1}
	got := aprog.Eval(nil, append(append([]float64{0}, y...), ar.P...))
	for i, w := range arenstorfRef(y, ar.P, nil) {
		if math.Abs(got[i]-w) > 1e-14*math.Max(1, math.Abs(w)) {
			t.Errorf("arenstorf f[%d]: Want: %v, Got: %v.", i, w, got[i])
		}
	}
}
