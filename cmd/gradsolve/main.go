package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/gradsolve-go/gradsolve/internal/atomicfile"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// Exit statuses.
const (
	exitOK    = 0 // success
	exitFail  = 1 // the solve, gradient or benchmark failed
	exitUsage = 2 // bad command line
)

func main() {
	handleSignals()
	code := run(os.Args[1:], os.Stdout, os.Stderr)
	finishCompiles(os.Stderr)
	os.Exit(code)
}

// handleSignals makes SIGINT and SIGTERM end the process with status 130
// or 143 (128 + the signal's number, as a shell reports it) once the
// temporary files of the outputs being written are removed: an
// interrupted run leaves every output file as it was and no temporary
// file behind.
//
// A broken pipe on stdout (gradsolve ... | head) is not a signal that
// kills the process here: the write fails with EPIPE, and the command
// fails as on any write error (exit status 1), its outputs aborted.
func handleSignals() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-ch
		atomicfile.RemovePending()
		fmt.Fprintf(os.Stderr, "\ngradsolve: interrupted (%v); the outputs not yet complete are left as they were, with no temporary file\n", sig)
		code := 130
		if sig == syscall.SIGTERM {
			code = 143
		}
		os.Exit(code)
	}()
}

// run runs the command line args (without the program name), writing
// results to stdout and diagnostics to stderr, and returns the exit
// status. Runs are bounded by the machine's memory (see machineLimits).
func run(args []string, stdout, stderr io.Writer) int {
	return runLimited(args, stdout, stderr, machineLimits())
}

// runLimited is run with the given limits and the default progress bars.
func runLimited(args []string, stdout, stderr io.Writer, lim limits) int {
	return runWith(args, stdout, stderr, setup{lim: lim, bars: defaultBars})
}

// setup is what a command runs with besides its arguments and streams.
type setup struct {
	lim  limits    // resource limits
	bars barConfig // progress bars
}

// runWith is run with the given setup. A panic anywhere in the command (a
// bug) is recovered here: it is reported as an internal error and the
// status is exitUsage, so that no input crashes the process.
func runWith(args []string, stdout, stderr io.Writer, su setup) (code int) {
	defer func() {
		if r := recover(); r != nil {
			reportPanic(stderr, r)
			code = exitUsage
		}
	}()
	// Every write error on stdout (a full disk, a closed pipe) makes the
	// command fail, whichever part of it wrote.
	out := &errWriter{w: stdout}
	defer func() {
		if out.err != nil && code == exitOK {
			fmt.Fprintf(stderr, "gradsolve: writing the standard output: %v\n", out.err)
			code = exitFail
		}
	}()
	return runCommand(args, out, stderr, su)
}

// runCommand runs the command of args.
func runCommand(args []string, stdout, stderr io.Writer, su setup) int {
	if len(args) == 0 {
		mainHelp(stderr)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "solve", "grad":
		return solveOrGrad(cmd, rest, stdout, stderr, su)
	case "problems":
		return problemsCommand(rest, stdout, stderr)
	case "fit":
		return fitCommand(rest, stdout, stderr, su)
	case "bench":
		err := benchCommand(rest, stdout, stderr, su.lim, su.bars)
		switch {
		case err == nil || errors.Is(err, flag.ErrHelp):
			return exitOK
		case isUsage(err):
			fmt.Fprintf(stderr, "gradsolve bench: %v\n", err)
			fmt.Fprintln(stderr, "Run 'gradsolve help bench' for usage.")
			return exitUsage
		}
		fmt.Fprintf(stderr, "gradsolve bench: %v\n", err)
		return exitFail
	case "help", "-h", "-help", "--help":
		return helpCommand(rest, stdout, stderr)
	}
	fmt.Fprintf(stderr, "gradsolve: unknown command %q; the commands are solve, grad, fit, bench, problems and help\n", cmd)
	fmt.Fprintln(stderr, "Run 'gradsolve help' for usage.")
	return exitUsage
}

// reportPanic writes the internal error of a recovered panic r, with
// where it happened and a request to report it. It does not panic itself,
// even if stderr does.
func reportPanic(stderr io.Writer, r any) {
	where := panicSite()
	defer func() { recover() }() // a stderr that panics has nowhere to report to
	fmt.Fprintf(stderr, "gradsolve: internal error: %v%s\n", r, where)
	fmt.Fprintln(stderr, "This is a bug in gradsolve, not in your command line: please report it with the command line that caused it.")
}

// panicSite returns " (at file:line)" for the function that panicked,
// the first frame below runtime.gopanic on the stack of the deferred call
// that recovers it, or "" if it cannot be found.
func panicSite() string {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(1, pc)])
	panicking := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			panicking = true
		case panicking && !strings.HasPrefix(f.Function, "runtime."):
			return fmt.Sprintf(" (at %s:%d)", filepath.Base(f.File), f.Line)
		}
		if !more {
			return ""
		}
	}
}

// isUsage reports whether err is a command-line error: a *usageError, as
// parseFlags and the checks of every command return them.
func isUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u)
}

const mainUsage = `gradsolve solves ensembles of small ODEs and returns exact reverse-mode
gradients of a loss of the solutions (record the adaptive mesh, differentiate
its replay). The work runs on the CPU, or on another engine chosen with
-engine (see gradsolve help solve).
%s

Usage:

	gradsolve <command> [flags]

The commands are:

	solve     solve an ensemble of a built-in problem
	grad      solve and return the loss and its gradient
	fit       fit parameters of a problem to data with Adam
	bench     run the benchmark suites
	problems  list the built-in problems
	help      show help for a command: gradsolve help grad

Examples:

	gradsolve grad -problem lorenz -p 10,28,2.6666666666666665 -y0 1,0,0 -t1 1 -rtol 1e-10 -atol 1e-12 -json
	gradsolve grad -problem robertson -t1 100 -method rodas5p -loss y:0
	gradsolve grad -problem lorenz -n 32768 -vary p1=0:21 -rtol 1e-6
	gradsolve solve -problem vdp -p 5 -y0 2,0 -t1 3 -saveat 1,2,3
	gradsolve grad -problem lorenz -n 1000 -vary p1=0:21 -out sweep.csv
	gradsolve grad -problem vdp-stiff -method auto
	gradsolve solve -problem lorenz -n 64 -vary p1=0:28 -plot sweep.png

A run that lasts more than a second shows a progress bar on a terminal
(stderr); -quiet turns it off.

Exit status: 0 on success, 1 if a run failed (a trajectory, a gradient
refused because a trajectory is stiff for the explicit method, a non-finite
gradient, writing the output, stdout included: stderr says why), 2 for a bad
command line or an internal error, 130 or 143 if interrupted by SIGINT or
SIGTERM (the outputs not yet complete are left as they were). No file is
written before the command line is valid, every output replaces its file
whole, and two outputs that name one file are refused.
`

func mainHelp(w io.Writer) { fmt.Fprintf(w, mainUsage, engineNote()) }

// helpCommand runs "gradsolve help [command]".
func helpCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		mainHelp(stdout)
		return exitOK
	}
	switch args[0] {
	case "solve", "grad":
		var o options
		commandHelp(stdout, args[0], newFlagSet(args[0], &o, stdout))
		return exitOK
	case "bench":
		// bench documents itself through its flags.
		if err := benchCommand([]string{"-h"}, stdout, stdout, limits{}, defaultBars); err != nil && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "gradsolve bench: %v\n", err)
			return exitFail
		}
		return exitOK
	case "problems":
		fmt.Fprint(stdout, problemsUsage)
		return exitOK
	case "fit":
		fitUsage(stdout, newFitFlagSet(&options{}, &fitOptions{}, stdout))
		return exitOK
	case "help":
		mainHelp(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "gradsolve help: unknown command %q; the commands are solve, grad, fit, bench, problems and help\n", args[0])
	return exitUsage
}

const problemsUsage = `Usage: gradsolve problems [-json]

Lists the built-in problems: name, state dimension, parameters (per
trajectory, with their names, and shared), stiffness, the default method and
time span, and a one-line description with the equations and a reference.
A long list of parameter names is shortened in the table (k1, k2, k3, …,
k25); -json gives every name (param_names), with the default y0 and p.
-problem also takes lorenz96-<d> (d ≥ 4) and brusselator-<cells> (cells ≥ 1)
for the other sizes of those two, as lorenz96-40.
`

// shortNames joins names with commas, keeping the table narrow: more than
// six names show as the first three, an ellipsis and the last.
func shortNames(names []string) string {
	if len(names) > 6 {
		names = append(names[:3:3], "…", names[len(names)-1])
	}
	return strings.Join(names, ", ")
}

// problemsCommand runs "gradsolve problems".
func problemsCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("problems", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print a JSON array")
	if err := parseFlags(fs, args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprint(stderr, problemsUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "gradsolve problems: %v\n", err)
		fmt.Fprintln(stderr, "Run 'gradsolve help problems' for usage.")
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gradsolve problems: unexpected argument %q\n", fs.Arg(0))
		fmt.Fprintln(stderr, "Run 'gradsolve help problems' for usage.")
		return exitUsage
	}
	var list []jsonObject
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	if !*asJSON {
		fmt.Fprintln(tw, "NAME\tDIM\tPARAMS\tSHARED\tSTIFF\tMETHOD\tT0\tT1\tDESCRIPTION")
	}
	for _, name := range problems.Names() {
		pr, err := problems.ByName(name)
		if err != nil {
			fmt.Fprintf(stderr, "gradsolve problems: %v\n", err)
			return exitFail
		}
		f := pr.Field
		pn := paramNames(pr)
		method := ode.Route(&f).Name()
		if *asJSON {
			list = append(list, jsonObject{
				{"name", pr.Name}, {"dim", f.Dim}, {"params", f.Params}, {"param_names", pn},
				{"shared", f.Shared}, {"stiff", f.Stiff}, {"method", method},
				{"y0", jsonFloats(pr.Y0)}, {"p", jsonFloats(pr.P)},
				{"t0", jsonFloat(pr.T0)}, {"t1", jsonFloat(pr.T1)}, {"doc", pr.Doc},
			})
			continue
		}
		params := "-"
		if f.Params > 0 {
			params = fmt.Sprintf("%d (%s)", f.Params, shortNames(pn))
		}
		stiff := "no"
		if f.Stiff {
			stiff = "yes"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%g\t%g\t%s\n", pr.Name, f.Dim, params, f.Shared, stiff, method, pr.T0, pr.T1, pr.Doc)
	}
	if *asJSON {
		return writeJSON(stdout, stderr, list)
	}
	fmt.Fprintln(tw, "\nlorenz96-<d> (d ≥ 4) and brusselator-<cells> (cells ≥ 1) name the other sizes of those two, as -problem lorenz96-40.")
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "gradsolve problems: %v\n", err)
		return exitFail
	}
	return exitOK
}
