package kernelgen

import (
	"container/heap"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Lanes: one warp per trajectory.
//
// A field with a neural network in it costs thousands of values per
// evaluation, almost all of them in groups of the same op over a layer's
// rows: the Dots of W·x + b, their activations, the products and sums of
// Wᵀ·ȳ and of the weights' cotangents ȳ·xᵀ. With one thread per
// trajectory a thread runs all of them one after another (and keeps tens
// of thousands of values in flight: spills), and a small ensemble leaves
// most of the GPU idle. In lanes mode (SourceSettings.Lanes) a whole warp
// runs one trajectory: the values of such a group, a vector, are computed
// at once, element e by lane e; every other value is computed by every
// lane alike (replicated), so the solver's own arithmetic, branches
// included, is the same in every lane. A replicated value or a vector's
// element common to all lanes that needs element e of a vector takes it
// from lane e with a shuffle. Each value is still computed by its own op
// from the same arguments in the same order, so results are those of one
// thread per trajectory, bit for bit.
//
// Vectors are found in two passes over a program (planLanes). Seeds: values
// of one op whose arguments are the same values except for shared inputs
// (weights), whose indices run in arithmetic progressions (the rows of a
// dense layer, the columns of Wᵀ·ȳ). Then, until nothing changes, values
// of one op whose arguments include element e of a vector, the same
// vectors in the same places, form a vector whose element e they are
// (activations, sum chains, the products ȳ_i·x_j of a weight row). A
// vector has at most 32 elements and may have holes (lanes that compute
// something nobody reads).
//
// Shared inputs: in lanes mode every gs_sh a function reads is a padded
// copy in shared memory, entry j at lanePad(j) = j + j/32, so that lanes
// reading entries 32 apart (a row of W each) hit different banks.

// lanePad returns the padded position of entry j.
func lanePad(j int) int { return j + j>>5 }

// PadLen returns the length of a padded array of n entries rounded up to
// whole rows of 32 (33 positions each), as warp.cuh sizes its shared
// arrays (GS_WACC, GS_CSH, GS_SSH).
func PadLen(n int) int { return (LaneWidth + 1) * ((n + LaneWidth - 1) / LaneWidth) }

// padded returns xs with entry j at lanePad(j) and zero between (nil for
// no entries).
func padded[T any](xs []T, zero T) []T {
	if len(xs) == 0 {
		return nil
	}
	out := make([]T, lanePad(len(xs)-1)+1)
	for q := range out {
		out[q] = zero
	}
	for j, x := range xs {
		out[lanePad(j)] = x
	}
	return out
}

// LaneWidth is the number of lanes of a warp.
const LaneWidth = 32

type laneArgKind uint8

const (
	laneCommon  laneArgKind = iota // the same value for every element
	laneShared                     // shared input base + stride·e
	laneAligned                    // element e of another vector
)

// laneArg says where element e of a vector reads one argument.
type laneArg struct {
	Kind         laneArgKind
	Id           tape.ID // laneCommon
	Base, Stride int     // laneShared: index among the shared inputs
	Vec          int     // laneAligned
}

// laneVec is a vector: ids[e] is element e (a value of op op), or -1.
type laneVec struct {
	Ids  []tape.ID
	Op   ops.Op
	Aux  float64
	Args []laneArg
}

// lanePlan is the vectorisation of one program.
type lanePlan struct {
	Vecs []laneVec
	// vec[id] is 1 + the vector value id belongs to, 0 if replicated;
	// el[id] its element.
	vec []int32
	el  []uint8
}

// In returns the vector and element of value id, or ok false.
func (lp *lanePlan) In(id tape.ID) (q, e int, ok bool) {
	if q := lp.vec[id]; q > 0 {
		return int(q - 1), int(lp.el[id]), true
	}
	return 0, 0, false
}

// Elements returns the number of values in vectors.
func (lp *lanePlan) Elements() int {
	n := 0
	for _, v := range lp.Vecs {
		for _, id := range v.Ids {
			if id >= 0 {
				n++
			}
		}
	}
	return n
}

// vectorizable reports whether value v can be an element of a vector: a
// scalar op with a C form of scalar arguments.
func vectorizable(p *tape.Program, v *tape.Value) bool {
	switch v.Op {
	case ops.OpInput, ops.OpConst, ops.OpCall, ops.OpExtract:
		return false
	}
	if ops.IsTuple(v.Op) || ops.Lookup(v.Op).C == nil {
		return false
	}
	for _, a := range v.Args {
		if ops.IsTuple(p.Values[a].Op) || p.Values[a].Op == ops.OpCall {
			return false
		}
	}
	return true
}

// planLanes finds the vectors of p; shIndex[k] is input k's index among
// the shared inputs, or -1. It seeds vectors of values alike but for
// their shared arguments (seed), then grows vectors of values that read
// the elements of others (propagate).
func planLanes(p *tape.Program, shIndex []int) *lanePlan {
	lp := &lanePlan{vec: make([]int32, len(p.Values)), el: make([]uint8, len(p.Values))}
	pl := &lanePlanner{p: p, shIndex: shIndex, lp: lp}
	for _, j := range shIndex {
		pl.nsh = max(pl.nsh, j+1)
	}
	pl.seed()
	pl.propagate()
	return lp
}

// lanePlanner finds the vectors of one program (planLanes).
type lanePlanner struct {
	p       *tape.Program
	shIndex []int
	nsh     int // shared inputs
	lp      *lanePlan
	sb      strings.Builder // keys
}

// shared returns the index among the shared inputs of value a, if it is
// a shared input.
func (pl *lanePlanner) shared(a tape.ID) (int, bool) {
	v := &pl.p.Values[a]
	if v.Op != ops.OpInput {
		return 0, false
	}
	j := pl.shIndex[int(v.Aux)]
	return j, j >= 0
}

// opKey starts the key of value v in pl.sb: its op, aux and arity.
func (pl *lanePlanner) opKey(v *tape.Value) {
	pl.sb.Reset()
	pl.sb.WriteString(strconv.Itoa(int(v.Op)))
	pl.sb.WriteByte('/')
	pl.sb.WriteString(strconv.FormatUint(math.Float64bits(v.Aux), 16))
	pl.sb.WriteByte('/')
	pl.sb.WriteString(strconv.Itoa(len(v.Args)))
}

// add makes the values ids (holes -1) a vector of v's op reading args
// and returns its index.
func (pl *lanePlanner) add(ids []tape.ID, v *tape.Value, args []laneArg) int {
	lp := pl.lp
	q := len(lp.Vecs)
	lp.Vecs = append(lp.Vecs, laneVec{Ids: ids, Op: v.Op, Aux: v.Aux, Args: args})
	for e, id := range ids {
		if id >= 0 {
			lp.vec[id] = int32(q + 1)
			lp.el[id] = uint8(e)
		}
	}
	return q
}

// fitShared checks that the shared arguments at positions pos of the
// elements ids (element e = ids[e], holes -1) are base + stride·e for
// every e in [0, len(ids)), within the shared inputs, and returns them.
func (pl *lanePlanner) fitShared(ids []tape.ID, pos int) (base, stride int, ok bool) {
	p := pl.p
	e0, e1 := -1, -1
	for e, id := range ids {
		if id < 0 {
			continue
		}
		if e0 < 0 {
			e0 = e
		} else if e1 < 0 {
			e1 = e
		}
	}
	j0, _ := pl.shared(p.Values[ids[e0]].Args[pos])
	if e1 < 0 {
		return j0, 0, e0 == 0 && len(ids) == 1
	}
	j1, _ := pl.shared(p.Values[ids[e1]].Args[pos])
	if (j1-j0)%(e1-e0) != 0 {
		return 0, 0, false
	}
	stride = (j1 - j0) / (e1 - e0)
	base = j0 - stride*e0
	for e, id := range ids {
		if id < 0 {
			continue
		}
		if j, _ := pl.shared(p.Values[id].Args[pos]); j != base+stride*e {
			return 0, 0, false
		}
	}
	last := base + stride*(len(ids)-1)
	if base < 0 || base >= pl.nsh || last < 0 || last >= pl.nsh {
		return 0, 0, false
	}
	return base, stride, true
}

// seed forms the seed vectors: values equal but for shared arguments
// whose indices run in progressions (a layer's rows), in runs of at most
// LaneWidth.
func (pl *lanePlanner) seed() {
	p := pl.p
	buckets := map[string][]tape.ID{}
	var order []string
	for i := range p.Values {
		v := &p.Values[i]
		if !vectorizable(p, v) {
			continue
		}
		pl.opKey(v)
		nS := 0
		for _, a := range v.Args {
			if _, ok := pl.shared(a); ok {
				pl.sb.WriteString(",S")
				nS++
			} else {
				pl.sb.WriteString(",R")
				pl.sb.WriteString(strconv.Itoa(int(a)))
			}
		}
		if nS == 0 {
			continue
		}
		k := pl.sb.String()
		if buckets[k] == nil {
			order = append(order, k)
		}
		buckets[k] = append(buckets[k], tape.ID(i))
	}
	for _, k := range order {
		if ids := buckets[k]; len(ids) >= 2 {
			pl.seedRuns(ids)
		}
	}
}

// seedRuns forms the vectors of one bucket of seed candidates ids: sorted
// by their shared arguments, each run of values whose shared arguments
// advance in step.
func (pl *lanePlanner) seedRuns(ids []tape.ID) {
	p := pl.p
	v0 := &p.Values[ids[0]]
	var pos []int
	for q, a := range v0.Args {
		if _, ok := pl.shared(a); ok {
			pos = append(pos, q)
		}
	}
	idx := func(id tape.ID, q int) int { j, _ := pl.shared(p.Values[id].Args[q]); return j }
	sort.SliceStable(ids, func(a, b int) bool {
		for _, q := range pos {
			if x, y := idx(ids[a], q), idx(ids[b], q); x != y {
				return x < y
			}
		}
		return ids[a] < ids[b]
	})
	flush := func(run []tape.ID) {
		if len(run) < 2 {
			return
		}
		args := make([]laneArg, len(v0.Args))
		for q, a := range v0.Args {
			args[q] = laneArg{Kind: laneCommon, Id: a}
		}
		for _, q := range pos {
			base, stride, ok := pl.fitShared(run, q)
			if !ok {
				return
			}
			args[q] = laneArg{Kind: laneShared, Base: base, Stride: stride}
		}
		pl.add(append([]tape.ID(nil), run...), v0, args)
	}
	run := []tape.ID{ids[0]}
	for _, id := range ids[1:] {
		fits := len(run) < LaneWidth
		if fits {
			moved := false
			for _, q := range pos {
				st := idx(run[0], q)
				var stride int
				if len(run) >= 2 {
					stride = idx(run[1], q) - st
				} else {
					stride = idx(id, q) - st
				}
				if idx(id, q) != st+stride*len(run) {
					fits = false
					break
				}
				moved = moved || stride != 0
			}
			fits = fits && moved
		}
		if !fits {
			flush(run)
			run = run[:0]
		}
		run = append(run, id)
	}
	flush(run)
}

// laneMember is a candidate element e of a vector, value id.
type laneMember struct {
	id tape.ID
	e  int
}

// laneBucket holds the candidates of one key and, per argument, how its
// elements read it (the shared arguments' progressions are fitted when
// the vector forms).
type laneBucket struct {
	args    []laneArg
	members []laneMember
}

// propagate grows vectors until nothing changes: values of one op whose
// arguments include element e of a vector, the same vectors in the same
// places, form a vector whose element e they are.
func (pl *lanePlanner) propagate() {
	p, lp := pl.p, pl.lp
	users := make([][]tape.ID, len(p.Values))
	for i := range p.Values {
		for _, a := range p.Values[i].Args {
			if n := len(users[a]); n == 0 || users[a][n-1] != tape.ID(i) {
				users[a] = append(users[a], tape.ID(i))
			}
		}
	}
	fresh := make([]int, 0, len(lp.Vecs))
	for q := range lp.Vecs {
		fresh = append(fresh, q)
	}
	for len(fresh) > 0 {
		// The candidates: users of the new vectors' elements.
		seen := map[tape.ID]bool{}
		var cands []tape.ID
		for _, q := range fresh {
			for _, id := range lp.Vecs[q].Ids {
				if id < 0 {
					continue
				}
				for _, u := range users[id] {
					if !seen[u] && lp.vec[u] == 0 && vectorizable(p, &p.Values[u]) {
						seen[u] = true
						cands = append(cands, u)
					}
				}
			}
		}
		sort.Slice(cands, func(a, b int) bool { return cands[a] < cands[b] })
		fresh = fresh[:0]
		for _, bk := range pl.buckets(cands) {
			if q, ok := pl.form(bk); ok {
				fresh = append(fresh, q)
			}
		}
	}
}

// buckets sorts the candidates cands into buckets by key, an element
// argument taken as the aligned one in turn; larger buckets first, then
// in order of appearance.
func (pl *lanePlanner) buckets(cands []tape.ID) []*laneBucket {
	p, lp := pl.p, pl.lp
	buckets := map[string]*laneBucket{}
	var order []*laneBucket
	for _, id := range cands {
		v := &p.Values[id]
		// Each argument that is an element may be the aligned one.
		for _, a := range v.Args {
			_, ec, ok := lp.In(a)
			if !ok {
				continue
			}
			pl.opKey(v)
			args := make([]laneArg, len(v.Args))
			for q, b := range v.Args {
				qb, eb, okb := lp.In(b)
				if _, sh := pl.shared(b); sh {
					pl.sb.WriteString(",S")
					args[q] = laneArg{Kind: laneShared}
				} else if okb && eb == ec {
					pl.sb.WriteString(",A")
					pl.sb.WriteString(strconv.Itoa(qb))
					args[q] = laneArg{Kind: laneAligned, Vec: qb}
				} else {
					pl.sb.WriteString(",R")
					pl.sb.WriteString(strconv.Itoa(int(b)))
					args[q] = laneArg{Kind: laneCommon, Id: b}
				}
			}
			bk := buckets[pl.sb.String()]
			if bk == nil {
				bk = &laneBucket{args: args}
				buckets[pl.sb.String()] = bk
				order = append(order, bk)
			}
			bk.members = append(bk.members, laneMember{id, ec})
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return len(order[a].members) > len(order[b].members) })
	return order
}

// form makes a vector of the members of bk not yet in one, one per
// element, if at least two are and its shared arguments fit, and returns
// its index.
func (pl *lanePlanner) form(bk *laneBucket) (int, bool) {
	p, lp := pl.p, pl.lp
	ms := bk.members
	width := 0
	for _, m := range ms {
		if lp.vec[m.id] == 0 {
			width = max(width, m.e+1)
		}
	}
	if width == 0 {
		return 0, false
	}
	ids := make([]tape.ID, width)
	for e := range ids {
		ids[e] = -1
	}
	n := 0
	for _, m := range ms {
		if lp.vec[m.id] != 0 || ids[m.e] >= 0 {
			continue
		}
		ids[m.e] = m.id
		n++
	}
	if n < 2 {
		return 0, false
	}
	var v0 *tape.Value
	for _, id := range ids {
		if id >= 0 {
			v0 = &p.Values[id]
			break
		}
	}
	args := append([]laneArg(nil), bk.args...)
	for q := range args {
		if args[q].Kind == laneShared {
			base, stride, fit := pl.fitShared(ids, q)
			if !fit {
				return 0, false
			}
			args[q].Base, args[q].Stride = base, stride
		}
	}
	return pl.add(ids, v0, args), true
}

// laneNode is a unit of emission in lanes mode: a vector (vec >= 0) or a
// replicated value.
type laneNode struct {
	Vec int
	Id  tape.ID
}

// laneOrder returns the order in which to emit the live values of p
// (live[id]) in lanes mode: every vector as one node, placed after the
// nodes of all its elements' arguments and before any use of an element;
// ties go to the lowest value. A vector with a live element is live as a
// whole (its holes compute what nobody reads), so liveness is extended to
// its arguments first. It returns false if the vectors' dependencies form
// a cycle.
func laneOrder(p *tape.Program, lp *lanePlan, live []bool) ([]laneNode, bool) {
	// Extend liveness through whole vectors: an element made live may be
	// later in the program than the value that made it so, hence a work
	// list rather than one backward pass.
	live = append([]bool(nil), live...)
	var work []tape.ID
	for i, l := range live {
		if l {
			work = append(work, tape.ID(i))
		}
	}
	mark := func(id tape.ID) {
		if !live[id] {
			live[id] = true
			work = append(work, id)
		}
	}
	vlive := make([]bool, len(lp.Vecs))
	for len(work) > 0 {
		id := work[len(work)-1]
		work = work[:len(work)-1]
		for _, a := range p.Values[id].Args {
			mark(a)
		}
		if q, _, ok := lp.In(id); ok && !vlive[q] {
			vlive[q] = true
			for _, el := range lp.Vecs[q].Ids {
				if el >= 0 {
					mark(el)
				}
			}
		}
	}
	// Nodes: replicated live values, live vectors.
	node := make([]int, len(p.Values)) // value -> node index
	var nodes []laneNode
	var key []tape.ID // lowest value of each node
	vnode := make([]int, len(lp.Vecs))
	for q := range vnode {
		vnode[q] = -1
	}
	for i := range p.Values {
		node[i] = -1
		if !live[i] {
			continue
		}
		if q, _, ok := lp.In(tape.ID(i)); ok {
			if vnode[q] < 0 {
				vnode[q] = len(nodes)
				nodes = append(nodes, laneNode{Vec: q, Id: tape.ID(i)})
				key = append(key, tape.ID(i))
			}
			node[i] = vnode[q]
			continue
		}
		node[i] = len(nodes)
		nodes = append(nodes, laneNode{Vec: -1, Id: tape.ID(i)})
		key = append(key, tape.ID(i))
	}
	deps := make([][]int, len(nodes))
	indeg := make([]int, len(nodes))
	for i := range p.Values {
		if node[i] < 0 {
			continue
		}
		for _, a := range p.Values[i].Args {
			if node[a] < 0 || node[a] == node[i] {
				continue
			}
			deps[node[a]] = append(deps[node[a]], node[i])
			indeg[node[i]]++
		}
	}
	h := &nodeHeap{key: key}
	for n := range nodes {
		if indeg[n] == 0 {
			heap.Push(h, n)
		}
	}
	out := make([]laneNode, 0, len(nodes))
	for h.Len() > 0 {
		n := heap.Pop(h).(int)
		out = append(out, nodes[n])
		for _, m := range deps[n] {
			if indeg[m]--; indeg[m] == 0 {
				heap.Push(h, m)
			}
		}
	}
	return out, len(out) == len(nodes)
}

// nodeHeap orders node indices by their lowest value.
type nodeHeap struct {
	xs  []int
	key []tape.ID
}

func (h *nodeHeap) Len() int           { return len(h.xs) }
func (h *nodeHeap) Less(a, b int) bool { return h.key[h.xs[a]] < h.key[h.xs[b]] }
func (h *nodeHeap) Swap(a, b int)      { h.xs[a], h.xs[b] = h.xs[b], h.xs[a] }
func (h *nodeHeap) Push(x any)         { h.xs = append(h.xs, x.(int)) }
func (h *nodeHeap) Pop() any {
	x := h.xs[len(h.xs)-1]
	h.xs = h.xs[:len(h.xs)-1]
	return x
}

// shPos returns the position of shared input j in gs_sh.
func (e *emitter) shPos(j int) int {
	if e.src.Lanes {
		return lanePad(j)
	}
	return j
}

// padIndex returns the C expression of the padded position of base +
// stride·gs_l for gs_l in [0, w): a constant plus a multiple of gs_l where
// the progression allows, so that the address is one multiply per lane.
func padIndex(base, stride, w int) string {
	switch {
	case stride%LaneWidth == 0:
		return fmt.Sprintf("%d + %d * gs_l", lanePad(base), stride/LaneWidth*(LaneWidth+1))
	case stride > 0 && base%LaneWidth+stride*(w-1) < LaneWidth:
		return fmt.Sprintf("%d + %d * gs_l", lanePad(base), stride)
	}
	return fmt.Sprintf("GS_PAD(%d + %d * gs_l)", base, stride)
}

// order returns the nodes to emit: in lanes mode the vectors and the
// replicated values in dependency order (laneOrder); otherwise the live
// values in program order.
func (e *emitter) order(live []bool) ([]laneNode, error) {
	p := e.p
	if e.src.Lanes {
		e.lp = planLanes(p, e.shIndex)
		e.bcast = make(map[tape.ID]bool)
		if len(e.lp.Vecs) > 0 {
			if order, ok := laneOrder(p, e.lp, live); ok {
				return order, nil
			}
			// A cycle between vectors: every value replicated.
			e.lp = &lanePlan{vec: make([]int32, len(p.Values)), el: make([]uint8, len(p.Values))}
		}
	}
	var order []laneNode
	for i := range p.Values {
		if live[i] {
			order = append(order, laneNode{Vec: -1, Id: tape.ID(i)})
		}
	}
	return order, nil
}

// vector emits vector q: one statement computing element gs_l in lane
// gs_l, then the adds of its elements that are accumulator terms.
func (e *emitter) vector(q int, lines []string) {
	v := &e.lp.Vecs[q]
	w := len(v.Ids)
	first := tape.ID(-1)
	for _, id := range v.Ids {
		if id >= 0 {
			first = id
			break
		}
	}
	comment := commentOf(lines[first])
	if e.src.Tile {
		switch done, acc := e.tileProducts(q, comment); {
		case done && acc:
			e.laneVecAcc(q)
			return
		case done:
			return
		}
		if e.tileVector(q, comment) {
			e.laneVecAcc(q)
			return
		}
	}
	for _, a := range v.Args {
		if a.Kind == laneCommon {
			e.need(a.Id)
		}
	}
	args := make([]string, len(v.Args))
	for k, a := range v.Args {
		switch a.Kind {
		case laneCommon:
			args[k] = e.ref(a.Id)
		case laneShared:
			args[k] = "gs_sh[" + padIndex(a.Base, a.Stride, w) + "]"
		case laneAligned:
			args[k] = fmt.Sprintf("GS_EL(u%d)", a.Vec)
		}
	}
	expr := ops.Lookup(v.Op).C(args, v.Aux)
	if e.src.Tile {
		expr = e.src.outline(v.Op, v.Aux, args, expr)
	}
	fmt.Fprintf(&e.sb, "  GS_VEC(u%d); GS_LANES(%d) GS_EL(u%d) = %s; GS_END  // %d lanes, e.g. %s\n", q, w, q, expr, w, comment)
	e.laneVecAcc(q)
}

// accTermsOf returns the accumulator entries value id is added to, in
// increasing order.
func (e *emitter) accTermsOf(id tape.ID) []int {
	if e.acc == nil {
		return nil
	}
	if e.accOf == nil {
		e.accOf = make(map[tape.ID][]int)
		for _, t := range e.accTerms() { // sorted by entry
			e.accOf[t.id] = append(e.accOf[t.id], t.j)
		}
	}
	return e.accOf[id]
}

// laneVecAcc adds the elements of vector q that are accumulator terms:
// lane e adds element e where the entries run in a progression over the
// elements, else one lane adds each term.
func (e *emitter) laneVecAcc(q int) {
	if e.acc == nil {
		return
	}
	v := &e.lp.Vecs[q]
	type pair struct{ el, j int }
	var ps []pair
	multi := false
	for el, id := range v.Ids {
		if id < 0 {
			continue
		}
		js := e.accTermsOf(id)
		multi = multi || len(js) > 1
		for _, j := range js {
			ps = append(ps, pair{el, j})
		}
	}
	if len(ps) == 0 {
		return
	}
	affine := !multi && len(ps) >= 2
	var base, stride int
	if affine {
		p0, p1 := ps[0], ps[1]
		if (p1.j-p0.j)%(p1.el-p0.el) != 0 {
			affine = false
		} else {
			stride = (p1.j - p0.j) / (p1.el - p0.el)
			base = p0.j - stride*p0.el
			affine = stride != 0 && base >= 0 && base+stride*(len(v.Ids)-1) >= 0
			for _, p := range ps {
				affine = affine && p.j == base+stride*p.el
			}
		}
	}
	if !affine {
		for _, p := range ps {
			e.need(v.Ids[p.el])
			e.laneAdd(p.j, vname(v.Ids[p.el]))
		}
		return
	}
	var mask uint32
	for _, p := range ps {
		mask |= 1 << p.el
	}
	if e.src.Tile {
		e.tileVecAcc(q, len(v.Ids), mask, base, stride)
		return
	}
	add, at := "GS_ACC_ADD", padIndex(base, stride, len(v.Ids))
	if e.src.accShared {
		add, at = "GS_ACC_ATOMIC", fmt.Sprintf("%d + %d * gs_l", base, stride)
	}
	fmt.Fprintf(&e.sb, "  GS_ACC_LANES(%d, 0x%08xu) %s(&gs_acc[%s], GS_EL(u%d)); GS_ACC_END\n",
		len(v.Ids), mask, add, at, q)
}

// laneAdd adds replicated x to accumulator entry j from lane 0: to the
// warp's own accumulator (padded), or atomically to a shared one
// (Source.accShared).
func (e *emitter) laneAdd(j int, x string) {
	if e.src.Tile {
		e.tileAdd(j, x)
		return
	}
	if e.src.accShared {
		fmt.Fprintf(&e.sb, "  if (gs_on && GS_LANE0) GS_ACC_ATOMIC(&gs_acc[%d], %s);\n", j, x)
		return
	}
	fmt.Fprintf(&e.sb, "  if (gs_on && GS_LANE0) GS_ACC_ADD(&gs_acc[%d], %s);\n  GS_SYNCWARP();\n", lanePad(j), x)
}

// laneAcc adds replicated value id to the accumulator entries it is a
// term of, from lane 0.
func (e *emitter) laneAcc(id tape.ID) {
	for _, j := range e.accTermsOf(id) {
		e.laneAdd(j, e.ref(id))
	}
}

// useLanes reports whether the kernels of sp's plan run one warp per
// trajectory: the programs the reverse step calls (the field and its VJP)
// have at least 512 computed values, three quarters of them in vectors.
// A small or scalar field (Lorenz, Robertson) runs faster with one thread
// per trajectory.
func useLanes(sp *StepPrograms) bool {
	total, inVec := 0, 0
	seen := map[*tape.Program]bool{}
	var walk func(p *tape.Program)
	walk = func(p *tape.Program) {
		for _, f := range p.Funcs {
			if seen[f] {
				continue
			}
			seen[f] = true
			walk(f)
			for _, v := range f.Values {
				if v.Op != ops.OpInput && v.Op != ops.OpConst {
					total++
				}
			}
			inVec += planLanes(f, sharedIndex(f)).Elements()
		}
	}
	walk(sp.Rev)
	return total >= 512 && 4*inVec >= 3*total
}

// ThreadsFill reports whether a job of n trajectories of pl runs one
// thread per trajectory although pl's field is one for lanes mode: a
// small network (at most lanesSmallNet shared weights), and enough
// trajectories to fill sms multiprocessors with threads
// (lanesThreadFill per multiprocessor; 0 sms, unknown, never). There one
// thread per trajectory reads each weight once for 32 trajectories and
// its kernel stays small, while lanes mode pays a shared-memory load of a
// weight per multiply-add: on an H200 at B = 65536, 2-8-8-2's gradient
// takes 0.92 ms one thread per trajectory against 2.86 ms in lanes mode
// (vectors staged), 2-16-16-2's 3.07 against 3.33 (at B = 4096 lanes mode
// is 2.1× and 3.8× faster), while 2-32-32-2's (1,218 weights) is faster in
// lanes mode even at 65536 (6.6 ms against 18.6).
func ThreadsFill(pl *ode.Plan, n, sms int) bool {
	return pl.Shared <= LanesSmallNet && ThreadsFillDevice(n, sms)
}

// ThreadsFillDevice reports whether n trajectories, one thread each, fill
// sms multiprocessors: at least LanesThreadFill per multiprocessor (8
// warps; 33,792 trajectories on an H100's 132). With 0 sms (unknown: a
// host backend) it reports false. Below it the thread layout leaves
// latency unhidden (n = 4096: 128 warps for 132 multiprocessors); package
// cuda's layout choice asks it for lanes mode (ThreadsFill) and for the
// wide layout of smaller states (WideFillMinDim).
func ThreadsFillDevice(n, sms int) bool {
	return sms > 0 && n >= sms*LanesThreadFill
}

// A network of at most lanesSmallNet shared weights runs one thread per
// trajectory when a job has at least lanesThreadFill trajectories per
// multiprocessor (threadsFill).
const (
	LanesSmallNet   = 512
	LanesThreadFill = 256
)

// Lanes-mode launches: at most lanesBlock threads (warps, trajectories)
// per block and lanesBlocksPerSM blocks per multiprocessor, each warp
// running trajectories until none is left.
const (
	LanesBlock       = 128
	lanesBlocksPerSM = 8
)

// lanesBlockLen returns the reals of a lanes-mode kernel's padded shared
// block and, after it, the controller's (warp.cuh: GS_SSH + GS_CSH).
func lanesBlockLen(d, ns int) int { return PadLen(ns+d+2) + PadLen(d+2) }

// lanesAccLen returns the reals of a padded accumulator of ns shared
// parameters (warp.cuh: GS_WACC).
func lanesAccLen(ns int) int { return max(PadLen(ns), 1) }

// LanesShared returns the bytes of shared memory of a lanes-mode block of
// warps warps: each warp's staging row, the padded shared block and
// controller block, and for a gradient each warp's padded accumulator.
func LanesShared(d, ns int, grad bool, prec Precision, warps int) int {
	n := warps*LaneStageLen + lanesBlockLen(d, ns)
	if grad {
		n += warps * lanesAccLen(ns)
	}
	return n * prec.Size()
}

// LanesWarps returns the warps of a lanes-mode block, at most block/32,
// as many as fit in limit bytes of shared memory (at least one).
func LanesWarps(d, ns int, grad bool, prec Precision, block, limit int) int {
	w := max(block/32, 1)
	for w > 1 && LanesShared(d, ns, grad, prec, w) > limit {
		w--
	}
	return w
}

// LanesLaunch returns the shape of a lanes-mode launch over n
// trajectories (or tiles of them, each a warp's) of a kernel whose blocks
// may have up to block threads, on sms multiprocessors (0 if unknown) with
// limit bytes of shared memory per block: as many warps per block as fit
// (lanesWarps), at most
// lanesBlocksPerSM blocks per multiprocessor, each warp running
// trajectories until none is left. A kernel with its shared block and
// accumulators in global memory (global, GS_LANES_GLOBAL) uses shared
// memory only for its warps' staging rows and runs lanesGlobalBlocksPerSM
// blocks of lanesBlock threads per multiprocessor (each warp's
// accumulator takes global memory, so the threads are whole blocks); with
// one accumulator per block in shared memory (blockAcc,
// GS_LANES_BLOCKACC), one block of lanesAccBlock threads.
func LanesLaunch(n, d, ns int, grad, global, blockAcc bool, prec Precision, block, sms, limit int) (threads, blockThreads, shmem int) {
	if global {
		per := LanesGlobalBlocksPerSM
		w := max(min(LanesBlock, block)/LaneWidth, 1)
		if blockAcc {
			per, w = 1, max(min(LanesAccBlock, block)/LaneWidth, 1)
		}
		shmem := w * LaneStageLen * prec.Size()
		if blockAcc {
			shmem += lanesAccLen(ns) * prec.Size()
		}
		threads = LaneWidth * n
		if sms > 0 {
			threads = min(threads, sms*per*LaneWidth*w)
		}
		// Whole blocks: every warp of the grid has its accumulator row.
		bt := LaneWidth * w
		return (threads + bt - 1) / bt * bt, bt, shmem
	}
	w := LanesWarps(d, ns, grad, prec, min(LanesBlock, block), limit)
	threads = LaneWidth * n
	if sms > 0 {
		threads = min(threads, sms*lanesBlocksPerSM*LaneWidth*w)
	}
	return threads, LaneWidth * w, LanesShared(d, ns, grad, prec, w)
}

// LanesAccBlock is the threads of a block of a lanes-mode gradient kernel
// whose warps share one accumulator (GS_LANES_BLOCK): 16 warps, one block
// per multiprocessor.
const LanesAccBlock = 512

// LanesBlockAccFits reports whether one accumulator of ns shared
// parameters, beside the staging rows of a block of lanesAccBlock
// threads, fits in limit bytes of shared memory (GS_LANES_BLOCKACC: some
// 26,000 float64 weights in an H200's 227 KiB).
func LanesBlockAccFits(ns int, prec Precision, limit int) bool {
	return ns > 0 && (lanesAccLen(ns)+LanesAccBlock/LaneWidth*LaneStageLen)*prec.Size() <= limit
}

// LanesGlobalBlocksPerSM is the number of blocks per multiprocessor of a
// lanes-mode launch in global memory: as many as 128 registers per thread
// let run.
const LanesGlobalBlocksPerSM = 4

// LanesGlobalLayout returns the reals of the shared block of a lanes-mode
// kernel in global memory (the padded shared block, then the padded
// controller block: GS_SSH + GS_CSH) and of its warps' accumulators
// (GS_WACC each) for a launch of threads threads.
func LanesGlobalLayout(d, ns int, grad bool, threads int) (block, accs int) {
	if grad {
		accs = (threads / LaneWidth) * lanesAccLen(ns)
	}
	return lanesBlockLen(d, ns), accs
}

// LanesSharedBlock writes the shared block sh (shared parameters, rtol,
// atol, maxsteps: ns+d+2 values) padded, as a lanes-mode kernel in global
// memory reads it: the whole block at lanePad(j), then its last d+2 values
// again at padLen(ns+d+2)+lanePad(j), the controller's block.
func LanesSharedBlock(set func(int, float64), sh []float64, ns int) {
	for j, x := range sh {
		set(lanePad(j), x)
	}
	base := PadLen(len(sh))
	for j, x := range sh[ns:] {
		set(base+lanePad(j), x)
	}
}

// LanesMinBlocks returns how many lanes-mode blocks (of lanesBlock
// threads, or fewer where shared memory forces it) fit in the shared
// memory of a multiprocessor, taken as limit (the most a block may opt in
// to: a multiprocessor holds that plus 1 KiB reserved per block), at most
// 4: the blocks the kernel's registers should leave room for.
func LanesMinBlocks(d, ns int, grad bool, prec Precision, limit int) int {
	w := LanesWarps(d, ns, grad, prec, LanesBlock, limit)
	per := LanesShared(d, ns, grad, prec, w) + 1024
	return max(1, min(4, (limit+1024)/per))
}

// LanesFit reports whether a lanes-mode block of one warp of pl (with its
// accumulator for a gradient) fits in limit bytes of shared memory
// (backend.sharedLimit: 227 KiB on an H200, some 13,000 float64 weights
// for a gradient); else the kernel keeps them in global memory
// (Config.LanesGlobal).
func LanesFit(pl *ode.Plan, grad bool, prec Precision, limit int) bool {
	return LanesShared(pl.Dim, pl.Shared, grad, prec, 1) <= limit
}
