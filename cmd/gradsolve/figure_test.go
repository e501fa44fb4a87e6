package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/progress"
)

// TestPlot runs solve, grad and fit with -plot and checks that each file
// is written in the format its extension names, that the report lists it,
// and that no temporary file is left.
func TestPlot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args, file, what string
	}{
		{"solve -problem lorenz -n 8 -vary p1=0:28 -saveat 0.25,0.5,0.75,1", "saved.png", "the states at the save times of trajectories 0, 2, 5, 7 of 8"},
		{"solve -problem vdp", "one.svg", "the states at 201 times, solved again"},
		{"grad -problem lorenz -n 16 -vary p1=0:28", "sweep.pdf", "the gradient of sumsq against rho"},
		{"solve -problem lorenz -n 16", "index.png", "the final states against trajectory index"},
		{"grad -problem linear -n 3 -vary y00=1:2 -json", "linear.svg", "the gradient of sumsq against y0[0]"},
		{"fit -problem lorenz -fit rho -n 2 -steps 3", "loss.png", "loss curve written to"},
	} {
		path := filepath.Join(dir, tc.file)
		code, stdout, stderr := runArgs(append(strings.Fields(tc.args), "-plot", path)...)
		if code != exitOK {
			t.Errorf("%s -plot %s: exit %d\n%s", tc.args, tc.file, code, stderr)
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", tc.args, err)
			continue
		}
		magic := map[string]string{".png": "\x89PNG", ".svg": "<?xml", ".pdf": "%PDF"}[filepath.Ext(path)]
		if !bytes.HasPrefix(b, []byte(magic)) {
			t.Errorf("%s: %s starts with %q, want %q", tc.args, tc.file, b[:min(len(b), 8)], magic)
		}
		if strings.Contains(tc.args, "-json") {
			continue // the report is not printed
		}
		if !strings.Contains(stdout, tc.what) || !strings.Contains(stdout, path) {
			t.Errorf("%s: report lacks %q and the path:\n%s", tc.args, tc.what, stdout)
		}
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

// TestPlotErrors checks that a -plot that cannot be written is refused
// before the run, that errors name the path, and that a run with nothing
// to plot writes no file.
func TestPlotErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing", "x.png")
	failed := filepath.Join(dir, "failed.png")
	for _, tc := range []struct {
		args []string
		code int
		want []string // in stderr
	}{
		{[]string{"solve", "-plot", "out.txt"}, exitUsage, []string{"-plot", "out.txt", ".png"}},
		{[]string{"grad", "-plot", "noext"}, exitUsage, []string{"-plot", "noext", "no extension"}},
		{[]string{"fit", "-fit", "rho", "-plot", "loss.jpeg"}, exitUsage, []string{"-plot", "loss.jpeg"}},
		{[]string{"grad", "-plot", missing}, exitFail, []string{"-plot", missing}},
		{[]string{"fit", "-fit", "rho", "-plot", missing}, exitFail, []string{"-plot", missing}},
		{[]string{"solve", "-problem", "robertson", "-method", "tsit5", "-max-steps", "50", "-saveat", "1", "-plot", failed}, exitFail, []string{"-plot", failed, "nothing to plot"}},
	} {
		code, stdout, stderr := runArgs(tc.args...)
		if code != tc.code {
			t.Errorf("%q: exit %d, want %d\n%s", tc.args, code, tc.code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%q: stderr lacks %q:\n%s", tc.args, w, stderr)
			}
		}
		if tc.code == exitFail && strings.Contains(tc.args[len(tc.args)-1], "missing") && stdout != "" {
			t.Errorf("%q: ran before refusing the path:\n%s", tc.args, stdout)
		}
	}
	if _, err := os.Stat(failed); !os.IsNotExist(err) {
		t.Errorf("a run with nothing to plot left %s (%v)", failed, err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

// buildJob parses and builds a solve or grad command line.
func buildJob(t *testing.T, cmd, args string) *job {
	t.Helper()
	o, err := parseArgs(cmd, strings.Fields(args), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	j, err := o.build(machineLimits())
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestFigureData checks what the figures draw through their axes: the
// range of x and y is that of the data plotted.
func TestFigureData(t *testing.T) {
	t.Parallel()
	span := func(xs []float64, from, stride int) (lo, hi float64) {
		lo, hi = math.Inf(1), math.Inf(-1)
		for k := from; k < len(xs); k += stride {
			lo, hi = min(lo, xs[k]), max(hi, xs[k])
		}
		return lo, hi
	}
	check := func(name string, got, want [2]float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s: axis [%v, %v], want [%v, %v]", name, got[0], got[1], want[0], want[1])
		}
	}

	// grad of an ensemble: dL/drho etc. against rho.
	j := buildJob(t, "grad", "-problem lorenz -n 32 -vary p1=5:28")
	out := j.run(progress.Nop{})
	if out.err != nil {
		t.Fatal(out.err)
	}
	fig, _, err := j.figure(out)
	if err != nil {
		t.Fatal(err)
	}
	check("grad x", [2]float64{fig.Plot.X.Min, fig.Plot.X.Max}, [2]float64{5, 28})
	lo, hi := span(out.grad.P, 0, 1)
	check("grad y", [2]float64{fig.Plot.Y.Min, fig.Plot.Y.Max}, [2]float64{lo, hi})

	// solve with save times: the states of the sampled trajectories
	// against the save times.
	j = buildJob(t, "solve", "-problem lorenz -n 5 -vary p1=0:28 -saveat 0.1,0.5,1")
	out = j.run(progress.Nop{})
	if fig, _, err = j.figure(out); err != nil {
		t.Fatal(err)
	}
	check("saved x", [2]float64{fig.Plot.X.Min, fig.Plot.X.Max}, [2]float64{0.1, 1})
	var ys []float64 // trajectories 0, 1, 3, 4 (sampleIndices(5, 4))
	for _, i := range []int{0, 1, 3, 4} {
		ys = append(ys, out.sol.Ys[i*9:(i+1)*9]...)
	}
	lo, hi = span(ys, 0, 1)
	check("saved y", [2]float64{fig.Plot.Y.Min, fig.Plot.Y.Max}, [2]float64{lo, hi})
}
