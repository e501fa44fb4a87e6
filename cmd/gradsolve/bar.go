package main

import (
	"bytes"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gradsolve-go/gradsolve/bench"
	"github.com/gradsolve-go/gradsolve/progress"
)

// This file holds the progress bars of the commands: solve, grad and fit
// over their work, bench over the cases of a suite. A bar is drawn by
// package progress on stderr, only on a terminal, and only once the work
// has lasted barDelay: quick runs, pipes, files and CI logs never see one.

// barDelay is how long work runs before its bar appears.
const barDelay = time.Second

// barConfig configures the progress bars of a command. The zero value draws
// bars at once; defaultBars is what the command uses.
type barConfig struct {
	delay time.Duration // the bar appears once the work has lasted this long; ≤ 0: at once
	force bool          // draw on a stderr that is not a terminal (tests)
}

var defaultBars = barConfig{delay: barDelay}

// newBar returns a reporter for total units of work, described by desc
// and counted in unit ("traj", "steps", "cases"): progress.Nop if quiet,
// if total < 1, or if stderr is not a terminal (unless b.force);
// otherwise a bar of package progress that runs from the start, so that
// its rates and times are right, but is drawn on stderr only once the
// work has lasted b.delay. Its Finish must be called before the command
// writes its results.
func newBar(total int, quiet bool, stderr io.Writer, desc, unit string, b barConfig) progress.Reporter {
	if quiet || total < 1 || (!b.force && !progress.IsTerminal(stderr)) {
		return progress.Nop{}
	}
	l := &lazyBar{gate: &gate{w: stderr}, loss: math.NaN()}
	// The gate is not a terminal: Force makes progress draw into it.
	l.bar = progress.New(total, &progress.Settings{Writer: l.gate, Force: true, Description: desc, Unit: unit})
	if b.delay <= 0 {
		l.show()
		return l
	}
	l.timer = time.AfterFunc(b.delay, l.show)
	return l
}

// gate is a writer that holds back what it is given until it is opened,
// keeping only the last frame of the bar: the last write with more than
// carriage returns and spaces (those clear the line before a frame).
type gate struct {
	mu   sync.Mutex
	w    io.Writer
	open bool
	last []byte
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		return g.w.Write(p)
	}
	if len(bytes.Trim(p, "\r ")) > 0 {
		g.last = append(g.last[:0], p...)
	}
	return len(p), nil
}

// openGate opens the gate and writes the last frame held back.
func (g *gate) openGate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		return
	}
	g.open = true
	if g.last != nil {
		g.w.Write(g.last)
		g.last = nil
	}
}

// isOpen reports whether the gate is open.
func (g *gate) isOpen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// lazyBar is a progress.Reporter whose bar draws into a gate that its
// timer opens. It is safe for concurrent use.
type lazyBar struct {
	mu       sync.Mutex
	bar      progress.Reporter
	gate     *gate
	timer    *time.Timer
	done     int
	loss     float64
	finished bool
}

// show opens the gate, which draws the last frame of the bar, and
// reports the work as it stands (drawn unless the bar drew a frame in the
// last 100 ms, its throttle).
func (l *lazyBar) show() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished {
		return
	}
	l.gate.openGate()
	l.bar.Report(l.done, l.loss)
}

// Report sets the work done and the loss.
func (l *lazyBar) Report(done int, loss float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished {
		return
	}
	l.done, l.loss = done, loss
	l.bar.Report(done, loss)
}

// eraseLine is the terminal sequence that returns to the start of the
// line and clears it.
const eraseLine = "\r\x1b[K"

// erase clears the bar's line if the bar is drawn, so that a line written
// to the same terminal (bench's rows on stdout) takes its place; the next
// Report draws the bar again below it.
func (l *lazyBar) erase() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.finished && l.gate.isOpen() {
		io.WriteString(l.gate, eraseLine)
	}
}

// Finish stops the timer and ends the bar (drawn only if the gate is
// open).
func (l *lazyBar) Finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished {
		return
	}
	l.finished = true
	if l.timer != nil {
		l.timer.Stop()
	}
	l.bar.Finish()
}

// passes reports the trajectories of several passes over an ensemble
// (grad records, then differentiates) to a bar of n units, for
// ode.Settings.Progress: a trajectory is done when every pass has done
// it, each pass doing 1/passes of it, so that the bar's count and rate are
// trajectories, those of the report. It is safe for concurrent use.
type passes struct {
	report func(done, total int) // progress.SolveFunc: never goes backwards
	n      int
	passes int // the number of passes; 1 if 0
	pass   atomic.Int64
}

func newPasses(r progress.Reporter, n int) *passes {
	return &passes{report: progress.SolveFunc(r), n: n, passes: 1}
}

// next starts the next pass.
func (p *passes) next() { p.pass.Add(1) }

// progress is the ode.Settings.Progress function: done trajectories of the
// current pass.
func (p *passes) progress(done, _ int) {
	k := max(p.passes, 1)
	units := int64(p.pass.Load())*int64(p.n) + int64(min(done, p.n))
	p.report(int(units/int64(k)), 0)
}

// benchCases returns the number of cases (result rows) the bench suite
// writes for the -n sizes ns and the -rtol tolerances rtols (nil: the
// suite's defaults), and the lines of table header before the first row
// (json: none). It returns 0 cases for a suite it does not know.
func benchCases(suite string, ns []int, rtols []float64, json bool) (cases, header int) {
	or := func(x, def int) int {
		if x > 0 {
			return x
		}
		return def
	}
	header = 2
	switch suite {
	case "lorenz":
		cases = or(len(ns), len(bench.DefaultLorenzN)) * or(len(rtols), len(bench.DefaultLorenzRelTol))
	case "stiff":
		cases = len(bench.DefaultStiffProblems) * or(len(ns), len(bench.DefaultStiffN)) *
			(or(len(rtols), len(bench.DefaultStiffRelTol)) + len(bench.DefaultRosenbrock23RelTol))
	case "neural":
		cases = or(len(ns), len(bench.DefaultNeuralB))
	case "memory":
		cases, header = 1, 0 // its one case is written at its end
	default:
		return 0, 0
	}
	if json {
		header = 0
	}
	return cases, header
}

// caseWriter passes a bench suite's output to w and reports to bar one
// case done for every line after the header: the suites write one table
// row, or one JSON line, as each case completes (the memory suite writes
// its one case's lines at its end). It erases the bar before each write,
// in case w is the bar's terminal.
type caseWriter struct {
	w                    io.Writer
	bar                  caseBar
	total, header, lines int
}

// caseBar is the part of *lazyBar a caseWriter uses.
type caseBar interface {
	Report(done int, loss float64)
	erase()
}

func (c *caseWriter) Write(p []byte) (int, error) {
	c.bar.erase()
	n, err := c.w.Write(p)
	c.lines += bytes.Count(p[:n], []byte{'\n'})
	if done := c.lines - c.header; done > 0 {
		c.bar.Report(min(done, c.total), math.NaN())
	}
	return n, err
}

// benchBar returns the writer a bench suite writes its results to (w, or
// w wrapped to count the cases) and the bar over its cases, whose Finish
// the caller calls when the suite ends.
func benchBar(w, stderr io.Writer, suite string, ns []int, rtols []float64, json, quiet bool, b barConfig) (io.Writer, progress.Reporter) {
	cases, header := benchCases(suite, ns, rtols, json)
	r := newBar(cases, quiet, stderr, "bench "+suite, "cases", b)
	l, ok := r.(*lazyBar)
	if !ok {
		return w, r
	}
	return &caseWriter{w: w, bar: l, total: cases, header: header}, r
}
