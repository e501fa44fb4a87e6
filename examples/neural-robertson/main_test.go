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
