package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// jsonArrayLimit is the largest ensemble whose per-trajectory arrays -json
// prints without -arrays; larger ensembles get the summary fields only.
const jsonArrayLimit = 1024

// usageError is an error in the command line: a bad flag value, a value
// that does not fit the problem. The command exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a *usageError; by convention msg starts with the flag.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// options are the flags of solve and grad, mirroring ode.Settings and
// ode.Problem.
type options struct {
	cmd string // "solve" or "grad"

	problem  string
	p, y0    string
	t0, t1   float64
	saveat   string
	rtol     float64
	atol     string // one value, or one per state component
	maxSteps int
	dt0      float64
	method   string
	engine   string // the -engine value; build resolves it (see parseEngine)
	loss     string // grad only
	n        int
	vary     varyFlag
	workers  int
	block    int
	json     bool
	arrays   bool
	format   string // formatHuman, formatCSV or formatJSON; "" until resolved
	out      string // the output file; "" for stdout
	plot     string // solve and grad: the figure file; "" for none
	quiet    bool   // no progress bar

	set map[string]bool // the flags given on the command line
}

// Output formats.
const (
	formatHuman = "human" // the readable report
	formatCSV   = "csv"   // one row per trajectory (saved states: per trajectory and time)
	formatJSON  = "json"  // one object
)

// minRelTol is the smallest -rtol: ten units of float64 rounding (10ε),
// the floor package ode refuses below (see ode.Settings.RelTol).
const minRelTol = 10 * 0x1p-52

// maxBlock is the largest -block: the automatic block size is 64 to 1024
// trajectories, and larger blocks only add memory.
const maxBlock = 1 << 16

// varyFlag collects repeated -vary flags.
type varyFlag []vary

func (v *varyFlag) String() string {
	if v == nil {
		return ""
	}
	s := make([]string, len(*v))
	for i, x := range *v {
		s[i] = x.String()
	}
	return strings.Join(s, " ")
}

func (v *varyFlag) Set(s string) error {
	x, err := parseVary(s)
	if err != nil {
		return err
	}
	*v = append(*v, x)
	return nil
}

// newFlagSet returns the flag set of command cmd ("solve" or "grad"),
// storing into o. Its usage message is the command's help.
func newFlagSet(cmd string, o *options, stderr io.Writer) *flag.FlagSet {
	o.cmd = cmd
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.problem, "problem", "lorenz", "built-in problem `name` (see gradsolve problems), or lorenz96-<d> and brusselator-<cells> of other sizes")
	fs.StringVar(&o.p, "p", "", "per-trajectory parameters, comma `list`: one row for every trajectory, or n rows (default: the problem's)")
	fs.StringVar(&o.y0, "y0", "", "initial state, comma `list`: one row for every trajectory, or n rows (default: the problem's)")
	fs.Float64Var(&o.t0, "t0", 0, "start `time` (default: the problem's)")
	fs.Float64Var(&o.t1, "t1", 0, "end `time` (default: the problem's)")
	fs.StringVar(&o.saveat, "saveat", "", "comma `list` of times in [t0, t1], non-decreasing, at which to save the states")
	fs.Float64Var(&o.rtol, "rtol", ode.DefaultRelTol, "relative `tolerance`")
	fs.StringVar(&o.atol, "atol", formatFloat(ode.DefaultAbsTol), "absolute `tolerance`: one value, or a comma list of one per state component")
	fs.IntVar(&o.maxSteps, "max-steps", ode.DefaultMaxSteps, "maximum attempted (accepted + rejected) steps per trajectory; 0 means the default")
	fs.Float64Var(&o.dt0, "dt0", 0, "first step `size`; 0 picks it per trajectory")
	fs.StringVar(&o.method, "method", "", "integration method `"+methodNames("|")+"` (default: Tsit5, or Rodas5P for a stiff problem); auto runs Tsit5 and switches a trajectory to Rodas5P where its stiffness test fires")
	fs.StringVar(&o.engine, "engine", "cpu", "the engine that runs the work, `cpu|auto|NAME`: auto is the first available registered engine other than cpu, else cpu; this build has "+strings.Join(ode.Engines(), ", "))
	if cmd == "grad" {
		fs.StringVar(&o.loss, "loss", lossSumSquares, "loss `sumsq|y:K`: the sum of squares of the final states, or the sum of their component K")
	}
	fs.IntVar(&o.n, "n", 1, "number of `trajectories`")
	fs.Var(&o.vary, "vary", "sweep parameter K from LO to HI over the n trajectories as `pK=LO:HI`, or state component K as y0K=LO:HI (K 0-based; may repeat)")
	fs.IntVar(&o.workers, "workers", 0, "goroutines of the executor; 0 means GOMAXPROCS")
	fs.IntVar(&o.block, "block", 0, fmt.Sprintf("`trajectories` per executor block, at most %d (larger than n counts as n); 0 chooses it per program from its working set (%d to %d)", maxBlock, tape.MinBlockSize, tape.MaxBlockSize))
	fs.StringVar(&o.format, "format", "", "output `format`: human (a readable report), csv (one row per trajectory) or json (one object); default human, or csv or json for an -out FILE ending in .csv or .json")
	fs.StringVar(&o.out, "out", "", "write the output to `FILE` (a temporary file renamed when it is complete); the readable report of a csv or json output then goes to stdout")
	fs.BoolVar(&o.json, "json", false, "the same as -format json")
	if cmd != "fit" { // fit's JSON always lists every fit and trajectory
		fs.BoolVar(&o.arrays, "arrays", false, fmt.Sprintf("with -json, print the per-trajectory arrays even when n > %d", jsonArrayLimit))
	}
	if cmd != "fit" { // fit's -plot is its loss curve
		fs.StringVar(&o.plot, "plot", "", "draw the results to `FILE` (.png, .svg or .pdf): the states against time, or for an ensemble without -saveat the final states (grad: the gradient) against the first -vary quantity; see Plots below")
	}
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bar (there is none off a terminal, for runs under a second, or with csv or json output to stdout)")
	fs.Usage = func() { commandHelp(fs.Output(), cmd, fs) }
	return fs
}

// parseArgs parses the command line of solve or grad. A -h gives
// flag.ErrHelp; any other error is a *usageError.
func parseArgs(cmd string, args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := newFlagSet(cmd, o, stderr)
	fs.SetOutput(io.Discard) // errors are reported by the caller, once
	if err := parseFlags(fs, args); err != nil {
		if err == flag.ErrHelp {
			commandHelp(stderr, cmd, fs)
			return nil, err
		}
		return o, &usageError{msg: err.Error()} // o.json is set if -json came first
	}
	if fs.NArg() > 0 {
		return o, usagef("unexpected argument %q (flags start with -; lists are comma-separated without spaces)", fs.Arg(0))
	}
	o.set = make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, nil
}

// job is a validated solve or grad: the problem, the settings and what
// the output needs to describe them.
type job struct {
	opts *options
	pr   problems.Problem

	prob   ode.Problem // N rows of Y0 and P
	set    ode.Settings
	atol   []float64  // the absolute tolerance: one value, or one per component
	method ode.Method // the method that runs (the router's choice if -method is not given)
	loss   lossSpec

	pnames []string // names of the per-trajectory parameters
	notes  []string // remarks on the command line, written to stderr before the run
}

// n returns the number of trajectories.
func (j *job) n() int { return j.prob.N }

// build checks the options against the problem and returns the job. Every
// error is a *usageError naming the flag. Sizes are checked against lim
// before anything of size n is allocated.
func (o *options) build(lim limits) (*job, error) {
	pr, err := problems.ByName(strings.TrimSpace(o.problem))
	if err != nil {
		return nil, problemError(o.problem, err)
	}
	f := pr.Field
	d, np := f.Dim, f.Params
	j := &job{opts: o, pr: pr, pnames: paramNames(pr)}

	n := o.n
	if n < 1 {
		return nil, usagef("-n: %d; want at least 1 trajectory", n)
	}
	if err := o.resolveFormat(); err != nil {
		return nil, err
	}

	t0, t1 := pr.T0, pr.T1
	if o.set["t0"] {
		t0 = o.t0
	}
	if o.set["t1"] {
		t1 = o.t1
	}
	switch {
	case !finite(t0):
		return nil, usagef("-t0: %v is not finite", t0)
	case !finite(t1):
		return nil, usagef("-t1: %v is not finite", t1)
	case !(t1 > t0):
		return nil, usagef("-t1 = %v must be greater than -t0 = %v", t1, t0)
	case !finite(t1 - t0):
		return nil, usagef("-t0, -t1: the span t1 − t0 = %v − (%v) overflows float64; use a shorter span, or rescale time", t1, t0)
	}
	var saveat []float64
	if o.set["saveat"] {
		if saveat, err = parseFloats(o.saveat); err != nil {
			return nil, usagef("-saveat: %v", err)
		}
		for k, tau := range saveat {
			if tau < t0 || tau > t1 {
				return nil, usagef("-saveat: element %d (%v) is outside [t0, t1] = [%v, %v]", k+1, tau, t0, t1)
			}
			if k > 0 && tau < saveat[k-1] {
				return nil, usagef("-saveat: element %d (%v) is smaller than element %d (%v); the times must be non-decreasing", k+1, tau, k, saveat[k-1])
			}
		}
		if o.format == formatCSV && writesStdout(o.out) {
			return nil, usagef("-saveat with -format csv writes two tables, the trajectories and the saved states; give -out FILE (the saved states go to %s)", savedPath("FILE.csv"))
		}
	}

	// Sizes, before anything of size n is allocated.
	arrays := o.format == formatJSON && (n <= jsonArrayLimit || o.arrays)
	var more []string
	if arrays && n > jsonArrayLimit {
		more = append(more, "drop -arrays, or use -format csv, which is written as it goes")
	}
	if len(saveat) > 0 {
		more = append(more, "save at fewer times")
	}
	what := fmt.Sprintf("a %s of %s", o.cmd, pr.Name)
	if err := checkMemory(what, n, trajectoryBytes(o.cmd, d, np, len(saveat), arrays), lim, more...); err != nil {
		return nil, err
	}

	y0 := pr.Y0
	if o.set["y0"] {
		if y0, err = parseFloats(o.y0); err != nil {
			return nil, usagef("-y0: %v", err)
		}
		if len(y0) != d && len(y0) != n*d {
			return nil, usagef("-y0 has %s, %s needs %d (its state dimension)%s", count(len(y0), "value"), pr.Name, d, rowsHint(n, d))
		}
	}
	p := pr.P
	if o.set["p"] {
		if np == 0 {
			return nil, usagef("-p: %s has no per-trajectory parameters", pr.Name)
		}
		if p, err = parseFloats(o.p); err != nil {
			return nil, usagef("-p: %v", err)
		}
		if len(p) != np && len(p) != n*np {
			return nil, usagef("-p has %s, %s needs %d (%s)%s", count(len(p), "value"), pr.Name, np, strings.Join(j.pnames, ", "), rowsHint(n, np))
		}
	}
	if err := j.checkVary(n, len(y0) == d, len(p) == np, y0, p); err != nil {
		return nil, err
	}

	if !(o.rtol >= minRelTol && o.rtol < 1) {
		return nil, usagef("-rtol: %v; want a relative tolerance from %.2g (10ε, the smallest float64 can meet) to below 1", o.rtol, minRelTol)
	}
	if j.atol, err = parseAbsTol(o.atol, d, pr.Name); err != nil {
		return nil, err
	}
	switch {
	case o.maxSteps < 0:
		return nil, usagef("-max-steps: %d; want a positive number (0 means %d)", o.maxSteps, ode.DefaultMaxSteps)
	case !(o.dt0 >= 0) || !finite(o.dt0):
		return nil, usagef("-dt0: %v; want a positive number, or 0 to pick it automatically", o.dt0)
	case o.workers < 0:
		return nil, usagef("-workers: %d; want 0 (all cores) or more", o.workers)
	case o.block < 0 || o.block > maxBlock:
		return nil, usagef("-block: %d; want 0 (chosen per program, %d to %d) to %d", o.block, tape.MinBlockSize, tape.MaxBlockSize, maxBlock)
	}
	m, err := parseMethod(o.method)
	if err != nil {
		return nil, usagef("-method: %v", err)
	}
	engine, err := parseEngine(o.engine)
	if err != nil {
		return nil, usagef("-engine: %v", err)
	}
	if o.cmd != "fit" && o.set["plot"] {
		if _, err := figureFormat(o.plot); err != nil {
			return nil, usagef("-plot: %v", err)
		}
	}
	j.method = m
	if m == nil {
		j.method = ode.Route(&f)
	}
	if o.cmd == "grad" {
		if j.loss, err = parseLoss(o.loss); err != nil {
			return nil, usagef("-loss: %v", err)
		}
		if j.loss.Kind == lossComponent && j.loss.K >= d {
			return nil, usagef("-loss %s: %s has %s, so K is 0 to %d", j.loss, pr.Name, count(d, "state component"), d-1)
		}
	}

	y0, p = tileRows(y0, d, n), tileRows(p, np, n)
	for _, v := range o.vary {
		dst, width := p, np
		if v.Target == varyY0 {
			dst, width = y0, d
		}
		col := problems.LinSpace(make([]float64, n), v.Lo, v.Hi)
		for i, x := range col {
			dst[i*width+v.Index] = x
		}
	}

	j.prob = ode.Problem{Field: f, N: n, Y0: y0, P: p, Shared: pr.Shared, T0: t0, T1: t1, SaveAt: saveat}
	j.set = ode.Settings{
		Method:   m,
		Engine:   engine,
		RelTol:   o.rtol,
		MaxSteps: o.maxSteps,
		Dt0:      o.dt0,
	}
	setAbsTol(&j.set, j.atol)
	if lim.maxSteps > 0 && (j.set.MaxSteps == 0 || j.set.MaxSteps > lim.maxSteps) {
		j.set.MaxSteps = lim.maxSteps
	}
	j.set.Exec.Workers = o.workers
	// A block of more than n trajectories holds the same n trajectories
	// as a block of n (the same results) in more memory.
	j.set.Exec.BlockSize = min(o.block, n)
	return j, nil
}

// resolveFormat checks -format, -json and -out against each other and
// sets o.format.
func (o *options) resolveFormat() error {
	f := strings.ToLower(strings.TrimSpace(o.format))
	switch f {
	case "", formatHuman, formatCSV, formatJSON:
	default:
		return usagef("-format: %q; want human, csv or json", o.format)
	}
	if o.json {
		if f != "" && f != formatJSON {
			return usagef("-json asks for -format json, but -format is %s; give one of them", f)
		}
		f = formatJSON
	}
	if o.set["out"] && strings.TrimSpace(o.out) == "" {
		return usagef("-out: empty file name")
	}
	if f == "" {
		f = formatHuman
		switch strings.ToLower(filepath.Ext(filepath.Base(o.out))) {
		case ".csv":
			f = formatCSV
		case ".json":
			f = formatJSON
		}
	}
	if o.arrays && f != formatJSON {
		return usagef("-arrays applies to -format json; the csv output always has every trajectory, the human report a sample (use -format csv or -json -arrays)")
	}
	o.format = f
	return nil
}

// checkVary checks the -vary sweeps against the problem and the rows of
// -y0 and -p (y0 and p, oneY0 and oneP if they are a single row), and
// notes a sweep that replaces a value given by a one-row -p or -y0.
func (j *job) checkVary(n int, oneY0, oneP bool, y0, p []float64) error {
	o, pr := j.opts, j.pr
	d, np := pr.Field.Dim, pr.Field.Params
	seen := make(map[string]bool)
	for _, v := range o.vary {
		key := fmt.Sprintf("%s%d", v.Target, v.Index)
		if seen[key] {
			return usagef("-vary %s: %s is swept twice", v, key)
		}
		seen[key] = true
		if v.Target == varyY0 && v.Index >= d {
			return usagef("-vary %s: %s has state dimension %d, so K is 0 to %d (y00 to y0%d)", v, pr.Name, d, d-1, d-1)
		}
		if v.Target == varyP && v.Index >= np {
			if np == 0 {
				return usagef("-vary %s: %s has no per-trajectory parameters", v, pr.Name)
			}
			return usagef("-vary %s: %s has %s, p0 to p%d (%s)", v, pr.Name, count(np, "parameter"), np-1, strings.Join(j.pnames, ", "))
		}
		if !finite(v.Hi - v.Lo) {
			return usagef("-vary %s: HI − LO overflows float64; sweep a narrower range", v)
		}
		if n == 1 {
			return usagef("-vary %s sweeps over the trajectories, but n = 1, which would take LO alone; use -n 2 or more, or set the value with -%s", v, v.Target)
		}
		flag, one, row := "-p", oneP, p
		if v.Target == varyY0 {
			flag, one, row = "-y0", oneY0, y0
		}
		if !o.set[flag[1:]] {
			continue
		}
		if !one {
			return usagef("-vary %s would overwrite column %d of the %d rows given by %s; give %s one row, or write the sweep into its rows", v, v.Index, n, flag, flag)
		}
		j.notes = append(j.notes, fmt.Sprintf("note: -vary %s replaces %s = %s given by %s", v, j.varyName(v), formatFloat(row[v.Index]), flag))
	}
	return nil
}

// parseAbsTol parses -atol: one positive finite value, or d of them (one
// per state component of the problem named name).
func parseAbsTol(s string, d int, name string) ([]float64, error) {
	atol, err := parseFloats(s)
	if err != nil {
		return nil, usagef("-atol: %v", err)
	}
	if len(atol) != 1 && len(atol) != d {
		return nil, usagef("-atol has %s; want one for every component, or %d (one per state component of %s)", count(len(atol), "value"), d, name)
	}
	for k, a := range atol {
		if !(a > 0) {
			if len(atol) == 1 {
				return nil, usagef("-atol: %v; want a positive number", a)
			}
			return nil, usagef("-atol: element %d (%v, component y[%d]) is not positive", k+1, a, k)
		}
	}
	return atol, nil
}

// setAbsTol sets the absolute tolerance of set: AbsTol for one value,
// AbsTols for one per component.
func setAbsTol(set *ode.Settings, atol []float64) {
	if len(atol) == 1 {
		set.AbsTol = atol[0]
		return
	}
	set.AbsTols = atol
}

// count returns n and the noun, plural unless n is 1: "1 parameter",
// "3 parameters".
func count(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "y"):
		return fmt.Sprintf("%d %sies", n, noun[:len(noun)-1])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// atolText returns the absolute tolerance as given: one number, or a
// comma list of one per component.
func (j *job) atolText() string {
	s := make([]string, len(j.atol))
	for i, a := range j.atol {
		s[i] = fmt.Sprintf("%g", a)
	}
	return strings.Join(s, ",")
}

// rowsHint completes a length error for an ensemble of n > 1.
func rowsHint(n, w int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf(", or n×%d = %d for one row per trajectory", w, n*w)
}

// tileRows returns n rows of width w: x itself copied if it already has n
// rows, else its single row repeated.
func tileRows(x []float64, w, n int) []float64 {
	out := make([]float64, n*w)
	if len(x) == n*w {
		copy(out, x)
		return out
	}
	for i := 0; i < n; i++ {
		copy(out[i*w:(i+1)*w], x)
	}
	return out
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// greek spells out the Greek letters the problems' docs use for their
// parameters, so names can be typed and read in any terminal.
var greek = strings.NewReplacer("σ", "sigma", "ρ", "rho", "β", "beta", "μ", "mu", "λ", "lambda",
	"α", "alpha", "γ", "gamma", "δ", "delta", "ε", "eps", "ω", "omega", "κ", "kappa", "ν", "nu", "τ", "tau")

// paramNames returns the names of pr's per-trajectory parameters, read
// from its Doc ("p = (σ, ρ, β) = (...)", Greek spelled out); p0, p1, …
// if the Doc does not list them.
func paramNames(pr problems.Problem) []string {
	np := pr.Field.Params
	if _, rest, ok := strings.Cut(pr.Doc, "p = ("); ok {
		if list, _, ok := strings.Cut(rest, ")"); ok {
			names := strings.Split(list, ",")
			if len(names) == np {
				for i := range names {
					names[i] = greek.Replace(strings.TrimSpace(names[i]))
				}
				return names
			}
		}
	}
	names := make([]string, np)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}
	return names
}

// problemError is the usage error of a -problem that problems.ByName
// refused with err: its reason where the name has a size out of range
// ("lorenz96-3"), else that it is not a built-in problem; either way
// with the valid names.
func problemError(name string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "problems: ")
	if reason, ok := strings.CutPrefix(msg, fmt.Sprintf("unknown problem %q; ", strings.TrimSpace(name))); ok {
		return usagef("-problem: %q is not a built-in problem; %s", name, reason)
	}
	return usagef("-problem: %s", msg)
}
