package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
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

	problem    string
	p, y0      string
	t0, t1     float64
	saveat     string
	rtol, atol float64
	maxSteps   int
	dt0        float64
	method     string
	loss       string // grad only
	n          int
	vary       varyFlag
	workers    int
	block      int
	json       bool
	arrays     bool

	set map[string]bool // the flags given on the command line
}

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
	fs.StringVar(&o.problem, "problem", "lorenz", "built-in problem `name` (see gradsolve problems)")
	fs.StringVar(&o.p, "p", "", "per-trajectory parameters, comma `list`: one row for every trajectory, or n rows (default: the problem's)")
	fs.StringVar(&o.y0, "y0", "", "initial state, comma `list`: one row for every trajectory, or n rows (default: the problem's)")
	fs.Float64Var(&o.t0, "t0", 0, "start `time` (default: the problem's)")
	fs.Float64Var(&o.t1, "t1", 0, "end `time` (default: the problem's)")
	fs.StringVar(&o.saveat, "saveat", "", "comma `list` of times in [t0, t1], non-decreasing, at which to save the states")
	fs.Float64Var(&o.rtol, "rtol", ode.DefaultRelTol, "relative `tolerance`")
	fs.Float64Var(&o.atol, "atol", ode.DefaultAbsTol, "absolute `tolerance`")
	fs.IntVar(&o.maxSteps, "max-steps", ode.DefaultMaxSteps, "maximum attempted (accepted + rejected) steps per trajectory")
	fs.Float64Var(&o.dt0, "dt0", 0, "first step `size`; 0 picks it per trajectory")
	fs.StringVar(&o.method, "method", "", "integration method `"+methodNames("|")+"` (default: Tsit5, or Rodas5P for a stiff problem)")
	if cmd == "grad" {
		fs.StringVar(&o.loss, "loss", lossSumSquares, "loss `sumsq|y:K`: the sum of squares of the final states, or the sum of their component K")
	}
	fs.IntVar(&o.n, "n", 1, "number of `trajectories`")
	fs.Var(&o.vary, "vary", "sweep parameter K from LO to HI over the n trajectories as `pK=LO:HI`, or state component K as y0K=LO:HI (K 0-based; may repeat)")
	fs.IntVar(&o.workers, "workers", 0, "goroutines of the executor; 0 means GOMAXPROCS")
	fs.IntVar(&o.block, "block", 0, "trajectories per executor block; 0 means the default (256)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object instead of tables")
	fs.BoolVar(&o.arrays, "arrays", false, fmt.Sprintf("with -json, print the per-trajectory arrays even when n > %d", jsonArrayLimit))
	fs.Usage = func() { commandHelp(fs.Output(), cmd, fs) }
	return fs
}

// parseArgs parses the command line of solve or grad. A -h gives
// flag.ErrHelp; any other error is a *usageError.
func parseArgs(cmd string, args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := newFlagSet(cmd, o, stderr)
	fs.SetOutput(io.Discard) // errors are reported by the caller, once
	if err := fs.Parse(args); err != nil {
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
	method ode.Method // the method that runs (the router's choice if -method is not given)
	loss   lossSpec

	pnames []string // names of the per-trajectory parameters
}

// n returns the number of trajectories.
func (j *job) n() int { return j.prob.N }

// build checks the options against the problem and returns the job. Every
// error is a *usageError naming the flag.
func (o *options) build() (*job, error) {
	pr, err := problems.ByName(strings.TrimSpace(o.problem))
	if err != nil {
		return nil, usagef("-problem: %q is not a built-in problem; valid names are %s", o.problem, strings.Join(problems.Names(), ", "))
	}
	f := pr.Field
	d, np := f.Dim, f.Params
	j := &job{opts: o, pr: pr, pnames: paramNames(pr)}

	n := o.n
	if n < 1 {
		return nil, usagef("-n: %d; want at least 1 trajectory", n)
	}

	y0 := pr.Y0
	if o.set["y0"] {
		if y0, err = parseFloats(o.y0); err != nil {
			return nil, usagef("-y0: %v", err)
		}
		if len(y0) != d && len(y0) != n*d {
			return nil, usagef("-y0 has %d values, %s needs %d (its state dimension)%s", len(y0), pr.Name, d, rowsHint(n, d))
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
			return nil, usagef("-p has %d values, %s needs %d (%s)%s", len(p), pr.Name, np, strings.Join(j.pnames, ", "), rowsHint(n, np))
		}
	}
	y0, p = tileRows(y0, d, n), tileRows(p, np, n)

	seen := make(map[string]bool)
	for _, v := range o.vary {
		key := fmt.Sprintf("%s%d", v.Target, v.Index)
		if seen[key] {
			return nil, usagef("-vary %s: %s is swept twice", v, key)
		}
		seen[key] = true
		dst, width := p, np
		if v.Target == varyY0 {
			dst, width = y0, d
		}
		if v.Index >= width {
			if v.Target == varyY0 {
				return nil, usagef("-vary %s: %s has state dimension %d, so K is 0 to %d (y00 to y0%d)", v, pr.Name, d, d-1, d-1)
			}
			if np == 0 {
				return nil, usagef("-vary %s: %s has no per-trajectory parameters", v, pr.Name)
			}
			return nil, usagef("-vary %s: %s has %d parameters, p0 to p%d (%s)", v, pr.Name, np, np-1, strings.Join(j.pnames, ", "))
		}
		col := problems.LinSpace(make([]float64, n), v.Lo, v.Hi)
		for i, x := range col {
			dst[i*width+v.Index] = x
		}
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
	}

	switch {
	case !(o.rtol > 0) || !finite(o.rtol):
		return nil, usagef("-rtol: %v; want a positive number", o.rtol)
	case !(o.atol > 0) || !finite(o.atol):
		return nil, usagef("-atol: %v; want a positive number", o.atol)
	case o.maxSteps < 0:
		return nil, usagef("-max-steps: %d; want a positive number (0 means %d)", o.maxSteps, ode.DefaultMaxSteps)
	case !(o.dt0 >= 0) || !finite(o.dt0):
		return nil, usagef("-dt0: %v; want a positive number, or 0 to pick it automatically", o.dt0)
	case o.workers < 0:
		return nil, usagef("-workers: %d; want 0 (all cores) or more", o.workers)
	case o.block < 0:
		return nil, usagef("-block: %d; want 0 (the default) or more", o.block)
	}
	m, err := parseMethod(o.method)
	if err != nil {
		return nil, usagef("-method: %v", err)
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
			return nil, usagef("-loss %s: %s has %d state components, so K is 0 to %d", j.loss, pr.Name, d, d-1)
		}
	}

	j.prob = ode.Problem{Field: f, N: n, Y0: y0, P: p, Shared: pr.Shared, T0: t0, T1: t1, SaveAt: saveat}
	j.set = ode.Settings{
		Method:   m,
		RelTol:   o.rtol,
		AbsTol:   o.atol,
		MaxSteps: o.maxSteps,
		Dt0:      o.dt0,
	}
	j.set.Exec.Workers = o.workers
	j.set.Exec.BlockSize = o.block
	return j, nil
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
