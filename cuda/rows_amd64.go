//go:build !purego

package cuda

import "github.com/gradsolve-go/gradsolve/tape"

// haveAVX reports whether scatterRows may use its AVX kernels: where
// tape's kernels use AVX2.
var haveAVX = tape.AVX2()

// rows2AVX, rows3AVX and rows4AVX are scatterRows' transposes of w = 2,
// 3 and 4 columns c0… of n consecutive trajectories (n a multiple of 4)
// into dst's rows, with the columns' sums in sums' four lanes
// (rows_amd64.s).
//
//go:noescape
func rows2AVX(dst, c0, c1 *float64, n int, sums *[4]float64)

//go:noescape
func rows3AVX(dst, c0, c1, c2 *float64, n int, sums *[4]float64)

//go:noescape
func rows4AVX(dst, c0, c1, c2, c3 *float64, n int, sums *[4]float64)

// countsAVX and rejectedAVX are stripCounts' and stripRejected's loops
// over n trajectories, a multiple of 4 (rows_amd64.s); lens may be nil,
// and rejectedAVX needs 0 ≤ e1 < 2^32.
//
//go:noescape
func countsAVX(accepted, lens *int, acc *int32, n int) (longest int32)

//go:noescape
func rejectedAVX(rejected, evals, accepted *int, rej *int32, n, e0, e1 int)

// orAVX is orInt32's loop over n values, a multiple of 16 (rows_amd64.s).
//
//go:noescape
func orAVX(x *int32, n int) int32

// cols2AVX, cols3AVX and cols4AVX are gatherRows' transposes of n
// consecutive rows of w = 2, 3 and 4 values src (n a multiple of 4) into
// the columns c0…, with the values' sums in sums' four lanes
// (rows_amd64.s).
//
//go:noescape
func cols2AVX(c0, c1, src *float64, n int, sums *[4]float64)

//go:noescape
func cols3AVX(c0, c1, c2, src *float64, n int, sums *[4]float64)

//go:noescape
func cols4AVX(c0, c1, c2, c3, src *float64, n int, sums *[4]float64)
