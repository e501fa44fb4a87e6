package cuda

import (
	"fmt"
	"os"
	"strings"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Tiles: eight trajectories per warp, layers on the tensor cores.
//
// Lanes mode (lanes.go) gives a trajectory a whole warp and reads a
// weight from shared memory for every multiply-add: at large ensembles
// the layers' loads bound it. In tile mode (SourceSettings.Tiles) a warp
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
// tile's trajectories first (gs_tacc_vec, gs_tacc_one): each entry has
// one writer. Tile mode is float64 only.

// tileWidth is the number of trajectories of a tile.
const tileWidth = 8

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
	v := &e.lp.vecs[q]
	if v.op != ops.OpDot || len(v.args) < 3 || len(v.ids) > laneWidth {
		return tileDot{}, false
	}
	k := (len(v.args) - 1) / 2
	td := tileDot{k: k, x: -1}
	for j := 0; j < k; j++ {
		a := v.args[j]
		if a.kind != laneShared {
			return tileDot{}, false
		}
		switch j {
		case 0:
			td.wb, td.ws = a.base, a.stride
		case 1:
			td.wq = a.base - td.wb
		}
		if a.stride != td.ws || a.base != td.wb+td.wq*j {
			return tileDot{}, false
		}
	}
	if td.ws == 0 && len(v.ids) > 1 {
		return tileDot{}, false
	}
	// Inputs: common to the rows; elements q + o of one vector, or
	// replicated values.
	fromVec := true
	for j := 0; j < k; j++ {
		a := v.args[k+j]
		if a.kind != laneCommon {
			return tileDot{}, false
		}
		td.xs = append(td.xs, a.id)
		xq, xe, ok := e.lp.in(a.id)
		switch {
		case !ok:
			fromVec = false
		case j == 0:
			td.x, td.o = xq, xe
		case xq != td.x || xe != td.o+j:
			fromVec = false
		}
	}
	if !fromVec || td.o%4 != 0 || td.o+k > len(e.lp.vecs[td.x].ids) {
		td.x = -1
	}
	switch b := v.args[2*k]; {
	case b.kind == laneShared:
		td.bb, td.bs = b.base, b.stride
	case b.kind == laneCommon && e.p.Values[b.id].Op == ops.OpConst && e.p.Values[b.id].Aux == 0:
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
	w := len(e.lp.vecs[q].ids)
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
// base + stride·e of mask, summed over the tile.
func (e *emitter) tileVecAcc(q, w int, mask uint32, base, stride int) {
	fmt.Fprintf(&e.sb, "  gs_tacc_vec<%d, %t>(gs_acc, u%d, 0x%08xu, gs_on, %d, %d);\n", w, e.src.accShared, q, mask, base, stride)
}

// tileAdd adds replicated x, summed over the tile, to entry j.
func (e *emitter) tileAdd(j int, x string) {
	if e.src.accShared {
		fmt.Fprintf(&e.sb, "  gs_tacc_one<true>(gs_acc, %d, %s, gs_on);\n", j, x)
		return
	}
	fmt.Fprintf(&e.sb, "  gs_tacc_one<false>(gs_acc, %d, %s, gs_on);\n", lanePad(j), x)
}

// tileEnv forces tile mode on (1) where a job allows it, or off (0).
const tileEnv = "GRADSOLVE_CUDA_TILEMODE"

// Tile-mode launches: tileBlocksPerSM blocks of lanesBlock threads per
// multiprocessor (what 128 registers a thread let run), and tile mode
// where a job has at least tileFill tiles (warps) per multiprocessor.
const (
	tileBlocksPerSM = 4
	tileFill        = 16
)

// useTileMode reports whether job j (kernel v, in lanes mode) runs in tile
// mode: float64, no save times, no dense output and no tile sums
// (gs_body_tile), a shared gradient the reverse step accumulates, a loss
// without vectors (the kernel calls it for the trajectories that finished
// only), and enough trajectories to give every multiprocessor tileFill
// tiles (below that lanes mode's warp per trajectory keeps more of the GPU
// busy). GRADSOLVE_CUDA_TILEMODE=1 or 0 overrides the last condition.
func (ex *executor) useTileMode(j *ode.Job, v variant) bool {
	env := os.Getenv(tileEnv)
	if env == "0" || ex.prec != Float64 || ex.tiles || v.k > 0 || ex.plan.Dense != nil || ex.plan.Shared == 0 || noAccumulate {
		return false
	}
	if (v.loss || v.grad) && j.Loss != nil && (hasVectors(j.Loss.Grad) || hasVectors(j.Loss.Term)) {
		return false
	}
	if env == "1" {
		return true
	}
	sms := ex.be.sms()
	return sms > 0 && (j.N+tileWidth-1)/tileWidth >= sms*tileFill
}

// hasVectors reports whether lanes mode finds vectors in p or a program
// it calls.
func hasVectors(p *tape.Program) bool {
	if p == nil {
		return false
	}
	if planLanes(p, sharedIndex(p)).elements() > 0 {
		return true
	}
	for _, f := range p.Funcs {
		if hasVectors(f) {
			return true
		}
	}
	return false
}
