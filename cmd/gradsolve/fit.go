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
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gradsolve-go/gradsolve/fit"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

const fitHelp = `Usage: gradsolve fit -fit NAMES [-data obs.csv] [flags]

Fits chosen parameters of a built-in problem (see gradsolve problems) to
observed states with Adam, taking exact gradients of the squared error of
the states at the observation times (record the adaptive mesh, differentiate
its replay). It prints the fitted values, the loss before and after and the
timing; -plot writes the loss curve, -json one JSON object. On a terminal,
a fit that lasts more than a second shows a progress bar on stderr (-quiet:
none). -method auto and -engine work as for solve and grad (gradsolve help
solve); a gradient refused because a trajectory is stiff for the explicit
method ends the fit with status stiff and exit status 1.

What is fitted (-fit, comma list): pK or a parameter's name (as rho) for
per-trajectory parameter K, one value per fit shared by its trajectories;
y0K for initial-state component K, one value per trajectory. The other
parameters keep the values of -p / -y0 (default: the problem's).

Data (-data FILE): a CSV file with a header row and one row per observation:

	traj,t,y0,y1,...      trajectory index (0-based), time, then the Dim
	0,0.1,1.02,0.98,...   observed state components; an empty cell is a
	0,0.2,...             missing value

The save times are the distinct times of the file; n is the largest
trajectory index + 1. Without -data the data are synthetic: the problem is
solved at -p / -y0 (the truth) at -saveat times (default: 10 equal steps
ending at t1), -noise adds Gaussian noise, and the fitted values start at
-start (default: the truth times 1.1).

Loss: the mean over trajectories of the sum over observations of
(y − observed)², missing values left out.

Examples:

	gradsolve fit -problem lorenz -fit rho -n 16 -start 25 -noise 0.1 -plot loss.png
	gradsolve fit -problem lorenz -fit p1 -data obs.csv -p 10,25,2.6666666666666665 -json
	gradsolve fit -problem vdp -fit mu,y01 -n 8 -vary y00=1:3 -steps 300 -lr 0.02
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

// fitCommand runs "gradsolve fit".
func fitCommand(args []string, stdout, stderr io.Writer, su setup) int {
	o := &options{}
	fo := &fitOptions{}
	fs := newFlagSet("fit", o, stderr)
	fs.StringVar(&fo.fit, "fit", "", "comma `list` of what to fit: pK or a parameter name, y0K")
	fs.StringVar(&fo.data, "data", "", "observations, a CSV `file` (traj,t,y0,...); none: synthetic data")
	fs.StringVar(&fo.start, "start", "", "starting values of the fitted quantities, comma `list` in -fit order (synthetic data; default: truth × 1.1)")
	fs.Float64Var(&fo.noise, "noise", 0, "standard deviation of the Gaussian noise of synthetic data")
	fs.IntVar(&fo.fits, "fits", 1, "independent fits B; each owns n/B consecutive trajectories")
	fs.IntVar(&fo.steps, "steps", 200, "Adam steps")
	fs.Float64Var(&fo.lr, "lr", 0.05, "Adam learning rate")
	fs.Float64Var(&fo.clip, "clip", 0, "clip each fit's gradient to this norm (0: no clipping)")
	fs.IntVar(&fo.remesh, "remesh", 0, "record a new mesh every K steps (0: every step; -1: once)")
	fs.Uint64Var(&fo.seed, "seed", 1, "seed of the synthetic noise")
	fs.StringVar(&fo.plot, "plot", "", "write the loss curve to this `file` (.png, .svg, .pdf)")
	fs.Usage = func() { fitUsage(fs.Output(), fs) }
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fitUsage(stderr, fs)
			return exitOK
		}
		fmt.Fprintf(stderr, "gradsolve fit: %v\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gradsolve fit: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	o.set = make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := runFit(ctx, o, fo, stdout, stderr, su)
	var u *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "gradsolve fit: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "gradsolve fit: %s\n", cliHints.Replace(err.Error()))
	return exitFail
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

// observations are data at save times: per trajectory, K·Dim values and
// as many weights (1 observed, 0 missing).
type observations struct {
	n, dim int
	times  []float64
	value  []float64 // [n×K×dim]
	weight []float64 // [n×K×dim]
}

// readCSV reads observations in the documented format.
func readCSV(r io.Reader, dim int) (*observations, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = 2 + dim
	cr.TrimLeadingSpace = true
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) < 2 {
		return nil, errors.New("no observations (a header row, then one row per observation)")
	}
	type row struct {
		i int
		t float64
		y []float64
	}
	var rows []row
	tset := map[float64]bool{}
	n := 0
	for li, rec := range recs[1:] {
		line := li + 2
		i, err := strconv.Atoi(strings.TrimSpace(rec[0]))
		if err != nil || i < 0 {
			return nil, fmt.Errorf("line %d: trajectory %q is not a non-negative integer", line, rec[0])
		}
		t, err := parseNumber(rec[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: time %v", line, err)
		}
		y := make([]float64, dim)
		for c := range y {
			if strings.TrimSpace(rec[2+c]) == "" {
				y[c] = math.NaN()
				continue
			}
			if y[c], err = parseNumber(rec[2+c]); err != nil {
				return nil, fmt.Errorf("line %d: component %d %v", line, c, err)
			}
		}
		rows = append(rows, row{i, t, y})
		tset[t] = true
		n = max(n, i+1)
	}
	ob := &observations{n: n, dim: dim}
	for t := range tset {
		ob.times = append(ob.times, t)
	}
	slices.Sort(ob.times)
	K := len(ob.times)
	ob.value = make([]float64, n*K*dim)
	ob.weight = make([]float64, n*K*dim)
	for _, r := range rows {
		k, _ := slices.BinarySearch(ob.times, r.t)
		for c, v := range r.y {
			if !math.IsNaN(v) {
				at := (r.i*K+k)*dim + c
				ob.value[at], ob.weight[at] = v, 1
			}
		}
	}
	return ob, nil
}

// loss returns the weighted squared error against ob, averaged over
// trajectories. The data row of a trajectory is its K·dim values then
// its K·dim weights.
func (ob *observations) loss() ode.Loss {
	K, d := len(ob.times), ob.dim
	w := K * d
	data := make([]float64, 0, ob.n*2*w)
	for i := range ob.n {
		data = append(data, ob.value[i*w:(i+1)*w]...)
		data = append(data, ob.weight[i*w:(i+1)*w]...)
	}
	return ode.Loss{Name: "sse", Data: data, DataDim: 2 * w, Mean: true, F: func(_, ys, row []tape.V) tape.V {
		s := ys[0].Sub(row[0]).Square().Mul(row[w])
		for j := 1; j < w; j++ {
			s = s.Add(ys[j].Sub(row[j]).Square().Mul(row[w+j]))
		}
		return s
	}}
}

func runFit(ctx context.Context, o *options, fo *fitOptions, stdout, stderr io.Writer, su setup) error {
	pr, err := problems.ByName(strings.TrimSpace(o.problem))
	if err != nil {
		return usagef("-problem: %q is not a built-in problem; valid names are %s", o.problem, strings.Join(problems.Names(), ", "))
	}
	vars, err := parseFitVars(fo.fit, pr)
	if err != nil {
		return err
	}
	var ob *observations
	if fo.data != "" {
		f, err := os.Open(fo.data)
		if err != nil {
			return usagef("-data: %v", err)
		}
		ob, err = readCSV(f, pr.Field.Dim)
		f.Close()
		if err != nil {
			return usagef("-data %s: %v", fo.data, err)
		}
		if o.set["n"] && o.n != ob.n {
			return usagef("-n %d, but %s has trajectories 0 to %d", o.n, fo.data, ob.n-1)
		}
		if o.set["saveat"] {
			return usagef("-saveat: with -data the save times are the file's")
		}
		o.n = ob.n
	}
	j, err := o.build(su.lim)
	if err != nil {
		return err
	}
	switch {
	case o.set["out"]:
		return usagef("-out: fit writes to stdout; redirect it to a file")
	case o.format == formatCSV:
		return usagef("-format csv: fit writes a readable report or, with -format json (-json), one JSON object")
	}
	var plotFile *atomicFile
	if fo.plot != "" {
		if _, err := figureFormat(fo.plot); err != nil {
			return usagef("-plot: %v", err)
		}
		// Created before the fit, so that a path that cannot be written
		// costs no work.
		if plotFile, err = createAtomic(fo.plot); err != nil {
			return fmt.Errorf("-plot: %v", err)
		}
		defer plotFile.abort()
	}
	asJSON := o.format == formatJSON
	prob := j.prob
	d, np := prob.Field.Dim, prob.Field.Params
	if fo.fits < 1 || prob.N%fo.fits != 0 {
		return usagef("-fits %d must divide -n %d", fo.fits, prob.N)
	}
	var truth []float64 // synthetic only: the true fitted values, per var (trajectory 0's)
	if ob == nil {
		if prob.SaveAt == nil {
			prob.SaveAt = problems.LinSpace(make([]float64, 10), prob.T0+(prob.T1-prob.T0)/10, prob.T1)
		}
		sol, err := ode.Solve(prob, &j.set)
		if err != nil {
			return fmt.Errorf("simulating the data: %w", err)
		}
		rng := rand.New(rand.NewPCG(fo.seed, fo.seed))
		ob = &observations{n: prob.N, dim: d, times: prob.SaveAt, value: sol.Ys, weight: make([]float64, len(sol.Ys))}
		for i := range ob.value {
			ob.value[i] += fo.noise * rng.NormFloat64()
			ob.weight[i] = 1
		}
		for _, v := range vars {
			if v.y0 {
				truth = append(truth, prob.Y0[v.k])
			} else {
				truth = append(truth, prob.P[v.k])
			}
		}
		start := make([]float64, len(vars))
		for i, t := range truth {
			start[i] = 1.1 * t
		}
		if fo.start != "" {
			if start, err = parseFloats(fo.start); err != nil {
				return usagef("-start: %v", err)
			}
			if len(start) != len(vars) {
				return usagef("-start has %d values for %d fitted quantities", len(start), len(vars))
			}
		}
		for i, v := range vars {
			for r := range prob.N {
				if v.y0 {
					prob.Y0[r*d+v.k] = start[i]
				} else {
					prob.P[r*np+v.k] = start[i]
				}
			}
		}
	} else {
		if fo.start != "" {
			return usagef("-start: with -data the fit starts from -p and -y0")
		}
		prob.SaveAt = ob.times
		if prob.SaveAt[0] < prob.T0 || prob.SaveAt[len(prob.SaveAt)-1] > prob.T1 {
			return usagef("-data: times %v to %v are outside [t0, t1] = [%v, %v]; set -t0/-t1", prob.SaveAt[0], prob.SaveAt[len(prob.SaveAt)-1], prob.T0, prob.T1)
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
	bar := newBar(fo.steps, o.quiet || asJSON, stderr, "fit "+pr.Name, "steps", su.bars)
	res, err := fr.Run(ctx, &fit.Settings{Steps: fo.steps, Optimizer: &optim.Adam{LearnRate: fo.lr}, Remesh: fo.remesh, ClipNorm: fo.clip, Progress: bar})
	if err != nil && res == nil {
		return err
	}
	if plotFile != nil && len(res.History) > 0 {
		if perr := writeLossCurve(plotFile, res); perr != nil {
			return fmt.Errorf("-plot: %v", perr)
		}
	}
	// The fitted values of each fit: P columns from the fit, y0 components
	// from its first trajectory.
	per := prob.N / fo.fits
	fitted := make([][]float64, fo.fits)
	for b := range fitted {
		for _, v := range vars {
			i := b * per
			if v.y0 {
				fitted[b] = append(fitted[b], res.Problem.Y0[i*d+v.k])
			} else {
				fitted[b] = append(fitted[b], res.Problem.P[i*np+v.k])
			}
		}
	}
	engine := fr.Solver().Engine()
	if asJSON {
		obj := fitJSON(pr.Name, engine, j, vars, fo, res, fitted, truth, err)
		if code := writeJSON(stdout, stderr, obj); code != exitOK {
			return errors.New("writing JSON")
		}
		return err
	}
	writeFitHuman(stdout, pr.Name, engine, j, vars, fo, res, fitted, truth)
	return err
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
	format, err := figureFormat(f.path)
	if err != nil {
		return err
	}
	fig, err := res.Figure()
	if err != nil {
		return fmt.Errorf("%s: %v", f.path, err)
	}
	if err := fig.WriteTo(f, format); err != nil {
		return fmt.Errorf("writing %s: %v", f.path, err)
	}
	return f.commit()
}

func fitJSON(name, engine string, j *job, vars []fitVar, fo *fitOptions, res *fit.Result, fitted [][]float64, truth []float64, err error) jsonObject {
	status := res.Status.String()
	var errText any // null on success
	if err != nil {
		status = cliHints.Replace(err.Error())
		errText = status
		if errors.Is(err, ode.ErrStiff) {
			status = "stiff"
		}
	}
	fj := make([]jsonFloats, len(fitted))
	for b := range fitted {
		fj[b] = fitted[b]
	}
	first := math.NaN()
	if len(res.History) > 0 {
		first = res.History[0]
	}
	return jsonObject{
		{"command", "fit"}, {"problem", name}, {"method", j.method.Name()}, {"engine", engine},
		{"n", j.prob.N}, {"fits", fo.fits}, {"fit", varNames(vars)},
		{"data", fo.data}, {"truth", jsonFloats(truth)},
		{"status", status}, {"error", errText}, {"steps", res.Steps}, {"records", res.Records},
		{"loss_first", jsonFloat(first)}, {"loss_final", jsonFloat(res.FinalLoss)},
		{"loss_best", jsonFloat(res.BestLoss)}, {"best_step", res.BestStep},
		{"fitted", fj}, {"history", jsonFloats(res.History)},
		{"time_ms", ms(res.Time)}, {"record_ms", ms(res.RecordTime)}, {"grad_ms", ms(res.GradTime)},
	}
}

func writeFitHuman(w io.Writer, name, engine string, j *job, vars []fitVar, fo *fitOptions, res *fit.Result, fitted [][]float64, truth []float64) {
	src := "synthetic data"
	if fo.data != "" {
		src = fo.data
	}
	fmt.Fprintf(w, "fit %s (%s): %s, %s, %s, %s on the %s engine\n", name, strings.Join(varNames(vars), ", "), count(j.prob.N, "trajectory"), count(fo.fits, "fit"), src, j.method.Name(), engine)
	fmt.Fprintf(w, "%d Adam steps (%v), %d meshes recorded, %v\n", res.Steps, res.Status, res.Records, fmtDur(res.Time))
	if len(res.History) > 0 {
		fmt.Fprintf(w, "loss %.6g -> %.6g (best %.6g at step %d)\n", res.History[0], res.FinalLoss, res.BestLoss, res.BestStep)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "FIT")
	for _, v := range vars {
		fmt.Fprintf(tw, "\t%s", v.name)
	}
	fmt.Fprintln(tw)
	if truth != nil {
		fmt.Fprint(tw, "truth")
		for _, t := range truth {
			fmt.Fprintf(tw, "\t%.6g", t)
		}
		fmt.Fprintln(tw)
	}
	for b := 0; b < len(fitted) && b < 16; b++ {
		fmt.Fprintf(tw, "%d", b)
		for _, x := range fitted[b] {
			fmt.Fprintf(tw, "\t%.6g", x)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if len(fitted) > 16 {
		fmt.Fprintf(w, "(%d more fits; -json lists all)\n", len(fitted)-16)
	}
	if fo.plot != "" {
		fmt.Fprintf(w, "loss curve written to %s\n", fo.plot)
	}
}
