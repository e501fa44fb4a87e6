package ops

import (
	"math"
	"strconv"
)

// Batched small dense linear solves. A tuple of width w for m trajectories
// is stored component-major: component c of trajectory i at buf[c*m+i].
// The functions below work on one trajectory i of such a buffer, so the
// block kernels (any m) and the scalar interpreter (m = 1) share them.

// luLane factors trajectory i of the d×d matrix held in f (width d*d+d,
// the matrix already copied into its first d*d components) in place, with
// partial pivoting; the pivot rows go into components d*d.. as float64.
// A matrix singular to working precision, a pivot of magnitude at most
// d·ε·max|W|, or a non-finite entry gives a factor of NaNs.
func luLane(f []float64, d, m, i int) {
	at := func(r, c int) int { return (r*d+c)*m + i }
	amax := 0.0
	for c := 0; c < d*d; c++ {
		v := math.Abs(f[c*m+i])
		if !(v <= math.MaxFloat64) { // NaN or Inf
			amax = math.NaN()
			break
		}
		amax = math.Max(amax, v)
	}
	tol := float64(d) * 0x1p-52 * amax
	for k := 0; k < d; k++ {
		p, pv := k, math.Abs(f[at(k, k)])
		for r := k + 1; r < d; r++ {
			if v := math.Abs(f[at(r, k)]); v > pv {
				p, pv = r, v
			}
		}
		if !(pv > tol) || amax == 0 {
			for c := 0; c < d*d+d; c++ {
				f[c*m+i] = math.NaN()
			}
			return
		}
		f[(d*d+k)*m+i] = float64(p)
		if p != k {
			for c := 0; c < d; c++ {
				f[at(k, c)], f[at(p, c)] = f[at(p, c)], f[at(k, c)]
			}
		}
		inv := 1 / f[at(k, k)]
		for r := k + 1; r < d; r++ {
			l := f[at(r, k)] * inv
			f[at(r, k)] = l
			if l == 0 {
				continue
			}
			for c := k + 1; c < d; c++ {
				f[at(r, c)] -= l * f[at(k, c)]
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
	luLane(dst, d, 1, 0)
}

func luFactorBlock(dst []float64, args [][]float64, aux float64) {
	d := int(aux)
	m := len(dst) / (d*d + d)
	for c := 0; c < d*d; c++ {
		copy(dst[c*m:(c+1)*m], args[c][:m])
	}
	for i := 0; i < m; i++ {
		luLane(dst, d, m, i)
	}
}

// shiftMatrix returns M's entry c and s and live of an OpLUFactorShift of
// arguments args (see OpLUFactorShift) for trajectory i of m, the
// arguments laid out component-major as a Block's (m = 1 for Eval).
func shiftMatrix(args [][]float64, d, m, i int) (entry func(c int) float64, s, live float64) {
	n := len(args)
	s, live = args[n-2][i], args[n-1][i]
	if n == 3 { // M the last d*d components of a tuple (or d = 1)
		t := args[0]
		off := len(t)/m - d*d
		return func(c int) float64 { return t[(off+c)*m+i] }, s, live
	}
	return func(c int) float64 { return args[c][i] }, s, live
}

// shiftLane writes trajectory i of W = I + s·(live ≠ 0 ? M : 0) into f
// (component-major, m trajectories) and factors it.
func shiftLane(f []float64, args [][]float64, d, m, i int) {
	entry, s, live := shiftMatrix(args, d, m, i)
	for c := 0; c < d*d; c++ {
		x := 0.0
		if live != 0 {
			x = entry(c)
		}
		w := s * x
		if c/d == c%d {
			w += 1
		}
		f[c*m+i] = w
	}
	luLane(f, d, m, i)
}

func luShiftEval(dst []float64, args [][]float64, aux float64) {
	shiftLane(dst, args, int(aux), 1, 0)
}

func luShiftBlock(dst []float64, args [][]float64, aux float64) {
	d := int(aux)
	m := len(dst) / (d*d + d)
	for i := 0; i < m; i++ {
		shiftLane(dst, args, d, m, i)
	}
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
		for i := 0; i < m; i++ {
			solveLane(dst, args[0], d, m, i, trans)
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
