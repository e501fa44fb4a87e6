package main

import (
	"context"
	"io"
	"math"
	"testing"
)

// TestLorenzFit runs the example with 16 trajectories (the default flags
// without -short) and checks that ρ is recovered to within 1% from noisy
// data with the fixed seed.
func TestLorenzFit(t *testing.T) {
	c := config{n: 64, fits: 1, steps: 200, noise: 0.1, offset: 3, lr: 0.1, seed: 1, quiet: true}
	if testing.Short() {
		c.n, c.steps = 16, 120
	}
	o, err := run(context.Background(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if e := math.Abs(o.rho[0]-28) / 28; e > 0.01 {
		t.Errorf("rho = %.4f, %.2f%% from 28; want within 1%%", o.rho[0], 100*e)
	}
	if !(o.res.FinalLoss < o.res.History[0]/100) {
		t.Errorf("loss %g -> %g", o.res.History[0], o.res.FinalLoss)
	}
}
