package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/bench"
)

// TestBenchNeuralDump runs the neural suite on two tiny batches and checks
// the JSON rows and the dump file.
func TestBenchNeuralDump(t *testing.T) {
	path := filepath.Join(t.TempDir(), "neural.json")
	code, stdout, stderr := runCmd(t, "bench -suite neural -n 3,5 -reps 1 -ref-sample 2 -json -dump "+path)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d JSON lines, want 2:\n%s", len(lines), stdout)
	}
	for k, l := range lines {
		if obj := decodeObject(t, l); number(t, obj, "b") != float64([]int{3, 5}[k]) || !(number(t, obj, "grad_record_ms") > 0) {
			t.Errorf("row %d: %s", k, l)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d bench.NeuralDump
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Y0) != 10 || len(d.Results) != 2 || len(d.Results[1].Grad) != len(d.Weights) {
		t.Errorf("dump: %d y0 values, %d results", len(d.Y0), len(d.Results))
	}
}

// TestBenchDumpUsage checks that -dump is refused for suites that write
// no dump, -problems for suites without a choice of problems, and -engine for suites that run on the CPU or with an engine
// that does not exist, before any suite runs.
func TestBenchDumpUsage(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"bench -suite lorenz -dump x.json", "-dump"},
		{"bench -suite lorenz -engine cuda", "-engine applies to the gpu suites"},
		{"bench -suite gpu-lorenz -engine nope -n 2 -reps 1", `-engine: "nope": unknown engine`},
		{"bench -suite lorenz -problems hires", "-problems applies to the stiff and gpu-large suites"},
		{"bench -suite gpu-large -engine cpu -n 2,4", "the gpu-large suite takes one size"},
		// List elements are named as the other commands name them (it
		// said `strconv.Atoi: parsing "abc": invalid syntax`).
		{"bench -suite lorenz -n 64,abc", `-n "64,abc": element 2 "abc" is not an integer`},
		{"bench -suite lorenz -n 64,", `-n "64,": element 2 is empty`},
		{"bench -suite lorenz -n 1e3", `element 1 "1e3" is not an integer`},
	} {
		code, stdout, stderr := runCmd(t, tc.args)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want a usage error containing %q and no output", tc.args, code, stdout, stderr, tc.want)
		}
	}
}
