package tape

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// kernelValue returns a random argument value, now and then a special
// one (signed zeros, infinities, NaN, huge and subnormal numbers).
func kernelValue(r *rand.Rand) float64 {
	special := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1e300, -1e300, 5e-324, 1e-310}
	if r.IntN(20) == 0 {
		return special[r.IntN(len(special))]
	}
	return 4*r.Float64() - 2
}

func kernelVec(r *rand.Rand, m int) []float64 {
	v := make([]float64, m)
	for i := range v {
		v[i] = kernelValue(r)
	}
	return v
}

// sameBits reports whether a and b are the same float64, any NaN equal
// to any NaN (payloads are not specified).
func sameBits(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || a != a && b != b
}

// TestMatKernel compares the matrix kernel, in assembly and in Go, with
// the ops it fuses computed one at a time (math.FMA, or a rounded product
// then a sum), for every shape of tile and tail: rows 1…9, terms 1…6,
// blocks of 1…80 trajectories, with and without initial values (uniform
// or per trajectory, or uniform and packed).
func TestMatKernel(t *testing.T) {
	defer SetAVX2(SetAVX2(true))
	r := rand.New(rand.NewPCG(1, 2))
	for c := 0; c < 400; c++ {
		k := &matKernel{fma: r.IntN(2) == 0, init: r.IntN(3) > 0, rows: 1 + r.IntN(9), terms: 1 + r.IntN(6)}
		if !k.init {
			k.fma = false // a Dot always starts from its bias
		}
		m := 1 + r.IntN(80)
		name := fmt.Sprintf("fma=%v/init=%v/rows=%d/terms=%d/m=%d", k.fma, k.init, k.rows, k.terms, m)
		coef := make([][]float64, k.rows)
		for i := range coef {
			coef[i] = kernelVec(r, k.terms)
		}
		uni := make([]float64, 3) // something before the coefficients
		k.coef = len(uni)
		k.layout(func(i, j int) { uni = append(uni, coef[i][j]) })
		for i := range k.rows {
			for j := range k.terms {
				if got := k.at(uni[k.coef:], i, j); !sameBits(got, coef[i][j]) {
					t.Fatalf("Case %s: at(%d, %d) = %v, want %v", name, i, j, got, coef[i][j])
				}
			}
		}
		var init, vec [][]float64
		packedBias := r.IntN(2) == 0 // uniform initial values packed in uni
		k.bias = -1
		for range k.rows {
			if packedBias || r.IntN(2) == 0 {
				init = append(init, []float64{kernelValue(r)})
			} else {
				init = append(init, kernelVec(r, m))
			}
		}
		if k.init && packedBias {
			k.bias = len(uni)
			for _, x := range init {
				uni = append(uni, x[0])
			}
		}
		name += fmt.Sprintf("/bias=%d", k.bias)
		for range k.terms {
			vec = append(vec, kernelVec(r, m))
		}
		want := make([][]float64, k.rows)
		for i := range want {
			want[i] = make([]float64, m)
			for l := range want[i] {
				var s float64
				j0 := 0
				switch {
				case !k.init:
					s, j0 = float64(coef[i][0]*vec[0][l]), 1
				case len(init[i]) == 1:
					s = init[i][0]
				default:
					s = init[i][l]
				}
				for j := j0; j < k.terms; j++ {
					if k.fma {
						s = math.FMA(coef[i][j], vec[j][l], s)
					} else {
						s += float64(coef[i][j] * vec[j][l])
					}
				}
				want[i][l] = s
			}
		}
		for _, avx := range []bool{false, true} {
			if avx && !HaveAVX2() {
				continue
			}
			SetAVX2(avx)
			var s [][]float64
			dst := make([][]float64, k.rows)
			for i := range dst {
				dst[i] = make([]float64, m)
				s = append(s, dst[i])
			}
			if k.init && k.bias < 0 {
				s = append(s, init...)
			}
			s = append(s, vec...)
			k.run(s, uni, m)
			for i := range dst {
				for l := range dst[i] {
					if !sameBits(dst[i][l], want[i][l]) {
						t.Fatalf("Case %s avx=%v: row %d lane %d = %v, want %v", name, avx, i, l, dst[i][l], want[i][l])
					}
				}
			}
		}
	}
}

// TestChainKernel compares the chain kernel, in assembly and in Go, with
// its terms added one op at a time: entries of 1…6 terms, values and
// products, added and subtracted, and a last factor, over blocks of 1…37
// trajectories.
func TestChainKernel(t *testing.T) {
	defer SetAVX2(SetAVX2(true))
	r := rand.New(rand.NewPCG(3, 4))
	for c := 0; c < 300; c++ {
		m := 1 + r.IntN(37)
		ne := 1 + r.IntN(5)
		k := &chainKernel{}
		var args [][]float64
		want := make([][]float64, ne)
		for e := range want {
			n := 1 + r.IntN(6)
			k.nterms = append(k.nterms, int32(n))
			want[e] = make([]float64, m)
			for j := 0; j < n; j++ {
				var f uint8
				switch {
				case j > 0 && j == n-1 && r.IntN(3) == 0:
					f |= termScale
				case r.IntN(2) == 0:
					f |= termProd
				}
				if j > 0 && f&termScale == 0 && r.IntN(3) == 0 {
					f |= termNeg
				}
				k.flags = append(k.flags, f)
				a := kernelVec(r, m)
				args = append(args, a)
				var b []float64
				if f&termProd != 0 {
					b = kernelVec(r, m)
					args = append(args, b)
				}
				for l := range want[e] {
					x := a[l]
					if b != nil {
						x = float64(a[l] * b[l])
					}
					switch {
					case j == 0:
						want[e][l] = x
					case f&termScale != 0:
						want[e][l] = float64(want[e][l] * x)
					case f&termNeg != 0:
						want[e][l] -= x
					default:
						want[e][l] += x
					}
				}
			}
		}
		name := fmt.Sprintf("entries=%d/m=%d/flags=%v", ne, m, k.flags)
		for _, avx := range []bool{false, true} {
			if avx && !HaveAVX2() {
				continue
			}
			SetAVX2(avx)
			dst := make([][]float64, ne)
			for e := range dst {
				dst[e] = make([]float64, m)
			}
			k.run(append(append([][]float64(nil), dst...), args...), nil, m)
			for e := range dst {
				for l := range dst[e] {
					if !sameBits(dst[e][l], want[e][l]) {
						t.Fatalf("Case %s avx=%v: entry %d lane %d = %v, want %v", name, avx, e, l, dst[e][l], want[e][l])
					}
				}
			}
		}
	}
}

// TestChainKernelLong compares the chain kernel on long entries (more
// than 2·chainBlock terms: runBlocked's blocks of terms over all the
// trajectories) with its terms added one op at a time, bit for bit: long
// and short entries side by side, values and products, added, subtracted
// and factors anywhere after the first term, a destination that is one of
// its entry's terms' slices, over blocks of 17…300 trajectories.
func TestChainKernelLong(t *testing.T) {
	defer SetAVX2(SetAVX2(true))
	r := rand.New(rand.NewPCG(35, 64))
	lens := []int{1, 5, 2*chainBlock + 1, 3*chainBlock - 1, 700}
	for c := 0; c < 40; c++ {
		m := 17 + r.IntN(284)
		ne := 1 + r.IntN(3)
		k := &chainKernel{}
		var args [][]float64
		want := make([][]float64, ne)
		alias := make([][]float64, ne) // a slice of the entry's terms, or nil
		for e := range want {
			n := lens[r.IntN(len(lens))]
			k.nterms = append(k.nterms, int32(n))
			want[e] = make([]float64, m)
			for j := 0; j < n; j++ {
				var f uint8
				switch {
				case j > 0 && r.IntN(50) == 0:
					f |= termScale
				case r.IntN(2) == 0:
					f |= termProd
				}
				if j > 0 && f&termScale == 0 && r.IntN(3) == 0 {
					f |= termNeg
				}
				k.flags = append(k.flags, f)
				a := kernelVec(r, m)
				args = append(args, a)
				if j == n/2 && r.IntN(2) == 0 {
					alias[e] = a
				}
				var b []float64
				if f&termProd != 0 {
					b = kernelVec(r, m)
					args = append(args, b)
				}
				for l := range want[e] {
					x := a[l]
					if b != nil {
						x = float64(a[l] * b[l])
					}
					switch {
					case j == 0:
						want[e][l] = x
					case f&termScale != 0:
						want[e][l] = float64(want[e][l] * x)
					case f&termNeg != 0:
						want[e][l] -= x
					default:
						want[e][l] += x
					}
				}
			}
		}
		name := fmt.Sprintf("entries=%v/m=%d", k.nterms, m)
		for _, avx := range []bool{false, true} {
			if avx && !HaveAVX2() {
				continue
			}
			SetAVX2(avx)
			in := make([][]float64, len(args))
			for i, a := range args {
				in[i] = append([]float64(nil), a...)
			}
			dst := make([][]float64, ne)
			for e := range dst {
				dst[e] = make([]float64, m)
				if alias[e] != nil {
					for i, a := range args {
						if &a[0] == &alias[e][0] {
							dst[e] = in[i] // written in place
						}
					}
				}
			}
			k.run(append(append([][]float64(nil), dst...), in...), nil, m)
			for e := range dst {
				for l := range dst[e] {
					if !sameBits(dst[e][l], want[e][l]) {
						t.Fatalf("Case %s avx=%v: entry %d lane %d = %v, want %v", name, avx, e, l, dst[e][l], want[e][l])
					}
				}
			}
		}
	}
}

// TestTanhKernel compares the Tanh kernel of the batched activations
// with math.Tanh, bit for bit, over every regime of math.tanh and its
// boundaries (|x| = 0.625, 0.5·MAXLOG), signed zeros, subnormals,
// infinities, NaN and random bit patterns, on blocks of 1…13 values
// (the assembly runs four or eight at a time, Go the rest).
func TestTanhKernel(t *testing.T) {
	defer SetAVX2(SetAVX2(true))
	r := rand.New(rand.NewPCG(7, 8))
	edges := []float64{0, math.Copysign(0, -1), 0.625, 44.014845965556525, 44.01484596555653, 5e-324, 1e-300,
		math.Inf(1), math.Inf(-1), math.NaN(), 1e300, 709.78, 0.34657359027997264, 20}
	var xs []float64
	for _, x := range edges {
		for _, y := range []float64{x, -x, math.Nextafter(x, 0), math.Nextafter(x, math.Inf(1))} {
			xs = append(xs, y, -y)
		}
	}
	for i := 0; i < 1<<16; i++ {
		switch i % 4 {
		case 0:
			xs = append(xs, 100*r.Float64()-50)
		case 1:
			xs = append(xs, (2*r.Float64()-1)*math.Pow(10, 14*r.Float64()-12))
		case 2:
			xs = append(xs, 4*r.Float64()-2)
		default:
			xs = append(xs, math.Float64frombits(r.Uint64()))
		}
	}
	k := &mapKernel{tanh: true}
	for _, avx := range []bool{false, true} {
		if avx && !HaveAVX2() {
			continue
		}
		SetAVX2(avx)
		for lo := 0; lo < len(xs); {
			m := min(1+r.IntN(13), len(xs)-lo)
			x := xs[lo : lo+m]
			d := make([]float64, m)
			k.aux = []float64{0}
			k.block = func(dst []float64, args [][]float64, _ float64) {
				for i := range dst {
					dst[i] = math.Tanh(args[0][i])
				}
			}
			k.run([][]float64{d, x}, nil, m)
			for i := range d {
				if want := math.Tanh(x[i]); !sameBits(d[i], want) {
					t.Fatalf("Case avx=%v: tanh(%v) (bits %#x) = %v, want %v", avx, x[i], math.Float64bits(x[i]), d[i], want)
				}
			}
			lo += m
		}
	}
}
