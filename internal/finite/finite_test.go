package finite

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFirst checks First against a plain scan, for
// lengths around its blocks, with NaN, +Inf and −Inf at every kind of
// position and finite values of every magnitude (±0, subnormals, the
// largest).
func TestFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 7))
	finite := []float64{0, math.Copysign(0, -1), 1, -2.5, math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1e300}
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	want := func(x []float64) int {
		for i, v := range x {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return i
			}
		}
		return -1
	}
	for _, n := range []int{0, 1, 3, 4, 5, 63, 64, 65, 127, 128, 129, 300} {
		for trial := 0; trial < 40; trial++ {
			x := make([]float64, n)
			for i := range x {
				x[i] = finite[rng.IntN(len(finite))]
			}
			if n > 0 && trial > 0 {
				for range 1 + rng.IntN(3) {
					x[rng.IntN(n)] = bad[rng.IntN(len(bad))]
				}
			}
			if got, w := First(x), want(x); got != w {
				t.Errorf("n=%d trial %d: First = %d, want %d", n, trial, got, w)
			}
		}
	}
}

// TestFirstEveryPosition checks First against a test of
// each value: every length up to 130 (two blocks and a part), every position of the first NaN,
// +Inf or −Inf, with finite values of every size (±MaxFloat64, the
// smallest subnormal, −0) around it.
func TestFirstEveryPosition(t *testing.T) {
	vals := []float64{1, -0.0, math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 3.5e-300, -7}
	want := func(x []float64) int {
		for i, v := range x {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return i
			}
		}
		return -1
	}
	for n := range 131 {
		x := make([]float64, n)
		for i := range x {
			x[i] = vals[i%len(vals)]
		}
		if got := First(x); got != -1 {
			t.Fatalf("n = %d, all finite: got %d", n, got)
		}
		for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			for at := range n {
				y := slices.Clone(x)
				y[at] = bad
				if at+2 < n {
					y[at+2] = math.NaN() // a later one is not reported
				}
				if got, w := First(y), want(y); got != w || got != at {
					t.Errorf("n = %d, %v at %d: got %d, want %d", n, bad, at, got, w)
				}
			}
		}
	}
}
