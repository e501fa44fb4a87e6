package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
)

// TestOrbits checks that the potential's three parameters are recovered
// to within 2% with unknown initial velocities (16 stars; 32, the
// default, without -short gives under 1%), and that the orbit plot is
// written.
func TestOrbits(t *testing.T) {
	c := config{n: 16, steps: 300, noise: 0.005, lr: 0.03, seed: 1, quiet: true, plot: filepath.Join(t.TempDir(), "orbits.png")}
	want := 0.02
	if testing.Short() {
		c.n, c.steps, want = 8, 150, 0.1
	}
	o, err := run(context.Background(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.worst > want {
		t.Errorf("recovered %v, worst relative error %.2f%%; want at most %g%%", o.got, 100*o.worst, 100*want)
	}
}
