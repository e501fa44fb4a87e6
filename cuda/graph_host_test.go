package cuda

import (
	"errors"
	"slices"
	"time"
)

// The host backend's graphs: a capture records the queued operations as
// closures and a launch replays them, so the trainer's graph logic (what
// is captured, when it is captured again, what is read when the graph
// runs) is tested without a GPU. As on a GPU, a recorded copy reads or
// writes its host memory when the graph runs, and a launch's arguments
// are those of the capture.

// hostStream is a stream of the host backend. A graph launched on it
// without a clock (an update) runs only when the stream is synchronised
// or the next graph is launched on it, as a GPU's may still be running
// then: a batch's work that does not wait for it (syncStream) sees the
// memory from before it, and the tests see the difference.
type hostStream struct{ pending []func() error }

// free drops the pending work: the trainer waits for it first.
func (s *hostStream) free() { s.pending = nil }

// run runs the pending work.
func (s *hostStream) run() error {
	ops := s.pending
	s.pending = nil
	for _, op := range ops {
		if err := op(); err != nil {
			return err
		}
	}
	return nil
}

func (b *hostBackend) newStream() (stream, error) {
	b.direct("newStream")
	return &hostStream{}, nil
}

// hostGraph is a recorded graph.
type hostGraph struct{ ops []func() error }

func (g *hostGraph) free() { g.ops = nil }

// errHostCapture is the error of a call a capture does not record.
var errHostCapture = errors.New("host backend: a call that waits for the device, inside a capture")

// recordQueue is the queue of a host capture.
type recordQueue struct {
	q   hostQueue
	ops []func() error
}

func (r *recordQueue) add(op func() error) error {
	r.ops = append(r.ops, op)
	return nil
}

func (r *recordQueue) write(addr uint64, src []byte) error {
	return r.add(func() error { return r.q.write(addr, src) })
}

func (r *recordQueue) writeQueued(addr uint64, src []byte) error { return r.write(addr, src) }

func (r *recordQueue) read(dst []byte, addr uint64) error {
	return r.add(func() error { return r.q.read(dst, addr) })
}

func (r *recordQueue) zero(addr uint64, n int64) error {
	return r.add(func() error { return r.q.zero(addr, n) })
}

func (r *recordQueue) copyDevice(dst, src uint64, n int64) error {
	return r.add(func() error { return r.q.copyDevice(dst, src, n) })
}

func (r *recordQueue) enqueue(k backendKernel, threads, block, shmem int, args []uint64) error {
	args = slices.Clone(args) // a GPU's capture copies the arguments
	return r.add(func() error { return r.q.enqueue(k, threads, block, shmem, args) })
}

func (r *recordQueue) mark(clock, bool) error { return errHostCapture }

func (r *recordQueue) elapsed(clock) (time.Duration, error) { return 0, errHostCapture }

func (r *recordQueue) readAfter(clock, [][]byte, []uint64) (time.Duration, error) {
	return 0, errHostCapture
}

func (r *recordQueue) capture(stream, func(queue) error) (graph, error) { return nil, errHostCapture }

func (r *recordQueue) launchGraph(stream, graph, clock) error { return errHostCapture }

func (r *recordQueue) syncStream(stream) error { return errHostCapture }

func (q hostQueue) capture(_ stream, f func(q queue) error) (graph, error) {
	if q.b.noCapture {
		return nil, errors.New("host backend: captures fail (noCapture)")
	}
	r := &recordQueue{q: q}
	if err := f(r); err != nil {
		return nil, err
	}
	return &hostGraph{ops: r.ops}, nil
}

func (q hostQueue) launchGraph(s stream, g graph, c clock) error {
	hs := s.(*hostStream)
	if err := hs.run(); err != nil {
		return err
	}
	hg := g.(*hostGraph)
	if hg.ops == nil {
		return errors.New("host backend: launch of a freed graph")
	}
	ops := hg.ops
	run := func() error {
		for _, op := range ops {
			if err := op(); err != nil {
				return err
			}
		}
		return nil
	}
	if c == nil {
		hs.pending = append(hs.pending, run)
		return nil
	}
	// A timed launch runs now: elapsed(c) waits for it.
	if err := q.mark(c, false); err != nil {
		return err
	}
	if err := run(); err != nil {
		return err
	}
	return q.mark(c, true)
}

func (q hostQueue) syncStream(s stream) error { return s.(*hostStream).run() }

// The null backend with device memory (hostWorkBackend) captures as it
// runs: nothing, so that its graphs cost only the host's work.
func (q hostWorkQueue) capture(_ stream, f func(queue) error) (graph, error) {
	if err := f(q); err != nil {
		return nil, err
	}
	return &hostGraph{ops: []func() error{}}, nil
}
func (hostWorkQueue) launchGraph(stream, graph, clock) error { return nil }
func (hostWorkQueue) syncStream(stream) error                { return nil }
