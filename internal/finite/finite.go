// Package finite finds non-finite values (NaN, ±Inf) in arrays of
// float64, at the rate the array's memory delivers them: the one scan
// behind the input checks of tape, ode and fit.
package finite

import "math"

// First returns the index of the first NaN or ±Inf of x, or −1 if every
// value is finite. It reads blocks of 64 values through sums of x·0 (0
// for a finite x, NaN for a NaN or an infinity), in four independent
// chains, and looks for the value itself only in a block whose sum is
// not 0. It allocates nothing; its cost is one read of x.
func First(x []float64) int {
	const block = 64
	for lo := 0; lo < len(x); lo += block {
		b := x[lo:min(lo+block, len(x))]
		var s0, s1, s2, s3 float64
		i := 0
		for ; i+4 <= len(b); i += 4 {
			v := b[i : i+4 : i+4]
			s0 += v[0] * 0
			s1 += v[1] * 0
			s2 += v[2] * 0
			s3 += v[3] * 0
		}
		for ; i < len(b); i++ {
			s0 += b[i] * 0
		}
		if s0+s1+s2+s3 == 0 {
			continue
		}
		for i, v := range b {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return lo + i
			}
		}
	}
	return -1
}
