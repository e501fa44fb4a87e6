package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/progress"
)

// outcome is what a solve or grad computed, possibly in part: a failed
// recording still has its statistics and the states its trajectories
// reached.
type outcome struct {
	sol  *ode.Solution // final (and saved) states, statuses, statistics; nil if none
	grad *ode.Gradient // grad only; nil if the gradient was not computed
	err  error         // the failure, nil on success

	setup, record, gradient, total time.Duration

	written []string // the output files written, as "runs.csv (64 trajectories)"

	solver *ode.Solver // the solver that ran; nil if it could not be made
}

// methodRan returns the name of the method that produced the solution (with
// -method auto, Tsit5 or Rodas5P), or of the method asked for if there is
// no solution.
func (j *job) methodRan(out *outcome) string {
	if out.sol != nil && out.sol.Method != "" {
		return out.sol.Method
	}
	return j.method.Name()
}

// engineRan returns the name of the engine that ran the job, or of the
// engine asked for if none ran.
func (j *job) engineRan(out *outcome) string {
	switch {
	case out.sol != nil && out.sol.Engine != "":
		return out.sol.Engine
	case out.solver != nil:
		return out.solver.Engine()
	}
	return j.set.Engine
}

// stiff returns the number of trajectories on which the stiffness test
// of an explicit method fired (ode.Solution.Stiff).
func (out *outcome) stiff() int {
	k := 0
	if out.sol != nil {
		for _, s := range out.sol.Stiff {
			if s {
				k++
			}
		}
	}
	return k
}

// refusedStiff reports whether the gradient was refused because a
// trajectory is stiff for the explicit method that recorded it.
func (out *outcome) refusedStiff() bool { return errors.Is(out.err, ode.ErrStiff) }

// solveOrGrad runs the solve or grad command and returns the exit status.
func solveOrGrad(cmd string, args []string, stdout, stderr io.Writer, su setup) int {
	o, err := parseArgs(cmd, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var j *job
	if err == nil {
		j, err = o.build(su.lim)
	}
	if err != nil {
		fmt.Fprintf(stderr, "gradsolve %s: %v\n", cmd, err)
		fmt.Fprintf(stderr, "Run 'gradsolve help %s' for usage.\n", cmd)
		if o != nil && (o.json || strings.EqualFold(strings.TrimSpace(o.format), formatJSON)) && writesStdout(o.out) {
			writeJSON(stdout, stderr, jsonObject{{"command", cmd}, {"status", err.Error()}, {"error", err.Error()}})
		}
		return exitUsage
	}
	for _, note := range j.notes {
		fmt.Fprintf(stderr, "gradsolve %s: %s\n", cmd, note)
	}

	// The outputs must be different files.
	var outs []fileArg
	if !writesStdout(o.out) {
		outs = append(outs, fileArg{flag: "-out", path: o.out})
		if o.format == formatCSV && len(j.prob.SaveAt) > 0 {
			outs = append(outs, fileArg{flag: "-out (its saved states)", path: savedPath(o.out)})
		}
	}
	if err := checkFiles(append(outs, fileArg{flag: "-plot", path: o.plot})...); err != nil {
		fmt.Fprintf(stderr, "gradsolve %s: %v\n", cmd, err)
		return exitUsage
	}

	// Create the output files before the run, so that a path that cannot
	// be written costs no work.
	var file, saved, fig *atomicFile
	if !writesStdout(o.out) {
		if file, err = createAtomic(o.out); err != nil {
			fmt.Fprintf(stderr, "gradsolve %s: -out: %v\n", cmd, err)
			return exitFail
		}
		defer file.Abort()
		if o.format == formatCSV && len(j.prob.SaveAt) > 0 {
			if saved, err = createAtomic(savedPath(o.out)); err != nil {
				fmt.Fprintf(stderr, "gradsolve %s: -out: %v\n", cmd, err)
				return exitFail
			}
			defer saved.Abort()
		}
	}
	if o.plot != "" {
		if fig, err = createAtomic(o.plot); err != nil {
			fmt.Fprintf(stderr, "gradsolve %s: -plot: %v\n", cmd, err)
			return exitFail
		}
		defer fig.Abort()
	}

	// No bar when the data go to stdout: that output is for a program.
	quiet := o.quiet || (o.format != formatHuman && writesStdout(o.out))
	desc := fmt.Sprintf("%s %s", cmd, j.pr.Name)
	out := j.run(newBar(j.n(), quiet, stderr, desc, "traj", su.bars))
	status := exitOK
	if out.err != nil {
		status = exitFail
		fmt.Fprintf(stderr, "gradsolve %s: %s\n", cmd, out.statusText())
	}
	if fig != nil {
		what, err := j.writeFigure(fig, out)
		if err != nil {
			fmt.Fprintf(stderr, "gradsolve %s: -plot: %v\n", cmd, err)
			status = exitFail
		} else {
			out.written = append(out.written, fmt.Sprintf("%s (plot: %s)", o.plot, what))
		}
	}

	if file == nil {
		if err := j.writeOutput(stdout, o.format, out); err != nil {
			fmt.Fprintf(stderr, "gradsolve %s: writing the output: %v\n", cmd, err)
			return exitFail
		}
		return status
	}
	err = j.writeOutput(file, o.format, out)
	if err == nil {
		err = file.Commit()
	} else {
		err = fmt.Errorf("writing %s: %v", o.out, err)
	}
	if err == nil && saved != nil {
		if err = j.writeSavedCSV(saved, out); err == nil {
			err = saved.Commit()
		} else {
			err = fmt.Errorf("writing %s: %v", saved.Path(), err)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "gradsolve %s: %v\n", cmd, err)
		status = exitFail
	} else {
		what := count(j.n(), "trajectory")
		if o.format == formatCSV {
			what = count(j.n(), "row")
		}
		out.written = append(out.written, fmt.Sprintf("%s (%s, %s)", o.out, o.format, what))
		if saved != nil {
			out.written = append(out.written, fmt.Sprintf("%s (saved states, %s)", saved.Path(), count(j.n()*len(j.prob.SaveAt), "row")))
		}
	}
	if o.format != formatHuman {
		// The data went to the file; the readable report goes to stdout.
		if err := j.writeHuman(stdout, out); err != nil {
			fmt.Fprintf(stderr, "gradsolve %s: writing the report: %v\n", cmd, err)
			return exitFail
		}
	}
	return status
}

// writesStdout reports whether -out path names the standard output: ""
// (no -out), "-" or /dev/stdout.
func writesStdout(path string) bool {
	return path == "" || path == "-" || filepath.Clean(path) == "/dev/stdout"
}

// writeOutput writes out to w in format (formatHuman, formatCSV or
// formatJSON).
func (j *job) writeOutput(w io.Writer, format string, out *outcome) error {
	switch format {
	case formatCSV:
		return j.writeCSV(w, out)
	case formatJSON:
		return encodeJSON(w, j.jsonResult(out))
	}
	return j.writeHuman(w, out)
}

// run solves (and, for grad, differentiates) the job, reporting the
// trajectories done to bar (grad: half a trajectory for each recorded,
// half for each differentiated, so that the bar counts n trajectories, as
// the report does) and finishing it before it returns.
func (j *job) run(bar progress.Reporter) *outcome {
	defer bar.Finish()
	out := &outcome{}
	start := time.Now()
	defer func() { out.total = time.Since(start) }()
	set := j.set
	var pass *passes
	if _, ok := bar.(progress.Nop); !ok {
		pass = newPasses(bar, j.n())
		if j.opts.cmd == "grad" {
			pass.passes = 2 // record, then differentiate
		}
		set.Progress = pass.progress
	}
	sv, err := ode.NewSolver(j.prob.Field, &set)
	if err != nil {
		out.err = err
		return out
	}
	out.solver = sv
	out.setup = time.Since(start)
	if j.opts.cmd == "solve" {
		t := time.Now()
		out.sol, out.err = sv.Solve(&j.prob)
		out.record = time.Since(t)
		return out
	}
	t := time.Now()
	m, sol, err := sv.Record(&j.prob)
	out.record = time.Since(t)
	out.sol = sol
	if err != nil {
		out.err = err
		return out
	}
	if pass != nil {
		pass.next()
	}
	t = time.Now()
	g, err := sv.Grad(nil, &j.prob, j.odeLoss(), m)
	out.gradient = time.Since(t)
	if err != nil {
		out.err = err
		return out
	}
	out.grad, out.sol = g, g.Solution
	out.err = checkFiniteGradient(g)
	return out
}

// checkFiniteGradient returns an error naming the first NaN or infinite
// number among the loss and the gradient of g, or nil. (Grad reports a
// non-finite gradient itself; this makes sure no such number is printed
// with status ok.)
func checkFiniteGradient(g *ode.Gradient) error {
	if !finite(g.Loss) {
		return fmt.Errorf("the loss is %v", g.Loss)
	}
	n := g.Solution.N
	for _, part := range []struct {
		name string
		xs   []float64
	}{{"dL/dy0", g.Y0}, {"dL/dp", g.P}} {
		for k, x := range part.xs {
			if !finite(x) {
				w := len(part.xs) / max(n, 1)
				return fmt.Errorf("non-finite gradient: %s[%d] of trajectory %d is %v", part.name, k%w, k/w, x)
			}
		}
	}
	for k, x := range g.Shared {
		if !finite(x) {
			return fmt.Errorf("non-finite gradient: dL/dshared[%d] is %v", k, x)
		}
	}
	return nil
}

// odeLoss returns the loss of the job.
func (j *job) odeLoss() ode.Loss {
	if j.loss.Kind == lossComponent {
		return ode.Component(j.loss.K)
	}
	return ode.SumSquares()
}

// stepSummary summarises the accepted steps per trajectory.
type stepSummary struct {
	accepted, rejected int // totals
	min, median, max   int // accepted steps of one trajectory
	failed             int // trajectories whose status is not OK
}

func summarize(sol *ode.Solution) stepSummary {
	var s stepSummary
	if sol == nil {
		return s
	}
	s.accepted, s.rejected = sol.Stats.TotalAccepted(), sol.Stats.TotalRejected()
	if acc := append([]int(nil), sol.Stats.Accepted...); len(acc) > 0 {
		sort.Ints(acc)
		s.min, s.median, s.max = acc[0], acc[(len(acc)-1)/2], acc[len(acc)-1]
	}
	for _, st := range sol.Status {
		if st != ode.OK {
			s.failed++
		}
	}
	return s
}

// sum returns the sum of xs (NaN if xs is nil).
func sum(xs []float64) float64 {
	if xs == nil {
		return nan
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

var nan = math.NaN()

func ms(d time.Duration) jsonFloat { return jsonFloat(float64(d.Microseconds()) / 1e3) }

// statusText is "ok" or the failure, its hints translated into flags.
func (out *outcome) statusText() string {
	if out.err == nil {
		return "ok"
	}
	return errorText(out.err)
}

// jsonStatus is the status of the JSON output: "ok", "stiff" if the
// gradient was refused because a trajectory is stiff for the explicit
// method, or the failure (statusText).
func (out *outcome) jsonStatus() string {
	if out.refusedStiff() {
		return "stiff"
	}
	return out.statusText()
}

// cliHints rewrites the library's advice (see ode.TrajectoryError) in
// terms of the command's flags. Earlier pairs win where two match.
var cliHints = strings.NewReplacer(
	"use Rodas5P (Settings.Method), or Auto to switch when the stiffness test fires",
	"use -method rodas5p, or -method auto to switch to Rodas5P when the stiffness test fires",
	"Settings.MaxSteps", "-max-steps",
	"use Rodas5P", "use -method rodas5p",
	"try Rodas5P", "try -method rodas5p",
	"lower the learning rate or clip the gradient (Settings.ClipNorm)", "lower -lr or clip the gradient (-clip)",
)

// jsonResult builds the -json object. Its keys are documented in
// jsonSchema; a key the run could not compute is null.
func (j *job) jsonResult(out *outcome) jsonObject {
	n, d, np := j.n(), j.prob.Field.Dim, j.prob.Field.Params
	st := summarize(out.sol)
	var vs []string
	for _, v := range j.opts.vary {
		vs = append(vs, v.String())
	}
	if vs == nil {
		vs = []string{}
	}
	obj := jsonObject{
		{"command", j.opts.cmd},
		{"problem", j.pr.Name},
		{"method", j.methodRan(out)},
		{"engine", j.engineRan(out)},
		{"n", n}, {"dim", d}, {"params", np},
		{"t0", jsonFloat(j.prob.T0)}, {"t1", jsonFloat(j.prob.T1)},
		{"rtol", jsonFloat(j.set.RelTol)}, {"atol", j.atolJSON()},
		{"vary", vs},
	}
	if j.opts.cmd == "grad" {
		obj = append(obj, jsonField{"loss_name", j.loss.String()})
	}
	var errText any // null on success
	if out.err != nil {
		errText = out.statusText()
	}
	obj = append(obj, jsonField{"status", out.jsonStatus()}, jsonField{"error", errText},
		jsonField{"failed", st.failed}, jsonField{"stiff", out.stiff()})

	arrays := n <= jsonArrayLimit || j.opts.arrays
	var y, gp, gy, gs []float64
	loss := nan
	if out.sol != nil {
		y = out.sol.Y
	}
	if out.grad != nil {
		loss, gp, gy, gs = out.grad.Loss, out.grad.P, out.grad.Y0, out.grad.Shared
	}
	if j.opts.cmd == "grad" {
		obj = append(obj, jsonField{"loss", jsonFloat(loss)})
	}
	if arrays {
		obj = append(obj, jsonField{"y_final", jsonFloats(y)})
		if j.opts.cmd == "grad" {
			obj = append(obj, jsonField{"grad_p", nonNil(gp, out.grad)}, jsonField{"grad_y0", nonNil(gy, out.grad)})
			if j.prob.Field.Shared > 0 {
				obj = append(obj, jsonField{"grad_shared", nonNil(gs, out.grad)})
			}
		}
		if len(j.prob.SaveAt) > 0 {
			var ys []float64
			if out.sol != nil {
				ys = out.sol.Ys
			}
			obj = append(obj, jsonField{"saveat", jsonFloats(j.prob.SaveAt)}, jsonField{"y_saved", jsonFloats(ys)})
		}
	}
	obj = append(obj,
		jsonField{"accepted", st.accepted}, jsonField{"rejected", st.rejected},
		jsonField{"steps_min", st.min}, jsonField{"steps_median", st.median}, jsonField{"steps_max", st.max},
		jsonField{"checksum_y", jsonFloat(sum(y))},
	)
	if j.opts.cmd == "grad" {
		obj = append(obj, jsonField{"checksum_grad_p", jsonFloat(sum(nonNil(gp, out.grad)))},
			jsonField{"checksum_grad_y0", jsonFloat(sum(nonNil(gy, out.grad)))})
	}
	obj = append(obj,
		jsonField{"time_ms", ms(out.total)}, jsonField{"setup_ms", ms(out.setup)},
		jsonField{"record_ms", ms(out.record)})
	if j.opts.cmd == "grad" {
		obj = append(obj, jsonField{"grad_ms", ms(out.gradient)})
	}
	return obj
}

// atolJSON returns the absolute tolerance for the JSON output: a number,
// or a list of one per component.
func (j *job) atolJSON() any {
	if len(j.atol) == 1 {
		return jsonFloat(j.atol[0])
	}
	return jsonFloats(j.atol)
}

// nonNil returns xs, or an empty list (not nil) if the gradient g was
// computed and xs is empty (a problem without parameters has grad_p []).
func nonNil(xs []float64, g *ode.Gradient) jsonFloats {
	if g != nil && xs == nil {
		return jsonFloats{}
	}
	return jsonFloats(xs)
}
