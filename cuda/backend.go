package cuda

import (
	"fmt"
	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// backend is what the engine's executor needs of a device: compile a
// kernel, hold memory, copy, launch. The GPU backend runs on a Device; the
// tests' host backend compiles the same source with g++ and runs it on
// the CPU, so the executor is tested on machines without a GPU.
//
// Memory is handed out as arenas: one allocation per pass, whose device
// address plus an offset is a kernel's pointer argument.
type backend interface {
	// compile compiles src with the further compiler options opts
	// (Tuning.compileOptions; a host backend notes them) and returns its
	// kernel called name.
	compile(src, name string, opts []string) (backendKernel, error)
	// cached reports whether compile(src, name, opts) would read the
	// kernel from a disk cache (a short compile) rather than run the
	// compiler (driver.Cached). The tests' host backends report true
	// (their compiles are not tiered) unless a test asks otherwise.
	cached(src, name string, opts []string) bool
	// compileUnits compiles the translation units of one kernel
	// (kernelgen.KernelUnits, Tuning.SplitUnits: the kernel's unit first)
	// concurrently, each with the options opts, links them and returns
	// the kernel called name. Its error names a unit that failed.
	compileUnits(units []kernelgen.Unit, name string, opts []string) (backendKernel, error)
	// cachedUnits is cached for a kernel compiled in units.
	cachedUnits(units []kernelgen.Unit, name string, opts []string) bool
	// alloc allocates n bytes and returns their device address.
	alloc(n int64) (uint64, error)
	// free releases an allocation.
	free(addr uint64) error
	// write copies src to the device at addr; read copies back.
	write(addr uint64, src []byte) error
	read(dst []byte, addr uint64) error
	// zero sets n bytes at addr to zero.
	zero(addr uint64, n int64) error
	// hostAlloc returns n bytes of host memory for staging copies
	// (page-locked on a GPU, so copies from and to it run at the bus's
	// speed), or nil if the backend has none to give: then the executor
	// stages in Go memory. hostFree releases such memory.
	hostAlloc(n int64) []byte
	hostFree(b []byte)
	// memFree returns the device memory free for allocation, in bytes.
	memFree() (int64, error)
	// sms returns the device's multiprocessors (0 if it has none).
	sms() int
	// sharedLimit returns the bytes of dynamic shared memory a block of
	// the kernels it compiles may use (maxShared, or more where the
	// device lets kernels opt in).
	sharedLimit() int
	// batch runs f with a queue of the backend's copies and launches that
	// costs one hand-over to the device's goroutine for the lot (a
	// training step's dozen operations), not one each. f must not call
	// the backend's other methods.
	batch(f func(q queue) error) error
	// newClock returns a timer of device work (two events on a GPU).
	newClock() (clock, error)
	// Graphs (graph.go).
	graphBackend
}

// queue is what a batch can do (backend.batch).
type queue interface {
	write(addr uint64, src []byte) error
	// writeQueued is write without waiting for the copy: the device
	// copies src after the work queued before it. src must stay as it is
	// until a later read of the batch, or the batch, has returned (batch
	// waits for a queued copy that no read has, whatever f returned).
	writeQueued(addr uint64, src []byte) error
	read(dst []byte, addr uint64) error
	zero(addr uint64, n int64) error
	// copyDevice copies n bytes of device memory from src to dst.
	copyDevice(dst, src uint64, n int64) error
	// enqueue queues k as launch runs it, without waiting for it: the
	// device runs it after the work queued before it, and the next read
	// waits for it. args is read before enqueue returns (the driver, and
	// a capture, copy the words): a caller may reuse its storage.
	enqueue(k backendKernel, threads, block, shmem int, args []uint64) error
	// mark records the start (end false) or the end of the work a clock
	// times, after the work queued before it.
	mark(c clock, end bool) error
	// elapsed returns the device time between c's marks, waiting for the
	// end.
	elapsed(c clock) (time.Duration, error)
	// readAfter copies device memory to the host, dst[k] from src[k],
	// once the work queued before c's end mark is done, without waiting
	// for the work queued after it (a launch's later chunks, which run
	// while it copies). It returns once the copies are done, with their
	// device time.
	readAfter(c clock, dst [][]byte, src []uint64) (time.Duration, error)
	// Graphs (graph.go).
	graphQueue
}

// clock is a timer of device work (backend.newClock); free releases it.
type clock interface{ free() }

// backendKernel is a compiled kernel of a backend.
type backendKernel interface {
	// maxBlock returns the most threads a block of it may have.
	maxBlock() int
}

// gpuBackend is a backend on a GPU.
type gpuBackend struct {
	dev *driver.Device

	mu   sync.Mutex
	bufs map[uint64]*driver.Buffer[uint8]
}

func newGPUBackend(d *driver.Device) *gpuBackend {
	return &gpuBackend{dev: d, bufs: make(map[uint64]*driver.Buffer[uint8])}
}

type gpuKernel struct {
	k     *driver.Kernel
	attrs driver.KernelAttrs
	m     *driver.Module // its module
	// parent is the kernel whose module this one shares (siblingBackend),
	// which it keeps reachable (its cleanup unloads the module); nil for
	// the kernel a compile returned.
	parent *gpuKernel
}

// siblingBackend is a backend that returns another kernel of the module
// of a kernel it compiled without compiling again (an engine kernel's
// saves kernel: kernelgen.SavesKernelName). A backend without it
// compiles the source again under the other kernel's name.
type siblingBackend interface {
	sibling(k backendKernel, name string) (backendKernel, error)
}

// sibling returns the kernel called name of bk's module.
func (b *gpuBackend) sibling(bk backendKernel, name string) (backendKernel, error) {
	gk := bk.(*gpuKernel)
	k, err := gk.m.Kernel(name)
	if err != nil {
		return nil, err
	}
	a, err := k.Attrs()
	if err != nil {
		return nil, err
	}
	return &gpuKernel{k: k, attrs: a, m: gk.m, parent: gk}, nil
}

// unload unloads a kernel's module once its gpuKernel is unreachable
// (forgotten by the executor's cache and used by no operation). A failure
// (a closed device) has no one to report to.
func unload(m *driver.Module) { _ = m.Unload() }

func (k *gpuKernel) maxBlock() int { return k.attrs.MaxThreadsPerBlock }

func (b *gpuBackend) compile(src, name string, opts []string) (backendKernel, error) {
	set := &driver.CompileSettings{Name: name + ".cu", Options: opts}
	m, _, err := b.dev.Build(src, set)
	if err != nil {
		return nil, err
	}
	return b.kernel(m, name)
}

func (b *gpuBackend) compileUnits(units []kernelgen.Unit, name string, opts []string) (backendKernel, error) {
	m, _, err := b.dev.BuildUnits(driverUnits(units), &driver.CompileSettings{Name: name + ".cu", Options: opts})
	if err != nil {
		return nil, err
	}
	return b.kernel(m, name)
}

func (b *gpuBackend) cachedUnits(units []kernelgen.Unit, name string, opts []string) bool {
	return b.dev.CachedUnits(driverUnits(units), &driver.CompileSettings{Name: name + ".cu", Options: opts})
}

// driverUnits returns the driver's form of a kernel's units.
func driverUnits(units []kernelgen.Unit) []driver.Unit {
	du := make([]driver.Unit, len(units))
	for k, u := range units {
		du[k] = driver.Unit{Name: u.Name, Source: u.Text}
	}
	return du
}

// kernel returns the kernel called name of module m, which it unloads
// once the kernel is unreachable, able to use the device's shared
// memory (sharedLimit).
func (b *gpuBackend) kernel(m *driver.Module, name string) (backendKernel, error) {
	k, err := m.Kernel(name)
	if err != nil {
		return nil, err
	}
	a, err := k.Attrs()
	if err != nil {
		return nil, err
	}
	if lim := b.sharedLimit(); lim > maxShared {
		if err := k.SetMaxDynamicShared(lim - a.SharedBytes); err != nil {
			return nil, err
		}
	}
	gk := &gpuKernel{k: k, attrs: a, m: m}
	runtime.AddCleanup(gk, unload, m)
	return gk, nil
}

func (b *gpuBackend) cached(src, name string, opts []string) bool {
	return driver.Cached(src, b.dev.Info().Arch, &driver.CompileSettings{Name: name + ".cu", Options: opts})
}

func (b *gpuBackend) alloc(n int64) (uint64, error) {
	buf, err := driver.Alloc[uint8](b.dev, int(max(n, 1)))
	if err != nil {
		return 0, err
	}
	b.mu.Lock()
	b.bufs[buf.Ptr()] = buf
	b.mu.Unlock()
	return buf.Ptr(), nil
}

func (b *gpuBackend) free(addr uint64) error {
	b.mu.Lock()
	buf := b.bufs[addr]
	delete(b.bufs, addr)
	b.mu.Unlock()
	if buf == nil {
		return fmt.Errorf("cuda: free of an unknown allocation %#x", addr)
	}
	return buf.Free()
}

func (b *gpuBackend) write(addr uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return b.dev.CopyToDevice(addr, src)
}

func (b *gpuBackend) read(dst []byte, addr uint64) error {
	if len(dst) == 0 {
		return nil
	}
	return b.dev.CopyFromDevice(dst, addr)
}

func (b *gpuBackend) zero(addr uint64, n int64) error {
	if n == 0 {
		return nil
	}
	return b.dev.Zero(addr, n)
}

func (b *gpuBackend) hostAlloc(n int64) []byte {
	if n <= 0 {
		return nil
	}
	p, err := b.dev.HostAlloc(n)
	if err != nil {
		return nil // no page-locked memory to spare: stage in Go memory
	}
	return p
}

func (b *gpuBackend) hostFree(p []byte) {
	// A failure leaves the memory locked until the context goes; there is
	// no one to report it to.
	_ = b.dev.HostFree(p)
}

func (b *gpuBackend) memFree() (int64, error) {
	free, _, err := b.dev.MemInfo()
	return int64(free), err
}

func (b *gpuBackend) sms() int { return b.dev.Info().SMs }

func (b *gpuBackend) sharedLimit() int { return max(maxShared, b.dev.Info().SharedOptin) }

func (b *gpuBackend) batch(f func(q queue) error) error {
	return b.dev.Batch(func(q *driver.Queue) error { return f(gpuQueue{q}) })
}

// gpuQueue is the queue of a GPU batch.
type gpuQueue struct{ q *driver.Queue }

func (g gpuQueue) write(addr uint64, src []byte) error { return g.q.CopyToDevice(addr, src) }
func (g gpuQueue) read(dst []byte, addr uint64) error  { return g.q.CopyFromDevice(dst, addr) }
func (g gpuQueue) writeQueued(addr uint64, src []byte) error {
	return g.q.CopyToDeviceQueued(addr, src)
}
func (g gpuQueue) zero(addr uint64, n int64) error { return g.q.Zero(addr, n) }
func (g gpuQueue) copyDevice(dst, src uint64, n int64) error {
	return g.q.CopyDevice(dst, src, n)
}

func (g gpuQueue) enqueue(bk backendKernel, threads, block, shmem int, args []uint64) error {
	k := bk.(*gpuKernel)
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&args[0])), 8*len(args))
	l := driver.Launch{Grid: driver.Dim{X: (threads + block - 1) / block}, Block: driver.Dim{X: block}, SharedMem: shmem}
	return g.q.Launch(k.k, l, raw)
}

func (g gpuQueue) mark(c clock, end bool) error {
	e := c.(*gpuClock).start
	if end {
		e = c.(*gpuClock).end
	}
	return g.q.Record(e)
}

func (g gpuQueue) readAfter(c clock, dst [][]byte, src []uint64) (time.Duration, error) {
	return g.q.CopyFromDeviceAfter(c.(*gpuClock).end, dst, src)
}

func (g gpuQueue) elapsed(c clock) (time.Duration, error) {
	gc := c.(*gpuClock)
	return g.q.Elapsed(gc.start, gc.end)
}

// gpuClock is a pair of events.
type gpuClock struct{ start, end *driver.Event }

func (c *gpuClock) free() {
	c.start.Destroy()
	c.end.Destroy()
}

func (b *gpuBackend) newClock() (clock, error) {
	start, err := b.dev.NewEvent()
	if err != nil {
		return nil, err
	}
	end, err := b.dev.NewEvent()
	if err != nil {
		start.Destroy()
		return nil, err
	}
	return &gpuClock{start, end}, nil
}

// spreadBlock returns the threads per block of a launch of threads
// threads on sms multiprocessors, at most block: block itself when the
// grid has a block for every multiprocessor, else the smallest multiple of
// 32 that still gives each multiprocessor at most one block. One thread
// per trajectory makes small ensembles small grids: 4,096 threads in
// blocks of 128 would leave 100 of an H200's 132 multiprocessors idle,
// where blocks of 32 occupy 128 of them.
func spreadBlock(threads, block, sms int) int {
	if sms <= 0 || threads <= 0 || (threads+block-1)/block >= sms {
		return block
	}
	per := (threads + sms - 1) / sms
	return min(block, max(32, (per+31)/32*32))
}
