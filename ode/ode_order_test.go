package ode_test

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// This file checks convergence orders. Fixed uniform meshes are built by
// hand (one trajectory per step count, so one Replay measures every step
// size) and replayed on non-autonomous fields with t0 ≠ 0, against closed
// forms and DOP853 references; the log-log slope of the global error
// against the step size must be the method's order. It also checks that
// the error Record achieves shrinks in proportion to RelTol.

// rotationField is y' = ω(t)·[[0, 1], [−1, 0]]·y, ω(t) = a + b·t,
// p = (a, b): refode.Rotation, whose exact flow is refode.RotationExact.
func rotationField() ode.Field {
	return ode.Field{Name: "rotation", Dim: 2, Params: 2, F: func(t tape.V, y, p []tape.V) []tape.V {
		w := p[0].Add(p[1].Mul(t))
		return []tape.V{w.Mul(y[1]), w.Mul(y[0]).Neg()}
	}}
}

// forcedVdPField is the forced Van der Pol oscillator
// x' = v, v' = μ((1 − x²)v − x) + A·cos(ω·t), p = (μ, A, ω): nonlinear
// and non-autonomous. forcedVdPRHS is its plain-Go twin.
func forcedVdPField() ode.Field {
	return ode.Field{Name: "forced-vdp", Dim: 2, Params: 3, F: func(t tape.V, y, p []tape.V) []tape.V {
		x, v := y[0], y[1]
		one := x.Const(1)
		return []tape.V{v, p[0].Mul(one.Sub(x.Square()).Mul(v).Sub(x)).Add(p[1].Mul(p[2].Mul(t).Cos()))}
	}}
}

func forcedVdPRHS(p []float64) refode.Func {
	return func(t float64, y, dy []float64) {
		dy[0] = y[1]
		dy[1] = p[0]*((1-y[0]*y[0])*y[1]-y[0]) + p[1]*math.Cos(p[2]*t)
	}
}

// uniformMesh returns a mesh with one trajectory per step count: trajectory
// j takes steps[j] equal steps from t0 to t1.
func uniformMesh(meth ode.Method, t0, t1 float64, steps []int) *ode.Mesh {
	n := len(steps)
	m := &ode.Mesh{N: n, T0: t0, Method: meth, Len: make([]int, n), T1: make([]float64, n), Status: make([]ode.Status, n)}
	for _, s := range steps {
		m.Rows = max(m.Rows, s)
	}
	m.H = make([]float64, m.Rows*n)
	for j, s := range steps {
		m.Len[j], m.T1[j] = s, t1
		for k := 0; k < s; k++ {
			m.H[k*n+j] = (t1 - t0) / float64(s)
		}
	}
	return m
}

// slope fits log(err) = slope·log(x) + c by least squares.
func slope(x, err []float64) float64 {
	var sx, sy, sxx, sxy float64
	for i := range x {
		a, b := math.Log(x[i]), math.Log(err[i])
		sx += a
		sy += b
		sxx += a * a
		sxy += a * b
	}
	n := float64(len(x))
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// orderCase is a non-autonomous problem with an exact or reference
// solution at t1 (and, optionally, the exact gradient of y(t1)[0]).
type orderCase struct {
	name   string
	field  ode.Field
	t0, t1 float64
	y0, p  []float64
	shared []float64
	// n0 holds the coarsest step count for Tsit5 and Vern7: the problems
	// differ in how small a step must be before the error is asymptotic,
	// and the finest must stay above round-off.
	n0 [2]int
	// nonlinear widens the upper slope bounds: on nonlinear fields the
	// principal error terms of these optimised pairs are small, so over
	// usable step sizes the error falls faster than h^order (measured
	// slopes ≈ 5.8 for Tsit5, ≈ 8.5 for Vern7; gradsolve's own Vern7
	// trajectory test accepts [7.4, 8.8]). The lower bounds, which catch a
	// wrong coefficient, stay the same.
	nonlinear bool
	exact     func() []float64
	// exactGrad, if set, returns ∂y_0(t1)/∂(y0, p), concatenated (the
	// shared gradient sums over trajectories with different meshes, so it
	// is not checked here).
	exactGrad func() []float64
}

func orderCases() []orderCase {
	return []orderCase{
		{
			name: "forced y' = −p·y + a·sin(t)", field: forcedField(), t0: 1, t1: 3,
			y0: []float64{0.7}, p: []float64{1.3}, shared: []float64{2}, n0: [2]int{8, 4},
			exact: func() []float64 {
				y, _, _, _ := forcedExact(1.3, 2, 1, 0.7, 3)
				return []float64{y}
			},
			exactGrad: func() []float64 {
				_, dy0, dp, da := forcedExact(1.3, 2, 1, 0.7, 3)
				_ = da
				return []float64{dy0, dp}
			},
		},
		{
			name: "rotation ω(t) = a + b·t", field: rotationField(), t0: 0.5, t1: 2.5,
			y0: []float64{1, 0.5}, p: []float64{0.8, 1.5}, n0: [2]int{16, 12},
			exact: func() []float64 {
				y, _, _ := refode.RotationExact([2]float64{0.8, 1.5}, 0.5, [2]float64{1, 0.5}, 2.5)
				return y[:]
			},
			exactGrad: func() []float64 {
				_, dydp, dydy0 := refode.RotationExact([2]float64{0.8, 1.5}, 0.5, [2]float64{1, 0.5}, 2.5)
				return []float64{dydy0[0][0], dydy0[0][1], dydp[0][0], dydp[0][1]}
			},
		},
		{
			name: "forced Van der Pol (nonlinear) vs DOP853", field: forcedVdPField(), t0: 2, t1: 4,
			y0: []float64{1.5, -0.5}, p: []float64{1, 0.5, 2}, n0: [2]int{8, 4}, nonlinear: true,
			exact: func() []float64 {
				ys, err := refode.DOP853(forcedVdPRHS([]float64{1, 0.5, 2}), 2, []float64{1.5, -0.5}, []float64{4}, 1e-14, 1e-14)
				if err != nil {
					panic(err)
				}
				return ys[0]
			},
		},
	}
}

// TestConvergenceOrder replays hand-built uniform meshes and checks that
// the global error at t1, and the error of the gradient of y_0(t1) where
// an exact one is known, decrease like h^order: least-squares slopes over
// a factor 8 in h in [4.6, 5.6] for Tsit5 and [6.5, 7.6] for Vern7 (upper
// bounds 6.6 and 9.3 on the nonlinear field; see orderCase.nonlinear).
func TestConvergenceOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range orderCases() {
		for mi, mc := range []struct {
			meth     ode.Method
			lo, hi   float64
			hiNonlin float64
		}{
			{ode.Tsit5, 4.6, 5.6, 6.6},
			{ode.Vern7, 6.5, 7.6, 9.3},
		} {
			if tc.nonlinear {
				mc.hi = mc.hiNonlin
			}
			name := tc.name + "/" + mc.meth.Name()
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				// Step counts n0·{1, 1.5, 2, 3, 4, 6, 8}: h over a factor 8.
				var steps []int
				for _, f := range []float64{1, 1.5, 2, 3, 4, 6, 8} {
					steps = append(steps, int(f*float64(tc.n0[mi])))
				}
				n, d := len(steps), tc.field.Dim
				pr := ode.Problem{Field: tc.field, N: n, Y0: tc.y0, P: tc.p, Shared: tc.shared, T0: tc.t0, T1: tc.t1}
				m := uniformMesh(mc.meth, tc.t0, tc.t1, steps)
				sv, err := ode.NewSolver(tc.field, &ode.Settings{Method: mc.meth})
				if err != nil {
					t.Fatal(err)
				}
				sol, err := sv.Replay(&pr, m)
				if err != nil {
					t.Fatal(err)
				}
				want := tc.exact()
				hs := make([]float64, n)
				errs := make([]float64, n)
				for j, s := range steps {
					hs[j] = (tc.t1 - tc.t0) / float64(s)
					errs[j] = rowErr(sol.Y[j*d:(j+1)*d], want)
				}
				got := slope(hs, errs)
				t.Logf("%s: h %.3g errors %.3g slope %.2f", name, hs, errs, got)
				if !(got >= mc.lo && got <= mc.hi) {
					t.Errorf("Case %v: order of the error want in [%v, %v], got %.2f (errors %.3g at h = %.3g)", name, mc.lo, mc.hi, got, errs, hs)
				}
				if errs[n-1] < 1e-14 {
					t.Errorf("Case %v: smallest error %.3g is at round-off level; the slope is not meaningful", name, errs[n-1])
				}
				if tc.exactGrad == nil {
					return
				}
				g, err := sv.Grad(nil, &pr, ode.Component(0), m)
				if err != nil {
					t.Fatal(err)
				}
				wantG := tc.exactGrad()
				np := tc.field.Params
				gerrs := make([]float64, n)
				for j := range steps {
					row := append(append([]float64(nil), g.Y0[j*d:(j+1)*d]...), g.P[j*np:(j+1)*np]...)
					gerrs[j] = rowErr(row, wantG[:d+np])
				}
				gs := slope(hs, gerrs)
				t.Logf("%s: gradient errors %.3g slope %.2f", name, gerrs, gs)
				if !(gs >= mc.lo && gs <= mc.hi) {
					t.Errorf("Case %v: order of the gradient error want in [%v, %v], got %.2f (errors %.3g)", name, mc.lo, mc.hi, gs, gerrs)
				}
			})
		}
	}
}

// TestToleranceProportionality checks that the error Record achieves
// decreases roughly in proportion to RelTol (AbsTol = 1e-3·RelTol): the
// least-squares slope of log(error) against log(RelTol) over four decades
// lies in [0.7, 1.3] and every tenfold tightening gains at least 3×.
func TestToleranceProportionality(t *testing.T) {
	t.Parallel()
	p := []float64{1.5, 0.8, 2.5}
	y0 := []float64{1.5, -0.5}
	const t0, t1 = 2.0, 8.0
	ref, err := refode.DOP853(forcedVdPRHS(p), t0, y0, []float64{t1}, 1e-14, 1e-14)
	if err != nil {
		t.Fatal(err)
	}
	rtols := []float64{1e-5, 1e-6, 1e-7, 1e-8, 1e-9}
	for _, meth := range []ode.Method{ode.Tsit5, ode.Vern7} {
		t.Run(meth.Name(), func(t *testing.T) {
			t.Parallel()
			pr := ode.Problem{Field: forcedVdPField(), Y0: y0, P: p, T0: t0, T1: t1}
			errs := make([]float64, len(rtols))
			for k, rtol := range rtols {
				sol, err := ode.Solve(pr, &ode.Settings{Method: meth, RelTol: rtol, AbsTol: 1e-3 * rtol})
				if err != nil {
					t.Fatal(err)
				}
				errs[k] = rowErr(sol.Y, ref[0])
			}
			s := slope(rtols, errs)
			t.Logf("%s: RelTol %.0g errors %.3g slope %.2f", meth.Name(), rtols, errs, s)
			if !(s >= 0.7 && s <= 1.3) {
				t.Errorf("Case %v: slope of error vs RelTol want in [0.7, 1.3], got %.2f (errors %.3g)", meth.Name(), s, errs)
			}
			for k := 1; k < len(errs); k++ {
				if !(errs[k] <= errs[k-1]/3) {
					t.Errorf("Case %v: RelTol %g → %g: error want ≤ %.3g, got %.3g", meth.Name(), rtols[k-1], rtols[k], errs[k-1]/3, errs[k])
				}
			}
		})
	}
}
