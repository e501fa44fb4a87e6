package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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
