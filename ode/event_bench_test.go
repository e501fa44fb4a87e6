package ode_test

import (
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// BenchmarkEvent times the CPU engine's solve and gradient (with its
// record) of 4,096 bouncing balls (problems.BouncingBall: 2 to 5 bounces
// each to T = 1.6, Tsit5, RelTol 1e-8) on one worker, events that fire
// alone: the common path that events whose roots coincide must not slow.
//
//	go test ./ode -run '^$' -bench 'Event' -count 5
func BenchmarkEvent(b *testing.B) {
	f, ev := problems.BouncingBall()
	rng := rand.New(rand.NewPCG(1, 1))
	const n = 4096
	y0, e := make([]float64, 2*n), make([]float64, n)
	for i := range e {
		y0[2*i] = 0.8 + 0.4*rng.Float64()
		e[i] = 0.65 + 0.25*rng.Float64()
	}
	p := ode.Problem{Field: f, N: n, Y0: y0, P: e, T1: 1.6}
	set := &ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, AbsTol: 1e-10, Events: []ode.Event{ev}}
	set.Exec.Workers = 1
	sv, err := ode.NewSolver(f, set)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("solve", func(b *testing.B) {
		for range b.N {
			if _, err := sv.Solve(&p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("grad", func(b *testing.B) {
		var g ode.Gradient
		for range b.N {
			if _, err := sv.Grad(&g, &p, ode.Component(0), nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
