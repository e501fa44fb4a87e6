package problems

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Published problems that package problems does not build, checked as
// the built-in ones are: the Lotka–Volterra predator–prey system with
// per-trajectory rates and the two-state Brusselator ODE (largeCases),
// and the Oregonator (publishedCases).

// lotkaVolterra is x' = a·x − b·x·y, y' = c·x·y − d·y with p = (a, b, c,
// d) per trajectory, (a, b, c, d) = (1.5, 1, 3, 1), y0 = (1, 1), t ∈ [0,
// 10] (the DifferentialEquations.jl tutorial's): periodic orbits on
// which V = c·x − d·ln x + b·y − a·ln y is constant.
func lotkaVolterra() Problem {
	return Problem{
		Name: "lotka-volterra",
		Field: ode.Field{Name: "lotka-volterra", Dim: 2, Params: 4, F: func(_ tape.V, y, p []tape.V) []tape.V {
			xy := y[0].Mul(y[1])
			return []tape.V{p[0].Mul(y[0]).Sub(p[1].Mul(xy)), p[2].Mul(xy).Sub(p[3].Mul(y[1]))}
		}},
		Y0: []float64{1, 1}, P: []float64{1.5, 1, 3, 1}, T1: 10,
	}
}

func lotkaVolterraRef(y, p, _ []float64) []float64 {
	return []float64{p[0]*y[0] - p[1]*y[0]*y[1], p[2]*y[0]*y[1] - p[3]*y[1]}
}

// lotkaVolterraV is the conserved quantity of lotkaVolterra.
func lotkaVolterraV(y, p []float64) float64 {
	return p[2]*y[0] - p[3]*math.Log(y[0]) + p[1]*y[1] - p[0]*math.Log(y[1])
}

// brusselatorODE is the two-state Brusselator (Hairer, Nørsett & Wanner
// I, §I.16), u' = A + u²v − (B + 1)·u, v' = B·u − u²v with p = (A, B),
// (1, 3), y0 = (1.5, 3), t ∈ [0, 20]: for B > 1 + A² a limit cycle.
func brusselatorODE() Problem {
	return Problem{
		Name: "brusselator-ode",
		Field: ode.Field{Name: "brusselator-ode", Dim: 2, Params: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
			u2v := y[0].Square().Mul(y[1])
			return []tape.V{p[0].Add(u2v).Sub(p[1].AddC(1).Mul(y[0])), p[1].Mul(y[0]).Sub(u2v)}
		}},
		Y0: []float64{1.5, 3}, P: []float64{1, 3}, T1: 20,
	}
}

func brusselatorODERef(y, p, _ []float64) []float64 {
	u2v := y[0] * y[0] * y[1]
	return []float64{p[0] + u2v - (p[1]+1)*y[0], p[1]*y[0] - u2v}
}

// TestLotkaVolterraInvariant solves an ensemble of Lotka–Volterra systems
// whose four rates all differ from trajectory to trajectory and checks
// that each keeps its own V(x, y) to a few tolerances over [0, 10]
// (several periods), on every method.
func TestLotkaVolterraInvariant(t *testing.T) {
	t.Parallel()
	pr := lotkaVolterra()
	const n = 7
	y0, p := pr.Ensemble(n)
	for i := 0; i < n; i++ {
		for k := range 4 {
			p[4*i+k] *= 1 + 0.1*math.Sin(float64(3*i+k))
		}
		y0[2*i] += 0.05 * float64(i)
	}
	prob := ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, T1: pr.T1, SaveAt: []float64{2.5, 5, 7.5}}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23, ode.Auto} {
		t.Run(m.Name(), func(t *testing.T) {
			t.Parallel()
			const rtol = 1e-8
			sol, err := ode.Solve(prob, &ode.Settings{Method: m, RelTol: rtol, AbsTol: 1e-10})
			if err != nil {
				t.Fatal(err)
			}
			bound := 100.0
			if m == ode.Rosenbrock23 { // second order: error ∝ rtol^(2/3)
				bound = 1e4
			}
			worst := 0.0
			for i := 0; i < n; i++ {
				pi := p[4*i : 4*i+4]
				v0 := lotkaVolterraV(y0[2*i:2*i+2], pi)
				for k := range 4 {
					y := sol.Y[2*i : 2*i+2]
					if k < 3 {
						y = sol.Ys[(3*i+k)*2 : (3*i+k)*2+2]
					}
					e := math.Abs(lotkaVolterraV(y, pi)-v0) / math.Abs(v0)
					worst = math.Max(worst, e)
					if !(e <= bound*rtol) {
						t.Errorf("trajectory %d, save %d: V changed by %.3g relative, want ≤ %g·rtol", i, k, e, bound)
					}
				}
			}
			t.Logf("%s: largest change of V %.2g = %.3g·rtol", m.Name(), worst, worst/rtol)
		})
	}
}
