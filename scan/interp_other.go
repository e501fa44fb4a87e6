//go:build !amd64 || purego

package scan

// haveAVX is false: InterpTimes runs in Go.
const haveAVX = false

func interpTimesAVX(dst, y, w, ts *float64, nt int, t, h float64, d, m int) {
	panic("scan: no AVX")
}

func addPowersAVX(lane, gs, ts *float64, ns int, t, h float64, d, m int) {
	panic("scan: no AVX")
}

func coefRowsAVX(acc, gb, scr, bar, ts *float64, col, lo, hi *int, t, h *float64, k0, k1, bs, d, terms int, scale float64) {
	panic("scan: no AVX")
}

func addRowsAVX(lam, bar *float64, col, lo, hi *int, k0, k1, bs, d int, scale float64) {
	panic("scan: no AVX")
}

func addRowsGBAVX(lam, gb *float64, lo, hi *int, k0, k1, d int) { panic("scan: no AVX") }

func scatterColAVX(dst, src *float64, n, stride int) { panic("scan: no AVX") }

func prefetchSpans(base *float64, off, lines *int, n int) {}

func gatherRows4AVX(dst, c0, c1, c2, c3 *float64, n, stride int) { panic("scan: no AVX") }

func coefLaneAVX(wb *[]float64, i int, gb, ys, ts, scr *float64, n int, t, h float64, d, terms int, scale float64) {
	panic("scan: no AVX")
}

func addLaneAVX(lam *[]float64, i int, ys *float64, n, d int, scale float64) { panic("scan: no AVX") }

func coefLanesAVX(wb *[]float64, gb, bar, ts, scr *float64, perm, lo, hi *int, t, h *float64, m, cs, d, terms, keep int, scale float64) {
	panic("scan: no AVX")
}
