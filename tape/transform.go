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
	b := NewBuilder(name, true)
	in := make([]ID, len(p.Inputs))
	for i, s := range p.Inputs {
		in[i] = b.Input(s.Name, s.Shared).id
	}
	return b, in
}

// reverse accumulates adjoints in b, whose values below n are the primal
// copy, given seeds added to adj. It returns the adjoint lookup.
type adjoints struct {
	b      *Builder
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

// VJP returns the reverse-mode program of p: its inputs are p's inputs
// followed by one cotangent input per output of p (named "adj_" + the
// output's name, per trajectory); its outputs are the vector–Jacobian
// products with respect to the inputs listed in wrt (all inputs if wrt is
// nil), in that order, named "grad_" + the input's name. The gradient of a
// shared input is marked Sum: the executor sums it over trajectories.
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
	err = Catch(p.Name, func() { out = vjpInto(b, p, in, seeds, wrt) })
	if err != nil {
		return nil, err
	}
	return finish(b, out)
}

func vjpInto(b *Builder, p *Program, in, seeds []ID, wrt []int) []Output {
	m := b.copyProgram(p, in)
	n := b.Len()
	a := &adjoints{b: b, scalar: make(map[ID]ID), tuple: make(map[ID][]ID)}
	for i, o := range p.Outputs {
		a.acc(m[o.ID], 0, seeds[i])
	}
	a.sweep(n)
	out := make([]Output, len(wrt))
	for i, k := range wrt {
		g := a.get(in[k])
		if g == ops.NoRef {
			g = b.Const(0)
		}
		out[i] = Output{Name: "grad_" + p.Inputs[k].Name, ID: g, Sum: p.Inputs[k].Shared}
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
		grads := vjpInto(b, p, in, []ID{b.Const(1)}, wrt)
		m := b.copyProgram(p, in) // CSE: the primal values already exist
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
func jvpPass(b *Builder, p *Program, in []ID, seed map[int]ID) ([]ID, []ID) {
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
		r := b.Emit(v.Op, v.Aux, args...)
		m[i] = r
		tangentOf(b, r, tan, done, look)
	}
	outs := make([]ID, len(p.Outputs))
	for i, o := range p.Outputs {
		outs[i] = look(m[o.ID])
	}
	return m, outs
}

// tangentOf computes the tangent of r (and, if CSE made r a value whose
// arguments have no tangent yet, of those first).
func tangentOf(b *Builder, r ID, tan map[ID]ID, done map[ID]bool, look func(ID) ID) {
	if done[r] {
		return
	}
	done[r] = true
	op := b.Op(r)
	if op == ops.OpInput || op == ops.OpConst {
		return
	}
	for _, a := range b.Args(r) {
		tangentOf(b, a, tan, done, look)
	}
	def := ops.Lookup(op)
	if def.JVP == nil {
		return
	}
	if t := def.JVP(b, r, look); t != ops.NoRef {
		tan[r] = t
	}
}

// JVP returns the forward-mode program of p: its inputs are p's inputs
// followed by one tangent input per input listed in wrt (all if nil),
// named "d_" + the input's name and shared like it; its outputs are p's
// outputs followed by their tangents (named "d_" + the output's name).
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
		m, tans := jvpPass(b, p, in, seed)
		for _, o := range p.Outputs {
			out = append(out, Output{Name: o.Name, ID: m[o.ID]})
		}
		for i, o := range p.Outputs {
			t := tans[i]
			if t == ops.NoRef {
				t = b.Const(0)
			}
			out = append(out, Output{Name: "d_" + o.Name, ID: t})
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
		for j, k := range wrt {
			m, cols[j] = jvpPass(b, p, in, map[int]ID{k: b.Const(1)})
		}
		if m == nil {
			m = b.copyProgram(p, in)
		}
		for _, o := range p.Outputs {
			out = append(out, Output{Name: o.Name, ID: m[o.ID]})
		}
		for i := range p.Outputs {
			for j := range wrt {
				t := cols[j][i]
				if t == ops.NoRef {
					t = b.Const(0)
				}
				out = append(out, Output{Name: fmt.Sprintf("J[%d,%d]", i, j), ID: t})
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
// replaces 0*x by 0 for a non-finite x.
func Simplify(p *Program) (*Program, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	b, in := newLike(p, p.Name)
	var out []Output
	err := Catch(p.Name, func() {
		m := b.copyProgram(p, in)
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
// always kept, in order, so the program's interface does not change.
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
	m := make([]ID, len(p.Values))
	q := &Program{Name: p.Name, Inputs: append([]Input(nil), p.Inputs...)}
	for i, v := range p.Values {
		if !live[i] {
			m[i] = ops.NoRef
			continue
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
