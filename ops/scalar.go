package ops

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
)

// Scalar math shared by Eval, the block kernels and the tests.

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

func softplus(x float64) float64 {
	return math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x)))
}

func sign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

// powi computes x**n by repeated squaring (n may be negative). The CUDA
// emitter uses the same algorithm, so both engines round alike.
func powi(x float64, n int) float64 {
	if n < 0 {
		return 1 / powi(x, -n)
	}
	r := 1.0
	for n > 0 {
		if n&1 == 1 {
			r *= x
		}
		x *= x
		n >>= 1
	}
	return r
}

func b2f(c bool) float64 {
	if c {
		return 1
	}
	return 0
}

// map1 makes a block kernel from a scalar function of one argument.
func map1(f func(float64) float64) func([]float64, [][]float64, float64) {
	return func(dst []float64, args [][]float64, _ float64) {
		a := args[0][:len(dst)]
		for i := range dst {
			dst[i] = f(a[i])
		}
	}
}

// map2 makes a block kernel from a scalar function of two arguments.
func map2(f func(x, y float64) float64) func([]float64, [][]float64, float64) {
	return func(dst []float64, args [][]float64, _ float64) {
		a, b := args[0][:len(dst)], args[1][:len(dst)]
		for i := range dst {
			dst[i] = f(a[i], b[i])
		}
	}
}

func cfn(name string) func([]string, float64) string {
	return func(a []string, _ float64) string { return name + "(" + a[0] + ")" }
}

func cinfix(op string) func([]string, float64) string {
	return func(a []string, _ float64) string { return "(" + a[0] + " " + op + " " + a[1] + ")" }
}

func ccmp(op string) func([]string, float64) string {
	return func(a []string, _ float64) string {
		return "((" + a[0] + " " + op + " " + a[1] + ") ? 1.0 : 0.0)"
	}
}

// withBlock returns d with its block kernel replaced by a specialised one
// that computes the same values.
func withBlock(d Def, block func([]float64, [][]float64, float64)) Def {
	d.Block = block
	return d
}

func unaryDef(name string, f func(float64) float64, deriv func(b Builder, x, y Ref) Ref, c func([]string, float64) string) Def {
	return Def{
		Name:  name,
		Arity: 1,
		Eval:  func(a []float64, _ float64) float64 { return f(a[0]) },
		VJP:   unaryVJP(deriv),
		JVP:   unaryJVP(deriv),
		Block: map1(f),
		C:     c,
	}
}

func compareDef(name string, f func(x, y float64) bool, block func([]float64, [][]float64, float64), c string) Def {
	g := func(x, y float64) float64 { return b2f(f(x, y)) }
	return Def{
		Name:  name,
		Arity: 2,
		Eval:  func(a []float64, _ float64) float64 { return g(a[0], a[1]) },
		Block: block,
		C:     ccmp(c),
	}
}

// The block kernels of the binary arithmetic ops; either argument may be
// uniform (length 1). Where gonum's floats package has an exact kernel
// (vectorised assembly on amd64) it is used: x+y as 1·x+y, x−y as
// (−1)·y+x or x+(−y), c·x, x/y and x+c are the very IEEE operations of
// the scalar Eval, so the results agree bit for bit (NaN payloads aside).

func addBlock(dst []float64, args [][]float64, _ float64) {
	n := len(dst)
	switch a, b := args[0], args[1]; {
	case len(a) == 1 && n > 1:
		copy(dst, b[:n])
		floats.AddConst(a[0], dst)
	case len(b) == 1 && n > 1:
		copy(dst, a[:n])
		floats.AddConst(b[0], dst)
	default:
		floats.AddTo(dst, a[:n], b[:n])
	}
}

func subBlock(dst []float64, args [][]float64, _ float64) {
	n := len(dst)
	switch a, b := args[0], args[1]; {
	case len(a) == 1 && n > 1:
		floats.ScaleTo(dst, -1, b[:n])
		floats.AddConst(a[0], dst)
	case len(b) == 1 && n > 1:
		copy(dst, a[:n])
		floats.AddConst(-b[0], dst)
	default:
		floats.SubTo(dst, a[:n], b[:n])
	}
}

func mulBlock(dst []float64, args [][]float64, _ float64) {
	n := len(dst)
	switch a, b := args[0], args[1]; {
	case len(a) == 1 && n > 1:
		floats.ScaleTo(dst, a[0], b[:n])
	case len(b) == 1 && n > 1:
		floats.ScaleTo(dst, b[0], a[:n])
	default:
		mulVV(dst, a[:n], b[:n])
	}
}

func divBlock(dst []float64, args [][]float64, _ float64) {
	n := len(dst)
	switch a, b := args[0], args[1]; {
	case len(a) == 1 && n > 1:
		s, b := a[0], b[:n]
		for i := range dst {
			dst[i] = s / b[i]
		}
	case len(b) == 1 && n > 1:
		s, a := b[0], a[:n]
		for i := range dst {
			dst[i] = a[i] / s
		}
	default:
		floats.DivTo(dst, a[:n], b[:n])
	}
}

// mulVV sets dst[i] = a[i]*b[i], unrolled by four.
func mulVV(dst, a, b []float64) {
	n := len(dst)
	a, b = a[:n], b[:n]
	i := 0
	for ; i <= n-4; i += 4 {
		d, x, y := dst[i:i+4:i+4], a[i:i+4:i+4], b[i:i+4:i+4]
		d[0] = x[0] * y[0]
		d[1] = x[1] * y[1]
		d[2] = x[2] * y[2]
		d[3] = x[3] * y[3]
	}
	for ; i < n; i++ {
		dst[i] = a[i] * b[i]
	}
}

func arithDef(name string, f func(x, y float64) float64, block func([]float64, [][]float64, float64), c string,
	vjp func(Builder, Ref, []Ref, func(Ref, int, Ref)), jvp func(Builder, Ref, func(Ref) Ref) Ref) Def {
	return Def{
		Name:  name,
		Arity: 2,
		Eval:  func(a []float64, _ float64) float64 { return f(a[0], a[1]) },
		VJP:   vjp,
		JVP:   jvp,
		Block: block,
		Mixed: true,
		C:     cinfix(c),
	}
}

func fmaBlock(dst []float64, args [][]float64, _ float64) {
	n := len(dst)
	a, b, c := args[0], args[1], args[2]
	switch {
	case len(a) == 1 && len(b) > 1 && len(c) > 1:
		s, b, c := a[0], b[:n], c[:n]
		for i := range dst {
			dst[i] = math.FMA(s, b[i], c[i])
		}
	case len(b) == 1 && len(a) > 1 && len(c) > 1:
		s, a, c := b[0], a[:n], c[:n]
		for i := range dst {
			dst[i] = math.FMA(a[i], s, c[i])
		}
	case len(a) > 1 && len(b) > 1 && len(c) > 1:
		a, b, c := a[:n], b[:n], c[:n]
		for i := range dst {
			dst[i] = math.FMA(a[i], b[i], c[i])
		}
	default:
		at := func(x []float64, i int) float64 {
			if len(x) == 1 {
				return x[0]
			}
			return x[i]
		}
		for i := range dst {
			dst[i] = math.FMA(at(a, i), at(b, i), at(c, i))
		}
	}
}

// dotBlock computes Σ w_j x_j + bias as a chain of fused multiply-adds,
// s = fma(w_j, x_j, s) from s = bias, j = 0…k-1, exactly as dotEval and
// the CUDA expression do; weights are usually uniform.
func dotBlock(dst []float64, args [][]float64, _ float64) {
	n := len(dst)
	k := (len(args) - 1) / 2
	if bias := args[2*k]; len(bias) == 1 {
		for i := range dst {
			dst[i] = bias[0]
		}
	} else {
		copy(dst, bias[:n])
	}
	for j := 0; j < k; j++ {
		w, x := args[j], args[k+j]
		switch {
		case len(w) == 1 && len(x) > 1:
			s, x := w[0], x[:n]
			for i := range dst {
				dst[i] = math.FMA(s, x[i], dst[i])
			}
		case len(w) > 1 && len(x) == 1:
			s, w := x[0], w[:n]
			for i := range dst {
				dst[i] = math.FMA(w[i], s, dst[i])
			}
		case len(w) == 1 && len(x) == 1:
			s, t := w[0], x[0]
			for i := range dst {
				dst[i] = math.FMA(s, t, dst[i])
			}
		default:
			w, x := w[:n], x[:n]
			for i := range dst {
				dst[i] = math.FMA(w[i], x[i], dst[i])
			}
		}
	}
}

func dotEval(a []float64, _ float64) float64 {
	k := (len(a) - 1) / 2
	s := a[2*k]
	for j := 0; j < k; j++ {
		s = math.FMA(a[j], a[k+j], s)
	}
	return s
}

func dotVJP(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) {
	if g[0] == NoRef {
		return
	}
	args := b.Args(r)
	k := (len(args) - 1) / 2
	for j := 0; j < k; j++ {
		acc(args[j], 0, mul(b, g[0], args[k+j]))
		acc(args[k+j], 0, mul(b, g[0], args[j]))
	}
	acc(args[2*k], 0, g[0])
}

func dotJVP(b Builder, r Ref, tan func(Ref) Ref) Ref {
	args := b.Args(r)
	k := (len(args) - 1) / 2
	var ws, xs []Ref
	for j := 0; j < k; j++ {
		if t := tan(args[j]); t != NoRef {
			ws, xs = append(ws, t), append(xs, args[k+j])
		}
		if t := tan(args[k+j]); t != NoRef {
			ws, xs = append(ws, args[j]), append(xs, t)
		}
	}
	bias := tan(args[2*k])
	if len(ws) == 0 {
		return bias
	}
	return b.Emit(OpDot, 0, append(append(ws, xs...), orZero(b, bias))...)
}

func dotC(a []string, _ float64) string {
	k := (len(a) - 1) / 2
	s := a[2*k]
	for j := 0; j < k; j++ {
		s = "fma(" + a[j] + ", " + a[k+j] + ", " + s + ")"
	}
	return s
}

func selectBlock(dst []float64, args [][]float64, _ float64) {
	c, a, b := args[0][:len(dst)], args[1][:len(dst)], args[2][:len(dst)]
	for i := range dst {
		if c[i] != 0 {
			dst[i] = a[i]
		} else {
			dst[i] = b[i]
		}
	}
}

// powBaseDeriv returns d/dx x^y = y·x^(y−1), with the exponent y−1 read
// as 0 where x = y = 0. x^0 is 1 for every x, so its derivative is 0 at
// x = 0 too, where y·x^(y−1) would be 0·Inf = NaN (a zero-order rate
// written as Pow(c, p) with p = 0 and c = 0); and a derivative of the
// rule at x = 0, y = 1 (the second derivative of x^1, which a Rosenbrock
// step's gradient takes from its Jacobian) is then 1·(0·x^0) = 0, not
// 1·(0·x^−1). The guard is on the exponent, not on the result, so that
// the rule's own derivatives stay finite; where x ≠ 0 or y ≠ 0 the rule
// and its derivatives are y·x^(y−1)'s bit for bit (∂/∂y included, 1/x
// at y = 0), and a constant exponent folds the guard away.
func powBaseDeriv(b Builder, x, y Ref) Ref {
	zero := b.Const(0)
	both := mul(b, b.Emit(OpEq, 0, x, zero), b.Emit(OpEq, 0, y, zero))
	ys := sel(b, both, b.Const(1), y)
	return mul(b, y, b.Emit(OpPow, 0, x, sub(b, ys, b.Const(1))))
}

func powVJP(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) {
	if g[0] == NoRef {
		return
	}
	a := b.Args(r)
	x, y := a[0], a[1]
	acc(x, 0, mul(b, g[0], powBaseDeriv(b, x, y)))
	// d/dy x^y = x^y log x, taken as 0 where x <= 0; the double Select
	// keeps derivatives of the unused branch finite.
	pos := b.Emit(OpGt, 0, x, b.Const(0))
	xs := sel(b, pos, x, b.Const(1))
	acc(y, 0, mul(b, g[0], sel(b, pos, mul(b, r, b.Emit(OpLog, 0, xs)), b.Const(0))))
}

func powJVP(b Builder, r Ref, tan func(Ref) Ref) Ref {
	a := b.Args(r)
	x, y := a[0], a[1]
	tx, ty := tan(x), tan(y)
	var out Ref = NoRef
	if tx != NoRef {
		out = mul(b, tx, powBaseDeriv(b, x, y))
	}
	if ty != NoRef {
		pos := b.Emit(OpGt, 0, x, b.Const(0))
		xs := sel(b, pos, x, b.Const(1))
		t := mul(b, ty, sel(b, pos, mul(b, r, b.Emit(OpLog, 0, xs)), b.Const(0)))
		if out == NoRef {
			out = t
		} else {
			out = add(b, out, t)
		}
	}
	return out
}

func powiDeriv(b Builder, x, y Ref) Ref {
	n := b.Aux(y)
	if n == 0 {
		return b.Const(0)
	}
	return scale(b, n, b.Emit(OpPowi, n-1, x))
}

func powiC(a []string, aux float64) string {
	return fmt.Sprintf("gs_powi(%s, %d)", a[0], int(aux))
}

// minMaxDef defines Min (le = OpLe) or Max (le = OpGe).
func minMaxDef(name string, cmp Op, f func(x, y float64) float64, block func([]float64, [][]float64, float64), c string) Def {
	cond := func(b Builder, r Ref) Ref {
		a := b.Args(r)
		return b.Emit(cmp, 0, a[0], a[1])
	}
	return Def{
		Name:  name,
		Arity: 2,
		Eval:  func(a []float64, _ float64) float64 { return f(a[0], a[1]) },
		VJP: func(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) {
			if g[0] == NoRef {
				return
			}
			a, c, z := b.Args(r), cond(b, r), b.Const(0)
			acc(a[0], 0, sel(b, c, g[0], z))
			acc(a[1], 0, sel(b, c, z, g[0]))
		},
		JVP: func(b Builder, r Ref, tan func(Ref) Ref) Ref {
			a := b.Args(r)
			t0, t1 := tan(a[0]), tan(a[1])
			if t0 == NoRef && t1 == NoRef {
				return NoRef
			}
			return sel(b, cond(b, r), orZero(b, t0), orZero(b, t1))
		},
		Block: block,
		C:     func(a []string, _ float64) string { return c + "(" + a[0] + ", " + a[1] + ")" },
	}
}

func tieMin(x, y float64) float64 {
	if x <= y || x != x {
		return x
	}
	return y
}

func tieMax(x, y float64) float64 {
	if x >= y || x != x {
		return x
	}
	return y
}
