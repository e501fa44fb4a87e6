package tape

import (
	"encoding/binary"
	"math"

	"github.com/gradsolve-go/gradsolve/ops"
)

// The executor's plan: which values are uniform, which steps compute the
// others a block at a time, and where each value lives in a worker's
// arena.
//
// # Fusion
//
// A program's per-trajectory values are computed one op at a time, each a
// loop over the block, except for three patterns that the plan fuses,
// several values to a step, to cut the per-step dispatch (a reverse step
// of a neural field has tens of thousands of values) and to keep partial
// sums in registers:
//
//   - Sum chains. An Add or Sub whose operand is an Add, Sub or Mul used
//     nowhere else absorbs it: the value s = ((t0 ± t1) ± t2) … with
//     every term a value or a product a·b (rounded), added left to right
//     exactly as the ops would. Reverse mode accumulates cotangents so:
//     x̄_j = Σ_i w_ij·ȳ_i over the rows of a dense layer, and a weight's
//     gradient over the stages of a step. A Mul absorbs a sum used only
//     by it, s·a: a row's cotangent ȳ_i·(1 − y_i²) through a tanh.
//   - Dots whose terms each pair a uniform coefficient with a
//     per-trajectory value: s = fma(c_j, x_j, s) from the bias, in order.
//   - Elementwise ops of one argument (activations).
//
// Each is an entry. Entries are not computed where the program has them
// but gathered into a batch, which is computed as late as possible: just
// before the first value that uses one of them. A batch becomes steps as
// follows. Entries whose terms all pair a uniform coefficient with a
// per-trajectory vector, and which share the same vectors in the same
// order (the rows of W·x + b, or of Wᵀ·ȳ), are one matrix step: a
// register-blocked kernel over rows and trajectories (matKernel), with
// the coefficients packed. The other chains are one step (chainKernel),
// and the activations one step an op (mapKernel). Every entry is still
// computed term by term in its order, so the results are bit for bit
// those of the ops (NaN payloads aside); the kernels say how.
//
// A program whose values interleave with their uses (each Dot followed by
// its activation) batches little: nn.Dense and the transforms emit a
// layer's rows, then their activations.

// term is one term of a chain: a (b == ops.NoRef), or the product a·b,
// rounded once; neg subtracts it. A scale term multiplies the sum by a
// instead (the last term of a chain, if any).
type term struct {
	a, b  ID
	neg   bool
	scale bool
}

// entry is a value computed by a fused step: s = init (or the first
// term), then s = s ± term for each term in order, where fma computes
// each term as s = fma(a, b, s) (a Dot) instead of rounding a·b first;
// or, if unary is set, that op applied to init.
type entry struct {
	root  ID // the value computed
	init  ID // ops.NoRef if the first term starts the sum
	terms []term
	fma   bool
	// mat reports that every term multiplies a uniform coefficient (a)
	// with a per-trajectory vector (b).
	mat   bool
	unary ops.Op
	aux   float64 // the unary op's aux
}

// item is one step of the schedule: a value computed by its op's Block
// (ents nil) or a batch of entries computed by one fused kernel.
type item struct {
	v    ID
	ents []entry
	mat  bool // a matrix step: ents share their vectors
}

// packed is a uniform value copied into the coefficient area of Exec.uni
// (negated if neg) whenever the uniform values are computed.
type packed struct {
	src int
	neg bool
}

// planner holds the state of Exec.plan.
type planner struct {
	e       *Exec
	p       *Program
	uniform []bool
	uses    []int32 // number of arguments and outputs that are the value
	output  []bool
	// absorbed marks the values computed inside an entry's chain.
	absorbed []bool
	// scaled holds, for a Mul, the sum it absorbs (ops.NoRef if none).
	scaled []ID
	fuse   bool
	packs  map[string]int // a coefficient matrix's key → its offset in uni
}

// plan assigns every value its place: uniform, input, or block buffer,
// and builds the steps; fuse turns fusion on.
func (e *Exec) plan(fuse bool) {
	pl := &planner{e: e, p: e.p, packs: make(map[string]int)}
	pl.classify()
	pl.fusion(fuse)
	items := pl.schedule()
	pl.build(items)
}

// classify marks the uniform values and gives them their offsets in uni.
func (pl *planner) classify() {
	e, p := pl.e, pl.p
	nv := len(p.Values)
	e.uniOff = make([]int, nv)
	pl.uniform = make([]bool, nv)
	uniform := pl.uniform
	for i, v := range p.Values {
		e.uniOff[i] = -1
		switch {
		case v.Op == ops.OpConst:
			uniform[i] = true
		case v.Op == ops.OpInput:
			uniform[i] = p.Inputs[int(v.Aux)].Shared
		default:
			uniform[i] = true
			for _, a := range v.Args {
				uniform[i] = uniform[i] && uniform[a]
			}
		}
		if uniform[i] {
			if v.Op == ops.OpInput {
				e.sharedIn = append(e.sharedIn, struct{ idx, off int }{int(v.Aux), e.nuni})
			}
			e.uniOff[i] = e.nuni
			e.nuni += p.Width(ID(i))
			e.uniVals = append(e.uniVals, ID(i))
		}
	}
}

// fusion counts the uses of every value and marks the values absorbed
// into sum chains. Without fuse it marks every value unfusable, so that
// every value is a step of its own.
func (pl *planner) fusion(fuse bool) {
	p := pl.p
	nv := len(p.Values)
	pl.uses = make([]int32, nv)
	pl.output = make([]bool, nv)
	pl.absorbed = make([]bool, nv)
	for _, v := range p.Values {
		for _, a := range v.Args {
			pl.uses[a]++
		}
	}
	for _, o := range p.Outputs {
		pl.uses[o.ID]++
		pl.output[o.ID] = true
	}
	pl.fuse = fuse
	if !fuse {
		return
	}
	for i, v := range p.Values {
		if !pl.sumOp(ID(i)) {
			continue
		}
		if s := pl.spine(ID(i)); s != ops.NoRef {
			pl.absorbed[s] = true
		}
		for _, a := range v.Args {
			if pl.single(a) && (p.Values[a].Op == ops.OpMul || p.Values[a].Op == ops.OpSquare) {
				pl.absorbed[a] = true
			}
		}
	}
	// A Mul that is not a term absorbs a sum used only by it, s·a, unless
	// the sum is a row of a matrix step.
	pl.scaled = make([]ID, nv)
	for i, v := range p.Values {
		pl.scaled[i] = ops.NoRef
		if v.Op != ops.OpMul || pl.uniform[i] || pl.absorbed[i] {
			continue
		}
		for _, a := range v.Args {
			if pl.sumOp(a) && pl.single(a) && !pl.absorbed[a] && !pl.chain(a).mat {
				pl.absorbed[a] = true
				pl.scaled[i] = a
				break
			}
		}
	}
}

// sumOp reports whether v is a per-trajectory Add or Sub.
func (pl *planner) sumOp(v ID) bool {
	op := pl.p.Values[v].Op
	return !pl.uniform[v] && (op == ops.OpAdd || op == ops.OpSub)
}

// single reports whether v is a per-trajectory value used by exactly one
// argument and not an output.
func (pl *planner) single(v ID) bool {
	return !pl.uniform[v] && pl.uses[v] == 1 && !pl.output[v]
}

// spine returns the operand of the sum v that continues its chain (an
// Add or Sub used only by v, first operand preferred; the subtrahend of a
// Sub never), or ops.NoRef.
func (pl *planner) spine(v ID) ID {
	a := pl.p.Values[v].Args
	if pl.single(a[0]) && pl.sumOp(a[0]) {
		return a[0]
	}
	if pl.p.Values[v].Op == ops.OpAdd && pl.single(a[1]) && pl.sumOp(a[1]) {
		return a[1]
	}
	return ops.NoRef
}

// term returns the term of a chain that operand u contributes.
func (pl *planner) term(u ID, neg bool) term {
	if pl.absorbed[u] {
		switch a := pl.p.Values[u].Args; pl.p.Values[u].Op {
		case ops.OpMul:
			return term{a: a[0], b: a[1], neg: neg}
		case ops.OpSquare: // x·x, as the op computes it
			return term{a: a[0], b: a[0], neg: neg}
		}
	}
	return term{a: u, b: ops.NoRef, neg: neg}
}

// chain returns the entry of the sum chain rooted at v.
func (pl *planner) chain(v ID) entry {
	var ts []term // last term first
	for r := v; ; {
		val := &pl.p.Values[r]
		a, neg := val.Args, val.Op == ops.OpSub
		switch s := pl.spine(r); s {
		case a[0]:
			ts = append(ts, pl.term(a[1], neg))
			r = s
			continue
		case a[1]:
			ts = append(ts, pl.term(a[0], false))
			r = s
			continue
		}
		ts = append(ts, pl.term(a[1], neg), pl.term(a[0], false))
		break
	}
	for i, j := 0, len(ts)-1; i < j; i, j = i+1, j-1 {
		ts[i], ts[j] = ts[j], ts[i]
	}
	en := entry{root: v, init: ops.NoRef, terms: ts}
	if ts[0].b == ops.NoRef { // the first term is never negated
		en.init, en.terms = ts[0].a, ts[1:]
	}
	pl.matrix(&en)
	return en
}

// dot returns the entry of the Dot v.
func (pl *planner) dot(v ID) entry {
	a := pl.p.Values[v].Args
	k := (len(a) - 1) / 2
	en := entry{root: v, init: a[2*k], terms: make([]term, k), fma: true}
	for j := range en.terms {
		en.terms[j] = term{a: a[j], b: a[k+j]}
	}
	pl.matrix(&en)
	return en
}

// matrix sets en.mat if every term multiplies a uniform value with a
// per-trajectory one, putting the uniform one in a (the product and the
// fused multiply-add are symmetric in their factors).
func (pl *planner) matrix(en *entry) {
	for i := range en.terms {
		t := &en.terms[i]
		if t.b == ops.NoRef || pl.uniform[t.a] == pl.uniform[t.b] {
			return
		}
		if pl.uniform[t.b] {
			t.a, t.b = t.b, t.a
		}
	}
	en.mat = len(en.terms) > 0
}

// schedule returns the steps in order: the values that are computed by
// their op's Block, and the batches of entries, each placed just before
// the first value that uses one of its entries.
func (pl *planner) schedule() []item {
	p := pl.p
	var items, open []item
	var batch []entry
	inBatch := make([]bool, len(p.Values))
	flush := func() {
		if len(batch) == 0 {
			return
		}
		open = pl.group(open[:0], batch)
		items = append(items, open...)
		for _, en := range batch {
			inBatch[en.root] = false
		}
		batch = batch[:0]
	}
	uses := func(a ID) {
		if inBatch[a] {
			flush()
		}
	}
	for i, v := range p.Values {
		id := ID(i)
		if pl.uniform[i] || v.Op == ops.OpInput || v.Op == ops.OpExtract || pl.absorbed[i] {
			continue
		}
		var en entry
		switch {
		case !pl.fuse:
			en.root = ops.NoRef
		case pl.sumOp(id):
			en = pl.chain(id)
		case v.Op == ops.OpMul && pl.scaled[i] != ops.NoRef:
			s := pl.scaled[i]
			f := v.Args[0]
			if f == s {
				f = v.Args[1]
			}
			en = pl.chain(s)
			en.root, en.mat = id, false
			en.terms = append(en.terms, term{a: f, b: ops.NoRef, scale: true})
		case v.Op == ops.OpDot:
			if en = pl.dot(id); !en.mat {
				en.root = ops.NoRef
			}
		case pl.unary(v.Op):
			en = entry{root: id, init: v.Args[0], unary: v.Op, aux: v.Aux}
		default:
			en.root = ops.NoRef
		}
		if en.root == ops.NoRef {
			for _, a := range v.Args {
				uses(a)
			}
			items = append(items, item{v: id})
			continue
		}
		if en.init != ops.NoRef {
			uses(en.init)
		}
		for _, t := range en.terms {
			uses(t.a)
			if t.b != ops.NoRef {
				uses(t.b)
			}
		}
		batch = append(batch, en)
		inBatch[id] = true
	}
	flush()
	return items
}

// unary reports whether op is an elementwise op of one argument, which
// batches compute together, one step for each op.
func (pl *planner) unary(op ops.Op) bool {
	def := ops.Lookup(op)
	return def.Arity == 1 && def.Block != nil && !ops.IsTuple(op)
}

// group splits a batch into steps, appended to dst: one matrix step for
// each set of entries that share their vectors, with the same kind of
// terms and an initial value or not (a lone sum chain excepted), and one
// step for the other chains.
func (pl *planner) group(dst []item, batch []entry) []item {
	key := func(en *entry) string {
		k := make([]byte, 0, 2+4*len(en.terms))
		k = append(k, b2byte(en.fma), b2byte(en.init != ops.NoRef))
		for _, t := range en.terms {
			k = binary.LittleEndian.AppendUint32(k, uint32(t.b))
		}
		return string(k)
	}
	groups := make(map[string]int)
	var first []int // the first entry of each group
	var n []int     // its size
	gi := make([]int, len(batch))
	for i := range batch {
		gi[i] = -1
		if !batch[i].mat {
			continue
		}
		k := key(&batch[i])
		g, ok := groups[k]
		if !ok {
			g = len(first)
			groups[k] = g
			first, n = append(first, i), append(n, 0)
		}
		gi[i] = g
		n[g]++
	}
	mats := make([]item, len(first))
	var chains []entry
	var maps []item // by op, in order of first appearance
	for i, en := range batch {
		if en.unary != 0 {
			j := 0
			for j < len(maps) && maps[j].ents[0].unary != en.unary {
				j++
			}
			if j == len(maps) {
				maps = append(maps, item{v: ops.NoRef})
			}
			maps[j].ents = append(maps[j].ents, en)
			continue
		}
		g := gi[i]
		if g >= 0 && (en.fma || n[g] > 1) {
			mats[g].ents = append(mats[g].ents, en)
			continue
		}
		en.mat = false
		chains = append(chains, en)
	}
	for _, m := range mats {
		if len(m.ents) > 0 {
			m.v, m.mat = ops.NoRef, true
			dst = append(dst, m)
		}
	}
	if len(chains) > 0 {
		dst = append(dst, item{v: ops.NoRef, ents: chains})
	}
	return append(dst, maps...)
}

func b2byte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// args calls f for every argument of the item (every operand of its
// entries).
func (it *item) args(p *Program, f func(ID)) {
	if it.ents == nil {
		for _, a := range p.Values[it.v].Args {
			f(a)
		}
		return
	}
	for _, en := range it.ents {
		if en.init != ops.NoRef {
			f(en.init)
		}
		for _, t := range en.terms {
			f(t.a)
			if t.b != ops.NoRef {
				f(t.b)
			}
		}
	}
}

// build assigns block buffers to the scheduled items by liveness, so the
// working set stays small, and makes their steps.
func (pl *planner) build(items []item) {
	e, p, uniform := pl.e, pl.p, pl.uniform
	nv := len(p.Values)
	loc := make([]arg, nv) // where a per-trajectory value lives
	for i, v := range p.Values {
		if v.Op == ops.OpInput && !uniform[i] {
			loc[i] = arg{kind: argInput, idx: int(v.Aux)}
		}
	}
	extracts := make(map[ID][]ID) // a per-trajectory tuple's extracts
	for i, v := range p.Values {
		if v.Op == ops.OpExtract && !uniform[i] {
			extracts[v.Args[0]] = append(extracts[v.Args[0]], ID(i))
		}
	}

	// Liveness: the last item using each value (extracts count for their
	// tuple); outputs live to the end of the block.
	last := make([]int, nv)
	for i := range last {
		last[i] = -1
	}
	root := func(id ID) ID {
		if v := p.Values[id]; v.Op == ops.OpExtract && !uniform[id] {
			return v.Args[0]
		}
		return id
	}
	for k := range items {
		items[k].args(p, func(a ID) { last[root(a)] = k })
	}
	for _, o := range p.Outputs {
		last[root(o.ID)] = math.MaxInt
	}
	// dying lists the values whose buffers are freed after item k.
	dying := make(map[int][]ID)
	for i, l := range last {
		if l >= 0 && l != math.MaxInt {
			dying[l] = append(dying[l], ID(i))
		}
	}

	free := map[int][]int{}
	alloc := func(w int) int {
		if l := free[w]; len(l) > 0 {
			u := l[len(l)-1]
			free[w] = l[:len(l)-1]
			return u
		}
		u := e.units
		e.units += w
		return u
	}
	bcastUnit := map[ID]int{}
	argOf := func(a ID, mixed bool) arg {
		if !uniform[a] {
			return loc[a]
		}
		w := p.Width(a)
		if mixed && w == 1 {
			return arg{kind: argUni, idx: e.uniOff[a]}
		}
		u, ok := bcastUnit[a]
		if !ok {
			u = e.units
			e.units += w
			bcastUnit[a] = u
			e.bcast = append(e.bcast, bcast{off: e.uniOff[a], width: w, unit: u})
		}
		return arg{kind: argUnit, unit: u, width: w, out: -1}
	}
	// A per-trajectory scalar output is written straight into the output
	// slice (direct mode) by the step computing it, when the Run's outputs
	// do not overlap its inputs; see Run.
	directOut := make(map[ID]int)
	for k, o := range p.Outputs {
		v := p.Values[o.ID]
		if _, dup := directOut[o.ID]; dup || o.Sum || uniform[o.ID] || v.Op == ops.OpInput || v.Op == ops.OpExtract || p.Width(o.ID) != 1 {
			continue
		}
		directOut[o.ID] = k
	}
	// define gives value id a new buffer of width w.
	define := func(id ID, w int) arg {
		out := -1
		if k, ok := directOut[id]; ok {
			out = k
		}
		loc[id] = arg{kind: argUnit, unit: alloc(w), width: w, out: out}
		return loc[id]
	}
	for k, it := range items {
		var st step
		var defs []ID
		if it.ents == nil {
			v := p.Values[it.v]
			def := ops.Lookup(v.Op)
			st.block, st.aux = def.Block, v.Aux
			for _, a := range v.Args {
				st.args = append(st.args, argOf(a, def.Mixed))
			}
			st.dst = []arg{define(it.v, p.Width(it.v))}
			defs = append(defs, it.v)
		} else {
			st.kern, st.args = pl.fused(it, argOf)
			for _, en := range it.ents {
				st.dst = append(st.dst, define(en.root, 1))
				defs = append(defs, en.root)
			}
		}
		pl.addStep(st)
		// The extracts of a tuple read its buffer.
		for _, d := range defs {
			for _, x := range extracts[d] {
				t := loc[d]
				loc[x] = arg{kind: argUnit, unit: t.unit, comp: int(p.Values[x].Aux), width: t.width, out: -1}
			}
		}
		for _, d := range defs {
			if last[d] < 0 { // unused and not an output: computed, then freed
				dying[k] = append(dying[k], d)
			}
		}
		for _, d := range dying[k] {
			if l := loc[d]; l.kind == argUnit && !uniform[d] && p.Values[d].Op != ops.OpExtract {
				free[l.width] = append(free[l.width], l.unit)
			}
		}
	}
	for k, o := range p.Outputs {
		src := loc[root(o.ID)]
		if p.Values[o.ID].Op == ops.OpExtract && !uniform[o.ID] {
			src = loc[o.ID]
		}
		if uniform[o.ID] {
			src = arg{kind: argUni, idx: e.uniOff[o.ID]}
		}
		spec := outSpec{src: src, sum: o.Sum, direct: src.kind == argUnit && src.out == k, step: -1, entry: -1}
		if o.Sum {
			spec.sumIdx = e.nsum
			e.nsum++
		}
		e.outs = append(e.outs, spec)
		if !spec.direct {
			e.copied = append(e.copied, k)
		}
	}
	e.uni = make([]float64, e.nuni+len(e.pack))
	pl.readsAndWrites()
}

// readsAndWrites finds, for every input, the last step that reads it (and
// the chain that does, in a chain step), and for every output written in
// place the step that writes it (and its chain): see Exec.inPlaceOK.
func (pl *planner) readsAndWrites() {
	e := pl.e
	e.reads = make([]inRead, len(pl.p.Inputs))
	for j := range e.reads {
		e.reads[j] = inRead{step: -1, entry: -1}
	}
	read := func(j, si, en int) {
		switch r := &e.reads[j]; {
		case int32(si) > r.step:
			*r = inRead{step: int32(si), entry: int32(en)}
		case r.entry != int32(en):
			r.entry = -1
		}
	}
	for si := range e.steps {
		st := &e.steps[si]
		entryOf := func(int) int { return -1 }
		if k, ok := st.kern.(*chainKernel); ok {
			entryOf = k.entryOf()
		}
		for j, a := range st.args {
			if a.kind == argInput {
				read(a.idx, si, entryOf(j))
			}
		}
		for d, a := range st.dst {
			if a.out < 0 {
				continue
			}
			en := -1
			if _, ok := st.kern.(*chainKernel); ok {
				en = d
			}
			o := &e.outs[a.out]
			o.step, o.entry = int32(si), int32(en)
		}
	}
	for _, o := range e.outs {
		if !o.sum && o.src.kind == argInput { // copied after the steps
			e.reads[o.src.idx] = inRead{step: math.MaxInt32, entry: -1}
		}
	}
}

// addStep appends st to the Exec's steps, giving it its slots.
func (pl *planner) addStep(st step) {
	e := pl.e
	st.slot = e.nslots
	st.nslot = len(st.dst) + len(st.args)
	for d, a := range st.dst {
		if a.out >= 0 {
			e.rebOut = append(e.rebOut, rebind{slot: st.slot + d, idx: a.out})
		}
		if st.kern == nil || a.width > 1 {
			e.mdep = append(e.mdep, int32(st.slot+d))
		}
		e.slotArg = append(e.slotArg, a)
	}
	for j, a := range st.args {
		slot := st.slot + len(st.dst) + j
		if a.kind == argUnit && a.width > 1 {
			e.mdep = append(e.mdep, int32(slot))
		}
		e.slotArg = append(e.slotArg, a)
		switch {
		case a.kind == argInput:
			e.rebind = append(e.rebind, rebind{slot: slot, idx: a.idx})
		case a.kind == argUnit && a.out >= 0:
			e.rebOut = append(e.rebOut, rebind{slot: slot, idx: a.out})
		}
	}
	e.nslots += st.nslot
	e.steps = append(e.steps, st)
}

// fused returns the kernel of a batch item and its arguments (placed by
// argOf), in the order the kernel reads them.
func (pl *planner) fused(it item, argOf func(a ID, mixed bool) arg) (kernel, []arg) {
	var args []arg
	if it.mat {
		en0 := &it.ents[0]
		k := &matKernel{fma: en0.fma, init: en0.init != ops.NoRef, rows: len(it.ents), terms: len(en0.terms), bias: -1}
		if k.init {
			var bias []packed
			for _, en := range it.ents {
				if pl.uniform[en.init] && pl.p.Width(en.init) == 1 {
					bias = append(bias, packed{src: pl.e.uniOff[en.init]})
				}
			}
			if len(bias) == len(it.ents) {
				k.bias = pl.pack(bias)
			} else {
				for _, en := range it.ents {
					args = append(args, argOf(en.init, true))
				}
			}
		}
		for _, t := range en0.terms {
			args = append(args, argOf(t.b, true))
		}
		coef := make([]packed, 0, k.rows*k.terms)
		k.layout(func(r, t int) {
			a := it.ents[r].terms[t]
			coef = append(coef, packed{src: pl.e.uniOff[a.a], neg: a.neg})
		})
		k.coef = pl.pack(coef)
		return k, args
	}
	if op := it.ents[0].unary; op != 0 {
		k := &mapKernel{block: ops.Lookup(op).Block, tanh: op == ops.OpTanh}
		for _, en := range it.ents {
			k.aux = append(k.aux, en.aux)
			args = append(args, argOf(en.init, false))
		}
		return k, args
	}
	// A uniform scalar argument is passed as its one value (the kernel
	// broadcasts it), not as a block of copies: one load for the block.
	k := &chainKernel{}
	uniArg := func(a ID, f *uint8, flag uint8) {
		x := argOf(a, true)
		if x.kind == argUni {
			*f |= flag
		}
		args = append(args, x)
	}
	for _, en := range it.ents {
		n := len(en.terms)
		if en.init != ops.NoRef {
			n++
			var f uint8
			uniArg(en.init, &f, termUniA)
			k.flags = append(k.flags, f)
		}
		k.nterms = append(k.nterms, int32(n))
		for _, t := range en.terms {
			var f uint8
			if t.neg {
				f |= termNeg
			}
			if t.scale {
				f |= termScale
			}
			if t.b != ops.NoRef {
				f |= termProd
			}
			uniArg(t.a, &f, termUniA)
			if t.b != ops.NoRef {
				uniArg(t.b, &f, termUniB)
			}
			k.flags = append(k.flags, f)
		}
	}
	return k, args
}

// pack returns the offset in Exec.uni of the coefficients c, copied there
// whenever the uniform values are computed; identical lists share one
// copy.
func (pl *planner) pack(c []packed) int {
	key := make([]byte, 0, 5*len(c))
	for _, q := range c {
		key = binary.LittleEndian.AppendUint32(key, uint32(q.src))
		key = append(key, b2byte(q.neg))
	}
	if off, ok := pl.packs[string(key)]; ok {
		return off
	}
	e := pl.e
	off := e.nuni + len(e.pack)
	e.pack = append(e.pack, c...)
	pl.packs[string(key)] = off
	return off
}
