package main

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestEngineFlag checks -engine: the outputs name the engine that ran, and
// a name that is not registered is a usage error listing the valid ones.
func TestEngineFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want string }{
		{"grad -problem vdp -json", "cpu"},
		{"grad -problem vdp -engine cpu -json", "cpu"},
		{"solve -problem vdp -engine CPU -json", "cpu"},
		{"fit -problem vdp -fit mu -steps 2 -engine cpu -json", "cpu"},
		{"grad -problem vdp -engine auto -json", ""}, // any registered engine
	} {
		code, stdout, stderr := runCmd(t, tc.args)
		if code != exitOK {
			t.Errorf("%s: exit %d\n%s", tc.args, code, stderr)
			continue
		}
		got, _ := decodeObject(t, stdout)["engine"].(string)
		if tc.want != "" && got != tc.want || !slices.Contains(ode.Engines(), got) {
			t.Errorf("%s: engine %q, want %q (registered: %v)", tc.args, got, tc.want, ode.Engines())
		}
	}
	for _, args := range []string{"grad -problem vdp", "solve -problem vdp -n 3", "fit -problem vdp -fit mu -steps 2"} {
		if code, stdout, _ := runCmd(t, args); code != exitOK || !strings.Contains(stdout, "on the cpu engine") {
			t.Errorf("%s: exit %d, report does not name the engine:\n%s", args, code, stdout)
		}
	}
	code, _, stderr := runCmd(t, "grad -engine bogus")
	if code != exitUsage || !strings.Contains(stderr, "-engine") || !strings.Contains(stderr, `"bogus"`) || !strings.Contains(stderr, "cpu") {
		t.Errorf("-engine bogus: exit %d, stderr %q", code, stderr)
	}
}

// TestStiffGradient checks that a gradient refused because a trajectory
// is stiff for the explicit method says so in the report, the JSON
// (status "stiff"), the CSV and the exit status, with the fix; and that
// -method auto switches to Rodas5P where the stiffness test fires and
// returns the gradient of that composition instead.
func TestStiffGradient(t *testing.T) {
	t.Parallel()
	fixes := []string{"-method rodas5p", "-method auto"}

	code, stdout, stderr := runCmd(t, "grad -problem vdp-stiff -method tsit5")
	if code != exitFail {
		t.Errorf("tsit5: exit %d, want %d", code, exitFail)
	}
	for _, w := range append([]string{"stiff for Tsit5", "no gradient"}, fixes...) {
		if !strings.Contains(stderr, w) || !strings.Contains(stdout, w) {
			t.Errorf("tsit5: stdout or stderr lacks %q:\nstdout:\n%s\nstderr:\n%s", w, stdout, stderr)
		}
	}

	code, stdout, _ = runCmd(t, "grad -problem vdp-stiff -method tsit5 -json")
	obj := decodeObject(t, stdout)
	errText, _ := obj["error"].(string)
	if code != exitFail || obj["status"] != "stiff" || integer(t, obj, "stiff") != 1 || obj["loss"] != nil || obj["method"] != "Tsit5" {
		t.Errorf("tsit5 -json: exit %d, status %v, stiff %v, loss %v, method %v", code, obj["status"], obj["stiff"], obj["loss"], obj["method"])
	}
	for _, w := range fixes {
		if !strings.Contains(errText, w) {
			t.Errorf("tsit5 -json: error %q lacks %q", errText, w)
		}
	}

	// -method auto: Tsit5 switched to Rodas5P, exit 0; its gradient, and
	// Rodas5P's, are within 3e-3 of a reference (Rodas5P at rtol 1e-12):
	// at the default rtol 1e-6 their ∂L/∂y0[0] are 1.6e-3 and 5.5e-4 off
	// it, and 1.1e-3 apart (session 53).
	code, stdout, stderr = runCmd(t, "grad -problem vdp-stiff -method auto -json")
	if code != exitOK {
		t.Fatalf("auto: exit %d\n%s", code, stderr)
	}
	auto := decodeObject(t, stdout)
	if auto["method"] != "Auto" || auto["status"] != "ok" || integer(t, auto, "stiff") != 0 {
		t.Errorf("auto: method %v, status %v, stiff %v; want Auto, ok, 0", auto["method"], auto["status"], auto["stiff"])
	}
	_, stdout, _ = runCmd(t, "grad -problem vdp-stiff -method rodas5p -json")
	rodas := decodeObject(t, stdout)
	_, stdout, _ = runCmd(t, "grad -problem vdp-stiff -method rodas5p -rtol 1e-12 -atol 1e-14 -json")
	ref := decodeObject(t, stdout)
	_, wp, wy := checkGradObject(t, ref, 1, 2, 1)
	for what, obj := range map[string]map[string]any{"auto": auto, "rodas5p": rodas} {
		_, gp, gy := checkGradObject(t, obj, 1, 2, 1)
		for name, pair := range map[string][2][]float64{"grad_p": {gp, wp}, "grad_y0": {gy, wy}} {
			for i, want := range pair[1] {
				if got := pair[0][i]; !(math.Abs(got-want) <= 3e-3*math.Max(1, math.Abs(want))) {
					t.Errorf("%s %s[%d] = %v, the reference's %v", what, name, i, got, want)
				}
			}
		}
	}
	if code, stdout, _ = runCmd(t, "grad -problem vdp-stiff -method auto"); code != exitOK || !strings.Contains(stdout, "Tsit5, then Rodas5P (-method auto: the stiffness test fired with Tsit5 on the trajectory") {
		t.Errorf("auto: exit %d, report does not say why Rodas5P ran:\n%s", code, stdout)
	}

	// CSV: the stiff trajectory's status names the cause.
	path := filepath.Join(t.TempDir(), "g.csv")
	code, _, stderr = runCmd(t, "grad -problem vdp-stiff -method tsit5 -n 2 -vary p0=1:1000 -out "+path)
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("exit %d: %v\n%s", code, err, stderr)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	st := slices.Index(rows[0], "status")
	if code != exitFail || rows[1][st] != "ok" || rows[2][st] != ode.Stiff.String() || rows[2][len(rows[2])-1] != "" {
		t.Errorf("exit %d, rows %q", code, rows[1:])
	}

	// solve: the states are accurate; the report and the JSON say the
	// trajectory is stiff, and the status is ok.
	code, stdout, _ = runCmd(t, "solve -problem vdp-stiff -method tsit5 -json")
	obj = decodeObject(t, stdout)
	if code != exitOK || obj["status"] != "ok" || integer(t, obj, "stiff") != 1 || obj["error"] != nil {
		t.Errorf("solve tsit5: exit %d, status %v, stiff %v, error %v", code, obj["status"], obj["stiff"], obj["error"])
	}
	if _, stdout, _ = runCmd(t, "solve -problem vdp-stiff -method tsit5"); !strings.Contains(stdout, "stiffness test of Tsit5 fired") {
		t.Errorf("solve tsit5: report does not say the trajectory is stiff:\n%s", stdout)
	}

	// fit refuses the same way.
	code, stdout, _ = runCmd(t, "fit -problem vdp-stiff -fit mu -method tsit5 -steps 2 -json")
	obj = decodeObject(t, stdout)
	if errText, _ = obj["error"].(string); code != exitFail || obj["status"] != "stiff" || !strings.Contains(errText, "-method auto") {
		t.Errorf("fit tsit5: exit %d, status %v, error %q", code, obj["status"], errText)
	}
}
