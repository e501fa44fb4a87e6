package tape

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/ops"
)

// Transforms read a program and return a new, simplified one; they never
// modify their input.

// resolveWrt returns wrt, or all inputs if wrt is nil, checking range.
func resolveWrt(p *Program, wrt []int) ([]int, error) {
	if wrt == nil {
		wrt = make([]int, len(p.Inputs))
		for i := range wrt {
			wrt[i] = i
		}
		return wrt, nil
	}
	for _, k := range wrt {
		if k < 0 || k >= len(p.Inputs) {
			return nil, fmt.Errorf("tape: program %s has %d inputs; cannot differentiate with respect to input %d", p.Name, len(p.Inputs), k)
		}
	}
	return wrt, nil
}

// newLike starts a simplifying builder with p's inputs.
func newLike(p *Program, name string) (*Builder, []ID) {
	b, vs := NewBuilderFor(name, p.Inputs)
	in := make([]ID, len(vs))
	for i, v := range vs {
		in[i] = v.id
	}
	return b, in
}

// derivs holds, for one transform, the derivative programs of the callees
// it meets, so that each is built once however often it is called.
type derivs struct {
	vjp map[*Program]*Program
	jvp map[*Program]*Program
}

func newDerivs() *derivs {
	return &derivs{vjp: make(map[*Program]*Program), jvp: make(map[*Program]*Program)}
}

// vjpOf returns the VJP program of callee f: its inputs are f's inputs
// followed by one cotangent per output of f; its outputs are the
// cotangents of all of f's inputs, none summed. It panics with the error
// of a failed build, for Catch.
func (d *derivs) vjpOf(f *Program) *Program {
	if q, ok := d.vjp[f]; ok {
		return q
	}
	b, in := newLike(f, f.Name+".vjp")
	seeds := make([]ID, len(f.Outputs))
	for i, o := range f.Outputs {
		seeds[i] = b.Input("adj_"+o.Name, false).id
	}
	out := vjpInto(b, f, in, seeds, allInputs(f), d)
	for i := range out {
		out[i].Sum = false
	}
	q, err := finish(b, out)
	if err != nil {
		panic(err)
	}
	d.vjp[f] = q
	return q
}

// jvpOf returns the JVP program of callee f: its inputs are f's inputs
// followed by one tangent per input of f (named "d_" + the input's name);
// its outputs are the tangents of f's outputs only (named "d_" + the
// output's name), since a caller already has the outputs themselves. It
// panics with the error of a failed build, for Catch.
func (d *derivs) jvpOf(f *Program) *Program {
	if q, ok := d.jvp[f]; ok {
		return q
	}
	b, in := newLike(f, f.Name+".jvp")
	seed := make(map[int]ID)
	for k, s := range f.Inputs {
		seed[k] = b.Input("d_"+s.Name, s.Shared).id
	}
	_, tans := jvpPass(b, f, in, seed, d)
	out := make([]Output, len(f.Outputs))
	for i, o := range f.Outputs {
		out[i] = Output{Name: "d_" + o.Name, ID: orZero(b, tans[i])}
	}
	q, err := finish(b, out)
	if err != nil {
		panic(err)
	}
	d.jvp[f] = q
	return q
}

// allInputs returns 0, 1, …, len(p.Inputs)-1.
func allInputs(p *Program) []int {
	wrt, _ := resolveWrt(p, nil)
	return wrt
}

// orZero maps the zero derivative NoRef to the constant 0.
func orZero(b *Builder, r ID) ID {
	if r == ops.NoRef {
		return b.Const(0)
	}
	return r
}

// adjoints accumulates the cotangents of the values of b in the reverse
// sweep.
type adjoints struct {
	b      *Builder
	d      *derivs
	scalar map[ID]ID
	tuple  map[ID][]ID
}

func (a *adjoints) acc(t ID, comp int, c ID) {
	if c == ops.NoRef {
		return
	}
	b := a.b
	if ops.IsTuple(b.Op(t)) {
		g := a.tuple[t]
		if g == nil {
			w := b.p.Width(t)
			g = make([]ID, w)
			for i := range g {
				g[i] = ops.NoRef
			}
			a.tuple[t] = g
		}
		if g[comp] == ops.NoRef {
			g[comp] = c
		} else {
			g[comp] = b.Emit(ops.OpAdd, 0, g[comp], c)
		}
		return
	}
	if old, ok := a.scalar[t]; ok {
		a.scalar[t] = b.Emit(ops.OpAdd, 0, old, c)
	} else {
		a.scalar[t] = c
	}
}

func (a *adjoints) get(t ID) ID {
	if g, ok := a.scalar[t]; ok {
		return g
	}
	return ops.NoRef
}

// sweep runs the reverse sweep over values n-1 … 0 of a.b.
func (a *adjoints) sweep(n int) {
	b := a.b
	g1 := make([]ID, 1)
	for r := ID(n - 1); r >= 0; r-- {
		if b.Op(r) == ops.OpCall {
			if g := a.tuple[r]; g != nil {
				a.call(r, g)
			}
			continue
		}
		def := ops.Lookup(b.Op(r))
		if def.VJP == nil {
			continue
		}
		var g []ID
		if ops.IsTuple(b.Op(r)) {
			if g = a.tuple[r]; g == nil {
				continue
			}
		} else {
			if g1[0] = a.get(r); g1[0] == ops.NoRef {
				continue
			}
			g = g1
		}
		def.VJP(b, r, g, a.acc)
	}
}

// call sends the cotangent g (one per output of the callee; NoRef for 0)
// of call r back to its arguments through a call of the callee's VJP
// program.
func (a *adjoints) call(r ID, g []ID) {
	b := a.b
	q := a.d.vjpOf(b.p.Funcs[int(b.Aux(r))])
	args := append([]ID(nil), b.Args(r)...)
	n := len(args)
	for _, c := range g {
		args = append(args, orZero(b, c))
	}
	c := b.Emit(ops.OpCall, float64(b.funcIndex(q)), args...)
	for j, x := range args[:n] {
		if b.Op(x) != ops.OpConst {
			a.acc(x, 0, b.Emit(ops.OpExtract, float64(j), c))
		}
	}
}

// VJP returns the reverse-mode program of p: its inputs are p's inputs
// followed by one cotangent input per output of p (named "adj_" + the
// output's name, per trajectory); its outputs are the vector–Jacobian
// products with respect to the inputs listed in wrt (all inputs if wrt is
// nil), in that order, named "grad_" + the input's name. The gradient of a
// shared input is marked Sum: the executor sums it over trajectories.
// A call of a callee f in p becomes, in the VJP program, a call of f (for
// the values the sweep needs) and a call of f's VJP program (see the
// package documentation, Calls), added to the result's Funcs.
func VJP(p *Program, wrt []int) (*Program, error) { return vjp(p, wrt, true) }

// vjp is VJP with the builder's simplification optional (dead code is
// removed either way); tests use simplify = false to measure what
// simplification saves.
func vjp(p *Program, wrt []int, simplify bool) (*Program, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	wrt, err := resolveWrt(p, wrt)
	if err != nil {
		return nil, err
	}
	b, in := newLike(p, p.Name+".vjp")
	b.simplify = simplify
	seeds := make([]ID, len(p.Outputs))
	for i, o := range p.Outputs {
		seeds[i] = b.Input("adj_"+o.Name, false).id
	}
	var out []Output
	err = Catch(p.Name, func() { out = vjpInto(b, p, in, seeds, wrt, newDerivs()) })
	if err != nil {
		return nil, err
	}
	return finish(b, out)
}

// vjpInto copies p into b with inputs in, runs the reverse sweep from the
// output cotangents seeds and returns the gradients of the inputs wrt,
// those of shared inputs marked Sum.
func vjpInto(b *Builder, p *Program, in, seeds []ID, wrt []int, d *derivs) []Output {
	m := b.copyProgram(p, in, false)
	n := b.Len()
	a := &adjoints{b: b, d: d, scalar: make(map[ID]ID), tuple: make(map[ID][]ID)}
	for i, o := range p.Outputs {
		a.acc(m[o.ID], 0, seeds[i])
	}
	a.sweep(n)
	out := make([]Output, len(wrt))
	for i, k := range wrt {
		out[i] = Output{Name: "grad_" + p.Inputs[k].Name, ID: orZero(b, a.get(in[k])), Sum: p.Inputs[k].Shared}
	}
	return out
}

// Grad returns the gradient program of a program with one output: the
// same inputs; outputs the value (named "value") followed by its partial
// derivatives with respect to the inputs in wrt (all if nil), shared ones
// summed over trajectories.
func Grad(p *Program, wrt []int) (*Program, error) {
	if len(p.Outputs) != 1 {
		return nil, fmt.Errorf("tape: Grad of program %s with %d outputs; it needs exactly 1 (use VJP)", p.Name, len(p.Outputs))
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	wrt, err := resolveWrt(p, wrt)
	if err != nil {
		return nil, err
	}
	b, in := newLike(p, p.Name+".grad")
	var out []Output
	err = Catch(p.Name, func() {
		grads := vjpInto(b, p, in, []ID{b.Const(1)}, wrt, newDerivs())
		m := b.copyProgram(p, in, false) // CSE: the primal values already exist
		out = append([]Output{{Name: "value", ID: m[p.Outputs[0].ID]}}, grads...)
	})
	if err != nil {
		return nil, err
	}
	return finish(b, out)
}

// jvpPass copies p into b and propagates tangents seeded at inputs; seed
// maps an input index to its tangent. It returns the primal map and the
// tangent of each output (NoRef for zero).
func jvpPass(b *Builder, p *Program, in []ID, seed map[int]ID, d *derivs) ([]ID, []ID) {
	tan := make(map[ID]ID)
	done := make(map[ID]bool)
	look := func(r ID) ID {
		if t, ok := tan[r]; ok {
			return t
		}
		return ops.NoRef
	}
	for k, t := range seed {
		tan[in[k]] = t
	}
	m := make([]ID, len(p.Values))
	args := make([]ID, 0, 8)
	for i, v := range p.Values {
		switch v.Op {
		case ops.OpInput:
			m[i] = in[int(v.Aux)]
			continue
		case ops.OpConst:
			m[i] = b.Const(v.Aux)
			continue
		}
		args = args[:0]
		for _, a := range v.Args {
			args = append(args, m[a])
		}
		r := b.emitFrom(p, &v, args)
		m[i] = r
		tangentOf(b, r, tan, done, look, d)
	}
	outs := make([]ID, len(p.Outputs))
	for i, o := range p.Outputs {
		outs[i] = look(m[o.ID])
	}
	return m, outs
}

// tangentOf computes the tangent of r (and, if CSE made r a value whose
// arguments have no tangent yet, of those first).
func tangentOf(b *Builder, r ID, tan map[ID]ID, done map[ID]bool, look func(ID) ID, d *derivs) {
	if done[r] {
		return
	}
	done[r] = true
	op := b.Op(r)
	if op == ops.OpInput || op == ops.OpConst {
		return
	}
	for _, a := range b.Args(r) {
		tangentOf(b, a, tan, done, look, d)
	}
	if op == ops.OpCall {
		if t := callTangent(b, r, look, d); t != ops.NoRef {
			tan[r] = t
		}
		return
	}
	def := ops.Lookup(op)
	if def.JVP == nil {
		return
	}
	if t := def.JVP(b, r, look); t != ops.NoRef {
		tan[r] = t
	}
}

// callTangent returns the tangent of call r, a call of the callee's JVP
// program (a tuple of the call's width), or NoRef if no argument has a
// tangent.
func callTangent(b *Builder, r ID, look func(ID) ID, d *derivs) ID {
	args := append([]ID(nil), b.Args(r)...)
	n := len(args)
	nonzero := false
	for _, x := range args[:n] {
		t := look(x)
		nonzero = nonzero || t != ops.NoRef
		args = append(args, orZero(b, t))
	}
	if !nonzero {
		return ops.NoRef
	}
	q := d.jvpOf(b.p.Funcs[int(b.Aux(r))])
	return b.Emit(ops.OpCall, float64(b.funcIndex(q)), args...)
}

// JVP returns the forward-mode program of p: its inputs are p's inputs
// followed by one tangent input per input listed in wrt (all if nil),
// named "d_" + the input's name and shared like it; its outputs are p's
// outputs followed by their tangents (named "d_" + the output's name).
// The tangent of a call of a callee f in p is a call of f's JVP program
// (see the package documentation, Calls), added to the result's Funcs.
func JVP(p *Program, wrt []int) (*Program, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	wrt, err := resolveWrt(p, wrt)
	if err != nil {
		return nil, err
	}
	b, in := newLike(p, p.Name+".jvp")
	seed := make(map[int]ID)
	for _, k := range wrt {
		seed[k] = b.Input("d_"+p.Inputs[k].Name, p.Inputs[k].Shared).id
	}
	var out []Output
	err = Catch(p.Name, func() {
		m, tans := jvpPass(b, p, in, seed, newDerivs())
		for _, o := range p.Outputs {
			out = append(out, Output{Name: o.Name, ID: m[o.ID]})
		}
		for i, o := range p.Outputs {
			out = append(out, Output{Name: "d_" + o.Name, ID: orZero(b, tans[i])})
		}
	})
	if err != nil {
		return nil, err
	}
	return finish(b, out)
}

// Jacobian returns a program with p's inputs whose outputs are p's outputs
// followed by the Jacobian J[i][j] = ∂out_i/∂in_wrt[j] in row-major order
// (len(p.Outputs)×len(wrt) values named "J[i,j]"), built by forward mode,
// one tangent sweep per column sharing the primal values.
func Jacobian(p *Program, wrt []int) (*Program, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	wrt, err := resolveWrt(p, wrt)
	if err != nil {
		return nil, err
	}
	b, in := newLike(p, p.Name+".jac")
	var out []Output
	err = Catch(p.Name, func() {
		cols := make([][]ID, len(wrt))
		var m []ID
		d := newDerivs()
		for j, k := range wrt {
			m, cols[j] = jvpPass(b, p, in, map[int]ID{k: b.Const(1)}, d)
		}
		if m == nil {
			m = b.copyProgram(p, in, false)
		}
		for _, o := range p.Outputs {
			out = append(out, Output{Name: o.Name, ID: m[o.ID]})
		}
		for i := range p.Outputs {
			for j := range wrt {
				out = append(out, Output{Name: fmt.Sprintf("J[%d,%d]", i, j), ID: orZero(b, cols[j][i])})
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return finish(b, out)
}

// Simplify returns p with constants folded, 0 and 1 absorbed, common
// subexpressions merged and dead values removed. The inputs and outputs
// are unchanged. It keeps values identical except where an absorption
// replaces 0*x by 0 for a non-finite x. Calls stay calls (identical calls
// are merged); callees are not changed.
func Simplify(p *Program) (*Program, error) { return simplify(p, false) }

// Inline returns p with every call replaced by the callee's values,
// recursively, simplified as by Simplify: a program without Funcs with
// p's inputs and outputs. For a program traced with CallFunc it computes
// the same values, bit for bit, as the program traced with Call instead
// (except where Simplify's absorption replaces 0*x by 0 for a non-finite
// x). It returns an error if p is not valid. Cost: proportional to the
// size of the inlined program.
func Inline(p *Program) (*Program, error) { return simplify(p, true) }

// valueForm returns Inline(p) with every OpAttach replaced by its first
// argument: the program an executor of values runs (its derivatives are
// not those of p).
func valueForm(p *Program) (*Program, error) { return simplifyMode(p, true, true) }

// simplify is Simplify, or Inline if inline is set.
func simplify(p *Program, inline bool) (*Program, error) { return simplifyMode(p, inline, false) }

// simplifyMode is simplify; values drops the attached derivatives
// (valueForm).
func simplifyMode(p *Program, inline, values bool) (*Program, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	b, in := newLike(p, p.Name)
	b.values = values
	var out []Output
	err := Catch(p.Name, func() {
		m := b.copyProgram(p, in, inline)
		for _, o := range p.Outputs {
			out = append(out, Output{Name: o.Name, ID: m[o.ID], Sum: o.Sum})
		}
	})
	if err != nil {
		return nil, err
	}
	return finish(b, out)
}

// finish sets the outputs, removes dead values and validates.
func finish(b *Builder, out []Output) (*Program, error) {
	p := b.p
	p.Outputs = out
	q := DeadCode(&p)
	if err := q.Validate(); err != nil {
		return nil, err
	}
	return q, nil
}

// DeadCode returns p without the values no output depends on. Inputs are
// always kept, in order, so the program's interface does not change. A
// call none of whose outputs is used is removed, and so is a callee no
// call is left to (the others keep their order); callees themselves are
// not changed.
func DeadCode(p *Program) *Program {
	live := make([]bool, len(p.Values))
	for _, o := range p.Outputs {
		live[o.ID] = true
	}
	for i := len(p.Values) - 1; i >= 0; i-- {
		v := &p.Values[i]
		if v.Op == ops.OpInput {
			live[i] = true
		}
		if live[i] {
			for _, a := range v.Args {
				live[a] = true
			}
		}
	}
	fn := make([]int, len(p.Funcs)) // new index of each callee, -1 if unused
	for k := range fn {
		fn[k] = -1
	}
	for i, v := range p.Values {
		if live[i] && v.Op == ops.OpCall {
			fn[int(v.Aux)] = 0
		}
	}
	q := &Program{Name: p.Name, Inputs: append([]Input(nil), p.Inputs...)}
	for k, f := range p.Funcs {
		if fn[k] == 0 {
			fn[k] = len(q.Funcs)
			q.Funcs = append(q.Funcs, f)
		}
	}
	m := make([]ID, len(p.Values))
	for i, v := range p.Values {
		if !live[i] {
			m[i] = ops.NoRef
			continue
		}
		if v.Op == ops.OpCall {
			v.Aux = float64(fn[int(v.Aux)])
		}
		args := make([]ID, len(v.Args))
		for j, a := range v.Args {
			args[j] = m[a]
		}
		m[i] = ID(len(q.Values))
		q.Values = append(q.Values, Value{Op: v.Op, Aux: v.Aux, Args: args})
	}
	q.Outputs = make([]Output, len(p.Outputs))
	for i, o := range p.Outputs {
		q.Outputs[i] = Output{Name: o.Name, ID: m[o.ID], Sum: o.Sum}
	}
	return q
}
