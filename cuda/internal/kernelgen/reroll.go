package kernelgen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Rerolled loops (Source.reroll). The step programs of an explicit
// method are traced component by component: a stage's combination
// y + h Σ a_ij k_j is, for each c < d, the same few Muls and Adds on
// y[c] and the stages' k_j[c]; the reverse step's cotangents, the error
// estimate and its norm, the continuous extension's coefficients and
// their reverse likewise. Unrolled, a gradient kernel of Lorenz-96 with
// d = 64 and Tsit5 holds 21,000 statements, about 130 a component, and
// the device compiler's time grows with them. From rerollDim the thread
// layout's functions emit each run of such values as a loop over the
// components: the run's body (the values of one component, in the
// program's order) is written once, its operands indexed by the loop's
// counter, the values used after it kept in arrays. Every value is still
// its own op on the same operands in the same order, so the results are
// the unrolled code's bit for bit (device code is compiled without
// contraction).
//
// A run is found on the function's order of emission: from a position s,
// a body of P values (P ≤ rerollMaxBody) repeated n ≥ rerollMinRun
// times, each repetition's values of the same ops and aux as the first's,
// and each operand, over the repetitions c = 0…n-1, one of
//
//   - the same value, computed before the run (argInv);
//   - a value of the same repetition, earlier in the body (argBody);
//   - a value of the previous repetition, the first repetition's
//     computed before the run (argCarry: a chained sum, such as the
//     error norm's);
//   - entry off + stride·c of an array: an earlier run's values, a
//     call's returned struct or the shared inputs (argIndex);
//   - values computed before the run, gathered into an array before it
//     (argGather).
//
// The longest run (most values) from s is taken, if any, and the search
// goes on after it, the run that saves the most statements (loop.saved)
// and none that saves none. The function's per-trajectory inputs and the
// components of tuples (calls' returned structs, LU factors and solves)
// are read where used (a parameter a<k>, t<ID>.v[m], t<ID>[m]) rather
// than copied into locals first, an Attach is its operand, and the
// returned outputs that are runs, of one value or of strided array
// entries, with a body of up to rerollMaxReturn outputs, are copied by
// loops too.
const (
	// rerollLossInputs is the number of saved values (save times × Dim)
	// from which a loss's functions reroll, whatever the state's size.
	rerollLossInputs = 64
	rerollDim        = 16
	rerollMinRun     = 4
	rerollMaxBody    = 64
)

// rerollLoss reports whether the loss functions of kernel v, of a state
// of d components, emit runs of values as loops whatever rerollPlan says
// of the plan, and are bound (bind.go, directLoss): in the thread layout,
// a loss of at least rerollLossInputs saved values (4,000 at 1,000 save
// times of four components) repeats its few ops per value (Kepler's
// gradient kernel with the sum of the squares of 1,000 save times: 1.5 MB
// of source unrolled, 339 kB rolled, 175 kB rolled and bound, its loss
// VJP's 4,005 scalar parameters and struct of 4,006 reals gone).
func rerollLoss(v Config, d int) bool {
	return !v.Lanes && !v.Unrolled && v.Saves*d >= rerollLossInputs
}

// rerollPlan reports whether the kernels of pl emit runs of values as
// loops: an explicit method's from a state of rerollDim components, a
// Rosenbrock method's (its trial step factors W) at every d, whose
// straight-line Jacobian, W and stage sums run to ~50·d² values below
// the matrix-free path. Measured (statements of the gradient kernels,
// Tuning.unrolled against rerolled, cuda's TestRerolledSize): HIRES (d =
// 8) with Rodas5P 14,190 → 5,182, Pollution (20) 15,039 → 4,222, the
// Brusselator (64) 45,925 → 6,179, and with tuples read in place, returns
// rolled and runs chosen by the statements they save, 4,084, 3,095 and
// 2,730 (cuda's TestRerolledSizeRosenbrock's cases, which had 4,886,
// 3,939 and 5,959 before those); below d = 16 an explicit method's
// unrolled stages fit a thread's registers and its sources are small.
func rerollPlan(pl *ode.Plan) bool {
	if pl.Trial == nil {
		return false
	}
	for _, v := range pl.Trial.Values {
		if ops.IsFactor(v.Op) {
			return true
		}
	}
	return pl.Dim >= rerollDim
}

// loopArgKind is how an operand of a loop's body is read (see rerolled
// loops above).
type loopArgKind uint8

const (
	argInv loopArgKind = iota
	argBody
	argCarry
	argIndex
	argGather
)

// loopArg is an operand of a body value.
type loopArg struct {
	kind loopArgKind
	// k is the body position (argBody, argCarry).
	k int
	// src, off and stride are the array and the index off + stride·c
	// (argIndex).
	src         arraySrc
	off, stride int
	// seq holds the operand's values by repetition, as far as checked.
	seq []tape.ID
}

// loop is a run of the function's order: n repetitions of a body of p
// values from position start.
type loop struct {
	idx, start, p, n int
	// from and to are the loop's span in the function's order (loopsOf).
	from, to int
	args     [][]loopArg // by body position and operand
	// arr marks the body positions whose values are used outside their
	// repetition, kept in arrays; last those of which only the last
	// repetition's value is, where the position is carried: that value
	// is then its carried operand's variable after the loop (lastVar).
	arr     []bool
	lastVar []string
	// store holds, by body position, the bound outputs its values are
	// (a bound function's: loopStores), stored in the loop, or nil.
	store []*loopStore
}

// saved returns the statements that loop l saves over the values it
// replaces: their n·p less its body, its head and, by operand, a carried
// operand's two statements (its variable, its update) and a gathered
// one's array (the arrays kept of its values, arrays, are not yet known).
func (l *loop) saved() int {
	cost := l.p + 1
	for _, args := range l.args {
		for _, a := range args {
			switch a.kind {
			case argCarry:
				cost += 2
			case argGather:
				cost++
			}
		}
	}
	return l.n*l.p - cost
}

// at returns the order position of repetition c's body value k.
func (l *loop) at(c, k int) int { return l.start + c*l.p + k }

// loopPlace is a value's place in a loop (loop -1: none).
type loopPlace struct{ loop, k, c int32 }

// arraySrc is an array that an operand is read from by index: a loop's
// array (kind 0: loop a, body position b), a call's returned struct
// (kind 1: the call's value a), the shared inputs (kind 2), a local
// tuple array, an LU factor or solve (kind 3: its value a), or the
// function's per-trajectory inputs, copied into an array gs_a before the
// first loop that indexes them (kind 4; a bound function's span a of
// them, read in place: bind.go), or a wide reverse step's y read from
// the record's row (kind 5: recName, emitter.inRec).
type arraySrc struct {
	kind uint8
	a, b int32
}

// name returns the array's C name.
func (x arraySrc) name() string {
	switch x.kind {
	case 0:
		return loopArray(int(x.a), int(x.b))
	case 1:
		return fmt.Sprintf("t%d.v", x.a)
	case 3:
		return fmt.Sprintf("t%d", x.a)
	case 4:
		return "gs_a"
	case 5:
		return recName
	}
	return "gs_sh"
}

// rerollPlanner finds the loops of a function.
type rerollPlanner struct {
	e     *emitter
	order []tape.ID
	// pos and in are by value: its position in order (-1 if none), its
	// place in a loop.
	pos []int
	in  []loopPlace
	// res is by value: the value it stands for, itself but for an
	// Attach (its first operand's, resolved likewise: emitted as none).
	res   []tape.ID
	loops []*loop
	// skip marks values that may not be in a loop (their reductions
	// follow them, emitReduce).
	skip map[tape.ID]bool
}

// loopable reports whether value id can be a body value.
func (r *rerollPlanner) loopable(id tape.ID) bool {
	if r.skip[id] {
		return false
	}
	v := &r.e.p.Values[id]
	if v.Op == ops.OpInput || v.Op == ops.OpAttach || v.Op == ops.OpExtract || ops.IsTuple(v.Op) {
		return false
	}
	return ops.Lookup(v.Op).C != nil
}

// index returns the array that holds value id outside a loop and its
// index there: an earlier loop's array, a call's returned struct (an
// Extract) or the shared inputs.
func (r *rerollPlanner) index(id tape.ID) (arraySrc, int, bool) {
	if pl := r.in[id]; pl.loop >= 0 {
		return arraySrc{0, pl.loop, pl.k}, int(pl.c), true
	}
	v := &r.e.p.Values[id]
	switch v.Op {
	case ops.OpExtract:
		t := &r.e.p.Values[v.Args[0]]
		if t.Op == ops.OpCall && r.e.calleeAcc[int(t.Aux)] == nil {
			return arraySrc{1, int32(v.Args[0]), 0}, int(v.Aux), true
		}
		if t.Op != ops.OpCall {
			return arraySrc{3, int32(v.Args[0]), 0}, int(v.Aux), true
		}
	case ops.OpInput:
		if j := r.e.shIndex[int(v.Aux)]; j >= 0 {
			return arraySrc{2, 0, 0}, r.e.shPos(j), true
		}
		if j := r.e.ownIndex(int(v.Aux)); r.e.inRec.holds(j) {
			return arraySrc{5, 0, 0}, j - r.e.inRec.from, true
		}
		j := r.e.ownPos(int(v.Aux))
		if r.e.bind != nil {
			// A bound function's span (bind.go): a run indexes one.
			q, from, _ := find(r.e.bind.in, j)
			return arraySrc{4, int32(q), 0}, j - from, true
		}
		return arraySrc{4, 0, 0}, j, true
	}
	return arraySrc{}, 0, false
}

// ownPos returns per-trajectory input k's entry in gs_a: its place
// among the function's inputs that are not shared (ownIndex), or where
// inPos puts that place.
func (e *emitter) ownPos(k int) int {
	j := e.ownIndex(k)
	if e.inPos != nil {
		return e.inPos[j]
	}
	return j
}

// ownIndex returns per-trajectory input k's place among the function's
// inputs that are not shared.
func (e *emitter) ownIndex(k int) int {
	j := 0
	for q := 0; q < k; q++ {
		if e.shIndex[q] < 0 {
			j++
		}
	}
	return j
}

// inSpan is n consecutive per-trajectory inputs of a function from
// from (counted as ownIndex counts; n = 0: none).
type inSpan struct{ from, n int }

// holds reports whether s holds per-trajectory input j (ownIndex).
func (s inSpan) holds(j int) bool { return j >= s.from && j < s.from+s.n }

// recName is the array a wide reverse step reads its input y from
// where it reads it from the record's row (emitter.inRec).
const recName = "gs_ry"

// ownArray writes gs_a, the function's per-trajectory inputs a<k> in
// order, unless written.
func (e *emitter) ownArray() {
	if e.ownArr {
		return
	}
	e.ownArr = true
	var xs []string
	for k := range e.p.Inputs {
		if e.shIndex[k] < 0 {
			xs = append(xs, fmt.Sprintf("a%d", k))
		}
	}
	fmt.Fprintf(&e.sb, "  const gs_real gs_a[%d] = {%s};\n", len(xs), strings.Join(xs, ", "))
}

// loopArray names the array of loop l's body position k.
func loopArray(l, k int) string { return fmt.Sprintf("gs_l%d_%d", l, k) }

// carryName names the carried operand j of loop l's body position k.
func carryName(l, k, j int) string { return fmt.Sprintf("gs_r%d_%d_%d", l, k, j) }

// classify sets the kind of operand a of body value k from its first
// two repetitions' values x0, x1.
func (r *rerollPlanner) classify(l *loop, k int, x0, x1 tape.ID) (loopArg, bool) {
	a := loopArg{seq: []tape.ID{x0, x1}}
	p0, p1 := r.pos[x0], r.pos[x1]
	before := p0 < l.start && p1 < l.start
	switch {
	case p0 >= l.start && p0 < l.start+k && p1 == p0+l.p:
		a.kind, a.k = argBody, p0-l.start
	case p0 < l.start && p1 >= l.start && p1 < l.start+l.p:
		a.kind, a.k = argCarry, p1-l.start
	case x0 == x1 && p0 < l.start:
		a.kind = argInv
	case before:
		s0, i0, ok0 := r.index(x0)
		s1, i1, ok1 := r.index(x1)
		if ok0 && ok1 && s0 == s1 && i1 != i0 {
			a.kind, a.src, a.off, a.stride = argIndex, s0, i0, i1-i0
		} else {
			a.kind = argGather
		}
	default:
		return a, false
	}
	return a, true
}

// extend checks operand a's value x at repetition c (≥ 2).
func (r *rerollPlanner) extend(l *loop, a *loopArg, c int, x tape.ID) bool {
	px := r.pos[x]
	ok := false
	switch a.kind {
	case argBody:
		ok = px == l.at(c, a.k)
	case argCarry:
		ok = px == l.at(c-1, a.k)
	case argInv:
		ok = x == a.seq[0]
	case argIndex:
		s, i, found := r.index(x)
		ok = found && s == a.src && i == a.off+a.stride*c && px < l.start
	case argGather:
		ok = px < l.start
	}
	if !ok && (a.kind == argInv || a.kind == argIndex) && px < l.start {
		a.kind, ok = argGather, true
	}
	if ok {
		a.seq = append(a.seq, x)
	}
	return ok
}

// same reports whether value u repeats body value u0 as far as its op
// and aux go.
func (r *rerollPlanner) same(u0, u tape.ID) bool {
	v0, v := &r.e.p.Values[u0], &r.e.p.Values[u]
	return v.Op == v0.Op && len(v.Args) == len(v0.Args) && v.Aux == v0.Aux && r.loopable(u)
}

// try returns the run from position s with a body of p values, or nil.
func (r *rerollPlanner) try(s, p int) *loop {
	if s+p*rerollMinRun > len(r.order) || !r.same(r.order[s], r.order[s+p]) {
		return nil
	}
	l := &loop{start: s, p: p, n: 1, args: make([][]loopArg, p)}
	for k := 0; k < p; k++ {
		if !r.loopable(r.order[s+k]) {
			return nil
		}
	}
	var kinds []loopArgKind // the operands' kinds before repetition c
	for c := 1; l.at(c, p-1) < len(r.order); c++ {
		ok := true
		kinds = kinds[:0]
		for k := range l.args {
			for _, a := range l.args[k] {
				kinds = append(kinds, a.kind)
			}
		}
		for k := 0; k < p && ok; k++ {
			u0, u := r.order[s+k], r.order[l.at(c, k)]
			if !r.same(u0, u) {
				ok = false
				break
			}
			args0, args := r.e.p.Values[u0].Args, r.e.p.Values[u].Args
			if c == 1 {
				l.args[k] = make([]loopArg, len(args))
				for j := range args {
					a, good := r.classify(l, k, r.res[args0[j]], r.res[args[j]])
					if !good {
						ok = false
						break
					}
					l.args[k][j] = a
				}
				continue
			}
			for j := range args {
				if !r.extend(l, &l.args[k][j], c, r.res[args[j]]) {
					ok = false
					break
				}
			}
		}
		if !ok {
			// Repetition c is not the run's: undo what it changed (the
			// kinds set by the first, c = 1, matter no more).
			q := 0
			for k := range l.args {
				for j := range l.args[k] {
					if c > 1 {
						l.args[k][j].kind = kinds[q]
					}
					q++
				}
			}
			break
		}
		l.n = c + 1
	}
	if l.n < rerollMinRun {
		return nil
	}
	// A carried or gathered operand's values past the run's end were
	// not checked: trim seq to n.
	for k := range l.args {
		for j := range l.args[k] {
			if a := &l.args[k][j]; len(a.seq) > l.n {
				a.seq = a.seq[:l.n]
			}
		}
	}
	return l
}

// dropShort takes out of the plan the loops of fewer repetitions than
// emitter.minSplit (a wide function's Config.WideMinSplit) without a
// carried operand, whose values are then statements of their own; the
// other loops stay as planned, their operands read from a loop taken out
// gathered instead (argGather: the same values), so that every loop
// left, and above all a chained sum's, which a wide function splits over
// the lanes in partial sums (carrySum), is the loop of the plan without
// a minimum, and the results the same bit for bit.
func (r *rerollPlanner) dropShort() {
	idx := make([]int32, len(r.loops)) // by loop: its index in the plan left, -1 if taken out
	kept := r.loops[:0:0]
	for q, l := range r.loops {
		idx[q] = -1
		if r.splits(l) {
			idx[q] = int32(len(kept))
			kept = append(kept, l)
		}
	}
	for q, l := range r.loops {
		for c := 0; c < l.n; c++ {
			for k := 0; k < l.p; k++ {
				if pl := &r.in[r.order[l.at(c, k)]]; idx[q] < 0 {
					*pl = loopPlace{loop: -1}
				} else {
					pl.loop = idx[q]
				}
			}
		}
	}
	for q, l := range kept {
		l.idx = q
		for k := range l.args {
			for j := range l.args[k] {
				if a := &l.args[k][j]; a.kind == argIndex && a.src.kind == 0 {
					if to := idx[a.src.a]; to < 0 {
						a.kind = argGather
					} else {
						a.src.a = to
					}
				}
			}
		}
	}
	r.loops = kept
}

// splits reports whether loop l stays a loop of a wide function with a
// minimum (emitter.minSplit, Config.WideMinSplit; dropShort): from
// minSplit repetitions, or with a carried operand (a chained sum: split
// over the lanes, its partial sums are added in another order than the
// statements' would be).
func (r *rerollPlanner) splits(l *loop) bool {
	if l.n >= r.e.minSplit {
		return true
	}
	for _, args := range l.args {
		for _, a := range args {
			if a.kind == argCarry {
				return true
			}
		}
	}
	return false
}

// planLoops finds the loops of the function's order (ids, in emission
// order; extracts maps the components of tuples (calls' results, LU
// factors and solves), not in ids, to their tuples; aliases the
// Attaches, not in ids, to the values they stand for) and which of their
// values live in arrays.
func (e *emitter) planLoops(ids []tape.ID, extracts, aliases map[tape.ID]tape.ID, skip map[tape.ID]bool) []*loop {
	nv := len(e.p.Values)
	r := &rerollPlanner{e: e, order: ids, pos: make([]int, nv), in: make([]loopPlace, nv), res: make([]tape.ID, nv), skip: skip}
	for i := range r.pos {
		r.pos[i], r.in[i], r.res[i] = -1, loopPlace{loop: -1}, tape.ID(i)
	}
	for i, id := range ids {
		r.pos[id] = i
	}
	for x, call := range extracts {
		r.pos[x] = r.pos[call] // computed with the tuple
	}
	for i := range r.res { // an Attach follows its operand
		if a, ok := aliases[tape.ID(i)]; ok {
			r.res[i] = r.res[a]
		}
	}
	for s := 0; s < len(ids); {
		var best *loop
		for p := 1; p <= rerollMaxBody; p++ {
			if l := r.try(s, p); l != nil && l.saved() > 0 && (best == nil || l.saved() > best.saved()) {
				best = l
			}
		}
		if best == nil {
			s++
			continue
		}
		best.idx = len(r.loops)
		r.loops = append(r.loops, best)
		for c := 0; c < best.n; c++ {
			for k := 0; k < best.p; k++ {
				r.in[ids[best.at(c, k)]] = loopPlace{int32(best.idx), int32(k), int32(c)}
			}
		}
		s += best.n * best.p
	}
	if r.e.minSplit > 0 {
		r.dropShort()
	}
	r.arrays()
	return r.loops
}

// arrays marks the loops' body positions whose values are used outside
// their repetition: by a value outside the loop (or by the loop's next
// repetition otherwise than as its carried operand), as an output, or
// by the accumulator's reductions (its terms and reduced outputs).
// A carried position of which only the last repetition's value is used
// so needs no array: its carried operand's variable holds that value
// after the loop.
func (r *rerollPlanner) arrays() {
	const (
		none = iota
		last // only the last repetition's value
		any
	)
	use := make([][]uint8, len(r.loops))
	for q, l := range r.loops {
		use[q] = make([]uint8, l.p)
	}
	mark := func(id tape.ID) {
		if pl := r.in[id]; pl.loop >= 0 {
			u := uint8(any)
			if int(pl.c) == r.loops[pl.loop].n-1 {
				u = last
			}
			use[pl.loop][pl.k] = max(use[pl.loop][pl.k], u)
		}
	}
	stored := r.loopStores()
	for m, o := range r.e.p.Outputs {
		if r.e.acc.returned(m) && !stored[m] {
			mark(r.res[o.ID])
		}
	}
	if r.e.acc != nil {
		// The accumulator's terms and reduced outputs are read after
		// the loops, by the reductions (emitReduce).
		for _, t := range r.e.acc.terms {
			mark(r.res[t.id])
		}
		for m := range r.e.acc.reduce {
			mark(r.res[r.e.p.Outputs[m].ID])
		}
	}
	for _, id := range r.order {
		v := &r.e.p.Values[id]
		user := r.in[id]
		inLoop := user.loop >= 0
		for j, a := range v.Args {
			if v.Op == ops.OpAttach && j == 1 {
				break
			}
			if inLoop {
				k := r.loops[user.loop].args[user.k][j].kind
				if k == argBody || k == argCarry && user.c > 0 {
					continue
				}
			}
			mark(r.res[a])
		}
	}
	for q, l := range r.loops {
		l.arr, l.lastVar = make([]bool, l.p), make([]string, l.p)
		for k := range l.args {
			for j, a := range l.args[k] {
				if a.kind == argCarry {
					l.lastVar[a.k] = carryName(l.idx, k, j)
				}
			}
		}
		for k, u := range use[q] {
			if u != last || l.lastVar[k] == "" {
				l.arr[k] = u != none
				l.lastVar[k] = ""
			}
		}
	}
}

// emitLoop writes loop l: its gathers (gathered, by their values, holds
// those written before), arrays and carried operands, then the loop.
func (e *emitter) emitLoop(l *loop, order []tape.ID, lines []string, gathered map[string]string) {
	w := &e.sb
	ids := func(c, k int) tape.ID { return order[l.at(c, k)] }
	first, last := ids(0, 0), ids(l.n-1, l.p-1)
	fmt.Fprintf(w, "  // v%d … v%d: %d components of %d values\n", first, last, l.n, l.p)
	ref := make([][]string, l.p)
	loads := false     // the loop reads a bound function's inputs in global memory
	var ahead []string // those inputs' entries loadAhead repetitions on (prefetched)
	for k := range l.args {
		ref[k] = make([]string, len(l.args[k]))
		for j := range l.args[k] {
			a := &l.args[k][j]
			switch a.kind {
			case argInv:
				ref[k][j] = e.ref(a.seq[0])
			case argBody:
				ref[k][j] = fmt.Sprintf("gs_u%d", a.k)
			case argCarry:
				name := carryName(l.idx, k, j)
				fmt.Fprintf(w, "  gs_real %s = %s;\n", name, e.ref(a.seq[0]))
				ref[k][j] = name
			case argIndex:
				if a.src.kind == 4 && e.bind != nil {
					in := e.bind.in[a.src.a]
					ref[k][j] = in.at(affine(a.off, a.stride))
					loads = true
					if in.strided {
						ahead = append(ahead, in.at(affine(a.off+a.stride*loadAhead, a.stride)))
					}
					break
				}
				if a.src.kind == 4 {
					e.ownArray()
				}
				ref[k][j] = fmt.Sprintf("%s[%s]", a.src.name(), affine(a.off, a.stride))
			case argGather:
				xs := make([]string, len(a.seq))
				for c, x := range a.seq {
					xs[c] = e.ref(x)
				}
				key := strings.Join(xs, ", ")
				name, ok := gathered[key]
				if !ok {
					name = fmt.Sprintf("gs_g%d", len(gathered))
					gathered[key] = name
					fmt.Fprintf(w, "  const gs_real %s[%d] = {%s};\n", name, l.n, key)
				}
				ref[k][j] = name + "[gs_c]"
			}
		}
	}
	for k, on := range l.arr {
		if on {
			fmt.Fprintf(w, "  gs_real %s[%d];\n", loopArray(l.idx, k), l.n)
		}
	}
	head := loopHead(l.n)
	if loads {
		head = loadLoopHead(l.n)
	}
	fmt.Fprintf(w, "%s {\n", head)
	if len(ahead) > 0 && l.n > loadAhead {
		// The entries a stretch of repetitions on, asked for now.
		slices.Sort(ahead)
		fmt.Fprintf(w, "    if (gs_c < %d) {\n", l.n-loadAhead)
		for _, x := range slices.Compact(ahead) {
			fmt.Fprintf(w, "      GS_PREFETCH(&%s);\n", x)
		}
		w.WriteString("    }\n")
	}
	for k := 0; k < l.p; k++ {
		id := ids(0, k)
		v := &e.p.Values[id]
		expr := ops.Lookup(v.Op).C(ref[k], v.Aux)
		if v.Op == ops.OpConst {
			expr = "(gs_real)" + expr
		}
		fmt.Fprintf(w, "    const gs_real gs_u%d = %s;  // %s\n", k, expr, commentOf(lines[id]))
		if l.arr[k] {
			fmt.Fprintf(w, "    %s[gs_c] = gs_u%d;\n", loopArray(l.idx, k), k)
		}
		if st := l.store[k]; st != nil {
			e.emitStore(st, fmt.Sprintf("gs_u%d", k))
		}
	}
	for k := range l.args {
		for j, a := range l.args[k] {
			if a.kind == argCarry {
				fmt.Fprintf(w, "    %s = gs_u%d;\n", carryName(l.idx, k, j), a.k)
			}
		}
	}
	w.WriteString("  }\n")
	for c := 0; c < l.n; c++ {
		for k, on := range l.arr {
			if on {
				e.setArray(ids(c, k), loopArray(l.idx, k), c)
			}
		}
	}
	for k, x := range l.lastVar {
		if x != "" {
			e.expr[ids(l.n-1, k)] = x
		}
	}
}

// affine returns the C index off + stride·gs_c.
func affine(off, stride int) string {
	var x string
	switch stride {
	case 1:
		x = "gs_c"
	case -1:
		x = "-gs_c"
	default:
		x = fmt.Sprintf("%d * gs_c", stride)
	}
	switch {
	case off == 0 && stride == 1:
		return x
	case off == 0:
		return x
	case stride < 0:
		return fmt.Sprintf("%d - %s", off, strings.TrimPrefix(x, "-"))
	}
	return fmt.Sprintf("%d + %s", off, x)
}

// loopsOf returns the values the function's loops are planned on (its
// order less the components of tuples, which are read where used, and
// the Attaches, which are their first operands: rerolled units emit
// neither) and its loops by the position in order they start at; none
// unless the unit rerolls (thread layout only). A loop's span in order
// (to) may hold such values too. Values followed by reductions (groups)
// stay out of loops.
func (e *emitter) loopsOf(order []laneNode, groups map[tape.ID][][]accTerm) ([]tape.ID, map[int]*loop) {
	if !e.src.reroll || e.lp != nil || e.src.Lanes {
		return nil, nil
	}
	var ids []tape.ID
	var full []int // full[i]: ids[i]'s position in order
	skip := make(map[tape.ID]bool)
	extracts, aliases := make(map[tape.ID]tape.ID), make(map[tape.ID]tape.ID)
	for i, nd := range order {
		v := &e.p.Values[nd.Id]
		if v.Op == ops.OpExtract && (e.p.Values[v.Args[0]].Op == ops.OpCall || len(groups[nd.Id]) == 0) {
			extracts[nd.Id] = v.Args[0]
			continue
		}
		if v.Op == ops.OpAttach && len(groups[nd.Id]) == 0 {
			aliases[nd.Id] = v.Args[0]
			continue
		}
		ids = append(ids, nd.Id)
		full = append(full, i)
		if len(groups[nd.Id]) > 0 {
			skip[nd.Id] = true
		}
	}
	at := make(map[int]*loop)
	for _, l := range e.planLoops(ids, extracts, aliases, skip) {
		l.from, l.to = full[l.start], full[l.start+l.n*l.p-1]+1
		at[l.from] = l
	}
	return ids, at
}

// loopHead returns the head of a loop of n repetitions over gs_c,
// indented: kept a loop on the device (unrolled, it would be the
// statements it replaced; host compilers ignore the pragma, as the
// prelude's).
func loopHead(n int) string {
	return fmt.Sprintf("#pragma unroll 1\n  for (int gs_c = 0; gs_c < %d; gs_c++)", n)
}

// loadUnroll is how many repetitions of a loop that reads global memory
// (a bound loss's saved values: kernelgen's bind.go) the device compiler
// unrolls: a loop kept whole issues each repetition's loads after the
// last one's arithmetic, so a thread of a small ensemble (a warp or two
// per multiprocessor, nothing to hide the latency) waits for memory once
// per saved value.
const loadUnroll = 8

// loadAhead is how many repetitions ahead a loop that reads the
// ensemble's arrays in global memory (a bound loss's saved values) asks
// for the entries it will read (GS_PREFETCH): sixteen unrolled stretches
// of loadUnroll, about a memory latency's worth of repetitions (a few
// instructions each), so that a thread alone on its multiprocessor finds
// them in its L1 cache instead of waiting for memory once a stretch (at
// 1,000 save times of four components, 500 waits a loop). Its lines, 256
// bytes a warp an entry, are 32 kB a warp for each array the loop reads.
const loadAhead = 16 * loadUnroll

// loadLoopHead is loopHead for a loop that reads global memory: unrolled
// loadUnroll-fold on the device, so that a stretch of repetitions' loads
// are in flight at once. The order of the operations, and so the results,
// are the same (each value is still its own op on the same operands).
func loadLoopHead(n int) string {
	return fmt.Sprintf("#pragma unroll %d\n  for (int gs_c = 0; gs_c < %d; gs_c++)", loadUnroll, n)
}

// arrayRef is entry idx of array name.
type arrayRef struct {
	name string
	idx  int
}

// setArray makes value id entry idx of array name.
func (e *emitter) setArray(id tape.ID, name string, idx int) {
	if e.arrays == nil {
		e.arrays = make(map[tape.ID]arrayRef)
	}
	e.arrays[id] = arrayRef{name, idx}
	e.expr[id] = fmt.Sprintf("%s[%d]", name, idx)
}

// tuplePart makes Extract id, a component of a tuple (a call's result,
// an LU factor or solve), read where used (rerolled units).
func (e *emitter) tuplePart(id tape.ID) {
	v := &e.p.Values[id]
	switch t := &e.p.Values[v.Args[0]]; {
	case t.Op != ops.OpCall:
		e.setArray(id, fmt.Sprintf("t%d", v.Args[0]), int(v.Aux))
	case e.calleeAcc[int(t.Aux)] == nil:
		e.setArray(id, fmt.Sprintf("t%d.v", v.Args[0]), int(v.Aux))
	default:
		e.expr[id] = e.tuple[v.Args[0]](int(v.Aux))
	}
}

// returnRun returns the run of returned outputs from m on, before end,
// that a loop copies: n repetitions of a body of P = len(body) outputs, output
// m + P·c + k being body[k] at gs_c = c, each position k either one value
// (the same C expression at every c) or entries off + stride·c of one
// array; n is 0 if no such run of rerollMinRun repetitions is there. Of
// the bodies up to rerollMaxReturn outputs, the one that copies the most
// outputs is taken, the shortest of those.
func (e *emitter) returnRun(m, end int) (int, []string) {
	if !e.src.reroll {
		return 0, nil
	}
	best, bestP := 0, 0
	var bestBody []string
	for p := 1; p <= rerollMaxReturn && m+p*rerollMinRun <= end; p++ {
		n, body := e.returnRunOf(m, p, end)
		if n >= rerollMinRun && n*p > best*bestP {
			best, bestP, bestBody = n, p, body
		}
	}
	return best, bestBody
}

// rerollMaxReturn is the longest body of a run of returned outputs (a
// Jacobian's two rows of a banded block and their zeros, on a grid of
// two species).
const rerollMaxReturn = 4 * rerollMaxBody

// returnRunOf returns the number of repetitions of a body of p returned
// outputs from m on, before end (see returnRun), and the body.
func (e *emitter) returnRunOf(m, p, end int) (int, []string) {
	outs := e.p.Outputs
	type pos struct {
		inv         string // the one value's expression, or ""
		name        string // the array
		off, stride int
	}
	body := make([]pos, p)
	for k := range body {
		i0, i1 := m+k, m+p+k
		if !e.emits(i0) || !e.emits(i1) {
			return 0, nil
		}
		x0, x1 := outs[i0].ID, outs[i1].ID
		a0, ok0 := e.arrays[x0]
		a1, ok1 := e.arrays[x1]
		switch {
		case ok0 && ok1 && a0.name == a1.name && a0.idx != a1.idx:
			body[k] = pos{name: a0.name, off: a0.idx, stride: a1.idx - a0.idx}
		case e.ref(x0) == e.ref(x1):
			body[k].inv = e.ref(x0)
		default:
			return 0, nil
		}
	}
	n := 2
	for ; m+(n+1)*p <= end; n++ {
		ok := true
		for k, b := range body {
			i := m + n*p + k
			if !e.emits(i) {
				ok = false
				break
			}
			x := outs[i].ID
			if b.inv != "" {
				ok = e.ref(x) == b.inv
			} else {
				a, found := e.arrays[x]
				ok = found && a.name == b.name && a.idx == b.off+b.stride*n
			}
			if !ok {
				break
			}
		}
		if !ok {
			break
		}
	}
	xs := make([]string, p)
	for k, b := range body {
		xs[k] = b.inv
		if b.inv == "" {
			xs[k] = fmt.Sprintf("%s[%s]", b.name, affine(b.off, b.stride))
		}
	}
	return n, xs
}
