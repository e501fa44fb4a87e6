package tape

import "slices"

// Tracer traces a function again and again into storage it keeps, for a
// caller that traces the same function on every call to learn whether
// it changed (a loss traced on every Solver call). Its Retrace allocates
// nothing where the trace is the program given (beyond what the traced
// function allocates itself, and a string key per distinct constant),
// where Trace allocates a builder, its map and every value's arguments.
// Its zero value is ready to use. A Tracer is not safe for concurrent
// use.
type Tracer struct {
	b    Builder
	in   []V
	args []ID // the values' arguments, one slab (Builder.slab)
}

// Retrace traces f on the inputs as Trace does and returns last if the
// trace is the same program (last.SameAs), else the trace as a new
// Program of its own, validated, sharing no storage with t (a nil last
// matches nothing). last must be valid, as every program that Trace,
// Retrace and the transforms build is: a value that is last's skips
// Emit's checks, which it passed there. Tracing errors are those of
// Trace. Cost: one call of f and a compare of the trace with last,
// O(values), made as f runs: while the trace is last's, its values are
// not copied.
func (t *Tracer) Retrace(name string, inputs []Input, f func(in []V) []V, last *Program) (p *Program, err error) {
	b := &t.b
	t.args = t.args[:0]
	// While the trace is last's values and inputs, b.p's are views of
	// last's (Builder.match): nothing is copied, and the compare is made
	// as the trace goes. The builder's own storage is kept in b.vals and
	// b.ins meanwhile, and is b.p's again once the trace diverges.
	b.p = Program{Name: name, Inputs: b.ins[:0], Values: b.vals[:0], Outputs: b.p.Outputs[:0], Funcs: b.p.Funcs[:0]}
	b.match = last
	defer func() {
		if b.match == nil {
			b.vals, b.ins = b.p.Values[:0], b.p.Inputs[:0]
		}
		b.match = nil
	}()
	b.simplify, b.values, b.slab = false, false, &t.args
	if b.consts == nil {
		b.cse, b.consts = make(map[string]ID), make(map[uint64]ID)
	}
	clear(b.cse)
	clear(b.consts)
	t.in = t.in[:0]
	for k := range b.matchInputs(inputs) {
		t.in = append(t.in, V{b, ID(k)})
	}
	for _, s := range inputs[len(t.in):] {
		t.in = append(t.in, b.Input(s.Name, s.Shared))
	}
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, recovered(name, r)
		}
	}()
	out := f(t.in)
	for i, o := range out {
		if err := b.check(o, "Build", i+1); err != nil {
			return nil, err
		}
		b.p.Outputs = append(b.p.Outputs, Output{Name: outName(i), ID: o.id})
	}
	if b.p.SameAs(last) {
		return last, nil
	}
	q := b.p.clone()
	if err := q.Validate(); err != nil {
		return nil, err
	}
	return q, nil
}

// clone returns a copy of p that shares no storage with it but its Funcs
// (the called programs, shared by pointer as every program shares them).
func (p *Program) clone() *Program {
	q := &Program{Name: p.Name, Inputs: slices.Clone(p.Inputs), Values: slices.Clone(p.Values),
		Outputs: slices.Clone(p.Outputs), Funcs: slices.Clone(p.Funcs)}
	n := 0
	for _, v := range p.Values {
		n += len(v.Args)
	}
	args := make([]ID, 0, n)
	for i := range q.Values {
		a := q.Values[i].Args
		if a == nil {
			continue
		}
		s := len(args)
		args = append(args, a...)
		q.Values[i].Args = args[s:len(args):len(args)]
	}
	return q
}
