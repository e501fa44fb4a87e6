package ode_test

import (
	"fmt"
	"log"

	"github.com/gradsolve-go/gradsolve/ode"
)

// A loop that reads the loss of every call and the per-trajectory
// gradients only now and then asks the engine to keep them
// (Settings.KeepGrads): on a GPU engine ∂L/∂Y0, ∂L/∂P and the
// Solution's and Mesh's statuses and counts then stay in device memory,
// in Gradient.Resident, until HostGrads copies them back; a call whose
// gradients are not read copies back its loss, its shared gradient and
// whether every trajectory ended well. A failure is reported by the call
// itself, as without KeepGrads. The CPU engine's results are on the host
// already: Resident stays nil and HostGrads does nothing, so the same
// code runs on every engine.
func ExampleSettings_keepGrads() {
	prob := ode.Problem{
		Field: lorenz,
		N:     2,
		Y0:    []float64{1, 0, 0},
		P:     []float64{10, 20, 8.0 / 3, 10, 28, 8.0 / 3},
		T1:    1,
	}
	sv, err := ode.NewSolver(lorenz, &ode.Settings{RelTol: 1e-8, AbsTol: 1e-10, KeepGrads: true})
	if err != nil {
		log.Fatal(err)
	}
	var g ode.Gradient
	for it := range 3 {
		if _, err := sv.Grad(&g, &prob, ode.SumSquares(), nil); err != nil { // unread results of the last call are written over
			log.Fatal(err)
		}
		fmt.Printf("call %d: loss %.6g\n", it, g.Loss)
		if it < 2 {
			continue // gradients not read: on a GPU engine, never copied back
		}
		if err := g.HostGrads(); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("engine %s: dL/dρ = %.4g, %.4g\n", g.Solution.Engine, g.P[1], g.P[4])
	}
	g.Release() // gives a GPU engine's memory back now (nothing on the CPU)
	// Output:
	// call 0: loss 1227.83
	// call 1: loss 1227.83
	// call 2: loss 1227.83
	// engine cpu: dL/dρ = 82.08, 30.1
}
