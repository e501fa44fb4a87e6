package ode

import (
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// The controller runs on several goroutines for ensembles larger than one
// chunk; the mesh and the solution must not depend on it.
func TestRecordParallelControllerMatchesSerial(t *testing.T) {
	t.Parallel()
	lorenz := Field{Name: "lorenz", Dim: 3, Params: 3, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{
			p[0].Mul(y[1].Sub(y[0])),
			y[0].Mul(p[1].Sub(y[2])).Sub(y[1]),
			y[0].Mul(y[1]).Sub(p[2].Mul(y[2])),
		}
	}}
	n := 9000
	if testing.Short() {
		n = 5000
	}
	p := Problem{Field: lorenz, N: n, Y0: []float64{1, 0, 0}, P: make([]float64, 3*n), T1: 1}
	for i := 0; i < n; i++ {
		p.P[3*i], p.P[3*i+1], p.P[3*i+2] = 10, 21*float64(i)/float64(n-1), 8.0/3
	}
	serial, err := Record(p, &Settings{Exec: tape.ExecSettings{Workers: 1}})
	if err != nil {
		t.Fatal(err)
	}
	par, err := Record(p, &Settings{Exec: tape.ExecSettings{Workers: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if serial.Rows != par.Rows {
		t.Fatalf("Rows: want %d, got %d", serial.Rows, par.Rows)
	}
	for i := range serial.Len {
		if serial.Len[i] != par.Len[i] || serial.Stats.Rejected[i] != par.Stats.Rejected[i] {
			t.Fatalf("trajectory %d: want %d accepted, %d rejected, got %d, %d", i,
				serial.Len[i], serial.Stats.Rejected[i], par.Len[i], par.Stats.Rejected[i])
		}
	}
	for k := range serial.H {
		if serial.H[k] != par.H[k] {
			t.Fatalf("H[%d]: want %v, got %v", k, serial.H[k], par.H[k])
		}
	}
}

// A gradient that is not finite is an error, not a silent NaN.
func TestGradNonFiniteIsAnError(t *testing.T) {
	t.Parallel()
	// y' = -sqrt(y): the derivative 1/(2 sqrt y) is infinite at y = 0,
	// where the solution from y0 = 0 stays.
	f := Field{Name: "sqrt", Dim: 1, F: func(_ tape.V, y, _ []tape.V) []tape.V {
		return []tape.V{y[0].Sqrt().Neg()}
	}}
	_, err := Grad(nil, Problem{Field: f, Y0: []float64{0}, T1: 1}, SumSquares(), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "gradient with respect to Y0 of trajectory 0") {
		t.Fatalf("want an error naming the non-finite gradient of trajectory 0, got %v", err)
	}
}
