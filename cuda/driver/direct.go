package driver

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// Direct calls. purego.RegisterFunc makes a Go function of any signature
// by reflection (reflect.MakeFunc): each call builds its arguments and
// results as reflect.Values, about 0.6 µs and 4 allocations for three
// arguments and 1.3–2.4 µs and 12 allocations for cuLaunchKernel's
// eleven on the 2-core development VM, where purego.SyscallN with the
// same arguments as uintptrs takes 0.14–0.24 µs and one allocation.
// A kept gradient's launch makes about a dozen driver calls (the
// context, an upload, two memsets, two kernels, two event records, a
// read, an event's wait and its time), most of them before its kernel
// can start, so the driver's calls on the path of a launch (copies,
// memsets, launches, events, streams, graphs' launches, memory) are
// bound by bindDirect to functions that call SyscallN; the others (set-up:
// modules, attributes, the linker) stay RegisterFunc's.
//
// The arguments of these entry points are integers and pointers, passed
// in integer registers (and on the stack past six) as SyscallN passes
// them; the CUresult comes back in the low 32 bits of the return
// register. A pointer argument is converted to uintptr in SyscallN's
// argument list, whose go:uintptrescapes keeps the memory alive and in
// place until the call returns, as the unsafe.Pointer rules require.

// res is the CUresult in the low 32 bits of a return register.
func res(r uintptr) result { return result(int32(r)) }

// bindDirect sets *fn (a pointer to one of driver's function fields) to
// a function that calls the C function at sym through purego.SyscallN,
// where fn's signature is one of those below, and reports whether it
// did.
func bindDirect(fn any, sym uintptr) bool {
	switch f := fn.(type) {
	case *func() result:
		*f = func() result { r, _, _ := purego.SyscallN(sym); return res(r) }
	case *func(uintptr) result:
		*f = func(a uintptr) result { r, _, _ := purego.SyscallN(sym, a); return res(r) }
	case *func(uint64) result:
		*f = func(a uint64) result { r, _, _ := purego.SyscallN(sym, uintptr(a)); return res(r) }
	case *func(uintptr, uintptr) result:
		*f = func(a, b uintptr) result { r, _, _ := purego.SyscallN(sym, a, b); return res(r) }
	case *func(uintptr, uintptr, uint32) result:
		*f = func(a, b uintptr, c uint32) result { r, _, _ := purego.SyscallN(sym, a, b, uintptr(c)); return res(r) }
	case *func(*uint64, uint64) result:
		*f = func(p *uint64, n uint64) result {
			r, _, _ := purego.SyscallN(sym, uintptr(unsafe.Pointer(p)), uintptr(n))
			return res(r)
		}
	case *func(*uint64, *uint64) result:
		*f = func(a, b *uint64) result {
			r, _, _ := purego.SyscallN(sym, uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(b)))
			return res(r)
		}
	case *func(*float32, uintptr, uintptr) result:
		*f = func(ms *float32, a, b uintptr) result {
			r, _, _ := purego.SyscallN(sym, uintptr(unsafe.Pointer(ms)), a, b)
			return res(r)
		}
	case *func(uint64, unsafe.Pointer, uint64) result: // cuMemcpyHtoD
		*f = func(dst uint64, src unsafe.Pointer, n uint64) result {
			r, _, _ := purego.SyscallN(sym, uintptr(dst), uintptr(src), uintptr(n))
			return res(r)
		}
	case *func(uint64, unsafe.Pointer, uint64, uintptr) result: // cuMemcpyHtoDAsync
		*f = func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) result {
			r, _, _ := purego.SyscallN(sym, uintptr(dst), uintptr(src), uintptr(n), s)
			return res(r)
		}
	case *func(unsafe.Pointer, uint64, uint64) result: // cuMemcpyDtoH
		*f = func(dst unsafe.Pointer, src, n uint64) result {
			r, _, _ := purego.SyscallN(sym, uintptr(dst), uintptr(src), uintptr(n))
			return res(r)
		}
	case *func(unsafe.Pointer, uint64, uint64, uintptr) result: // cuMemcpyDtoHAsync
		*f = func(dst unsafe.Pointer, src, n uint64, s uintptr) result {
			r, _, _ := purego.SyscallN(sym, uintptr(dst), uintptr(src), uintptr(n), s)
			return res(r)
		}
	case *func(uint64, uint64, uint64) result: // cuMemcpyDtoD
		*f = func(dst, src, n uint64) result {
			r, _, _ := purego.SyscallN(sym, uintptr(dst), uintptr(src), uintptr(n))
			return res(r)
		}
	case *func(uint64, uint64, uint64, uintptr) result: // cuMemcpyDtoDAsync
		*f = func(dst, src, n uint64, s uintptr) result {
			r, _, _ := purego.SyscallN(sym, uintptr(dst), uintptr(src), uintptr(n), s)
			return res(r)
		}
	case *func(uint64, uint8, uint64) result: // cuMemsetD8
		*f = func(dst uint64, v uint8, n uint64) result {
			r, _, _ := purego.SyscallN(sym, uintptr(dst), uintptr(v), uintptr(n))
			return res(r)
		}
	case *func(uint64, uint8, uint64, uintptr) result: // cuMemsetD8Async
		*f = func(dst uint64, v uint8, n uint64, s uintptr) result {
			r, _, _ := purego.SyscallN(sym, uintptr(dst), uintptr(v), uintptr(n), s)
			return res(r)
		}
	case *func(uintptr, uint32, uint32, uint32, uint32, uint32, uint32, uint32, uintptr, *unsafe.Pointer, uintptr) result: // cuLaunchKernel
		*f = func(k uintptr, gx, gy, gz, bx, by, bz, shared uint32, s uintptr, params *unsafe.Pointer, extra uintptr) result {
			r, _, _ := purego.SyscallN(sym, k, uintptr(gx), uintptr(gy), uintptr(gz), uintptr(bx), uintptr(by), uintptr(bz),
				uintptr(shared), s, uintptr(unsafe.Pointer(params)), extra)
			return res(r)
		}
	default:
		return false
	}
	return true
}
