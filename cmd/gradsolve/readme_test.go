package main

import (
	"fmt"
	"log"
	"os"
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
