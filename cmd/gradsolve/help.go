package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gradsolve-go/gradsolve/ode"
)

// Help texts of solve and grad. Keep jsonSchema, doc.go and the README's
// CLI section in step; TestJSONSchemaDocumented checks the keys.

const solveHelp = `Usage: gradsolve solve [flags]

Solves an ensemble of a built-in problem (see gradsolve problems) with an
adaptive method and prints the final states, the step statistics and the
status; with -saveat also the states at the given times.

Examples:

	gradsolve solve -problem vdp -p 5 -y0 2,0 -t1 3 -saveat 1,2,3
	gradsolve solve -problem lorenz -n 1000 -vary p1=0:21 -json
	gradsolve solve -problem lorenz -n 8 -vary p1=0:28 -saveat 0.25,0.5,0.75,1 -plot states.png
	gradsolve solve -problem vdp-stiff -method auto
`

const gradHelp = `Usage: gradsolve grad [flags]

Records an adaptive solve of every trajectory, replays the recorded mesh and
prints the loss with its exact gradient with respect to the per-trajectory
parameters, the initial states and any shared parameters (the discrete
adjoint of the replay).

Examples:

	gradsolve grad -problem lorenz -p 10,28,2.6666666666666665 -y0 1,0,0 -t0 0 -t1 1 -rtol 1e-10 -atol 1e-12 -loss sumsq -json
	gradsolve grad -problem vdp -p 2 -y0 2,0
	gradsolve grad -problem robertson -p 0.04,3e7,1e4 -y0 1,0,0 -t1 100 -method rodas5p -loss y:0 -json
	gradsolve grad -problem lorenz -n 32768 -vary p1=0:21 -rtol 1e-6
	gradsolve grad -problem lorenz -n 256 -vary p1=0:28 -plot grad.svg
	gradsolve grad -problem vdp-stiff -method auto -json
`

const ensembleHelp = `Ensembles: -n N runs N trajectories. -p and -y0 take one row (used by every
trajectory) or N rows, row-major. Each -vary pK=LO:HI (or y0K=LO:HI) sets
parameter K (state component K) of trajectory i to LO + i·(HI−LO)/(N−1), so
-n 64 -vary p1=0:21 sweeps Lorenz's rho over [0, 21]. A sweep needs N ≥ 2; it
replaces column K of a one-row -p (or -y0), with a note on stderr, and is an
error with N rows (write the sweep into the rows instead). For N > 1 the
report adds the timing, the step statistics (totals and min/median/max
accepted steps per trajectory) and checksums, and lists a sample of
trajectories.

Sizes: a command line whose ensemble needs more memory than the machine has
(physical memory, or GOMEMLIMIT if smaller) is refused before any work, with
the estimate and the largest -n that fits. A grad also stores about
8·(dim+1) bytes per step of each trajectory, beyond the estimate.
`

// runHelp is the help on methods, engines, progress and plots; its
// arguments are engineNote(), plotLines and densePoints.
const runHelp = `Methods: -method auto integrates with Tsit5 and switches a trajectory
to Rodas5P, from where it is, when its stiffness test fires (on every
engine: a GPU engine runs the stiff trajectories on with Rodas5P from
their switch times); the output names the method that ran (Auto when a
trajectory switched). On a trajectory that is stiff for it, an explicit
method (tsit5, vern7) runs at its stability limit: its states are
accurate (solve reports the trajectories as stiff), but the derivative of
its replay is meaningless, so grad refuses it: status stiff, exit status 1,
use -method rodas5p or -method auto.

Engines: -engine cpu (the default) runs the work on the CPU; -engine NAME on
a registered engine; -engine auto on the first available registered engine
other than the CPU, else the CPU. The output names the engine that ran.
%s

Progress: on a terminal, a run that lasts more than a second shows a bar on
stderr (grad counts every trajectory twice: recorded, then differentiated).
-quiet turns it off; there is none when stderr is not a terminal, nor with
csv or json output to stdout.

Plots: -plot FILE.png (or .svg, .pdf) draws the results, written through a
temporary file like -out: with -saveat, the states at the save times of up
to %d trajectories, evenly spaced over the ensemble; without, a single
trajectory at %d times (a second solve), or, for n > 1, the final states
(grad: the gradient with respect to the parameters) against the first
-vary quantity, or against the trajectory's index.
`

const outputHelp = `Output: -format human (the default) prints a readable report; -format json
(or -json) one object, described below; -format csv a table with a header
and one row per trajectory:

	i                 the trajectory's index, from 0
	y0[0], ...        its initial state
	sigma, ...        its parameters, by name (p0, p1, ... if unnamed)
	t                 the time it reached (t1, unless it failed)
	y[0], ...         its state at t
	status            ok, max steps reached, step size underflow, non-finite state,
	                  not run; grad: stiff for the explicit method (no gradient)
	accepted, rejected  its steps
	dL/dy0[0], ...    grad: the gradient with respect to the initial state
	dL/dsigma, ...    grad: the gradient with respect to each parameter

An empty field is a value that could not be computed, or is NaN or
infinite (null in JSON). The gradient with respect to shared parameters
is in the JSON output only. With -saveat, the saved states are a second
table in long form, one row per trajectory and save time (i, t, y[0], ...),
written beside -out FILE.csv as FILE.saved.csv; CSV with -saveat needs
-out.

-out FILE writes the output to FILE, through a temporary file in the same
directory renamed when it is complete: a run that fails or is interrupted
leaves no half-written file, and a failed run (exit status 1) still writes
its complete output with the statuses. Without -format, an -out name ending
in .csv or .json picks that format. With csv or json going to FILE, the
readable report goes to stdout. -out - (or /dev/stdout) is stdout.

Files: no file is created or changed until the whole command line is
valid; every output (-out, its .saved.csv, -plot) is written to a
temporary file in its directory, synced and renamed into place, so an
existing file is replaced whole or left as it was. Two outputs that name
one file (also through a symbolic link) are refused (exit status 2). A
write error, on stdout too (a full disk), gives exit status 1. SIGINT or
SIGTERM removes the temporary files and exits with status 130 or 143,
leaving every file as it was.
`

// jsonSchema documents the -json output of solve and grad.
const jsonSchema = `JSON output (-json): one object. Arrays are row-major: trajectory i's row of
y_final is y_final[i*dim:(i+1)*dim]. A value that could not be computed, or is
NaN or infinite, is null.

	command           "solve" or "grad"
	problem, method   the problem's name; the method that ran, as "Tsit5" (-method
	                  auto: Tsit5, or Rodas5P if the stiffness test fired)
	engine            the engine that ran, as "cpu"
	n, dim, params    trajectories, state dimension, per-trajectory parameters
	t0, t1            the time span
	rtol, atol        the tolerances (atol: a list if one per component)
	vary              the -vary sweeps, as ["p1=0:21"]
	loss_name         grad: the loss, "sumsq" or "y:K"
	status            "ok"; "stiff" if the gradient was refused because a
	                  trajectory is stiff for the explicit method; otherwise the
	                  error text of the failed run
	error             null, or the error text (with what to try)
	failed            number of failed trajectories
	stiff             number of trajectories stiff for the explicit method (its
	                  stiffness test fired): solve's states are accurate, grad
	                  refuses their gradient
	loss              grad: the loss, a number
	y_final           [n×dim] final states (null entries for failed trajectories)
	grad_p            grad: [n×params] dL/dp
	grad_y0           grad: [n×dim] dL/dy0
	grad_shared       grad, problems with shared parameters: [shared] dL/dshared
	saveat, y_saved   with -saveat: the times, and [n×len(saveat)×dim] states
	accepted          accepted steps, summed over the trajectories
	rejected          rejected steps, summed over the trajectories
	steps_min, steps_median, steps_max
	                  accepted steps of one trajectory: min, (lower) median, max
	checksum_y        sum of all entries of y_final
	checksum_grad_p   grad: sum of all entries of grad_p
	checksum_grad_y0  grad: sum of all entries of grad_y0
	time_ms           wall time of the whole run, in milliseconds
	setup_ms, record_ms, grad_ms
	                  tracing and step programs; recording (solve: solving); gradient

The per-trajectory arrays (y_final, grad_p, grad_y0, y_saved) are left out
when n > 1024 unless -arrays is given; the other keys are always present.
On a failure the object is still printed, with status and error saying why.
`

const exitHelp = `Exit status: 0 on success; 1 if the run failed: a trajectory failed, the
gradient was refused because a trajectory is stiff for the explicit method,
the gradient is not finite, or the output or the plot could not be written
(stderr and the status say where and why, with what to try); 2 for a bad
command line (the message names the flag), and for an internal error (a
bug: please report it).
`

// engineNote lists the engines of this build and says where the GPU
// engine comes from if this build lacks it.
func engineNote() string {
	names := ode.Engines()
	s := "This build has: " + strings.Join(names, ", ") + "."
	if !slices.Contains(names, "cuda") {
		s += " The GPU engine, cuda, needs package cuda,\nwhich this build does not include."
	}
	return s
}

// commandHelp writes the help of solve or grad, with fs's flags.
func commandHelp(w io.Writer, cmd string, fs *flag.FlagSet) {
	if cmd == "grad" {
		fmt.Fprint(w, gradHelp)
	} else {
		fmt.Fprint(w, solveHelp)
	}
	fmt.Fprint(w, "\nFlags:\n\n")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
	fmt.Fprintln(w)
	fmt.Fprint(w, ensembleHelp)
	fmt.Fprintln(w)
	fmt.Fprintf(w, runHelp, engineNote(), plotLines, densePoints)
	fmt.Fprintln(w)
	fmt.Fprint(w, outputHelp)
	fmt.Fprintln(w)
	fmt.Fprint(w, jsonSchema)
	fmt.Fprintln(w)
	fmt.Fprint(w, exitHelp)
}
