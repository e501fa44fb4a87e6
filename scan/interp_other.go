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
