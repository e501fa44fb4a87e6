package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
)

// TestOrbits checks that the potential's three parameters are recovered
// to within 2% with unknown initial velocities (16 stars; 32, the
// default, gives under 1%; -short's 8 stars within 5%), and that the
// orbit plot is written. The fit needs its 300 steps at every size: its
// learning rate decays over the run, and at 150 steps it stops about 20%
// from the truth.
func TestOrbits(t *testing.T) {
	c := config{n: 16, steps: 300, noise: 0.005, lr: 0.03, seed: 1, quiet: true, plot: filepath.Join(t.TempDir(), "orbits.png")}
	want := 0.02
	if testing.Short() {
		c.n, want = 8, 0.05
	}
	o, err := run(context.Background(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.worst > want {
		t.Errorf("recovered %v, worst relative error %.2f%%; want at most %g%%", o.got, 100*o.worst, 100*want)
	}
}
