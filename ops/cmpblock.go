package ops

import "math"

// Block kernels of the comparisons, Min and Max: one loop each, with the
// comparison written out, so that they cost a fraction of a nanosecond a
// trajectory instead of a function call (the generic map2 kernel). They
// compute exactly their scalar Eval (see compareDef and minMaxDef).

func ltBlock(dst []float64, args [][]float64, _ float64) {
	a, b := args[0][:len(dst)], args[1][:len(dst)]
	for i := range dst {
		dst[i] = 0
		if a[i] < b[i] {
			dst[i] = 1
		}
	}
}

func leBlock(dst []float64, args [][]float64, _ float64) {
	a, b := args[0][:len(dst)], args[1][:len(dst)]
	for i := range dst {
		dst[i] = 0
		if a[i] <= b[i] {
			dst[i] = 1
		}
	}
}

func gtBlock(dst []float64, args [][]float64, _ float64) {
	a, b := args[0][:len(dst)], args[1][:len(dst)]
	for i := range dst {
		dst[i] = 0
		if a[i] > b[i] {
			dst[i] = 1
		}
	}
}

func geBlock(dst []float64, args [][]float64, _ float64) {
	a, b := args[0][:len(dst)], args[1][:len(dst)]
	for i := range dst {
		dst[i] = 0
		if a[i] >= b[i] {
			dst[i] = 1
		}
	}
}

func eqBlock(dst []float64, args [][]float64, _ float64) {
	a, b := args[0][:len(dst)], args[1][:len(dst)]
	for i := range dst {
		dst[i] = 0
		if a[i] == b[i] {
			dst[i] = 1
		}
	}
}

func neBlock(dst []float64, args [][]float64, _ float64) {
	a, b := args[0][:len(dst)], args[1][:len(dst)]
	for i := range dst {
		dst[i] = 0
		if a[i] != b[i] {
			dst[i] = 1
		}
	}
}

// minBlock is tieMin elementwise: x if x <= y or x is NaN, else y.
func minBlock(dst []float64, args [][]float64, _ float64) {
	a, b := args[0][:len(dst)], args[1][:len(dst)]
	for i := range dst {
		x, y := a[i], b[i]
		if x <= y || x != x {
			dst[i] = x
		} else {
			dst[i] = y
		}
	}
}

// maxBlock is tieMax elementwise: x if x >= y or x is NaN, else y.
func maxBlock(dst []float64, args [][]float64, _ float64) {
	a, b := args[0][:len(dst)], args[1][:len(dst)]
	for i := range dst {
		x, y := a[i], b[i]
		if x >= y || x != x {
			dst[i] = x
		} else {
			dst[i] = y
		}
	}
}

// absBlock and sqrtBlock are the kernels of Abs and Sqrt with the
// function inlined (math.Abs and math.Sqrt are intrinsics).
func absBlock(dst []float64, args [][]float64, _ float64) {
	a := args[0][:len(dst)]
	for i := range dst {
		dst[i] = math.Abs(a[i])
	}
}

func sqrtBlock(dst []float64, args [][]float64, _ float64) {
	a := args[0][:len(dst)]
	for i := range dst {
		dst[i] = math.Sqrt(a[i])
	}
}
