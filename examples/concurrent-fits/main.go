// Command concurrent-fits runs B independent fits in one ensemble: each
// fit recovers its own four Lotka–Volterra parameters from its own
// observations, and every optimiser step solves and differentiates all
// B·M trajectories at once (one replay and one reverse sweep).
//
// The field is defined here, as a user would define one:
//
//	x' = α·x − β·x·y,  y' = δ·x·y − γ·y
//
// Fit b has true parameters drawn around (α, β, γ, δ) = (1.2, 0.5, 1.2,
// 0.35), M trajectories from random initial states, states observed at
// 20 times on [0, 8] with Gaussian noise; it starts from its truth
// perturbed by up to ±20% per parameter.
//
// Usage:
//
//	go run ./examples/concurrent-fits [-fits 8] [-per 4] [-steps 500]
//
// -fits takes any B ≥ 1 (1, 8, 64, 256, ...). It prints the worst
// relative parameter error over all fits, the first fits' parameters,
// and the time per step.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/gradsolve-go/gradsolve/fit"
	"github.com/gradsolve-go/gradsolve/internal/exflag"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/progress"
	"github.com/gradsolve-go/gradsolve/tape"
)

// lotkaVolterra is the predator–prey field with p = (α, β, γ, δ) per
// trajectory.
var lotkaVolterra = ode.Field{Name: "lotka-volterra", Dim: 2, Params: 4,
	F: func(_ tape.V, y, p []tape.V) []tape.V {
		x, z := y[0], y[1]
		xz := x.Mul(z)
		return []tape.V{
			p[0].Mul(x).Sub(p[1].Mul(xz)),
			p[3].Mul(xz).Sub(p[2].Mul(z)),
		}
	}}

var paramNames = []string{"alpha", "beta", "gamma", "delta"}

type config struct {
	fits, per, steps int
	noise, lr        float64
	seed             uint64
	quiet            bool
}

func main() {
	var c config
	flag.IntVar(&c.fits, "fits", 8, "number of independent fits B")
	flag.IntVar(&c.per, "per", 4, "trajectories per fit")
	flag.IntVar(&c.steps, "steps", 500, "Adam steps")
	flag.Float64Var(&c.noise, "noise", 0.01, "standard deviation of the observation noise")
	flag.Float64Var(&c.lr, "lr", 0.02, "Adam learning rate")
	flag.Uint64Var(&c.seed, "seed", 1, "random seed")
	flag.BoolVar(&c.quiet, "quiet", false, "no progress bar")
	flag.Parse()
	if err := c.check(flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "concurrent-fits:", err)
		os.Exit(2)
	}
	if _, err := run(context.Background(), c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "concurrent-fits:", err)
		os.Exit(1)
	}
}

type outcome struct {
	truth, got [][]float64 // [fit][4]
	worst      float64     // largest relative error
	res        *fit.Result
}

// check refuses a command line that run cannot use (args: what is left
// after the flags), naming the flag.
func (c config) check(args []string) error {
	return exflag.First(exflag.NoArgs(args),
		exflag.AtLeast("fits", c.fits, 1, "fit"), exflag.AtLeast("per", c.per, 1, "trajectory per fit"),
		exflag.AtLeast("steps", c.steps, 1, "step"), exflag.Positive("lr", c.lr), exflag.NonNegative("noise", c.noise))
}

func run(ctx context.Context, c config, out io.Writer) (*outcome, error) {
	if err := c.check(nil); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(c.seed, c.seed))
	n := c.fits * c.per
	ts := problems.LinSpace(make([]float64, 20), 0.4, 8)
	base := []float64{1.2, 0.5, 1.2, 0.35}
	o := &outcome{truth: make([][]float64, c.fits), got: make([][]float64, c.fits)}
	y0 := make([]float64, 2*n)
	p := make([]float64, 4*n)
	for b := range c.fits {
		o.truth[b] = make([]float64, 4)
		for j := range 4 {
			o.truth[b][j] = base[j] * (0.8 + 0.4*rng.Float64())
		}
		for i := b * c.per; i < (b+1)*c.per; i++ {
			y0[2*i], y0[2*i+1] = 0.5+1.5*rng.Float64(), 0.5+1.5*rng.Float64()
			copy(p[4*i:], o.truth[b])
		}
	}
	set := &ode.Settings{RelTol: 1e-8, AbsTol: 1e-10}
	prob := ode.Problem{Field: lotkaVolterra, Y0: y0, P: p, T1: 8, SaveAt: ts}
	sol, err := ode.Solve(prob, set)
	if err != nil {
		return nil, fmt.Errorf("simulating the data: %w", err)
	}
	data := sol.Ys
	for i := range data {
		data[i] += c.noise * rng.NormFloat64()
	}
	// Start every fit from its truth perturbed by up to ±20%.
	for b := range c.fits {
		var start [4]float64
		for j := range start {
			start[j] = o.truth[b][j] * (1 + 0.4*(rng.Float64()-0.5))
		}
		for i := b * c.per; i < (b+1)*c.per; i++ {
			copy(p[4*i:], start[:])
		}
	}
	loss := ode.Loss{Name: "sse", Data: data, DataDim: 2 * len(ts), F: func(_, ys, obs []tape.V) tape.V {
		s := ys[0].Sub(obs[0]).Square()
		for j := 1; j < len(ys); j++ {
			s = s.Add(ys[j].Sub(obs[j]).Square())
		}
		return s
	}}
	f, err := fit.New(fit.Problem{ODE: prob, Loss: loss, Vars: fit.Vars{P: []int{0, 1, 2, 3}}, Fits: c.fits}, set)
	if err != nil {
		return nil, err
	}
	bar := progress.New(c.steps, &progress.Settings{Quiet: c.quiet, Description: "concurrent-fits"})
	start := time.Now()
	res, err := f.Run(ctx, &fit.Settings{Steps: c.steps, Optimizer: &optim.Adam{LearnRate: c.lr}, Progress: bar})
	if err != nil {
		return nil, err
	}
	el := time.Since(start)
	o.res = res
	failed := 0
	for b := range c.fits {
		o.got[b] = append([]float64(nil), res.FitP(b)...)
		if res.FitStatus[b] == fit.Failed {
			// An isolated failure: this fit stopped (FitErr says why) and
			// the others went on without it.
			if failed++; failed <= 3 {
				fmt.Fprintf(out, "  %v\n", res.FitErr[b])
			}
			continue
		}
		for j := range 4 {
			o.worst = math.Max(o.worst, math.Abs(o.got[b][j]-o.truth[b][j])/o.truth[b][j])
		}
	}
	fmt.Fprintf(out, "concurrent-fits: %d fits × %d trajectories, %d Adam steps in %v (%.3g ms per step for all fits)\n",
		c.fits, c.per, res.Steps, el.Round(time.Millisecond), float64(el.Microseconds())/1e3/float64(max(res.Steps, 1)))
	fmt.Fprintf(out, "  loss %.4g -> %.4g; worst relative parameter error over the %d fits that finished %.3f%%\n", res.History[0], res.FinalLoss, c.fits-failed, 100*o.worst)
	for b := 0; b < c.fits && b < 4; b++ {
		fmt.Fprintf(out, "  fit %d:", b)
		for j, name := range paramNames {
			fmt.Fprintf(out, " %s %.4f (true %.4f)", name, o.got[b][j], o.truth[b][j])
		}
		fmt.Fprintln(out)
	}
	return o, nil
}
