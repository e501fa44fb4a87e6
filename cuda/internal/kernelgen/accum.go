package kernelgen

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Accumulating functions. The reverse step of a field with many shared
// parameters (network weights) returns one cotangent per weight, the sum
// over the stages of the outputs of the field's VJP: returned as structs,
// thousands of values per stage would pass through local memory, and a
// thread would hold a copy of every weight's cotangent. AccFunc emits the
// step instead so that each call of the field's VJP adds its weight
// cotangents, summed over the warp's lanes as soon as 32 of them are
// computed (gs_acc32), to an accumulator: shared memory of the block, or
// the gradient itself. Every lane of the warp must then make the same
// calls; a lane with nothing to add passes gs_on false.

// accSpec makes an emitted function accumulate some of its outputs
// instead of returning them.
type accSpec struct {
	// reduce maps an output to the accumulator entry it is added to (a
	// callee that computes cotangents).
	reduce map[int]int
	// drop lists outputs that are neither returned nor reduced: sums of
	// the callees' reduced outputs, which the callees add themselves.
	drop map[int]bool
	// callees maps a callee to the spec of its calls.
	callees map[*tape.Program]*accSpec
	// terms are values the function adds to the accumulator itself (a
	// caller's terms that no callee adds).
	terms []accTerm
	// n is the number of accumulator entries.
	n int
}

// dropped reports whether output m is dropped.
func (a *accSpec) dropped(m int) bool { return a != nil && a.drop[m] }

// callee returns the spec of calls of f, or nil.
func (a *accSpec) callee(f *tape.Program) *accSpec {
	if a == nil {
		return nil
	}
	return a.callees[f]
}

// returned reports whether output m is part of the returned struct.
func (a *accSpec) returned(m int) bool {
	if a == nil {
		return true
	}
	_, r := a.reduce[m]
	return !r && !a.drop[m]
}

// index returns output m's position in the returned struct.
func (a *accSpec) index(m int) int {
	if a == nil {
		return m
	}
	k := 0
	for q := 0; q < m; q++ {
		if a.returned(q) {
			k++
		}
	}
	return k
}

// key identifies the spec's reductions, for deduplication.
func (a *accSpec) key() string {
	ks := make([]int, 0, len(a.reduce))
	for k := range a.reduce {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	var sb strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&sb, "%d:%d,", k, a.reduce[k])
	}
	return sb.String()
}

// accTerm is a value a function adds to accumulator entry j.
type accTerm struct {
	id tape.ID
	j  int
}

// planAcc finds whether outputs first…first+n-1 of p are sums whose terms
// are outputs of calls or values of p: then the callees add their terms to
// the accumulator themselves (where every call of a callee contributes its
// output k to the same entry once, and to nothing else), and p adds the
// rest. It returns the spec of p, or false.
func planAcc(p *tape.Program, first, n int) (*accSpec, bool) {
	if n <= 0 || first+n > len(p.Outputs) {
		return nil, false
	}
	uses := make([]int, len(p.Values))
	for _, v := range p.Values {
		for _, a := range v.Args {
			uses[a]++
		}
	}
	for _, o := range p.Outputs {
		uses[o.ID]++
	}
	// The terms of each sum: the leaves of its tree of single-use Adds.
	var leaves []accTerm
	var visit func(x tape.ID, j int, root bool)
	visit = func(x tape.ID, j int, root bool) {
		v := &p.Values[x]
		switch {
		case v.Op == ops.OpConst && v.Aux == 0:
		case v.Op == ops.OpAdd && (root || uses[x] == 1):
			visit(v.Args[0], j, false)
			visit(v.Args[1], j, false)
		default:
			leaves = append(leaves, accTerm{x, j})
		}
	}
	spec := &accSpec{drop: map[int]bool{}, callees: map[*tape.Program]*accSpec{}, n: n}
	for j := 0; j < n; j++ {
		o := p.Outputs[first+j]
		if o.Sum || uses[o.ID] != 1 && p.Values[o.ID].Op == ops.OpAdd {
			return nil, false
		}
		spec.drop[first+j] = true
		visit(o.ID, j, true)
	}
	// Candidate call terms: single-use Extracts of calls, by callee and
	// output; a (callee, output) pair is reduced by the callee if every
	// call of the callee has exactly one such term for it, all for the
	// same entry, and no callee output goes to two entries.
	type ko struct {
		f *tape.Program
		k int
	}
	calls := map[*tape.Program]int{} // calls of each callee
	for _, v := range p.Values {
		if v.Op == ops.OpCall {
			calls[p.Funcs[int(v.Aux)]]++
		}
	}
	entry := map[ko]int{}
	count := map[ko]int{}
	bad := map[ko]bool{}
	for _, l := range leaves {
		v := &p.Values[l.id]
		if v.Op != ops.OpExtract || uses[l.id] != 1 || p.Values[v.Args[0]].Op != ops.OpCall {
			continue
		}
		key := ko{p.Funcs[int(p.Values[v.Args[0]].Aux)], int(v.Aux)}
		if j, ok := entry[key]; ok && j != l.j {
			bad[key] = true
		}
		entry[key] = l.j
		count[key]++
	}
	// Every Extract of a candidate output must be one of those terms.
	for i, v := range p.Values {
		if v.Op != ops.OpExtract || p.Values[v.Args[0]].Op != ops.OpCall {
			continue
		}
		key := ko{p.Funcs[int(p.Values[v.Args[0]].Aux)], int(v.Aux)}
		if _, ok := entry[key]; ok && uses[i] != 1 {
			bad[key] = true
		}
	}
	for key, c := range count {
		if c != calls[key.f] || key.f.Outputs[key.k].Sum {
			bad[key] = true
		}
	}
	for key, j := range entry {
		if bad[key] {
			continue
		}
		fs := spec.callees[key.f]
		if fs == nil {
			fs = &accSpec{reduce: map[int]int{}, n: n}
			spec.callees[key.f] = fs
		}
		fs.reduce[key.k] = j
	}
	for _, fs := range spec.callees {
		seen := map[int]bool{}
		for _, j := range fs.reduce {
			if seen[j] {
				return nil, false
			}
			seen[j] = true
		}
	}
	// The other terms p adds itself.
	for _, l := range leaves {
		v := &p.Values[l.id]
		if v.Op == ops.OpExtract && p.Values[v.Args[0]].Op == ops.OpCall {
			key := ko{p.Funcs[int(p.Values[v.Args[0]].Aux)], int(v.Aux)}
			if fs := spec.callees[key.f]; fs != nil {
				if _, ok := fs.reduce[key.k]; ok {
					continue
				}
			}
		}
		spec.terms = append(spec.terms, l)
	}
	return spec, true
}

// AccFunc emits p so that its outputs first…first+n-1, each a sum of
// outputs of calls (the shared-parameter cotangents of a reverse step,
// sums over the stages of the field VJP's), are added to an accumulator
// by the callees instead of returned:
//
//	GS_FUNC NAME_out NAME(const gs_real* gs_sh, gs_real* gs_acc, bool gs_on, gs_real a0, ...);
//
// NAME_out holds the other outputs, in order. Each callee sums its
// contributions over the lanes of the warp whose gs_on is set and adds
// them to gs_acc[0:n] (atomically on the device; see gs_acc32), so every
// lane of a warp must call NAME together. ok is false, and nothing is
// emitted, if p's outputs do not have that form; Func then emits it.
func (s *Source) AccFunc(p *tape.Program, first, n int) (name string, ok bool, err error) {
	if err := p.Validate(); err != nil {
		return "", false, err
	}
	spec, ok := planAcc(p, first, n)
	if !ok {
		return "", false, nil
	}
	name, err = s.accFunction(p, "GS_FUNC", spec)
	return name, err == nil, err
}

// accFunction emits p with spec, once per program and reductions.
func (s *Source) accFunction(p *tape.Program, qual string, spec *accSpec) (string, error) {
	key := fmt.Sprintf("acc %s %s %t", p.Hash(), spec.key(), s.Lanes && s.accShared)
	if name, ok := s.hashes[key]; ok {
		return name, nil
	}
	name := s.newName(p.Name + "_acc")
	e := &emitter{src: s, p: p, name: name, acc: spec}
	code, err := e.emit(qual)
	if err != nil {
		return "", err
	}
	s.hashes[key] = name
	s.addFunc(name, qual, code)
	return name, nil
}

// accTerms returns the terms the function adds (its reduced outputs and
// its own terms), by entry, then value.
func (e *emitter) accTerms() []accTerm {
	terms := append([]accTerm(nil), e.acc.terms...)
	for m, j := range e.acc.reduce {
		terms = append(terms, accTerm{e.p.Outputs[m].ID, j})
	}
	sort.Slice(terms, func(a, b int) bool {
		if terms[a].j != terms[b].j {
			return terms[a].j < terms[b].j
		}
		return terms[a].id < terms[b].id
	})
	return terms
}

// accGroups returns the groups of terms the function adds (accTerms), at
// most one per entry and 32 consecutive entries per group, by the value
// after which each group is complete.
func (e *emitter) accGroups() map[tape.ID][][]accTerm {
	terms := e.accTerms()
	// Group (block g of entries, r-th term of an entry).
	type gk struct{ g, r int }
	groups := map[gk][]accTerm{}
	var order []gk
	for q, t := range terms {
		r := 0
		for q2 := q - 1; q2 >= 0 && terms[q2].j == t.j; q2-- {
			r++
		}
		key := gk{t.j / 32, r}
		if groups[key] == nil {
			order = append(order, key)
		}
		groups[key] = append(groups[key], t)
	}
	at := map[tape.ID][][]accTerm{}
	for _, key := range order {
		ts := groups[key]
		last := tape.ID(0)
		for _, t := range ts {
			last = max(last, t.id)
		}
		at[last] = append(at[last], ts)
	}
	return at
}

// emitReduce writes the reduction of a group of terms (entries of one
// block of 32).
func (e *emitter) emitReduce(ts []accTerm) {
	g := ts[0].j / 32
	x := make([]string, 32)
	for k := range x {
		x[k] = "0"
	}
	for _, t := range ts {
		x[t.j%32] = e.ref(t.id)
	}
	fmt.Fprintf(&e.sb, "  { const gs_real gx[32] = {%s}; gs_acc32(gs_acc + %d, gx, gs_on, %d); }\n",
		strings.Join(x, ", "), 32*g, min(32, e.acc.n-32*g))
}
