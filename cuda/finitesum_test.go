package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/cputime"
)

// bitsFinite is the finite check the copy loops made before sumFinite:
// each value's exponent bits (the reference of TestFiniteSums and the
// "bits" rows of BenchmarkFiniteChecks).
func bitsFinite(x []float64) bool {
	var bad uint64
	for _, v := range x {
		bad |= math.Float64bits(v)&expBits + expOne
	}
	return bad>>63 == 0
}

// scatterRowsBits is scatterRows' loop for three components as it was
// before sumFinite (the exponent bits of every value OR-ed as it is
// copied): BenchmarkFiniteChecks' old form.
func scatterRowsBits(dst []float64, src []float64, n, q0 int, g []int) (finite bool) {
	var bad uint64
	m := len(g)
	d := dst[g[0]*3 : (g[0]+m)*3]
	c0, c1, c2 := src[q0:q0+m], src[n+q0:n+q0+m], src[2*n+q0:2*n+q0+m]
	for j := range c0 {
		x, y, z := c0[j], c1[j], c2[j]
		bad |= (math.Float64bits(x)&expBits + expOne) | (math.Float64bits(y)&expBits + expOne) | (math.Float64bits(z)&expBits + expOne)
		r := d[3*j : 3*j+3 : 3*j+3]
		r[0], r[1], r[2] = x, y, z
	}
	return bad>>63 == 0
}

// TestFiniteSums checks the copy loops whose finite check is a sum of
// the values (sumFinite: scatterRows, scatterCols, gatherRows,
// gatherCols, copyFinite64) against each value's exponent bits
// (bitsFinite) and their copies against the values, for widths 1 to 5,
// consecutive trajectories and a permutation, on values whose sums stay
// finite, values near math.MaxFloat64 whose sums overflow to ±Inf or to
// a NaN (all of them finite: the exact check behind the sum must answer),
// and a NaN or an infinity at a random place, inside or outside the
// launch's trajectories.
func TestFiniteSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 1))
	const n = 700 // more than a copyRun of values at width 1
	kinds := []string{"normal", "huge", "huge-mixed", "nan", "+inf", "-inf"}
	value := func(kind string) float64 {
		switch kind {
		case "huge":
			return math.MaxFloat64 * (0.5 + 0.5*rng.Float64())
		case "huge-mixed":
			return math.Copysign(math.MaxFloat64*(0.5+0.5*rng.Float64()), rng.Float64()-0.5)
		}
		return rng.NormFloat64()
	}
	special := map[string]float64{"nan": math.NaN(), "+inf": math.Inf(1), "-inf": math.Inf(-1)}
	same := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }
	for _, w := range []int{1, 2, 3, 4, 5} {
		for _, consec := range []bool{true, false} {
			for _, kind := range kinds {
				for rep := range 4 {
					name := fmt.Sprintf("w %d, consecutive %t, %s, %d", w, consec, kind, rep)
					q0, m := 5, n-40
					g := make([]int, m)
					if consec {
						for j := range g {
							g[j] = 20 + j
						}
					} else {
						g = rng.Perm(n)[:m]
					}
					// Component-major over the launch of n, the launch's
					// trajectories q0…q0+m−1 copied.
					src := make([]float64, w*n)
					for k := range src {
						src[k] = value(kind)
					}
					if x, ok := special[kind]; ok {
						src[rng.IntN(len(src))] = x
					}
					var copied []float64
					for c := range w {
						copied = append(copied, src[c*n+q0:c*n+q0+m]...)
					}
					want := bitsFinite(copied)
					dst := make([]float64, w*n)
					var got bool
					if consec {
						got = scatterRows(dst, w, reals{f64: src}, n, q0, g)
					} else {
						got = scatterCols(dst, w, reals{f64: src}, n, q0, g)
					}
					if got != want {
						t.Errorf("%s: scatter reports finite %t, want %t", name, got, want)
					}
					for c := range w {
						for j, i := range g {
							if !same(dst[i*w+c], src[c*n+q0+j]) {
								t.Fatalf("%s: scatter's row %d component %d = %v, want %v", name, i, c, dst[i*w+c], src[c*n+q0+j])
							}
						}
					}
					// Back from rows to the launch's columns.
					back := make([]float64, w*n)
					q1 := q0 + m
					var rowsIn []float64
					if consec && w <= 4 {
						got = gatherRows(back, n, dst, w, g[0]-q0, q0, q1)
					} else {
						gl := make([]int, n) // launch trajectory q is trajectory gl[q]
						copy(gl[q0:], g)
						got = gatherCols(reals{f64: back}, n, dst, w, gl, q0, q1)
					}
					for c := range w {
						rowsIn = append(rowsIn, back[c*n+q0:c*n+q1]...)
						for q := q0; q < q1; q++ {
							if !same(back[c*n+q], src[c*n+q]) {
								t.Fatalf("%s: gathered component %d of %d = %v, want %v", name, c, q, back[c*n+q], src[c*n+q])
							}
						}
					}
					if want := bitsFinite(rowsIn); got != want {
						t.Errorf("%s: gather reports finite %t, want %t", name, got, want)
					}
					// copyFinite64 of the whole source.
					out := make([]float64, len(src))
					if got, want := copyFinite64(out, src), bitsFinite(src); got != want {
						t.Errorf("%s: copyFinite64 reports finite %t, want %t", name, got, want)
					}
					for k := range src {
						if !same(out[k], src[k]) {
							t.Fatalf("%s: copyFinite64's value %d = %v, want %v", name, k, out[k], src[k])
						}
					}
				}
			}
		}
	}
}

// BenchmarkFiniteChecks times a result array's copy from the device's
// component-major columns into the caller's rows (three components, the
// launch's consecutive trajectories: scatterRows) with the finite check
// made from each value's exponent bits ("bits", the form before
// sumFinite) and from the columns' sums ("sums", the form now), and the
// copy without a check ("none", the floor), over n trajectories, one
// after the other in one run. cpu-ms/op is the process's CPU time a copy
// of three arrays (a Lorenz call's Y, dL/dy0 and dL/dp).
//
//	go test ./cuda -run '^$' -bench FiniteChecks -benchtime 2000x -count 6 -cpu 1
func BenchmarkFiniteChecks(b *testing.B) {
	for _, n := range []int{1 << 15, 1 << 18} {
		rng := rand.New(rand.NewPCG(1, 2))
		var src, dst [3][]float64
		for a := range src {
			src[a], dst[a] = make([]float64, 3*n), make([]float64, 3*n)
			for k := range src[a] {
				src[a][k] = rng.NormFloat64()
			}
		}
		g := make([]int, n)
		for j := range g {
			g[j] = j
		}
		for _, form := range []string{"bits", "sums", "none"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, form), func(b *testing.B) {
				c0 := cputime.Process()
				for b.Loop() {
					for a := range src {
						switch form {
						case "bits":
							scatterRowsBits(dst[a], src[a], n, 0, g)
						case "sums":
							scatterRows(dst[a], 3, reals{f64: src[a]}, n, 0, g)
						case "none":
							scatterRowsNone(dst[a], src[a], n)
						}
					}
				}
				b.ReportMetric(float64(cputime.Process()-c0)/1e6/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// scatterRowsNone is scatterRows' loop for three components without a
// finite check: BenchmarkFiniteChecks' floor.
func scatterRowsNone(dst, src []float64, n int) {
	c0, c1, c2 := src[:n], src[n:2*n], src[2*n:3*n]
	d := dst[:3*n]
	for j := range c0 {
		r := d[3*j : 3*j+3 : 3*j+3]
		r[0], r[1], r[2] = c0[j], c1[j], c2[j]
	}
}

// TestScatterRowsAVX checks scatterRows' AVX kernels (rowsAVX, four
// trajectories a round, the rest in Go), and gatherRows' the other way
// (colsAVX), against their Go loops (useAVX false) and against the
// columns themselves, bit for bit (NaN payloads,
// −0 and subnormals included), and their finite reports against each
// value's exponent bits, for widths 2 to 4, launches of every length
// around the kernels' rounds of four, at offsets q0 in the launch and g[0]
// in the rows, on ordinary values, values near math.MaxFloat64 whose sums
// overflow, and a non-finite value at each position of the shorter
// launches. Without AVX (haveAVX false) it checks the Go loops alone.
func TestScatterRowsAVX(t *testing.T) {
	rng := rand.New(rand.NewPCG(48, 5))
	specials := []float64{math.NaN(), math.Float64frombits(0x7ff8_0000_dead_beef), math.Inf(1), math.Inf(-1),
		math.Copysign(0, -1), math.SmallestNonzeroFloat64, math.MaxFloat64}
	modes := []bool{false}
	if haveAVX {
		modes = append(modes, true)
	}
	defer func(u bool) { useAVX = u }(useAVX)
	for _, w := range []int{2, 3, 4} {
		for _, m := range []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 31, 64, 1023, 1026} {
			for _, c := range []struct {
				q0, g0 int
				kind   string
				at     int // the position (of w·m in the launch, component-major) of the special, if kind is "special"
			}{{0, 0, "normal", 0}, {5, 3, "normal", 0}, {1, 0, "huge", 0}, {2, 7, "special", rng.IntN(w * m)}, {0, 1, "special", w*m - 1}} {
				n := c.q0 + m + 2
				src := make([]float64, w*n)
				for k := range src {
					src[k] = rng.NormFloat64()
					if c.kind == "huge" {
						src[k] = math.MaxFloat64 * (0.5 + 0.5*rng.Float64())
					}
				}
				if c.kind == "special" {
					comp, j := c.at/m, c.at%m
					src[comp*n+c.q0+j] = specials[rng.IntN(len(specials))]
				}
				g := make([]int, m)
				for j := range g {
					g[j] = c.g0 + j
				}
				var copied []float64
				for comp := range w {
					copied = append(copied, src[comp*n+c.q0:comp*n+c.q0+m]...)
				}
				want := bitsFinite(copied)
				for _, avx := range modes {
					useAVX = avx
					name := fmt.Sprintf("w %d, m %d, q0 %d, g0 %d, %s at %d, AVX %t", w, m, c.q0, c.g0, c.kind, c.at, avx)
					dst := make([]float64, (c.g0+m+1)*w)
					for k := range dst {
						dst[k] = -7 // outside the rows: left as it is
					}
					if got := scatterRows(dst, w, reals{f64: src}, n, c.q0, g); got != want {
						t.Errorf("%s: finite %t, want %t", name, got, want)
					}
					for k, x := range dst {
						i, comp := k/w, k%w
						y := -7.0
						if i >= c.g0 && i < c.g0+m {
							y = src[comp*n+c.q0+i-c.g0]
						}
						if math.Float64bits(x) != math.Float64bits(y) {
							t.Fatalf("%s: dst[%d] = %v (%#x), want %v (%#x)", name, k, x, math.Float64bits(x), y, math.Float64bits(y))
						}
					}
					// Back from the rows to the launch's columns (gatherRows).
					back := make([]float64, w*n)
					for k := range back {
						back[k] = -7
					}
					if got := gatherRows(back, n, dst, w, c.g0-c.q0, c.q0, c.q0+m); got != want {
						t.Errorf("%s: gather reports finite %t, want %t", name, got, want)
					}
					for k, x := range back {
						y := -7.0
						if q := k % n; q >= c.q0 && q < c.q0+m {
							y = src[k]
						}
						if math.Float64bits(x) != math.Float64bits(y) {
							t.Fatalf("%s: gathered back[%d] = %v (%#x), want %v (%#x)", name, k, x, math.Float64bits(x), y, math.Float64bits(y))
						}
					}
				}
			}
		}
	}
}
