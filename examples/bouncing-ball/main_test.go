package main

import (
	"io"
	"testing"
)

// TestBouncingBall checks that every ball's restitution coefficient is
// recovered to 1e-8 after several bounces.
func TestBouncingBall(t *testing.T) {
	o, err := run(config{n: 8, T: 1.6, seed: 1}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.worst > 1e-8 {
		t.Errorf("largest error of e %.2g, want at most 1e-8", o.worst)
	}
	for i, b := range o.bounces {
		if b < 2 {
			t.Errorf("ball %d bounced %d times, want several", i, b)
		}
	}
}
