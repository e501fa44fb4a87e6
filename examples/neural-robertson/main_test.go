package main

import (
	"context"
	"flag"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

var full = flag.Bool("full", false, "run the example with its default flags (about 20 s) and check its stated accuracy")

// TestNeuralRobertson checks the example's claims with its default flags
// under -full: the loss falls at least 100-fold and the learned rate is
// within 5% of k3 on held-out states. Plain go test runs a short fit (3
// trajectories, 40 steps) and checks that the loss falls at least
// tenfold.
func TestNeuralRobertson(t *testing.T) {
	c := config{n: 3, steps: 40, lr: 0.01, seed: 1, quiet: true}
	wantReduction, wantRate := 10.0, 1.0
	if *full {
		c.n, c.steps = 6, 250
		wantReduction, wantRate = 100, 0.05
	} else if testing.Short() {
		t.Skip("a stiff neural fit; run without -short")
	}
	o, err := run(context.Background(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.reduction < wantReduction {
		t.Errorf("loss reduced %.1fx, want at least %gx", o.reduction, wantReduction)
	}
	if o.rateErr > wantRate {
		t.Errorf("learned rate off by %.2f%% on held-out states, want at most %g%%", 100*o.rateErr, 100*wantRate)
	}
}

// TestSmallRuns checks that runs shorter than the schedule's ten warm-up
// steps work (they once failed at step 0: Warmup > Steps), and that sizes
// below 1 are refused before any work.
func TestSmallRuns(t *testing.T) {
	for _, tc := range []struct {
		n, steps int
		ok       bool
	}{
		{1, 1, true},
		{2, 3, true},
		{1, 0, false},
		{0, 3, false},
	} {
		c := config{n: tc.n, steps: tc.steps, lr: 0.01, seed: 1, quiet: true}
		_, err := run(context.Background(), c, io.Discard)
		if (err == nil) != tc.ok {
			t.Errorf("-n %d -steps %d: error %v, want ok = %v", tc.n, tc.steps, err, tc.ok)
		}
	}
}

// TestBadFlags checks that flags run cannot use are refused before any
// work, naming the flag: sizes below 1, rates and deviations that are
// not finite or are negative, and -plot (-weights) files that cannot be
// written (they failed after the whole fit, or gave the solver's error
// about an empty ensemble, or ran fit's default steps for -steps 0).
func TestBadFlags(t *testing.T) {
	good := config{n: 2, steps: 2, lr: 0.01, seed: 1, quiet: true}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		set  func(c *config)
		want string
	}{
		{"lr NaN", func(c *config) { c.lr = math.NaN() }, "-lr NaN"},
		{"lr 0", func(c *config) { c.lr = 0 }, "-lr 0"},
		{"plot .txt", func(c *config) { c.plot = filepath.Join(dir, "x.txt") }, "-plot"},
		{"weights in a missing directory", func(c *config) { c.weights = filepath.Join(dir, "no", "w.json") }, "-weights: cannot write"},
		{"weights a directory", func(c *config) { c.weights = dir }, "-weights: cannot write"},
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
