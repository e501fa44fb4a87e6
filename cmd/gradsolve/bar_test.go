package main

import (
	"bytes"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/bench"
	"github.com/gradsolve-go/gradsolve/progress"
)

// runBars runs args in-process with the progress bars b and returns the
// exit status, stdout and stderr.
func runBars(b barConfig, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = runWith(args, &out, &errOut, setup{lim: machineLimits(), bars: b})
	return code, out.String(), errOut.String()
}

// terminalCodes reports whether s holds a carriage return or an escape
// sequence, as a progress bar draws.
func terminalCodes(s string) bool { return strings.ContainsAny(s, "\r\x1b") }

// barCommands are small runs of every command that has a progress bar,
// with the description and the final count of the bar.
var barCommands = []struct {
	args        []string
	desc, count string
}{
	{[]string{"solve", "-problem", "lorenz", "-n", "64", "-vary", "p1=0:21"}, "solve lorenz", "64/64"},
	{[]string{"grad", "-problem", "lorenz", "-n", "64", "-vary", "p1=0:21"}, "grad lorenz", "64/64"},
	{[]string{"fit", "-problem", "lorenz", "-fit", "rho", "-n", "2", "-steps", "3"}, "fit lorenz", "3/3"},
	{[]string{"bench", "-suite", "lorenz", "-n", "8", "-rtol", "1e-4", "-reps", "1", "-ref-sample", "2"}, "bench lorenz", "1/1"},
}

// TestBarsOffTerminal checks that no command draws a bar on a stderr that
// is not a terminal, even with no delay: stdout and stderr hold no
// carriage return and no escape sequence; and that every command accepts
// -quiet.
func TestBarsOffTerminal(t *testing.T) {
	t.Parallel()
	for _, c := range barCommands {
		for _, quiet := range []bool{false, true} {
			args := c.args
			if quiet {
				args = append(slices.Clone(args), "-quiet")
			}
			code, stdout, stderr := runBars(barConfig{}, args...)
			if code != exitOK {
				t.Errorf("%q: exit %d\n%s", args, code, stderr)
			}
			if terminalCodes(stdout) || terminalCodes(stderr) {
				t.Errorf("%q: terminal codes off a terminal:\nstdout %q\nstderr %q", args, stdout, stderr)
			}
		}
	}
}

// TestBarsForced checks, with the bar forced onto a stderr that is not a
// terminal and no delay, that every command draws its bar to the end on
// stderr only, and draws none with -quiet or with json output to stdout.
func TestBarsForced(t *testing.T) {
	t.Parallel()
	forced := barConfig{force: true}
	for _, c := range barCommands {
		code, stdout, stderr := runBars(forced, c.args...)
		if code != exitOK || !strings.Contains(stderr, c.desc) || !strings.Contains(stderr, c.count) {
			t.Errorf("%q: exit %d; stderr lacks the bar %q ... %q:\n%q", c.args, code, c.desc, c.count, stderr)
		}
		if terminalCodes(stdout) {
			t.Errorf("%q: the bar reached stdout: %q", c.args, stdout)
		}
		for _, flag := range []string{"-quiet", "-json"} {
			args := append(slices.Clone(c.args), flag)
			code, _, stderr := runBars(forced, args...)
			if code != exitOK || terminalCodes(stderr) || strings.Contains(stderr, c.count) {
				t.Errorf("%q: exit %d, a bar with %s:\n%q", args, code, flag, stderr)
			}
		}
	}
	// csv or json to a file: the bar is shown.
	dir := t.TempDir()
	for _, args := range [][]string{
		{"grad", "-problem", "lorenz", "-n", "64", "-vary", "p1=0:21", "-out", filepath.Join(dir, "g.csv")},
		{"bench", "-suite", "lorenz", "-n", "8", "-rtol", "1e-4", "-reps", "1", "-ref-sample", "2", "-json", "-out", filepath.Join(dir, "b.json")},
	} {
		if code, _, stderr := runBars(forced, args...); code != exitOK || !terminalCodes(stderr) {
			t.Errorf("%q: exit %d, no bar:\n%q", args, code, stderr)
		}
	}
	// A timer that fires while the work reports from several goroutines
	// (for the race detector; whether the bar shows depends on timing).
	args := []string{"grad", "-problem", "lorenz", "-n", "256", "-vary", "p1=0:21"}
	if code, stdout, _ := runBars(barConfig{delay: time.Millisecond, force: true}, args...); code != exitOK || terminalCodes(stdout) {
		t.Errorf("%q with a 1 ms delay: exit %d, stdout %q", args, code, stdout)
	}
	// -format json to stdout is as quiet as -json.
	args = []string{"solve", "-problem", "lorenz", "-n", "64", "-format", "json"}
	if code, _, stderr := runBars(forced, args...); code != exitOK || terminalCodes(stderr) {
		t.Errorf("%q: exit %d, a bar:\n%q", args, code, stderr)
	}
}

// TestLazyBar checks that a bar is drawn only once its delay has passed
// (here: never, or when the timer's function runs), and that newBar draws nothing when quiet, for no work, or off a
// terminal.
func TestLazyBar(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	r := newBar(10, false, &buf, "work", "steps", barConfig{delay: time.Hour, force: true})
	for i := 1; i <= 10; i++ {
		r.Report(i, math.NaN())
	}
	r.Finish()
	if buf.Len() != 0 {
		t.Errorf("a bar whose work ended before its delay drew %q", buf.String())
	}

	r = newBar(10, false, &buf, "work", "steps", barConfig{delay: time.Hour, force: true})
	r.Report(3, 0.5)
	l, ok := r.(*lazyBar)
	if !ok {
		t.Fatalf("newBar returned %T, want *lazyBar", r)
	}
	l.show() // as the timer does
	// The bar throttles its frames to one per 100 ms: the frame shown is
	// the last it drew, here with the loss and before the count of 3.
	if s := buf.String(); !strings.Contains(s, "work") || !strings.Contains(s, "/10") || !strings.Contains(s, "loss 0.5") {
		t.Errorf("shown bar = %q, want its last frame (loss 0.5, of 10)", s)
	}
	r.Finish()
	r.Report(5, math.NaN()) // ignored
	if s := buf.String(); !strings.Contains(s, "10/10") || strings.Contains(s, "5/10") {
		t.Errorf("finished bar = %q", s)
	}

	for _, tc := range []struct {
		total int
		quiet bool
		b     barConfig
	}{
		{10, true, barConfig{force: true}},
		{0, false, barConfig{force: true}},
		{10, false, barConfig{}}, // a bytes.Buffer is not a terminal
	} {
		if r := newBar(tc.total, tc.quiet, &buf, "work", "steps", tc.b); r != (progress.Nop{}) {
			t.Errorf("newBar(%d, quiet %v, %+v) = %T, want progress.Nop", tc.total, tc.quiet, tc.b, r)
		}
	}
}

// reports records the work done a caseWriter reports.
type reports struct{ done []int }

func (r *reports) Report(done int, _ float64) { r.done = append(r.done, done) }
func (r *reports) erase()                     {}

// TestBenchCases checks that a caseWriter counts the cases of each suite
// as package bench writes them: one report per case, 1 to the number
// benchCases gives, in table and in JSON form.
func TestBenchCases(t *testing.T) {
	t.Parallel()
	suites := []struct {
		name  string
		ns    []int
		rtols []float64
		run   func(w io.Writer, json bool) error
	}{
		{"lorenz", []int{8, 16}, []float64{1e-4}, func(w io.Writer, json bool) error {
			_, err := bench.RunLorenz(w, bench.LorenzConfig{N: []int{8, 16}, RelTol: []float64{1e-4}, Reps: 1, RefSample: 2, JSON: json})
			return err
		}},
		{"stiff", []int{4}, []float64{1e-4}, func(w io.Writer, json bool) error {
			_, err := bench.RunStiff(w, bench.StiffConfig{N: []int{4}, RelTol: []float64{1e-4}, Reps: 1, RefSample: 2, JSON: json})
			return err
		}},
		{"neural", []int{3}, nil, func(w io.Writer, json bool) error {
			_, err := bench.RunNeural(w, bench.NeuralConfig{B: []int{3}, Reps: 1, RefSample: 2, JSON: json})
			return err
		}},
		{"memory", []int{64}, nil, func(w io.Writer, json bool) error {
			_, err := bench.RunMemory(w, bench.MemoryConfig{N: 64, JSON: json})
			return err
		}},
	}
	for _, s := range suites {
		for _, json := range []bool{false, true} {
			cases, header := benchCases(s.name, s.ns, s.rtols, json)
			rec := &reports{}
			cw := &caseWriter{w: io.Discard, bar: rec, total: cases, header: header}
			if err := s.run(cw, json); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			// Reports count up by one to cases; a suite that writes one
			// case in several lines (memory) repeats the last.
			var want []int
			for k := 1; k <= cases; k++ {
				want = append(want, k)
			}
			if got := slices.Compact(slices.Clone(rec.done)); !slices.Equal(got, want) {
				t.Errorf("%s (json %v): reports %v, want %v", s.name, json, rec.done, want)
			}
		}
	}
	if cases, _ := benchCases("no such suite", nil, nil, false); cases != 0 {
		t.Errorf("an unknown suite has %d cases, want 0 (no bar)", cases)
	}
}
