package ode_test

import (
	"fmt"
	"log"

	"github.com/gradsolve-go/gradsolve/ode"
)

// A loop that solves with many save times and reads them only now and
// then asks the engine to keep them (Settings.KeepSaves): on a GPU engine
// they then stay in device memory, in Solution.Resident, until
// HostSaves copies them into Ys (one copy, already in Ys's order), and
// a call whose saves are not read does not copy them at all. The CPU
// engine's saves are on the host already: Resident stays nil and
// HostSaves does nothing, so the same code runs on every engine.
func ExampleSettings_keepSaves() {
	prob := ode.Problem{
		Field:  lorenz,
		N:      2,
		Y0:     []float64{1, 0, 0},
		P:      []float64{10, 20, 8.0 / 3, 10, 28, 8.0 / 3},
		T1:     1,
		SaveAt: []float64{0.25, 0.5, 0.75},
	}
	sv, err := ode.NewSolver(lorenz, &ode.Settings{RelTol: 1e-8, AbsTol: 1e-10, KeepSaves: true})
	if err != nil {
		log.Fatal(err)
	}
	var sol ode.Solution
	for it := range 3 {
		if _, err := sv.SolveTo(&sol, &prob); err != nil { // the saves of the last call are reused or released
			log.Fatal(err)
		}
		if it < 2 {
			continue // saves not read: on a GPU engine, never copied back
		}
		if err := sol.HostSaves(); err != nil {
			log.Fatal(err)
		}
		K := len(prob.SaveAt)
		fmt.Printf("engine %s: x(0.5) = %.4g, %.4g\n", sol.Engine, sol.Ys[(0*K+1)*3], sol.Ys[(1*K+1)*3])
	}
	sol.Release() // gives a GPU engine's memory back now (nothing on the CPU)
	// Output:
	// engine cpu: x(0.5) = 14.82, 6.503
}
