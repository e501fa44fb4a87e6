package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fuzzLimits keep every command line of FuzzCLI to milliseconds: a small
// memory limit (the size check refuses large ensembles, as it would on a
// small machine) and a small step budget.
var fuzzLimits = limits{memory: 256 << 10, source: "the fuzz target's memory limit", maxSteps: 300}

// FuzzCLI runs arbitrary command lines (arguments separated by single
// spaces) end to end through runLimited and checks that none panics (a
// recovered panic is reported as an internal error), that the exit
// status is 0, 1 or 2, and that a non-zero status comes with a message on
// stderr. bench is left out (it runs for seconds); -out and -plot files
// are kept in a temporary directory.
func FuzzCLI(f *testing.F) {
	for _, s := range []string{
		"grad -problem vdp",
		"solve -problem lorenz -n 3 -vary p1=0:21 -json",
		"grad -problem lorenz -p 10,28,2.6666666666666665 -y0 1,0,0 -t0 0 -t1 1 -rtol 1e-10 -atol 1e-12 -loss sumsq -json",
		"grad -problem robertson -t1 1 -method rodas5p -loss y:0",
		"grad -problem neural-robertson -n 2 -t1 0.01",
		"grad -problem hires -n 2 -t1 1",
		"solve -problem kepler -saveat 0,1,2 -out k.csv",
		"grad -problem vdp -n 4 -vary y01=-1:1 -format csv -out g.csv",
		"grad -problem vdp -out g.json",
		"grad -n 9223372036854775807",
		"grad -n 1000000000000",
		"grad -block 1000000000 -n 3",
		"grad -n -1",
		"grad -atol 1e-6,1e-10,1e-9",
		"grad -atol 1e-6,1e-10",
		"grad -vary p0=1:2",
		"grad -n 2 -p 1,2,3,4,5,6 -vary p0=1:2",
		"grad -json -format csv",
		"grad -t1 1e300",
		"grad -dt0 1e-300",
		"grad -problem vdp-stiff -method tsit5",
		"grad -problem vdp-stiff -method auto -json",
		"solve -engine auto",
		"grad -engine cuda",
		"grad -engine ''",
		"solve -n 3 -vary p1=0:21 -plot p.png",
		"grad -saveat 0.5,1 -plot p.svg -quiet",
		"solve -plot p.txt",
		"grad -quiet -json",
		"grad -max-steps 1 -json",
		"grad -saveat 1,0",
		"solve -saveat 0.5 -format csv",
		"grad -out",
		"grad -out=",
		"problems -json",
		"help grad",
		"help bench",
		"grad -h",
		"",
		"-h",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, " ")
		if args[0] == "bench" {
			return
		}
		confineOut(args, dir)
		var stdout, stderr bytes.Buffer
		code := runLimited(args, &stdout, &stderr, fuzzLimits)
		msg := stderr.String()
		switch {
		case strings.Contains(msg, "gradsolve: internal error:"):
			t.Fatalf("%q panicked:\n%s", args, msg)
		case code != exitOK && code != exitFail && code != exitUsage:
			t.Fatalf("%q: exit status %d", args, code)
		case code != exitOK && strings.TrimSpace(msg) == "":
			t.Fatalf("%q: exit status %d with nothing on stderr", args, code)
		}
	})
}

// confineOut rewrites the value of every -out and -plot flag in args to a
// file in dir, so that fuzzed command lines write nowhere else.
func confineOut(args []string, dir string) {
	safe := func(name string) string {
		if name == "" || name == "-" {
			return name
		}
		b := []byte(filepath.Base(name))
		for i, c := range b {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_') {
				b[i] = '_'
			}
		}
		if strings.Trim(string(b), ".") == "" { // ".", ".."
			return filepath.Join(dir, "out")
		}
		return filepath.Join(dir, string(b))
	}
	for i, a := range args {
		name := strings.TrimLeft(a, "-")
		if len(a)-len(name) < 1 || len(a)-len(name) > 2 {
			continue
		}
		for _, flag := range []string{"out", "plot"} {
			switch {
			case name == flag && i+1 < len(args):
				args[i+1] = safe(args[i+1])
			case strings.HasPrefix(name, flag+"="):
				args[i] = "-" + flag + "=" + safe(name[len(flag)+1:])
			}
		}
	}
}

// TestConfineOut checks that confineOut leaves no -out or -plot outside
// dir.
func TestConfineOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, line := range []string{
		"grad -out /etc/passwd", "grad --out ../../x.csv", "grad -out=/dev/stdout", "grad --out=/tmp/../etc/x",
		"grad -out ..", "grad -out . -json", "grad -p -out /x", "grad -out",
		"grad -plot /etc/x.png", "solve --plot=../x.svg", "grad -plot -out /x.csv",
	} {
		args := strings.Split(line, " ")
		confineOut(args, dir)
		for i, a := range args {
			v, isOut := "", false
			name := strings.TrimLeft(a, "-")
			if (name == "out" || name == "plot") && i+1 < len(args) {
				v, isOut = args[i+1], true
			} else if flag, after, ok := strings.Cut(name, "="); ok && (flag == "out" || flag == "plot") && strings.HasPrefix(a, "-") {
				v, isOut = after, true
			}
			if isOut && v != "" && v != "-" && filepath.Dir(v) != dir {
				t.Errorf("%q: -out %q is outside %s", line, v, dir)
			}
		}
	}
}

// TestMemTotal checks the parsing of /proc/meminfo.
func TestMemTotal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		text string
		want int64
		ok   bool
	}{
		{"MemTotal:       24683568 kB\nMemFree: 1 kB\n", 24683568 << 10, true},
		{"MemFree: 1 kB\nMemTotal: 1024 kB\n", 1 << 20, true},
		{"MemTotal: 1024 MB\n", 0, false},
		{"MemTotal: x kB\n", 0, false},
		{"MemTotal: 9223372036854775807 kB\n", 0, false},
		{"", 0, false},
	} {
		path := filepath.Join(dir, "meminfo")
		os.WriteFile(path, []byte(tc.text), 0o644)
		if got, ok := memTotal(path); got != tc.want || ok != tc.ok {
			t.Errorf("memTotal(%q) = %d, %v; want %d, %v", tc.text, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := memTotal(filepath.Join(dir, "none")); ok {
		t.Errorf("memTotal of a missing file reports ok")
	}
	if lim := machineLimits(); lim.memory <= 0 || lim.source == "" {
		t.Errorf("machineLimits() = %+v", lim)
	}
}

// TestMemoryEstimate checks the size check against a given limit: the
// message names the estimate, the limit and the largest n that fits, and
// that n passes.
func TestMemoryEstimate(t *testing.T) {
	t.Parallel()
	lim := limits{memory: 10 << 20, source: "a test limit"}
	per := trajectoryBytes("grad", 3, 3, 0, false)
	most := int(float64(lim.memory) / per)
	var stdout, stderr bytes.Buffer
	code := runLimited([]string{"grad", "-n", "100000"}, &stdout, &stderr, lim)
	msg := stderr.String()
	if code != exitUsage {
		t.Fatalf("exit %d, want %d\n%s", code, exitUsage, msg)
	}
	for _, want := range []string{"-n 100000", "a grad of lorenz needs at least", "more than the 10 MiB of a test limit", "use -n " + strconv.Itoa(most) + " or fewer"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if err := checkMemory("x", most, per, lim); err != nil {
		t.Errorf("the suggested -n %d is refused: %v", most, err)
	}
	if err := checkMemory("x", most+1, per, lim); err == nil {
		t.Errorf("-n %d is accepted", most+1)
	}
	// A solve takes less memory per trajectory than a grad, and saved
	// states and JSON arrays add to it.
	if s, g := trajectoryBytes("solve", 3, 3, 0, false), per; !(s < g) {
		t.Errorf("solve %v bytes per trajectory, grad %v", s, g)
	}
	if a, b := trajectoryBytes("solve", 3, 3, 10, false), trajectoryBytes("solve", 3, 3, 0, true); !(a > trajectoryBytes("solve", 3, 3, 0, false) && b > trajectoryBytes("solve", 3, 3, 0, false)) {
		t.Errorf("saved states (%v) or arrays (%v) add nothing", a, b)
	}
}

// FuzzFitData reads arbitrary data files as fit -data does (for Van der
// Pol, two state components) and checks that reading never panics, that
// what it accepts is consistent (n trajectories 0 to n−1 each with an
// observed value, distinct increasing finite times, tables of n×K×2,
// observation counts that add up, finite values) and that it round-trips:
// written back with writeCSV and read again, the observations are the
// same (repeated ones as their mean).
func FuzzFitData(f *testing.F) {
	for _, s := range []string{
		"traj,t,x,v\n0,0.5,1.8,-0.6\n0,1,1.3,-1.1\n",
		"1,0.5,1.8,-0.6\n0,0.5,1.8,-0.6\n0,1,1.3,\n",
		"# comment\ntraj,t,x,v\n0,1,1,2\n0,1,3,2\n",
		"traj,t,x,v\n1000000000000000,1,1,2\n",
		"traj,t,x,v\n1e15,1,1,2\n",
		"traj,t,x,v\n-1,1,1,2\n",
		"0,NaN,1,2\n",
		"0,1,Inf,2\n",
		"0,1,,\n0,2,1,\n",
		"0,1,1\n",
		"\"0\",\"1\",\"2\",\"3\"\n",
		"0,1e-400,1e308,-1e308\n",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		ob, _, err := readObservations(strings.NewReader(data), 2, 0, fuzzLimits)
		if err != nil {
			if ob != nil {
				t.Fatalf("%q: an error and observations", data)
			}
			return
		}
		checkObservations(t, data, ob)
		var b bytes.Buffer
		if err := ob.writeCSV(&b); err != nil {
			t.Fatal(err)
		}
		back, _, err := readObservations(&b, 2, 0, fuzzLimits)
		if err != nil {
			t.Fatalf("%q: written back as %q: %v", data, b.String(), err)
		}
		if back.n != ob.n || !slices.Equal(back.times, ob.times) {
			t.Fatalf("%q: round trip: n %d → %d, times %v → %v", data, ob.n, back.n, ob.times, back.times)
		}
		for j := range ob.value {
			if (ob.weight[j] > 0) != (back.weight[j] > 0) || (ob.weight[j] > 0 && ob.value[j] != back.value[j]) {
				t.Fatalf("%q: round trip: cell %d: %v (weight %v) → %v (weight %v)", data, j, ob.value[j], ob.weight[j], back.value[j], back.weight[j])
			}
		}
	})
}

// checkObservations checks the invariants of observations read from data.
func checkObservations(t *testing.T, data string, ob *observations) {
	t.Helper()
	K, d := len(ob.times), ob.dim
	if ob.n < 1 || K < 1 || len(ob.value) != ob.n*K*d || len(ob.weight) != len(ob.value) || len(ob.spread) != ob.n {
		t.Fatalf("%q: n %d, K %d, %d values, %d weights, %d spreads", data, ob.n, K, len(ob.value), len(ob.weight), len(ob.spread))
	}
	for k, tau := range ob.times {
		if !finite(tau) || (k > 0 && !(tau > ob.times[k-1])) {
			t.Fatalf("%q: times %v", data, ob.times)
		}
	}
	total := 0.0
	for i := range ob.n {
		seen := false
		for j := i * K * d; j < (i+1)*K*d; j++ {
			w := ob.weight[j]
			if w < 0 || w != math.Trunc(w) || !finite(ob.value[j]) || (w == 0 && ob.value[j] != 0) {
				t.Fatalf("%q: cell %d: value %v, weight %v", data, j, ob.value[j], w)
			}
			seen = seen || w > 0
			total += w
		}
		if !seen {
			t.Fatalf("%q: trajectory %d has no observation", data, i)
		}
		if !(ob.spread[i] >= 0) {
			t.Fatalf("%q: spread %v", data, ob.spread[i])
		}
	}
	if int(total) != ob.count {
		t.Fatalf("%q: %d observations, weights add up to %v", data, ob.count, total)
	}
}

// FuzzFitArgs runs fit end to end with an arbitrary command line (after
// "fit", arguments separated by single spaces) and data file (the value
// of every -data flag), with at most 2 Adam steps and the small limits of
// FuzzCLI, and checks that it never panics, that the exit status is 0, 1
// or 2 with a message on stderr for 1 and 2, that a JSON output is valid
// JSON, and that no file is written outside a temporary directory.
func FuzzFitArgs(f *testing.F) {
	data := "traj,t,x,v\n0,0.5,1.8,-0.6\n0,1,1.3,-1.1\n1,1,1.2,-1\n"
	for _, s := range []string{
		"-problem vdp -fit mu",
		"-problem vdp -fit mu -data obs.csv -json",
		"-problem vdp -fit mu,y00 -data obs.csv -format csv",
		"-problem vdp -fit mu -n 4 -fits 2 -vary y00=1:2 -out fit.csv",
		"-problem vdp -fit y01 -n 2 -out fit.json -plot loss.svg",
		"-problem lorenz -fit rho -lr NaN",
		"-problem lorenz -fit rho -steps 0",
		"-problem lorenz -fit rho -noise -1",
		"-problem lorenz -fit rho -clip Inf",
		"-problem vdp -fit mu -data obs.csv -n 1",
		"-problem vdp -fit mu -data obs.csv -out obs.csv",
		"-problem vdp -fit mu -plot loss.svg -out loss.svg",
		"-problem vdp -fit mu -remesh -1 -start 3",
		"-problem vdp -fit mu -data obs.csv -start 3",
		"-fit",
	} {
		f.Add(s, data)
	}
	f.Add("-problem vdp -fit mu -data obs.csv", "0,1,2,3\n1000000000000000,1,2,3\n")
	f.Add("-problem vdp -fit mu -data obs.csv", "0,0.5,1,2\n0,0.5,1,2\n")
	f.Add("-problem vdp -fit mu -data obs.csv -t1 0.1", "0,0.5,1,2\n")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, line, data string) {
		tdir, err := os.MkdirTemp(dir, "run")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tdir)
		obs := filepath.Join(tdir, "obs.csv")
		if err := os.WriteFile(obs, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"fit"}, strings.Split(line, " ")...)
		confineOut(args, tdir)
		for i, a := range args {
			switch {
			case (a == "-data" || a == "--data") && i+1 < len(args):
				args[i+1] = obs
			case strings.HasPrefix(a, "-data=") || strings.HasPrefix(a, "--data="):
				args[i] = "-data=" + obs
			}
		}
		args = append(args, "-steps", "2", "-quiet")
		var stdout, stderr bytes.Buffer
		code := runLimited(args, &stdout, &stderr, fuzzLimits)
		msg := stderr.String()
		switch {
		case strings.Contains(msg, "gradsolve: internal error:"):
			t.Fatalf("%q with data %q panicked:\n%s", args, data, msg)
		case code != exitOK && code != exitFail && code != exitUsage:
			t.Fatalf("%q: exit status %d", args, code)
		case code != exitOK && strings.TrimSpace(msg) == "":
			t.Fatalf("%q: exit status %d with nothing on stderr", args, code)
		case strings.HasPrefix(stdout.String(), "{") && !json.Valid(stdout.Bytes()):
			t.Fatalf("%q: invalid JSON:\n%s", args, stdout.String())
		}
		if b, err := os.ReadFile(obs); err != nil || string(b) != data {
			t.Fatalf("%q: the data file changed", args)
		}
		ents, _ := os.ReadDir(tdir)
		for _, e := range ents {
			if strings.Contains(e.Name(), ".tmp-") {
				t.Fatalf("%q: temporary file %s left", args, e.Name())
			}
		}
	})
}
