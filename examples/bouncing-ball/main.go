// Command bouncing-ball recovers each ball's coefficient of restitution
// from the height it is seen at after several bounces, with events and
// their exact gradients.
//
// A ball dropped from rest at height h0 falls under gravity (d²x/dt² = −g)
// and bounces on the floor x = 0: the event x = 0 (falling) applies
// v ← −e·v and the ball goes on. The gradient of the height at T with
// respect to e goes through every bounce time (which moves with e) and
// every bounce. Each of -n balls has its own e (a per-trajectory
// parameter); from its observed height at T, Newton's method on the
// squared residual, with the gradient Grad returns, finds e again.
//
// Usage:
//
//	go run ./examples/bouncing-ball [-n 8] [-T 1.6]
//
// It prints each ball's true and recovered e, its bounces, and the
// gradient at the solution against the closed form.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

const gravity = 9.81

type config struct {
	n    int
	T    float64
	seed uint64
}

type outcome struct {
	worst   float64 // largest |e recovered − e true|
	bounces []int
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 8, "number of balls")
	flag.Float64Var(&c.T, "T", 1.6, "observation time (before the balls come to rest)")
	flag.Uint64Var(&c.seed, "seed", 1, "random seed")
	flag.Parse()
	if _, err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func ball() (ode.Field, ode.Event) {
	f := ode.Field{Name: "ball", Dim: 2, Params: 1, F: func(_ tape.V, y, _ []tape.V) []tape.V {
		return []tape.V{y[1], y[1].Const(-gravity)}
	}}
	floor := ode.Event{Name: "floor", Direction: -1,
		G:     func(_ tape.V, y, _ []tape.V) tape.V { return y[0] },
		Apply: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{y[0], p[0].Neg().Mul(y[1])} }}
	return f, floor
}

func run(c config, w io.Writer) (*outcome, error) {
	f, floor := ball()
	rng := rand.New(rand.NewPCG(c.seed, 2))
	y0 := make([]float64, 2*c.n)
	trueE, e := make([]float64, c.n), make([]float64, c.n)
	for i := range trueE {
		y0[2*i] = 0.8 + 0.4*rng.Float64()
		trueE[i] = 0.65 + 0.25*rng.Float64()
		e[i] = 0.75 // the first guess
	}
	sv, err := ode.NewSolver(f, &ode.Settings{Method: ode.Tsit5, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{floor}})
	if err != nil {
		return nil, err
	}
	// The observations: the heights at T with the true coefficients.
	obs, err := sv.Solve(&ode.Problem{Field: f, N: c.n, Y0: y0, P: trueE, T1: c.T})
	if err != nil {
		return nil, err
	}
	seen := make([]float64, c.n)
	for i := range seen {
		seen[i] = obs.Y[2*i]
	}
	// Newton's method on r(e) = x(T; e) − seen, per ball: e ← e − r/r'.
	var g *ode.Gradient
	for it := 0; it < 30; it++ {
		g, err = sv.Grad(g, &ode.Problem{Field: f, N: c.n, Y0: y0, P: e, T1: c.T}, ode.Component(0), nil)
		if err != nil {
			return nil, err
		}
		done := true
		for i := range e {
			r := g.Solution.Y[2*i] - seen[i]
			step := r / g.P[i]
			e[i] = math.Min(0.95, math.Max(0.3, e[i]-step))
			done = done && math.Abs(step) < 1e-13
		}
		if done {
			break
		}
	}
	o := &outcome{bounces: g.Solution.Events}
	fmt.Fprintf(w, "%4s %8s %10s %8s %14s %14s\n", "ball", "true e", "recovered", "bounces", "dx(T)/de", "closed form")
	for i := range e {
		o.worst = math.Max(o.worst, math.Abs(e[i]-trueE[i]))
		fmt.Fprintf(w, "%4d %8.5f %10.8f %8d %14.10f %14.10f\n", i, trueE[i], e[i], g.Solution.Events[i], g.P[i], closedForm(y0[2*i], e[i], c.T))
	}
	fmt.Fprintf(w, "largest error of e: %.2g\n", o.worst)
	return o, nil
}

// closedForm returns dx(T)/de of a ball dropped from h0 at rest.
func closedForm(h0, e, T float64) float64 {
	U := math.Sqrt(2 * gravity * h0)
	tn, dtn := math.Sqrt(2*h0/gravity), 0.0
	var u, du float64
	for k := 1; k < 1000; k++ {
		u, du = math.Pow(e, float64(k))*U, float64(k)*math.Pow(e, float64(k-1))*U
		next := tn + 2*u/gravity
		if next > T {
			break
		}
		tn, dtn = next, dtn+2*du/gravity
	}
	tau := T - tn
	return du*tau + (u-gravity*tau)*(-dtn)
}
