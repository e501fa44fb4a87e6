package driver

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// recSource is a C function that records its first eleven integer
// arguments (registers and stack) and returns ret in the low 32 bits of
// its return register, garbage in the high 32: a stand-in for any entry
// point bindDirect binds.
const recSource = `
#include <stdint.h>
uint64_t rec_got[11];
int32_t rec_ret;
uint64_t rec(uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5,
             uint64_t a6, uint64_t a7, uint64_t a8, uint64_t a9, uint64_t a10) {
  uint64_t a[11] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10};
  for (int k = 0; k < 11; k++) rec_got[k] = a[k];
  return 0xdeadbeef00000000ULL | (uint32_t)rec_ret;
}
uint64_t rec_arg(uint64_t k) { return rec_got[k]; }
void rec_set(uint64_t r) { rec_ret = (int32_t)r; for (int k = 0; k < 11; k++) rec_got[k] = 0x77; }
`

// recLib builds recSource into a shared library and returns its rec
// function, a function that reads its k-th argument's record and one
// that sets the result it returns (and the records to 0x77), skipping the test without a C
// compiler.
func recLib(tb testing.TB) (fn uintptr, arg func(k int) uint64, setRet func(r int32)) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		tb.Skip("no C compiler")
	}
	dir := tb.TempDir()
	src, lib := filepath.Join(dir, "rec.c"), filepath.Join(dir, "librec.so")
	if err := os.WriteFile(src, []byte(recSource), 0o644); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", lib, src).CombinedOutput(); err != nil {
		tb.Fatalf("cc: %v\n%s", err, out)
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		tb.Fatal(err)
	}
	sym := func(name string) uintptr {
		s, err := purego.Dlsym(h, name)
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
	ga, sr := sym("rec_arg"), sym("rec_set")
	arg = func(k int) uint64 { r, _, _ := purego.SyscallN(ga, uintptr(k)); return uint64(r) }
	setRet = func(r int32) { purego.SyscallN(sr, uintptr(uint32(r))) }
	return sym("rec"), arg, setRet
}

// TestBindDirect binds every driver entry point whose signature
// bindDirect knows to a C function that records its arguments, calls it
// with distinct values in every position (integers, and pointers whose
// addresses must arrive) and checks what arrived and the CUresult back
// (its low 32 bits only). The entry points of a launch's path must be
// among them.
func TestBindDirect(t *testing.T) {
	fn, arg, setRet := recLib(t)
	d := new(driver)
	bound := map[string]bool{}
	for _, e := range d.entries() {
		if !bindDirect(e.fn, fn) {
			continue
		}
		bound[e.name] = true
		f := reflect.ValueOf(e.fn).Elem()
		ft := f.Type()
		args := make([]reflect.Value, ft.NumIn())
		want := make([]uint64, ft.NumIn())
		for k := range args {
			at := ft.In(k)
			switch at.Kind() {
			case reflect.Pointer:
				p := reflect.New(at.Elem())
				args[k], want[k] = p, uint64(p.Pointer())
			case reflect.UnsafePointer:
				p := new(uint64)
				args[k], want[k] = reflect.ValueOf(unsafe.Pointer(p)), uint64(uintptr(unsafe.Pointer(p)))
			default:
				v := uint64(k + 1)
				if at.Size() > 1 {
					v |= uint64(0x5a+k) << (8*at.Size() - 8) // a high byte set in every wide integer
				}
				args[k], want[k] = reflect.ValueOf(v).Convert(at), v
			}
		}
		for _, r := range []int32{0, 700, -3} {
			setRet(r)
			out := f.Call(args)
			if g := int32(out[0].Int()); g != r {
				t.Errorf("%s: result %d, want %d", e.name, g, r)
			}
			for k, w := range want {
				if g := arg(k); g != w {
					t.Errorf("%s: argument %d arrived as %#x, want %#x", e.name, k, g, w)
				}
			}
		}
		runtimeKeep(args)
	}
	for _, name := range []string{"cuCtxSetCurrent", "cuMemAlloc", "cuMemFree", "cuMemGetInfo", "cuMemcpyHtoD", "cuMemcpyDtoH",
		"cuMemcpyDtoD", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemsetD8", "cuMemsetD8Async",
		"cuLaunchKernel", "cuStreamSynchronize", "cuStreamWaitEvent", "cuEventRecord", "cuEventSynchronize",
		"cuEventElapsedTime", "cuGraphLaunch", "cuCtxSynchronize"} {
		if !bound[name] {
			t.Errorf("%s is not bound directly", name)
		}
	}
}

// runtimeKeep keeps the arguments' memory alive to here.
//
//go:noinline
func runtimeKeep(args []reflect.Value) { _ = args }

// BenchmarkDriverCall times one call of a C function through the two
// bindings of the driver's entry points, with cuMemsetD8's signature
// (three arguments) and cuLaunchKernel's (eleven), and the eleven calls
// of a kept gradient's batch ("kept-batch": the context, the shared
// block's upload, two memsets, two event records and two launches, the
// words' read, the event's wait and its time), each entry point bound
// to the C function: "reflect" is purego.RegisterFunc's function (the
// binding of every entry point before session 45), "direct"
// bindDirect's (purego.SyscallN).
//
//	go test ./cuda/driver -run '^$' -bench DriverCall -benchtime 200000x -count 5
func BenchmarkDriverCall(b *testing.B) {
	fn, _, _ := recLib(b)
	for _, mode := range []string{"reflect", "direct"} {
		bind := func(f any) {
			if mode == "direct" {
				if !bindDirect(f, fn) {
					b.Fatal("not bound directly")
				}
				return
			}
			purego.RegisterFunc(f, fn)
		}
		b.Run("memset/"+mode, func(b *testing.B) {
			var f func(dst uint64, v uint8, n uint64) result
			bind(&f)
			b.ReportAllocs()
			for range b.N {
				f(1, 0, 8)
			}
		})
		b.Run("kept-batch/"+mode, func(b *testing.B) {
			d := new(driver)
			for _, e := range d.entries() {
				if bindDirect(new(driver).fieldOf(e.name), fn) { // (a signature bindDirect knows)
					bind(e.fn)
				}
			}
			var x [8]byte
			var ms float32
			params := [1]unsafe.Pointer{}
			b.ReportAllocs()
			for range b.N {
				d.cuCtxSetCurrent(1)
				d.cuMemcpyHtoDAsync(1, unsafe.Pointer(&x[0]), 8, 0)
				d.cuMemsetD8(1, 0, 8)
				d.cuMemsetD8(2, 0, 8)
				d.cuEventRecord(1, 0)
				d.cuLaunchKernel(1, 256, 1, 1, 128, 1, 1, 0, 0, &params[0], 0)
				d.cuEventRecord(2, 0)
				d.cuLaunchKernel(2, 512, 1, 1, 256, 1, 1, 0, 0, &params[0], 0)
				d.cuMemcpyDtoH(unsafe.Pointer(&x[0]), 1, 8)
				d.cuEventSynchronize(2)
				d.cuEventElapsedTime(&ms, 1, 2)
			}
		})
		b.Run("launch/"+mode, func(b *testing.B) {
			var f func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params *unsafe.Pointer, extra uintptr) result
			bind(&f)
			params := [1]unsafe.Pointer{}
			b.ReportAllocs()
			for range b.N {
				f(1, 256, 1, 1, 128, 1, 1, 0, 0, &params[0], 0)
			}
		})
	}
}

// fieldOf returns the pointer to d's field of the entry point called
// name (entries' fn), or nil.
func (d *driver) fieldOf(name string) any {
	for _, e := range d.entries() {
		if e.name == name {
			return e.fn
		}
	}
	return nil
}
