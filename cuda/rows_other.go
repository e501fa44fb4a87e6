//go:build !amd64 || purego

package cuda

// haveAVX is false: scatterRows runs in Go.
const haveAVX = false

func rows2AVX(dst, c0, c1 *float64, n int, sums *[4]float64) { panic("cuda: no AVX") }

func rows3AVX(dst, c0, c1, c2 *float64, n int, sums *[4]float64) { panic("cuda: no AVX") }

func rows4AVX(dst, c0, c1, c2, c3 *float64, n int, sums *[4]float64) { panic("cuda: no AVX") }

func countsAVX(accepted, lens *int, acc *int32, n int) (longest int32) { panic("cuda: no AVX") }

func rejectedAVX(rejected, evals, accepted *int, rej *int32, n, e0, e1 int) { panic("cuda: no AVX") }

func orAVX(x *int32, n int) int32 { panic("cuda: no AVX") }

func cols2AVX(c0, c1, src *float64, n int, sums *[4]float64) { panic("cuda: no AVX") }

func cols3AVX(c0, c1, c2, src *float64, n int, sums *[4]float64) { panic("cuda: no AVX") }

func cols4AVX(c0, c1, c2, c3, src *float64, n int, sums *[4]float64) { panic("cuda: no AVX") }
