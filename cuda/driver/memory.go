package driver

import (
	"fmt"
	"unsafe"
)

// Elem is the element type of a Buffer.
type Elem interface {
	~float32 | ~float64 | ~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64
}

// Buffer is an array of n elements of type T in a device's memory.
// Copies to and from it are synchronous with respect to the host and
// ordered after the work queued on the legacy default stream (and on
// streams made by NewStream). A Buffer is passed to a kernel as a pointer
// (a T* parameter).
type Buffer[T Elem] struct {
	dev *Device
	ptr uint64 // the device address; 0 for an empty buffer
	n   int
}

// Alloc allocates an uninitialised buffer of n elements on d. It returns
// an *Error naming cuMemAlloc if the device is out of memory. It panics if
// n < 0.
func Alloc[T Elem](d *Device, n int) (*Buffer[T], error) {
	if n < 0 {
		panic("cuda: Alloc: negative length")
	}
	b := &Buffer[T]{dev: d, n: n}
	if n == 0 {
		return b, nil
	}
	bytes := uint64(n) * uint64(unsafe.Sizeof(*new(T)))
	err := d.do(func() error { return d.drv.check("cuMemAlloc", d.drv.cuMemAlloc(&b.ptr, bytes)) })
	if err != nil {
		return nil, fmt.Errorf("%w (%d bytes)", err, bytes)
	}
	return b, nil
}

// Len returns the number of elements of b.
func (b *Buffer[T]) Len() int { return b.n }

// Ptr returns the device address of b's first element (0 for an empty
// buffer).
func (b *Buffer[T]) Ptr() uint64 { return b.ptr }

// devicePtr makes a Buffer a kernel argument.
func (b *Buffer[T]) devicePtr() uint64 { return b.ptr }

func (b *Buffer[T]) bytes(n int) uint64 { return uint64(n) * uint64(unsafe.Sizeof(*new(T))) }

// Write copies src into the first len(src) elements of b. It panics if
// len(src) > b.Len().
func (b *Buffer[T]) Write(src []T) error {
	if len(src) > b.n {
		panic("cuda: Buffer.Write: source longer than the buffer")
	}
	if len(src) == 0 {
		return nil
	}
	d := b.dev
	return d.do(func() error {
		return d.drv.check("cuMemcpyHtoD", d.drv.cuMemcpyHtoD(b.ptr, unsafe.Pointer(&src[0]), b.bytes(len(src))))
	})
}

// Read copies the first len(dst) elements of b into dst. It panics if
// len(dst) > b.Len().
func (b *Buffer[T]) Read(dst []T) error {
	if len(dst) > b.n {
		panic("cuda: Buffer.Read: destination longer than the buffer")
	}
	if len(dst) == 0 {
		return nil
	}
	d := b.dev
	return d.do(func() error {
		return d.drv.check("cuMemcpyDtoH", d.drv.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), b.ptr, b.bytes(len(dst))))
	})
}

// Zero sets every byte of b to zero (so every element to 0).
func (b *Buffer[T]) Zero() error {
	if b.n == 0 {
		return nil
	}
	d := b.dev
	return d.do(func() error { return d.drv.check("cuMemsetD8", d.drv.cuMemsetD8(b.ptr, 0, b.bytes(b.n))) })
}

// Free releases b's memory. Free of a freed or empty buffer does nothing.
func (b *Buffer[T]) Free() error {
	if b.ptr == 0 {
		return nil
	}
	d := b.dev
	err := d.do(func() error { return d.drv.check("cuMemFree", d.drv.cuMemFree(b.ptr)) })
	b.ptr, b.n = 0, 0
	return err
}

// HostAlloc returns n bytes of page-locked host memory of the device's
// context (cuMemHostAlloc): copies between it and the device run at the
// bus's speed, where copies from Go's (pageable) memory go through the
// driver's own staging. Free it with HostFree. n must be positive.
func (d *Device) HostAlloc(n int64) ([]byte, error) {
	var p unsafe.Pointer
	err := d.do(func() error { return d.drv.check("cuMemHostAlloc", d.drv.cuMemHostAlloc(&p, uint64(n), 0)) })
	if err != nil {
		return nil, fmt.Errorf("%w (%d bytes)", err, n)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// HostFree releases memory of HostAlloc (b as HostAlloc returned it, or
// resliced from its start).
func (d *Device) HostFree(b []byte) error {
	p := unsafe.Pointer(unsafe.SliceData(b))
	return d.do(func() error { return d.drv.check("cuMemFreeHost", d.drv.cuMemFreeHost(p)) })
}

// CopyToDevice copies src to device memory at addr (an address within an
// allocation of the device, such as Buffer.Ptr plus an offset).
func (d *Device) CopyToDevice(addr uint64, src []byte) error {
	return d.Batch(func(q *Queue) error { return q.CopyToDevice(addr, src) })
}

// CopyFromDevice copies device memory at addr to dst.
func (d *Device) CopyFromDevice(dst []byte, addr uint64) error {
	return d.Batch(func(q *Queue) error { return q.CopyFromDevice(dst, addr) })
}

// CopyDevice copies n bytes of device memory from src to dst (addresses
// within allocations of the device; the ranges must not overlap). The
// copy is ordered with the device's other work and does not wait for it.
func (d *Device) CopyDevice(dst, src uint64, n int64) error {
	return d.Batch(func(q *Queue) error { return q.CopyDevice(dst, src, n) })
}

// Zero sets n bytes of device memory at addr to zero.
func (d *Device) Zero(addr uint64, n int64) error {
	return d.Batch(func(q *Queue) error { return q.Zero(addr, n) })
}
