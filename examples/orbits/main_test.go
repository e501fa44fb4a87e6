package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
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

// TestSmallRuns checks that the example runs, plot included, at the
// smallest sizes its flags allow (it once plotted stars 0 to 3 whatever
// -n was).
func TestSmallRuns(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		c := config{n: n, steps: 2, noise: 0.005, lr: 0.03, seed: 1, quiet: true, plot: filepath.Join(t.TempDir(), "orbits.svg")}
		if _, err := run(context.Background(), c, io.Discard); err != nil {
			t.Errorf("-n %d -steps 2: %v", n, err)
		}
	}
}

// TestBadSizes checks that -n and -steps below 1 are refused naming the
// flag (-steps 0 ran fit's default 100 steps with a schedule of 0 steps).
func TestBadSizes(t *testing.T) {
	for _, c := range []config{{n: 0, steps: 2}, {n: -1, steps: 2}, {n: 2, steps: 0}, {n: 2, steps: -3}} {
		c.noise, c.lr, c.seed, c.quiet = 0.005, 0.03, 1, true
		want := fmt.Sprintf("-n %d: want at least 1 star", c.n)
		if c.n > 0 {
			want = fmt.Sprintf("-steps %d: want at least 1 step", c.steps)
		}
		_, err := run(context.Background(), c, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("-n %d -steps %d: error %v, want %q", c.n, c.steps, err, want)
		}
	}
}

// TestBadFlags checks that flags run cannot use are refused before any
// work, naming the flag: sizes below 1, rates and deviations that are
// not finite or are negative, and -plot (-weights) files that cannot be
// written (they failed after the whole fit, or gave the solver's error
// about an empty ensemble, or ran fit's default steps for -steps 0).
func TestBadFlags(t *testing.T) {
	good := config{n: 2, steps: 2, noise: 0.005, lr: 0.03, seed: 1, quiet: true}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		set  func(c *config)
		want string
	}{
		{"lr -1", func(c *config) { c.lr = -1 }, "-lr -1"},
		{"noise NaN", func(c *config) { c.noise = math.NaN() }, "-noise NaN"},
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
