package main

import (
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/bench/scaleout"
)

// TestRun prints the tables for 1 and 2 hosts and checks that every row is
// there and that the closed form and the simulation agree.
func TestRun(t *testing.T) {
	var b strings.Builder
	c := config{hosts: []int{1, 2}, n: 1 << 24, shared: 1000, lorenzMS: 1.791, neural: 100,
		cluster: scaleout.Cluster{Net: scaleout.DefaultNet, NVLink: scaleout.DefaultNVLink}}
	if err := run(c, &b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Lorenz-cost field", "Neural field", "| 1 | 8 | 2^21 |", "| 2 | 16 | 2^20 |", "fixed-point (µs)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "largest difference 0.") {
		t.Errorf("closed form and simulation more than 1%% apart:\n%s", out)
	}
}
