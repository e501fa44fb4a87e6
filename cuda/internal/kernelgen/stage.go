package kernelgen

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gradsolve-go/gradsolve/tape"
)

// Staging (Source.Stage, GS_STAGE): a vector whose elements every lane
// needs goes through the warp's staging row in shared memory, written once
// by its lanes and read back by broadcast loads, instead of a pair of
// shuffles per element. A warp has LaneStageSlots slots of 32 reals
// (LaneStageLen in all); a function's vectors take slots from the first
// above those its callees use, a slot serving vectors whose spans (from
// the vector's staging point to its last element read) do not overlap,
// and vectors left without a slot keep the shuffles.
//
// The slots are assigned on the function's body as emitted (body): its
// code, and the staging points and element reads (takes) between, whose
// code is written once every vector's slot is known (assignStages).
const (
	LaneStageSlots = 4
	LaneStageLen   = LaneStageSlots * LaneWidth
)

// take is a staging point of vector vec (id < 0) or the read of its
// element el into the local of value id.
type take struct {
	vec, el int
	id      tape.ID
}

// bodyPart is code of a function's body followed by a take, if any.
type bodyPart struct {
	code string
	take *take
}

// stageSpan is the span of a function's body over which vector vec's
// elements are read: from the part holding its staging point (first) to
// the part after its last read (last).
type stageSpan struct{ vec, first, last int }

// need makes value id readable by every lane: an element of a vector is
// taken from its lane into a local of the same name, once.
func (e *emitter) need(id tape.ID) {
	if e.lp == nil || e.bcast[id] {
		return
	}
	q, el, ok := e.lp.In(id)
	if !ok {
		return
	}
	e.bcast[id] = true
	if !e.src.Stage {
		fmt.Fprintf(&e.sb, "  const gs_real %s = GS_BCAST(u%d, %d);\n", vname(id), q, el)
		return
	}
	// Staged: the first element taken stages the vector.
	if e.stages == nil {
		e.stages = make(map[int]*stageSpan)
	}
	sp := e.stages[q]
	if sp == nil {
		sp = &stageSpan{vec: q, first: len(e.parts)}
		e.stages[q] = sp
		e.addTake(&take{vec: q, id: -1})
	}
	e.addTake(&take{vec: q, el: el, id: id})
	sp.last = len(e.parts)
}

// addTake ends the body's current part with t.
func (e *emitter) addTake(t *take) {
	e.parts = append(e.parts, bodyPart{code: e.sb.String(), take: t})
	e.sb.Reset()
}

// body returns the function's code: its parts with their takes written
// for the slots assignStages gives the staged vectors, from the first
// above the callees' (calleeTop); and the slot above the highest used.
func (e *emitter) body() (string, int) {
	if len(e.parts) == 0 {
		return e.sb.String(), e.calleeTop
	}
	spans := make([]stageSpan, 0, len(e.stages))
	for _, sp := range e.stages {
		spans = append(spans, *sp)
	}
	slots, top := assignStages(spans, e.calleeTop)
	var sb strings.Builder
	for _, pt := range e.parts {
		sb.WriteString(pt.code)
		t, slot := pt.take, slots[pt.take.vec]
		switch {
		case t.id < 0 && slot < 0:
			sb.WriteString("  // shuffled: no staging slot free\n")
		case t.id < 0:
			fmt.Fprintf(&sb, "  GS_STAGE(%d, u%d);\n", slot, t.vec)
		case slot < 0:
			fmt.Fprintf(&sb, "  const gs_real %s = GS_BCAST(u%d, %d);\n", vname(t.id), t.vec, t.el)
		default:
			fmt.Fprintf(&sb, "  const gs_real %s = GS_STAGED(%d, u%d, %d);\n", vname(t.id), slot, t.vec, t.el)
		}
	}
	sb.WriteString(e.sb.String())
	return sb.String(), top
}

// assignStages gives the vectors of spans their staging slots, from base
// up, greedily in the order of their staging points: a vector takes the
// lowest slot whose last vector's span ended by its first, or -1 (its
// elements shuffled) if none has. It returns the slots by vector and the
// slot above the highest used (base if none).
func assignStages(spans []stageSpan, base int) (map[int]int, int) {
	sort.Slice(spans, func(a, b int) bool { return spans[a].first < spans[b].first })
	free := make([]int, LaneStageSlots) // the position from which a slot is free
	slots := make(map[int]int, len(spans))
	top := base
	for _, sp := range spans {
		slots[sp.vec] = -1
		for k := base; k < LaneStageSlots; k++ {
			if free[k] <= sp.first {
				slots[sp.vec], free[k] = k, sp.last
				top = max(top, k+1)
				break
			}
		}
	}
	return slots, top
}
