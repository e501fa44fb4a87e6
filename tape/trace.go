package tape

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/gradsolve-go/gradsolve/ops"
)

// V is a traced scalar: a value of the program being traced. Arithmetic on
// Vs appends values to the program; Go control flow around them runs once,
// at trace time. The zero V is invalid.
type V struct {
	b  *Builder
	id ID
}

// ID returns the value's ID in the program being built.
func (x V) ID() ID { return x.id }

// Builder returns the builder x belongs to (nil for the zero V).
func (x V) Builder() *Builder { return x.b }

// TraceError reports a misuse found while tracing: the op, the Go source
// position of the user's call, and what is wrong.
type TraceError struct {
	Op  string // the operation, as "Mul" or "Dense"
	Pos string // file:line of the caller outside package tape, if known
	Msg string
}

func (e *TraceError) Error() string {
	if e.Pos != "" {
		return fmt.Sprintf("tape: %s at %s: %s", e.Op, e.Pos, e.Msg)
	}
	return fmt.Sprintf("tape: %s: %s", e.Op, e.Msg)
}

// fail panics with a *TraceError; Trace recovers it into an error.
func fail(op, format string, args ...any) {
	panic(&TraceError{Op: op, Pos: callerPos(), Msg: fmt.Sprintf(format, args...)})
}

// callerPos returns file:line of the first caller outside this package
// and package ops.
func callerPos() string {
	pc := make([]uintptr, 32)
	n := runtime.Callers(3, pc)
	frames := runtime.CallersFrames(pc[:n])
	for {
		f, more := frames.Next()
		if !strings.Contains(f.Function, "/gradsolve/tape.") && !strings.Contains(f.Function, "/gradsolve/ops.") &&
			!strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf("%s:%d", f.File, f.Line)
		}
		if !more {
			return ""
		}
	}
}

// Trace runs f once on symbolic inputs and returns the program it traces.
// Input k of the program is inputs[k]. Panics in f that come from misuse
// of traced values (mixing traces, zero Vs, wrong shapes) are returned as
// a *TraceError naming the op and the position in f; other panics in f
// are returned as errors too, with their message.
func Trace(name string, inputs []Input, f func(in []V) []V) (p *Program, err error) {
	b := NewBuilder(name, false)
	in := make([]V, len(inputs))
	for i, s := range inputs {
		in[i] = b.Input(s.Name, s.Shared)
	}
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, recovered(name, r)
		}
	}()
	out := f(in)
	return b.Build(out...)
}

// recovered turns a panic value from a traced function into an error.
func recovered(name string, r any) error {
	switch e := r.(type) {
	case *TraceError:
		return e
	case error:
		return fmt.Errorf("tape: tracing %s: %w", name, e)
	}
	return fmt.Errorf("tape: tracing %s: panic: %v", name, r)
}

// Catch runs f and turns a panic with a *TraceError (or any panic) into a
// returned error, for callers that trace with a Builder directly.
func Catch(name string, f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = recovered(name, r)
		}
	}()
	f()
	return nil
}

// Call inlines program p into the trace of args (one value per input of
// p) and returns p's outputs as traced values. The calls p itself makes
// stay calls (see CallFunc). It panics with a *TraceError if len(args) !=
// len(p.Inputs) or the args mix traces.
func Call(p *Program, args []V) []V {
	b, ids := callArgs("Call", p, args)
	m := b.copyProgram(p, ids, false)
	out := make([]V, len(p.Outputs))
	for i, o := range p.Outputs {
		out[i] = V{b, m[o.ID]}
	}
	return out
}

// CallFunc traces a call of program p with args (one value per input of
// p, shared inputs included) without inlining it: it adds p to the
// program's Funcs (once: callees are told apart by pointer), appends one
// OpCall value and returns p's outputs as OpExtract values of it. Inline
// flattens the calls again. It panics with a *TraceError if len(args) !=
// len(p.Inputs), the args mix traces, p is not valid, or an output of p
// is marked Sum. Cost: one Validate of p the first time a trace calls it,
// then a few values per call.
func CallFunc(p *Program, args []V) []V {
	b, ids := callArgs("CallFunc", p, args)
	n := len(b.p.Funcs)
	k := b.funcIndex(p)
	if k == n { // new callee
		err := p.Validate()
		for j, o := range p.Outputs {
			if err == nil && o.Sum {
				err = fmt.Errorf("output %d (%s) is summed; a callee's outputs must not be", j, o.Name)
			}
		}
		if err != nil {
			b.p.Funcs = b.p.Funcs[:n]
			fail("CallFunc", "program %s: %v", p.Name, err)
		}
	}
	c := b.Emit(ops.OpCall, float64(k), ids...)
	out := make([]V, len(p.Outputs))
	for i := range out {
		out[i] = V{b, b.Emit(ops.OpExtract, float64(i), c)}
	}
	return out
}

// callArgs checks the arguments of a call of p and returns their trace
// and IDs.
func callArgs(name string, p *Program, args []V) (*Builder, []ID) {
	if len(args) != len(p.Inputs) {
		fail(name, "program %s has %d inputs, got %d values", p.Name, len(p.Inputs), len(args))
	}
	if len(args) == 0 {
		fail(name, "program %s has no inputs; cannot tell which trace to call it in", p.Name)
	}
	b := args[0].b
	if b == nil {
		fail(name, "argument 1 is the zero V, not a value of any trace")
	}
	ids := make([]ID, len(args))
	for i, a := range args {
		if err := b.check(a, name, i+1); err != nil {
			e := err.(*TraceError)
			e.Pos = callerPos()
			panic(e)
		}
		ids[i] = a.id
	}
	return b, ids
}

// copyProgram emits the values of p into b with input k replaced by
// in[k], and returns the map from p's IDs to b's. If inline is set, the
// calls of p are inlined too, recursively (a call maps to NoRef, its
// extracts to the callee's outputs); otherwise they stay calls.
func (b *Builder) copyProgram(p *Program, in []ID, inline bool) []ID {
	m := make([]ID, len(p.Values))
	var outs map[ID][]ID // inline: the outputs of each call
	args := make([]ID, 0, 8)
	for i := range p.Values {
		v := &p.Values[i]
		switch {
		case v.Op == ops.OpInput:
			m[i] = in[int(v.Aux)]
			continue
		case v.Op == ops.OpConst:
			m[i] = b.Const(v.Aux)
			continue
		case inline && v.Op == ops.OpExtract && p.Values[v.Args[0]].Op == ops.OpCall:
			m[i] = outs[v.Args[0]][int(v.Aux)]
			continue
		case b.values && v.Op == ops.OpAttach:
			m[i] = m[v.Args[0]]
			continue
		case inline && v.Op == ops.OpLUFactorShift && len(v.Args) == 3 && p.Values[v.Args[0]].Op == ops.OpCall:
			// The matrix read from a call's tuple: its outputs as scalars.
			o, dd := outs[v.Args[0]], int(v.Aux)*int(v.Aux)
			args = append(append(args[:0], o[len(o)-dd:]...), m[v.Args[1]], m[v.Args[2]])
			m[i] = b.emitFrom(p, v, args)
			continue
		}
		args = args[:0]
		for _, a := range v.Args {
			args = append(args, m[a])
		}
		if inline && v.Op == ops.OpCall {
			f := p.Funcs[int(v.Aux)]
			fm := b.copyProgram(f, append([]ID(nil), args...), true)
			o := make([]ID, len(f.Outputs))
			for j, out := range f.Outputs {
				o[j] = fm[out.ID]
			}
			if outs == nil {
				outs = make(map[ID][]ID)
			}
			outs[ID(i)] = o
			m[i] = ops.NoRef
			continue
		}
		m[i] = b.emitFrom(p, v, args)
	}
	return m
}

// emit is the traced-value form of Builder.Emit, checking every argument.
func emit(name string, op ops.Op, aux float64, xs ...V) V {
	b := xs[0].b
	if b == nil {
		fail(name, "argument 1 is the zero V, not a value of any trace")
	}
	ids := make([]ID, len(xs))
	for i, x := range xs {
		if err := b.check(x, name, i+1); err != nil {
			e := err.(*TraceError)
			e.Pos = callerPos()
			panic(e)
		}
		ids[i] = x.id
	}
	return V{b, b.Emit(op, aux, ids...)}
}

// Const returns the constant c in the trace of x.
func (x V) Const(c float64) V {
	if x.b == nil {
		fail("Const", "called on the zero V")
	}
	return V{x.b, x.b.Const(c)}
}

// Add returns x + y.
func (x V) Add(y V) V { return emit("Add", ops.OpAdd, 0, x, y) }

// Sub returns x - y.
func (x V) Sub(y V) V { return emit("Sub", ops.OpSub, 0, x, y) }

// Mul returns x * y.
func (x V) Mul(y V) V { return emit("Mul", ops.OpMul, 0, x, y) }

// Div returns x / y.
func (x V) Div(y V) V { return emit("Div", ops.OpDiv, 0, x, y) }

// AddC returns x + c.
func (x V) AddC(c float64) V { return x.Add(x.Const(c)) }

// MulC returns c * x.
func (x V) MulC(c float64) V { return x.Const(c).Mul(x) }

// Neg returns -x.
func (x V) Neg() V { return emit("Neg", ops.OpNeg, 0, x) }

// Square returns x*x.
func (x V) Square() V { return emit("Square", ops.OpSquare, 0, x) }

// Pow returns x**y for a real exponent y (NaN for x < 0 and non-integer y).
func (x V) Pow(y V) V { return emit("Pow", ops.OpPow, 0, x, y) }

// Powi returns x**n for an integer n.
func (x V) Powi(n int) V { return emit("Powi", ops.OpPowi, float64(n), x) }

// Sqrt returns √x.
func (x V) Sqrt() V { return emit("Sqrt", ops.OpSqrt, 0, x) }

// Exp returns e**x.
func (x V) Exp() V { return emit("Exp", ops.OpExp, 0, x) }

// Expm1 returns e**x - 1.
func (x V) Expm1() V { return emit("Expm1", ops.OpExpm1, 0, x) }

// Log returns the natural logarithm of x.
func (x V) Log() V { return emit("Log", ops.OpLog, 0, x) }

// Log1p returns log(1+x).
func (x V) Log1p() V { return emit("Log1p", ops.OpLog1p, 0, x) }

// Sin returns sin(x).
func (x V) Sin() V { return emit("Sin", ops.OpSin, 0, x) }

// Cos returns cos(x).
func (x V) Cos() V { return emit("Cos", ops.OpCos, 0, x) }

// Tan returns tan(x).
func (x V) Tan() V { return emit("Tan", ops.OpTan, 0, x) }

// Tanh returns tanh(x).
func (x V) Tanh() V { return emit("Tanh", ops.OpTanh, 0, x) }

// Sigmoid returns 1/(1+e**-x).
func (x V) Sigmoid() V { return emit("Sigmoid", ops.OpSigmoid, 0, x) }

// Softplus returns log(1+e**x).
func (x V) Softplus() V { return emit("Softplus", ops.OpSoftplus, 0, x) }

// Relu returns max(x, 0); its derivative at 0 is 0.
func (x V) Relu() V { return emit("Relu", ops.OpRelu, 0, x) }

// Abs returns |x|; its derivative at 0 is 0.
func (x V) Abs() V { return emit("Abs", ops.OpAbs, 0, x) }

// Sign returns -1, 0 or 1; its derivative is 0.
func (x V) Sign() V { return emit("Sign", ops.OpSign, 0, x) }

// FMA returns x*y + z rounded once.
func FMA(x, y, z V) V { return emit("FMA", ops.OpFMA, 0, x, y, z) }

// Min returns the smaller of x and y (x at a tie, and the derivative then
// goes to x).
func Min(x, y V) V { return emit("Min", ops.OpMin, 0, x, y) }

// Max returns the larger of x and y (x at a tie).
func Max(x, y V) V { return emit("Max", ops.OpMax, 0, x, y) }

// Lt returns 1 if x < y, else 0. Comparisons have no derivative; use them
// as Select conditions.
func Lt(x, y V) V { return emit("Lt", ops.OpLt, 0, x, y) }

// Le returns 1 if x <= y, else 0.
func Le(x, y V) V { return emit("Le", ops.OpLe, 0, x, y) }

// Gt returns 1 if x > y, else 0.
func Gt(x, y V) V { return emit("Gt", ops.OpGt, 0, x, y) }

// Ge returns 1 if x >= y, else 0.
func Ge(x, y V) V { return emit("Ge", ops.OpGe, 0, x, y) }

// Eq returns 1 if x == y, else 0.
func Eq(x, y V) V { return emit("Eq", ops.OpEq, 0, x, y) }

// Ne returns 1 if x != y, else 0.
func Ne(x, y V) V { return emit("Ne", ops.OpNe, 0, x, y) }

// Select returns a if c != 0, else b: the data-dependent branch of a
// traced program. Both a and b are computed; the derivative flows only to
// the chosen one, so guard a branch that is non-finite where unused with
// a second Select on its input (the double-where idiom).
func Select(c, a, b V) V { return emit("Select", ops.OpSelect, 0, c, a, b) }

// Sum returns the sum of xs (which must not be empty).
func Sum(xs []V) V {
	if len(xs) == 0 {
		fail("Sum", "no values to sum")
	}
	s := xs[0]
	for _, x := range xs[1:] {
		s = s.Add(x)
	}
	return s
}

// Dot returns Σ w[j]*x[j] + bias as one Dot value. It panics with a
// *TraceError if len(w) != len(x).
func Dot(w, x []V, bias V) V {
	if len(w) != len(x) {
		fail("Dot", "len(w) = %d, len(x) = %d; they must match", len(w), len(x))
	}
	args := make([]V, 0, 2*len(w)+1)
	args = append(append(append(args, w...), x...), bias)
	return emit("Dot", ops.OpDot, 0, args...)
}

// Dense returns y = W x + b for the len(b)×len(x) matrix W stored row-major
// in w (usually shared parameters): one Dot per row. It panics with a
// *TraceError if len(w) != len(b)*len(x).
func Dense(w, x, b []V) []V {
	if len(w) != len(b)*len(x) {
		fail("Dense", "len(w) = %d, want len(b)*len(x) = %d*%d = %d", len(w), len(b), len(x), len(b)*len(x))
	}
	n := len(x)
	y := make([]V, len(b))
	for i := range y {
		y[i] = Dot(w[i*n:(i+1)*n], x, b[i])
	}
	return y
}

// Solve returns x with W x = rhs for the d×d matrix w (row-major, d =
// len(rhs)) as traced values, factoring W once with partial pivoting.
// A matrix singular to working precision gives NaNs, which the executor
// reports when it checks for non-finite results. It panics with a
// *TraceError if len(rhs) == 0 or len(w) != d*d.
func Solve(w, rhs []V) []V {
	if d := len(rhs); d == 0 || len(w) != d*d {
		fail("Solve", "len(w) = %d, len(rhs) = %d; want len(w) = len(rhs)² > 0", len(w), d)
	}
	f := Factor(w, len(rhs))
	return f.Solve(rhs)
}

// LU is the traced LU factorisation of a d×d matrix, reusable for several
// solves.
type LU struct {
	f V
	d int
}

// Factor factors the d×d matrix w (row-major). It panics with a
// *TraceError if len(w) != d*d.
func Factor(w []V, d int) LU {
	if d < 1 || len(w) != d*d {
		fail("Factor", "len(w) = %d, want d*d = %d", len(w), d*d)
	}
	return LU{emit("LUFactor", ops.OpLUFactor, float64(d), w...), d}
}

// FactorShift factors W = I + s·(live ≠ 0 ? M : 0) for the d×d matrix m
// (row-major), each entry rounded as (s·m_ij) + 1 on the diagonal, as
// the scalar ops would give it. Its solves treat W as a constant: no
// derivative flows to m, s or live (see ops.OpLUFactorShift); a caller
// that needs W's derivative attaches it with Attach. If m is the last
// d*d outputs of one call (CallFunc), in order, the factor reads them
// from the call's tuple and the trace holds one value, not d*d. It
// panics with a *TraceError if len(m) != d*d.
func FactorShift(m []V, s, live V, d int) LU {
	if d < 1 || len(m) != d*d {
		fail("FactorShift", "len(m) = %d, want d*d = %d", len(m), d*d)
	}
	if c, ok := callTail(m); ok {
		return LU{emit("FactorShift", ops.OpLUFactorShift, float64(d), c, s, live), d}
	}
	return LU{emit("FactorShift", ops.OpLUFactorShift, float64(d), append(append([]V(nil), m...), s, live)...), d}
}

// callTail returns the call whose last len(m) outputs, in order, m is.
func callTail(m []V) (V, bool) {
	b := m[0].b
	if b == nil {
		return V{}, false
	}
	v0 := b.p.Values[m[0].id]
	if v0.Op != ops.OpExtract || b.p.Values[v0.Args[0]].Op != ops.OpCall {
		return V{}, false
	}
	c := v0.Args[0]
	w := b.p.Width(c)
	for k, x := range m {
		if x.b != b {
			return V{}, false
		}
		v := b.p.Values[x.id]
		if v.Op != ops.OpExtract || v.Args[0] != c || int(v.Aux) != w-len(m)+k {
			return V{}, false
		}
	}
	return V{b, c}, true
}

// NoGrad returns x with a zero derivative (a stop-gradient).
func NoGrad(x V) V { return emit("NoGrad", ops.OpNoGrad, 0, x) }

// Attach returns x with the derivative of x plus that of dx: a derivative
// x's own ops do not carry (as that of a FactorShift's matrix). dx's value
// is never computed by the executors of values.
func Attach(x, dx V) V { return emit("Attach", ops.OpAttach, 0, x, dx) }

// Solve returns x with W x = rhs.
func (f LU) Solve(rhs []V) []V { return f.solve("Solve", ops.OpLUSolve, rhs) }

// SolveT returns x with Wᵀ x = rhs.
func (f LU) SolveT(rhs []V) []V { return f.solve("SolveT", ops.OpLUSolveT, rhs) }

func (f LU) solve(name string, op ops.Op, rhs []V) []V {
	if len(rhs) != f.d {
		fail(name, "len(rhs) = %d, want %d", len(rhs), f.d)
	}
	t := emit(name, op, 0, append([]V{f.f}, rhs...)...)
	x := make([]V, f.d)
	for i := range x {
		x[i] = emit(name, ops.OpExtract, float64(i), t)
	}
	return x
}
