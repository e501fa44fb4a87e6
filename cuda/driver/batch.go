package driver

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"
)

// Batch runs f with a Queue whose calls go to the driver directly. It
// runs on the caller's own OS thread (locked to it for the batch, with
// the device's context made current there), not on the device's
// goroutine: a hand-over to that goroutine and back costs two OS
// threads' wake-ups, tens of microseconds on an idle host, as much as a
// small ensemble's kernel. The device's calls still run one at a time:
// a batch excludes the device's goroutine and other batches while it
// runs. f must not call the Device's other methods (they would wait for
// the batch) nor keep q. A copy queued without waiting
// (CopyToDeviceQueued) and not waited for by a later read is waited for
// before Batch returns, whatever f returned: its source may be reused
// then. It returns f's error (else that wait's), or ErrClosed.
func (d *Device) Batch(f func(q *Queue) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return ErrClosed
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.drv.check("cuCtxSetCurrent", d.drv.cuCtxSetCurrent(d.ctx)); err != nil {
		return err
	}
	q := &Queue{d: d}
	err := f(q)
	if q.queued {
		// A copy f queued may still read its source: wait for it, so
		// that the caller may reuse the source whether f failed or not.
		if werr := d.drv.check("cuStreamSynchronize", d.drv.cuStreamSynchronize(0)); err == nil {
			err = werr
		}
	}
	return err
}

// Queue is the device's API inside Batch. Its copies are synchronous, as
// the Device's: a read waits for the work queued before it. The Queue of
// a capture (Queue.Capture) queues on the capturing stream instead,
// asynchronously: its copies are recorded in the graph, not made.
type Queue struct {
	d      *Device
	stream uintptr // the capturing stream, or 0: the legacy default stream
	// queued: a copy queued without waiting (CopyToDeviceQueued, on the
	// legacy default stream) that no read has waited for since; Batch
	// waits for it.
	queued bool
}

// CopyToDevice copies src to device memory at addr.
func (q *Queue) CopyToDevice(addr uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if q.stream != 0 {
		return q.d.drv.check("cuMemcpyHtoDAsync", q.d.drv.cuMemcpyHtoDAsync(addr, unsafe.Pointer(&src[0]), uint64(len(src)), q.stream))
	}
	return q.d.drv.check("cuMemcpyHtoD", q.d.drv.cuMemcpyHtoD(addr, unsafe.Pointer(&src[0]), uint64(len(src))))
}

// CopyToDeviceQueued copies src to device memory at addr after the work
// queued before it, without waiting for the copy (cuMemcpyHtoDAsync on
// the batch's stream: the legacy default stream, or the capturing one),
// where CopyToDevice from page-locked memory returns only once the copy
// is done, a round trip to the device before the work queued after it
// can start. src must stay as it is until a later CopyFromDevice of the
// batch, or the batch, has returned (the device reads it when the copy
// runs; Batch waits for a copy no read has); from page-locked memory
// (HostAlloc) the copy is asynchronous, from Go memory the driver stages
// it first.
func (q *Queue) CopyToDeviceQueued(addr uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	q.queued = q.queued || q.stream == 0
	return q.d.drv.check("cuMemcpyHtoDAsync", q.d.drv.cuMemcpyHtoDAsync(addr, unsafe.Pointer(&src[0]), uint64(len(src)), q.stream))
}

// CopyFromDevice copies device memory at addr to dst, after the work
// queued before it.
func (q *Queue) CopyFromDevice(dst []byte, addr uint64) error {
	if len(dst) == 0 {
		return nil
	}
	if q.stream != 0 {
		return q.d.drv.check("cuMemcpyDtoHAsync", q.d.drv.cuMemcpyDtoHAsync(unsafe.Pointer(&dst[0]), addr, uint64(len(dst)), q.stream))
	}
	// (Synchronous on the legacy stream: the work queued before it,
	// queued copies included, is done once it returns.)
	err := q.d.drv.check("cuMemcpyDtoH", q.d.drv.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), addr, uint64(len(dst))))
	q.queued = q.queued && err != nil
	return err
}

// CopyDevice copies n bytes of device memory from src to dst.
func (q *Queue) CopyDevice(dst, src uint64, n int64) error {
	if n == 0 {
		return nil
	}
	if q.stream != 0 {
		return q.d.drv.check("cuMemcpyDtoDAsync", q.d.drv.cuMemcpyDtoDAsync(dst, src, uint64(n), q.stream))
	}
	return q.d.drv.check("cuMemcpyDtoD", q.d.drv.cuMemcpyDtoD(dst, src, uint64(n)))
}

// Zero sets n bytes of device memory at addr to zero.
func (q *Queue) Zero(addr uint64, n int64) error {
	if n == 0 {
		return nil
	}
	if q.stream != 0 {
		return q.d.drv.check("cuMemsetD8Async", q.d.drv.cuMemsetD8Async(addr, 0, uint64(n), q.stream))
	}
	return q.d.drv.check("cuMemsetD8", q.d.drv.cuMemsetD8(addr, 0, uint64(n)))
}

// Launch queues k with one argument, the struct whose bytes are args (as
// Kernel.Launch with a []byte argument).
func (q *Queue) Launch(k *Kernel, l Launch, args []byte) error {
	if len(args) == 0 {
		return fmt.Errorf("cuda: kernel %s: an empty argument struct", k.name)
	}
	params := [1]unsafe.Pointer{unsafe.Pointer(&args[0])}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&args[0])
	pin.Pin(&params[0])
	gx, gy, gz := l.Grid.dims()
	bx, by, bz := l.Block.dims()
	stream := q.stream
	if l.Stream != nil {
		stream = l.Stream.h
	}
	if err := q.d.drv.check("cuLaunchKernel", q.d.drv.cuLaunchKernel(k.h, gx, gy, gz, bx, by, bz,
		uint32(l.SharedMem), stream, &params[0], 0)); err != nil {
		return fmt.Errorf("%w (kernel %s, grid %v, block %v)", err, k.name, l.Grid, l.Block)
	}
	return nil
}

// Record records e on the legacy default stream (on the capturing stream
// in a capture, where it is not allowed: the capture fails).
func (q *Queue) Record(e *Event) error {
	return q.d.drv.check("cuEventRecord", q.d.drv.cuEventRecord(e.h, q.stream))
}

// Elapsed returns the device time between two recorded events, waiting
// for end.
func (q *Queue) Elapsed(start, end *Event) (time.Duration, error) {
	if q.stream != 0 {
		return 0, errInCapture
	}
	var ms float32
	if err := q.d.drv.check("cuEventSynchronize", q.d.drv.cuEventSynchronize(end.h)); err != nil {
		return 0, err
	}
	err := q.d.drv.check("cuEventElapsedTime", q.d.drv.cuEventElapsedTime(&ms, start.h, end.h))
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

// streamNonBlocking is CU_STREAM_NON_BLOCKING: a stream whose work is not
// ordered with the legacy default stream's.
const streamNonBlocking = 1

// CopyFromDeviceAfter copies device memory to the host, dst[k] from the
// device address src[k], once the work queued before e's last record is
// done. The copies run on a stream of their own, beside the legacy
// default stream: they do not wait for work queued there after e (the
// kernels of a launch's later chunks), which runs while they copy. dst
// should be page-locked (HostAlloc) for the copies to be asynchronous
// with that work. It returns once the copies are done, with their device
// time (from the first copy's start to the last's end).
func (q *Queue) CopyFromDeviceAfter(e *Event, dst [][]byte, src []uint64) (time.Duration, error) {
	if q.stream != 0 {
		return 0, errInCapture
	}
	if len(dst) != len(src) {
		return 0, fmt.Errorf("cuda: CopyFromDeviceAfter: %d destinations, %d sources", len(dst), len(src))
	}
	d, drv := q.d, q.d.drv
	if d.copyStream == 0 {
		if err := drv.check("cuStreamCreate", drv.cuStreamCreate(&d.copyStream, streamNonBlocking)); err != nil {
			d.copyStream = 0
			return 0, err
		}
		for _, h := range []*uintptr{&d.copyStart, &d.copyEnd} {
			if err := drv.check("cuEventCreate", drv.cuEventCreate(h, 0)); err != nil {
				*h = 0
				return 0, err
			}
		}
	}
	if d.copyStart == 0 || d.copyEnd == 0 {
		return 0, fmt.Errorf("cuda: CopyFromDeviceAfter: the copy stream's events could not be made")
	}
	s := d.copyStream
	if err := drv.check("cuStreamWaitEvent", drv.cuStreamWaitEvent(s, e.h, 0)); err != nil {
		return 0, err
	}
	if err := drv.check("cuEventRecord", drv.cuEventRecord(d.copyStart, s)); err != nil {
		return 0, err
	}
	for k, b := range dst {
		if len(b) == 0 {
			continue
		}
		if err := drv.check("cuMemcpyDtoHAsync", drv.cuMemcpyDtoHAsync(unsafe.Pointer(&b[0]), src[k], uint64(len(b)), s)); err != nil {
			return 0, err
		}
	}
	if err := drv.check("cuEventRecord", drv.cuEventRecord(d.copyEnd, s)); err != nil {
		return 0, err
	}
	if err := drv.check("cuEventSynchronize", drv.cuEventSynchronize(d.copyEnd)); err != nil {
		return 0, err
	}
	var ms float32
	err := drv.check("cuEventElapsedTime", drv.cuEventElapsedTime(&ms, d.copyStart, d.copyEnd))
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}
