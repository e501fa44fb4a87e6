package kernelgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen/kerneltest"
)

// brusselatorPattern returns the structural pattern of the 1-D
// Brusselator's Jacobian (problems.Brusselator(cells): u_i and v_i
// interleaved at 2i and 2i + 1, each coupled to its own cell's two
// species and to its neighbours' same species; d = 2·cells, row major).
func brusselatorPattern(cells int) []bool {
	d := 2 * cells
	nz := make([]bool, d*d)
	for i := range cells {
		u, v := 2*i, 2*i+1
		for _, r := range []int{u, v} {
			nz[r*d+u], nz[r*d+v] = true, true
			if i > 0 {
				nz[r*d+r-2] = true
			}
			if i < cells-1 {
				nz[r*d+r+2] = true
			}
		}
	}
	return nz
}

// TestWideSparseBand checks which matrices past WideSparseMaxDim rows
// take the sparse form (a thin pattern: the Brusselator's band at d =
// 64 and 128; not a dense 64×64, nor a random quarter of the entries at
// d = 48, nor past WideSparseBandDim) and logs the work of the
// Brusselator's factor and solves in either form.
func TestWideSparseBand(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(48, 8))
	full := func(d int) []bool {
		nz := make([]bool, d*d)
		for q := range nz {
			nz[q] = q/d == q%d || q%d == 0 || q/d == 0 // an arrow: the fill makes it dense
		}
		return nz
	}
	quarter := func(d int) []bool {
		nz := make([]bool, d*d)
		for q := range nz {
			nz[q] = q/d == q%d || r.IntN(4) == 0
		}
		return nz
	}
	for _, c := range []struct {
		name   string
		d      int
		nz     []bool
		sparse bool
	}{
		{"brusselator-32", 64, brusselatorPattern(32), true},
		{"brusselator-64", 128, brusselatorPattern(64), true},
		{"brusselator-16", 32, brusselatorPattern(16), true},
		{"arrow-64", 64, full(64), false},
		{"quarter-48", 48, quarter(48), false},
		{"brusselator-128", 256, brusselatorPattern(128), false},
	} {
		_, _, ok := wideSparseLU(c.nz, c.d)
		if ok != c.sparse {
			t.Errorf("%s: sparse form %v, want %v", c.name, ok, c.sparse)
		}
		u, p := wideSparseWork(luPattern(c.nz, c.d), c.d)
		nnz := 0
		for _, x := range c.nz {
			if x {
				nnz++
			}
		}
		t.Logf("%s (d = %d): %d entries of W; sparse factor %d updates, a solve %d products; dense %d and %d", c.name, c.d, nnz, u, p, (c.d-1)*c.d*(2*c.d-1)/6, c.d*(c.d-1))
	}
}

// TestWideSparseLUBand is TestWideSparseLU at d = 64 on the Brusselator's
// pattern (a matrix past WideSparseMaxDim rows in the sparse form): a
// dominant diagonal (the sparse path to its end), a row below the
// diagonal larger at a late step (the dense steps from there) and a NaN
// entry, on a simulated warp of 32 lanes (and in groups of 16: the first
// two): factors, pivots and solutions the dense form's value for value,
// the solutions' bits too (the sequential form, wideSeqLU).
func TestWideSparseLUBand(t *testing.T) {
	t.Parallel()
	cc := kerneltest.GXX(t)
	r := rand.New(rand.NewPCG(48, 64))
	const d = 64
	nz := brusselatorPattern(d / 2)
	m := make([]float64, d*d)
	for c := range d {
		sum := 0.0
		for row := range d {
			if row != c && nz[row*d+c] {
				m[row*d+c] = 2*r.Float64() - 1
				sum += math.Abs(m[row*d+c])
			}
		}
		m[c*d+c] = -(2 + sum)
	}
	late := append([]float64(nil), m...)
	late[(d-1)*d+d-3] = 1e3 * math.Abs(m[(d-3)*d+d-3]) // row 63 beats the diagonal at step 61
	nan := append([]float64(nil), m...)
	nan[5*d+4] = math.NaN()
	for _, c := range []struct {
		name   string
		m      []float64
		sparse bool
		lanes  int
	}{{"dominant", m, true, 32}, {"pivot-late", late, false, 32}, {"nan", nan, false, 32}, {"dominant", m, true, 16}, {"pivot-late", late, false, 16}} {
		t.Run(fmt.Sprintf("%s/lanes=%d", c.name, c.lanes), func(t *testing.T) {
			t.Parallel()
			b := make([]float64, d)
			for k := range b {
				b[k] = r.NormFloat64()
			}
			b[1] = 0 // a zero right-hand side component
			out := runWideSparseLU(t, cc, d, nz, c.m, b, -0.5, c.lanes)
			want, got := out["dense"], out["sparse"]
			if mark := got["f"][d*d+d-1] == d-0.5; mark != c.sparse {
				t.Errorf("sparse path to its end %v, want %v", mark, c.sparse)
			}
			zeros := 0
			for _, part := range []string{"f", "x", "xt"} {
				for k := range want[part] {
					x, y := got[part][k], want[part][k]
					if part != "f" && math.Float64bits(x) != math.Float64bits(y) && !(math.IsNaN(x) && math.IsNaN(y)) {
						t.Errorf("%s[%d]: sparse %v, dense %v: other bits", part, k, x, y)
					}
					if part == "f" && k >= d*d {
						x, y = math.Trunc(x), math.Trunc(y)
					}
					if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
						t.Fatalf("%s[%d]: sparse %v, dense %v", part, k, x, y)
					}
					if math.Float64bits(x) != math.Float64bits(y) && x == y {
						zeros++
					}
				}
			}
			if c.name == "pivot-late" && math.Trunc(got["f"][d*d+d-3]) != d-1 {
				t.Errorf("pivot of step %d: %v, want row %d", d-3, got["f"][d*d+d-3], d-1)
			}
			t.Logf("zeros of another sign: %d", zeros)
		})
	}
}
