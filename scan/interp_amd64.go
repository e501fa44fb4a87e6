//go:build !purego

package scan

import "github.com/gradsolve-go/gradsolve/tape"

// interpTimesAVX is InterpTimes' kernel (interp_amd64.s): nt save times,
// d components, m terms.
//
//go:noescape
func interpTimesAVX(dst, y, w, ts *float64, nt int, t, h float64, d, m int)

// haveAVX reports whether InterpTimes may use its AVX kernel: where
// tape's kernels use AVX2.
var haveAVX = tape.AVX2()

// addPowersAVX is addPowersTimes' kernel (interp_amd64.s): ns save times,
// d components, m ≥ 1 terms.
//
//go:noescape
func addPowersAVX(lane, gs, ts *float64, ns int, t, h float64, d, m int)

// coefRowsAVX and addRowsAVX are coefBar's and addRow's kernels for four
// lanes at a time (rows_amd64.s). coefRowsAVX's acc holds
// coefRowsTerms(terms)·d·4 values and scr coefRowsScratch(d, terms).
//
//go:noescape
func coefRowsAVX(acc, gb, scr, bar, ts *float64, col, lo, hi *int, t, h *float64, k0, k1, bs, d, terms int, scale float64)

//go:noescape
func addRowsAVX(lam, bar *float64, col, lo, hi *int, k0, k1, bs, d int, scale float64)

// addRowsGBAVX is addRowRows' kernel where coefRowsAVX kept the four
// lanes' cotangents (rows_amd64.s).
//
//go:noescape
func addRowsGBAVX(lam, gb *float64, lo, hi *int, k0, k1, d int)

// scatterColAVX is ScatterCol's kernel (rows_amd64.s).
//
//go:noescape
func scatterColAVX(dst, src *float64, n, stride int)

// prefetchSpans prefetches lines[q] cache lines from base[off[q]] on,
// for q < n (rows_amd64.s).
//
//go:noescape
func prefetchSpans(base *float64, off, lines *int, n int)

// gatherRows4AVX is GatherRows' kernel for four columns of n lanes, n a
// multiple of 4 (rows_amd64.s).
//
//go:noescape
func gatherRows4AVX(dst, c0, c1, c2, c3 *float64, n, stride int)

// coefLaneAVX and addLaneAVX are coefBar's and addRow's kernels for one
// lane whose cotangents are in the saves' own layout (rows_amd64.s): wb
// and lam point to the first slice header of the columns (w̄, λ), i is the
// lane; d a multiple of 4, terms 1…8, n ≥ 1.
//
//go:noescape
func coefLaneAVX(wb *[]float64, i int, gb, ys, ts, scr *float64, n int, t, h float64, d, terms int, scale float64)

//go:noescape
func addLaneAVX(lam *[]float64, i int, ys *float64, n, d int, scale float64)

// coefLanesAVX runs coefLaneAVX over the lanes of a row (rows_amd64.s).
//
//go:noescape
func coefLanesAVX(wb *[]float64, gb, bar, ts, scr *float64, perm, lo, hi *int, t, h *float64, m, cs, d, terms, keep int, scale float64)
