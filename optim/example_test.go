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
