package ode_test

import (
	"fmt"
	"log"

	"github.com/gradsolve-go/gradsolve/ode"
)

// A loop that reads only the loss and its gradient asks for nothing
// else: with Omit set on the Gradient it passes back, the final and saved
// states and the rejected-step and field-evaluation counts are not
// returned (on a GPU engine, not copied back from the device), while the
// loss, the gradient, the statuses and the accepted steps are those of a
// whole result, bit for bit.
func ExampleSolver_Grad_omit() {
	prob := ode.Problem{
		Field:  lorenz,
		N:      2,
		Y0:     []float64{1, 0, 0},
		P:      []float64{10, 20, 8.0 / 3, 10, 28, 8.0 / 3},
		T1:     1,
		SaveAt: []float64{0.5},
	}
	sv, err := ode.NewSolver(lorenz, &ode.Settings{RelTol: 1e-8, AbsTol: 1e-10})
	if err != nil {
		log.Fatal(err)
	}
	all, err := sv.Grad(nil, &prob, ode.SumSquares(), nil)
	if err != nil {
		log.Fatal(err)
	}
	g := &ode.Gradient{Omit: ode.OmitStates | ode.OmitStats}
	for range 3 { // the loop's calls reuse g, Omit and all
		if _, err := sv.Grad(g, &prob, ode.SumSquares(), nil); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("L = %.4g (the same bits: %v), ∂L/∂ρ = %.4g, %.4g\n", g.Loss, g.Loss == all.Loss, g.P[1], g.P[4])
	s := g.Solution
	fmt.Println("states nil:", s.Y == nil, s.Ys == nil, "rejected counts nil:", s.Stats.Rejected == nil)
	fmt.Println("accepted steps:", s.Stats.Accepted, "statuses:", s.Status)
	// Output:
	// L = 1228 (the same bits: true), ∂L/∂ρ = 82.08, 30.1
	// states nil: true true rejected counts nil: true
	// accepted steps: [118 127] statuses: [ok ok]
}
