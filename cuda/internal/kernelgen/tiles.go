package kernelgen

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Tiles: eight trajectories per warp, layers on the tensor cores.
//
// Lanes mode (lanes.go) gives a trajectory a whole warp and reads a
// weight from shared memory for every multiply-add: at large ensembles
// the layers' loads bound it. In tile mode (SourceSettings.TileMode) a warp
// runs a tile of eight trajectories, lane l on trajectory l/4: the four
// lanes of a trajectory compute its replicated values alike, and a
// vector (the lanes plan's, planLanes) holds element e of the lane's own
// trajectory in lane 4(l/4) + e%4, slot e/4 (GS_VEC: 8 slots), so that
// the elementwise code of lanes mode runs unchanged over the slots
// (GS_LANES) and a vector's arguments common to its elements are the
// lane's own replicated values.
//
// A dense layer, a vector of Dots whose weights are a matrix of shared
// inputs (row e, input q at wb + wq·q + ws·e) and whose inputs are common
// to its rows, is computed as float64 tensor-core products (gs_tdot: one
// m8n8k4 product per 8 rows and 4 inputs, the tile's trajectories as the
// columns), one weight load per lane and product instead of one per
// multiply-add. The product adds its terms in k order with fused
// multiply-adds, as the Dot's C form does (the H200 measured bit for bit,
// bench's TestNeuralCUDAMMARounding), so tile mode computes the values
// lanes mode and one thread per trajectory compute.
//
// Terms a function adds to the warp's accumulator are summed over the
// tile's trajectories first (gs_touter, gs_tacc_one): each entry has
// one writer. Tile mode is float64 only.

// TileWidth is the number of trajectories of a tile.
const TileWidth = 8

// tileDot is how vector q computes as a dense layer (gs_tdot).
type tileDot struct {
	k, o       int // inputs, and the offset of input 0 in vector x
	x          int // the input vector, or -1: replicated inputs xs
	xs         []tape.ID
	wb, wq, ws int // weight of row e, input q: wb + wq·q + ws·e
	bb, bs     int // bias of row e: bb + bs·e (bb < 0: none)
}

// tileDotOf reports whether vector q is a dense layer tile mode computes
// with tensor-core products, and how.
func (e *emitter) tileDotOf(q int) (tileDot, bool) {
	v := &e.lp.Vecs[q]
	if v.Op != ops.OpDot || len(v.Args) < 3 || len(v.Ids) > LaneWidth {
		return tileDot{}, false
	}
	k := (len(v.Args) - 1) / 2
	td := tileDot{k: k, x: -1}
	for j := 0; j < k; j++ {
		a := v.Args[j]
		if a.Kind != laneShared {
			return tileDot{}, false
		}
		switch j {
		case 0:
			td.wb, td.ws = a.Base, a.Stride
		case 1:
			td.wq = a.Base - td.wb
		}
		if a.Stride != td.ws || a.Base != td.wb+td.wq*j {
			return tileDot{}, false
		}
	}
	if td.ws == 0 && len(v.Ids) > 1 {
		return tileDot{}, false
	}
	// Inputs: common to the rows; elements q + o of one vector, or
	// replicated values.
	fromVec := true
	for j := 0; j < k; j++ {
		a := v.Args[k+j]
		if a.Kind != laneCommon {
			return tileDot{}, false
		}
		td.xs = append(td.xs, a.Id)
		xq, xe, ok := e.lp.In(a.Id)
		switch {
		case !ok:
			fromVec = false
		case j == 0:
			td.x, td.o = xq, xe
		case xq != td.x || xe != td.o+j:
			fromVec = false
		}
	}
	if !fromVec || td.o%4 != 0 || td.o+k > len(e.lp.Vecs[td.x].Ids) {
		td.x = -1
	}
	switch b := v.Args[2*k]; {
	case b.Kind == laneShared:
		td.bb, td.bs = b.Base, b.Stride
	case b.Kind == laneCommon && e.p.Values[b.Id].Op == ops.OpConst && e.p.Values[b.Id].Aux == 0:
		td.bb = -1
	default:
		return tileDot{}, false
	}
	return td, true
}

// tileVector emits vector q as a dense layer (gs_tdot) and reports
// whether it did.
func (e *emitter) tileVector(q int, comment string) bool {
	td, ok := e.tileDotOf(q)
	if !ok {
		return false
	}
	w := len(e.lp.Vecs[q].Ids)
	x := fmt.Sprintf("u%d", td.x)
	if td.x < 0 {
		refs := make([]string, len(td.xs))
		for j, id := range td.xs {
			e.need(id)
			refs[j] = e.ref(id)
		}
		x = fmt.Sprintf("gs_x%d", q)
		fmt.Fprintf(&e.sb, "  const gs_real %s[%d] = {%s};\n", x, len(refs), strings.Join(refs, ", "))
	}
	fmt.Fprintf(&e.sb, "  GS_VEC(u%d); gs_tdot<%d, %d, %d, %t>(u%d, %s, gs_sh, %d, %d, %d, %d, %d);  // %d rows, e.g. %s\n",
		q, w, td.k, td.o, td.x < 0, q, x, td.wb, td.wq, td.ws, td.bb, td.bs, w, comment)
	return true
}

// tileVecAcc adds vector q's elements to the accumulator entries
// base + stride·e of mask, summed over the tile: the outer product of the
// vector with ones (gs_touter). Where a product of the tile plan takes q
// as its g over the same rows (a layer's bias beside its weights), the
// sum waits in e.biasAcc for that product's call (tileProducts), which
// adds it on the same fragments of g.
func (e *emitter) tileVecAcc(q, w int, mask uint32, base, stride int) {
	b := biasAcc{w: w, mask: mask, base: base, stride: stride}
	for _, o := range e.tp.outer {
		if o.gv == q && o.r == w && o.rows == mask {
			if e.biasAcc == nil {
				e.biasAcc = make(map[int]biasAcc)
			}
			e.biasAcc[q] = b
			return
		}
	}
	e.emitBiasAcc(q, b)
}

// biasAcc is an accumulation of a vector of w elements with ones
// (tileVecAcc): the entries' mask, base and stride.
type biasAcc struct {
	w            int
	mask         uint32
	base, stride int
}

// emitBiasAcc emits the accumulation b of vector q with ones on its own.
func (e *emitter) emitBiasAcc(q int, b biasAcc) {
	fmt.Fprintf(&e.sb, "  gs_touter<%d, 1, 0, 2, %t>(gs_acc, u%d, nullptr, gs_on, 0x%08xu, %d, %d);\n", b.w, e.src.accShared, q, b.mask, b.base, b.stride)
}

// flushBiasAcc emits the accumulations still waiting in e.biasAcc (none
// where every product the plan holds was emitted), in vector order.
func (e *emitter) flushBiasAcc() {
	qs := make([]int, 0, len(e.biasAcc))
	for q := range e.biasAcc {
		qs = append(qs, q)
	}
	for _, q := range sortedCopy(qs) {
		e.emitBiasAcc(q, e.biasAcc[q])
	}
	e.biasAcc = nil
}

// tileAdd adds replicated x, summed over the tile, to entry j.
func (e *emitter) tileAdd(j int, x string) {
	if e.src.accShared {
		fmt.Fprintf(&e.sb, "  gs_tacc_one<true>(gs_acc, %d, %s, gs_on);\n", j, x)
		return
	}
	fmt.Fprintf(&e.sb, "  gs_tacc_one<false>(gs_acc, %d, %s, gs_on);\n", lanePad(j), x)
}

// TileMemory returns tile-mode kernel v (d states, ns shared
// parameters) with its shared memory and schedule chosen for a device
// whose blocks may have limit bytes of shared memory: the accumulators
// and the shared block in shared memory where they fit, tiles taken in
// turn. accGlobal keeps the warps' accumulators in global memory,
// shGlobal the shared and controller blocks, and static has warps run
// every gridth tile instead of taking tiles in turn (for comparisons).
// Host backends (device false: no multiprocessors, no shared memory) keep
// both in global memory and run every gridth tile.
func (v Config) TileMemory(device bool, d, ns, limit int, accGlobal, shGlobal, static bool) Config {
	v.TileSharedAcc = device && v.Grad && ns > 0 && !accGlobal &&
		TileSharedFits(d, ns, true, false, limit)
	v.TileSharedSh = device && (!v.Grad || v.TileSharedAcc) && !shGlobal &&
		TileSharedFits(d, ns, v.TileSharedAcc, true, limit)
	v.TileDynamic = device && !static
	return v
}

// TileShared returns the bytes of shared memory of a tile-mode block of
// warps warps (d states, ns shared parameters): the padded shared and
// controller blocks with sh, then each warp's accumulator with acc.
func TileShared(warps, d, ns int, acc, sh bool) int {
	n := 0
	if sh {
		n += lanesBlockLen(d, ns)
	}
	if acc {
		n += warps * lanesAccLen(ns)
	}
	return n * Float64.Size()
}

// TileSharedFits reports whether tileBlocksPerSM blocks of lanesBlock
// threads with what tileShared counts in shared memory (acc, sh) fit in
// a multiprocessor whose blocks may have limit bytes each (limit + 1 KiB
// per block in all): on an H200 the accumulators alone for up to 1,728
// float64 weights, with the shared block for up to 1,376.
func TileSharedFits(d, ns int, acc, sh bool, limit int) bool {
	per := TileShared(LanesBlock/LaneWidth, d, ns, acc, sh) + 1024
	return tileBlocksPerSM*per <= limit+1024
}

// Tile-mode launches: tileBlocksPerSM blocks of lanesBlock threads per
// multiprocessor (what 128 registers a thread let run), and tile mode
// where a job has at least tileFill tiles (warps) per multiprocessor:
// from 3,168 trajectories on an H100's 132. Measured there
// (BenchmarkGPUTileFill, gradient-with-record kernels, lanes against
// tile mode): the 2-32-32-2 MLP field 0.166 / 0.391 ms at n = 1,024,
// 0.417 / 0.399 at 4,096, 1.685 / 0.650 at 16,384; neural Robertson
// (Rodas5P) 4.43 / 4.84, 14.25 / 5.56, 59.88 / 10.98.
const (
	tileBlocksPerSM = 4
	tileFill        = 3
)

// Tiled returns v in tile mode: the shared block read through the cache
// and each warp's accumulator in global memory (as GS_LANES_GLOBAL), no
// staging rows, tileBlocksPerSM blocks per multiprocessor.
func (v Config) Tiled() Config {
	v.Lanes, v.TileMode, v.LanesGlobal, v.LanesBlockAcc, v.LanesShuffle = true, true, true, false, true
	v.LanesMinBlocks = tileBlocksPerSM
	return v
}

// TileModeAllowed reports whether a job of plan pl (kernel v, in lanes
// mode) may run in tile mode in precision prec, with tile sums
// (MultiEngine) or not, whose loss holds vectors (lossVectors) or not:
// float64, no tile sums (gs_body_tile), a shared gradient the reverse
// steps accumulate, and a loss without vectors (the kernel calls it for
// the trajectories that finished only).
func TileModeAllowed(v Config, pl *ode.Plan, prec Precision, tileSums, lossVectors bool) bool {
	return !(prec != Float64 || tileSums || pl.Shared == 0 || noAccumulate || lossVectors && (v.Loss || v.Grad))
}

// TileModeFills reports whether n trajectories give every one of sms
// multiprocessors (0: unknown, never) tileFill tiles: below that lanes
// mode's warp per trajectory keeps more of the GPU busy.
func TileModeFills(n, sms int) bool {
	return sms > 0 && (n+TileWidth-1)/TileWidth >= sms*tileFill
}

// LossHasVectors reports whether loss lp's programs hold vectors.
func LossHasVectors(lp *ode.LossPlan) bool { return hasVectors(lp.Grad) || hasVectors(lp.Term) }

// hasVectors reports whether lanes mode finds vectors in p or a program
// it calls.
func hasVectors(p *tape.Program) bool {
	if p == nil {
		return false
	}
	if planLanes(p, sharedIndex(p)).Elements() > 0 {
		return true
	}
	for _, f := range p.Funcs {
		if hasVectors(f) {
			return true
		}
	}
	return false
}

// The adjoint of a dense layer y = W·x + b is two more matrix products
// over the tile, which a field's VJP holds as vectors that tile mode
// would otherwise compute element by element:
//
//   - x̄ = Wᵀ·ȳ, as a chain of vector adds of the products ȳ_i·W[i][·],
//     one per row i, each used once by the next add (a tileChain): one
//     gs_tdot with W read transposed, its terms summed as fused
//     multiply-adds in i order (not the chain's order and rounding: the
//     adjoint's values may differ from lanes mode's in the last bits);
//   - W̄ += ȳ·xᵀ, as the products ȳ_i·x[·] that the function adds to the
//     accumulator entries of row i of W and uses for nothing else (a
//     tileOuter): one gs_touter, a tensor-core product per 8×8 block of
//     W with the tile's trajectories as the inner dimension, added to the
//     warp's accumulator once per call.

// tileChain is a chain of adds of products g_i·W[i][·] (tileProducts).
type tileChain struct {
	k          int // rows i = 0..k-1
	g          int // the vector of the g_i, or -1: replicated gs
	gs         []tape.ID
	wb, wq, ws int // W[i][j] at wb + wq·i + ws·j
}

// tileOuter is a group of products g_i·x_j added to W̄[i][j]: one vector
// per row (its elements the columns) or one per column (its elements the
// rows). g and x are vectors (gv, xv) or replicated values (gs, xs; gv or
// xv -1).
type tileOuter struct {
	r, c   int
	gv, xv int
	gs, xs []tape.ID
	rows   uint32 // rows that have a member
	b0, rs int    // entry of row i, column j: b0 + rs·i + j
}

// mode returns gs_tfrag's mode of a source: vector (0) or replicated (1).
func mode(v int) int {
	if v >= 0 {
		return 0
	}
	return 1
}

// tileColumns is Wᵀ·g where the products g_i·W[i][·] are short vectors
// (a layer with few inputs, the state's cotangent) whose element j each
// replicated add chain j (head_j + Σ_i) sums: one gs_tdot of the columns,
// then head_j plus element j.
type tileColumns struct {
	n       int // index among the function's (its vector ut<n>)
	emitted bool
	ch      tileChain
	w       int // columns
}

// tileColEnd is the last add of column j's chain.
type tileColEnd struct {
	cols *tileColumns
	j    int
	head tape.ID // -1: none
}

// tilePlan is what tile mode computes as matrix products in a function:
// skip[q] marks vectors not emitted (members of a chain or a group),
// chain[q] the chains ending in vector q, outer[q] the group emitted at
// its last member q; skipID marks replicated values not emitted (the
// adds of tileColumns' chains) and colEnd their ends.
type tilePlan struct {
	skip   map[int]bool
	chain  map[int]*tileChain
	outer  map[int]*tileOuter
	skipID map[tape.ID]bool
	colEnd map[tape.ID]tileColEnd
}

// tileScalar emits replicated value id where the tile plan makes it part
// of a matrix product and reports whether it did (or skipped it).
func (e *emitter) tileScalar(id tape.ID, comment string) bool {
	if e.tp.skipID[id] {
		return true
	}
	end, ok := e.tp.colEnd[id]
	if !ok {
		return false
	}
	c := end.cols
	if !c.emitted {
		c.emitted = true
		x := fmt.Sprintf("u%d", c.ch.g)
		if c.ch.g < 0 {
			x = e.replicated(c.n, "xc", c.ch.gs)
		}
		fmt.Fprintf(&e.sb, "  GS_VEC(ut%d); gs_tdot<%d, %d, 0, %t>(ut%d, %s, gs_sh, %d, %d, %d, -1, 0);  // Wᵀ·g, %d columns over %d products\n",
			c.n, c.w, c.ch.k, c.ch.g < 0, c.n, x, c.ch.wb, c.ch.wq, c.ch.ws, c.w, c.ch.k)
	}
	sum := fmt.Sprintf("GS_BCAST(ut%d, %d)", c.n, end.j)
	if end.head >= 0 {
		e.need(end.head)
		sum = fmt.Sprintf("(%s + %s)", e.ref(end.head), sum)
	}
	e.scalar(id, sum, comment)
	return true
}

// tileProducts emits vector q where the tile plan makes it part of a
// matrix product: it reports whether q is done, and whether its elements
// still need their accumulator terms added (laneVecAcc).
func (e *emitter) tileProducts(q int, comment string) (done, acc bool) {
	tp := e.tp
	if ch := tp.chain[q]; ch != nil {
		w := len(e.lp.Vecs[q].Ids)
		x := fmt.Sprintf("u%d", ch.g)
		if ch.g < 0 {
			x = e.replicated(q, "x", ch.gs)
		}
		fmt.Fprintf(&e.sb, "  GS_VEC(u%d); gs_tdot<%d, %d, 0, %t>(u%d, %s, gs_sh, %d, %d, %d, -1, 0);  // %d rows: Wᵀ·g over %d products, e.g. %s\n",
			q, w, ch.k, ch.g < 0, q, x, ch.wb, ch.wq, ch.ws, w, ch.k, comment)
		return true, true
	}
	if o := tp.outer[q]; o != nil {
		g, x := fmt.Sprintf("u%d", o.gv), fmt.Sprintf("u%d", o.xv)
		if o.gv < 0 {
			g = e.replicated(q, "g", o.gs)
		}
		if o.xv < 0 {
			x = e.replicated(q, "x", o.xs)
		}
		// A bias accumulated from the same vector joins the product: one
		// set of g's fragments for both (gs_touter's bb, bs).
		bias := ""
		if b, ok := e.biasAcc[o.gv]; ok && o.gv >= 0 && b.w == o.r && b.mask == o.rows {
			bias = fmt.Sprintf(", %d, %d", b.base, b.stride)
			delete(e.biasAcc, o.gv)
		}
		fmt.Fprintf(&e.sb, "  gs_touter<%d, %d, %d, %d, %t>(gs_acc, %s, %s, gs_on, 0x%08xu, %d, %d%s);  // W̄ += g·xᵀ over the tile, e.g. %s\n",
			o.r, o.c, mode(o.gv), mode(o.xv), e.src.accShared, g, x, o.rows, o.b0, o.rs, bias, comment)
		return true, false
	}
	return tp.skip[q], false
}

// replicated emits the array gs_<what><q> of the replicated values ids
// (0 for -1) and returns its name.
func (e *emitter) replicated(q int, what string, ids []tape.ID) string {
	refs := make([]string, len(ids))
	for j, id := range ids {
		if id < 0 {
			refs[j] = "(gs_real)0"
			continue
		}
		e.need(id)
		refs[j] = e.ref(id)
	}
	name := fmt.Sprintf("gs_%s%d", what, q)
	fmt.Fprintf(&e.sb, "  const gs_real %s[%d] = {%s};\n", name, len(refs), strings.Join(refs, ", "))
	return name
}

// planTiles finds the function's matrix products (tileProducts), phase
// by phase over the values' uses: the chains of Wᵀ·g adds (planChains),
// the columns of short products (planColumns), then the groups of outer
// products (planOuters).
func (e *emitter) planTiles() *tilePlan {
	tp := &tilePlan{skip: map[int]bool{}, chain: map[int]*tileChain{}, outer: map[int]*tileOuter{},
		skipID: map[tape.ID]bool{}, colEnd: map[tape.ID]tileColEnd{}}
	u := e.valueUses()
	e.planChains(tp, u)
	e.planColumns(tp, u)
	e.planOuters(tp, u)
	return tp
}

// valueUses counts the uses of a function's values: n[id] live values
// reading id, and outputs returned; last[id] the last of them (-1: an
// output).
type valueUses struct {
	n    []int
	last []tape.ID
}

// valueUses returns the uses of the function's values.
func (e *emitter) valueUses() valueUses {
	p := e.p
	u := valueUses{n: make([]int, len(p.Values)), last: make([]tape.ID, len(p.Values))}
	for i := range p.Values {
		if !e.isLive[i] {
			continue
		}
		for _, a := range p.Values[i].Args {
			u.n[a]++
			u.last[a] = tape.ID(i)
		}
	}
	for m, o := range p.Outputs {
		if e.acc.returned(m) {
			u.n[o.ID]++
			u.last[o.ID] = -1
		}
	}
	return u
}

// feeds reports whether every element of vector q is used once only, by
// the element of vector v at its index, and adds nothing.
func (e *emitter) feeds(u valueUses, q, v int) bool {
	for el, id := range e.lp.Vecs[q].Ids {
		if u.n[id] != 1 || u.last[id] < 0 || len(e.accTermsOf(id)) > 0 {
			return false
		}
		if qu, eu, ok := e.lp.In(u.last[id]); !ok || qu != v || eu != el {
			return false
		}
	}
	return true
}

// chainLinks appends to prods the products (tileProduct) of the add chain
// ending in vector q and to inner its adds before q, or reports false if
// q ends none.
func (e *emitter) chainLinks(u valueUses, q int, prods, inner []int) ([]int, []int, bool) {
	v := &e.lp.Vecs[q]
	if v.Op != ops.OpAdd || len(v.Args) != 2 || !full(v) {
		return nil, nil, false
	}
	for _, a := range v.Args {
		if a.Kind != laneAligned || !e.feeds(u, a.Vec, q) {
			return nil, nil, false
		}
		if _, _, ok := e.tileProduct(a.Vec); ok {
			prods = append(prods, a.Vec)
			continue
		}
		var ok bool
		if prods, inner, ok = e.chainLinks(u, a.Vec, prods, inner); !ok {
			return nil, nil, false
		}
		inner = append(inner, a.Vec)
	}
	return prods, inner, true
}

// planChains finds the chains of adds of at least two products
// g_i·W[i][·] (tileChain) ending in a vector, the largest where one holds
// another, and skips their members.
func (e *emitter) planChains(tp *tilePlan, u valueUses) {
	lp := e.lp
	inChain := map[int]bool{}
	for q := range lp.Vecs {
		if !full(&lp.Vecs[q]) || !e.isLive[lp.Vecs[q].Ids[0]] {
			continue
		}
		prods, inner, ok := e.chainLinks(u, q, nil, nil)
		if !ok || len(prods) < 2 {
			continue
		}
		ch, ok := e.chainOf(prods)
		if !ok {
			continue
		}
		for _, x := range append(prods, inner...) {
			inChain[x] = true
		}
		tp.chain[q] = &ch
	}
	// A chain inside a larger one is the larger one's.
	for q := range tp.chain {
		if inChain[q] {
			delete(tp.chain, q)
		}
	}
	for q := range inChain {
		tp.skip[q] = true
	}
}

// outerKey is what the members of a group of outer products share: their
// orientation (col: columns of W̄, else rows), the aligned vector a, the
// vector of the common values c (-1: replicated), the width w and, for
// columns, the stride st of W̄'s rows (0 for rows).
type outerKey struct{ col, a, cv, w, st int }

// outerMember is a member of a group of outer products: vector q, whose
// first element adds to accumulator entry base, the k-th row (column) of
// the group.
type outerMember struct{ q, base, k int }

// outerGroups are the candidate groups of outer products of a function,
// by key, the keys in the order they were found.
type outerGroups struct {
	keys    []outerKey
	members map[outerKey][]outerMember
}

// planOuters finds the groups of outer products (tileOuter) of at least
// two members among the vectors tp has not taken, each emitted where its
// member emitted last would be.
func (e *emitter) planOuters(tp *tilePlan, u valueUses) {
	gs := e.outerCandidates(tp, u)
	for _, kk := range gs.keys {
		ms := gs.members[kk]
		if len(ms) < 2 {
			continue
		}
		o, ok := e.outerOf(kk, ms)
		if !ok {
			continue
		}
		// Emitted where the member emitted last would be.
		last := ms[0].q
		for _, m := range ms {
			tp.skip[m.q] = true
			if e.vecPos[m.q] > e.vecPos[last] {
				last = m.q
			}
		}
		delete(tp.skip, last)
		tp.outer[last] = o
	}
}

// outerCandidates groups the function's outer products. A Mul vector of
// an aligned vector a and a common value c, used for nothing but adding
// its elements to entries base + st·e, is a row of W̄ (st = 1: a is x, c
// a g_i) or a column (st > 1, the rows' stride: a is g, c an x_j).
// Members group by orientation, vector, c's vector (or replicated) and
// width (outerKey).
func (e *emitter) outerCandidates(tp *tilePlan, u valueUses) outerGroups {
	lp := e.lp
	gs := outerGroups{members: map[outerKey][]outerMember{}}
	for q := range lp.Vecs {
		v := &lp.Vecs[q]
		if tp.skip[q] || tp.chain[q] != nil || v.Op != ops.OpMul || len(v.Args) != 2 || !full(v) || !e.isLive[v.Ids[0]] {
			continue
		}
		a, b := e.outerArgs(q)
		if a.Kind != laneAligned || b.Kind != laneCommon || len(v.Ids) < 2 {
			continue
		}
		var js []int
		ok := true
		for _, id := range v.Ids {
			t := e.accTermsOf(id)
			if u.n[id] != 0 || len(t) != 1 {
				ok = false
				break
			}
			js = append(js, t[0])
		}
		if !ok {
			continue
		}
		st := js[1] - js[0]
		for el, j := range js {
			ok = ok && j == js[0]+st*el
		}
		if !ok || st < 1 {
			continue
		}
		cv, k := e.rowOf(b.Id)
		kk := outerKey{B2i(st > 1), a.Vec, cv, len(v.Ids), st}
		if st == 1 {
			kk.st = 0
		}
		if gs.members[kk] == nil {
			gs.keys = append(gs.keys, kk)
		}
		gs.members[kk] = append(gs.members[kk], outerMember{q, js[0], k})
	}
	return gs
}

// outerOf returns the outer product of the group of members ms with key
// kk, or false if their entries do not form the rows (columns) of one
// block of W̄ within a warp's width. It may reorder ms (replicated c:
// rows or columns in the order of their entries).
func (e *emitter) outerOf(kk outerKey, ms []outerMember) (*tileOuter, bool) {
	lp := e.lp
	if kk.cv < 0 {
		// Replicated c: rows (columns) in the order of their entries.
		sort.Slice(ms, func(a, b int) bool { return ms[a].base < ms[b].base })
		for n := range ms {
			ms[n].k = n
		}
	}
	ids := make([]tape.ID, 0, len(ms))
	for _, m := range ms {
		_, c := e.outerArgs(m.q)
		ids = append(ids, c.Id)
	}
	o := &tileOuter{gv: -1, xv: -1}
	ok := true
	span := 0
	for _, m := range ms {
		span = max(span, m.k+1)
	}
	if kk.col == 0 {
		// Rows: entry of row k at b0 + rs·k.
		o.r, o.c, o.xv = span, kk.w, kk.a
		if kk.cv >= 0 {
			o.gv = kk.cv
			ok = span <= len(lp.Vecs[kk.cv].Ids)
		} else {
			o.gs = ids
		}
		d := ms[1].k - ms[0].k
		if d == 0 || (ms[1].base-ms[0].base)%d != 0 {
			return nil, false
		}
		o.rs = (ms[1].base - ms[0].base) / d
		o.b0 = ms[0].base - o.rs*ms[0].k
		ok = ok && o.rs >= o.c
		for _, m := range ms {
			ok = ok && m.base == o.b0+o.rs*m.k && o.rows>>m.k&1 == 0
			o.rows |= 1 << m.k
		}
	} else {
		// Columns: entry of row i, column k at b0 + st·i + k; every
		// column present.
		o.r, o.c, o.gv, o.rs = kk.w, span, kk.a, kk.st
		o.rows = 1<<o.r - 1
		if kk.cv >= 0 {
			o.xv = kk.cv
			ok = span <= len(lp.Vecs[kk.cv].Ids)
		} else {
			o.xs = ids
		}
		o.b0 = ms[0].base - ms[0].k
		ok = ok && len(ms) == span && o.rs >= o.c
		for _, m := range ms {
			ok = ok && m.base == o.b0+m.k
		}
	}
	if !ok || o.r > LaneWidth || o.c > LaneWidth || o.b0 < 0 {
		return nil, false
	}
	return o, true
}

// outerArgs returns the arguments of the two-argument vector q, a common
// one second.
func (e *emitter) outerArgs(q int) (x, c laneArg) {
	a, b := e.lp.Vecs[q].Args[0], e.lp.Vecs[q].Args[1]
	if a.Kind == laneCommon {
		a, b = b, a
	}
	return a, b
}

// planColumns finds tileColumns: product vectors g_i·W[i][·]
// (tileProduct) whose element j is used once (u), by a replicated add of
// chain j, and nothing else: the products (columnProducts), their add
// chains (columnChains), then the sets of chains of one set of products.
func (e *emitter) planColumns(tp *tilePlan, u valueUses) {
	p, lp := e.p, e.lp
	ct := e.columnProducts(tp, u)
	if len(ct.prods) < 2 {
		return
	}
	term, chains := ct.term, e.columnChains(u, ct)
	// Chains of one set of products, one per column, each product once
	// per chain: one tileColumns.
	byProds := map[string][]int{}
	var order []string
	for k, c := range chains {
		seen := map[int]bool{}
		ok := true
		for _, q := range c.prods {
			ok = ok && !seen[q]
			seen[q] = true
		}
		if !ok || len(c.prods) != len(c.links)+B2i(c.head < 0) {
			continue
		}
		key := fmt.Sprint(sortedCopy(c.prods))
		if byProds[key] == nil {
			order = append(order, key)
		}
		byProds[key] = append(byProds[key], k)
	}
	for _, key := range order {
		cs := byProds[key]
		qs := chains[cs[0]].prods
		w := len(lp.Vecs[qs[0]].Ids)
		if len(cs) != w {
			continue
		}
		ch, ok := e.chainOf(qs)
		if !ok {
			continue
		}
		cols := map[int]bool{}
		for j := 0; j < w; j++ {
			cols[j] = true
		}
		// Every column once.
		js := make([]int, len(cs))
		for n, k := range cs {
			js[n] = -1
			for _, x := range p.Values[chains[k].links[0]].Args {
				if _, isTerm := term[x]; isTerm {
					js[n] = int(lp.el[x])
				}
			}
			ok = ok && js[n] >= 0 && cols[js[n]]
			cols[js[n]] = false
		}
		if !ok {
			continue
		}
		tc := &tileColumns{n: len(tp.colEnd), ch: ch, w: w}
		for n, k := range cs {
			c := chains[k]
			for _, l := range c.links[:len(c.links)-1] {
				tp.skipID[l] = true
			}
			tp.colEnd[c.end] = tileColEnd{cols: tc, j: js[n], head: c.head}
		}
		for _, q := range qs {
			tp.skip[q] = true
		}
	}
}

// columnTerms are the candidate products of tileColumns: the vectors
// prods, and the product vector each element of them belongs to (term).
type columnTerms struct {
	prods []int
	term  map[tape.ID]int
}

// columnAdd reports whether id is a live replicated add of two values.
func (e *emitter) columnAdd(id tape.ID) bool {
	if id < 0 {
		return false
	}
	_, _, inVec := e.lp.In(id)
	v := &e.p.Values[id]
	return !inVec && e.isLive[id] && v.Op == ops.OpAdd && len(v.Args) == 2
}

// columnProducts returns the product vectors tp has not taken whose every
// element is used once (u), by a replicated add, and adds nothing itself.
func (e *emitter) columnProducts(tp *tilePlan, u valueUses) columnTerms {
	lp := e.lp
	ct := columnTerms{term: map[tape.ID]int{}}
	for q := range lp.Vecs {
		if tp.skip[q] || tp.chain[q] != nil {
			continue
		}
		if _, _, ok := e.tileProduct(q); !ok || !e.isLive[lp.Vecs[q].Ids[0]] {
			continue
		}
		ok := true
		for _, id := range lp.Vecs[q].Ids {
			ok = ok && u.n[id] == 1 && u.last[id] >= 0 && e.columnAdd(u.last[id]) && len(e.accTermsOf(id)) == 0
		}
		if !ok {
			continue
		}
		ct.prods = append(ct.prods, q)
		for _, id := range lp.Vecs[q].Ids {
			ct.term[id] = q
		}
	}
	return ct
}

// columnChain is a chain of replicated adds (links, the last end) that
// sums the products' elements of one column, after head (-1: none).
type columnChain struct {
	prods []int
	links []tape.ID
	head  tape.ID
	end   tape.ID
}

// columnChains returns the add chains of ct's terms: from each add whose
// arguments hold a term, the single uses (u) up to the last add, with
// the products of its terms in order; only chains whose terms are all
// the same column's element.
func (e *emitter) columnChains(u valueUses, ct columnTerms) []columnChain {
	p, lp, term := e.p, e.lp, ct.term
	uses, user := u.n, u.last
	isLink := func(id tape.ID) bool {
		if !e.columnAdd(id) {
			return false
		}
		a := p.Values[id].Args
		_, ta := term[a[0]]
		_, tb := term[a[1]]
		return ta || tb
	}
	var chains []columnChain
	started := map[tape.ID]bool{}
	for _, q := range ct.prods {
		for el, id := range lp.Vecs[q].Ids {
			start := user[id]
			a := p.Values[start].Args
			prev := a[0]
			if prev == id {
				prev = a[1]
			}
			if started[start] || isLink(prev) && uses[prev] == 1 {
				continue // seen, or not the chain's first add
			}
			started[start] = true
			c := columnChain{head: prev}
			if _, ok := term[prev]; ok {
				c.head = -1
			}
			ok := true
			for cur := start; ; cur = user[cur] {
				for _, x := range p.Values[cur].Args {
					if tq, isTerm := term[x]; isTerm {
						c.prods = append(c.prods, tq)
						ok = ok && int(lp.el[x]) == el
					}
				}
				c.links = append(c.links, cur)
				c.end = cur
				if uses[cur] != 1 || user[cur] < 0 || !isLink(user[cur]) {
					break
				}
				ok = ok && len(e.accTermsOf(cur)) == 0
			}
			if ok {
				chains = append(chains, c)
			}
		}
	}
	return chains
}

// tileProduct returns the shared and the common argument of vector q, a
// Mul of one of each (a product g_i·W[i][·]), or ok false.
func (e *emitter) tileProduct(q int) (sh, c laneArg, ok bool) {
	v := &e.lp.Vecs[q]
	if v.Op != ops.OpMul || len(v.Args) != 2 || !full(v) {
		return laneArg{}, laneArg{}, false
	}
	a, b := e.outerArgs(q)
	return a, b, a.Kind == laneShared && b.Kind == laneCommon
}

// rowOf returns the vector and element of value c, or -1, -1 for a
// replicated value.
func (e *emitter) rowOf(c tape.ID) (g, i int) {
	if qg, eg, ok := e.lp.In(c); ok {
		return qg, eg
	}
	return -1, -1
}

// chainOf fits the products prods (tileProduct, all of one width) to a
// tileChain: row i is g_i's element in one vector g (all of its k rows
// once), or with replicated g_i the products' order; W[i][j] lies at
// wb + wq·i + ws·j.
func (e *emitter) chainOf(prods []int) (tileChain, bool) {
	lp := e.lp
	k, w := len(prods), len(lp.Vecs[prods[0]].Ids)
	ch := tileChain{k: k, g: -2, gs: make([]tape.ID, k)}
	base := make([]int, k)
	seen := make([]bool, k)
	for n, q := range prods {
		sh, c, _ := e.tileProduct(q)
		g, i := e.rowOf(c.Id)
		if g < 0 {
			i = n
		}
		if ch.g == -2 {
			ch.g, ch.ws = g, sh.Stride
		}
		if g != ch.g || i < 0 || i >= k || seen[i] || sh.Stride != ch.ws || len(lp.Vecs[q].Ids) != w {
			return tileChain{}, false
		}
		seen[i] = true
		ch.gs[i], base[i] = c.Id, sh.Base
	}
	if ch.ws == 0 && w > 1 || ch.g >= 0 && len(lp.Vecs[ch.g].Ids) < k {
		return tileChain{}, false
	}
	ch.wb = base[0]
	if k > 1 {
		ch.wq = base[1] - base[0]
	}
	for i, b := range base {
		if b != ch.wb+ch.wq*i {
			return tileChain{}, false
		}
	}
	if ch.g >= 0 {
		ch.gs = nil
	}
	return ch, true
}

// full reports whether every element of vector v is a value (no holes).
func full(v *laneVec) bool {
	for _, id := range v.Ids {
		if id < 0 {
			return false
		}
	}
	return true
}

// sortedCopy returns xs sorted, as a new slice.
func sortedCopy(xs []int) []int {
	ys := append([]int(nil), xs...)
	sort.Ints(ys)
	return ys
}

// outlineOps are the ops whose C form is a libm function of some tens of
// instructions: in tile mode a vector of them calls one out-of-line copy
// (outline) from each of a lane's eight slots instead of inlining eight.
var outlineOps = map[ops.Op]bool{
	ops.OpPow: true, ops.OpExp: true, ops.OpExpm1: true, ops.OpLog: true, ops.OpLog1p: true,
	ops.OpSin: true, ops.OpCos: true, ops.OpTan: true, ops.OpTanh: true,
	ops.OpSigmoid: true, ops.OpSoftplus: true,
}

// outline returns expr, the C form of op (with aux) on args, as a call of
// a GS_OUTLINE function computing it, emitted into the unit on first use
// (the same code, so the same results); expr itself for other ops.
func (s *Source) outline(op ops.Op, aux float64, args []string, expr string) string {
	if !outlineOps[op] {
		return expr
	}
	key := fmt.Sprintf("%d/%x/%d", op, math.Float64bits(aux), len(args))
	name, ok := s.outlined[key]
	if !ok {
		if s.outlined == nil {
			s.outlined = make(map[string]string)
		}
		name = fmt.Sprintf("gs_ol%d", len(s.outlined))
		s.outlined[key] = name
		params := make([]string, len(args))
		formals := make([]string, len(args))
		for k := range args {
			params[k] = fmt.Sprintf("gs_real x%d", k)
			formals[k] = fmt.Sprintf("x%d", k)
		}
		s.parts = append(s.parts, fmt.Sprintf("// %s, out of line (tile mode)\nGS_OUTLINE gs_real %s(%s) { return %s; }\n",
			ops.Lookup(op).Name, name, strings.Join(params, ", "), ops.Lookup(op).C(formals, aux)))
	}
	return fmt.Sprintf("%s(%s)", name, strings.Join(args, ", "))
}
