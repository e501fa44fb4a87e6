package main

import (
	"github.com/gradsolve-go/gradsolve/bench/scaleout"
	"math"
	"strings"
	"testing"
)

// TestRun prints the tables for 1 and 2 hosts and checks that every row is
// there and that the closed form and the simulation agree.
func TestRun(t *testing.T) {
	var b strings.Builder
	c := config{hosts: []int{1, 2}, n: 1 << 24, shared: 1000, lorenzMS: 1.791, neural: 100,
		cluster: scaleout.Cluster{GPUsPerHost: 8, Net: scaleout.DefaultNet, NVLink: scaleout.DefaultNVLink}}
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

// TestBadFlags checks that flags run cannot use are refused before any
// work, naming the flag: sizes below 1, rates and deviations that are
// not finite or are negative, and -plot (-weights) files that cannot be
// written (they failed after the whole fit, or gave the solver's error
// about an empty ensemble, or ran fit's default steps for -steps 0).
func TestBadFlags(t *testing.T) {
	good := config{hosts: []int{1}, n: 1 << 20, shared: 1000, lorenzMS: 1.791, neural: 100, cluster: scaleout.Cluster{GPUsPerHost: 8, Net: scaleout.DefaultNet, NVLink: scaleout.DefaultNVLink}}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		set  func(c *config)
		want string
	}{
		{"n 0", func(c *config) { c.n = 0 }, "-n 0"},
		{"gpus 0", func(c *config) { c.cluster.GPUsPerHost = 0 }, "-gpus 0"},
		{"shared -1", func(c *config) { c.shared = -1 }, "-shared -1"},
		{"lorenz-ms NaN", func(c *config) { c.lorenzMS = math.NaN() }, "-lorenz-ms NaN"},
		{"call-us -1", func(c *config) { c.cluster.CallOverhead = -1 }, "-call-us -1"},
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
