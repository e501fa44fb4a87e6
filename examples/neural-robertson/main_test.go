package main

import (
	"context"
	"flag"
	"io"
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
