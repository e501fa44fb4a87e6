package nn_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/tape"
)

// ExampleMLP traces a small network as a program of two inputs and shared
// weights, then evaluates it.
func ExampleMLP() {
	mlp := nn.NewMLP([]int{2, 16, 16, 1}, nn.Tanh, nn.Softplus)
	w := mlp.Init(nil, rand.New(rand.NewPCG(1, 1)))

	in := []tape.Input{{Name: "x0"}, {Name: "x1"}}
	for range w {
		in = append(in, tape.Input{Name: "w", Shared: true})
	}
	prog, err := tape.Trace("mlp", in, func(v []tape.V) []tape.V {
		return mlp.Apply(v[2:], v[:2])
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	out := prog.Eval(nil, append([]float64{0.5, -1}, w...))
	fmt.Printf("%d layers, %d parameters, %d output\n", len(mlp), mlp.NumParams(), len(out))
	fmt.Printf("mlp(0.5, -1) = %.4g\n", out[0])
	// Output:
	// 3 layers, 337 parameters, 1 output
	// mlp(0.5, -1) = 0.5716
}
