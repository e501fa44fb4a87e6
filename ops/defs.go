package ops

import "math"

// defs is the registry, indexed by Op. TestRegistry checks that every op
// has every field it needs.
var defs [numOps]Def

func init() {
	defs = [numOps]Def{
		OpInput: {Name: "Input", Arity: 0},
		OpConst: {Name: "Const", Arity: 0,
			C: func(_ []string, aux float64) string { return cConst(aux) }},

		OpAdd: arithDef("Add", func(x, y float64) float64 { return x + y }, addBlock, "+",
			func(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) { accSigned(b, r, g[0], acc, 1, 1) },
			sumJVP),
		OpSub: arithDef("Sub", func(x, y float64) float64 { return x - y }, subBlock, "-",
			func(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) { accSigned(b, r, g[0], acc, 1, -1) },
			func(b Builder, r Ref, tan func(Ref) Ref) Ref {
				a := b.Args(r)
				t0, t1 := tan(a[0]), tan(a[1])
				switch {
				case t0 == NoRef && t1 == NoRef:
					return NoRef
				case t1 == NoRef:
					return t0
				case t0 == NoRef:
					return neg(b, t1)
				}
				return sub(b, t0, t1)
			}),
		OpMul: arithDef("Mul", func(x, y float64) float64 { return x * y }, mulBlock, "*",
			func(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) {
				if g[0] == NoRef {
					return
				}
				a := b.Args(r)
				acc(a[0], 0, mul(b, g[0], a[1]))
				acc(a[1], 0, mul(b, g[0], a[0]))
			},
			func(b Builder, r Ref, tan func(Ref) Ref) Ref {
				a := b.Args(r)
				t0, t1 := tan(a[0]), tan(a[1])
				switch {
				case t0 == NoRef && t1 == NoRef:
					return NoRef
				case t1 == NoRef:
					return mul(b, t0, a[1])
				case t0 == NoRef:
					return mul(b, a[0], t1)
				}
				return fma(b, t0, a[1], mul(b, a[0], t1))
			}),
		OpDiv: arithDef("Div", func(x, y float64) float64 { return x / y }, divBlock, "/",
			func(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) {
				if g[0] == NoRef {
					return
				}
				a := b.Args(r)
				q := div(b, g[0], a[1])
				acc(a[0], 0, q)
				acc(a[1], 0, neg(b, mul(b, q, r)))
			},
			func(b Builder, r Ref, tan func(Ref) Ref) Ref {
				a := b.Args(r)
				t0, t1 := tan(a[0]), tan(a[1])
				switch {
				case t0 == NoRef && t1 == NoRef:
					return NoRef
				case t1 == NoRef:
					return div(b, t0, a[1])
				}
				return div(b, sub(b, orZero(b, t0), mul(b, r, t1)), a[1])
			}),
		OpNeg: {Name: "Neg", Arity: 1,
			Eval: func(a []float64, _ float64) float64 { return -a[0] },
			VJP:  func(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) { accSigned(b, r, g[0], acc, -1) },
			JVP: func(b Builder, r Ref, tan func(Ref) Ref) Ref {
				if t := tan(b.Args(r)[0]); t != NoRef {
					return neg(b, t)
				}
				return NoRef
			},
			Block: func(dst []float64, args [][]float64, _ float64) {
				a := args[0][:len(dst)]
				for i := range dst {
					dst[i] = -a[i]
				}
			},
			C: func(a []string, _ float64) string { return "(-" + a[0] + ")" }},
		OpFMA: {Name: "FMA", Arity: 3,
			Eval: func(a []float64, _ float64) float64 { return math.FMA(a[0], a[1], a[2]) },
			VJP: func(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) {
				if g[0] == NoRef {
					return
				}
				a := b.Args(r)
				acc(a[0], 0, mul(b, g[0], a[1]))
				acc(a[1], 0, mul(b, g[0], a[0]))
				acc(a[2], 0, g[0])
			},
			JVP: func(b Builder, r Ref, tan func(Ref) Ref) Ref {
				a := b.Args(r)
				t0, t1, t2 := tan(a[0]), tan(a[1]), tan(a[2])
				out := t2
				if t1 != NoRef {
					out = fma(b, a[0], t1, orZero(b, out))
				}
				if t0 != NoRef {
					out = fma(b, t0, a[1], orZero(b, out))
				}
				return out
			},
			Block: fmaBlock, Mixed: true,
			C: func(a []string, _ float64) string { return "fma(" + a[0] + ", " + a[1] + ", " + a[2] + ")" }},
		OpSquare: {Name: "Square", Arity: 1,
			Eval: func(a []float64, _ float64) float64 { return a[0] * a[0] },
			VJP:  unaryVJP(func(b Builder, x, _ Ref) Ref { return scale(b, 2, x) }),
			JVP:  unaryJVP(func(b Builder, x, _ Ref) Ref { return scale(b, 2, x) }),
			Block: func(dst []float64, args [][]float64, _ float64) {
				a := args[0][:len(dst)]
				for i := range dst {
					dst[i] = a[i] * a[i]
				}
			},
			C: func(a []string, _ float64) string { return "(" + a[0] + " * " + a[0] + ")" }},
		OpPow: {Name: "Pow", Arity: 2,
			Eval:  func(a []float64, _ float64) float64 { return math.Pow(a[0], a[1]) },
			VJP:   powVJP,
			JVP:   powJVP,
			Block: map2(math.Pow),
			C:     func(a []string, _ float64) string { return "pow(" + a[0] + ", " + a[1] + ")" }},
		OpPowi: {Name: "Powi", Arity: 1,
			Eval: func(a []float64, aux float64) float64 { return powi(a[0], int(aux)) },
			VJP:  unaryVJP(powiDeriv),
			JVP:  unaryJVP(powiDeriv),
			Block: func(dst []float64, args [][]float64, aux float64) {
				a, n := args[0][:len(dst)], int(aux)
				for i := range dst {
					dst[i] = powi(a[i], n)
				}
			},
			C: powiC},
		OpSqrt: withBlock(unaryDef("Sqrt", math.Sqrt,
			func(b Builder, _, y Ref) Ref { return div(b, b.Const(0.5), y) }, cfn("sqrt")), sqrtBlock),
		OpExp: unaryDef("Exp", math.Exp,
			func(_ Builder, _, y Ref) Ref { return y }, cfn("exp")),
		OpExpm1: unaryDef("Expm1", math.Expm1,
			func(b Builder, _, y Ref) Ref { return add(b, y, b.Const(1)) }, cfn("expm1")),
		OpLog: unaryDef("Log", math.Log,
			func(b Builder, x, _ Ref) Ref { return div(b, b.Const(1), x) }, cfn("log")),
		OpLog1p: unaryDef("Log1p", math.Log1p,
			func(b Builder, x, _ Ref) Ref { return div(b, b.Const(1), add(b, x, b.Const(1))) }, cfn("log1p")),
		OpSin: unaryDef("Sin", math.Sin,
			func(b Builder, x, _ Ref) Ref { return b.Emit(OpCos, 0, x) }, cfn("sin")),
		OpCos: unaryDef("Cos", math.Cos,
			func(b Builder, x, _ Ref) Ref { return neg(b, b.Emit(OpSin, 0, x)) }, cfn("cos")),
		OpTan: unaryDef("Tan", math.Tan,
			func(b Builder, _, y Ref) Ref { return fma(b, y, y, b.Const(1)) }, cfn("tan")),
		OpTanh: unaryDef("Tanh", math.Tanh,
			func(b Builder, _, y Ref) Ref { return sub(b, b.Const(1), mul(b, y, y)) }, cfn("tanh")),
		OpSigmoid: unaryDef("Sigmoid", sigmoid,
			func(b Builder, _, y Ref) Ref { return mul(b, y, sub(b, b.Const(1), y)) }, cfn("gs_sigmoid")),
		OpSoftplus: unaryDef("Softplus", softplus,
			func(b Builder, x, _ Ref) Ref { return b.Emit(OpSigmoid, 0, x) }, cfn("gs_softplus")),
		OpRelu: {Name: "Relu", Arity: 1,
			Eval: func(a []float64, _ float64) float64 { return relu(a[0]) },
			VJP: func(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) {
				if g[0] == NoRef {
					return
				}
				x := b.Args(r)[0]
				acc(x, 0, sel(b, b.Emit(OpGt, 0, x, b.Const(0)), g[0], b.Const(0)))
			},
			JVP: func(b Builder, r Ref, tan func(Ref) Ref) Ref {
				x := b.Args(r)[0]
				t := tan(x)
				if t == NoRef {
					return NoRef
				}
				return sel(b, b.Emit(OpGt, 0, x, b.Const(0)), t, b.Const(0))
			},
			Block: map1(relu),
			C:     cfn("gs_relu")},
		OpAbs: withBlock(unaryDef("Abs", math.Abs,
			func(b Builder, x, _ Ref) Ref { return b.Emit(OpSign, 0, x) }, cfn("fabs")), absBlock),
		OpSign: {Name: "Sign", Arity: 1,
			Eval:  func(a []float64, _ float64) float64 { return sign(a[0]) },
			Block: map1(sign),
			C:     cfn("gs_sign")},
		OpMin: minMaxDef("Min", OpLe, tieMin, minBlock, "gs_min"),
		OpMax: minMaxDef("Max", OpGe, tieMax, maxBlock, "gs_max"),

		OpLt: compareDef("Lt", func(x, y float64) bool { return x < y }, ltBlock, "<"),
		OpLe: compareDef("Le", func(x, y float64) bool { return x <= y }, leBlock, "<="),
		OpGt: compareDef("Gt", func(x, y float64) bool { return x > y }, gtBlock, ">"),
		OpGe: compareDef("Ge", func(x, y float64) bool { return x >= y }, geBlock, ">="),
		OpEq: compareDef("Eq", func(x, y float64) bool { return x == y }, eqBlock, "=="),
		OpNe: compareDef("Ne", func(x, y float64) bool { return x != y }, neBlock, "!="),

		OpSelect: {Name: "Select", Arity: 3,
			Eval: func(a []float64, _ float64) float64 {
				if a[0] != 0 {
					return a[1]
				}
				return a[2]
			},
			VJP: func(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) {
				if g[0] == NoRef {
					return
				}
				a, z := b.Args(r), b.Const(0)
				acc(a[1], 0, sel(b, a[0], g[0], z))
				acc(a[2], 0, sel(b, a[0], z, g[0]))
			},
			JVP: func(b Builder, r Ref, tan func(Ref) Ref) Ref {
				a := b.Args(r)
				t1, t2 := tan(a[1]), tan(a[2])
				if t1 == NoRef && t2 == NoRef {
					return NoRef
				}
				return sel(b, a[0], orZero(b, t1), orZero(b, t2))
			},
			Block: selectBlock,
			C: func(a []string, _ float64) string {
				return "((" + a[0] + " != 0.0) ? " + a[1] + " : " + a[2] + ")"
			}},
		OpDot: {Name: "Dot", Arity: -1,
			Eval: dotEval, VJP: dotVJP, JVP: dotJVP, Block: dotBlock, Mixed: true, C: dotC},

		OpLUFactor: {Name: "LUFactor", Arity: -1,
			EvalTuple: luFactorEval, JVP: luFactorJVP, Block: luFactorBlock},
		OpLUSolve: {Name: "LUSolve", Arity: -1,
			EvalTuple: luSolveEval(false), VJP: luSolveVJP(false), JVP: luSolveJVP(false), Block: luSolveBlock(false)},
		OpLUSolveT: {Name: "LUSolveT", Arity: -1,
			EvalTuple: luSolveEval(true), VJP: luSolveVJP(true), JVP: luSolveJVP(true), Block: luSolveBlock(true)},
		OpExtract: {Name: "Extract", Arity: 1,
			VJP: func(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) {
				if g[0] != NoRef {
					acc(b.Args(r)[0], int(b.Aux(r)), g[0])
				}
			},
			JVP: func(b Builder, r Ref, tan func(Ref) Ref) Ref {
				t := tan(b.Args(r)[0])
				if t == NoRef {
					return NoRef
				}
				return extract(b, t, int(b.Aux(r)))
			}},
		// Package tape evaluates and differentiates calls through the callee.
		OpCall: {Name: "Call", Arity: -1},

		OpNoGrad: {Name: "NoGrad", Arity: 1,
			Eval:  func(a []float64, _ float64) float64 { return a[0] },
			Block: copyBlock,
			C:     func(a []string, _ float64) string { return a[0] }},
		OpAttach: {Name: "Attach", Arity: 2,
			Eval: func(a []float64, _ float64) float64 { return a[0] },
			VJP: func(b Builder, r Ref, g []Ref, acc func(Ref, int, Ref)) {
				if g[0] == NoRef {
					return
				}
				a := b.Args(r)
				acc(a[0], 0, g[0])
				acc(a[1], 0, g[0])
			},
			JVP:   sumJVP, // Attach's tangent is its arguments' sum, as Add's
			Block: copyBlock,
			C:     func(a []string, _ float64) string { return a[0] }},
		OpLUFactorShift: {Name: "LUFactorShift", Arity: -1,
			EvalTuple: luShiftEval, Block: luShiftBlock},
	}
}

// copyBlock is the Block of the ops whose value is arg0's.
func copyBlock(dst []float64, args [][]float64, _ float64) { copy(dst, args[0][:len(dst)]) }

func relu(x float64) float64 {
	if x > 0 {
		return x
	}
	return 0
}

// cConst formats a constant as a C double literal that round-trips.
func cConst(c float64) string {
	switch {
	case math.IsNaN(c):
		return "(0.0/0.0)"
	case math.IsInf(c, 1):
		return "(1.0/0.0)"
	case math.IsInf(c, -1):
		return "(-1.0/0.0)"
	}
	s := formatFloat(c)
	return s
}

// sumJVP is the tangent of a value that is the sum of its two arguments
// (Add, Attach): the sum of their tangents, either alone where the other
// has none.
func sumJVP(b Builder, r Ref, tan func(Ref) Ref) Ref {
	a := b.Args(r)
	t0, t1 := tan(a[0]), tan(a[1])
	switch {
	case t0 == NoRef:
		return t1
	case t1 == NoRef:
		return t0
	}
	return add(b, t0, t1)
}
