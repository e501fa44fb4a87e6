package main

import (
	"io"
	"math"
	"strings"
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

// TestBadFlags checks that -n below 1 and a -T that is not a positive
// number are refused naming the flag (-n -1 panicked in make; -n 0 and
// -T 0 gave the solver's errors about an empty ensemble and span).
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		c    config
		want string
	}{
		{config{n: 0, T: 1.6}, "-n 0"},
		{config{n: -1, T: 1.6}, "-n -1"},
		{config{n: 2, T: 0}, "-T 0"},
		{config{n: 2, T: -1}, "-T -1"},
		{config{n: 2, T: math.NaN()}, "-T NaN"},
	} {
		if _, err := run(tc.c, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %s", tc.c, err, tc.want)
		}
	}
	if err := (config{n: 2, T: 1}).check([]string{"extra"}); err == nil {
		t.Error("a stray argument was accepted")
	}
}
