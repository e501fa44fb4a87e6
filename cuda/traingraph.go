package cuda

import (
	"encoding/binary"
	"fmt"

	"github.com/gradsolve-go/gradsolve/optim"
)

// trainGraphs are a trainer's graphs (Tuning.NoTrainGraph turns them
// off): an evaluation's fixed sequence (the engine kernel, the
// reductions, the summary's copy into page-locked memory) and an update's
// (the rule's scalars copied from page-locked memory, the copy of the best
// values where asked, the rule, x into the inputs), captured once on a
// stream of the trainer's own and launched as one graph per step: one
// launch from the host where the batch path queues a dozen, and the device
// runs them back to back. The captures hold the arena's addresses: a new
// arena (an evaluation's rerun with longer record buffers) takes new ones.
// What changes from step to step is not captured: the update reads the
// rule's scalars (the rate of a schedule, Adam's bias corrections) from
// the sum block (gs_targs.hyper), where its graph's first node copies
// them from hyper, which Update fills before the launch.
type trainGraphs struct {
	s      stream
	eval   graph
	update map[updateKey]graph
	gen    int    // the arena generation they were captured for
	hyper  []byte // page-locked: the rule's scalars of the next update
	// down is the page-locked summary the evaluation's graph copies into
	// (the trainer's t.down).
	down []byte
	// inflight reports an update launched and not waited for: its copy
	// may still read hyper.
	inflight bool
	// captures and launches count, for the tests.
	captures, launches int
}

// updateKey is what an update graph fixes: the rule's kind (gs_t_update's
// mode) and whether it copies x to the best values first.
type updateKey struct {
	mode int
	best bool
}

// newGraphs gives t its graphs' stream and page-locked buffers; where the
// backend has none, t keeps the batch path (t.gr nil).
func (t *trainer) newGraphs() {
	be := t.ex.be
	down, hyper := be.hostAlloc(8*swSummary), be.hostAlloc(8*numHyper)
	if down == nil || hyper == nil {
		for _, b := range [][]byte{down, hyper} {
			if b != nil {
				be.hostFree(b)
			}
		}
		return
	}
	s, err := be.newStream()
	if err != nil {
		be.hostFree(down)
		be.hostFree(hyper)
		t.graphErr = err
		return
	}
	t.gr = &trainGraphs{s: s, down: down, hyper: hyper, update: map[updateKey]graph{}, gen: t.gen}
	t.down = down
}

// drop frees the graphs (not inside a batch).
func (g *trainGraphs) drop() {
	if g.eval != nil {
		g.eval.free()
		g.eval = nil
	}
	for k, u := range g.update {
		u.free()
		delete(g.update, k)
	}
}

// fresh drops graphs captured for an older arena (not inside a batch).
func (t *trainer) fresh() {
	if g := t.gr; g != nil && g.gen != t.gen {
		g.drop()
		g.gen = t.gen
	}
}

// evalGraph is eval through the evaluation's graph, captured on first use.
func (t *trainer) evalGraph(q queue, tr *Trace) (summary, error) {
	g := t.gr
	if g.eval == nil {
		e, err := q.capture(g.s, func(cq queue) error { return t.evalOps(cq, nil) })
		if err != nil {
			return summary{}, &captureError{err}
		}
		g.eval = e
		g.captures++
	}
	if err := q.launchGraph(g.s, g.eval, t.clock); err != nil {
		return summary{}, err
	}
	g.launches++
	// The clock's end follows the graph on its stream: once it is
	// reached, the summary is in t.down and no update is in flight.
	dt, err := q.elapsed(t.clock)
	if err != nil {
		return summary{}, err
	}
	g.inflight = false
	return t.summary(tr, dt), nil
}

// updateGraph is Update's work through an update graph, captured on first
// use for its rule kind and best: w holds the launch's words, the rule's
// scalars among them.
func (t *trainer) updateGraph(q queue, w *[numTrainWords]uint64, best bool) error {
	g := t.gr
	if g.inflight {
		// The last update's copy may still read hyper.
		if err := q.syncStream(g.s); err != nil {
			return err
		}
		g.inflight = false
	}
	for i := range numHyper {
		binary.LittleEndian.PutUint64(g.hyper[8*i:], w[twLR+i])
	}
	key := updateKey{int(w[twMode]), best}
	u := g.update[key]
	if u == nil {
		hyper := t.sum + 8*swHyper
		wh := *w
		wh[twHyper] = hyper
		var err error
		u, err = q.capture(g.s, func(cq queue) error {
			if err := cq.write(hyper, g.hyper); err != nil {
				return err
			}
			return t.updateOps(cq, &wh, best)
		})
		if err != nil {
			return &captureError{err}
		}
		g.update[key] = u
		g.captures++
	}
	if err := q.launchGraph(g.s, u, nil); err != nil {
		return err
	}
	g.launches++
	g.inflight = true
	return nil
}

// settle waits, in a batch of the batch path (Load, Clip, Read, a new
// arena's copy), for an update graph in flight: the batch's work on the
// device's legacy default stream does not wait for the graphs' stream.
func (t *trainer) settle(q queue) error {
	if g := t.gr; g != nil && g.inflight {
		if err := q.syncStream(g.s); err != nil {
			return err
		}
		g.inflight = false
	}
	return nil
}

// ruleMode returns gs_t_update's mode of rule ru, or 0 if it has none.
func ruleMode(ru *optim.Rule) int {
	switch {
	case ru.Kind == optim.RuleAdam:
		return 1
	case ru.Kind == optim.RuleSGD && ru.Momentum == 0:
		return 2
	case ru.Kind == optim.RuleSGD && ru.Nesterov:
		return 4
	case ru.Kind == optim.RuleSGD:
		return 3
	}
	return 0
}

// releaseGraphs waits for the graphs' work and frees them, their stream
// and their buffers.
func (t *trainer) releaseGraphs() {
	g := t.gr
	if g == nil {
		return
	}
	t.gr = nil
	be := t.ex.be
	if g.inflight {
		// Nothing to report a failure to: Release frees regardless.
		_ = be.batch(func(q queue) error { return q.syncStream(g.s) })
	}
	g.drop()
	g.s.free()
	be.hostFree(g.down)
	be.hostFree(g.hyper)
	// The batch path reads the summary into Go memory (a trainer whose
	// capture failed goes on with it).
	t.down = make([]byte, 8*swSummary)
}

// captureError is a failed capture: the trainer keeps the batch path
// (trainer.graphErr says why).
type captureError struct{ err error }

func (e *captureError) Error() string {
	return fmt.Sprintf("cuda: capturing a training graph: %v", e.err)
}
func (e *captureError) Unwrap() error { return e.err }
