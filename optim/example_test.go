package optim_test

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/optim"
)

// ExampleAdam minimises f(x) = (x0 − 3)² + 10·(x1 + 1)² with Adam and a
// cosine schedule.
func ExampleAdam() {
	x := []float64{0, 0}
	opt := &optim.Adam{Schedule: optim.WarmupCosine{Init: 0.01, Peak: 0.3, Final: 0.001, Warmup: 20, Steps: 500}}
	grad := make([]float64, 2)
	for range 500 {
		grad[0] = 2 * (x[0] - 3)
		grad[1] = 20 * (x[1] + 1)
		optim.ClipNorm(grad, 10)
		opt.Step(x, grad)
	}
	fmt.Printf("x = (%.4f, %.4f) after %d steps\n", x[0], x[1], opt.Steps())
	// Output:
	// x = (3.0000, -1.0000) after 500 steps
}

// ExampleRule takes Adam's steps outside the optimiser, as an engine that
// holds the parameters does (package fit on a GPU), and hands the state
// back: the optimiser then continues exactly where the rule left off.
func ExampleRule() {
	x := []float64{0, 0}
	grad := make([]float64, 2)
	opt := &optim.Adam{LearnRate: 0.1}
	r0, _ := opt.RuleAt(0)
	m, v := make([]float64, 2), make([]float64, 2) // the moments r0.Moments() names
	for k := range 100 {
		r, err := opt.RuleAt(k)
		if err != nil {
			panic(err)
		}
		grad[0], grad[1] = 2*(x[0]-3), 20*(x[1]+1)
		r.Apply(x, grad, [][]float64{m, v})
	}
	if err := opt.SetState(&optim.State{Kind: "adam", Step: 100, N: 2, Moments: map[string]optim.Floats{"m": m, "v": v}}); err != nil {
		panic(err)
	}
	for range 400 {
		grad[0], grad[1] = 2*(x[0]-3), 20*(x[1]+1)
		opt.Step(x, grad)
	}
	fmt.Println(r0.Moments())
	fmt.Printf("x = (%.4f, %.4f) after %d steps\n", x[0], x[1], opt.Steps())
	// Output:
	// [m v]
	// x = (3.0000, -1.0000) after 500 steps
}
