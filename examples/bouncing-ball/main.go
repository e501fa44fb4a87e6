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
// gradient at the solution against the closed form. The height at one
// time is not a monotone function of e (each bounce adds a branch), so
// another e can reproduce it: with many balls (-n 256) some are fitted
// to such an e (the last line counts them); a coarse scan of e picks
// Newton's start, and e is kept above the value at which the ball would
// come to rest before T.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"

	"github.com/gradsolve-go/gradsolve/internal/exflag"
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
	if err := c.check(flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "bouncing-ball:", err)
		os.Exit(2)
	}
	if _, err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bouncing-ball:", err)
		os.Exit(1)
	}
}

// check refuses a command line that run cannot use (args: what is left
// after the flags), naming the flag.
func (c config) check(args []string) error {
	return exflag.First(exflag.NoArgs(args), exflag.AtLeast("n", c.n, 1, "ball"), exflag.Positive("T", c.T))
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
	if err := c.check(nil); err != nil {
		return nil, err
	}
	f, floor := ball()
	rng := rand.New(rand.NewPCG(c.seed, 2))
	y0 := make([]float64, 2*c.n)
	trueE, e := make([]float64, c.n), make([]float64, c.n)
	for i := range trueE {
		y0[2*i] = 0.8 + 0.4*rng.Float64()
		trueE[i] = 0.65 + 0.25*rng.Float64()
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
	// Newton's method on r(e) = x(T; e) − seen, per ball: e ← e − r/r',
	// with e kept in [eMin, 0.95]. Below eMin a ball would come to rest
	// before T (after infinitely many bounces, at √(2·h0/g)·(1 + 2e/(1−e))):
	// its height at T is then no function of e, and the solver stops such a
	// trajectory with status TooManyEvents.
	eMin := make([]float64, c.n)
	for i := range eMin {
		a := c.T/math.Sqrt(2*y0[2*i]/gravity) - 1
		eMin[i] = math.Max(0.3, a/(2+a)+0.02)
	}
	// The start: the best of a coarse scan of [eMin, 0.95] (16 solves of
	// every ball at once), so that Newton starts on the right branch.
	best := make([]float64, c.n)
	for i := range best {
		best[i] = math.Inf(1)
	}
	scan := make([]float64, c.n)
	for k := 0; k < 16; k++ {
		for i := range scan {
			scan[i] = eMin[i] + (0.95-eMin[i])*float64(k)/15
		}
		sol, err := sv.Solve(&ode.Problem{Field: f, N: c.n, Y0: y0, P: scan, T1: c.T})
		if err != nil {
			return nil, err
		}
		for i := range scan {
			if r := math.Abs(sol.Y[2*i] - seen[i]); r < best[i] {
				best[i], e[i] = r, scan[i]
			}
		}
	}
	// A step that does not reduce |r| is halved (x(T; e) is not monotone in
	// e: each bounce adds a branch, and a full step from a far guess can
	// land on another branch's root).
	var g *ode.Gradient
	lastE, lastR, lastStep := make([]float64, c.n), make([]float64, c.n), make([]float64, c.n)
	for i := range lastR {
		lastR[i] = math.Inf(1)
	}
	for it := 0; it < 60; it++ {
		g, err = sv.Grad(g, &ode.Problem{Field: f, N: c.n, Y0: y0, P: e, T1: c.T}, ode.Component(0), nil)
		if err != nil {
			return nil, err
		}
		done := true
		for i := range e {
			r := g.Solution.Y[2*i] - seen[i]
			if math.Abs(r) > math.Abs(lastR[i]) && math.Abs(lastStep[i]) > 1e-15 {
				lastStep[i] /= 2
				e[i] = lastE[i] - lastStep[i]
				done = false
				continue
			}
			next := math.Min(0.95, math.Max(eMin[i], e[i]-r/g.P[i]))
			lastE[i], lastR[i], lastStep[i] = e[i], r, e[i]-next
			e[i] = next
			done = done && math.Abs(lastStep[i]) < 1e-13
		}
		if done {
			break
		}
	}
	// The gradient at the values found (the loop's last update moved them).
	if g, err = sv.Grad(g, &ode.Problem{Field: f, N: c.n, Y0: y0, P: e, T1: c.T}, ode.Component(0), nil); err != nil {
		return nil, err
	}
	o := &outcome{bounces: g.Solution.Events}
	fmt.Fprintf(w, "%4s %8s %10s %8s %14s %14s\n", "ball", "true e", "recovered", "bounces", "dx(T)/de", "closed form")
	for i := range e {
		o.worst = math.Max(o.worst, math.Abs(e[i]-trueE[i]))
		fmt.Fprintf(w, "%4d %8.5f %10.8f %8d %14.10f %14.10f\n", i, trueE[i], e[i], g.Solution.Events[i], g.P[i], closedForm(y0[2*i], e[i], c.T))
	}
	fit, found := 0, 0
	for i := range e {
		if math.Abs(g.Solution.Y[2*i]-seen[i]) <= 1e-10 {
			fit++
		}
		if math.Abs(e[i]-trueE[i]) <= 1e-8 {
			found++
		}
	}
	fmt.Fprintf(w, "largest error of e: %.2g; %d of %d balls reproduce their height, %d at their true e\n", o.worst, fit, c.n, found)
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
