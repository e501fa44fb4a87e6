package ode_test

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// Solve an ensemble of Robertson's stiff kinetics with Rodas5P and
// differentiate the product y3(t1) of each trajectory with respect to its
// rate k1. Grad records the adaptive mesh, replays it and sweeps back
// through it; the gradient is per trajectory.
func ExampleGrad_stiffEnsemble() {
	rob := problems.Robertson()
	y0, p := rob.Ensemble(3) // rows (y1, y2, y3) = (1, 0, 0) and (k1, k2, k3)
	for i, k1 := range []float64{0.03, 0.04, 0.05} {
		p[3*i] = k1
	}
	prob := ode.Problem{Field: rob.Field, Y0: y0, P: p, T1: 100}
	set := &ode.Settings{Method: ode.Rodas5P, RelTol: 1e-8, AbsTol: 1e-14}

	g, err := ode.Grad(nil, prob, ode.Component(2), nil, set) // L = Σ_i y3_i(t1)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := 0; i < 3; i++ {
		fmt.Printf("k1 = %.2f: y3(100) = %.4g, ∂y3/∂k1 = %.4g\n", p[3*i], g.Solution.Y[3*i+2], g.P[3*i])
	}
	// Output:
	// k1 = 0.03: y3(100) = 0.3268, ∂y3/∂k1 = 6.138
	// k1 = 0.04: y3(100) = 0.3828, ∂y3/∂k1 = 5.116
	// k1 = 0.05: y3(100) = 0.4301, ∂y3/∂k1 = 4.381
}
