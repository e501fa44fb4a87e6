package scaleout

import (
	"math"
	"math/big"
)

// limbs is the number of 32-bit fixed-point limbs of a value in the
// FixedPoint reduction: a value v of a component whose largest magnitude
// is below 2^e becomes trunc(|v|·2^(96−e)), split into three limbs of 32
// bits carrying v's sign. A sum of up to 2^20 limbs stays below 2^52, so
// the limbs add exactly as float64 values (as int64 values on a GPU).
const (
	limbs    = 3
	limbBits = 32
	maxLimbs = 1 << 20 // leaves whose limbs can be added exactly
)

// pairwise sets dst to the fixed-tree sum of vs: the sum of the first half
// plus the sum of the second half, recursively, the split at the largest
// power of two below len(vs). For a power-of-two count that is the sum of
// a perfect binary tree over the indices, the same whoever computes which
// subtree. dst must not alias any of vs.
func pairwise(dst []float64, vs [][]float64) {
	switch len(vs) {
	case 0:
		clear(dst)
		return
	case 1:
		copy(dst, vs[0])
		return
	}
	h := 1
	for 2*h < len(vs) {
		h *= 2
	}
	right := make([]float64, len(dst))
	pairwise(dst, vs[:h])
	pairwise(right, vs[h:])
	for i := range dst {
		dst[i] += right[i]
	}
}

// exponent returns e such that every |v| with |v| ≤ max is below 2^e (0
// for max == 0).
func exponent(max float64) int {
	if max == 0 {
		return 0
	}
	_, e := math.Frexp(max)
	return e
}

// addLimbs adds the limbs of v relative to 2^e to dst[0:limbs], most
// significant first. The conversion truncates toward zero; every step is
// exact in float64.
func addLimbs(dst []float64, v float64, e int) {
	x := math.Trunc(math.Ldexp(math.Abs(v), limbs*limbBits-e)) // < 2^96, integral
	for k := 0; k < limbs; k++ {
		sh := (limbs - 1 - k) * limbBits
		l := math.Floor(math.Ldexp(x, -sh))
		x -= math.Ldexp(l, sh)
		if v < 0 {
			l = -l
		}
		dst[k] += l
	}
}

// fromLimbs returns the float64 nearest to (Σ_k l[k]·2^(32·(limbs−1−k)))·2^(e−96),
// rounding once. The limbs are integers below 2^53 in magnitude.
func fromLimbs(l []float64, e int) float64 {
	var acc, t big.Int
	for k := 0; k < limbs; k++ {
		acc.Lsh(&acc, limbBits)
		t.SetInt64(int64(l[k]))
		acc.Add(&acc, &t)
	}
	var f big.Float
	f.SetInt(&acc) // exact: the precision grows to the integer's length
	f.SetMantExp(&f, e-limbs*limbBits)
	v, _ := f.Float64()
	return v
}

// FixedPointSum returns what the FixedPoint reduction yields for leaves
// ([K][S]): per component c, the largest magnitude fixes 2^e above every
// leaf, each leaf is truncated to 96 bits below 2^e, the truncated values
// are added exactly and the sum is rounded once to the nearest float64.
// The result does not depend on the order of the leaves or on how they are
// grouped. It panics if K > 2^20. Leaves must be finite.
func FixedPointSum(leaves [][]float64) []float64 {
	if len(leaves) > maxLimbs {
		panic("scaleout: FixedPointSum: more than 2^20 leaves")
	}
	if len(leaves) == 0 {
		return nil
	}
	s := len(leaves[0])
	out := make([]float64, s)
	l := make([]float64, limbs)
	for c := range out {
		mx := 0.0
		for _, v := range leaves {
			mx = math.Max(mx, math.Abs(v[c]))
		}
		e := exponent(mx)
		clear(l)
		for _, v := range leaves {
			addLimbs(l, v[c], e)
		}
		out[c] = fromLimbs(l, e)
	}
	return out
}

// PairwiseSum returns the fixed-tree sum of leaves ([K][S]) that Gather and
// FixedTree yield when K and the number of GPUs are powers of two.
func PairwiseSum(leaves [][]float64) []float64 {
	if len(leaves) == 0 {
		return nil
	}
	out := make([]float64, len(leaves[0]))
	pairwise(out, leaves)
	return out
}
