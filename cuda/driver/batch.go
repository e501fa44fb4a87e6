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
// the batch) nor keep q. It returns f's error, or ErrClosed.
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
	return f(&Queue{d: d})
}

// Queue is the device's API inside Batch. Its copies are synchronous, as
// the Device's: a read waits for the work queued before it.
type Queue struct{ d *Device }

// CopyToDevice copies src to device memory at addr.
func (q *Queue) CopyToDevice(addr uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return q.d.drv.check("cuMemcpyHtoD", q.d.drv.cuMemcpyHtoD(addr, unsafe.Pointer(&src[0]), uint64(len(src))))
}

// CopyFromDevice copies device memory at addr to dst, after the work
// queued before it.
func (q *Queue) CopyFromDevice(dst []byte, addr uint64) error {
	if len(dst) == 0 {
		return nil
	}
	return q.d.drv.check("cuMemcpyDtoH", q.d.drv.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), addr, uint64(len(dst))))
}

// CopyDevice copies n bytes of device memory from src to dst.
func (q *Queue) CopyDevice(dst, src uint64, n int64) error {
	if n == 0 {
		return nil
	}
	return q.d.drv.check("cuMemcpyDtoD", q.d.drv.cuMemcpyDtoD(dst, src, uint64(n)))
}

// Zero sets n bytes of device memory at addr to zero.
func (q *Queue) Zero(addr uint64, n int64) error {
	if n == 0 {
		return nil
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
	var stream uintptr
	if l.Stream != nil {
		stream = l.Stream.h
	}
	if err := q.d.drv.check("cuLaunchKernel", q.d.drv.cuLaunchKernel(k.h, gx, gy, gz, bx, by, bz,
		uint32(l.SharedMem), stream, &params[0], 0)); err != nil {
		return fmt.Errorf("%w (kernel %s, grid %v, block %v)", err, k.name, l.Grid, l.Block)
	}
	return nil
}

// Record records e on the legacy default stream.
func (q *Queue) Record(e *Event) error {
	return q.d.drv.check("cuEventRecord", q.d.drv.cuEventRecord(e.h, 0))
}

// Elapsed returns the device time between two recorded events, waiting
// for end.
func (q *Queue) Elapsed(start, end *Event) (time.Duration, error) {
	var ms float32
	if err := q.d.drv.check("cuEventSynchronize", q.d.drv.cuEventSynchronize(end.h)); err != nil {
		return 0, err
	}
	err := q.d.drv.check("cuEventElapsedTime", q.d.drv.cuEventElapsedTime(&ms, start.h, end.h))
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}
