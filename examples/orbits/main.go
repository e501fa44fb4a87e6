// Command orbits fits the parameters of a galactic potential, and the
// unknown initial velocities of the stars, from observed positions of an
// ensemble of orbits.
//
// The potential is the flattened logarithmic potential of Binney &
// Tremaine (Galactic Dynamics, 2nd ed., eq. 2.71b) in the plane of
// symmetry (x, z):
//
//	Φ(x, z) = ½·v0²·ln(Rc² + x² + z²/q²)
//
// with circular speed v0, core radius Rc and axis ratio q. The field is
// the planar orbit equation, as problems.Kepler's, with the force −∇Φ:
//
//	x'' = −v0²·x / D,  z'' = −v0²·z / (q²·D),  D = Rc² + x² + z²/q²
//
// Each of -n stars starts at a known position with an unknown velocity;
// its position is observed at 25 times on [0, 12] with Gaussian noise.
// The fit adjusts (v0, Rc, q), shared by all orbits (one fit, the three
// parameter columns tied), and each star's initial velocity (per
// trajectory), starting from the potential (1.2, 0.7, 0.65) and the
// circular velocities of a spherical guess.
//
// Usage:
//
//	go run ./examples/orbits [-n 32] [-steps 300] [-noise 0.005] [-plot orbits.png]
//
// It prints the recovered parameters with their relative errors.
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

// logPotential is the orbit field in the flattened logarithmic potential,
// state (x, z, vx, vz), p = (v0, Rc, q).
var logPotential = ode.Field{Name: "log-potential", Dim: 4, Params: 3,
	F: func(_ tape.V, y, p []tape.V) []tape.V {
		x, z := y[0], y[1]
		v0, rc, q := p[0], p[1], p[2]
		zq := z.Div(q)
		d := rc.Square().Add(x.Square()).Add(zq.Square())
		k := v0.Square().Div(d)
		return []tape.V{
			y[2],
			y[3],
			k.Mul(x).Neg(),
			k.Mul(zq).Div(q).Neg(),
		}
	}}

var (
	truth = []float64{1, 0.5, 0.8}    // v0, Rc, q
	guess = []float64{1.2, 0.7, 0.65} // the fit's starting potential
	names = []string{"v0", "Rc", "q"}
)

type config struct {
	n, steps int
	noise    float64
	lr       float64
	seed     uint64
	plot     string
	quiet    bool
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 32, "orbits")
	flag.IntVar(&c.steps, "steps", 300, "Adam steps")
	flag.Float64Var(&c.noise, "noise", 0.005, "standard deviation of the position noise")
	flag.Float64Var(&c.lr, "lr", 0.03, "Adam learning rate (cosine decay to a tenth)")
	flag.Uint64Var(&c.seed, "seed", 1, "random seed")
	flag.StringVar(&c.plot, "plot", "", "write the fitted and observed orbits to this file (.png, .svg)")
	flag.BoolVar(&c.quiet, "quiet", false, "no progress bar")
	flag.Parse()
	if err := c.check(flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "orbits:", err)
		os.Exit(2)
	}
	if _, err := run(context.Background(), c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "orbits:", err)
		os.Exit(1)
	}
}

type outcome struct {
	got   []float64 // recovered (v0, Rc, q)
	worst float64   // largest relative error
	res   *fit.Result
}

// check refuses a command line that run cannot use (args: what is left
// after the flags), naming the flag.
func (c config) check(args []string) error {
	return exflag.First(exflag.NoArgs(args),
		exflag.AtLeast("n", c.n, 1, "star"), exflag.AtLeast("steps", c.steps, 1, "step"), exflag.Positive("lr", c.lr),
		exflag.NonNegative("noise", c.noise), exflag.Writable("plot", c.plot, plot.Formats))
}

func run(ctx context.Context, c config, out io.Writer) (*outcome, error) {
	if err := c.check(nil); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(c.seed, c.seed))
	ts := problems.LinSpace(make([]float64, 25), 0.5, 12)
	y0 := make([]float64, 4*c.n)
	for i := range c.n {
		r := 0.5 + 1.5*rng.Float64()
		phi := 2 * math.Pi * rng.Float64()
		x, z := r*math.Cos(phi), r*math.Sin(phi)
		// Roughly circular speed, with a random direction tilt and size.
		v := truth[0] * r / math.Sqrt(truth[1]*truth[1]+r*r) * (0.7 + 0.4*rng.Float64())
		a := phi + math.Pi/2 + 0.3*(rng.Float64()-0.5)
		y0[4*i], y0[4*i+1], y0[4*i+2], y0[4*i+3] = x, z, v*math.Cos(a), v*math.Sin(a)
	}
	set := &ode.Settings{RelTol: 1e-8, AbsTol: 1e-10}
	prob := ode.Problem{Field: logPotential, Y0: y0, P: truth, T1: 12, SaveAt: ts}
	sol, err := ode.Solve(prob, set)
	if err != nil {
		return nil, fmt.Errorf("simulating the orbits: %w", err)
	}
	// Observed positions: (x, z) at every save time, with noise.
	K := len(ts)
	data := make([]float64, 0, c.n*K*2)
	for i := range c.n {
		for k := range K {
			row := sol.Ys[(i*K+k)*4:]
			data = append(data, row[0]+c.noise*rng.NormFloat64(), row[1]+c.noise*rng.NormFloat64())
		}
	}
	// The starting guess: the potential guess and, for every star, the
	// circular velocity of the spherical guess at its radius.
	start := prob
	start.P = guess
	start.Y0 = append([]float64(nil), y0...)
	for i := range c.n {
		x, z := y0[4*i], y0[4*i+1]
		r := math.Hypot(x, z)
		v := guess[0] * r / math.Sqrt(guess[1]*guess[1]+r*r)
		start.Y0[4*i+2], start.Y0[4*i+3] = -v*z/r, v*x/r
	}
	loss := ode.Loss{Name: "positions", Data: data, DataDim: 2 * K, Mean: true, F: func(_, ys, obs []tape.V) tape.V {
		var s tape.V
		for k := range K {
			e := ys[4*k].Sub(obs[2*k]).Square().Add(ys[4*k+1].Sub(obs[2*k+1]).Square())
			if k == 0 {
				s = e
			} else {
				s = s.Add(e)
			}
		}
		return s
	}}
	f, err := fit.New(fit.Problem{ODE: start, Loss: loss, Vars: fit.Vars{P: []int{0, 1, 2}, Y0: []int{2, 3}}}, set)
	if err != nil {
		return nil, err
	}
	bar := progress.New(c.steps, &progress.Settings{Quiet: c.quiet, Description: "orbits"})
	opt := &optim.Adam{Schedule: optim.WarmupCosine{Init: c.lr, Peak: c.lr, Final: c.lr / 10, Steps: c.steps}}
	t0 := time.Now()
	res, err := f.Run(ctx, &fit.Settings{Steps: c.steps, Optimizer: opt, Progress: bar})
	if err != nil {
		return nil, err
	}
	el := time.Since(t0)
	o := &outcome{got: append([]float64(nil), res.FitP(0)...), res: res}
	fmt.Fprintf(out, "orbits: %d stars, %d positions each, %d Adam steps in %v; loss %.4g -> %.4g\n",
		c.n, K, res.Steps, el.Round(time.Millisecond), res.History[0], res.FinalLoss)
	for j, name := range names {
		e := math.Abs(o.got[j]-truth[j]) / truth[j]
		o.worst = math.Max(o.worst, e)
		fmt.Fprintf(out, "  %-2s = %.4f (true %.4f, start %.4f): error %.2f%%\n", name, o.got[j], truth[j], guess[j], 100*e)
	}
	if c.plot != "" {
		if err := plotOrbits(c.plot, f, res); err != nil {
			return o, err
		}
		fmt.Fprintf(out, "  orbits written to %s\n", c.plot)
	}
	return o, nil
}

// plotOrbits draws the fitted orbits of the first four stars (all of
// them if there are fewer).
func plotOrbits(path string, f *fit.Fitter, res *fit.Result) error {
	p := res.Problem
	p.SaveAt = problems.LinSpace(make([]float64, 400), 0, p.T1)
	sol, err := f.Solver().Solve(&p)
	if err != nil {
		return err
	}
	stars := make([]int, min(4, sol.N))
	for i := range stars {
		stars[i] = i
	}
	fig, err := plot.Phase(sol, stars, 0, 1, []string{"x", "z"})
	if err != nil {
		return err
	}
	fig.Plot.Title.Text = "fitted orbits"
	return fig.Save(path)
}
