package main

import (
	"context"
	"io"
	"math"
	"path/filepath"
	"strings"
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

// TestBadFlags checks that flags run cannot use are refused before any
// work, naming the flag: sizes below 1, rates and deviations that are
// not finite or are negative, and -plot (-weights) files that cannot be
// written (they failed after the whole fit, or gave the solver's error
// about an empty ensemble, or ran fit's default steps for -steps 0).
func TestBadFlags(t *testing.T) {
	good := config{n: 4, fits: 1, steps: 2, noise: 0.1, offset: 3, lr: 0.1, seed: 1, quiet: true}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		set  func(c *config)
		want string
	}{
		{"n 0", func(c *config) { c.n = 0 }, "-n 0"},
		{"fits 0", func(c *config) { c.fits = 0 }, "-fits 0"},
		{"steps 0", func(c *config) { c.steps = 0 }, "-steps 0"},
		{"lr 0", func(c *config) { c.lr = 0 }, "-lr 0"},
		{"noise -1", func(c *config) { c.noise = -1 }, "-noise -1"},
		{"offset NaN", func(c *config) { c.offset = math.NaN() }, "-offset NaN"},
		{"remesh -5", func(c *config) { c.remesh = -5 }, "-remesh -5"},
		{"plot .txt", func(c *config) { c.plot = filepath.Join(dir, "x.txt") }, "-plot"},
		{"plot in a missing directory", func(c *config) { c.plot = filepath.Join(dir, "no", "x.png") }, "-plot: cannot write"},
	} {
		c := good
		tc.set(&c)
		if err := c.check(nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Case %s: error %v, want one naming %s", tc.name, err, tc.want)
		}
	}
	if err := good.check(nil); err != nil {
		t.Errorf("the good flags: %v", err)
	}
	if err := good.check([]string{"extra"}); err == nil {
		t.Error("a stray argument was accepted")
	}
	_ = dir
}
