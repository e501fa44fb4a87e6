package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gradsolve-go/gradsolve/fit"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/problems"
)

const fitHelp = `Usage: gradsolve fit -fit NAMES [-data obs.csv] [flags]

Fits chosen parameters of a built-in problem (see gradsolve problems) to
observed states with Adam, taking exact gradients of the squared error of
the states at the observation times (record the adaptive mesh, differentiate
its replay). It prints the fitted values, the loss before and after and the
timing; -plot writes the loss curve, -json one JSON object, -format csv one
row per trajectory, and -out FILE writes the output to FILE (the format
from its extension, .csv or .json, unless -format says; the readable
report then goes to stdout). On a terminal, a fit that lasts more than a
second shows a progress bar on stderr (-quiet: none). -method auto and
-engine work as for solve and grad (gradsolve help solve); a gradient
refused because a trajectory is stiff for the explicit method ends the fit
with status stiff and exit status 1.

What is fitted (-fit, comma list): pK or a parameter's name (as rho) for
per-trajectory parameter K, one value per fit shared by its trajectories;
y0K for initial-state component K, one value per trajectory. The other
parameters keep the values of -p / -y0 (default: the problem's). The
output has the fitted parameters of every fit and the fitted initial
states of every trajectory (the report lists the first 16 of each; csv and
json list all).

Data (-data FILE): a CSV file with one row per observation and an optional
header row (a first row whose first field is not a number is the header);
lines starting with # are comments:

	traj,t,y0,y1,...      trajectory index (0-based), time, then the Dim
	0,0.1,1.02,0.98,...   observed state components; an empty cell is a
	0,0.2,...             missing value

Every row has 2 + Dim fields; the index is an integer from 0 to n − 1 and
every trajectory from 0 to n − 1 has a row (n is the largest index + 1,
or -n if given); times and values are finite numbers. A repeated
trajectory and time is a repeated measurement: each row counts in the
loss (a note names the lines). The save times are the distinct times of
the file. Without -data the data are synthetic: the problem is solved at
-p / -y0 (the truth) at -saveat times (default: 10 equal steps ending at
t1), -noise adds Gaussian noise, and the fitted values start at -start
(default: the truth times 1.1, or 0.1 where the truth is 0; each fit's
own where -vary sweeps a fitted
parameter; a fit has one value of it, so it then needs one trajectory per
fit, -fits n). Observations only at t0 see the initial states alone:
with them, fitting a parameter is a command-line error.

Loss: the mean over trajectories of the sum over observations of
(y − observed)², missing values left out.

JSON (-json): command, problem, method, engine, n, fits, fit (the names),
data, observations (the observed values, repeated ones included), truth
(synthetic data: the true values, trajectory 0's: its y0K, and fit 0's
of a parameter -vary sweeps, which the report lists for each fit), status ("max
steps" when all -steps steps ran, the fit's normal end; "stiff", or the
error text, when it failed), error (null, or the error text), steps,
records, loss_first, loss_final (after the last step), loss_best,
best_step (the steps taken when the best loss was seen, 0 for the start),
fitted (per fit, the values in -fit order; y0K: the fit's first
trajectory's), fitted_y0 (per trajectory, its fitted y0K values; null if
none is fitted), truth_y0 (synthetic data: per trajectory, its true y0K
values), history (the loss before each step: history[k] after k steps),
time_ms, record_ms, grad_ms and device_steps (the steps run with the fit
in GPU memory: 0 on the CPU engine).

Numbers: -steps is at least 1 (the loss is evaluated before the first step
and after the last); -lr is positive and finite; -noise and -clip are zero
or positive and finite; -fits is at least 1 and divides n; -remesh is -1
or more. A value outside these is a command-line error (exit status 2).

Files: nothing is written until the command line and -data are valid;
-out and -plot are written through temporary files renamed into place when
complete, so an existing file is replaced whole or left as it was (a fit
interrupted by SIGINT or SIGTERM leaves no file and no temporary file);
-out, -plot and -data must name different files.

Examples:

	gradsolve fit -problem lorenz -fit rho -n 16 -start 25 -noise 0.1 -plot loss.png
	gradsolve fit -problem lorenz -fit p1 -data obs.csv -p 10,25,2.6666666666666665 -json
	gradsolve fit -problem vdp -fit mu,y01 -n 8 -vary y00=1:3 -steps 300 -lr 0.02 -out fit.csv
`

// fitOptions are fit's own flags; the problem and solver flags are those
// of solve (options).
type fitOptions struct {
	fit, data, start, plot string
	fits, steps            int
	lr, noise, clip        float64
	remesh                 int
	seed                   uint64
}

// fitVar is one fitted quantity.
type fitVar struct {
	y0   bool // an initial-state component (else a per-trajectory parameter)
	k    int
	name string
}

// newFitFlagSet returns fit's flags: solve's (newFlagSet) and fit's own,
// set into o and fo. Its Usage is fit's help, the flags included.
func newFitFlagSet(o *options, fo *fitOptions, out io.Writer) *flag.FlagSet {
	fs := newFlagSet("fit", o, out)
	fs.StringVar(&fo.fit, "fit", "", "comma `list` of what to fit: pK or a parameter name, y0K")
	fs.StringVar(&fo.data, "data", "", "observations, a CSV `file` (traj,t,y0,...; see Data above); none: synthetic data")
	fs.StringVar(&fo.start, "start", "", "starting values of the fitted quantities, comma `list` in -fit order (synthetic data; default: truth × 1.1, or 0.1 for a truth of 0)")
	fs.Float64Var(&fo.noise, "noise", 0, "standard deviation of the Gaussian noise of synthetic data, 0 or more")
	fs.IntVar(&fo.fits, "fits", 1, "independent fits B, at least 1, dividing n; each owns n/B consecutive trajectories")
	fs.IntVar(&fo.steps, "steps", 200, "Adam steps, at least 1")
	fs.Float64Var(&fo.lr, "lr", 0.05, "Adam learning rate, positive")
	fs.Float64Var(&fo.clip, "clip", 0, "clip each fit's gradient to this norm (0: no clipping)")
	fs.IntVar(&fo.remesh, "remesh", 0, "record a new mesh every K steps (0: every step; -1: once)")
	fs.Uint64Var(&fo.seed, "seed", 1, "seed of the synthetic noise")
	fs.StringVar(&fo.plot, "plot", "", "write the loss curve to `FILE` (.png, .svg or .pdf, by extension)")
	fs.Usage = func() { fitUsage(fs.Output(), fs) }
	return fs
}

// fitCommand runs "gradsolve fit".
func fitCommand(args []string, stdout, stderr io.Writer, su setup) int {
	o := &options{}
	fo := &fitOptions{}
	fs := newFitFlagSet(o, fo, stderr)
	fs.SetOutput(io.Discard)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fitUsage(stderr, fs)
			return exitOK
		}
		fmt.Fprintf(stderr, "gradsolve fit: %v\n", err)
		fmt.Fprintln(stderr, "Run 'gradsolve help fit' for usage.")
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gradsolve fit: unexpected argument %q (flags start with -; lists are comma-separated without spaces)\n", fs.Arg(0))
		fmt.Fprintln(stderr, "Run 'gradsolve help fit' for usage.")
		return exitUsage
	}
	o.set = make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	err := runFit(context.Background(), o, fo, stdout, stderr, su)
	var u *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "gradsolve fit: %v\n", err)
		fmt.Fprintln(stderr, "Run 'gradsolve help fit' for usage.")
		return exitUsage
	}
	// (The library's "fit: " prefix would follow "gradsolve fit: ".)
	fmt.Fprintf(stderr, "gradsolve fit: %s\n", strings.TrimPrefix(errorText(err), "fit: "))
	return exitFail
}

// countMeshes returns "1 mesh" or "n meshes".
func countMeshes(n int) string {
	if n == 1 {
		return "1 mesh"
	}
	return fmt.Sprintf("%d meshes", n)
}

// check checks fit's own numeric flags (the solver's are checked by
// options.build). Every error is a *usageError naming the flag and its
// valid range.
func (fo *fitOptions) check() error {
	switch {
	case fo.steps < 1:
		return usagef("-steps: %d; want 1 or more Adam steps (the loss is evaluated before the first step and after the last)", fo.steps)
	case !(fo.lr > 0) || !finite(fo.lr):
		return usagef("-lr: %v; want a positive finite learning rate", fo.lr)
	case !(fo.noise >= 0) || !finite(fo.noise):
		return usagef("-noise: %v; want a standard deviation of 0 or more, finite", fo.noise)
	case !(fo.clip >= 0) || !finite(fo.clip):
		return usagef("-clip: %v; want a gradient norm of 0 (no clipping) or more, finite", fo.clip)
	case fo.fits < 1:
		return usagef("-fits: %d; want 1 or more independent fits (dividing -n)", fo.fits)
	case fo.remesh < -1:
		return usagef("-remesh: %d; want -1 (record once), 0 (every step) or K > 0 (every K steps)", fo.remesh)
	}
	return nil
}

func fitUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, fitHelp)
	fmt.Fprint(w, "\nFlags:\n\n")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// parseFitVars parses -fit against the problem.
func parseFitVars(s string, pr problems.Problem) ([]fitVar, error) {
	if strings.TrimSpace(s) == "" {
		return nil, usagef("-fit: say what to fit, as -fit p1 or -fit rho,y00")
	}
	names := paramNames(pr)
	var vars []fitVar
	seen := map[string]bool{}
	for _, tok := range strings.Split(s, ",") {
		tok = strings.TrimSpace(tok)
		var v fitVar
		switch {
		case slices.Contains(names, tok):
			v = fitVar{k: slices.Index(names, tok), name: tok}
		case strings.HasPrefix(tok, "y0"):
			k, err := strconv.Atoi(tok[2:])
			if err != nil || k < 0 || k >= pr.Field.Dim {
				return nil, usagef("-fit: %q: %s has state components y00 to y0%d", tok, pr.Name, pr.Field.Dim-1)
			}
			v = fitVar{y0: true, k: k, name: tok}
		case strings.HasPrefix(tok, "p"):
			k, err := strconv.Atoi(tok[1:])
			if err != nil || k < 0 || k >= pr.Field.Params {
				return nil, usagef("-fit: %q: %s has parameters p0 to p%d (%s)", tok, pr.Name, pr.Field.Params-1, strings.Join(names, ", "))
			}
			v = fitVar{k: k, name: names[k]}
		default:
			return nil, usagef("-fit: %q is neither pK, a parameter name (%s) nor y0K", tok, strings.Join(names, ", "))
		}
		key := fmt.Sprintf("%v%d", v.y0, v.k)
		if seen[key] {
			return nil, usagef("-fit: %s is listed twice", tok)
		}
		seen[key] = true
		vars = append(vars, v)
	}
	return vars, nil
}

// defaultStart is the default starting value of a fitted quantity whose
// true value is truth: truth × 1.1, or 0.1 where the truth is 0 (which
// × 1.1 would start at the truth: vdp's y01, every initial velocity).
func defaultStart(truth float64) float64 {
	if truth == 0 {
		return 0.1
	}
	return 1.1 * truth
}

// fitTruths returns, for synthetic data, each fit's true values of the
// fitted parameters (in vars order; NaN for y0K, fitted per trajectory),
// or a command-line error where a -vary sweep of a fitted parameter gives
// the trajectories of one fit different true values, which the fit's one
// value could not match.
func fitTruths(prob ode.Problem, vars []fitVar, fits int) ([][]float64, error) {
	np := prob.Field.Params
	per := prob.N / fits
	val := func(r, k int) float64 {
		if len(prob.P) == np {
			return prob.P[k]
		}
		return prob.P[r*np+k]
	}
	out := make([][]float64, fits)
	for b := range out {
		out[b] = make([]float64, len(vars))
		for i, v := range vars {
			if v.y0 {
				out[b][i] = math.NaN()
				continue
			}
			out[b][i] = val(b*per, v.k)
			for r := b*per + 1; r < (b+1)*per; r++ {
				if val(r, v.k) != out[b][i] {
					return nil, usagef("-vary gives %s a different value in each trajectory, but -fit fits one %s per fit of %d trajectories, which could not match them; give -fits %d (one trajectory per fit), or leave %s out of -vary",
						v.name, v.name, per, prob.N, v.name)
				}
			}
		}
	}
	return out, nil
}

// checkObservedAfterT0 refuses observation times (save times; fromData:
// -data's) that all lie at t0 while parameters are fitted: the states at
// t0 are the initial states whatever the parameters, so the loss could not
// change with them (such a fit ran to "loss 0 -> 0" and returned its
// start). Observations at t0 do inform fitted initial states.
func checkObservedAfterT0(times []float64, t0, t1 float64, vars []fitVar, fromData bool) error {
	if len(times) == 0 || times[len(times)-1] > t0 {
		return nil
	}
	var params []string
	for _, v := range vars {
		if !v.y0 {
			params = append(params, v.name)
		}
	}
	if len(params) == 0 {
		return nil
	}
	what, them := "parameter "+params[0], "it"
	if len(params) > 1 {
		what, them = "parameters "+strings.Join(params, ", "), "them"
	}
	why := fmt.Sprintf("the states at t0 are the initial states, which do not depend on the fitted %s, so the loss could not change with %s", what, them)
	if fromData {
		return usagef("-data: every observation is at t0 = %v: %s; give observations after t0 (or an earlier -t0)", t0, why)
	}
	return usagef("-saveat: every time is t0 = %v: %s; give times after t0, as -saveat %v,%v (or leave -saveat out: 10 times up to -t1)", t0, why, t0+(t1-t0)/2, t1)
}

// fitOutcome is what a fit produced, for its outputs.
type fitOutcome struct {
	name, engine string
	j            *job
	vars         []fitVar
	fo           *fitOptions
	ob           *observations
	res          *fit.Result
	err          error       // the fit's failure, nil on success
	fitted       [][]float64 // per fit: the fitted values in -fit order (y0K: the fit's first trajectory's)
	fittedY0     [][]float64 // per trajectory: its fitted y0K values, in -fit order; nil if no y0K is fitted
	truth        []float64   // synthetic data only: the true values, per var (trajectory 0's)
	truthY0      [][]float64 // synthetic data only: per trajectory, its true y0K values
	truthFit     [][]float64 // synthetic data only: per fit, its true values (vars order; y0K: NaN)
	written      []string    // the lines of the report on the files written
}

// runFit validates the whole command line and reads -data, then creates
// the output files, runs the fit and writes its outputs.
func runFit(ctx context.Context, o *options, fo *fitOptions, stdout, stderr io.Writer, su setup) error {
	pr, err := problems.ByName(strings.TrimSpace(o.problem))
	if err != nil {
		return problemError(o.problem, err)
	}
	vars, err := parseFitVars(fo.fit, pr)
	if err != nil {
		return err
	}
	if err := fo.check(); err != nil {
		return err
	}
	if o.set["out"] && strings.TrimSpace(o.out) == "" {
		return usagef("-out: empty file name")
	}
	out := ""
	if !writesStdout(o.out) {
		out = o.out
	}
	if fo.plot != "" {
		if _, err := figureFormat(fo.plot); err != nil {
			return usagef("-plot: %v", err)
		}
	}
	if err := checkFiles(fileArg{flag: "-data", path: fo.data, input: true}, fileArg{flag: "-out", path: out}, fileArg{flag: "-plot", path: fo.plot}); err != nil {
		return err
	}
	var ob *observations
	if fo.data != "" {
		if o.set["saveat"] {
			return usagef("-saveat: with -data the save times are the file's")
		}
		if fo.start != "" {
			return usagef("-start: with -data the fit starts from -p and -y0")
		}
		n := 0
		if o.set["n"] {
			if o.n < 1 {
				return usagef("-n: %d; want at least 1 trajectory", o.n)
			}
			n = o.n
		}
		f, err := os.Open(fo.data)
		if err != nil {
			return usagef("-data: %v", err)
		}
		var notes []string
		ob, notes, err = readObservations(f, pr.Field.Dim, n, su.lim)
		f.Close()
		if err != nil {
			return usagef("-data %s: %v", fo.data, err)
		}
		for _, note := range notes {
			fmt.Fprintf(stderr, "gradsolve fit: -data %s: %s\n", fo.data, note)
		}
		o.n = ob.n
	}
	j, err := o.build(su.lim)
	if err != nil {
		return err
	}
	prob := j.prob
	d, np := prob.Field.Dim, prob.Field.Params
	if prob.N%fo.fits != 0 {
		return usagef("-fits %d must divide -n %d", fo.fits, prob.N)
	}
	var start []float64
	if fo.start != "" {
		if ob != nil {
			return usagef("-start: with -data the fit starts from -p and -y0")
		}
		if start, err = parseFloats(fo.start); err != nil {
			return usagef("-start: %v", err)
		}
		if len(start) != len(vars) {
			return usagef("-start has %s for %s", count(len(start), "value"), count(len(vars), "fitted quantity"))
		}
	}
	if ob != nil {
		prob.SaveAt = ob.times
		if prob.SaveAt[0] < prob.T0 || prob.SaveAt[len(prob.SaveAt)-1] > prob.T1 {
			return usagef("-data: the times run from %v to %v, beyond [t0, t1] = [%v, %v]; set -t0/-t1", prob.SaveAt[0], prob.SaveAt[len(prob.SaveAt)-1], prob.T0, prob.T1)
		}
	}
	if err := checkObservedAfterT0(prob.SaveAt, prob.T0, prob.T1, vars, ob != nil); err != nil {
		return err
	}
	var truthFit [][]float64 // synthetic data: per fit, the true values of the fitted parameters (vars order; y0K: NaN)
	if ob == nil {
		if truthFit, err = fitTruths(prob, vars, fo.fits); err != nil {
			return err
		}
	}

	// The command line is valid: create the outputs, then work.
	var plotFile, outFile *atomicFile
	if fo.plot != "" {
		if plotFile, err = createAtomic(fo.plot); err != nil {
			return fmt.Errorf("-plot: %v", err)
		}
		defer plotFile.Abort()
	}
	if out != "" {
		if outFile, err = createAtomic(out); err != nil {
			return fmt.Errorf("-out: %v", err)
		}
		defer outFile.Abort()
	}

	var truth []float64
	if ob == nil {
		if prob.SaveAt == nil {
			prob.SaveAt = problems.LinSpace(make([]float64, 10), prob.T0+(prob.T1-prob.T0)/10, prob.T1)
		}
		sol, err := ode.Solve(prob, &j.set)
		if err != nil {
			return fmt.Errorf("simulating the data: %w", err)
		}
		rng := rand.New(rand.NewPCG(fo.seed, fo.seed))
		ob = &observations{n: prob.N, dim: d, times: prob.SaveAt, value: sol.Ys, weight: make([]float64, len(sol.Ys)), count: len(sol.Ys)}
		for i := range ob.value {
			ob.value[i] += fo.noise * rng.NormFloat64()
			ob.weight[i] = 1
			if !finite(ob.value[i]) {
				return usagef("-noise: %v: the synthetic data overflow float64 (an observation is %v); want a smaller standard deviation", fo.noise, ob.value[i])
			}
		}
		for _, v := range vars {
			if v.y0 {
				truth = append(truth, prob.Y0[v.k])
			} else {
				truth = append(truth, prob.P[v.k])
			}
		}
		given := start != nil
		if !given {
			start = make([]float64, len(vars))
			for i, t := range truth {
				start[i] = defaultStart(t)
			}
		}
		prob.Y0, prob.P = slices.Clone(prob.Y0), slices.Clone(prob.P)
		per := prob.N / fo.fits
		for i, v := range vars {
			for r := range prob.N {
				if v.y0 {
					prob.Y0[r*d+v.k] = start[i]
				} else if !given {
					// Each fit from its own truth × 1.1 (-vary of
					// the parameter gives fits their own).
					prob.P[r*np+v.k] = defaultStart(truthFit[r/per][i])
				} else {
					prob.P[r*np+v.k] = start[i]
				}
			}
		}
	}
	fv := fit.Vars{}
	for _, v := range vars {
		if v.y0 {
			fv.Y0 = append(fv.Y0, v.k)
		} else {
			fv.P = append(fv.P, v.k)
		}
	}
	fr, err := fit.New(fit.Problem{ODE: prob, Loss: ob.loss(), Vars: fv, Fits: fo.fits}, &j.set)
	if err != nil {
		return err
	}
	bar := newBar(fo.steps, o.quiet || (o.format != formatHuman && out == ""), stderr, "fit "+pr.Name, "steps", su.bars)
	res, err := fr.Run(ctx, &fit.Settings{Steps: fo.steps, Optimizer: &optim.Adam{LearnRate: fo.lr}, Remesh: fo.remesh, ClipNorm: fo.clip, Progress: bar})
	bar.Finish()
	if err != nil && res == nil {
		return err
	}
	fo2 := &fitOutcome{name: pr.Name, engine: fr.Solver().Engine(), j: j, vars: vars, fo: fo, ob: ob, res: res, err: err, truth: truth, truthFit: truthFit}
	fo2.collect(prob.N, d, np)
	if truth != nil && fo2.fittedY0 != nil {
		fo2.truthY0 = make([][]float64, prob.N)
		for i := range prob.N {
			for _, v := range vars {
				if v.y0 {
					fo2.truthY0[i] = append(fo2.truthY0[i], j.prob.Y0[i*d+v.k])
				}
			}
		}
	}

	var werr error // the first error writing an output
	if plotFile != nil && len(res.History) > 0 {
		if perr := writeLossCurve(plotFile, res); perr != nil {
			werr = fmt.Errorf("-plot: %v", perr)
		} else {
			fo2.written = append(fo2.written, "loss curve written to "+fo.plot)
		}
	}
	if outFile != nil {
		e := fo2.write(outFile, o.format)
		if e == nil {
			e = outFile.Commit()
		} else {
			e = fmt.Errorf("writing %s: %v", out, e)
		}
		if e != nil && werr == nil {
			werr = e
		}
		if e == nil {
			fo2.written = append(fo2.written, fmt.Sprintf("output written to %s (%s, %s)", out, o.format, count(prob.N, "trajectory")))
		}
		if o.format != formatHuman {
			// The data went to the file; the readable report goes to stdout.
			if e := fo2.write(stdout, formatHuman); e != nil && werr == nil {
				werr = fmt.Errorf("writing the report: %v", e)
			}
		}
	} else if e := fo2.write(stdout, o.format); e != nil && werr == nil {
		werr = fmt.Errorf("writing the output: %v", e)
	}
	if werr != nil {
		if err != nil {
			return fmt.Errorf("%v; %v", err, werr)
		}
		return werr
	}
	return err
}

// collect gathers the fitted values of every fit and every trajectory.
func (f *fitOutcome) collect(n, d, np int) {
	res := f.res
	per := n / f.fo.fits
	f.fitted = make([][]float64, f.fo.fits)
	for b := range f.fitted {
		i := b * per
		for _, v := range f.vars {
			if v.y0 {
				f.fitted[b] = append(f.fitted[b], res.Problem.Y0[i*d+v.k])
			} else {
				f.fitted[b] = append(f.fitted[b], res.Problem.P[i*np+v.k])
			}
		}
	}
	for _, v := range f.vars {
		if !v.y0 {
			continue
		}
		if f.fittedY0 == nil {
			f.fittedY0 = make([][]float64, n)
		}
		for i := range n {
			f.fittedY0[i] = append(f.fittedY0[i], res.Problem.Y0[i*d+v.k])
		}
	}
}

// write writes the output of the fit to w in format.
func (f *fitOutcome) write(w io.Writer, format string) error {
	switch format {
	case formatJSON:
		return encodeJSON(w, f.json())
	case formatCSV:
		return f.writeCSV(w)
	}
	return f.writeHuman(w)
}

func varNames(vars []fitVar) []string {
	s := make([]string, len(vars))
	for i, v := range vars {
		s[i] = v.name
	}
	return s
}

// writeLossCurve draws the loss curve of res to f and commits f. Errors
// name f's path.
func writeLossCurve(f *atomicFile, res *fit.Result) error {
	format, err := figureFormat(f.Path())
	if err != nil {
		return err
	}
	fig, err := res.Figure()
	if err != nil {
		return fmt.Errorf("%s: %v", f.Path(), err)
	}
	if err := fig.WriteTo(f, format); err != nil {
		return fmt.Errorf("writing %s: %v", f.Path(), err)
	}
	return f.Commit()
}

// json returns fit's JSON object.
func (f *fitOutcome) json() jsonObject {
	res, j := f.res, f.j
	status := res.Status.String()
	var errText any // null on success
	if f.err != nil {
		status = errorText(f.err)
		errText = status
		if errors.Is(f.err, ode.ErrStiff) {
			status = "stiff"
		}
	}
	fj := make([]jsonFloats, len(f.fitted))
	for b := range f.fitted {
		fj[b] = f.fitted[b]
	}
	rows := func(xs [][]float64) any { // null if nil
		if xs == nil {
			return nil
		}
		r := make([]jsonFloats, len(xs))
		for i := range r {
			r[i] = xs[i]
		}
		return r
	}
	first := math.NaN()
	if len(res.History) > 0 {
		first = res.History[0]
	}
	return jsonObject{
		{"command", "fit"}, {"problem", f.name}, {"method", j.method.Name()}, {"engine", f.engine},
		{"n", j.prob.N}, {"fits", f.fo.fits}, {"fit", varNames(f.vars)},
		{"data", f.fo.data}, {"observations", f.ob.count}, {"truth", jsonFloats(f.truth)},
		{"status", status}, {"error", errText}, {"steps", res.Steps}, {"records", res.Records},
		{"loss_first", jsonFloat(first)}, {"loss_final", jsonFloat(res.FinalLoss)},
		{"loss_best", jsonFloat(res.BestLoss)}, {"best_step", res.BestStep},
		{"fitted", fj}, {"fitted_y0", rows(f.fittedY0)}, {"truth_y0", rows(f.truthY0)}, {"history", jsonFloats(res.History)},
		{"time_ms", ms(res.Time)}, {"record_ms", ms(res.RecordTime)}, {"grad_ms", ms(res.GradTime)},
		{"device_steps", res.DeviceSteps},
	}
}

// writeCSV writes one row per trajectory: its index, its fit and the
// fitted values in -fit order (pK: its fit's, y0K: its own).
func (f *fitOutcome) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(append([]string{"traj", "fit"}, varNames(f.vars)...))
	n := f.j.prob.N
	per := n / f.fo.fits
	row := make([]string, 0, 2+len(f.vars))
	for i := range n {
		b := i / per
		row = append(row[:0], strconv.Itoa(i), strconv.Itoa(b))
		y := 0
		for k, v := range f.vars {
			x := f.fitted[b][k]
			if v.y0 {
				x = f.fittedY0[i][y]
				y++
			}
			row = append(row, csvFloat(x))
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// fitRows is the most fits, and trajectories, the report lists.
const fitRows = 16

// writeHuman writes the readable report: the fit, the loss, the fitted
// parameters of each fit and the fitted initial states of each
// trajectory.
func (f *fitOutcome) writeHuman(w io.Writer) error {
	res, j, fo, vars := f.res, f.j, f.fo, f.vars
	src := "synthetic data"
	if fo.data != "" {
		src = fmt.Sprintf("%s (%s)", fo.data, count(f.ob.count, "observation"))
	}
	bw := &errWriter{w: w}
	fmt.Fprintf(bw, "fit %s (%s): %s, %s, %s, %s on the %s engine\n", f.name, strings.Join(varNames(vars), ", "), count(j.prob.N, "trajectory"), count(fo.fits, "fit"), src, j.method.Name(), f.engine)
	fmt.Fprintf(bw, "%s (%v), %s recorded, %v\n", count(res.Steps, "Adam step"), res.Status, countMeshes(res.Records), fmtDur(res.Time))
	if res.DeviceSteps > 0 {
		fmt.Fprintf(bw, "%d steps with the fit in device memory", res.DeviceSteps)
		if res.DeviceNote != "" {
			fmt.Fprintf(bw, "; %s", res.DeviceNote)
		}
		fmt.Fprintln(bw)
	}
	if len(res.History) > 0 {
		fmt.Fprintf(bw, "loss %.6g -> %.6g (best %.6g at step %d)\n", res.History[0], res.FinalLoss, res.BestLoss, res.BestStep)
	}
	if len(res.GradNorms) > 0 && res.GradNorms[0] == 0 {
		fmt.Fprintln(bw, "note: the gradient was 0 at the start, so the fit could not move: the start fits the data exactly, or the observations do not depend on the fitted values")
	}
	var pIdx, yIdx []int // the positions in vars of the parameters and the initial-state components
	for k, v := range vars {
		if v.y0 {
			yIdx = append(yIdx, k)
		} else {
			pIdx = append(pIdx, k)
		}
	}
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	// With -vary of a fitted parameter, each fit has its own truth: a
	// column beside its values rather than one row.
	perFit := false
	for b := range f.truthFit {
		for _, k := range pIdx {
			perFit = perFit || f.truthFit[b][k] != f.truthFit[0][k]
		}
	}
	if len(pIdx) > 0 {
		fmt.Fprint(tw, "FIT")
		for _, k := range pIdx {
			fmt.Fprintf(tw, "\t%s", vars[k].name)
		}
		if perFit {
			for _, k := range pIdx {
				fmt.Fprintf(tw, "\t(truth %s)", vars[k].name)
			}
		}
		fmt.Fprintln(tw)
		if f.truth != nil && !perFit {
			fmt.Fprint(tw, "truth")
			for _, k := range pIdx {
				fmt.Fprintf(tw, "\t%.6g", f.truth[k])
			}
			fmt.Fprintln(tw)
		}
		for b := 0; b < len(f.fitted) && b < fitRows; b++ {
			fmt.Fprintf(tw, "%d", b)
			for _, k := range pIdx {
				fmt.Fprintf(tw, "\t%.6g", f.fitted[b][k])
			}
			if perFit {
				for _, k := range pIdx {
					fmt.Fprintf(tw, "\t%.6g", f.truthFit[b][k])
				}
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		if len(f.fitted) > fitRows {
			fmt.Fprintf(bw, "(%d more fits; -format csv or -json lists all)\n", len(f.fitted)-fitRows)
		}
	}
	if len(yIdx) > 0 {
		if len(pIdx) > 0 {
			fmt.Fprintln(bw)
		}
		n := j.prob.N
		per := n / fo.fits
		fmt.Fprint(tw, "TRAJ\tFIT")
		for _, k := range yIdx {
			fmt.Fprintf(tw, "\t%s", vars[k].name)
			if f.truthY0 != nil {
				fmt.Fprintf(tw, "\t(truth)")
			}
		}
		fmt.Fprintln(tw)
		for i := 0; i < n && i < fitRows; i++ {
			fmt.Fprintf(tw, "%d\t%d", i, i/per)
			for y := range yIdx {
				fmt.Fprintf(tw, "\t%.6g", f.fittedY0[i][y])
				if f.truthY0 != nil {
					fmt.Fprintf(tw, "\t%.6g", f.truthY0[i][y])
				}
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		if n > fitRows {
			fmt.Fprintf(bw, "(%d more trajectories; -format csv or -json lists all)\n", n-fitRows)
		}
	}
	for _, line := range f.written {
		fmt.Fprintln(bw, line)
	}
	return bw.err
}

// errWriter passes writes to w and keeps the first error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
