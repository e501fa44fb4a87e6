package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Example_quickStart is the README's Go quick start; keep the two in step.
func Example_quickStart() {
	// The Lorenz system y' = F(t, y, p), written over traced values.
	lorenz := ode.Field{Name: "lorenz", Dim: 3, Params: 3,
		F: func(t tape.V, y, p []tape.V) []tape.V {
			sigma, rho, beta := p[0], p[1], p[2]
			return []tape.V{
				sigma.Mul(y[1].Sub(y[0])),
				y[0].Mul(rho.Sub(y[2])).Sub(y[1]),
				y[0].Mul(y[1]).Sub(beta.Mul(y[2])),
			}
		}}

	// Four trajectories from y0 = (1, 0, 0), sweeping rho; parameters are
	// row-major [n×Params].
	n := 4
	var params []float64
	for i := 0; i < n; i++ {
		params = append(params, 10, 20+2*float64(i), 8.0/3)
	}
	prob := ode.Problem{Field: lorenz, N: n, Y0: []float64{1, 0, 0}, P: params, T0: 0, T1: 1}

	// L = Σ_i |y_i(1)|² and its exact gradient: record the adaptive mesh,
	// differentiate its replay.
	g, err := ode.Grad(nil, prob, ode.SumSquares(), nil, &ode.Settings{RelTol: 1e-8, AbsTol: 1e-10})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("L = %.5g\n", g.Loss)
	for i := 0; i < n; i++ {
		fmt.Printf("rho = %g: dL/drho = %.5g, dL/dy0[0] = %.5g\n", params[3*i+1], g.P[3*i+1], g.Y0[3*i])
	}
	// Output:
	// L = 2295.7
	// rho = 20: dL/drho = 82.085, dL/dy0[0] = 83.391
	// rho = 22: dL/drho = 126.52, dL/dy0[0] = 201.64
	// rho = 24: dL/drho = 116.91, dL/dy0[0] = 216.68
	// rho = 26: dL/drho = 67.974, dL/dy0[0] = 116.12
}

// TestQuickStartInREADME checks that the README's quick start is the code
// of Example_quickStart, line for line (indentation aside).
func TestQuickStartInREADME(t *testing.T) {
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "func Example_quickStart() {\n")
	body, _, _ = strings.Cut(body, "\t// Output:")
	var want []string
	for _, l := range strings.Split(body, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			want = append(want, l)
		}
	}
	var got []string
	for _, l := range strings.Split(string(readme), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			got = append(got, l)
		}
	}
	// The example's lines must appear in the README consecutively.
	joined := "\n" + strings.Join(got, "\n") + "\n"
	if !strings.Contains(joined, "\n"+strings.Join(want, "\n")+"\n") {
		t.Errorf("README.md's quick start differs from Example_quickStart in readme_test.go; copy the example's body into main")
	}
	if len(want) < 20 {
		t.Errorf("extracted only %d lines of Example_quickStart", len(want))
	}
}

// readmeBlock returns the first fenced block of the README after the text
// marker (which may span a line break: runs of white space match any white
// space), without its fences.
func readmeBlock(t *testing.T, readme, marker string) string {
	t.Helper()
	flat := strings.Join(strings.Fields(readme), " ")
	at := strings.Index(flat, strings.Join(strings.Fields(marker), " "))
	if at < 0 {
		t.Fatalf("README.md lacks %q", marker)
	}
	// Find the same place in the README itself: the n-th word.
	words := len(strings.Fields(flat[:at]))
	rest := readme
	for range words {
		rest = strings.TrimLeft(rest, " \t\n")
		rest = rest[strings.IndexAny(rest+" ", " \t\n"):]
	}
	_, rest, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("README.md has no block after %q", marker)
	}
	_, rest, _ = strings.Cut(rest, "\n") // the fence's language
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("README.md's block after %q is not closed", marker)
	}
	return block
}

// TestREADMEOutputs runs the command lines whose output the README shows
// and checks the README's text against what they print: the JSON object of
// the single Lorenz gradient (every key but the timings, number for
// number), the CSV table, and the main job's report (every line but the
// timing and the elided rows). Results are bit-identical across hosts, so
// a change of the numbers is a change to write into the README.
func TestREADMEOutputs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)

	t.Run("json", func(t *testing.T) {
		t.Parallel()
		var want map[string]any
		block := readmeBlock(t, readme, "the first command above prints")
		if err := json.Unmarshal([]byte(block), &want); err != nil {
			t.Fatalf("the README's JSON example is not JSON: %v\n%s", err, block)
		}
		code, stdout, stderr := runCmd(t, lorenzForm)
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatal(err)
		}
		timings := map[string]bool{"time_ms": true, "setup_ms": true, "record_ms": true, "grad_ms": true}
		for k, g := range got {
			w, ok := want[k]
			switch {
			case !ok:
				t.Errorf("the README's JSON example lacks %q", k)
			case timings[k]:
				if _, isNum := w.(float64); !isNum {
					t.Errorf("%s = %v in the README, want a number", k, w)
				}
			case !reflect.DeepEqual(g, w):
				t.Errorf("%s: the command prints %v, the README shows %v", k, g, w)
			}
		}
		for k := range want {
			if _, ok := got[k]; !ok {
				t.Errorf("the README's JSON example has %q, which the command does not print", k)
			}
		}
	})

	t.Run("csv", func(t *testing.T) {
		t.Parallel()
		const cmd = "grad -problem lorenz -n 2 -vary p1=0:21 -format csv"
		want := readmeBlock(t, readme, "`gradsolve "+cmd+"` prints")
		code, stdout, stderr := runCmd(t, cmd)
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		if stdout != want {
			t.Errorf("the command prints\n%s\nthe README shows\n%s", stdout, want)
		}
	})

	t.Run("main job", func(t *testing.T) {
		t.Parallel()
		if testing.Short() {
			t.Skip("32768 trajectories")
		}
		const cmd = "grad -problem lorenz -n 32768 -vary p1=0:21 -rtol 1e-6"
		if !strings.Contains(readme, "go run ./cmd/gradsolve "+cmd+"\n") {
			t.Fatalf("README.md lacks the main job %q", cmd)
		}
		want := readmeBlock(t, readme, "The first prints (timings vary by machine):")
		code, stdout, stderr := runCmd(t, cmd+" -quiet")
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		lines := strings.Split(stdout, "\n")
		for _, l := range strings.Split(strings.TrimSpace(want), "\n") {
			if strings.HasPrefix(l, "time ") || strings.TrimSpace(l) == "..." {
				continue
			}
			if !slices.Contains(lines, l) {
				t.Errorf("the README's line\n%s\nis not in the output:\n%s", l, stdout)
			}
		}
	})
}

// TestExamplesInREADME checks that the README's layout table names every
// program under examples/.
func TestExamplesInREADME(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, row, ok := strings.Cut(string(readme), "| `examples/` |")
	if !ok {
		t.Fatal("README.md's layout table has no examples/ row")
	}
	row, _, _ = strings.Cut(row, "\n")
	dirs, err := os.ReadDir("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, d := range dirs {
		if _, err := os.Stat("../../examples/" + d.Name() + "/main.go"); err != nil {
			continue
		}
		found++
		if !strings.Contains(row, d.Name()) {
			t.Errorf("README.md's examples/ row does not name examples/%s:\n%s", d.Name(), row)
		}
	}
	if found < 5 {
		t.Errorf("found %d example programs", found)
	}
}
