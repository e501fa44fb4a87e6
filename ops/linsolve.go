package ops

import (
	"math"
	"strconv"
	"sync"
)

// Batched small dense linear solves. A tuple of width w for m trajectories
// is stored component-major: component c of trajectory i at buf[c*m+i].
// The functions below work on one trajectory i of such a buffer, so the
// block kernels (any m) and the scalar interpreter (m = 1) share them.

// luLane factors the d×d matrix held row-major in f[:d*d] (f has width
// d*d+d) in place, with partial pivoting; the pivot rows go into
// f[d*d:] as float64. A matrix singular to working precision, a pivot of
// magnitude at most d·ε·max|W|, or a non-finite entry gives a factor of
// NaNs. The block kernels copy a lane's matrix into contiguous scratch
// first (see factorLanes).
func luLane(f []float64, d int) {
	f = f[:d*d+d]
	amax := 0.0
	for _, x := range f[:d*d] {
		v := math.Abs(x)
		if !(v <= math.MaxFloat64) { // NaN or Inf
			amax = math.NaN()
			break
		}
		if v > amax { // math.Max, for finite v ≥ 0
			amax = v
		}
	}
	tol := float64(d) * 0x1p-52 * amax
	for k := 0; k < d; k++ {
		p, pv := k, math.Abs(f[k*d+k])
		for r := k + 1; r < d; r++ {
			if v := math.Abs(f[r*d+k]); v > pv {
				p, pv = r, v
			}
		}
		if !(pv > tol) || amax == 0 {
			for c := range f {
				f[c] = math.NaN()
			}
			return
		}
		f[d*d+k] = float64(p)
		rowK := f[k*d : (k+1)*d]
		if p != k {
			rowP := f[p*d : (p+1)*d]
			for c := range rowK {
				rowK[c], rowP[c] = rowP[c], rowK[c]
			}
		}
		inv := 1 / rowK[k]
		rowK = rowK[k+1:]
		for r := k + 1; r < d; r++ {
			rowR := f[r*d+k : (r+1)*d]
			l := rowR[0] * inv
			rowR[0] = l
			if l == 0 {
				continue
			}
			rowR = rowR[1:]
			rowR = rowR[:len(rowK)]
			for c, x := range rowK {
				rowR[c] -= l * x
			}
		}
	}
}

// solveLane overwrites trajectory i of x (width d, holding b) with the
// solution of W x = b, or of Wᵀ x = b if trans, given W's factors f.
func solveLane(x, f []float64, d, m, i int, trans bool) {
	at := func(r, c int) int { return (r*d+c)*m + i }
	piv := func(k int) int {
		p := f[(d*d+k)*m+i]
		if p != p {
			return -1
		}
		return int(p)
	}
	if piv(0) < 0 {
		for k := 0; k < d; k++ {
			x[k*m+i] = math.NaN()
		}
		return
	}
	if !trans {
		// P W = L U: x = U⁻¹ L⁻¹ P b.
		for k := 0; k < d; k++ {
			if p := piv(k); p != k {
				x[k*m+i], x[p*m+i] = x[p*m+i], x[k*m+i]
			}
		}
		for r := 1; r < d; r++ {
			s := x[r*m+i]
			for c := 0; c < r; c++ {
				s -= f[at(r, c)] * x[c*m+i]
			}
			x[r*m+i] = s
		}
		for r := d - 1; r >= 0; r-- {
			s := x[r*m+i]
			for c := r + 1; c < d; c++ {
				s -= f[at(r, c)] * x[c*m+i]
			}
			x[r*m+i] = s / f[at(r, r)]
		}
		return
	}
	// Wᵀ = Uᵀ Lᵀ P: x = Pᵀ L⁻ᵀ U⁻ᵀ b.
	for r := 0; r < d; r++ {
		s := x[r*m+i]
		for c := 0; c < r; c++ {
			s -= f[at(c, r)] * x[c*m+i]
		}
		x[r*m+i] = s / f[at(r, r)]
	}
	for r := d - 2; r >= 0; r-- {
		s := x[r*m+i]
		for c := r + 1; c < d; c++ {
			s -= f[at(c, r)] * x[c*m+i]
		}
		x[r*m+i] = s
	}
	for k := d - 1; k >= 0; k-- {
		if p := piv(k); p != k {
			x[k*m+i], x[p*m+i] = x[p*m+i], x[k*m+i]
		}
	}
}

func luFactorEval(dst []float64, args [][]float64, aux float64) {
	d := int(aux)
	for c := 0; c < d*d; c++ {
		dst[c] = args[c][0]
	}
	luLane(dst, d)
}

func luFactorBlock(dst []float64, args [][]float64, aux float64) {
	d := int(aux)
	m := len(dst) / (d*d + d)
	for c := 0; c < d*d; c++ {
		copy(dst[c*m:(c+1)*m], args[c][:m])
	}
	factorLanes(dst, d, m, func(s []float64, g, i int) {
		for c := 0; c < d*d; c++ {
			s[c] = dst[c*m+i]
		}
	})
}

// Factoring a block. A trajectory's matrix in a component-major block is
// spread over d² values m apart, so luLane on the block itself reads a
// cache line per entry it touches (d³/3 of them): at d = 64 and m = 128 a
// factorisation took 380 µs a lane, at d = 256 140 ms. factorLanes
// instead copies the matrices of a group of lanes into contiguous
// scratch (trajectory-major: each lane's d×d row-major), factors each
// with luLane, the same operations in the same order, so bit for
// bit the same factors, and copies the factors back: 29 µs a lane at
// d = 64 (BenchmarkLUBlock). A group is at most 8 lanes (a cache line of
// each component) and fits luScratch bytes.
const luScratch = 256 << 10

// luPool holds the scratch of factorLanes.
var luPool = sync.Pool{New: func() any { return new([]float64) }}

// factorLanes factors the m lanes of the block f (width d*d+d); load(s,
// g, i) writes lane i's matrix, row-major, into s[:d*d] (s is lane g of
// the group's scratch).
func factorLanes(f []float64, d, m int, load func(s []float64, g, i int)) {
	w := d*d + d
	group := max(1, min(8, luScratch/(8*w), m))
	sp := luPool.Get().(*[]float64)
	if cap(*sp) < group*w {
		*sp = make([]float64, group*w)
	}
	s := (*sp)[:group*w]
	for i0 := 0; i0 < m; i0 += group {
		gn := min(group, m-i0)
		for g := 0; g < gn; g++ {
			lane := s[g*w : (g+1)*w]
			load(lane, g, i0+g)
			luLane(lane, d)
		}
		for c := 0; c < w; c++ {
			row := f[c*m+i0 : c*m+i0+gn]
			for g := range row {
				row[g] = s[g*w+c]
			}
		}
	}
	luPool.Put(sp)
}

// shiftFill writes trajectory i's W = I + s·(live ≠ 0 ? M : 0) of an
// OpLUFactorShift of arguments args (see OpLUFactorShift) into f,
// row-major and contiguous, the arguments laid out component-major as a
// Block's (m = 1 for Eval).
func shiftFill(f []float64, args [][]float64, d, m, i int) {
	n := len(args)
	s, live := args[n-2][i], args[n-1][i]
	f = f[:d*d]
	for c := range f {
		f[c] = 0
	}
	if live != 0 {
		if n == 3 { // M the last d*d components of a tuple (or d = 1)
			t := args[0]
			off := len(t)/m - d*d
			for c := range f {
				f[c] = t[(off+c)*m+i]
			}
		} else {
			for c := range f {
				f[c] = args[c][i]
			}
		}
	}
	for c := range f {
		f[c] *= s
	}
	for k := 0; k < d; k++ {
		f[k*d+k] += 1
	}
}

func luShiftEval(dst []float64, args [][]float64, aux float64) {
	d := int(aux)
	shiftFill(dst, args, d, 1, 0)
	luLane(dst, d)
}

func luShiftBlock(dst []float64, args [][]float64, aux float64) {
	d := int(aux)
	m := len(dst) / (d*d + d)
	factorLanes(dst, d, m, func(f []float64, _, i int) { shiftFill(f, args, d, m, i) })
}

// luFactorJVP marks the factors as having a tangent when the matrix does;
// the solves read the matrix tangents themselves.
func luFactorJVP(b Builder, r Ref, tan func(Ref) Ref) Ref {
	for _, a := range b.Args(r) {
		if tan(a) != NoRef {
			return r
		}
	}
	return NoRef
}

func luSolveEval(trans bool) func([]float64, [][]float64, float64) {
	return func(dst []float64, args [][]float64, _ float64) {
		d := len(dst)
		for k := 0; k < d; k++ {
			dst[k] = args[k+1][0]
		}
		solveLane(dst, args[0], d, 1, 0, trans)
	}
}

func luSolveBlock(trans bool) func([]float64, [][]float64, float64) {
	return func(dst []float64, args [][]float64, _ float64) {
		d := len(args) - 1
		m := len(dst) / d
		for k := 0; k < d; k++ {
			copy(dst[k*m:(k+1)*m], args[k+1][:m])
		}
		solveLanes(dst, args[0], d, m, trans)
	}
}

// solveLanes is solveLane for all m lanes of a block at once: the
// substitutions run along the lanes (unit stride) and do each lane's
// operations in solveLane's order, so the results are bit for bit the
// same; solveLane per lane reads the factors d·m values apart, a cache
// line per entry (2.6× slower at d = 64, 18× at d = 256 with m = 128).
func solveLanes(x, f []float64, d, m int, trans bool) {
	f, x = f[:(d*d+d)*m], x[:d*m]
	pivs := f[d*d*m:]
	lane := func(s []float64, k int) []float64 { return s[k*m : (k+1)*m] }
	swap := func() {
		for i := 0; i < m; i++ {
			if pivs[i] != pivs[i] {
				continue // a failed factorisation; NaNs below
			}
			for k := 0; k < d; k++ {
				if p := int(pivs[k*m+i]); p != k {
					x[k*m+i], x[p*m+i] = x[p*m+i], x[k*m+i]
				}
			}
		}
	}
	if !trans {
		// P W = L U: x = U⁻¹ L⁻¹ P b.
		swap()
		for r := 1; r < d; r++ {
			xr := lane(x, r)
			for c := 0; c < r; c++ {
				fr, xc := lane(f, r*d+c)[:m], lane(x, c)[:m]
				for i := range xr {
					xr[i] -= fr[i] * xc[i]
				}
			}
		}
		for r := d - 1; r >= 0; r-- {
			xr := lane(x, r)
			for c := r + 1; c < d; c++ {
				fr, xc := lane(f, r*d+c)[:m], lane(x, c)[:m]
				for i := range xr {
					xr[i] -= fr[i] * xc[i]
				}
			}
			frr := lane(f, r*d+r)[:m]
			for i := range xr {
				xr[i] /= frr[i]
			}
		}
	} else {
		// Wᵀ = Uᵀ Lᵀ P: x = Pᵀ L⁻ᵀ U⁻ᵀ b.
		for r := 0; r < d; r++ {
			xr := lane(x, r)
			for c := 0; c < r; c++ {
				fc, xc := lane(f, c*d+r)[:m], lane(x, c)[:m]
				for i := range xr {
					xr[i] -= fc[i] * xc[i]
				}
			}
			frr := lane(f, r*d+r)[:m]
			for i := range xr {
				xr[i] /= frr[i]
			}
		}
		for r := d - 2; r >= 0; r-- {
			xr := lane(x, r)
			for c := r + 1; c < d; c++ {
				fc, xc := lane(f, c*d+r)[:m], lane(x, c)[:m]
				for i := range xr {
					xr[i] -= fc[i] * xc[i]
				}
			}
		}
		// The swaps in reverse order.
		for i := 0; i < m; i++ {
			if pivs[i] != pivs[i] {
				continue
			}
			for k := d - 1; k >= 0; k-- {
				if p := int(pivs[k*m+i]); p != k {
					x[k*m+i], x[p*m+i] = x[p*m+i], x[k*m+i]
				}
			}
		}
	}
	for i := 0; i < m; i++ {
		if pivs[i] != pivs[i] {
			for k := 0; k < d; k++ {
				x[k*m+i] = math.NaN()
			}
		}
	}
}

// luSolveVJP: for x = W⁻¹b, b̄ = W⁻ᵀx̄ and W̄ = −b̄xᵀ; for x = W⁻ᵀb,
// b̄ = W⁻¹x̄ and W̄ = −x b̄ᵀ. W̄ is d² scalar terms per solve; a factor
// of OpLUFactorShift has none (its W is a constant).
func luSolveVJP(trans bool) func(Builder, Ref, []Ref, func(Ref, int, Ref)) {
	return func(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) {
		args := b.Args(r)
		f, rhs := args[0], args[1:]
		d := len(rhs)
		any := false
		gz := make([]Ref, 0, d+1)
		gz = append(gz, f)
		for _, gi := range g {
			any = any || gi != NoRef
			gz = append(gz, orZero(b, gi))
		}
		if !any {
			return
		}
		op := OpLUSolveT
		if trans {
			op = OpLUSolve
		}
		bt := b.Emit(op, 0, gz...)
		bbar := make([]Ref, d)
		x := make([]Ref, d)
		for k := 0; k < d; k++ {
			bbar[k] = extract(b, bt, k)
			x[k] = extract(b, r, k)
			acc(rhs[k], 0, bbar[k])
		}
		if b.Op(f) != OpLUFactor {
			return // OpLUFactorShift: W is a constant
		}
		w := b.Args(f)
		for i := 0; i < d; i++ {
			for j := 0; j < d; j++ {
				var c Ref
				if trans {
					c = mul(b, x[i], bbar[j])
				} else {
					c = mul(b, bbar[i], x[j])
				}
				acc(w[i*d+j], 0, neg(b, c))
			}
		}
	}
}

// luSolveJVP: ẋ = W⁻¹(ḃ − Ẇx), or W⁻ᵀ(ḃ − Ẇᵀx) for the transposed
// solve (Ẇ = 0 for a factor of OpLUFactorShift).
func luSolveJVP(trans bool) func(Builder, Ref, func(Ref) Ref) Ref {
	return func(b Builder, r Ref, tan func(Ref) Ref) Ref {
		args := b.Args(r)
		f, rhs := args[0], args[1:]
		d := len(rhs)
		w := b.Args(f)
		constW := b.Op(f) != OpLUFactor // OpLUFactorShift
		any := false
		t := make([]Ref, 0, d+1)
		t = append(t, f)
		for i := 0; i < d; i++ {
			ti := tan(rhs[i])
			var ws, xs []Ref
			for j := 0; j < d && !constW; j++ {
				e := w[i*d+j]
				if trans {
					e = w[j*d+i]
				}
				if tw := tan(e); tw != NoRef {
					ws = append(ws, neg(b, tw))
					xs = append(xs, extract(b, r, j))
				}
			}
			if len(ws) > 0 {
				ti = b.Emit(OpDot, 0, append(append(ws, xs...), orZero(b, ti))...)
			}
			any = any || ti != NoRef
			t = append(t, orZero(b, ti))
		}
		if !any {
			return NoRef
		}
		op := OpLUSolve
		if trans {
			op = OpLUSolveT
		}
		return b.Emit(op, 0, t...)
	}
}

func formatFloat(c float64) string {
	s := strconv.FormatFloat(c, 'g', -1, 64)
	for _, ch := range s {
		if ch == '.' || ch == 'e' || ch == 'n' || ch == 'I' {
			return s
		}
	}
	return s + ".0"
}
