package ode_test

import (
	"context"
	"fmt"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// ExampleSolver_GradPartial differentiates three independent
// trajectories of y' = p·y², y(0) = 1, on [0, 1]; the second (p = 2)
// blows up at t = 0.5 and is left out of the gradient, with its reason,
// instead of failing the call.
func ExampleSolver_GradPartial() {
	field := ode.Field{Name: "blowup", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0].Square())}
	}}
	sv, err := ode.NewSolver(field, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	prob := ode.Problem{Field: field, N: 3, Y0: []float64{1}, P: []float64{0.5, 2, 0.25}, T1: 1}
	g, fails, err := sv.GradPartial(context.Background(), nil, &prob, ode.Component(0), nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// y(1) = 1/(1 − p): 2 + 4/3; ∂y(1)/∂p = 1/(1 − p)²: 4 and 16/9.
	fmt.Printf("loss %.4f, gradient %.4f %v %.4f\n", g.Loss, g.P[0], g.P[1], g.P[2])
	fmt.Println(g.Solution.Status)
	fmt.Printf("trajectory %d: %v\n", fails[0].Index, fails[0].Status)
	// Output:
	// loss 3.3333, gradient 4.0000 0 1.7778
	// [ok step size underflow ok]
	// trajectory 1: step size underflow
}
