package ode_test

import (
	"fmt"
	"log"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// lorenz is the Lorenz system with per-trajectory parameters σ, ρ, β.
var lorenz = ode.Field{Name: "lorenz", Dim: 3, Params: 3, F: func(t tape.V, y, p []tape.V) []tape.V {
	sigma, rho, beta := p[0], p[1], p[2]
	return []tape.V{
		sigma.Mul(y[1].Sub(y[0])),
		y[0].Mul(rho.Sub(y[2])).Sub(y[1]),
		y[0].Mul(y[1]).Sub(beta.Mul(y[2])),
	}
}}

// Solve an ensemble of three Van der Pol oscillators with different μ,
// saving the states at t = 1 and t = 2.
func ExampleSolve() {
	vdp := ode.Field{Name: "vanderpol", Dim: 2, Params: 1, F: func(t tape.V, y, p []tape.V) []tape.V {
		x, v, mu := y[0], y[1], p[0]
		return []tape.V{v, mu.Mul(x.Const(1).Sub(x.Square()).Mul(v).Sub(x))}
	}}
	prob := ode.Problem{
		Field:  vdp,
		N:      3,
		Y0:     []float64{2, 0}, // one row: the same initial state for all
		P:      []float64{0.5, 1, 2},
		T1:     2,
		SaveAt: []float64{1, 2},
	}
	sol, err := ode.Solve(prob, &ode.Settings{RelTol: 1e-8, AbsTol: 1e-10})
	if err != nil {
		log.Fatal(err)
	}
	for i := 0; i < sol.N; i++ {
		ys := sol.Ys[i*2*2:]
		fmt.Printf("μ = %.1f: y(1) = (%.4g, %.4g), y(2) = (%.4g, %.4g), %v\n",
			prob.P[i], ys[0], ys[1], ys[2], ys[3], sol.Status[i])
	}
	// Output:
	// μ = 0.5: y(1) = (1.672, -0.5502), y(2) = (0.9407, -0.9445), ok
	// μ = 1.0: y(1) = (1.508, -0.7802), y(2) = (0.3233, -1.833), ok
	// μ = 2.0: y(1) = (1.334, -1.052), y(2) = (-1.093, -4.334), ok
}

// The gradient of a loss of a Lorenz ensemble with respect to every
// trajectory's parameters: here L = Σ_i ‖y_i(1)‖².
func ExampleGrad() {
	prob := ode.Problem{
		Field: lorenz,
		N:     3,
		Y0:    []float64{1, 0, 0},
		P: []float64{
			10, 10, 8.0 / 3,
			10, 20, 8.0 / 3,
			10, 28, 8.0 / 3,
		},
		T1: 1,
	}
	g, err := ode.Grad(nil, prob, ode.SumSquares(), nil, &ode.Settings{RelTol: 1e-8, AbsTol: 1e-10})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("L = %.4g\n", g.Loss)
	for i := 0; i < prob.N; i++ {
		fmt.Printf("ρ = %g: ∂L/∂σ = %.4g, ∂L/∂ρ = %.4g, ∂L/∂β = %.4g\n",
			prob.P[3*i+1], g.P[3*i], g.P[3*i+1], g.P[3*i+2])
	}
	// Output:
	// L = 1370
	// ρ = 10: ∂L/∂σ = -8.637, ∂L/∂ρ = -19.43, ∂L/∂β = -16.16
	// ρ = 20: ∂L/∂σ = 5.378, ∂L/∂ρ = 82.08, ∂L/∂β = -106.5
	// ρ = 28: ∂L/∂σ = -23.95, ∂L/∂ρ = 30.1, ∂L/∂β = 524.8
}

// Record a mesh once and reuse it: every Grad on the same mesh replays
// the same steps, so a few optimisation steps cost only replays. Here
// Gauss–Newton steps fit ρ so that z(1) of the Lorenz system reaches 15.
// The gradient is exact for the frozen mesh; after large parameter
// changes, record again.
func ExampleRecord() {
	prob := ode.Problem{Field: lorenz, Y0: []float64{1, 0, 0}, P: []float64{10, 20, 8.0 / 3}, T1: 1}
	set := &ode.Settings{RelTol: 1e-8, AbsTol: 1e-10}
	sv, err := ode.NewSolver(lorenz, set)
	if err != nil {
		log.Fatal(err)
	}
	mesh, _, err := sv.Record(&prob)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("mesh from t = %g to %g: %v\n", mesh.T0, mesh.T1[0], mesh.Status[0])
	loss := ode.Loss{Name: "z=15", F: func(y, _, _ []tape.V) tape.V { return y[2].AddC(-15).Square() }}
	var g *ode.Gradient
	for it := 0; it < 4; it++ {
		if g, err = sv.Grad(g, &prob, loss, mesh); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("ρ = %.4g: loss %.4g, ∂loss/∂ρ %.4g\n", prob.P[1], g.Loss, g.P[1])
		// A Gauss–Newton step on the residual z(1) − 15.
		prob.P[1] -= 2 * g.Loss / g.P[1]
	}
	// Output:
	// mesh from t = 0 to 1: ok
	// ρ = 20: loss 5.643, ∂loss/∂ρ -8.346
	// ρ = 21.35: loss 0.228, ∂loss/∂ρ 2.315
	// ρ = 21.16: loss 5.979e-05, ∂loss/∂ρ 0.03625
	// ρ = 21.15: loss 5.376e-12, ∂loss/∂ρ 1.086e-05
}
