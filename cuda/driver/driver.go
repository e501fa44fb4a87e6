package driver

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// MinDriverVersion is the oldest CUDA driver API version this package
// loads (cuDriverGetVersion's encoding: 1000·major + 10·minor, so 12000
// is CUDA 12.0). Entry points are resolved through cuGetProcAddress_v2,
// which CUDA 12.0 introduced.
const MinDriverVersion = 12000

// driverNames are the driver library's names, tried in order.
var driverNames = []string{"libcuda.so.1", "libcuda.so"}

// CUresult codes this package handles specially.
const (
	errNoDevice   = 100 // CUDA_ERROR_NO_DEVICE
	errNotReady   = 600 // CUDA_ERROR_NOT_READY
	procAddrFound = 0   // CU_GET_PROC_ADDRESS_SUCCESS
)

// cuGetProcAddress flags: CU_GET_PROC_ADDRESS_LEGACY_STREAM asks for the
// entry points that use the legacy default stream (not the _ptsz/_ptds
// variants).
const procAddrLegacyStream = 1

// result is a CUresult.
type result int32

// driver holds the CUDA driver's entry points. It is loaded once per
// process (loadDriver) and holds no device state.
type driver struct {
	version int // cuDriverGetVersion

	cuGetErrorName            func(result, **byte) result
	cuGetErrorString          func(result, **byte) result
	cuInit                    func(flags uint32) result
	cuDriverGetVersion        func(*int32) result
	cuDeviceGetCount          func(*int32) result
	cuDeviceGet               func(*int32, int32) result
	cuDeviceGetName           func(*byte, int32, int32) result
	cuDeviceGetAttribute      func(*int32, int32, int32) result
	cuDeviceTotalMem          func(*uint64, int32) result
	cuDevicePrimaryCtxRetain  func(*uintptr, int32) result
	cuDevicePrimaryCtxRelease func(int32) result
	cuCtxSetCurrent           func(uintptr) result
	cuCtxSynchronize          func() result
	cuMemGetInfo              func(free, total *uint64) result
	cuMemAlloc                func(*uint64, uint64) result
	cuMemFree                 func(uint64) result
	cuMemcpyHtoD              func(dst uint64, src unsafe.Pointer, n uint64) result
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uint64, n uint64) result
	cuMemcpyDtoD              func(dst, src uint64, n uint64) result
	cuMemcpyDtoHAsync         func(dst unsafe.Pointer, src uint64, n uint64, stream uintptr) result
	cuMemsetD8                func(dst uint64, v uint8, n uint64) result
	cuMemHostAlloc            func(pp *unsafe.Pointer, n uint64, flags uint32) result
	cuMemFreeHost             func(p unsafe.Pointer) result
	cuModuleLoadDataEx        func(mod *uintptr, image unsafe.Pointer, nopt uint32, opts *int32, vals *unsafe.Pointer) result
	cuModuleGetFunction       func(fn *uintptr, mod uintptr, name *byte) result
	cuModuleUnload            func(uintptr) result
	cuFuncGetAttribute        func(*int32, int32, uintptr) result
	cuFuncSetAttribute        func(fn uintptr, attr int32, v int32) result
	cuLaunchKernel            func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params *unsafe.Pointer, extra uintptr) result
	cuStreamCreate            func(*uintptr, uint32) result
	cuStreamDestroy           func(uintptr) result
	cuStreamSynchronize       func(uintptr) result
	cuStreamWaitEvent         func(stream, event uintptr, flags uint32) result
	cuEventCreate             func(*uintptr, uint32) result
	cuEventRecord             func(event, stream uintptr) result
	cuEventSynchronize        func(uintptr) result
	cuEventElapsedTime        func(ms *float32, start, end uintptr) result
	cuEventDestroy            func(uintptr) result

	// Graphs and the asynchronous copies a capture records (graph.go).
	cuMemcpyHtoDAsync           func(dst uint64, src unsafe.Pointer, n uint64, stream uintptr) result
	cuMemcpyDtoDAsync           func(dst, src uint64, n uint64, stream uintptr) result
	cuMemsetD8Async             func(dst uint64, v uint8, n uint64, stream uintptr) result
	cuStreamBeginCapture        func(stream uintptr, mode int32) result
	cuStreamEndCapture          func(stream uintptr, graph *uintptr) result
	cuGraphInstantiateWithFlags func(exec *uintptr, graph uintptr, flags uint64) result
	cuGraphLaunch               func(exec, stream uintptr) result
	cuGraphExecDestroy          func(uintptr) result
	cuGraphDestroy              func(uintptr) result

	// The linker of programs compiled in parts (link.go).
	cuLinkCreate   func(nopt uint32, opts *int32, vals *unsafe.Pointer, state *uintptr) result
	cuLinkAddData  func(state uintptr, typ int32, data unsafe.Pointer, size uint64, name *byte, nopt uint32, opts *int32, vals *unsafe.Pointer) result
	cuLinkComplete func(state uintptr, cubin *unsafe.Pointer, size *uint64) result
	cuLinkDestroy  func(state uintptr) result
}

// entry is one driver entry point: its name, the CUDA version whose ABI
// the Go signature follows (cudaTypedefs.h's PFN_<name>_v<version>), and
// the field to bind.
type entry struct {
	name    string
	version int32
	fn      any
	// optional entries may be missing: the field stays nil and what
	// needs it fails with an *Error (graphs: Queue.Capture).
	optional bool
}

func (d *driver) entries() []entry {
	return []entry{
		{name: "cuGetErrorName", version: 6000, fn: &d.cuGetErrorName},
		{name: "cuGetErrorString", version: 6000, fn: &d.cuGetErrorString},
		{name: "cuInit", version: 2000, fn: &d.cuInit},
		{name: "cuDriverGetVersion", version: 2020, fn: &d.cuDriverGetVersion},
		{name: "cuDeviceGetCount", version: 2000, fn: &d.cuDeviceGetCount},
		{name: "cuDeviceGet", version: 2000, fn: &d.cuDeviceGet},
		{name: "cuDeviceGetName", version: 2000, fn: &d.cuDeviceGetName},
		{name: "cuDeviceGetAttribute", version: 2000, fn: &d.cuDeviceGetAttribute},
		{name: "cuDeviceTotalMem", version: 3020, fn: &d.cuDeviceTotalMem},
		{name: "cuDevicePrimaryCtxRetain", version: 7000, fn: &d.cuDevicePrimaryCtxRetain},
		{name: "cuDevicePrimaryCtxRelease", version: 11000, fn: &d.cuDevicePrimaryCtxRelease},
		{name: "cuCtxSetCurrent", version: 4000, fn: &d.cuCtxSetCurrent},
		{name: "cuCtxSynchronize", version: 2000, fn: &d.cuCtxSynchronize},
		{name: "cuMemGetInfo", version: 3020, fn: &d.cuMemGetInfo},
		{name: "cuMemAlloc", version: 3020, fn: &d.cuMemAlloc},
		{name: "cuMemFree", version: 3020, fn: &d.cuMemFree},
		{name: "cuMemcpyHtoD", version: 3020, fn: &d.cuMemcpyHtoD},
		{name: "cuMemcpyDtoH", version: 3020, fn: &d.cuMemcpyDtoH},
		{name: "cuMemcpyDtoD", version: 3020, fn: &d.cuMemcpyDtoD},
		{name: "cuMemcpyDtoHAsync", version: 3020, fn: &d.cuMemcpyDtoHAsync},
		{name: "cuMemsetD8", version: 3020, fn: &d.cuMemsetD8},
		{name: "cuMemHostAlloc", version: 2020, fn: &d.cuMemHostAlloc},
		{name: "cuMemFreeHost", version: 2000, fn: &d.cuMemFreeHost},
		{name: "cuModuleLoadDataEx", version: 2010, fn: &d.cuModuleLoadDataEx},
		{name: "cuModuleGetFunction", version: 2000, fn: &d.cuModuleGetFunction},
		{name: "cuModuleUnload", version: 2000, fn: &d.cuModuleUnload},
		{name: "cuFuncGetAttribute", version: 2020, fn: &d.cuFuncGetAttribute},
		{name: "cuFuncSetAttribute", version: 9000, fn: &d.cuFuncSetAttribute},
		{name: "cuLaunchKernel", version: 4000, fn: &d.cuLaunchKernel},
		{name: "cuStreamCreate", version: 2000, fn: &d.cuStreamCreate},
		{name: "cuStreamDestroy", version: 4000, fn: &d.cuStreamDestroy},
		{name: "cuStreamSynchronize", version: 2000, fn: &d.cuStreamSynchronize},
		{name: "cuStreamWaitEvent", version: 3020, fn: &d.cuStreamWaitEvent},
		{name: "cuEventCreate", version: 2000, fn: &d.cuEventCreate},
		{name: "cuEventRecord", version: 2000, fn: &d.cuEventRecord},
		{name: "cuEventSynchronize", version: 2000, fn: &d.cuEventSynchronize},
		// The _v2 of CUDA 12.8 has the same signature; older drivers
		// answer with the original.
		{name: "cuEventElapsedTime", version: 12080, fn: &d.cuEventElapsedTime},
		{name: "cuEventDestroy", version: 4000, fn: &d.cuEventDestroy},
		{name: "cuMemcpyHtoDAsync", version: 3020, fn: &d.cuMemcpyHtoDAsync},
		{name: "cuMemcpyDtoDAsync", version: 3020, fn: &d.cuMemcpyDtoDAsync},
		{name: "cuMemsetD8Async", version: 3020, fn: &d.cuMemsetD8Async},
		// Version 10010 is cuStreamBeginCapture_v2, with the capture mode.
		{name: "cuStreamBeginCapture", version: 10010, fn: &d.cuStreamBeginCapture, optional: true},
		{name: "cuStreamEndCapture", version: 10000, fn: &d.cuStreamEndCapture, optional: true},
		{name: "cuGraphInstantiateWithFlags", version: 11040, fn: &d.cuGraphInstantiateWithFlags, optional: true},
		{name: "cuGraphLaunch", version: 10000, fn: &d.cuGraphLaunch, optional: true},
		{name: "cuGraphExecDestroy", version: 10000, fn: &d.cuGraphExecDestroy, optional: true},
		{name: "cuGraphDestroy", version: 10000, fn: &d.cuGraphDestroy, optional: true},
		// Version 6050 is cuLinkCreate_v2 and cuLinkAddData_v2.
		{name: "cuLinkCreate", version: 6050, fn: &d.cuLinkCreate, optional: true},
		{name: "cuLinkAddData", version: 6050, fn: &d.cuLinkAddData, optional: true},
		{name: "cuLinkComplete", version: 5050, fn: &d.cuLinkComplete, optional: true},
		{name: "cuLinkDestroy", version: 5050, fn: &d.cuLinkDestroy, optional: true},
	}
}

var (
	driverOnce sync.Once
	driverLib  *driver
	driverErr  error
)

// loadDriver loads the driver library once per process and initialises
// it (cuInit). Its error wraps ErrNoGPU when there is no usable GPU.
func loadDriver() (*driver, error) {
	driverOnce.Do(func() { driverLib, driverErr = openDriver(driverNames) })
	return driverLib, driverErr
}

// openDriver opens the first of names that loads, resolves every entry
// point and calls cuInit.
func openDriver(names []string) (*driver, error) {
	var lib uintptr
	var errs []string
	for _, name := range names {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			lib = h
			break
		}
		errs = append(errs, dlopenError(name, err))
	}
	if lib == 0 {
		return nil, fmt.Errorf("cuda: %w: %s not found (%s)", ErrNoGPU, names[0], strings.Join(errs, "; "))
	}
	sym, err := purego.Dlsym(lib, "cuGetProcAddress_v2")
	if err != nil {
		return nil, fmt.Errorf("cuda: %w: the driver has no cuGetProcAddress_v2; it is older than CUDA %s", ErrNoGPU, versionString(MinDriverVersion))
	}
	var getProc func(symbol *byte, pfn *uintptr, version int32, flags uint64, status *int32) result
	purego.RegisterFunc(&getProc, sym)
	d := new(driver)
	for _, e := range d.entries() {
		var fn uintptr
		var status int32
		if r := getProc(cstring(e.name), &fn, e.version, procAddrLegacyStream, &status); r != 0 || status != procAddrFound || fn == 0 {
			if e.optional {
				continue
			}
			return nil, fmt.Errorf("cuda: %w: cuGetProcAddress_v2 found no %s (ABI version %d): result %d, status %d",
				ErrNoGPU, e.name, e.version, r, status)
		}
		if !bindDirect(e.fn, fn) {
			purego.RegisterFunc(e.fn, fn)
		}
	}
	var v int32
	if err := d.check("cuDriverGetVersion", d.cuDriverGetVersion(&v)); err != nil {
		return nil, fmt.Errorf("cuda: %w: %w", ErrNoGPU, err)
	}
	d.version = int(v)
	if d.version < MinDriverVersion {
		return nil, fmt.Errorf("cuda: %w: the driver supports CUDA %s, older than the minimum %s",
			ErrNoGPU, versionString(d.version), versionString(MinDriverVersion))
	}
	if err := d.check("cuInit", d.cuInit(0)); err != nil {
		return nil, fmt.Errorf("cuda: %w: %w", ErrNoGPU, err)
	}
	return d, nil
}

// dlopenError says why the library name did not open: the loader's
// message, which names the file, or, where the loader left none (dlerror
// is empty once read: a second try in one process), the name.
func dlopenError(name string, err error) string {
	msg := err.Error()
	switch {
	case msg == "":
		return name + ": cannot open shared object file"
	case !strings.Contains(msg, name):
		return name + ": " + msg
	}
	return msg
}

// check turns a CUresult into nil or an *Error naming call.
func (d *driver) check(call string, r result) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: call, Code: int(r), Name: fmt.Sprintf("CUDA_ERROR_%d", int(r))}
	var s *byte
	if d.cuGetErrorName(r, &s) == 0 && s != nil {
		e.Name = gostring(s)
	}
	s = nil
	if d.cuGetErrorString(r, &s) == 0 && s != nil {
		e.Desc = gostring(s)
	}
	return e
}

// DriverVersion returns the CUDA version of the installed driver, in
// cuDriverGetVersion's encoding (13000 for CUDA 13.0), loading the driver
// if need be. Its error wraps ErrNoGPU if there is no usable driver.
func DriverVersion() (int, error) {
	d, err := loadDriver()
	if err != nil {
		return 0, err
	}
	return d.version, nil
}

// versionString formats 12040 as "12.4".
func versionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// cstring returns a NUL-terminated copy of s.
func cstring(s string) *byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return &b[0]
}

// gostring copies the NUL-terminated C string at p.
func gostring(p *byte) string {
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return strings.Clone(unsafe.String(p, n))
}
