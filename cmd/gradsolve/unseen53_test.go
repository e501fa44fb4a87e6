package main

import (
	"strings"
	"testing"
)

// TestFlagMissingValue checks that a flag given without its value, so
// that package flag takes the next flag as the value, is reported as a
// missing value of that flag, naming both, on every command, whatever
// the next flag's form (-name, --name, -name=value) and wherever the
// error would otherwise surface: a leftover argument ("unexpected
// argument"), a value the flag's parser refuses, or a value the command
// would only reject later (or, for -plot and -out, take as a file
// name). Before session 53 "solve -problem -n 3" said `unexpected
// argument "3"`, and "fit -fit -data obs.csv" said `unexpected argument
// "obs.csv"`. Negative numbers stay values.
func TestFlagMissingValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, flag, took string }{
		{"solve -problem -n 3", "-problem", "-n"},
		{"grad -problem -n=3", "-problem", "-n=3"},
		{"solve -saveat -t1 2", "-saveat", "-t1"},
		{"solve -t1 -quiet", "-t1", "-quiet"},
		{"grad -loss --json", "-loss", "--json"},
		{"solve -out -json", "-out", "-json"},
		{"fit -problem vdp -fit -data obs.csv", "-fit", "-data"},
		{"bench -suite -quiet", "-suite", "-quiet"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCmd(t, tc.args)
			want := tc.flag + ": no value"
			if code != exitUsage || !strings.Contains(stderr, want) || !strings.Contains(stderr, tc.took) {
				t.Errorf("exit %d, want %d; stderr lacks %q or %q:\n%s\nstdout:\n%s", code, exitUsage, want, tc.took, stderr, stdout)
			}
		})
	}
	// Values that begin with - but name no flag are values.
	for _, args := range []string{
		"solve -problem vdp -y0 -1,0 -t1 0.5 -quiet",
		"solve -problem vdp -t0 -1 -t1 -0.5 -quiet",
		"grad -problem linear -p -0.5 -t1 0.5 -quiet",
	} {
		if code, stdout, stderr := runCmd(t, args); code != exitOK {
			t.Errorf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
	}
}

// TestSizedProblemNames checks that -problem takes the names Lorenz96 and
// Brusselator give other sizes (lorenz96-40, brusselator-3), on solve,
// grad and fit, and that a size out of range says which sizes there are.
func TestSizedProblemNames(t *testing.T) {
	t.Parallel()
	for _, args := range []string{
		"solve -problem lorenz96-40 -t1 0.1 -quiet",
		"grad -problem brusselator-3 -t1 0.1 -quiet",
		"grad -problem lorenz96-5 -n 3 -vary p0=7:9 -t1 0.2 -quiet",
	} {
		code, stdout, stderr := runCmd(t, args)
		if code != exitOK || !strings.Contains(stdout, strings.Fields(args)[2]) {
			t.Errorf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
	}
	if code, stdout, _ := runCmd(t, "problems"); code != exitOK || !strings.Contains(stdout, "lorenz96-<d> (d ≥ 4) and brusselator-<cells>") {
		t.Errorf("gradsolve problems: exit %d; the list does not mention the sized names:\n%s", code, stdout)
	}
	for _, tc := range []struct{ args, want string }{
		{"solve -problem lorenz96-3", `-problem: "lorenz96-3": lorenz96-<d> takes a state dimension d from 4 to`},
		{"fit -problem brusselator-0 -fit p0", `-problem: "brusselator-0": brusselator-<cells> takes a number of cells from 1 to`},
		{"grad -problem lorenz96-040", `-problem: "lorenz96-040" is not a built-in problem; valid names are lorenz,`},
	} {
		code, _, stderr := runCmd(t, tc.args)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d; stderr lacks %q:\n%s", tc.args, code, tc.want, stderr)
		}
	}
}

// TestBenchProblemsChecked checks that bench refuses an unknown -problems
// name as a bad command line (exit 2, nothing on stdout) before any suite
// runs. Before session 53 it printed the suite's header, ran, and failed
// with exit 1 ("bench: unknown stiff problem ...").
func TestBenchProblemsChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want string }{
		{"bench -suite stiff -problems foo -n 2 -reps 1", `-problems "foo": element 1 "foo" is not a problem of -suite stiff; valid names are robertson, hires`},
		{"bench -suite all -problems robertson,, -n 2 -reps 1", `-problems "robertson,,": element 2 "" is not a problem of -suite all`},
		{"bench -suite gpu-large -engine cpu -problems hires,lorenz96-40 -n 2 -reps 1", `element 2 "lorenz96-40" is not a problem of -suite gpu-large; valid names are lorenz96-64`},
	} {
		code, stdout, stderr := runCmd(t, tc.args)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d (want %d); stderr lacks %q:\n%s\nstdout:\n%s", tc.args, code, exitUsage, tc.want, stderr, stdout)
		}
	}
}
