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
// forbidden on the capturing thread only; a Batch has the device to
// itself anyway.
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

// Capture runs f with a Queue whose calls are captured on stream s
// instead of run, and returns them as a Graph. f may queue copies, memsets
// and launches; calls that wait for the device (Elapsed,
// CopyFromDeviceAfter) fail, and so does the capture. s must be a stream
// of NewStream, which (unlike the legacy default stream) can be captured.
func (q *Queue) Capture(s *Stream, f func(q *Queue) error) (*Graph, error) {
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

// LaunchGraph queues g on stream s, between records of start and end
// (each may be nil) on s. The launch does not wait for the graph; a
// stream of NewStream is ordered with the legacy default stream, so the
// Queue's later copies wait for it.
func (q *Queue) LaunchGraph(s *Stream, g *Graph, start, end *Event) error {
	if q.stream != 0 {
		return errInCapture
	}
	drv := q.d.drv
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
func (q *Queue) SyncStream(s *Stream) error {
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
