package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// The command lines the command must accept exactly (see the README).
const (
	lorenzForm    = "grad -problem lorenz -p 10,28,2.6666666666666665 -y0 1,0,0 -t0 0 -t1 1 -rtol 1e-10 -atol 1e-12 -loss sumsq -json"
	robertsonForm = "grad -problem robertson -p 0.04,3e7,1e4 -y0 1,0,0 -t1 100 -method rodas5p -loss y:0 -json"
	vdpForm       = "grad -problem vdp -p 2 -y0 2,0 -json"
	ensembleForm  = "grad -problem lorenz -n 64 -vary p1=0:21 -json"
)

// runCmd runs the command line in-process and returns its exit status,
// stdout and stderr.
func runCmd(t *testing.T, cmdline string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(strings.Fields(cmdline), &out, &errOut)
	return code, out.String(), errOut.String()
}

// decodeObject decodes exactly one JSON object, keeping numbers as
// json.Number so integers can be told from floats.
func decodeObject(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, s)
	}
	var extra any
	if err := dec.Decode(&extra); err != io.EOF {
		t.Fatalf("stdout holds more than one JSON value (%v)\n%s", err, s)
	}
	return obj
}

func number(t *testing.T, obj map[string]any, key string) float64 {
	t.Helper()
	v, ok := obj[key].(json.Number)
	if !ok {
		t.Fatalf("%s = %#v, want a number", key, obj[key])
	}
	x, err := v.Float64()
	if err != nil {
		t.Fatalf("%s = %v: %v", key, v, err)
	}
	return x
}

func integer(t *testing.T, obj map[string]any, key string) int {
	t.Helper()
	v, ok := obj[key].(json.Number)
	if !ok {
		t.Fatalf("%s = %#v, want an integer", key, obj[key])
	}
	i, err := v.Int64()
	if err != nil {
		t.Fatalf("%s = %v, want an integer: %v", key, v, err)
	}
	return int(i)
}

func numbers(t *testing.T, obj map[string]any, key string, n int) []float64 {
	t.Helper()
	list, ok := obj[key].([]any)
	if !ok {
		t.Fatalf("%s = %#v, want an array", key, obj[key])
	}
	if len(list) != n {
		t.Fatalf("len(%s) = %d, want %d", key, len(list), n)
	}
	xs := make([]float64, n)
	for i, v := range list {
		num, ok := v.(json.Number)
		if !ok {
			t.Fatalf("%s[%d] = %#v, want a number", key, i, v)
		}
		xs[i], _ = num.Float64()
	}
	return xs
}

// checkGradObject checks the keys and types every grad -json object has
// and returns y_final, grad_p and grad_y0.
func checkGradObject(t *testing.T, obj map[string]any, n, dim, params int) (y, gp, gy []float64) {
	t.Helper()
	if s, ok := obj["status"].(string); !ok || s != "ok" {
		t.Fatalf("status = %#v, want \"ok\"", obj["status"])
	}
	if got := integer(t, obj, "n"); got != n {
		t.Errorf("n = %d, want %d", got, n)
	}
	number(t, obj, "loss")
	y = numbers(t, obj, "y_final", n*dim)
	gp = numbers(t, obj, "grad_p", n*params)
	gy = numbers(t, obj, "grad_y0", n*dim)
	acc, rej := integer(t, obj, "accepted"), integer(t, obj, "rejected")
	if acc < n || rej < 0 {
		t.Errorf("accepted = %d, rejected = %d", acc, rej)
	}
	lo, med, hi := integer(t, obj, "steps_min"), integer(t, obj, "steps_median"), integer(t, obj, "steps_max")
	if !(0 < lo && lo <= med && med <= hi && acc >= n*lo && acc <= n*hi) {
		t.Errorf("steps min %d, median %d, max %d, accepted %d for n = %d", lo, med, hi, acc, n)
	}
	number(t, obj, "time_ms")
	return y, gp, gy
}

// close reports whether got and want agree to a relative 1e-12 (they
// should be identical: the command calls the same functions).
func closeTo(got, want float64) bool {
	return math.Abs(got-want) <= 1e-12*math.Max(1, math.Abs(want))
}

func checkClose(t *testing.T, name string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", name, len(got), len(want))
	}
	for i := range got {
		if !closeTo(got[i], want[i]) {
			t.Errorf("%s[%d] = %v, want %v", name, i, got[i], want[i])
		}
	}
}

func TestGradLorenzJSON(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCmd(t, lorenzForm)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	obj := decodeObject(t, stdout)
	y, gp, gy := checkGradObject(t, obj, 1, 3, 3)
	if m := obj["method"]; m != "Tsit5" {
		t.Errorf("method = %v, want Tsit5 (the router's choice)", m)
	}

	pr := problems.Lorenz()
	prob := ode.Problem{Field: pr.Field, Y0: []float64{1, 0, 0}, P: []float64{10, 28, 2.6666666666666665}, T0: 0, T1: 1}
	g, err := ode.Grad(nil, prob, ode.SumSquares(), nil, &ode.Settings{RelTol: 1e-10, AbsTol: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, "grad_p", gp, g.P)
	checkClose(t, "grad_y0", gy, g.Y0)
	checkClose(t, "y_final", y, g.Solution.Y)
	if l := number(t, obj, "loss"); !closeTo(l, g.Loss) {
		t.Errorf("loss = %v, want %v", l, g.Loss)
	}
	if got, want := integer(t, obj, "accepted"), g.Mesh.Stats.TotalAccepted(); got != want {
		t.Errorf("accepted = %d, want %d", got, want)
	}
	if cs := number(t, obj, "checksum_grad_p"); !closeTo(cs, gp[0]+gp[1]+gp[2]) {
		t.Errorf("checksum_grad_p = %v, want %v", cs, gp[0]+gp[1]+gp[2])
	}
}

func TestGradRobertsonJSON(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCmd(t, robertsonForm)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	obj := decodeObject(t, stdout)
	y, gp, _ := checkGradObject(t, obj, 1, 3, 3)
	if m := obj["method"]; m != "Rodas5P" {
		t.Errorf("method = %v, want Rodas5P", m)
	}
	// The loss y:0 is y0(t1) itself; raising k1 consumes y0.
	if l := number(t, obj, "loss"); l != y[0] {
		t.Errorf("loss = %v, want y_final[0] = %v", l, y[0])
	}
	if !(gp[0] < 0) {
		t.Errorf("dy0/dk1 = %v, want < 0", gp[0])
	}
	if s := y[0] + y[1] + y[2]; math.Abs(s-1) > 1e-6 {
		t.Errorf("y0+y1+y2 = %v, want 1 (conserved)", s)
	}

	pr := problems.Robertson()
	prob := ode.Problem{Field: pr.Field, Y0: []float64{1, 0, 0}, P: []float64{0.04, 3e7, 1e4}, T0: 0, T1: 100}
	g, err := ode.Grad(nil, prob, ode.Component(0), nil, &ode.Settings{Method: ode.Rodas5P})
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, "grad_p", gp, g.P)
}

func TestGradVanDerPol(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCmd(t, vdpForm)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	checkGradObject(t, decodeObject(t, stdout), 1, 2, 1)

	// The same without -json: a readable report.
	code, stdout, stderr = runCmd(t, strings.TrimSuffix(vdpForm, " -json"))
	if code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	for _, want := range []string{"status", "ok", "loss", "sumsq", "steps", "y(t1)", "dL/dy0", "mu", "dL/dp"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
}

func TestGradEnsemble(t *testing.T) {
	t.Parallel()
	const n = 64
	code, stdout, stderr := runCmd(t, ensembleForm)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	obj := decodeObject(t, stdout)
	y, gp, gy := checkGradObject(t, obj, n, 3, 3)
	if cs := number(t, obj, "checksum_y"); !closeTo(cs, sum(y)) {
		t.Errorf("checksum_y = %v, want %v", cs, sum(y))
	}
	if cs := number(t, obj, "checksum_grad_p"); !closeTo(cs, sum(gp)) {
		t.Errorf("checksum_grad_p = %v, want %v", cs, sum(gp))
	}

	pr := problems.Lorenz()
	y0, params := pr.Ensemble(n)
	rho := problems.LinSpace(make([]float64, n), 0, 21)
	for i := range rho {
		params[i*3+1] = rho[i]
	}
	g, err := ode.Grad(nil, ode.Problem{Field: pr.Field, N: n, Y0: y0, P: params, T0: pr.T0, T1: pr.T1}, ode.SumSquares(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, "grad_p", gp, g.P)
	checkClose(t, "grad_y0", gy, g.Y0)
	checkClose(t, "y_final", y, g.Solution.Y)

	code, stdout, stderr = runCmd(t, strings.TrimSuffix(ensembleForm, " -json"))
	if code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	for _, want := range []string{"64 trajectories", "rho", "accepted", "median", "time", "trajectories/s", "checksum", "sum dL/dp"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
}

// TestLargeEnsembleSummary checks that -json leaves the arrays out above
// jsonArrayLimit trajectories unless -arrays is given.
func TestLargeEnsembleSummary(t *testing.T) {
	t.Parallel()
	const cmd = "grad -problem lorenz -n 1100 -vary p1=0:21 -t1 0.05 -json"
	code, stdout, stderr := runCmd(t, cmd)
	if code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	obj := decodeObject(t, stdout)
	for _, k := range []string{"y_final", "grad_p", "grad_y0"} {
		if _, ok := obj[k]; ok {
			t.Errorf("-json for n = 1100 has %s; want the summary only", k)
		}
	}
	if integer(t, obj, "n") != 1100 {
		t.Errorf("n = %v", obj["n"])
	}
	for _, k := range []string{"checksum_y", "checksum_grad_p", "time_ms", "loss"} {
		number(t, obj, k)
	}
	code, stdout, _ = runCmd(t, cmd+" -arrays")
	if code != exitOK {
		t.Fatalf("-arrays: exit %d", code)
	}
	checkGradObject(t, decodeObject(t, stdout), 1100, 3, 3)
}

func TestSolveSaveAt(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCmd(t, "solve -problem vdp -p 5 -y0 2,0 -t1 3 -saveat 1,2,3 -json")
	if code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	obj := decodeObject(t, stdout)
	y := numbers(t, obj, "y_final", 2)
	ys := numbers(t, obj, "y_saved", 3*2)
	checkClose(t, "y_saved at t1", ys[4:], y)
	for _, k := range []string{"loss", "grad_p", "loss_name"} {
		if _, ok := obj[k]; ok {
			t.Errorf("solve output has the grad key %s", k)
		}
	}
	code, stdout, _ = runCmd(t, "solve -problem vdp -p 5 -y0 2,0 -t1 3 -saveat 1,2,3")
	if code != exitOK || !strings.Contains(stdout, "y(t1)") || !regexp.MustCompile(`(?m)^2\s+\S+\s+\S+$`).MatchString(stdout) {
		t.Errorf("exit %d; report lacks the saved states:\n%s", code, stdout)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args string
		want string // in stderr
	}{
		{"grad -problem lorenz -p 10,28", "-p has 2 values, lorenz needs 3 (sigma, rho, beta)"},
		{"grad -p 1,x,3", `-p: "1,x,3": element 2 "x" is not a number`},
		{"grad -problem vdp -y0 1,0,0", "-y0 has 3 values, vdp needs 2"},
		{"grad -n 4 -p 1,2,3,4", "-p has 4 values, lorenz needs 3 (sigma, rho, beta), or n×3 = 12"},
		{"grad -problem hires -p 1", "-p: hires has no per-trajectory parameters"},
		{"grad -vary p3=0:1", "-vary p3=0:1: lorenz has 3 parameters, p0 to p2"},
		{"grad -vary y03=0:1", "-vary y03=0:1: lorenz has state dimension 3"},
		{"grad -vary p1", "-vary"},
		{"grad -n 2 -vary p1=0:1 -vary p1=2:3", "-vary p1=2:3: p1 is swept twice"},
		{"grad -loss y:3", "-loss y:3: lorenz has 3 state components"},
		{"grad -loss mse", "-loss"},
		{"grad -method rk4", "-method"},
		{"grad -problem lorentz", `-problem: "lorentz" is not a built-in problem`},
		{"grad -t1 0", "-t1 = 0 must be greater than -t0 = 0"},
		{"grad -t0 nan", "-t0"},
		{"grad -rtol -1", "-rtol"},
		{"grad -atol 0", "-atol"},
		{"grad -rtol abc", "-rtol"},
		{"grad -max-steps -1", "-max-steps"},
		{"grad -n 0", "-n"},
		{"grad -workers -2", "-workers"},
		{"solve -saveat 0.5,0.2", "-saveat: element 2"},
		{"solve -saveat 3", "-saveat: element 1 (3) is outside"},
		{"solve -loss sumsq", "-loss"}, // solve has no loss
		{"grad -bogus", "-bogus"},
		{"grad lorenz", `unexpected argument "lorenz"`},
		{"frobnicate", `unknown command "frobnicate"`},
		{"help frobnicate", `unknown command "frobnicate"`},
		{"problems -x", "-x"},
		{"", "Usage"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCmd(t, tc.args)
			if code != exitUsage {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitUsage, stdout, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr)
			}
		})
	}
}

// TestBadInputJSON checks that with -json a usage error also prints a
// JSON object whose status is the message.
func TestBadInputJSON(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runCmd(t, "grad -problem lorenz -p 10,28 -json")
	if code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	obj := decodeObject(t, stdout)
	if s, _ := obj["status"].(string); !strings.HasPrefix(s, "-p has 2 values") {
		t.Errorf("status = %#v", obj["status"])
	}
}

// TestFailureJSON checks that a failed solve exits with 1 and still
// prints the whole object, with the error as status.
func TestFailureJSON(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCmd(t, "grad -problem robertson -method tsit5 -max-steps 50 -json")
	if code != exitFail {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFail, stdout, stderr)
	}
	obj := decodeObject(t, stdout)
	s, _ := obj["status"].(string)
	if !strings.Contains(s, "max steps reached") || !strings.Contains(s, "trajectory 0") {
		t.Errorf("status = %q, want the trajectory error", s)
	}
	for _, k := range []string{"y_final", "loss", "grad_p", "grad_y0", "accepted", "rejected"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("failed run's object lacks %s", k)
		}
	}
	if obj["loss"] != nil || obj["grad_p"] != nil {
		t.Errorf("loss = %v, grad_p = %v; want null", obj["loss"], obj["grad_p"])
	}
	if integer(t, obj, "accepted")+integer(t, obj, "rejected") != 50 || integer(t, obj, "failed") != 1 {
		t.Errorf("accepted %v + rejected %v != 50 or failed %v != 1", obj["accepted"], obj["rejected"], obj["failed"])
	}

	code, stdout, stderr = runCmd(t, "solve -problem robertson -method tsit5 -max-steps 50")
	if code != exitFail || !strings.Contains(stdout, "max steps reached") || !strings.Contains(stderr, "max steps reached") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

func TestProblemsCommand(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runCmd(t, "problems")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, name := range problems.Names() {
		pr, _ := problems.ByName(name)
		if !strings.Contains(stdout, name) || !strings.Contains(stdout, pr.Doc) {
			t.Errorf("problems lacks %s or its Doc", name)
		}
	}
	if !strings.Contains(stdout, "3 (sigma, rho, beta)") {
		t.Errorf("problems lacks Lorenz's parameter names:\n%s", stdout)
	}
	code, stdout, _ = runCmd(t, "problems -json")
	var list []map[string]any
	if code != exitOK || json.Unmarshal([]byte(stdout), &list) != nil || len(list) != len(problems.Names()) {
		t.Fatalf("problems -json: exit %d, %d entries\n%s", code, len(list), stdout)
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want string }{
		{"help", "The commands are"},
		{"help grad", "-max-steps"},
		{"help grad", "checksum_grad_p"},
		{"help solve", "-saveat"},
		{"help problems", "gradsolve problems"},
		{"-h", "The commands are"},
	} {
		code, stdout, _ := runCmd(t, tc.args)
		if code != exitOK || !strings.Contains(stdout, tc.want) {
			t.Errorf("%s: exit %d, output lacks %q", tc.args, code, tc.want)
		}
	}
	code, _, stderr := runCmd(t, "grad -h")
	if code != exitOK || !strings.Contains(stderr, "Usage: gradsolve grad") {
		t.Errorf("grad -h: exit %d\n%s", code, stderr)
	}
}

// TestJSONSchemaDocumented checks that every key the JSON output can have
// is described in the help (jsonSchema) and in the README.
func TestJSONSchemaDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := make(map[string]bool)
	for _, cmd := range []string{
		lorenzForm + " -saveat 0.5",
		"solve -problem lorenz -json",
		"grad -problem neural-robertson -t1 0.1 -json",
	} {
		_, stdout, _ := runCmd(t, cmd)
		for k := range decodeObject(t, stdout) {
			keys[k] = true
		}
	}
	if len(keys) < 30 {
		t.Fatalf("only %d keys: %v", len(keys), keys)
	}
	for k := range keys {
		if !strings.Contains(jsonSchema, k) {
			t.Errorf("key %s is not in jsonSchema (the help)", k)
		}
		if !bytes.Contains(readme, []byte(k)) {
			t.Errorf("key %s is not in README.md", k)
		}
	}
}

// TestCommandLinesInREADME checks that the README shows the command lines
// the tests run.
func TestCommandLinesInREADME(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{lorenzForm, robertsonForm, "grad -problem lorenz -n 32768 -vary p1=0:21 -rtol 1e-6"} {
		if !bytes.Contains(readme, []byte("gradsolve "+c)) {
			t.Errorf("README lacks %q", "gradsolve "+c)
		}
	}
}
