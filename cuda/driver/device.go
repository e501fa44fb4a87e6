package driver

import (
	"fmt"
	"runtime"
	"sync"
)

// Device attributes read by Open (CUdevice_attribute values).
const (
	attrMaxThreadsPerBlock = 1
	attrWarpSize           = 10
	attrMultiprocessors    = 16
	attrL2CacheSize        = 38
	attrComputeMajor       = 75
	attrComputeMinor       = 76
	attrSharedOptin        = 97 // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
)

// Info describes a GPU.
type Info struct {
	Ordinal            int    // the device number, 0 ≤ Ordinal < DeviceCount()
	Name               string // as "NVIDIA H200"
	Arch               Arch   // compute capability
	SMs                int    // streaming multiprocessors
	TotalMem           uint64 // bytes of device memory
	MaxThreadsPerBlock int
	WarpSize           int
	L2Cache            int // bytes
	SharedOptin        int // bytes of shared memory a block may use when its kernel opts in
	Driver             int // the driver's CUDA version, as 13000 for 13.0
}

// DeviceCount returns the number of CUDA devices. Its error wraps ErrNoGPU
// if there is no usable driver.
func DeviceCount() (int, error) {
	d, err := loadDriver()
	if err != nil {
		return 0, err
	}
	var n int32
	if err := d.check("cuDeviceGetCount", d.cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Device is one GPU and its primary context.
//
// CUDA binds a context to an OS thread, so each Device owns one goroutine,
// locked to its OS thread with the primary context current, that makes
// the driver calls for the device; the methods of Device and of the
// buffers, modules, kernels, streams and events it made hand their calls
// to it and wait. They may therefore be called from any goroutine, and
// several Devices, one per GPU, work side by side. A call costs a
// goroutine hand-off (two OS threads' wake-ups: microseconds to tens of
// microseconds) on top of the driver's own cost. Batch, the calls of a
// step or a launch, runs instead on the caller's thread with the context
// made current there; the device's calls run one at a time either way.
type Device struct {
	drv  *driver
	info Info
	dev  int32   // CUdevice
	ctx  uintptr // the primary context

	jobs      chan func()
	quit      chan struct{}
	mu        sync.Mutex // held by each job on the device's goroutine and by each Batch
	stopped   bool       // set by Close's last job, under mu
	closeOnce sync.Once
	closeErr  error

	// The stream of CopyFromDeviceAfter (non-blocking: it runs beside
	// the legacy default stream's kernels) and the events that time its
	// copies, made by its first call, under mu; they live as long as the
	// context.
	copyStream         uintptr
	copyStart, copyEnd uintptr
}

// Open retains the primary context of device ordinal and starts the
// goroutine that makes its driver calls. Close releases both. Its error
// wraps ErrNoGPU if there is no usable driver or no such device.
func Open(ordinal int) (*Device, error) {
	drv, err := loadDriver()
	if err != nil {
		return nil, err
	}
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		if n == 0 {
			return nil, fmt.Errorf("cuda: %w: the driver reports no CUDA device", ErrNoGPU)
		}
		return nil, fmt.Errorf("cuda: %w: device %d requested, %d present", ErrNoGPU, ordinal, n)
	}
	d := &Device{drv: drv, jobs: make(chan func()), quit: make(chan struct{})}
	started := make(chan error, 1)
	go d.loop(ordinal, started)
	if err := <-started; err != nil {
		return nil, err
	}
	return d, nil
}

// loop is the device's goroutine: it locks its OS thread (for good: the
// thread ends with the goroutine), makes the primary context current,
// reports on started, then runs jobs until Close's last job stops it.
func (d *Device) loop(ordinal int, started chan<- error) {
	runtime.LockOSThread()
	if err := d.init(ordinal); err != nil {
		started <- err
		return
	}
	started <- nil
	for !d.stopped {
		(<-d.jobs)()
	}
}

// init runs on the device's thread.
func (d *Device) init(ordinal int) error {
	drv := d.drv
	if err := drv.check("cuDeviceGet", drv.cuDeviceGet(&d.dev, int32(ordinal))); err != nil {
		return err
	}
	if err := drv.check("cuDevicePrimaryCtxRetain", drv.cuDevicePrimaryCtxRetain(&d.ctx, d.dev)); err != nil {
		return err
	}
	if err := drv.check("cuCtxSetCurrent", drv.cuCtxSetCurrent(d.ctx)); err != nil {
		drv.cuDevicePrimaryCtxRelease(d.dev)
		return err
	}
	info, err := d.query(ordinal)
	if err != nil {
		drv.cuDevicePrimaryCtxRelease(d.dev)
		return err
	}
	d.info = info
	return nil
}

// query reads the device's description.
func (d *Device) query(ordinal int) (Info, error) {
	drv := d.drv
	info := Info{Ordinal: ordinal, Driver: drv.version}
	var name [256]byte
	if err := drv.check("cuDeviceGetName", drv.cuDeviceGetName(&name[0], int32(len(name)), d.dev)); err != nil {
		return info, err
	}
	info.Name = gostring(&name[0])
	if err := drv.check("cuDeviceTotalMem", drv.cuDeviceTotalMem(&info.TotalMem, d.dev)); err != nil {
		return info, err
	}
	for _, a := range []struct {
		attr int32
		dst  *int
	}{
		{attrComputeMajor, &info.Arch.Major},
		{attrComputeMinor, &info.Arch.Minor},
		{attrMultiprocessors, &info.SMs},
		{attrMaxThreadsPerBlock, &info.MaxThreadsPerBlock},
		{attrWarpSize, &info.WarpSize},
		{attrL2CacheSize, &info.L2Cache},
		{attrSharedOptin, &info.SharedOptin},
	} {
		var v int32
		if err := drv.check("cuDeviceGetAttribute", drv.cuDeviceGetAttribute(&v, a.attr, d.dev)); err != nil {
			return info, err
		}
		*a.dst = int(v)
	}
	return info, nil
}

// Do runs f on the device's goroutine (the OS thread that holds its
// context) and returns its error, or ErrClosed if the device is closed.
// A panic in f is re-raised in the caller. f must not call Do.
func (d *Device) Do(f func() error) error { return d.do(f) }

// do is Do.
func (d *Device) do(f func() error) error {
	type outcome struct {
		err   error
		panic any
	}
	done := make(chan outcome, 1)
	job := func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{panic: p}
			}
		}()
		done <- outcome{err: f()}
	}
	select {
	case d.jobs <- job:
	case <-d.quit:
		return ErrClosed
	}
	o := <-done
	if o.panic != nil {
		panic(o.panic)
	}
	return o.err
}

// Info describes the device.
func (d *Device) Info() Info { return d.info }

// MemInfo returns the device memory free and in total, in bytes.
func (d *Device) MemInfo() (free, total uint64, err error) {
	err = d.do(func() error { return d.drv.check("cuMemGetInfo", d.drv.cuMemGetInfo(&free, &total)) })
	return free, total, err
}

// Synchronize waits for all work queued on the device and returns the
// first error of a kernel that failed since the last check (a launch is
// asynchronous, so its faults surface here).
func (d *Device) Synchronize() error {
	return d.do(func() error { return d.drv.check("cuCtxSynchronize", d.drv.cuCtxSynchronize()) })
}

// Close waits for the device's work, releases its primary context and
// stops its goroutine. Buffers, modules, streams and events of the device
// should be freed first; the memory they hold is released with the
// context when no other Device of the same GPU holds it. Close is
// idempotent; later calls of the device's methods return ErrClosed.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		d.closeErr = d.do(func() error {
			err := d.drv.check("cuCtxSynchronize", d.drv.cuCtxSynchronize())
			if e := d.drv.check("cuDevicePrimaryCtxRelease", d.drv.cuDevicePrimaryCtxRelease(d.dev)); err == nil {
				err = e
			}
			d.stopped = true
			return err
		})
		close(d.quit)
	})
	return d.closeErr
}
