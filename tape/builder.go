package tape

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/gradsolve-go/gradsolve/ops"
)

// Builder appends values to a program under construction. It implements
// ops.Builder, so derivative rules build into it. With simplification on
// (the default for transforms and Simplify), Emit folds constants, absorbs
// 0 and 1 (x*0 = 0 even for non-finite x, as in every AD system), folds
// negations into adds, subtracts and constant factors, and reuses an
// existing identical value (common-subexpression elimination).
// A Builder is not safe for concurrent use.
type Builder struct {
	p        Program
	simplify bool
	// values (valueForm) copies an OpAttach as its first argument: the
	// program computes the same values without the derivatives attached.
	values  bool
	cse     map[string]ID
	key     []byte
	scratch []float64
	// slab, where set (a Tracer's builder), holds the values' arguments:
	// Emit appends them to it instead of allocating each value's own.
	slab *[]ID
	// consts interns the constants of a Tracer's (unsimplified) builder
	// by their bits, where cse would allocate a string key for each
	// constant on every trace.
	consts map[uint64]ID
	// match, where set (a Tracer's retrace with the program given), is
	// the program the trace is expected to be. While every value and
	// input built is match's, b.p.Values and b.p.Inputs are views of
	// match's own (capacity their length: nothing is appended to them),
	// so a trace of the same program copies nothing; the first that
	// differs copies them into the builder's storage (diverge) and the
	// trace goes on as without match.
	match *Program
	// vals and ins are the builder's storage of Values and Inputs while
	// b.p's are views of match's.
	vals []Value
	ins  []Input
}

// NewBuilder returns a builder for a program named name. If simplify is
// set, Emit simplifies as it goes (see Builder).
func NewBuilder(name string, simplify bool) *Builder {
	return &Builder{p: Program{Name: name}, simplify: simplify, cse: make(map[string]ID)}
}

var _ ops.Builder = (*Builder)(nil)

// NewBuilderFor returns a simplifying builder for a program named name
// whose inputs are inputs (in order), and the inputs' traced values: the
// start of every hand-built program (a method's step, a transform's
// result).
func NewBuilderFor(name string, inputs []Input) (*Builder, []V) {
	b := NewBuilder(name, true)
	vs := make([]V, len(inputs))
	for i, x := range inputs {
		vs[i] = b.Input(x.Name, x.Shared)
	}
	return b, vs
}

// Input appends a program input and returns its traced value.
func (b *Builder) Input(name string, shared bool) V {
	k := len(b.p.Inputs)
	if m := b.match; m != nil {
		if k < len(m.Inputs) && m.Inputs[k] == (Input{Name: name, Shared: shared}) {
			b.p.Inputs = m.Inputs[: k+1 : k+1]
			return V{b, b.push(Value{Op: ops.OpInput, Aux: float64(k)})}
		}
		b.diverge()
	}
	b.p.Inputs = append(b.p.Inputs, Input{Name: name, Shared: shared})
	return V{b, b.push(Value{Op: ops.OpInput, Aux: float64(k)})}
}

// Inputs appends n inputs named name[0], name[1], ….
func (b *Builder) Inputs(name string, n int, shared bool) []V {
	vs := make([]V, n)
	for i := range vs {
		vs[i] = b.Input(fmt.Sprintf("%s[%d]", name, i), shared)
	}
	return vs
}

// ConstV returns the constant c as a traced value.
func (b *Builder) ConstV(c float64) V { return V{b, b.Const(c)} }

// Len returns the number of values built so far.
func (b *Builder) Len() int { return len(b.p.Values) }

// Op returns the op of value r.
func (b *Builder) Op(r ops.Ref) ops.Op { return b.p.Values[r].Op }

// Aux returns the auxiliary number of value r.
func (b *Builder) Aux(r ops.Ref) float64 { return b.p.Values[r].Aux }

// Args returns the arguments of value r; the slice must not be modified.
func (b *Builder) Args(r ops.Ref) []ops.Ref { return b.p.Values[r].Args }

// Const returns the reference of the constant c.
func (b *Builder) Const(c float64) ops.Ref {
	return b.intern(Value{Op: ops.OpConst, Aux: c})
}

func (b *Builder) push(v Value) ID {
	if b.match != nil {
		if id, ok := b.matchNext(v.Op, v.Aux, v.Args); ok {
			return id
		}
		b.diverge()
	}
	b.p.Values = append(b.p.Values, v)
	return ID(len(b.p.Values) - 1)
}

// matchNext reports whether the next value of match is op(aux, args)
// and, if so, takes it as the value built (b.p.Values one longer, a view
// of match's) and returns its reference.
func (b *Builder) matchNext(op ops.Op, aux float64, args []ID) (ID, bool) {
	m, n := b.match, len(b.p.Values)
	if n >= len(m.Values) {
		return 0, false
	}
	w := &m.Values[n]
	if w.Op != op || math.Float64bits(w.Aux) != math.Float64bits(aux) || !slices.Equal(w.Args, args) {
		return 0, false
	}
	b.p.Values = m.Values[: n+1 : n+1]
	return ID(n), true
}

// matchInputs takes the first of inputs that are match's first inputs,
// and its first values their Input values, as Input would take them one
// by one (a trace's inputs come first), and returns how many it took.
func (b *Builder) matchInputs(inputs []Input) int {
	m := b.match
	if m == nil || len(b.p.Values) != 0 || len(b.p.Inputs) != 0 {
		return 0
	}
	k := 0
	for k < len(inputs) && k < len(m.Inputs) && k < len(m.Values) && inputs[k] == m.Inputs[k] {
		if v := &m.Values[k]; v.Op != ops.OpInput || v.Aux != float64(k) || len(v.Args) != 0 {
			break
		}
		k++
	}
	b.p.Inputs, b.p.Values = m.Inputs[:k:k], m.Values[:k:k]
	return k
}

// diverge ends the match (a value or input not match's): the values and
// inputs built so far, match's first ones, are copied into the builder's
// storage, where the trace goes on. (Their arguments stay match's: a
// program is not changed once built, and a Tracer's result is a clone.)
func (b *Builder) diverge() {
	b.match = nil
	b.p.Values = append(b.vals[:0], b.p.Values...)
	b.p.Inputs = append(b.ins[:0], b.p.Inputs...)
	b.vals, b.ins = nil, nil
}

// intern returns an existing identical value, or appends v. Constants are
// always interned; other values only when simplifying. Input values are
// never interned.
func (b *Builder) intern(v Value) ID {
	if !b.simplify && v.Op != ops.OpConst {
		return b.push(v)
	}
	if b.consts != nil && !b.simplify {
		bits := math.Float64bits(v.Aux)
		if id, ok := b.consts[bits]; ok {
			return id
		}
		id := b.push(v)
		b.consts[bits] = id
		return id
	}
	k := b.key[:0]
	k = append(k, byte(v.Op))
	k = binary.LittleEndian.AppendUint64(k, math.Float64bits(v.Aux))
	for _, a := range v.Args {
		k = binary.LittleEndian.AppendUint32(k, uint32(a))
	}
	b.key = k
	if id, ok := b.cse[string(k)]; ok {
		return id
	}
	id := b.push(v)
	b.cse[string(k)] = id
	return id
}

func (b *Builder) isConst(r ID, c float64) bool {
	v := &b.p.Values[r]
	return v.Op == ops.OpConst && v.Aux == c
}

func (b *Builder) constOf(r ID) (float64, bool) {
	v := &b.p.Values[r]
	return v.Aux, v.Op == ops.OpConst
}

// Emit appends op(args) and returns its reference. It panics with a
// *TraceError if the arguments do not fit the op (wrong count, a tuple
// where a scalar is needed, a reference out of range).
func (b *Builder) Emit(op ops.Op, aux float64, args ...ops.Ref) ops.Ref {
	if b.match != nil && op != ops.OpConst {
		// The next value of match (a valid program, whose values before
		// are this trace's): it passed the checks below there. (Constants
		// are interned: intern.)
		if id, ok := b.matchNext(op, aux, args); ok {
			return id
		}
		b.diverge()
	}
	argOps := make([]ops.Op, len(args))
	argAux := make([]float64, len(args))
	for i, a := range args {
		if a < 0 || int(a) >= len(b.p.Values) {
			fail(op.String(), "argument %d is %s, which does not exist in program %q", i+1, vname(a), b.p.Name)
		}
		argOps[i], argAux[i] = b.p.Values[a].Op, b.p.Values[a].Aux
	}
	if err := ops.CheckArgs(op, aux, argOps, argAux); err != nil {
		fail(op.String(), "%v", err)
	}
	switch op {
	case ops.OpExtract:
		if w := b.p.Width(args[0]); int(aux) >= w {
			fail(op.String(), "component %v of a tuple of width %d", aux, w)
		}
	case ops.OpCall:
		if err := b.p.checkCall(int(aux), len(args)); err != nil {
			fail(op.String(), "%v", err)
		}
	}
	if b.simplify {
		if r, ok := b.simplified(op, aux, args); ok {
			return r
		}
	}
	return b.intern(Value{Op: op, Aux: aux, Args: b.argsOf(args)})
}

// argsOf returns a copy of args for a new value: in the slab where the
// builder has one (a full slab is replaced by one twice as large; the
// values built keep the old one), else a slice of its own.
func (b *Builder) argsOf(args []ID) []ID {
	if b.slab == nil {
		cp := make([]ID, len(args))
		copy(cp, args)
		return cp
	}
	s := *b.slab
	if cap(s)-len(s) < len(args) {
		s = make([]ID, 0, max(64, 2*cap(s), len(args)))
	}
	k := len(s)
	s = append(s, args...)
	*b.slab = s
	return s[k:len(s):len(s)]
}

// funcIndex returns the index of f in the program's Funcs, adding f if
// it is not there yet (programs are told apart by pointer).
func (b *Builder) funcIndex(f *Program) int {
	for k, g := range b.p.Funcs {
		if g == f {
			return k
		}
	}
	b.p.Funcs = append(b.p.Funcs, f)
	return len(b.p.Funcs) - 1
}

// emitFrom emits value v of program p with its arguments replaced by
// args (values of b), a call calling the same callee in b's Funcs.
func (b *Builder) emitFrom(p *Program, v *Value, args []ID) ID {
	aux := v.Aux
	if v.Op == ops.OpCall {
		aux = float64(b.funcIndex(p.Funcs[int(aux)]))
	}
	return b.Emit(v.Op, aux, args...)
}

// simplified applies constant folding and algebraic identities.
func (b *Builder) simplified(op ops.Op, aux float64, args []ID) (ID, bool) {
	def := ops.Lookup(op)
	if def.Eval != nil && len(args) > 0 {
		all := true
		b.scratch = b.scratch[:0]
		for _, a := range args {
			c, ok := b.constOf(a)
			all = all && ok
			b.scratch = append(b.scratch, c)
		}
		if all {
			return b.Const(def.Eval(b.scratch, aux)), true
		}
	}
	zero := func(r ID) bool { return b.isConst(r, 0) }
	one := func(r ID) bool { return b.isConst(r, 1) }
	// negOf returns x if r is Neg x. The rules that use it are exact:
	// x + (-y) is x - y in IEEE arithmetic, and (-x)·c is x·(-c).
	negOf := func(r ID) (ID, bool) {
		if v := &b.p.Values[r]; v.Op == ops.OpNeg {
			return v.Args[0], true
		}
		return 0, false
	}
	switch op {
	case ops.OpAdd:
		if zero(args[0]) {
			return args[1], true
		}
		if zero(args[1]) {
			return args[0], true
		}
		if y, ok := negOf(args[1]); ok {
			return b.Emit(ops.OpSub, 0, args[0], y), true
		}
		if x, ok := negOf(args[0]); ok {
			return b.Emit(ops.OpSub, 0, args[1], x), true
		}
		if args[0] > args[1] { // canonical order for CSE
			return b.intern(Value{Op: op, Args: []ID{args[1], args[0]}}), true
		}
	case ops.OpSub:
		if zero(args[1]) {
			return args[0], true
		}
		if zero(args[0]) {
			return b.Emit(ops.OpNeg, 0, args[1]), true
		}
		if y, ok := negOf(args[1]); ok {
			return b.Emit(ops.OpAdd, 0, args[0], y), true
		}
	case ops.OpMul:
		switch {
		case zero(args[0]) || zero(args[1]):
			return b.Const(0), true
		case one(args[0]):
			return args[1], true
		case one(args[1]):
			return args[0], true
		case b.isConst(args[0], -1):
			return b.Emit(ops.OpNeg, 0, args[1]), true
		case b.isConst(args[1], -1):
			return b.Emit(ops.OpNeg, 0, args[0]), true
		}
		for i := 0; i < 2; i++ {
			if c, ok := b.constOf(args[i]); ok {
				if x, ok := negOf(args[1-i]); ok {
					return b.Emit(ops.OpMul, 0, b.Const(-c), x), true
				}
			}
		}
		if args[0] > args[1] {
			return b.intern(Value{Op: op, Args: []ID{args[1], args[0]}}), true
		}
	case ops.OpDiv:
		if one(args[1]) {
			return args[0], true
		}
		if zero(args[0]) {
			return b.Const(0), true
		}
	case ops.OpNeg:
		if v := &b.p.Values[args[0]]; v.Op == ops.OpNeg {
			return v.Args[0], true
		}
	case ops.OpFMA:
		switch {
		case zero(args[0]) || zero(args[1]):
			return args[2], true
		case zero(args[2]):
			return b.Emit(ops.OpMul, 0, args[0], args[1]), true
		case one(args[0]):
			return b.Emit(ops.OpAdd, 0, args[1], args[2]), true
		case one(args[1]):
			return b.Emit(ops.OpAdd, 0, args[0], args[2]), true
		}
	case ops.OpPowi:
		switch aux {
		case 0:
			return b.Const(1), true
		case 1:
			return args[0], true
		case 2:
			return b.Emit(ops.OpSquare, 0, args[0]), true
		}
	case ops.OpSelect:
		if c, ok := b.constOf(args[0]); ok {
			if c != 0 {
				return args[1], true
			}
			return args[2], true
		}
		if args[1] == args[2] {
			return args[1], true
		}
	case ops.OpDot:
		k := (len(args) - 1) / 2
		var ws, xs []ID
		for j := 0; j < k; j++ {
			if !zero(args[j]) && !zero(args[k+j]) {
				ws, xs = append(ws, args[j]), append(xs, args[k+j])
			}
		}
		bias := args[2*k]
		switch {
		case len(ws) == 0:
			return bias, true
		case len(ws) == 1 && zero(bias):
			return b.Emit(ops.OpMul, 0, ws[0], xs[0]), true
		case len(ws) == 1:
			return b.Emit(ops.OpFMA, 0, ws[0], xs[0], bias), true
		case len(ws) < k:
			return b.intern(Value{Op: op, Args: append(append(ws, xs...), bias)}), true
		}
	}
	return 0, false
}

// Build returns the program with the given outputs (named out0, out1, …
// unless the caller renames them). The builder must not be used after.
func (b *Builder) Build(outs ...V) (*Program, error) {
	ids := make([]ID, len(outs))
	for i, o := range outs {
		if err := b.check(o, "Build", i+1); err != nil {
			return nil, err
		}
		ids[i] = o.id
	}
	return b.build(ids)
}

// outNames are the names of the first outputs of a built program, "out0",
// "out1", …: formatted once (a loss traced on every call has one).
var outNames = func() (n [16]string) {
	for i := range n {
		n[i] = fmt.Sprintf("out%d", i)
	}
	return n
}()

// outName returns the name of output i of a built program, "out<i>".
func outName(i int) string {
	if i < len(outNames) {
		return outNames[i]
	}
	return fmt.Sprintf("out%d", i)
}

func (b *Builder) build(ids []ID) (*Program, error) {
	p := b.p
	p.Outputs = make([]Output, len(ids))
	for i, id := range ids {
		p.Outputs[i] = Output{Name: outName(i), ID: id}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// check reports whether v belongs to this builder.
func (b *Builder) check(v V, op string, arg int) error {
	switch {
	case v.b == nil:
		return &TraceError{Op: op, Msg: fmt.Sprintf("argument %d is the zero V, not a value of this trace", arg)}
	case v.b != b:
		return &TraceError{Op: op, Msg: fmt.Sprintf("argument %d is from another trace (program %q, not %q)", arg, v.b.p.Name, b.p.Name)}
	}
	return nil
}
