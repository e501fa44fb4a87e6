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
