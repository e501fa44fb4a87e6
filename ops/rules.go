package ops

// Small builders used by the derivative rules. Every rule is written with
// ops of the set, so derivatives of derivatives need nothing more.

func add(b Builder, x, y Ref) Ref    { return b.Emit(OpAdd, 0, x, y) }
func sub(b Builder, x, y Ref) Ref    { return b.Emit(OpSub, 0, x, y) }
func mul(b Builder, x, y Ref) Ref    { return b.Emit(OpMul, 0, x, y) }
func div(b Builder, x, y Ref) Ref    { return b.Emit(OpDiv, 0, x, y) }
func neg(b Builder, x Ref) Ref       { return b.Emit(OpNeg, 0, x) }
func fma(b Builder, x, y, z Ref) Ref { return b.Emit(OpFMA, 0, x, y, z) }
func sel(b Builder, c, x, y Ref) Ref { return b.Emit(OpSelect, 0, c, x, y) }
func scale(b Builder, c float64, x Ref) Ref {
	return b.Emit(OpMul, 0, b.Const(c), x)
}
func extract(b Builder, t Ref, i int) Ref { return b.Emit(OpExtract, float64(i), t) }

// orZero maps the zero tangent NoRef to the constant 0.
func orZero(b Builder, r Ref) Ref {
	if r == NoRef {
		return b.Const(0)
	}
	return r
}

// unaryVJP builds the VJP rule of a scalar op of one argument whose
// derivative is deriv(x, y), y the op's value.
func unaryVJP(deriv func(b Builder, x, y Ref) Ref) func(Builder, Ref, []Ref, func(Ref, int, Ref)) {
	return func(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) {
		if g[0] == NoRef {
			return
		}
		x := b.Args(r)[0]
		acc(x, 0, mul(b, g[0], deriv(b, x, r)))
	}
}

// unaryJVP builds the JVP rule matching unaryVJP.
func unaryJVP(deriv func(b Builder, x, y Ref) Ref) func(Builder, Ref, func(Ref) Ref) Ref {
	return func(b Builder, r Ref, tan func(Ref) Ref) Ref {
		x := b.Args(r)[0]
		tx := tan(x)
		if tx == NoRef {
			return NoRef
		}
		return mul(b, tx, deriv(b, x, r))
	}
}

// accSigned sends g (times each sign, ±1) to every argument of r.
func accSigned(b Builder, r Ref, g Ref, acc func(Ref, int, Ref), signs ...float64) {
	if g == NoRef {
		return
	}
	for i, x := range b.Args(r) {
		switch signs[i] {
		case 1:
			acc(x, 0, g)
		case -1:
			acc(x, 0, neg(b, g))
		}
	}
}
