package ode

import (
	"context"
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// TestReuseNotRunSaves checks that a gradient's record that stops at a
// failure leaves the saved states of the trajectories it did not run at
// zero, as in a fresh result, when it reuses a result's Ys holding other
// values, and that a Solve's failures write NaN over them (the CPU
// engine does not clear a reused Ys that its record writes: its workers
// write every state of the trajectories they run).
func TestReuseNotRunSaves(t *testing.T) {
	t.Parallel()
	osc := Field{Name: "oscillator", Dim: 4, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{y[1], y[0].Mul(p[0]).Neg(), y[3], y[2].Neg()}
	}}
	const n = 700 // several chunks, run one after the other
	p := Problem{Field: osc, N: n, Y0: []float64{1, 0, 0, 1}, P: []float64{4}, T1: 4, SaveAt: []float64{0, 1, 2, 3}}
	sv, err := NewSolver(osc, &Settings{Method: Tsit5, RelTol: 1e-8, MaxSteps: 5, Exec: tape.ExecSettings{Workers: 1}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sv.checkProblem(&p)
	if err != nil {
		t.Fatal(err)
	}
	loss := SumSquares()
	for _, op := range []Op{OpGrad, OpSolve} {
		ys := make([]float64, n*4*4)
		for i := range ys {
			ys[i] = 1e300
		}
		var l *Loss
		if op == OpGrad {
			l = &loss
		}
		res, _, err := sv.run(context.Background(), op, q, l, nil, &Result{Ys: ys})
		if err != nil {
			t.Fatal(err)
		}
		checkNotRunSaves(t, op, res, n, op == OpGrad)
	}
}

// checkNotRunSaves checks the saved states of res (16 a trajectory):
// zero where NotRun, NaN where failed, none left at 1e300 from a reused
// Ys; wantNotRun: some trajectory must be NotRun.
func checkNotRunSaves(t *testing.T, op Op, res *Result, n int, wantNotRun bool) {
	t.Helper()
	notRun := 0
	for i, st := range res.Status {
		row := res.Ys[i*16 : (i+1)*16]
		for _, v := range row {
			switch {
			case st == NotRun && v != 0:
				t.Fatalf("op %v: trajectory %d (not run): saved state %v, want 0", op, i, v)
			case st != NotRun && v == 1e300:
				t.Fatalf("op %v: trajectory %d (%v): saved state %v left from the reused storage", op, i, st, v)
			}
		}
		if st == NotRun {
			notRun++
		} else if st == OK || !math.IsNaN(row[0]) {
			t.Fatalf("op %v: trajectory %d: status %v, saved state %v: want a failure with NaN states", op, i, st, row[0])
		}
	}
	if wantNotRun && notRun == 0 {
		t.Fatalf("op %v: every trajectory ran: the case does not test NotRun ones", op)
	}
}
