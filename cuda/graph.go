package cuda

import "github.com/gradsolve-go/gradsolve/cuda/driver"

// graphBackend is what a backend offers for graphs (part of backend): a
// stream of its own, on which a trainer captures the fixed sequences of
// its steps once and launches each as one graph (trainGraphs). The GPU
// backend captures CUDA graphs; the tests' host backend records the
// queued operations and replays them.
type graphBackend interface {
	// newStream returns a stream of the backend's own. A graph launched
	// on it runs after the work its batches queued before; their work
	// queued after does not wait for the graph: syncStream first. Not
	// inside a batch.
	newStream() (stream, error)
}

// graphQueue is what a batch can do with graphs (part of queue).
type graphQueue interface {
	// capture runs f with a queue whose operations are recorded on s, not
	// run, and returns them as a graph. Copies from and to the host are
	// recorded with their host memory, read or written when the graph
	// runs: it must come from hostAlloc. f may not wait for the device
	// (elapsed, readAfter) nor use graphs.
	capture(s stream, f func(q queue) error) (graph, error)
	// launchGraph queues g on s, between c's marks (c may be nil),
	// without waiting for it; elapsed(c) waits for it.
	launchGraph(s stream, g graph, c clock) error
	// syncStream waits for the work queued on s.
	syncStream(s stream) error
}

// stream is a stream of graphBackend.newStream; free releases it once
// its work is done (not inside a batch).
type stream interface{ free() }

// graph is a captured graph (graphQueue.capture); free releases it, a
// launch in flight completing first (not inside a batch).
type graph interface{ free() }

// gpuStream is a stream of a GPU.
type gpuStream struct{ s *driver.GraphStream }

// free has no one to report a failure to (a closed device).
func (s gpuStream) free() { _ = s.s.Destroy() }

func (b *gpuBackend) newStream() (stream, error) {
	s, err := b.dev.NewGraphStream()
	if err != nil {
		return nil, err
	}
	return gpuStream{s}, nil
}

// gpuGraph is an executable CUDA graph.
type gpuGraph struct{ g *driver.Graph }

func (g gpuGraph) free() { _ = g.g.Destroy() }

func (g gpuQueue) capture(s stream, f func(q queue) error) (graph, error) {
	gr, err := g.q.Capture(s.(gpuStream).s, func(cq *driver.Queue) error { return f(gpuQueue{cq}) })
	if err != nil {
		return nil, err
	}
	return gpuGraph{gr}, nil
}

func (g gpuQueue) launchGraph(s stream, gr graph, c clock) error {
	var start, end *driver.Event
	if c != nil {
		start, end = c.(*gpuClock).start, c.(*gpuClock).end
	}
	return g.q.LaunchGraph(s.(gpuStream).s, gr.(gpuGraph).g, start, end)
}

func (g gpuQueue) syncStream(s stream) error { return g.q.SyncStream(s.(gpuStream).s) }
