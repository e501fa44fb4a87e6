package kernelgen

import (
	"fmt"
	"strings"

	"github.com/gradsolve-go/gradsolve/tape"
)

// Bound functions. A loss of many saved values (1,000 save times of four
// components) has thousands of inputs and, its VJP, as many outputs: as
// a function of the calling convention (Source) it takes one scalar
// parameter per input and returns a struct of every output, which the
// kernel fills from the ensemble's arrays and copies back into them:
// 4,005 parameters and a struct of 4,006 reals, with the array the loops
// index the inputs in (gs_a) and one for their outputs, about 96 kB of
// local memory per thread, and a device compile that did not finish in
// 100 s on an H100. A bound function (boundFunction) instead takes
// pointers to the arrays its inputs are entries of and reads each input
// where it is used (a loop's operand indexed by the loop's counter, where
// gs_a was), and stores the outputs bound to arrays itself, scaled where
// the binding says: at the end, or in the loop that computes them
// (loopStores); it returns the others, in order, in its struct. Each
// value is still its own op on the same operands in the same order, so
// the results are the scalar form's bit for bit. Thread layout only (the
// lanes and tile layouts keep the scalar form).

// binding is the interface of a bound function: its parameters after
// gs_sh (and an accumulating function's gs_acc, gs_on), the spans of its
// per-trajectory inputs (all of them, in order) and of its outputs (all
// of them, in order; a span without a name is returned in the struct).
type binding struct {
	params  string
	in, out []span
}

// span is w consecutive inputs or outputs of a bound function, entries
// 0…w-1 of array name: entry j at name[j] or, strided, at
// name[j * gs_n + gs_i] (the ensemble's step-major arrays: trajectory
// gs_i of gs_n). An output stored is multiplied by scale, if set
// (scale * x). An output span without a name is returned.
type span struct {
	name    string
	w       int
	strided bool
	scale   string
}

// entry returns the C expression of entry j.
func (s span) entry(j int) string {
	if s.strided {
		return fmt.Sprintf("%s[%dLL * gs_n + gs_i]", s.name, j)
	}
	return fmt.Sprintf("%s[%d]", s.name, j)
}

// at returns the C expression of the entry at index idx (a C expression
// of the loop counter).
func (s span) at(idx string) string {
	if s.strided {
		return fmt.Sprintf("%s[(%s) * gs_n + gs_i]", s.name, idx)
	}
	return fmt.Sprintf("%s[%s]", s.name, idx)
}

// value returns the stored value of expression x (scaled).
func (s span) value(x string) string {
	if s.scale == "" {
		return x
	}
	return s.scale + " * " + x
}

// find returns the span of spans that holds entry k, its index, its
// first entry and its end.
func find(spans []span, k int) (q, from, to int) {
	for q := range spans {
		if k < from+spans[q].w {
			return q, from, from + spans[q].w
		}
		from += spans[q].w
	}
	return -1, from, from
}

// stores reports whether the binding stores any output.
func (b *binding) stores() bool {
	for _, s := range b.out {
		if s.name != "" && s.w > 0 {
			return true
		}
	}
	return false
}

// key identifies the binding, for deduplication.
func (b *binding) key() string {
	var sb strings.Builder
	sb.WriteString(b.params)
	for _, ss := range [][]span{b.in, b.out} {
		sb.WriteString(" |")
		for _, s := range ss {
			fmt.Fprintf(&sb, " %s:%d:%t:%s", s.name, s.w, s.strided, s.scale)
		}
	}
	return sb.String()
}

// check reports whether the binding's spans cover p's per-trajectory
// inputs and its outputs.
func (b *binding) check(p *tape.Program) error {
	nin, win, wout := 0, 0, 0
	for _, in := range p.Inputs {
		if !in.Shared {
			nin++
		}
	}
	for _, s := range b.in {
		if s.name == "" {
			return fmt.Errorf("cuda: program %s: an input span without an array", p.Name)
		}
		win += s.w
	}
	for _, s := range b.out {
		wout += s.w
	}
	if win != nin || wout != len(p.Outputs) {
		return fmt.Errorf("cuda: program %s has %d per-trajectory inputs and %d outputs, the binding %d and %d", p.Name, nin, len(p.Outputs), win, wout)
	}
	return nil
}

// boundFunction emits p as a bound function of binding b (accumulating
// with spec, if not nil; see AccFunc), once per program, binding and
// reductions, and returns its name:
//
//	GS_FUNC NAME_out NAME(const gs_real* gs_sh[, gs_real* gs_acc, bool gs_on], b.params);
//
// NAME_out holds the outputs of b's spans without a name that it does
// not accumulate, in order; an accumulating function stores the bound
// outputs only where gs_on is set (a lane that is off calls it too).
func (s *Source) boundFunction(p *tape.Program, spec *accSpec, b *binding) (string, error) {
	if s.Lanes {
		return "", fmt.Errorf("cuda: program %s: bound functions are the thread layout's", p.Name)
	}
	if err := p.Validate(); err != nil {
		return "", fmt.Errorf("cuda: program %s: %w", p.Name, err)
	}
	if err := b.check(p); err != nil {
		return "", err
	}
	key := "bound " + p.Hash() + " " + b.key()
	suffix := ""
	if spec != nil {
		key += " acc " + spec.key()
		suffix = "_acc"
	}
	if name, ok := s.hashes[key]; ok {
		return name, nil
	}
	name := s.newName(p.Name + suffix)
	e := &emitter{src: s, p: p, name: name, acc: spec, bind: b}
	code, err := e.emit("GS_FUNC")
	if err != nil {
		return "", err
	}
	s.hashes[key] = name
	s.addFunc(name, "GS_FUNC", code)
	return name, nil
}

// boundInput returns the C expression of per-trajectory input k (its
// place among them j) of a bound function.
func (e *emitter) boundInput(j int) string {
	q, from, _ := find(e.bind.in, j)
	return e.bind.in[q].entry(j - from)
}

// retIndex returns returned output m's entry in the function's struct:
// its place among the returned outputs that no span binds.
func (e *emitter) retIndex(m int) int {
	k := e.acc.index(m)
	if e.bind == nil {
		return k
	}
	for q := 0; q < m; q++ {
		if e.acc.returned(q) && e.boundOut(q) {
			k--
		}
	}
	return k
}

// boundOut reports whether output m is stored by the function (a span
// of its binding with a name holds it).
func (e *emitter) boundOut(m int) bool {
	if e.bind == nil {
		return false
	}
	q, _, _ := find(e.bind.out, m)
	return q >= 0 && e.bind.out[q].name != ""
}

// loopStore is a run of a bound function's outputs that a body position
// of a loop stores as it computes them: its value at repetition c is
// entry off + stride·c of output span q.
type loopStore struct {
	q, off, stride int
}

// loopStores finds the body positions of the loops whose values are
// outputs of a bound function that it stores (one output each, entries
// off + stride·c of one span, stride ≠ 0): their loops store them, so
// that they need no array (the gradient of 4,000 saved values would keep
// them in one of 32 kB until the function's end). It sets the loops'
// store and returns the outputs so stored (also e.loopStored).
func (r *rerollPlanner) loopStores() map[int]bool {
	e := r.e
	for _, l := range r.loops {
		l.store = make([]*loopStore, l.p)
	}
	if e.bind == nil || !e.bind.stores() {
		return nil
	}
	outs := map[tape.ID][]int{}
	for m, o := range e.p.Outputs {
		if e.acc.returned(m) {
			outs[r.res[o.ID]] = append(outs[r.res[o.ID]], m)
		}
	}
	stored := map[int]bool{}
	for _, l := range r.loops {
		for k := range l.store {
			if st, ms := r.storeOf(l, k, outs); st != nil {
				l.store[k] = st
				for _, m := range ms {
					stored[m] = true
				}
			}
		}
	}
	e.loopStored = stored
	return stored
}

// storeOf returns the store of loop l's body position k and the outputs
// it stores, or nil (loopStores); outs maps a value to the outputs it is.
func (r *rerollPlanner) storeOf(l *loop, k int, outs map[tape.ID][]int) (*loopStore, []int) {
	b := r.e.bind
	st := &loopStore{}
	ms := make([]int, l.n)
	for c := range ms {
		o := outs[r.order[l.at(c, k)]]
		if len(o) != 1 {
			return nil, nil
		}
		q, from, _ := find(b.out, o[0])
		if q < 0 || b.out[q].name == "" {
			return nil, nil
		}
		j := o[0] - from
		switch c {
		case 0:
			st.q, st.off = q, j
		case 1:
			st.stride = j - st.off
		}
		if q != st.q || j != st.off+st.stride*c || c > 0 && st.stride == 0 {
			return nil, nil
		}
		ms[c] = o[0]
	}
	return st, ms
}

// emitStore writes, in a loop's body, the store of x at st (an
// accumulating function's where gs_on is set).
func (e *emitter) emitStore(st *loopStore, x string) {
	sp := e.bind.out[st.q]
	guard := ""
	if e.acc != nil {
		guard = "if (gs_on) "
	}
	fmt.Fprintf(&e.sb, "    %s%s = %s;\n", guard, sp.at(affine(st.off, st.stride)), sp.value(x))
}

// emits reports whether the function's end writes output m (returns):
// an output it returns or stores there, not one it accumulates or a
// loop stores.
func (e *emitter) emits(m int) bool { return e.acc.returned(m) && !e.loopStored[m] }
