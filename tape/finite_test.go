package tape

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFirstNonFinite checks firstNonFinite against a plain scan, for
// lengths around its blocks, with NaN, +Inf and −Inf at every kind of
// position and finite values of every magnitude (±0, subnormals, the
// largest).
func TestFirstNonFinite(t *testing.T) {
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
			if got, w := firstNonFinite(x), want(x); got != w {
				t.Errorf("n=%d trial %d: firstNonFinite = %d, want %d", n, trial, got, w)
			}
		}
	}
}
