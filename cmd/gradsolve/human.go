package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
)

// sampleRows is the most trajectories the human output of an ensemble
// lists; larger ensembles list evenly spaced ones, first and last
// included.
const sampleRows = 9

// writeHuman writes the readable report of a solve or grad.
func (j *job) writeHuman(w io.Writer, out *outcome) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	n, np := j.n(), j.prob.Field.Params
	isGrad := j.opts.cmd == "grad"
	what := "solve"
	if isGrad {
		what = "gradient"
	}
	if n > 1 {
		what += fmt.Sprintf(" of %d trajectories", n)
	}
	fmt.Fprintf(tw, "%s: %s with %s on the %s engine, t from %g to %g, rtol %g, atol %s\n",
		j.pr.Name, what, j.methodText(out), j.engineRan(out), j.prob.T0, j.prob.T1, j.set.RelTol, j.atolText())
	for _, v := range j.opts.vary {
		fmt.Fprintf(tw, "vary\t%s%d (%s) from %g to %g\n", v.Target, v.Index, j.varyName(v), v.Lo, v.Hi)
	}
	fmt.Fprintf(tw, "status\t%s\n", out.statusText())
	st := summarize(out.sol)
	if st.failed > 0 && n > 1 {
		fmt.Fprintf(tw, "failed\t%d of %d trajectories\n", st.failed, n)
	}
	if k := out.stiff(); k > 0 {
		fmt.Fprintf(tw, "stiff\t%s\n", j.stiffText(out, k))
	}
	if isGrad && out.grad != nil {
		fmt.Fprintf(tw, "loss\t%s = %.10g\n", j.loss, out.grad.Loss)
	}
	if out.sol != nil {
		if n == 1 {
			fmt.Fprintf(tw, "steps\t%d accepted, %d rejected\n", st.accepted, st.rejected)
		} else {
			fmt.Fprintf(tw, "steps\t%d accepted, %d rejected; per trajectory min %d, median %d, max %d accepted\n",
				st.accepted, st.rejected, st.min, st.median, st.max)
		}
	}
	timing := fmt.Sprintf("%s (setup %s, record %s", fmtDur(out.total), fmtDur(out.setup), fmtDur(out.record))
	if isGrad {
		timing += ", gradient " + fmtDur(out.gradient)
	}
	timing += ")"
	if n > 1 && out.total > 0 {
		timing += fmt.Sprintf("; %.0f trajectories/s", float64(n)/out.total.Seconds())
	}
	fmt.Fprintf(tw, "time\t%s\n", timing)
	if n > 1 && out.sol != nil {
		cs := fmt.Sprintf("sum y(t1) = %.10g", sum(out.sol.Y))
		if out.grad != nil {
			if np > 0 { // a problem without parameters has no dL/dp to sum
				cs += fmt.Sprintf(", sum dL/dp = %.10g", sum(out.grad.P))
			}
			cs += fmt.Sprintf(", sum dL/dy0 = %.10g", sum(out.grad.Y0))
		}
		fmt.Fprintf(tw, "checksum\t%s\n", cs)
	}
	if out.grad != nil && len(out.grad.Shared) > 0 {
		g := out.grad.Shared
		fmt.Fprintf(tw, "dL/dshared\t%s, sum %.6g, norm %.6g\n", count(len(g), "value"), sum(g), norm(g))
	}
	for _, f := range out.written {
		fmt.Fprintf(tw, "output\t%s\n", f)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if out.sol == nil || (n == 1 && st.failed > 0) {
		return nil // a failed trajectory's states are NaN; status says where it stopped
	}
	fmt.Fprintln(w)
	if n == 1 {
		return j.writeSingle(w, out)
	}
	return j.writeEnsemble(w, out, np)
}

// methodText names the method that ran; with -method auto, also why.
func (j *job) methodText(out *outcome) string {
	ran := j.methodRan(out)
	if j.set.Method != ode.Auto || out.sol == nil {
		return ran
	}
	switch ran {
	case ode.Tsit5.Name():
		return ran + " (-method auto: the stiffness test did not fire)"
	case ode.Auto.Name():
		sol, k := out.sol, 0
		for i, s := range sol.Switch {
			if s < sol.Stats.Accepted[i] {
				k++
			}
		}
		which := "the trajectory"
		if sol.N > 1 {
			which = fmt.Sprintf("%d of %d trajectories", k, sol.N)
		}
		return fmt.Sprintf("Tsit5, then Rodas5P (-method auto: the stiffness test fired with Tsit5 on %s, which went on with Rodas5P from there)", which)
	}
	return ran + " (-method auto: the stiffness test fired with Tsit5)"
}

// stiffText says that k trajectories are stiff for the explicit method
// that ran, and what it means for the command.
func (j *job) stiffText(out *outcome, k int) string {
	which := "yes"
	if n := j.n(); n > 1 {
		which = fmt.Sprintf("%d of %d trajectories", k, n)
	}
	s := fmt.Sprintf("%s (the stiffness test of %s fired): ", which, j.methodRan(out))
	if out.refusedStiff() {
		return s + "no gradient; use -method rodas5p or -method auto"
	}
	return s + "the states are accurate, but -method rodas5p or -method auto is faster here, and grad needs one of them"
}

// writeSingle writes the tables of one trajectory: states, parameters
// and saved states.
func (j *job) writeSingle(w io.Writer, out *outcome) error {
	d, np := j.prob.Field.Dim, j.prob.Field.Params
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	g := out.grad
	if g != nil {
		fmt.Fprintln(tw, "state\ty0\ty(t1)\tdL/dy0")
	} else {
		fmt.Fprintln(tw, "state\ty0\ty(t1)")
	}
	for c := 0; c < d; c++ {
		fmt.Fprintf(tw, "y[%d]\t%.10g\t%.10g", c, j.prob.Y0[c], out.sol.Y[c])
		if g != nil {
			fmt.Fprintf(tw, "\t%.10g", g.Y0[c])
		}
		fmt.Fprintln(tw)
	}
	if np > 0 {
		fmt.Fprintln(tw)
		if g != nil {
			fmt.Fprintln(tw, "parameter\tvalue\tdL/dp")
		} else {
			fmt.Fprintln(tw, "parameter\tvalue")
		}
		for k := 0; k < np; k++ {
			fmt.Fprintf(tw, "%s\t%.10g", j.pnames[k], j.prob.P[k])
			if g != nil {
				fmt.Fprintf(tw, "\t%.10g", g.P[k])
			}
			fmt.Fprintln(tw)
		}
	}
	if K := len(j.prob.SaveAt); K > 0 && out.sol.Ys != nil {
		fmt.Fprintln(tw)
		fmt.Fprint(tw, "t")
		for c := 0; c < d; c++ {
			fmt.Fprintf(tw, "\ty[%d]", c)
		}
		fmt.Fprintln(tw)
		for k, tau := range j.prob.SaveAt {
			fmt.Fprintf(tw, "%g", tau)
			for c := 0; c < d; c++ {
				fmt.Fprintf(tw, "\t%.10g", out.sol.Ys[k*d+c])
			}
			fmt.Fprintln(tw)
		}
	}
	return tw.Flush()
}

// writeEnsemble writes a table of sampled trajectories: index, swept
// values, final state and parameter gradient.
func (j *job) writeEnsemble(w io.Writer, out *outcome, np int) error {
	n, d := j.n(), j.prob.Field.Dim
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	g := out.grad
	hdr := []string{"i"}
	for _, v := range j.opts.vary {
		hdr = append(hdr, j.varyName(v))
	}
	for c := 0; c < d; c++ {
		hdr = append(hdr, fmt.Sprintf("y[%d](t1)", c))
	}
	if g != nil {
		for k := 0; k < np; k++ {
			hdr = append(hdr, "dL/d"+j.pnames[k])
		}
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t")+"\t")
	for _, i := range sampleIndices(n, sampleRows) {
		row := []string{fmt.Sprint(i)}
		for _, v := range j.opts.vary {
			var x float64
			if v.Target == varyY0 {
				x = j.prob.Y0[i*d+v.Index]
			} else {
				x = j.prob.P[i*np+v.Index]
			}
			row = append(row, fmt.Sprintf("%.6g", x))
		}
		for c := 0; c < d; c++ {
			row = append(row, fmt.Sprintf("%.6g", out.sol.Y[i*d+c]))
		}
		if g != nil {
			for k := 0; k < np; k++ {
				row = append(row, fmt.Sprintf("%.6g", g.P[i*np+k]))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n > sampleRows {
		if _, err := fmt.Fprintf(w, "(%d of %d trajectories shown; -format csv or -json -arrays gives all)\n", sampleRows, n); err != nil {
			return err
		}
	}
	if K := len(j.prob.SaveAt); K > 0 {
		_, err := fmt.Fprintf(w, "(the states at the %s are in the -json output, y_saved, and in the -format csv -out FILE output)\n", count(K, "-saveat time"))
		return err
	}
	return nil
}

// varyName names the swept quantity of v: the parameter's name or y0[K].
func (j *job) varyName(v vary) string {
	if v.Target == varyP && v.Index < len(j.pnames) {
		return j.pnames[v.Index]
	}
	return fmt.Sprintf("%s[%d]", v.Target, v.Index)
}

// sampleIndices returns at most k indices of 0..n-1, evenly spaced, the
// first and the last included.
func sampleIndices(n, k int) []int {
	if n <= k {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	idx := make([]int, k)
	for i := range idx {
		idx[i] = int(math.Round(float64(i) * float64(n-1) / float64(k-1)))
	}
	return idx
}

func norm(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x * x
	}
	return math.Sqrt(s)
}

// fmtDur formats a duration in milliseconds, or seconds from 1 s, to
// three significant digits, trailing zeros kept (1.00 s, 83.8 ms, 197 ms),
// so that every time of a report reads to the same precision.
func fmtDur(d time.Duration) string {
	if d >= time.Second {
		return sig3(d.Seconds()) + " s"
	}
	return sig3(float64(d.Microseconds())/1e3) + " ms"
}

// sig3 formats x ≥ 0 to three significant digits in fixed notation, with
// its trailing zeros; numbers of four digits or more are whole.
func sig3(x float64) string {
	s := strconv.FormatFloat(x, 'g', 3, 64) // rounds first: 9.996 → 10
	if strings.ContainsAny(s, "e") || x == 0 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	v, _ := strconv.ParseFloat(s, 64)
	digits := 0
	for p := 100.0; v < p && digits < 6; p /= 10 {
		digits++
	}
	return strconv.FormatFloat(v, 'f', digits, 64)
}
