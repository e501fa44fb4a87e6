package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gradsolve-go/gradsolve/cuda"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// TestUnknownFlagSuggests checks that a mistyped flag, in every command,
// is a usage error that names the flags it is close to.
func TestUnknownFlagSuggests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args string
		want string // in stderr; "" for no suggestion
	}{
		{"grad -nn 5", "(did you mean -n?)"},
		{"solve -probelm vdp", "(did you mean -problem?)"},
		{"grad -rtl 1e-3", "(did you mean -rtol?)"},
		{"grad -tol 1e-3", "(did you mean -atol or -rtol?)"},
		{"grad -Json", "(did you mean -json?)"},
		{"grad -sav 1", "(did you mean -saveat?)"},
		{"fit -fit rho -step 3", "(did you mean -steps?)"},
		{"fit -fit rho -dat obs.csv", "(did you mean -data?)"},
		{"bench -suit lorenz", "(did you mean -suite?)"},
		{"problems -jsn", "(did you mean -json?)"},
		{"grad -verbose", ""},
	} {
		code, _, stderr := runCmd(t, tc.args)
		if code != exitUsage || !strings.Contains(stderr, "flag provided but not defined") {
			t.Errorf("%s: exit %d, want %d with the flag error\n%s", tc.args, code, exitUsage, stderr)
			continue
		}
		if tc.want == "" && strings.Contains(stderr, "did you mean") || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: stderr lacks %q (or suggests where nothing is close):\n%s", tc.args, tc.want, stderr)
		}
	}
}

// TestHelpListsFlags checks that "gradsolve help CMD" and "gradsolve CMD
// -h" print the same text and that it lists every flag the command takes.
func TestHelpListsFlags(t *testing.T) {
	t.Parallel()
	flagSets := map[string]func() []string{
		"solve": func() []string { return flagNames(newFlagSet("solve", &options{}, nil).VisitAll) },
		"grad":  func() []string { return flagNames(newFlagSet("grad", &options{}, nil).VisitAll) },
		"fit": func() []string {
			return flagNames(newFitFlagSet(&options{}, &fitOptions{}, nil).VisitAll)
		},
	}
	for _, cmd := range []string{"solve", "grad", "fit", "bench"} {
		code, help, _ := runCmd(t, "help "+cmd)
		if code != exitOK {
			t.Errorf("help %s: exit %d", cmd, code)
		}
		code, stdout, stderr := runCmd(t, cmd+" -h")
		if code != exitOK || stdout+stderr != help {
			t.Errorf("%s -h: exit %d; its text differs from gradsolve help %s:\n%s\n---\n%s", cmd, code, cmd, stdout+stderr, help)
		}
		if !strings.HasPrefix(help, "Usage: gradsolve "+cmd) || !strings.Contains(help, "\nFlags:\n") {
			t.Errorf("help %s does not start with Usage: or has no Flags: section:\n%s", cmd, help)
		}
		if names, ok := flagSets[cmd]; ok {
			for _, name := range names() {
				if !strings.Contains(help, "\n  -"+name+" ") && !strings.Contains(help, "\n  -"+name+"\n") {
					t.Errorf("help %s does not list -%s", cmd, name)
				}
			}
		}
	}
}

// flagNames returns the names a flag set's VisitAll visits.
func flagNames(visitAll func(func(*flag.Flag))) []string {
	var names []string
	visitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// TestEngineUnavailableSaysCPU checks that a GPU engine asked for on a
// machine without a GPU (or NVRTC) fails with a message that says how to
// run the command on the CPU, in every place the failure is reported.
func TestEngineUnavailableSaysCPU(t *testing.T) {
	t.Parallel()
	const hint = "leave out -engine (or give -engine cpu)"
	for _, tc := range []struct {
		err  error
		hint bool
	}{
		{fmt.Errorf("ode: engine %q is not available: %w", "cuda", fmt.Errorf("cuda: %w: libcuda.so.1 not found", cuda.ErrNoGPU)), true},
		{fmt.Errorf("ode: engine %q is not available: %w", "cuda", cuda.ErrNoNVRTC), true},
		{fmt.Errorf("ode: engine %q is %w: %w", "cuda-multi", ode.ErrUnavailable, errors.New("no driver")), true},
		{errors.New("ode: trajectory 0: max steps reached"), false},
	} {
		if got := errorText(tc.err); strings.Contains(got, hint) != tc.hint {
			t.Errorf("errorText(%q) = %q; hint %v, want %v", tc.err, got, !tc.hint, tc.hint)
		}
	}
	for _, args := range []string{"grad -problem vdp -engine cuda", "solve -problem vdp -engine cuda-f32 -json", "fit -problem vdp -fit mu -steps 2 -engine cuda"} {
		code, stdout, stderr := runCmd(t, args)
		if code == exitOK {
			continue // a GPU is here
		}
		// fit fails before its report (simulating the data): stderr only.
		if code != exitFail || !strings.Contains(stderr, hint) || stdout != "" && !strings.Contains(stdout, hint) {
			t.Errorf("%s: exit %d, want %d and the hint %q on stderr and in the output\nstdout:\n%s\nstderr:\n%s", args, code, exitFail, hint, stdout, stderr)
		}
	}
}

// TestBadFlagValues checks that a value a flag's type cannot hold is a
// usage error that names the flag first and says what the value should
// be (package flag says only "parse error"), with the pointer to the help,
// in every command.
func TestBadFlagValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want, help string }{
		{"grad -n abc", `gradsolve grad: -n: "abc" is not an integer`, "help grad"},
		{"grad -n 1.5", `-n: "1.5" is not an integer`, "help grad"},
		{"solve -max-steps 1e3", `-max-steps: "1e3" is not an integer`, "help solve"},
		{"grad -n 99999999999999999999", `-n: "99999999999999999999" is out of the range of an integer`, "help grad"},
		{"grad -rtol abc", `-rtol: "abc" is not a number`, "help grad"},
		{"grad -quiet=maybe", `-quiet: "maybe" is not a boolean; give the flag alone (-quiet) or as -quiet=false`, "help grad"},
		{"grad -n 2 -vary p1=0:nan", `gradsolve grad: -vary: "p1=0:nan": HI "nan" is not finite`, "help grad"},
		{"fit -fit rho -seed -1", `gradsolve fit: -seed: "-1" is not a non-negative integer`, "help fit"},
		{"fit -fit rho -lr x", `-lr: "x" is not a number`, "help fit"},
		{"bench -reps x", `gradsolve bench: -reps: "x" is not an integer`, "help bench"},
		{"problems -json=2", `gradsolve problems: -json: "2" is not a boolean`, "help problems"},
		{"grad -n", "flag needs an argument: -n", "help grad"},
	} {
		code, _, stderr := runCmd(t, tc.args)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "Run 'gradsolve "+tc.help+"' for usage.") {
			t.Errorf("%s: exit %d, want %d with %q and the pointer to gradsolve %s:\n%s", tc.args, code, exitUsage, tc.want, tc.help, stderr)
		}
	}
}

// TestFitJSONHistory checks the meaning fit's help gives history,
// loss_first, loss_final, loss_best and best_step: history[k] is the loss
// after k steps, loss_final the loss after the last, and best_step the
// steps taken when loss_best was seen.
func TestFitJSONHistory(t *testing.T) {
	t.Parallel()
	for _, args := range []string{
		"fit -problem lorenz -fit rho -steps 5 -json",                                    // still falling: the best is the last
		"fit -problem lorenz -fit rho -n 4 -start 25 -noise 0.1 -steps 60 -lr 0.5 -json", // overshoots
	} {
		code, stdout, stderr := runCmd(t, args)
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s", args, code, stderr)
		}
		var r struct {
			Status   string
			Steps    int
			History  []float64
			BestStep int `json:"best_step"`
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		obj := decodeObject(t, stdout)
		first, final, best := number(t, obj, "loss_first"), number(t, obj, "loss_final"), number(t, obj, "loss_best")
		if r.Status != "max steps" || len(r.History) != r.Steps || r.History[0] != first {
			t.Errorf("%s: status %q, %d steps, %d losses in history, history[0] %v, loss_first %v", args, r.Status, r.Steps, len(r.History), r.History[0], first)
			continue
		}
		after := append(r.History, final) // after[k]: the loss after k steps
		if r.BestStep < 0 || r.BestStep > r.Steps || after[r.BestStep] != best || slices.Min(after) != best {
			t.Errorf("%s: best_step %d, loss_best %v; the losses after 0..%d steps are %v", args, r.BestStep, best, r.Steps, after)
		}
	}
}

// TestProblemsTableNarrow checks that the columns of gradsolve problems
// before the description fit in 100 characters (Pollution's 25 parameter
// names once pushed the descriptions of every row past column 170), and
// that -json still lists every name.
func TestProblemsTableNarrow(t *testing.T) {
	t.Parallel()
	_, stdout, _ := runCmd(t, "problems")
	for _, name := range problems.Names() {
		pr, _ := problems.ByName(name)
		for _, line := range strings.Split(stdout, "\n") {
			if !strings.HasPrefix(line, name+" ") {
				continue
			}
			before, _, ok := strings.Cut(line, pr.Doc)
			if w := utf8.RuneCountInString(before); !ok || w > 100 {
				t.Errorf("%s: the description starts at column %d (found %v), want at most 100:\n%s", name, w, ok, line)
			}
		}
	}
	if !strings.Contains(stdout, "25 (k1, k2, k3, …, k25)") {
		t.Errorf("pollution's parameters are not shortened:\n%s", stdout)
	}
	_, stdout, _ = runCmd(t, "problems -json")
	if !strings.Contains(stdout, `"k13"`) {
		t.Errorf("problems -json lacks pollution's parameter k13")
	}
}

// TestFmtDur checks that report times keep three significant digits,
// trailing zeros included (1.004 s once read "1 s" beside "83.8 ms").
func TestFmtDur(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0 ms"},
		{1500 * time.Nanosecond, "0.00100 ms"},
		{time.Millisecond, "1.00 ms"},
		{1370 * time.Microsecond, "1.37 ms"},
		{83800 * time.Microsecond, "83.8 ms"},
		{9996 * time.Microsecond, "10.0 ms"},
		{197 * time.Millisecond, "197 ms"},
		{999 * time.Millisecond, "999 ms"},
		{1004 * time.Millisecond, "1.00 s"},
		{12345 * time.Millisecond, "12.3 s"},
		{211 * time.Second, "211 s"},
		{4321 * time.Second, "4321 s"},
	} {
		if got := fmtDur(tc.d); got != tc.want {
			t.Errorf("fmtDur(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
