package fit_test

import (
	"context"
	"fmt"

	"github.com/gradsolve-go/gradsolve/fit"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/tape"
)

// ExampleFit recovers the rate k of y' = −k·y from y(1) = e^(−2) (k = 2),
// starting from k = 1.
func ExampleFit() {
	field := ode.Field{Name: "decay", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Neg()}
	}}
	prob := ode.Problem{Field: field, Y0: []float64{1}, P: []float64{1}, T1: 1}
	loss := ode.Loss{Name: "sq", Data: []float64{0.1353352832366127}, DataDim: 1,
		F: func(y, _, data []tape.V) tape.V { return y[0].Sub(data[0]).Square() }}
	res, err := fit.Fit(context.Background(), fit.Problem{ODE: prob, Loss: loss, Vars: fit.Vars{P: []int{0}}},
		&ode.Settings{RelTol: 1e-10, AbsTol: 1e-12},
		&fit.Settings{Steps: 300, Optimizer: &optim.Adam{LearnRate: 0.05}, GradTol: 1e-9})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("k = %.4f (%v)\n", res.FitP(0)[0], res.Status)
	// Output:
	// k = 2.0000 (converged)
}
