package ode_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestGradZeroStateTracedOrder differentiates a reaction chain a → b → c
// whose second rate k₂·b^q has a traced order q (a per-trajectory
// parameter) and whose intermediate b starts at exactly 0: zero-, first-
// and second-order kinetics in one ensemble. Every method's gradient must
// be finite and match central differences of the loss on the recorded
// mesh. Pow's derivative y·x^(y−1) was 0·Inf = NaN at x = 0 for q = 0,
// and its derivative (which a Rosenbrock step's gradient takes from its
// Jacobian) for q = 1.
func TestGradZeroStateTracedOrder(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "traced-order", Dim: 3, Params: 3, F: func(_ tape.V, y, p []tape.V) []tape.V {
		r1 := p[0].Mul(y[0])
		r2 := p[1].Mul(y[1].Pow(p[2]))
		return []tape.V{r1.Neg(), r1.Sub(r2), r2}
	}}
	orders := []float64{0, 1, 2}
	pr := ode.Problem{Field: f, N: len(orders), T1: 1, Y0: make([]float64, 3*len(orders))}
	for i, q := range orders {
		pr.Y0[3*i] = 1
		pr.P = append(pr.P, 1, 0.1, q)
	}
	loss := ode.Loss{Name: "mix", F: func(y, _, _ []tape.V) tape.V {
		return y[1].Square().Add(y[2].MulC(3)).Add(y[0].Mul(y[1]))
	}}
	// Grad fails on a gradient that is not finite: ∂L/∂q included. Its
	// central differences are left out, b^(q±h) at b = 0 being singular
	// (and NaN for a stage's b < 0) for q ≤ 1.
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23} {
		t.Run(m.Name(), func(t *testing.T) {
			t.Parallel()
			sv, err := ode.NewSolver(f, &ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-10})
			if err != nil {
				t.Fatal(err)
			}
			g, err := sv.Grad(nil, &pr, loss, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range orders {
				for k, slot := range []struct {
					name string
					arr  []float64
					at   int
				}{{"Y0[a]", g.Y0, 3 * i}, {"Y0[b]", g.Y0, 3*i + 1}, {"k1", g.P, 3 * i}, {"k2", g.P, 3*i + 1}} {
					q := pr
					q.Y0, q.P = append([]float64(nil), pr.Y0...), append([]float64(nil), pr.P...)
					x := &q.P[slot.at]
					if k < 2 {
						x = &q.Y0[slot.at]
					}
					x0 := *x
					h := 1e-6 * math.Max(1, math.Abs(x0))
					eval := func(v float64) float64 {
						*x = v
						l, _, err := sv.Loss(&q, loss, g.Mesh)
						if err != nil {
							t.Fatal(err)
						}
						return l
					}
					fd := (eval(x0+h) - eval(x0-h)) / ((x0 + h) - (x0 - h))
					ad := slot.arr[slot.at]
					what := fmt.Sprintf("order %v: ∂L/∂%s", orders[i], slot.name)
					if !(math.Abs(ad-fd) <= 1e-6*math.Max(math.Abs(fd), 1)) {
						t.Errorf("%s = %v, central difference %v", what, ad, fd)
					}
				}
			}
		})
	}
}
