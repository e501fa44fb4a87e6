package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNumericFlagDomains checks, for every command, that a numeric flag
// outside its domain (NaN, an infinity, a negative number, zero where it
// means nothing) is a command-line error: exit status 2, a message that
// names the flag and says what it wants, and no run.
func TestNumericFlagDomains(t *testing.T) {
	t.Parallel()
	fit := []string{"fit", "-problem", "vdp", "-fit", "mu", "-quiet"}
	bench := []string{"bench", "-suite", "lorenz", "-n", "4", "-reps", "1", "-quiet"}
	for _, tc := range []struct {
		base       []string
		flag       string
		values     []string
		wantInText string
	}{
		{fit, "-lr", []string{"NaN", "Inf", "-Inf", "-0.1", "0"}, "want"},
		{fit, "-steps", []string{"-3", "0"}, "want"},
		{fit, "-noise", []string{"NaN", "Inf", "-1", "1e308"}, "want"},
		{fit, "-clip", []string{"NaN", "Inf", "-1"}, "want"},
		{fit, "-fits", []string{"0", "-1"}, "want"},
		{fit, "-remesh", []string{"-2"}, "want"},
		{fit, "-n", []string{"0", "-1"}, "want"},
		{fit, "-rtol", []string{"NaN", "Inf", "0", "-1"}, "want"},
		{fit, "-atol", []string{"NaN", "Inf", "0", "-1"}, ""},
		{fit, "-t1", []string{"NaN", "Inf"}, ""},
		{fit, "-start", []string{"NaN", "Inf"}, ""},
		{fit, "-max-steps", []string{"-1"}, "want"},
		{fit, "-dt0", []string{"NaN", "Inf", "-1"}, "want"},
		{fit, "-workers", []string{"-1"}, "want"},
		{[]string{"solve", "-problem", "vdp"}, "-rtol", []string{"NaN", "Inf", "0", "-1", "1", "10", "1e-300"}, "want"},
		{[]string{"solve", "-problem", "vdp", "-t1", "1e308"}, "-t0", []string{"-1e308"}, "overflows"},
		{[]string{"solve", "-problem", "vdp", "-n", "3"}, "-vary", []string{"p0=-1e308:1e308"}, "overflows"},
		{[]string{"solve", "-problem", "vdp"}, "-t0", []string{"NaN", "Inf", "-Inf"}, ""},
		{[]string{"solve", "-problem", "vdp"}, "-n", []string{"0", "-1"}, "want"},
		{[]string{"grad", "-problem", "vdp"}, "-dt0", []string{"NaN", "-1"}, "want"},
		{[]string{"grad", "-problem", "vdp"}, "-block", []string{"-1"}, "want"},
		{[]string{"grad", "-problem", "vdp"}, "-max-steps", []string{"-5"}, "want"},
		{bench, "-rtol", []string{"NaN", "Inf", "0", "-1", "1", "1e400"}, ""},
		{bench, "-n", []string{"0", "-1", "1e3"}, ""},
		{bench, "-reps", []string{"0", "-1"}, ""},
		{bench, "-workers", []string{"-1"}, ""},
		{bench, "-ref-sample", []string{"-1"}, ""},
	} {
		for _, v := range tc.values {
			args := append(append([]string(nil), tc.base...), tc.flag, v)
			code, _, stderr := runArgs(args...)
			if code != exitUsage || !strings.Contains(stderr, tc.flag) || !strings.Contains(stderr, tc.wantInText) {
				t.Errorf("%s %s: exit %d, want %d with a message naming %s:\n%s", tc.flag, v, code, exitUsage, tc.flag, stderr)
			}
		}
	}
}

// fitResult is the part of fit's JSON object the tests read.
type fitResult struct {
	N            int         `json:"n"`
	Status       string      `json:"status"`
	Steps        int         `json:"steps"`
	Observations int         `json:"observations"`
	LossFirst    float64     `json:"loss_first"`
	Fitted       [][]float64 `json:"fitted"`
	FittedY0     [][]float64 `json:"fitted_y0"`
	History      []float64   `json:"history"`
}

// runFitJSON runs fit with args and -json and decodes its object.
func runFitJSON(t *testing.T, args ...string) fitResult {
	t.Helper()
	args = append([]string{"fit"}, append(args, "-json")...)
	code, stdout, stderr := runArgs(args...)
	if code != exitOK {
		t.Fatalf("%q: exit %d:\n%s", args, code, stderr)
	}
	var r fitResult
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%q: %v:\n%s", args, err, stdout)
	}
	return r
}

// writeFile writes s to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, s string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// vdpRows are observations of two Van der Pol trajectories (mu = 2,
// y0 = (2, 0)), without a header: trajectory 1 has a single observation,
// on the first line.
const vdpRows = `1,0.5,1.8,-0.6
0,0.5,1.8,-0.6
0,1,1.3,-1.1
`

// TestFitDataHeader checks that a data file without a header keeps its
// first row (a first row of numbers is data), and that one with a header
// reads the same observations.
func TestFitDataHeader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	noHeader := writeFile(t, dir, "a.csv", vdpRows)
	header := writeFile(t, dir, "b.csv", "traj,t,x,v\n"+vdpRows)
	common := []string{"-problem", "vdp", "-fit", "mu", "-steps", "1", "-lr", "1e-9"}
	a := runFitJSON(t, append(common, "-data", noHeader)...)
	b := runFitJSON(t, append(common, "-data", header)...)
	if a.N != 2 || b.N != 2 || a.Observations != 6 || b.Observations != 6 {
		t.Errorf("n = %d and %d, observations %d and %d; want 2 trajectories and 6 observations in both", a.N, b.N, a.Observations, b.Observations)
	}
	if a.LossFirst != b.LossFirst {
		t.Errorf("loss %v without a header, %v with one", a.LossFirst, b.LossFirst)
	}
	// A byte-order mark (as spreadsheets write) does not make the first
	// row a header, nor spoils a header.
	for _, s := range []string{"\ufeff" + vdpRows, "\ufefftraj,t,x,v\r\n" + strings.ReplaceAll(vdpRows, "\n", "\r\n")} {
		c := runFitJSON(t, append(common, "-data", writeFile(t, dir, "bom.csv", s))...)
		if c.N != 2 || c.Observations != 6 || c.LossFirst != a.LossFirst {
			t.Errorf("%q: n = %d, observations %d, loss %v; want 2, 6, %v", s, c.N, c.Observations, c.LossFirst, a.LossFirst)
		}
	}
}

// TestFitDataDuplicates checks that a repeated observation (the same
// trajectory and time twice) is kept, each counting in the loss, and
// that a note names both lines.
func TestFitDataDuplicates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	once := writeFile(t, dir, "once.csv", "traj,t,x,v\n0,0.5,1.8,-0.6\n0,1,1.3,-1.1\n")
	twice := writeFile(t, dir, "twice.csv", "traj,t,x,v\n0,0.5,1.8,-0.6\n0,1,1.3,-1.1\n0,1,1.3,-1.1\n")
	common := []string{"-problem", "vdp", "-fit", "mu", "-steps", "1", "-lr", "1e-9"}
	a := runFitJSON(t, append(common, "-data", once)...)
	b := runFitJSON(t, append(common, "-data", twice)...)
	if a.Observations != 4 || b.Observations != 6 {
		t.Errorf("observations %d and %d, want 4 and 6", a.Observations, b.Observations)
	}
	// The loss with the row twice: the loss at t = 0.5 plus twice that at t = 1.
	c := runFitJSON(t, append(common, "-data", writeFile(t, dir, "half.csv", "traj,t,x,v\n0,0.5,1.8,-0.6\n"))...)
	want := c.LossFirst + 2*(a.LossFirst-c.LossFirst)
	if math.Abs(b.LossFirst-want) > 1e-9*math.Abs(want) {
		t.Errorf("loss with the row twice %v, want %v", b.LossFirst, want)
	}
	_, _, stderr := runArgs(append([]string{"fit"}, append(common, "-data", twice)...)...)
	if !strings.Contains(stderr, "line 4") || !strings.Contains(stderr, "line 3") {
		t.Errorf("no note naming the repeated lines:\n%s", stderr)
	}
}

// TestFitDataErrors checks that bad rows of a data file are command-line
// errors naming the line, never a crash: trajectory indices that are
// huge, negative, not integers or not numbers, beyond -n, a trajectory
// without observations, times and values that are not finite, and rows
// of the wrong width.
func TestFitDataErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for k, tc := range []struct{ data, want string }{
		{"traj,t,x,v\n0,0.5,1,2\n1000000000000000,1,1,2\n", "line 3"},
		{"traj,t,x,v\n0,0.5,1,2\n1e15,1,1,2\n", "line 3"},
		{"traj,t,x,v\n0,0.5,1,2\n1e11,1,1,2\n", "line 3"},
		{"traj,t,x,v\n0,0.5,1,2\n9223372036854775807,1,1,2\n", "line 3"},
		{"traj,t,x,v\n0,0.5,1,2\n-1e300,1,1,2\n", "line 3"},
		{"traj,t,x,v\n-1,0.5,1,2\n", "line 2"},
		{"traj,t,x,v\n0.5,0.5,1,2\n", "line 2"},
		{"traj,t,x,v\nNaN,0.5,1,2\n", "line 2"},
		{"traj,t,x,v\n,0.5,1,2\n", "line 2"},
		{"traj,t,x,v\n0,NaN,1,2\n", "line 2"},
		{"traj,t,x,v\n0,0.5,Inf,2\n", "line 2"},
		{"traj,t,x,v\n0,0.5,1\n", "line 2"},
		{"traj,t,x,v\n0,0.5,1,2,3\n", "line 2"},
		{"# comment\ntraj,t,x,v\n0,0.5,1,2\n0,0.5,1,x\n", "line 4"},
		{"traj,t,x,v\n0,0.5,1,2\n2,0.5,1,2\n", "trajectory 1"},
		{"traj,t,x,v\n1,0.5,1,2\n", "trajectory 0 has no row (the trajectories are numbered 0 to n − 1, each with a row; the largest index makes n = 2, and the file has rows of 1 trajectory)"},
		{"traj,t,x,v\n", "no observations"},
		{"", "no observations"},
		{"traj,t,x,v\n0,0.5,,\n", "no observed value"},
		{"traj,t,x,v\n0,0.5,1,2\n0,-1,1,2\n", "from -1 to 0.5, beyond [t0, t1] = [0, 1]"},
		// Files of other shapes say what they are.
		{`{"traj": [0], "t": [0.5], "y": [[1, 2]]}`, "line 1: the file is JSON; -data takes a CSV file"},
		{"\ufeff\n  [[0, 0.5, 1, 2]]\n", "line 1: the file is JSON"},
		{"traj;t;x;v\n0;0.5;1;2\n", "line 1: the header has 1 column; want 4: traj, t and the 2 state components; fields are separated by commas, and this line has semicolons"},
		{"0;0,5;1;2\n", "line 1: the header has 2 columns; want 4: traj, t and the 2 state components; fields are separated by commas, and this line has semicolons"},
		{"traj,t,x,v\n0;0.5;1;2\n", "line 2: 1 field; want 4: traj, t and the 2 state components; fields are separated by commas, and this line has semicolons"},
		{"traj\tt\tx\tv\n0\t0.5\t1\t2\n", "this line has tabs"},
	} {
		path := writeFile(t, dir, fmt.Sprintf("d%d.csv", k), tc.data)
		code, _, stderr := runArgs("fit", "-problem", "vdp", "-fit", "mu", "-steps", "1", "-data", path)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "internal error") {
			t.Errorf("%q: exit %d, want %d naming %q:\n%s", tc.data, code, exitUsage, tc.want, stderr)
		}
	}
	// An index in number notation, as a program that writes integer
	// columns as floats writes it, is read as the integer.
	path := writeFile(t, dir, "float.csv", "traj,t,x,v\n0.0,0.5,1.8,-0.6\n1e0,0.5,1.8,-0.6\n")
	if r := runFitJSON(t, "-problem", "vdp", "-fit", "mu", "-steps", "1", "-data", path); r.N != 2 {
		t.Errorf("indices 0.0 and 1e0: n = %d, want 2", r.N)
	}
	path = writeFile(t, dir, "ok.csv", "traj,t,x,v\n0,0.5,1,2\n5,0.5,1,2\n")
	code, _, stderr := runArgs("fit", "-problem", "vdp", "-fit", "mu", "-steps", "1", "-n", "2", "-data", path)
	if code != exitUsage || !strings.Contains(stderr, "line 3") {
		t.Errorf("an index beyond -n: exit %d:\n%s", code, stderr)
	}
}

// TestFitOutputs checks -out and -format csv of fit, and that with fitted
// initial states every trajectory's appear in the output (human, JSON and
// CSV), not only trajectory 0's.
func TestFitOutputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	common := []string{"fit", "-problem", "vdp", "-fit", "mu,y00", "-n", "4", "-vary", "y00=1:2.5", "-steps", "3", "-quiet"}
	// JSON: fitted_y0 has one row per trajectory.
	r := runFitJSON(t, common[1:]...)
	if len(r.FittedY0) != 4 {
		t.Fatalf("fitted_y0 has %d rows, want 4", len(r.FittedY0))
	}
	for i, row := range r.FittedY0 {
		if len(row) != 1 || (i > 0 && row[0] == r.FittedY0[0][0]) {
			t.Errorf("fitted_y0 = %v: want each trajectory's own y00", r.FittedY0)
		}
	}
	// Human: the initial states of all four trajectories.
	code, stdout, stderr := runArgs(common...)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	for _, row := range r.FittedY0 {
		if !strings.Contains(stdout, fmt.Sprintf("%.6g", row[0])) {
			t.Errorf("the report lacks y00 = %.6g:\n%s", row[0], stdout)
		}
	}
	// CSV to stdout, and to -out.
	code, stdout, stderr = runArgs(append(common, "-format", "csv")...)
	if code != exitOK {
		t.Fatalf("-format csv: exit %d:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 5 || lines[0] != "traj,fit,mu,y00" {
		t.Errorf("-format csv:\n%s", stdout)
	}
	out := writeOld(t, dir, "fit.csv")
	code, stdout, stderr = runArgs(append(common, "-out", out)...)
	if code != exitOK {
		t.Fatalf("-out: exit %d:\n%s", code, stderr)
	}
	hdr, rows := readCSVFile(t, out)
	if strings.Join(hdr, ",") != "traj,fit,mu,y00" || len(rows) != 4 {
		t.Errorf("-out %s: header %v, %d rows", out, hdr, len(rows))
	}
	if !strings.Contains(stdout, "fit vdp") || !strings.Contains(stdout, out) {
		t.Errorf("-out: the report on stdout does not name the file:\n%s", stdout)
	}
	js := filepath.Join(dir, "fit.json")
	if code, _, stderr = runArgs(append(common, "-out", js)...); code != exitOK {
		t.Fatalf("-out json: exit %d:\n%s", code, stderr)
	}
	var obj fitResult
	if b, err := os.ReadFile(js); err != nil || json.Unmarshal(b, &obj) != nil || len(obj.FittedY0) != 4 {
		t.Errorf("-out %s: %v, %+v", js, err, obj)
	}
	checkNoTemp(t, dir)
}

// TestFitObservationTimes checks observation times that cannot inform the
// fitted parameters: every save time (or every -data row) at t0, where the
// states are the initial states whatever the parameters. Fitting a
// parameter there is a command-line error naming the flag, the parameters
// and the fix; fitting initial states there is a valid fit. Before, such
// a fit ran: "loss 0 -> 0", the start value returned, no word of why.
func TestFitObservationTimes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	atT0 := writeFile(t, dir, "t0.csv", "traj,t,x,v\n0,0,1,2\n1,0,1.5,0\n")
	for _, tc := range []struct {
		name string
		args []string
		want []string // in stderr; nil: the fit runs (exit 0)
	}{
		{"saveat 0", []string{"-problem", "lorenz", "-fit", "rho", "-saveat", "0"}, []string{"-saveat", "t0 = 0", "rho", "after t0"}},
		{"saveat 0,0", []string{"-problem", "lorenz", "-fit", "rho", "-saveat", "0,0"}, []string{"-saveat", "rho"}},
		{"saveat t0 = 1", []string{"-problem", "vdp", "-fit", "mu", "-t0", "1", "-t1", "2", "-saveat", "1"}, []string{"-saveat", "t0 = 1", "mu"}},
		{"a parameter and y0", []string{"-problem", "lorenz", "-fit", "rho,y00", "-saveat", "0"}, []string{"-saveat", "rho"}},
		{"data at t0", []string{"-problem", "vdp", "-fit", "mu", "-data", atT0}, []string{"-data", "t0 = 0", "mu"}},
		{"y0 at t0", []string{"-problem", "lorenz", "-fit", "y00", "-saveat", "0"}, nil},
		{"saveat 0,0.5", []string{"-problem", "lorenz", "-fit", "rho", "-saveat", "0,0.5"}, nil},
	} {
		args := append([]string{"fit", "-n", "2", "-steps", "2", "-t1", "1"}, tc.args...)
		if slices.Contains(tc.args, "-t1") {
			args = append([]string{"fit", "-n", "2", "-steps", "2"}, tc.args...)
		}
		code, _, stderr := runArgs(args...)
		if tc.want == nil {
			if code != exitOK {
				t.Errorf("Case %s: exit %d, want 0:\n%s", tc.name, code, stderr)
			}
			continue
		}
		if code != exitUsage {
			t.Errorf("Case %s: exit %d, want %d:\n%s", tc.name, code, exitUsage, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("Case %s: stderr lacks %q:\n%s", tc.name, w, stderr)
			}
		}
	}
}

// TestFitReportWords checks the words of fit's report for a new user:
// counts of one in the singular ("1 Adam step", "1 mesh recorded", not
// "1 Adam steps", "1 meshes"), a failure's advice in flags (-lr, -clip,
// not Settings.ClipNorm) without a doubled "fit: fit: ", and a note where
// the gradient was 0 at the start, so the fit could not move (it said
// "loss 0 -> 0" and nothing else).
func TestFitReportWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		args         []string
		code         int
		stdout, errs []string // in stdout, in stderr
		notOut       []string // not in stdout or stderr
	}{
		{"diverges at step 0", []string{"-fit", "rho", "-lr", "1e308"}, exitFail,
			[]string{"1 Adam step (failed), 1 mesh recorded"}, []string{"-lr", "-clip"}, []string{"Settings.ClipNorm", "fit: fit: ", "1 Adam steps", "1 meshes"}},
		{"starts at the truth", []string{"-fit", "rho", "-start", "28", "-steps", "2"}, exitOK,
			[]string{"2 Adam steps (max steps), 3 meshes recorded", "gradient was 0 at the start"}, nil, nil},
		{"moves", []string{"-fit", "rho", "-steps", "2"}, exitOK,
			[]string{"2 Adam steps"}, nil, []string{"gradient was 0"}},
	} {
		code, stdout, stderr := runArgs(append([]string{"fit", "-problem", "lorenz"}, tc.args...)...)
		if code != tc.code {
			t.Errorf("Case %s: exit %d, want %d:\n%s%s", tc.name, code, tc.code, stdout, stderr)
		}
		for _, w := range tc.stdout {
			if !strings.Contains(stdout, w) {
				t.Errorf("Case %s: stdout lacks %q:\n%s", tc.name, w, stdout)
			}
		}
		for _, w := range tc.errs {
			if !strings.Contains(stderr, w) {
				t.Errorf("Case %s: stderr lacks %q:\n%s", tc.name, w, stderr)
			}
		}
		for _, w := range tc.notOut {
			if strings.Contains(stdout+stderr, w) {
				t.Errorf("Case %s: the output says %q:\n%s%s", tc.name, w, stdout, stderr)
			}
		}
	}
}

// TestFitVaryFitted checks synthetic fits of a parameter that -vary
// sweeps: with several trajectories per fit, whose one value could not
// match their different true values, a command-line error naming -vary
// and the fix; with one trajectory per fit, each fit's own truth beside
// its value, and each fit starting from its own truth × 1.1. Before, both
// ran, the report's one "truth" row gave trajectory 0's value for every
// fit, and every fit started from trajectory 0's truth × 1.1.
func TestFitVaryFitted(t *testing.T) {
	t.Parallel()
	base := []string{"fit", "-problem", "lorenz", "-fit", "rho", "-n", "4", "-steps", "1"}
	code, _, stderr := runArgs(append(base, "-vary", "p1=20:30")...)
	if code != exitUsage || !strings.Contains(stderr, "-vary gives rho a different value") || !strings.Contains(stderr, "-fits 4") {
		t.Errorf("-fits 1: exit %d, want %d naming -vary and -fits 4:\n%s", code, exitUsage, stderr)
	}
	code, stdout, stderr := runArgs(append(base, "-vary", "p1=20:30", "-fits", "4", "-lr", "1e-9")...)
	if code != exitOK {
		t.Fatalf("-fits 4: exit %d:\n%s", code, stderr)
	}
	// With a tiny rate, each fit stays at its start: its truth × 1.1.
	rowsSeen := map[string]bool{}
	for _, line := range strings.Split(stdout, "\n") {
		rowsSeen[strings.Join(strings.Fields(line), " ")] = true
	}
	for _, want := range []string{"FIT rho (truth rho)", "0 22 20", "1 25.6667 23.3333", "3 33 30"} {
		if !rowsSeen[want] {
			t.Errorf("-fits 4: the report lacks the row %q:\n%s", want, stdout)
		}
	}
	code, stdout, stderr = runArgs(append(base, "-vary", "p0=9:11", "-fits", "2")...)
	if code != exitOK || !strings.Contains(stdout, "truth  28") || strings.Contains(stdout, "(truth") {
		t.Errorf("-vary of another parameter: exit %d, want one truth row:\n%s%s", code, stdout, stderr)
	}
}

// TestFitDefaultStart checks the default start of a synthetic fit: the
// truth × 1.1, and 0.1 for a truth of 0 (vdp's y01: × 1.1 started the
// fit at the truth, so the help's example "fitted" it without moving).
func TestFitDefaultStart(t *testing.T) {
	t.Parallel()
	r := runFitJSON(t, "-problem", "vdp", "-fit", "mu,y01", "-n", "2", "-steps", "1", "-lr", "1e-12")
	if len(r.Fitted) != 1 || len(r.Fitted[0]) != 2 || math.Abs(r.Fitted[0][0]-1.1) > 1e-9 || math.Abs(r.Fitted[0][1]-0.1) > 1e-9 {
		t.Errorf("fitted %v after one tiny step, want the start [1.1 0.1] (truth [1 0])", r.Fitted)
	}
}
