package main

import (
	"bytes"
	"os"
	"path/filepath"
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
