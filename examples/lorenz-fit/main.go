// Command lorenz-fit recovers the parameter ρ of the Lorenz system from
// noisy observations of an ensemble of trajectories.
//
// It simulates N trajectories of the Lorenz system (σ = 10, ρ = 28,
// β = 8/3) from random initial states over t ∈ [0, 1], observes every
// state at ten save times with Gaussian noise, then fits ρ alone, starting
// from -rho0, by minimising the mean squared error of the saved states
// with Adam. Gradients are exact (record the adaptive mesh, differentiate
// its replay). With -fits B the ensemble is B independent fits (each with
// its own true ρ between 24 and 32 and its own N/B trajectories), all in
// one solve per step. (Far from the truth the loss of a chaotic system has
// local minima; a larger -offset can end in one.)
//
// Usage:
//
//	go run ./examples/lorenz-fit [-n 64] [-fits 1] [-steps 200] [-noise 0.1] [-plot loss.png]
//
// It prints the recovered ρ of each fit (up to 8), its relative error,
// the loss before and after, and the time per step.
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
	"github.com/gradsolve-go/gradsolve/plot"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/progress"
	"github.com/gradsolve-go/gradsolve/tape"
)

// config holds the command's flags.
type config struct {
	n, fits, steps int
	noise, offset  float64
	lr             float64
	remesh         int
	seed           uint64
	plot           string
	quiet          bool
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 64, "trajectories")
	flag.IntVar(&c.fits, "fits", 1, "independent fits (must divide n)")
	flag.IntVar(&c.steps, "steps", 200, "Adam steps")
	flag.Float64Var(&c.noise, "noise", 0.1, "standard deviation of the observation noise")
	flag.Float64Var(&c.offset, "offset", 3, "each fit starts from its true rho minus this")
	flag.Float64Var(&c.lr, "lr", 0.1, "Adam learning rate")
	flag.IntVar(&c.remesh, "remesh", 0, "record a new mesh every K steps (0: every step, -1: once)")
	flag.Uint64Var(&c.seed, "seed", 1, "random seed")
	flag.StringVar(&c.plot, "plot", "", "write the loss curve to this file (.png, .svg)")
	flag.BoolVar(&c.quiet, "quiet", false, "no progress bar")
	flag.Parse()
	if err := c.check(flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "lorenz-fit:", err)
		os.Exit(2)
	}
	if _, err := run(context.Background(), c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lorenz-fit:", err)
		os.Exit(1)
	}
}

// outcome is what run found: each fit's true and recovered ρ.
type outcome struct {
	truth, rho []float64
	res        *fit.Result
}

// saveTimes are the observation times.
var saveTimes = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}

// mse is the mean over trajectories of the squared error of the saved
// states against the observations (data row: K·3 values).
func mse(data []float64) ode.Loss {
	return ode.Loss{Name: "mse", Data: data, DataDim: 3 * len(saveTimes), Mean: true,
		F: func(_, ys, obs []tape.V) tape.V {
			s := ys[0].Sub(obs[0]).Square()
			for j := 1; j < len(ys); j++ {
				s = s.Add(ys[j].Sub(obs[j]).Square())
			}
			return s.MulC(1 / float64(len(ys)))
		}}
}

// check refuses a command line that run cannot use (args: what is left
// after the flags), naming the flag.
func (c config) check(args []string) error {
	return exflag.First(exflag.NoArgs(args),
		exflag.AtLeast("n", c.n, 1, "trajectory"), exflag.AtLeast("fits", c.fits, 1, "fit"),
		exflag.AtLeast("steps", c.steps, 1, "step"), exflag.Positive("lr", c.lr), exflag.NonNegative("noise", c.noise),
		exflag.Finite("offset", c.offset), exflag.AtLeast("remesh", c.remesh, -1, "(-1: record once; 0: every step; K: every K steps)"),
		exflag.Writable("plot", c.plot, plot.Formats))
}

func run(ctx context.Context, c config, out io.Writer) (*outcome, error) {
	if err := c.check(nil); err != nil {
		return nil, err
	}
	if c.fits < 1 || c.n%c.fits != 0 {
		return nil, fmt.Errorf("-fits %d must divide -n %d", c.fits, c.n)
	}
	rng := rand.New(rand.NewPCG(c.seed, c.seed))
	lz := problems.Lorenz()
	per := c.n / c.fits
	truth := make([]float64, c.fits)
	for b := range truth {
		truth[b] = 28
		if c.fits > 1 {
			truth[b] = 24 + 8*rng.Float64()
		}
	}
	y0 := make([]float64, 3*c.n)
	p := make([]float64, 3*c.n)
	for i := range c.n {
		y0[3*i], y0[3*i+1], y0[3*i+2] = 10*rng.Float64()-5, 10*rng.Float64()-5, 15+10*rng.Float64()
		p[3*i], p[3*i+1], p[3*i+2] = 10, truth[i/per], 8.0/3
	}
	set := &ode.Settings{RelTol: 1e-8, AbsTol: 1e-8}
	prob := ode.Problem{Field: lz.Field, Y0: y0, P: p, T1: 1, SaveAt: saveTimes}
	sol, err := ode.Solve(prob, set)
	if err != nil {
		return nil, fmt.Errorf("simulating the data: %w", err)
	}
	data := sol.Ys // [n×K×3], the data row of each trajectory
	for i := range data {
		data[i] += c.noise * rng.NormFloat64()
	}
	for i := range c.n {
		p[3*i+1] = truth[i/per] - c.offset
	}
	f, err := fit.New(fit.Problem{ODE: prob, Loss: mse(data), Vars: fit.Vars{P: []int{1}}, Fits: c.fits}, set)
	if err != nil {
		return nil, err
	}
	bar := progress.New(c.steps, &progress.Settings{Quiet: c.quiet, Description: "lorenz-fit"})
	start := time.Now()
	res, err := f.Run(ctx, &fit.Settings{Steps: c.steps, Optimizer: &optim.Adam{LearnRate: c.lr}, Remesh: c.remesh, Progress: bar})
	if err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	o := &outcome{truth: truth, rho: make([]float64, c.fits), res: res}
	worst := 0.0
	for b := range o.rho {
		o.rho[b] = res.FitP(b)[0]
		worst = math.Max(worst, math.Abs(o.rho[b]-truth[b])/truth[b])
	}
	fmt.Fprintf(out, "lorenz-fit: %d trajectories, %d fit(s), noise %g, %d Adam steps (%v), %d meshes recorded\n",
		c.n, c.fits, c.noise, res.Steps, res.Status, res.Records)
	for b := 0; b < c.fits && b < 8; b++ {
		fmt.Fprintf(out, "  fit %d: rho = %.4f, true %.4f, error %.3f%%\n", b, o.rho[b], truth[b], 100*math.Abs(o.rho[b]-truth[b])/truth[b])
	}
	fmt.Fprintf(out, "  worst relative error %.3f%%; loss %.4g -> %.4g; %.3g ms per step (gradient + update)\n",
		100*worst, res.History[0], res.FinalLoss, float64(elapsed.Microseconds())/1e3/float64(max(res.Steps, 1)))
	if c.plot != "" {
		fig, err := res.Figure()
		if err != nil {
			return o, err
		}
		if err := fig.Save(c.plot); err != nil {
			return o, err
		}
		fmt.Fprintf(out, "  loss curve written to %s\n", c.plot)
	}
	return o, nil
}
