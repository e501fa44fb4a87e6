package driver

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"
	"unsafe"
)

// JIT options of cuModuleLoadDataEx (CUjit_option).
const (
	jitInfoLogBuffer      = 3
	jitInfoLogBufferSize  = 4
	jitErrorLogBuffer     = 5
	jitErrorLogBufferSize = 6
)

// Function attributes (CUfunction_attribute).
const (
	funcMaxThreadsPerBlock = 0
	funcSharedSizeBytes    = 1
	funcLocalSizeBytes     = 3
	funcNumRegs            = 4
)

// Module is compiled device code loaded on a device.
type Module struct {
	dev *Device
	h   uintptr // CUmodule
}

// Load loads a compiled image (from Compile) on d. If the image is PTX,
// the driver compiles it for the device; its error log is then part of
// the returned error.
func (d *Device) Load(img *Image) (*Module, error) {
	data := img.Data
	if img.PTX && (len(data) == 0 || data[len(data)-1] != 0) {
		data = append(append([]byte(nil), data...), 0)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("cuda: Load: empty image")
	}
	m := &Module{dev: d}
	log := make([]byte, 16<<10)
	err := d.do(func() error {
		var pin runtime.Pinner
		defer pin.Unpin()
		pin.Pin(&log[0])
		opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSize}
		vals := []uintptr{uintptr(unsafe.Pointer(&log[0])), uintptr(len(log))}
		return d.drv.check("cuModuleLoadDataEx", d.drv.cuModuleLoadDataEx(&m.h, unsafe.Pointer(&data[0]),
			uint32(len(opts)), &opts[0], (*unsafe.Pointer)(unsafe.Pointer(&vals[0]))))
	})
	if err != nil {
		if s := strings.TrimSpace(string(log[:clen(log)])); s != "" {
			err = fmt.Errorf("%w\n%s", err, s)
		}
		return nil, err
	}
	return m, nil
}

// clen returns the length of the NUL-terminated string in b.
func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}

// Unload unloads the module; its kernels become invalid.
func (m *Module) Unload() error {
	if m.h == 0 {
		return nil
	}
	d := m.dev
	err := d.do(func() error { return d.drv.check("cuModuleUnload", d.drv.cuModuleUnload(m.h)) })
	m.h = 0
	return err
}

// Kernel is a __global__ function of a loaded module.
type Kernel struct {
	mod  *Module
	h    uintptr // CUfunction
	name string
}

// Kernel looks up the kernel called name (an extern "C" name, as the
// kernels of Source are).
func (m *Module) Kernel(name string) (*Kernel, error) {
	k := &Kernel{mod: m, name: name}
	d := m.dev
	err := d.do(func() error {
		return d.drv.check("cuModuleGetFunction", d.drv.cuModuleGetFunction(&k.h, m.h, cstring(name)))
	})
	if err != nil {
		return nil, fmt.Errorf("%w (kernel %q)", err, name)
	}
	return k, nil
}

// Name returns the kernel's name.
func (k *Kernel) Name() string { return k.name }

// KernelAttrs are a compiled kernel's resource needs.
type KernelAttrs struct {
	Registers          int // per thread
	LocalBytes         int // local memory per thread (spills and local arrays)
	SharedBytes        int // static shared memory per block
	MaxThreadsPerBlock int // the most threads a block of it may have
}

// Attrs returns the kernel's resource needs, as ptxas allocated them.
func (k *Kernel) Attrs() (KernelAttrs, error) {
	var a KernelAttrs
	d := k.mod.dev
	err := d.do(func() error {
		for _, q := range []struct {
			attr int32
			dst  *int
		}{
			{funcNumRegs, &a.Registers},
			{funcLocalSizeBytes, &a.LocalBytes},
			{funcSharedSizeBytes, &a.SharedBytes},
			{funcMaxThreadsPerBlock, &a.MaxThreadsPerBlock},
		} {
			var v int32
			if err := d.drv.check("cuFuncGetAttribute", d.drv.cuFuncGetAttribute(&v, q.attr, k.h)); err != nil {
				return err
			}
			*q.dst = int(v)
		}
		return nil
	})
	return a, err
}

// funcMaxDynamicShared is CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
const funcMaxDynamicShared = 8

// SetMaxDynamicShared lets launches of the kernel use up to bytes of
// dynamic shared memory per block: more than 48 KiB needs it, up to the
// device's Info().SharedOptin less the kernel's static shared memory.
func (k *Kernel) SetMaxDynamicShared(bytes int) error {
	d := k.mod.dev
	return d.do(func() error {
		return d.drv.check("cuFuncSetAttribute", d.drv.cuFuncSetAttribute(k.h, funcMaxDynamicShared, int32(bytes)))
	})
}

// Dim is a grid or block shape; a zero Y or Z means 1.
type Dim struct{ X, Y, Z int }

func (d Dim) dims() (x, y, z uint32) {
	one := func(v int) uint32 {
		if v == 0 {
			return 1
		}
		return uint32(v)
	}
	return one(d.X), one(d.Y), one(d.Z)
}

// Launch is a kernel launch configuration.
type Launch struct {
	Grid, Block Dim
	SharedMem   int     // bytes of dynamic shared memory per block
	Stream      *Stream // nil: the legacy default stream
}

// Linear returns the launch of one thread per element of n elements in
// blocks of block threads: ⌈n/block⌉ blocks.
func Linear(n, block int) Launch {
	return Launch{Grid: Dim{X: (n + block - 1) / block}, Block: Dim{X: block}}
}

// DevicePointer is implemented by *Buffer[T]: a kernel argument passed as
// the buffer's device address.
type DevicePointer interface{ devicePtr() uint64 }

// Launch queues the kernel with the given arguments, one per kernel
// parameter, in order: int32, uint32, int64, uint64, float32, float64, a
// *Buffer (passed as its device address) or a []byte (a struct passed by
// value: its bytes, laid out as the kernel's parameter type, which the
// driver copies; it must not be empty). The launch is asynchronous:
// a fault while the kernel runs is reported by the next synchronising
// call (Device.Synchronize, Stream.Synchronize, a Buffer copy).
func (k *Kernel) Launch(l Launch, args ...any) error {
	slots := make([]uint64, len(args)+1) // +1: never empty
	params := make([]unsafe.Pointer, len(args)+1)
	var structs [][]byte
	for i, a := range args {
		switch v := a.(type) {
		case []byte:
			if len(v) == 0 {
				return fmt.Errorf("cuda: kernel %s: argument %d is an empty []byte", k.name, i)
			}
			structs = append(structs, v)
			params[i] = unsafe.Pointer(&v[0])
			continue
		case int32:
			slots[i] = uint64(uint32(v))
		case uint32:
			slots[i] = uint64(v)
		case int64:
			slots[i] = uint64(v)
		case uint64:
			slots[i] = v
		case float32:
			slots[i] = uint64(math.Float32bits(v))
		case float64:
			slots[i] = math.Float64bits(v)
		case DevicePointer:
			slots[i] = v.devicePtr()
		default:
			return fmt.Errorf("cuda: kernel %s: argument %d has unsupported type %T", k.name, i, a)
		}
		params[i] = unsafe.Pointer(&slots[i])
	}
	gx, gy, gz := l.Grid.dims()
	bx, by, bz := l.Block.dims()
	var stream uintptr
	if l.Stream != nil {
		stream = l.Stream.h
	}
	d := k.mod.dev
	err := d.do(func() error {
		var pin runtime.Pinner
		defer pin.Unpin()
		pin.Pin(&slots[0])
		pin.Pin(&params[0])
		for _, b := range structs {
			pin.Pin(&b[0])
		}
		return d.drv.check("cuLaunchKernel", d.drv.cuLaunchKernel(k.h, gx, gy, gz, bx, by, bz,
			uint32(l.SharedMem), stream, &params[0], 0))
	})
	if err != nil {
		return fmt.Errorf("%w (kernel %s, grid %v, block %v)", err, k.name, l.Grid, l.Block)
	}
	return nil
}

// Stream is a queue of device work.
type Stream struct {
	dev *Device
	h   uintptr // CUstream
}

// NewStream creates a stream, ordered with the legacy default stream.
func (d *Device) NewStream() (*Stream, error) {
	s := &Stream{dev: d}
	err := d.do(func() error { return d.drv.check("cuStreamCreate", d.drv.cuStreamCreate(&s.h, 0)) })
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Synchronize waits for the stream's work and reports its first fault.
func (s *Stream) Synchronize() error {
	d := s.dev
	return d.do(func() error { return d.drv.check("cuStreamSynchronize", d.drv.cuStreamSynchronize(s.h)) })
}

// Destroy destroys the stream once its queued work is done.
func (s *Stream) Destroy() error {
	if s.h == 0 {
		return nil
	}
	d := s.dev
	err := d.do(func() error { return d.drv.check("cuStreamDestroy", d.drv.cuStreamDestroy(s.h)) })
	s.h = 0
	return err
}

// Event marks a point in a stream's work, for timing.
type Event struct {
	dev *Device
	h   uintptr // CUevent
}

// NewEvent creates an event.
func (d *Device) NewEvent() (*Event, error) {
	e := &Event{dev: d}
	err := d.do(func() error { return d.drv.check("cuEventCreate", d.drv.cuEventCreate(&e.h, 0)) })
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Record records the event in s (nil: the legacy default stream).
func (e *Event) Record(s *Stream) error {
	var sh uintptr
	if s != nil {
		sh = s.h
	}
	d := e.dev
	return d.do(func() error { return d.drv.check("cuEventRecord", d.drv.cuEventRecord(e.h, sh)) })
}

// Synchronize waits until the work before the event's record is done.
func (e *Event) Synchronize() error {
	d := e.dev
	return d.do(func() error { return d.drv.check("cuEventSynchronize", d.drv.cuEventSynchronize(e.h)) })
}

// Elapsed returns the device time between two recorded events (about
// half a microsecond of resolution), waiting for end to complete.
func Elapsed(start, end *Event) (time.Duration, error) {
	var dt time.Duration
	err := end.dev.Batch(func(q *Queue) error {
		var err error
		dt, err = q.Elapsed(start, end)
		return err
	})
	return dt, err
}

// Destroy destroys the event.
func (e *Event) Destroy() error {
	if e.h == 0 {
		return nil
	}
	d := e.dev
	err := d.do(func() error { return d.drv.check("cuEventDestroy", d.drv.cuEventDestroy(e.h)) })
	e.h = 0
	return err
}
