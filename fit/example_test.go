package fit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// ExampleSettings_resume runs a fit in two parts, as a job interrupted
// and restarted would: the checkpoint and the optimiser's state, saved
// after the first part, continue it exactly.
func ExampleSettings_resume() {
	field := ode.Field{Name: "decay", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Neg()}
	}}
	prob := ode.Problem{Field: field, Y0: []float64{1}, P: []float64{1}, T1: 1}
	loss := ode.Loss{Name: "sq", Data: []float64{0.1353352832366127}, DataDim: 1,
		F: func(y, _, data []tape.V) tape.V { return y[0].Sub(data[0]).Square() }}
	p := fit.Problem{ODE: prob, Loss: loss, Vars: fit.Vars{P: []int{0}}}
	set := func(opt optim.Optimizer, ck *fit.Checkpoint) *fit.Settings {
		return &fit.Settings{Steps: 40, Remesh: 8, Optimizer: opt, Resume: ck}
	}
	whole, _ := fit.Fit(context.Background(), p, nil, set(&optim.Adam{LearnRate: 0.05}, nil))

	first := &optim.Adam{LearnRate: 0.05}
	s := set(first, nil)
	s.Steps = 13
	part, _ := fit.Fit(context.Background(), p, nil, s)
	var ckFile, optFile bytes.Buffer
	json.NewEncoder(&ckFile).Encode(part.Checkpoint())
	optim.SaveState(&optFile, first)

	var ck fit.Checkpoint
	json.NewDecoder(&ckFile).Decode(&ck)
	second := &optim.Adam{LearnRate: 0.05}
	if err := optim.LoadState(&optFile, second); err != nil {
		fmt.Println(err)
		return
	}
	rest, err := fit.Fit(context.Background(), p, nil, set(second, &ck))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rest.Start, rest.Steps, rest.X[0] == whole.X[0])
	// Output:
	// 13 40 true
}

// ExampleResult_fitStatus runs three independent fits of y' = p·y² on
// [0, 1]; the second asks for y(1) = 1000, which drives p past 1, where
// the solution blows up before t = 1 and the solver refuses it. That fit
// stops with its reason; the others go on.
func ExampleResult_fitStatus() {
	field := ode.Field{Name: "blowup", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0].Square())}
	}}
	prob := ode.Problem{Field: field, Y0: []float64{1}, P: []float64{0.1}, N: 3, T1: 1}
	loss := ode.Loss{Name: "sq", DataDim: 1, Data: []float64{1 / (1 - 0.2), 1000, 1 / (1 - 0.4)},
		F: func(y, _, d []tape.V) tape.V { return y[0].Sub(d[0]).Square() }}
	res, err := fit.Fit(context.Background(), fit.Problem{ODE: prob, Loss: loss, Vars: fit.Vars{P: []int{0}}, Fits: 3}, nil,
		&fit.Settings{Steps: 200, Optimizer: &optim.Adam{LearnRate: 0.1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for b, s := range res.FitStatus {
		var fe *fit.FitError
		if errors.As(res.FitErr[b], &fe) {
			fmt.Printf("fit %d: %v at step %d: %v\n", b, s, fe.Step, errors.Is(fe, ode.ErrStepSizeUnderflow))
			continue
		}
		fmt.Printf("fit %d: %v, p = %.3f\n", b, s, res.FitP(b)[0])
	}
	// Output:
	// fit 0: max steps, p = 0.200
	// fit 1: failed at step 10: true
	// fit 2: max steps, p = 0.400
}
