package ops

import "fmt"

// Op identifies an operation of a program. Each Op has exactly one Def in
// the registry (see Lookup), holding its arithmetic, its derivative rules,
// its CPU kernel and its CUDA C form.
type Op uint8

// The op set. In the comments argN is the N-th argument and aux the value's
// auxiliary number (Value.Aux in package tape).
const (
	OpInvalid Op = iota // the zero Op; never valid in a program

	OpInput // program input number int(aux)
	OpConst // the constant aux

	OpAdd    // arg0 + arg1
	OpSub    // arg0 - arg1
	OpMul    // arg0 * arg1
	OpDiv    // arg0 / arg1
	OpNeg    // -arg0
	OpFMA    // arg0*arg1 + arg2, rounded once
	OpSquare // arg0 * arg0
	OpPow    // arg0 ** arg1 (real exponent; NaN for arg0 < 0 unless arg1 is an integer)
	OpPowi   // arg0 ** int(aux) (integer exponent)
	OpSqrt   // √arg0; derivative at 0 is +Inf
	OpExp    // e**arg0
	OpExpm1  // e**arg0 - 1, accurate near 0
	OpLog    // natural logarithm
	OpLog1p  // log(1 + arg0), accurate near 0
	OpSin    // sin(arg0)
	OpCos    // cos(arg0)
	OpTan    // tan(arg0)
	OpTanh   // tanh(arg0)

	OpSigmoid  // 1 / (1 + e**-arg0)
	OpSoftplus // log(1 + e**arg0), computed without overflow
	OpRelu     // max(arg0, 0); derivative at 0 is 0
	OpAbs      // |arg0|; derivative at 0 is 0
	OpSign     // -1, 0 or 1 (0 for 0 and NaN); derivative 0
	OpMin      // arg0 if arg0 <= arg1 else arg1; at a tie the derivative goes to arg0
	OpMax      // arg0 if arg0 >= arg1 else arg1; at a tie the derivative goes to arg0

	OpLt // 1 if arg0 < arg1 else 0; derivative 0
	OpLe // 1 if arg0 <= arg1 else 0
	OpGt // 1 if arg0 > arg1 else 0
	OpGe // 1 if arg0 >= arg1 else 0
	OpEq // 1 if arg0 == arg1 else 0
	OpNe // 1 if arg0 != arg1 else 0

	OpSelect // arg1 if arg0 != 0 else arg2; no derivative with respect to arg0

	// OpDot is an affine dot product: with k = (len(args)-1)/2,
	// Σ_{j<k} arg_j * arg_{k+j} + arg_{2k}. The first k arguments are the
	// weights (usually shared parameters), the next k the inputs and the
	// last the bias. One Dot is one row of y = W x + b. It is rounded as
	// the chain s = fma(arg_j, arg_{k+j}, s) from s = arg_{2k}, j = 0…k-1,
	// on every engine, so a Dot of one term is exactly an FMA.
	OpDot

	// OpLUFactor is the LU factorisation with partial pivoting of the d×d
	// matrix whose d*d arguments are its entries in row-major order,
	// d = int(aux). Its value is a tuple of width d*d+d: the packed L\U
	// factors followed by the pivot rows. A matrix singular to working
	// precision (a pivot of magnitude at most d·ε·max|W|) gives a tuple of
	// NaNs. It has no derivative of its own: the solves that use it carry
	// the derivatives with respect to the matrix entries.
	OpLUFactor

	// OpLUSolve solves W x = b: arg0 is an OpLUFactor tuple of W and the
	// d arguments after it are b. Its value is the tuple x of width d.
	// VJP: b̄ = W⁻ᵀ x̄, W̄ = −b̄ xᵀ; JVP: ẋ = W⁻¹(ḃ − Ẇ x).
	OpLUSolve

	// OpLUSolveT solves Wᵀ x = b with the factors of W (arg0) and b (the d
	// arguments after it). VJP: b̄ = W⁻¹ x̄, W̄ = −x b̄ᵀ.
	OpLUSolveT

	// OpExtract is component int(aux) of the tuple arg0.
	OpExtract

	// OpCall calls sub-program number int(aux) of the enclosing program
	// (Program.Funcs in package tape) with one argument per input of the
	// callee, in order, shared inputs included. Its value is the tuple of
	// the callee's outputs, whose width only the program knows (Width
	// returns -1 for it); its components are taken with OpExtract. Package
	// tape evaluates, executes and differentiates calls through the
	// callee, so the Def has no Eval, Block or derivative rules.
	OpCall

	// OpNoGrad is arg0 with a zero derivative (a stop-gradient).
	OpNoGrad

	// OpAttach is arg0 in value; its derivative is that of arg0 plus that
	// of arg1. It attaches to a value a derivative its own ops do not
	// carry (the Rosenbrock steps' matrix-free derivative of W, see
	// OpLUFactorShift); arg1's value is never needed, so executors that
	// compute values only (tape's Exec, package cuda) skip it. The
	// derivative is right to first order: a program's second derivatives
	// through an attached one are not those of its value.
	OpAttach

	// OpLUFactorShift is OpLUFactor of W = I + s·(live ≠ 0 ? M : 0), d =
	// int(aux), each entry rounded as (s·m) + 1 on the diagonal, with M
	// either the last d*d components of the tuple arg0 (a call's outputs:
	// args M, s, live) or d*d scalar arguments in row-major order (args
	// M[0] … M[d*d-1], s, live; package tape inlines a call so). Solves
	// with it treat W as a constant: no derivative flows to M, s or live,
	// and a caller that needs one attaches it (OpAttach). The Rosenbrock
	// steps of large fields use it so that no d×d derivative is ever
	// formed: see package ode's rosenbrock.go.
	OpLUFactorShift

	numOps
)

// NumOps is the number of ops, OpInvalid included; every Op is below it.
const NumOps = int(numOps)

// String returns the op's name, as in "Mul".
func (op Op) String() string {
	if int(op) < len(defs) && defs[op].Name != "" {
		return defs[op].Name
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// Ref is a reference to a value in the program being built by a Builder.
type Ref int32

// NoRef stands for "no value": a zero derivative, or no result.
const NoRef Ref = -1

// Builder appends values to a program. Derivative rules are written
// against it, so a rule's result is itself a program fragment that can be
// differentiated again (second derivatives need nothing more).
// Package tape implements it.
type Builder interface {
	// Emit appends the value op(args) with auxiliary number aux and
	// returns its reference. A Builder may simplify: the result may be an
	// existing value or a constant.
	Emit(op Op, aux float64, args ...Ref) Ref
	// Const returns the constant c.
	Const(c float64) Ref
	// Op, Aux and Args describe an existing value. The returned slice must
	// not be modified.
	Op(r Ref) Op
	Aux(r Ref) float64
	Args(r Ref) []Ref
}

// Def is everything about one op.
type Def struct {
	Name string

	// Arity is the number of arguments, or -1 if it varies (Dot, the LU
	// ops), in which case CheckArgs validates the count.
	Arity int

	// Eval computes a scalar op (Width 1) of scalar arguments.
	// It is nil for the tuple ops; EvalTuple computes those.
	Eval func(args []float64, aux float64) float64

	// EvalTuple writes a tuple op's value into dst (len Width).
	// args holds, for each argument, its value (a tuple argument as a
	// whole). It is nil for scalar ops.
	EvalTuple func(dst []float64, args [][]float64, aux float64)

	// VJP accumulates the cotangents of r's arguments given r's cotangent
	// g (len Width of r; entries may be NoRef, meaning zero). It calls
	// acc(target, component, contribution) for each nonzero contribution;
	// target is usually an argument of r, component is 0 for a scalar
	// target. A nil VJP means the op has a zero derivative.
	VJP func(b Builder, r Ref, g []Ref, acc func(target Ref, comp int, c Ref))

	// JVP returns the tangent of r given the tangents of values through
	// tan (NoRef for a zero tangent). For a tuple op it returns a tuple of
	// r's width, or NoRef if the tangent is zero. A nil JVP means the
	// tangent is always zero.
	JVP func(b Builder, r Ref, tan func(Ref) Ref) Ref

	// Block is the CPU kernel: it computes the op for a block of
	// trajectories. dst has Width·m entries (component-major: component c
	// of trajectory i at dst[c*m+i]); args[k] holds argument k the same
	// way. If Mixed is set, an argument of length 1 (for a tuple argument,
	// its width) is uniform: the same for every trajectory.
	Block func(dst []float64, args [][]float64, aux float64)
	Mixed bool

	// C returns the CUDA C expression of a scalar op given the C
	// expressions of its arguments. It is nil for tuple ops, whose device
	// code is emitted by package cuda.
	C func(args []string, aux float64) string
}

// Lookup returns the definition of op. It panics for an op out of range.
func Lookup(op Op) *Def {
	if op == OpInvalid || op >= numOps {
		panic(fmt.Sprintf("ops: no definition for %v", op))
	}
	return &defs[op]
}

// Width returns the number of scalars in the value of op with auxiliary
// number aux whose first argument (if any) has auxiliary number aux0.
// It returns -1 for OpCall, whose width is the number of outputs of the
// callee, known only to the program (tape's Program.Width).
func Width(op Op, aux, aux0 float64) int {
	switch op {
	case OpCall:
		return -1
	case OpLUFactor, OpLUFactorShift:
		d := int(aux)
		return d*d + d
	case OpLUSolve, OpLUSolveT:
		return int(aux0)
	}
	return 1
}

// IsTuple reports whether op has a tuple value.
func IsTuple(op Op) bool {
	return op == OpLUFactor || op == OpLUFactorShift || op == OpLUSolve || op == OpLUSolveT || op == OpCall
}

// IsFactor reports whether op is an LU factorisation that OpLUSolve and
// OpLUSolveT take as their first argument.
func IsFactor(op Op) bool { return op == OpLUFactor || op == OpLUFactorShift }

// CheckArgs reports an error if nargs arguments do not fit op with the
// given aux, or if tuple-ness of arguments is wrong. argOps holds the op
// of each argument. For OpCall it checks only that aux is a callee index
// (a non-negative integer) and that the arguments are scalars; the
// program checks the index and the number of arguments against the
// callee.
func CheckArgs(op Op, aux float64, argOps []Op, argAux []float64) error {
	def := Lookup(op)
	n := len(argOps)
	if def.Arity >= 0 && n != def.Arity {
		return fmt.Errorf("ops: %v takes %d arguments, got %d", op, def.Arity, n)
	}
	tupleArg := func(i int) bool { return IsTuple(argOps[i]) }
	switch op {
	case OpDot:
		if n < 1 || n%2 != 1 {
			return fmt.Errorf("ops: Dot takes 2k+1 arguments (k weights, k inputs, bias), got %d", n)
		}
	case OpLUFactor:
		d := int(aux)
		if d < 1 || float64(d) != aux {
			return fmt.Errorf("ops: LUFactor dimension %v is not a positive integer", aux)
		}
		if n != d*d {
			return fmt.Errorf("ops: LUFactor of a %d×%d matrix takes %d arguments, got %d", d, d, d*d, n)
		}
	case OpLUFactorShift:
		d := int(aux)
		if d < 1 || float64(d) != aux {
			return fmt.Errorf("ops: LUFactorShift dimension %v is not a positive integer", aux)
		}
		if n == 3 && tupleArg(0) {
			for i := 1; i < n; i++ {
				if tupleArg(i) {
					return fmt.Errorf("ops: LUFactorShift argument %d is a tuple", i)
				}
			}
			return nil
		}
		if n != d*d+2 {
			return fmt.Errorf("ops: LUFactorShift of a %d×%d matrix takes a tuple or %d values, then s and live; got %d arguments", d, d, d*d, n)
		}
	case OpLUSolve, OpLUSolveT:
		if n < 1 || !IsFactor(argOps[0]) {
			return fmt.Errorf("ops: %v needs an LUFactor as its first argument", op)
		}
		d := int(argAux[0])
		if n != d+1 {
			return fmt.Errorf("ops: %v with a %d×%d matrix takes %d right-hand-side values, got %d", op, d, d, d, n-1)
		}
		for i := 1; i < n; i++ {
			if tupleArg(i) {
				return fmt.Errorf("ops: %v argument %d is a tuple; extract its components first", op, i)
			}
		}
		return nil
	case OpExtract:
		if !tupleArg(0) {
			return fmt.Errorf("ops: Extract of a non-tuple %v", argOps[0])
		}
		w := Width(argOps[0], argAux[0], 0)
		if !IsFactor(argOps[0]) {
			w = -1 // checked by the caller, who knows the width
		}
		if c := int(aux); float64(c) != aux || c < 0 || (w >= 0 && c >= w) {
			return fmt.Errorf("ops: Extract component %v out of range", aux)
		}
		return nil
	case OpCall:
		if k := int(aux); k < 0 || float64(k) != aux {
			return fmt.Errorf("ops: Call of sub-program %v: not a non-negative integer", aux)
		}
	case OpPowi:
		if aux != float64(int(aux)) {
			return fmt.Errorf("ops: Powi exponent %v is not an integer", aux)
		}
	}
	for i := range argOps {
		if tupleArg(i) {
			return fmt.Errorf("ops: %v argument %d is a tuple (%v); extract its components first", op, i, argOps[i])
		}
	}
	return nil
}
