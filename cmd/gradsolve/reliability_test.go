package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// runArgs runs args in-process and returns the exit status, stdout and
// stderr.
func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// panicWriter panics on every write, standing in for a bug anywhere in a
// command.
type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("write to a panicking writer") }

// TestExitCodes checks the exit status of each kind of outcome, and that
// a non-zero status comes with a message on stderr.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"ok", []string{"grad", "-problem", "vdp"}, exitOK, ""},
		{"ok json", []string{"solve", "-problem", "vdp", "-json"}, exitOK, ""},
		{"failed trajectory", []string{"solve", "-problem", "robertson", "-method", "tsit5", "-max-steps", "50"}, exitFail, "max steps reached"},
		{"failed trajectory json", []string{"grad", "-problem", "robertson", "-method", "tsit5", "-max-steps", "50", "-json"}, exitFail, "max steps reached"},
		{"stiff for the explicit method", []string{"grad", "-problem", "vdp-stiff", "-method", "tsit5", "-t1", "30", "-json"}, exitFail, "stiff for Tsit5"},
		{"output directory missing", []string{"grad", "-out", filepath.Join(dir, "missing", "g.csv")}, exitFail, filepath.Join(dir, "missing", "g.csv")},
		{"output is a directory", []string{"grad", "-out", dir}, exitFail, "is a directory"},
		{"bad flag", []string{"grad", "-bogus"}, exitUsage, "-bogus"},
		{"bad value", []string{"grad", "-n", "x"}, exitUsage, "-n"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runArgs(tc.args...)
			if code != tc.code {
				t.Errorf("%q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.code, stdout, stderr)
			}
			if code != exitOK && !strings.Contains(stderr, tc.want) {
				t.Errorf("%q: stderr lacks %q:\n%s", tc.args, tc.want, stderr)
			}
		})
	}
}

// TestWriteErrorExit checks that an output that cannot be written gives
// exit status 1 and a message.
func TestWriteErrorExit(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"grad", "-problem", "vdp"},
		{"grad", "-problem", "vdp", "-json"},
		{"grad", "-problem", "vdp", "-format", "csv"},
		{"solve", "-problem", "vdp", "-n", "3"},
	} {
		var errOut bytes.Buffer
		code := run(args, failWriter{}, &errOut)
		if code != exitFail || !strings.Contains(errOut.String(), "disk full") {
			t.Errorf("%q to a failing stdout: exit %d, want %d, stderr %q", args, code, exitFail, errOut.String())
		}
	}
}

// TestPanicRecovered checks that a panic inside a command is reported as
// an internal error with exit status 2, not a crash.
func TestPanicRecovered(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"grad", "-problem", "vdp"},
		{"problems"},
		{"help", "grad"},
	} {
		var errOut bytes.Buffer
		code := run(args, panicWriter{}, &errOut)
		msg := errOut.String()
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
		for _, want := range []string{"internal error", "write to a panicking writer", "please report it"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q: stderr lacks %q:\n%s", args, want, msg)
			}
		}
		if strings.Count(strings.TrimSpace(msg), "\n") != 1 {
			t.Errorf("%q: want two lines (the error and the hint):\n%s", args, msg)
		}
	}
	// A stderr that panics too: still no crash.
	if code := run([]string{"grad", "-bogus"}, panicWriter{}, panicWriter{}); code != exitUsage {
		t.Errorf("panicking stdout and stderr: exit %d, want %d", code, exitUsage)
	}
}

// TestSizes checks that sizes that would overflow, exhaust memory or make
// no sense are refused with exit status 2 and a message naming the flag,
// before any work.
func TestSizes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args string
		want []string
	}{
		{"grad -n 9223372036854775807", []string{"-n 9223372036854775807", "needs at least", "per trajectory", "more than the", "use -n"}},
		{"grad -n 1000000000000", []string{"-n 1000000000000", "a grad of lorenz needs", "use -n"}},
		{"solve -n 1000000000000", []string{"a solve of lorenz needs"}},
		{"solve -problem hires -n 1000000000000 -saveat 1,2", []string{"a solve of hires", "save at fewer times"}},
		{"grad -n 4000000000 -json -arrays", []string{"drop -arrays"}},
		{"grad -n 9223372036854775807 -p 1,2", []string{"-n 9223372036854775807"}},
		{"grad -n -5", []string{"-n: -5"}},
		{"grad -block 1000000000 -n 3", []string{"-block: 1000000000", "65536"}},
		{"grad -block -1", []string{"-block: -1"}},
		{"grad -workers -1", []string{"-workers: -1"}},
		{"grad -max-steps -1", []string{"-max-steps: -1"}},
		{"bench -n 1000000000000", []string{"-n 1000000000000", "lorenz suite"}},
		{"bench -suite memory -n 9223372036854775807", []string{"memory suite"}},
		{"bench -suite stiff -n 1000000000000", []string{"stiff suite"}},
		{"bench -suite memory -n 10 -checkpoint 9223372036854775807", []string{"-checkpoint 9223372036854775807", "100000"}},
		{"bench -suite memory -n 10 -checkpoint -1", []string{"-checkpoint -1"}},
		{"bench -suite memory -n 10 -memory-limit -1", []string{"-memory-limit -1"}},
		{"bench -workers -1", []string{"-workers -1"}},
		{"bench -ref-sample -1", []string{"-ref-sample -1"}},
	} {
		t.Run(tc.args, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runArgs(strings.Fields(tc.args)...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitUsage, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// TestBlockLargerThanN checks that a block larger than the ensemble runs
// (as a block of n) and gives the same numbers as the automatic block.
func TestBlockLargerThanN(t *testing.T) {
	t.Parallel()
	code, big, stderr := runArgs("grad", "-n", "3", "-vary", "p1=0:21", "-block", "65536", "-format", "csv")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	_, auto, _ := runArgs("grad", "-n", "3", "-vary", "p1=0:21", "-format", "csv")
	if big != auto {
		t.Errorf("-block 65536 -n 3 differs from the automatic block:\n%s\n%s", big, auto)
	}
}

// TestNoParameterChecksum checks that a problem without parameters does
// not print a sum of its (empty) dL/dp as NaN.
func TestNoParameterChecksum(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runArgs("grad", "-problem", "hires", "-n", "2", "-t1", "1")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if strings.Contains(stdout, "NaN") || strings.Contains(stdout, "dL/dp") {
		t.Errorf("report has NaN or a dL/dp sum for a problem without parameters:\n%s", stdout)
	}
	if !strings.Contains(stdout, "sum dL/dy0") {
		t.Errorf("report lacks the dL/dy0 checksum:\n%s", stdout)
	}
}

// TestVaryRules checks -vary against n and against -p and -y0 rows.
func TestVaryRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args string
		code int
		want string // in stderr
	}{
		{"grad -vary p0=1:2", exitUsage, "but n = 1, which would take LO alone; use -n 2 or more, or set the value with -p"},
		{"grad -problem vdp -vary y01=0:1", exitUsage, "use -n 2 or more, or set the value with -y0"},
		{"grad -n 2 -p 1,2,3,4,5,6 -vary p0=1:2", exitUsage, "-vary p0=1:2 would overwrite column 0 of the 2 rows given by -p"},
		{"grad -n 2 -y0 1,0,0,1,0,0 -vary y02=0:1", exitUsage, "of the 2 rows given by -y0"},
		{"grad -n 2 -p 10,28,3 -vary p1=0:21", exitOK, "note: -vary p1=0:21 replaces rho = 28 given by -p"},
		{"grad -n 2 -y0 1,0,0 -vary y00=0:1", exitOK, "note: -vary y00=0:1 replaces y0[0] = 1 given by -y0"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runArgs(strings.Fields(tc.args)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d (want %d), stderr lacks %q?\nstdout:\n%s\nstderr:\n%s", code, tc.code, tc.want, stdout, stderr)
			}
		})
	}
	// A sweep of the initial state of a problem with fewer parameters than
	// state components (the ensemble table once read the sweep from P).
	if code, stdout, stderr := runArgs("grad", "-problem", "vdp", "-n", "4", "-vary", "y01=-1:1"); code != exitOK || !strings.Contains(stdout, "y0[1]") {
		t.Errorf("-vary y01 on vdp: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Without -p, a sweep replaces the problem's default quietly.
	if code, _, stderr := runArgs("grad", "-n", "2", "-vary", "p1=0:21"); code != exitOK || stderr != "" {
		t.Errorf("-vary alone: exit %d, stderr %q", code, stderr)
	}
}

// TestPlurals checks that counts agree with their nouns.
func TestPlurals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want string }{
		{"grad -problem lorenz -p 5", "-p has 1 value, lorenz needs 3"},
		{"grad -problem vdp -n 2 -vary p1=0:1", "vdp has 1 parameter, p0 to p0 (mu)"},
		{"grad -problem lorenz -atol 1,2", "-atol has 2 values"},
	} {
		_, _, stderr := runArgs(strings.Fields(tc.args)...)
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: stderr lacks %q:\n%s", tc.args, tc.want, stderr)
		}
	}
	_, stdout, _ := runArgs("solve", "-problem", "vdp", "-n", "2", "-saveat", "1")
	if !strings.Contains(stdout, "the 1 -saveat time are") && !strings.Contains(stdout, "1 -saveat time ") {
		t.Errorf("report miscounts one save time:\n%s", stdout)
	}
	if bad := regexp.MustCompile(`(^|[^0-9.e+-])1 (values|parameters|-saveat times|rows|trajectories)\b`).FindString(stdout); bad != "" {
		t.Errorf("report says %q:\n%s", bad, stdout)
	}
}

// TestHelpTruths checks statements of the help and the README that were
// once wrong: the block size is chosen per program, and the engines the
// help and README name are those of this build.
func TestHelpTruths(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, help, _ := runArgs("help", "grad")
	_, mainHelp, _ := runArgs("help")
	for name, text := range map[string]string{"help grad": help, "help": mainHelp, "README.md": string(readme)} {
		if strings.Contains(text, "(256)") || strings.Contains(text, "default 256") {
			t.Errorf("%s says the block default is 256", name)
		}
		if !strings.Contains(text, "-engine") {
			t.Errorf("%s does not mention -engine", name)
		}
		if strings.Contains(text, "no GPU engine yet") {
			t.Errorf("%s says there is no GPU engine yet", name)
		}
	}
	if !strings.Contains(help, "working set") {
		t.Errorf("help grad does not say how the block size is chosen")
	}
	engines := strings.Join(ode.Engines(), ", ")
	if !strings.Contains(help, "This build has: "+engines+".") || !strings.Contains(mainHelp, "This build has: "+engines+".") {
		t.Errorf("help or help grad does not list this build's engines (%s)", engines)
	}
	if slices.Contains(ode.Engines(), "cuda") {
		return
	}
	// Without package cuda, the help, the README and the error say that
	// -engine cuda needs it.
	if !strings.Contains(help, "needs package cuda") || !strings.Contains(string(readme), "`-engine cuda` needs package `cuda`") {
		t.Errorf("help grad or README does not say that -engine cuda needs package cuda")
	}
	if code, _, stderr := runArgs("grad", "-engine", "cuda"); code != exitUsage || !strings.Contains(stderr, "-engine") || !strings.Contains(stderr, "package cuda") {
		t.Errorf("-engine cuda: exit %d, stderr %q", code, stderr)
	}
}

// TestAbsTolPerComponent checks the parsing and validation of -atol.
func TestAbsTolPerComponent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want string }{
		{"grad -atol 1e-6,1e-10", "-atol has 2 values; want one for every component, or 3 (one per state component of lorenz)"},
		{"grad -atol 1e-6,-1,1", "-atol: element 2 (-1, component y[1]) is not positive"},
		{"grad -atol 1e-6,0,1", "element 2 (0, component y[1]) is not positive"},
		{"grad -atol 1e-6,nan,1", `element 2 "nan" is not finite`},
		{"grad -atol 1e-6,,1", "element 2 is empty"},
		{"grad -atol 0", "-atol: 0; want a positive number"},
		{"grad -atol x", `-atol: "x"`},
	} {
		code, _, stderr := runArgs(strings.Fields(tc.args)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr lacks %q:\n%s", tc.args, code, tc.want, stderr)
		}
	}
	code, stdout, stderr := runArgs("grad", "-atol", "1e-7", "-json")
	if code != exitOK || !strings.Contains(stdout, `"atol": 1e-07`) {
		t.Errorf("-atol 1e-7: exit %d\n%s\n%s", code, stdout, stderr)
	}
	checkAbsTolList(t)
}

// readCSVFile reads a CSV file: its header and rows.
func readCSVFile(t *testing.T, path string) (hdr []string, rows [][]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(recs) == 0 {
		t.Fatalf("%s is empty", path)
	}
	return recs[0], recs[1:]
}

// column returns the floats of column name.
func column(t *testing.T, hdr []string, rows [][]string, name string) []float64 {
	t.Helper()
	k := -1
	for i, h := range hdr {
		if h == name {
			k = i
		}
	}
	if k < 0 {
		t.Fatalf("no column %q in %q", name, hdr)
	}
	xs := make([]float64, len(rows))
	for i, r := range rows {
		x, err := strconv.ParseFloat(r[k], 64)
		if err != nil {
			t.Fatalf("row %d, column %s: %v", i, name, err)
		}
		xs[i] = x
	}
	return xs
}

// TestOutCSV checks -out FILE.csv against the JSON output of the same
// command: the columns, one row per trajectory, the same numbers.
func TestOutCSV(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sweep.csv")
	const n = 5
	args := []string{"grad", "-problem", "lorenz", "-n", strconv.Itoa(n), "-vary", "p1=0:21", "-t1", "0.5"}
	code, stdout, stderr := runArgs(append(args, "-out", path)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "status") || !strings.Contains(stdout, "output    "+path+" (csv, 5 rows)") {
		t.Errorf("stdout lacks the report or the output line:\n%s", stdout)
	}
	hdr, rows := readCSVFile(t, path)
	want := "i,y0[0],y0[1],y0[2],sigma,rho,beta,t,y[0],y[1],y[2],status,accepted,rejected,dL/dy0[0],dL/dy0[1],dL/dy0[2],dL/dsigma,dL/drho,dL/dbeta"
	if got := strings.Join(hdr, ","); got != want {
		t.Errorf("header\n%s\nwant\n%s", got, want)
	}
	if len(rows) != n {
		t.Fatalf("%d rows, want %d", len(rows), n)
	}
	_, js, _ := runArgs(append(args, "-json")...)
	obj := decodeObject(t, js)
	y := numbers(t, obj, "y_final", n*3)
	gp := numbers(t, obj, "grad_p", n*3)
	gy := numbers(t, obj, "grad_y0", n*3)
	for c, name := range []string{"sigma", "rho", "beta"} {
		got := column(t, hdr, rows, "dL/d"+name)
		for i := range got {
			if got[i] != gp[i*3+c] {
				t.Errorf("row %d dL/d%s = %v, want %v", i, name, got[i], gp[i*3+c])
			}
		}
	}
	for c := 0; c < 3; c++ {
		gotY := column(t, hdr, rows, "y["+strconv.Itoa(c)+"]")
		gotG := column(t, hdr, rows, "dL/dy0["+strconv.Itoa(c)+"]")
		for i := 0; i < n; i++ {
			if gotY[i] != y[i*3+c] || gotG[i] != gy[i*3+c] {
				t.Errorf("row %d component %d: y %v dL/dy0 %v, want %v %v", i, c, gotY[i], gotG[i], y[i*3+c], gy[i*3+c])
			}
		}
	}
	rho := column(t, hdr, rows, "rho")
	if rho[0] != 0 || rho[n-1] != 21 {
		t.Errorf("rho column %v, want 0 to 21", rho)
	}
	acc := column(t, hdr, rows, "accepted")
	total := 0.0
	for _, a := range acc {
		total += a
	}
	if int(total) != integer(t, obj, "accepted") {
		t.Errorf("accepted column sums to %v, JSON says %d", total, integer(t, obj, "accepted"))
	}
	for i, r := range rows {
		if r[0] != strconv.Itoa(i) || r[11] != "ok" || r[7] != "0.5" {
			t.Errorf("row %d: i %q, status %q, t %q", i, r[0], r[11], r[7])
		}
	}
	checkNoTemp(t, dir)
}

// TestOutSaved checks the saved-states table of -saveat with CSV: long
// form, one row per trajectory and save time, equal to y_saved.
func TestOutSaved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.csv")
	args := []string{"solve", "-problem", "vdp", "-n", "2", "-vary", "p0=1:2", "-t1", "3", "-saveat", "1,2,3"}
	code, stdout, stderr := runArgs(append(args, "-out", path)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, filepath.Join(dir, "s.saved.csv")+" (saved states, 6 rows)") {
		t.Errorf("report does not name the saved-states file:\n%s", stdout)
	}
	hdr, rows := readCSVFile(t, filepath.Join(dir, "s.saved.csv"))
	if strings.Join(hdr, ",") != "i,t,y[0],y[1]" || len(rows) != 6 {
		t.Fatalf("saved table: header %q, %d rows", hdr, len(rows))
	}
	_, js, _ := runArgs(append(args, "-json")...)
	ys := numbers(t, decodeObject(t, js), "y_saved", 2*3*2)
	for r, row := range rows {
		i, k := r/3, r%3
		if row[0] != strconv.Itoa(i) || row[1] != strconv.Itoa(k+1) {
			t.Errorf("row %d: i %s t %s, want %d %d", r, row[0], row[1], i, k+1)
		}
		for c := 0; c < 2; c++ {
			if x, _ := strconv.ParseFloat(row[2+c], 64); x != ys[(i*3+k)*2+c] {
				t.Errorf("row %d y[%d] = %v, want %v", r, c, x, ys[(i*3+k)*2+c])
			}
		}
	}
	if _, rows := readCSVFile(t, path); len(rows) != 2 {
		t.Errorf("trajectory table has %d rows, want 2", len(rows))
	}
	checkNoTemp(t, dir)
}

// TestOutJSON checks that -out FILE.json holds the -json object.
func TestOutJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "g.json")
	code, stdout, stderr := runArgs("grad", "-problem", "vdp", "-out", path)
	if code != exitOK || !strings.Contains(stdout, "(json, 1 trajectory)") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkGradObject(t, decodeObject(t, string(b)), 1, 2, 1)
	// -format human to a file: the report, and nothing on stdout.
	txt := filepath.Join(dir, "g.txt")
	code, stdout, _ = runArgs("grad", "-problem", "vdp", "-out", txt)
	b, _ = os.ReadFile(txt)
	if code != exitOK || stdout != "" || !strings.Contains(string(b), "dL/dy0") {
		t.Errorf("-out g.txt: exit %d, stdout %q, file:\n%s", code, stdout, b)
	}
}

// TestOutFailedRun checks that a failed run writes its complete output
// (every row, the statuses) and exits 1, and that an output that cannot
// be written leaves the old file as it was and no temporary file.
func TestOutFailedRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "f.csv")
	code, _, stderr := runArgs("grad", "-problem", "robertson", "-method", "tsit5", "-max-steps", "50", "-n", "2", "-out", path)
	if code != exitFail || !strings.Contains(stderr, "max steps reached") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	hdr, rows := readCSVFile(t, path)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	for _, r := range rows {
		if len(r) != len(hdr) || r[11] == "ok" || r[len(r)-1] != "" {
			t.Errorf("row %q: want a failure status and an empty gradient", r)
		}
	}
	checkNoTemp(t, dir)

	// A bad command line writes nothing, and the old file stays.
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runArgs("grad", "-n", "0", "-out", path); code != exitUsage {
		t.Errorf("-n 0: exit %d", code)
	}
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Errorf("a refused command line changed %s to %q", path, b)
	}
	checkNoTemp(t, dir)
}

// checkNoTemp fails if dir holds a temporary file of an output.
func checkNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left in %s", e.Name(), dir)
		}
	}
}

// TestFormatFlags checks the combinations of -format, -json, -out and
// -arrays.
func TestFormatFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want string }{
		{"grad -format xml", `-format: "xml"; want human, csv or json`},
		{"grad -json -format csv", "-json asks for -format json, but -format is csv"},
		{"grad -format csv -arrays", "-arrays applies to -format json"},
		{"grad -arrays", "-arrays applies to -format json"},
		{"solve -saveat 1 -format csv", "give -out FILE"},
		{"grad -out=", "-out: empty file name"},
	} {
		code, _, stderr := runArgs(strings.Fields(tc.args)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr lacks %q:\n%s", tc.args, code, tc.want, stderr)
		}
	}
	code, stdout, _ := runArgs("grad", "-problem", "vdp", "-format", "csv")
	if code != exitOK || !strings.HasPrefix(stdout, "i,y0[0],y0[1],mu,t,") || strings.Count(stdout, "\n") != 2 {
		t.Errorf("-format csv on stdout: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = runArgs("grad", "-problem", "vdp", "-format", "json", "-out", "-")
	if code != exitOK {
		t.Fatalf("-out -: exit %d", code)
	}
	checkGradObject(t, decodeObject(t, stdout), 1, 2, 1)
}

// checkAbsTolList checks -atol with one value per component: the same
// value for every component gives the numbers of one -atol, and a looser
// tolerance on components that grow changes the mesh.
func checkAbsTolList(t *testing.T) {
	t.Helper()
	const cmd = "grad -problem robertson -t1 10 -rtol 1e-4 -format csv -atol "
	code, one, stderr := runArgs(strings.Fields(cmd + "1e-8")...)
	if code != exitOK {
		t.Fatalf("-atol 1e-8: exit %d\n%s", code, stderr)
	}
	code, three, stderr := runArgs(strings.Fields(cmd + "1e-8,1e-8,1e-8")...)
	if code != exitOK || three != one {
		t.Errorf("-atol 1e-8,1e-8,1e-8: exit %d, output differs from -atol 1e-8:\n%s\n%s\n%s", code, three, one, stderr)
	}
	code, mixed, stderr := runArgs(strings.Fields(cmd + "1e-8,1e-2,1e-8")...)
	if code != exitOK || mixed == one {
		t.Errorf("-atol 1e-8,1e-2,1e-8: exit %d, output the same as -atol 1e-8\n%s", code, stderr)
	}
	code, stdout, stderr := runArgs("grad", "-atol", "1e-6,1e-10,1e-9", "-json")
	if code != exitOK {
		t.Fatalf("-atol 1e-6,1e-10,1e-9: exit %d\n%s", code, stderr)
	}
	if got := numbers(t, decodeObject(t, stdout), "atol", 3); got[0] != 1e-6 || got[1] != 1e-10 || got[2] != 1e-9 {
		t.Errorf("JSON atol = %v", got)
	}
	_, stdout, _ = runArgs("grad", "-atol", "1e-6,1e-10,1e-9")
	if !strings.Contains(stdout, "atol 1e-06,1e-10,1e-09") {
		t.Errorf("report does not show the tolerances:\n%s", stdout)
	}
}
