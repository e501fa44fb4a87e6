package driver

import (
	"errors"
	"fmt"
)

// errInCapture is the error of a Queue call that waits for the device,
// made in a capture (Queue.Capture), where nothing runs.
var errInCapture = errors.New("cuda: a call that waits for the device, inside a graph's capture")

// streamCaptureThreadLocal is CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: the
// calls a capture forbids (an allocation, a synchronous copy) are
// forbidden on the capturing thread only, not on the threads of other
// Devices of the same context (engines of their own).
const streamCaptureThreadLocal = 1

// Graph is an executable CUDA graph (CUgraphExec): work captured once
// from a stream (Queue.Capture) and launched as a whole (Queue.Launch
// Graph), one call for its dozen kernels and copies, which the device
// runs back to back. Its kernels' arguments and its copies' addresses are
// fixed at the capture; a captured copy from or to the host reads or
// writes its host memory when the graph runs, so that memory must be
// page-locked (Device.HostAlloc) and stay allocated while the graph
// lives.
type Graph struct {
	dev *Device
	h   uintptr
}

// GraphStream is a stream for graphs: a non-blocking stream (not ordered
// with the legacy default stream by the driver, so that work another
// thread queues there while this stream captures neither fails nor
// invalidates the capture) and an event with which each launch waits for
// the legacy default stream's earlier work (LaunchGraph). Work queued on
// the legacy default stream after a launch does not wait for the graph:
// SyncStream first.
type GraphStream struct {
	dev *Device
	h   uintptr // CUstream
	ev  uintptr // CUevent, without timing
}

// eventDisableTiming is CU_EVENT_DISABLE_TIMING.
const eventDisableTiming = 2

// NewGraphStream creates a GraphStream.
func (d *Device) NewGraphStream() (*GraphStream, error) {
	s := &GraphStream{dev: d}
	err := d.do(func() error {
		if err := d.drv.check("cuStreamCreate", d.drv.cuStreamCreate(&s.h, streamNonBlocking)); err != nil {
			return err
		}
		if err := d.drv.check("cuEventCreate", d.drv.cuEventCreate(&s.ev, eventDisableTiming)); err != nil {
			d.drv.cuStreamDestroy(s.h)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Destroy destroys the stream once its queued work is done, and its
// event. Destroy of a destroyed stream does nothing.
func (s *GraphStream) Destroy() error {
	if s.h == 0 {
		return nil
	}
	d := s.dev
	err := d.do(func() error {
		err := d.drv.check("cuStreamDestroy", d.drv.cuStreamDestroy(s.h))
		if e := d.drv.check("cuEventDestroy", d.drv.cuEventDestroy(s.ev)); err == nil {
			err = e
		}
		return err
	})
	s.h, s.ev = 0, 0
	return err
}

// Capture runs f with a Queue whose calls are captured on stream s
// instead of run, and returns them as a Graph. f may queue copies, memsets
// and launches; calls that wait for the device (Elapsed,
// CopyFromDeviceAfter) fail, and so does the capture.
func (q *Queue) Capture(s *GraphStream, f func(q *Queue) error) (*Graph, error) {
	if q.stream != 0 {
		return nil, errInCapture
	}
	drv := q.d.drv
	if !drv.hasGraphs() {
		return nil, &Error{Call: "cuStreamBeginCapture", Name: "not found", Desc: "the driver has no graph entry points (cuGetProcAddress_v2 found none)"}
	}
	if err := drv.check("cuStreamBeginCapture", drv.cuStreamBeginCapture(s.h, streamCaptureThreadLocal)); err != nil {
		return nil, err
	}
	ferr := f(&Queue{d: q.d, stream: s.h})
	var g uintptr
	eerr := drv.check("cuStreamEndCapture", drv.cuStreamEndCapture(s.h, &g))
	if ferr != nil || eerr != nil {
		if g != 0 {
			drv.cuGraphDestroy(g)
		}
		if ferr != nil {
			return nil, ferr
		}
		return nil, eerr
	}
	defer drv.cuGraphDestroy(g) // the executable graph keeps what it needs
	gr := &Graph{dev: q.d}
	if err := drv.check("cuGraphInstantiateWithFlags", drv.cuGraphInstantiateWithFlags(&gr.h, g, 0)); err != nil {
		return nil, err
	}
	return gr, nil
}

// hasGraphs reports whether the driver gave every graph entry point.
func (d *driver) hasGraphs() bool {
	return d.cuStreamBeginCapture != nil && d.cuStreamEndCapture != nil && d.cuGraphInstantiateWithFlags != nil &&
		d.cuGraphLaunch != nil && d.cuGraphExecDestroy != nil && d.cuGraphDestroy != nil
}

// LaunchGraph queues g on s, after the work queued on the legacy default
// stream before it, between records of start and end (each may be nil)
// on s. It does not wait for the graph, and the Queue's later work on the
// legacy default stream does not either (SyncStream).
func (q *Queue) LaunchGraph(s *GraphStream, g *Graph, start, end *Event) error {
	if q.stream != 0 {
		return errInCapture
	}
	drv := q.d.drv
	if err := drv.check("cuEventRecord", drv.cuEventRecord(s.ev, 0)); err != nil {
		return err
	}
	if err := drv.check("cuStreamWaitEvent", drv.cuStreamWaitEvent(s.h, s.ev, 0)); err != nil {
		return err
	}
	if start != nil {
		if err := drv.check("cuEventRecord", drv.cuEventRecord(start.h, s.h)); err != nil {
			return err
		}
	}
	if err := drv.check("cuGraphLaunch", drv.cuGraphLaunch(g.h, s.h)); err != nil {
		return fmt.Errorf("%w (a graph)", err)
	}
	if end != nil {
		return drv.check("cuEventRecord", drv.cuEventRecord(end.h, s.h))
	}
	return nil
}

// SyncStream waits for the work queued on s.
func (q *Queue) SyncStream(s *GraphStream) error {
	if q.stream != 0 {
		return errInCapture
	}
	return q.d.drv.check("cuStreamSynchronize", q.d.drv.cuStreamSynchronize(s.h))
}

// Destroy destroys the graph; a launch in flight completes first (the
// driver frees it then). Destroy of a destroyed graph does nothing.
func (g *Graph) Destroy() error {
	if g.h == 0 {
		return nil
	}
	d := g.dev
	err := d.do(func() error { return d.drv.check("cuGraphExecDestroy", d.drv.cuGraphExecDestroy(g.h)) })
	g.h = 0
	return err
}
