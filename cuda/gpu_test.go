package cuda

import (
	"errors"
	"fmt"
	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// GPU tests: they skip cleanly (ErrNoGPU) where there is no driver or no
// device. Run them alone with -run GPU.

// openGPU opens device 0, closed at the end of the test, or skips.
func openGPU(t *testing.T) *driver.Device {
	t.Helper()
	d, err := driver.Open(0)
	if errors.Is(err, ErrNoGPU) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

func TestGPUDevice(t *testing.T) {
	d := openGPU(t)
	info := d.Info()
	t.Logf("device: %+v", info)
	if info.Name == "" || info.Arch.Major < 3 || info.SMs <= 0 || info.TotalMem == 0 || info.WarpSize != 32 || info.Driver < driver.MinDriverVersion {
		t.Errorf("implausible device info %+v", info)
	}
	free, total, err := d.MemInfo()
	if err != nil || free > total || total == 0 {
		t.Errorf("MemInfo = %d, %d, %v", free, total, err)
	}

	// Round trips, Zero, Free.
	x := make([]float64, 1000)
	for i := range x {
		x[i] = float64(i) * 0.25
	}
	b, err := driver.Alloc[float64](d, len(x))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Write(x); err != nil {
		t.Fatal(err)
	}
	y := make([]float64, len(x))
	if err := b.Read(y); err != nil {
		t.Fatal(err)
	}
	for i := range x {
		if y[i] != x[i] {
			t.Fatalf("round trip: element %d is %v, want %v", i, y[i], x[i])
		}
	}
	if err := b.Zero(); err != nil {
		t.Fatal(err)
	}
	b.Read(y)
	for i := range y {
		if y[i] != 0 {
			t.Fatalf("after Zero, element %d is %v", i, y[i])
		}
	}
	if err := b.Free(); err != nil {
		t.Errorf("Free: %v", err)
	}
	if err := b.Free(); err != nil {
		t.Errorf("second Free: %v", err)
	}

	// Out of memory is an *Error naming the call.
	_, err = driver.Alloc[float64](d, 1<<50)
	var ce *driver.Error
	if !errors.As(err, &ce) || ce.Call != "cuMemAlloc" || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
		t.Errorf("allocating 8 PiB: want an *driver.Error of cuMemAlloc, CUDA_ERROR_OUT_OF_MEMORY; got %v", err)
	} else {
		t.Logf("allocating 8 PiB: %v", err)
	}
}

// TestGPUDevices: two Devices of one GPU work side by side from several
// goroutines, and closing one leaves the other working.
func TestGPUDevices(t *testing.T) {
	d1 := openGPU(t)
	d2, err := driver.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		d := d1
		if g%2 == 1 {
			d = d2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := driver.Alloc[int32](d, 4096)
			if err != nil {
				errs <- err
				return
			}
			defer b.Free()
			x := make([]int32, 4096)
			for i := range x {
				x[i] = int32(g*10000 + i)
			}
			y := make([]int32, len(x))
			for range 20 {
				if err := b.Write(x); err != nil {
					errs <- err
					return
				}
				if err := b.Read(y); err != nil {
					errs <- err
					return
				}
				for i := range x {
					if x[i] != y[i] {
						errs <- fmt.Errorf("goroutine %d: element %d is %d, want %d", g, i, y[i], x[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d2.MemInfo(); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("a closed device answered %v, want ErrClosed", err)
	}
	if _, _, err := d1.MemInfo(); err != nil {
		t.Errorf("the other device of the same GPU fails after one closed: %v", err)
	}
}

// runGPU compiles one map kernel per program, runs each on the device
// over its trajectories (inputs [k][n], step-major) and returns the
// outputs, [program][output][trajectory].
func runGPU(t *testing.T, d *driver.Device, tps []testProgram, prec Precision) [][][]float64 {
	t.Helper()
	src := kernelgen.NewSource(&kernelgen.SourceSettings{Precision: prec})
	names := make([]string, len(tps))
	for j, tp := range tps {
		k, err := src.MapKernel(tp.p)
		if err != nil {
			t.Fatal(err)
		}
		names[j] = k
	}
	start := time.Now()
	mod, img, err := d.Build(src.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Unload()
	t.Logf("precision %d: %d kernels compiled for %s (PTX %v, cached %v) in %v", prec, len(tps), img.Target, img.PTX, img.Cached, time.Since(start))
	res := make([][][]float64, len(tps))
	for j, tp := range tps {
		k, err := mod.Kernel(names[j])
		if err != nil {
			t.Fatal(err)
		}
		n := tp.n()
		var flat, sh []float64
		for _, col := range tp.in {
			flat = append(flat, col...)
		}
		sh = append(sh, tp.sh...)
		out := make([]float64, len(tp.p.Outputs)*n)
		if prec == Float32 {
			out32 := runKernel[float32](t, d, k, n, to32(flat), to32(sh), len(out))
			for i, v := range out32 {
				out[i] = float64(v)
			}
		} else {
			out = runKernel[float64](t, d, k, n, flat, sh, len(out))
		}
		res[j] = make([][]float64, len(tp.p.Outputs))
		for m := range res[j] {
			res[j][m] = out[m*n : (m+1)*n]
		}
	}
	return res
}

func to32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

// runKernel runs a map kernel and returns its output.
func runKernel[T float32 | float64](t *testing.T, d *driver.Device, k *driver.Kernel, n int, in, sh []T, nout int) []T {
	t.Helper()
	alloc := func(x []T, size int) *driver.Buffer[T] {
		b, err := driver.Alloc[T](d, max(size, 1))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Write(x); err != nil {
			t.Fatal(err)
		}
		return b
	}
	bin, bsh, bout := alloc(in, len(in)), alloc(sh, len(sh)), alloc(nil, nout)
	defer bin.Free()
	defer bsh.Free()
	defer bout.Free()
	if err := k.Launch(driver.Linear(n, 128), int64(n), bin, bsh, bout); err != nil {
		t.Fatal(err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatalf("kernel %s: %v", k.Name(), err)
	}
	out := make([]T, nout)
	if err := bout.Read(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGPUMap is the smoke test of the whole path: programs → CUDA C++ →
// NVRTC → driver → launch, compared with tape's Eval: IEEE-exact programs
// bit for bit, libm functions within 8 ulps (CUDA's own libm), in
// float64; well-conditioned programs in float32.
func TestGPUMap(t *testing.T) {
	d := openGPU(t)
	tps := allPrograms(t, 256)
	got := runGPU(t, d, tps, Float64)
	for j, tp := range tps {
		tol := tp.tol
		if tol.ulps > 0 {
			tol.ulps = 8
		}
		if tol.rel > 0 {
			tol.rel = 1e-12
		}
		tp.compare(t, "GPU float64", got[j], tol)
	}

	var f32 []testProgram
	for _, tp := range allPrograms(t, 256) {
		if !tp.float {
			continue
		}
		for _, col := range tp.in {
			for i := range col {
				col[i] = float64(float32(col[i]))
			}
		}
		for i := range tp.sh {
			tp.sh[i] = float64(float32(tp.sh[i]))
		}
		f32 = append(f32, tp)
	}
	got = runGPU(t, d, f32, Float32)
	for j, tp := range f32 {
		tp.compare(t, "GPU float32", got[j], tolerance{rel: 1e-4})
	}
}

// TestGPULorenz runs the Lorenz map over 2^20 trajectories: results
// against Eval, the cache hit of a second build, the kernel's resources
// and its time (logged, not asserted).
func TestGPULorenz(t *testing.T) {
	d := openGPU(t)
	lorenz := lorenzTest(t, rand.New(rand.NewPCG(3, 4)), 1<<20)
	src := kernelgen.NewSource(nil)
	kname, err := src.MapKernel(lorenz.p)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		mod, img, err := d.Build(src.String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if round == 1 && !img.Cached {
			t.Errorf("the second build of the same source missed the cache")
		}
		mod.Unload()
	}
	mod, _, err := d.Build(src.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Unload()
	k, err := mod.Kernel(kname)
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := k.Attrs()
	if err != nil || attrs.Registers <= 0 {
		t.Errorf("Attrs = %+v, %v", attrs, err)
	}
	t.Logf("kernel %s: %+v", kname, attrs)

	n := lorenz.n()
	var flat []float64
	for _, col := range lorenz.in {
		flat = append(flat, col...)
	}
	nout := 3 * n
	bin, _ := driver.Alloc[float64](d, len(flat))
	bsh, _ := driver.Alloc[float64](d, 3)
	bout, err := driver.Alloc[float64](d, nout)
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Free()
	defer bsh.Free()
	defer bout.Free()
	bin.Write(flat)
	bsh.Write(lorenz.sh)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	e0, _ := d.NewEvent()
	e1, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer e0.Destroy()
	defer e1.Destroy()
	l := driver.Linear(n, 256)
	l.Stream = s
	for range 3 { // warm up, then time the last
		e0.Record(s)
		if err := k.Launch(l, int64(n), bin, bsh, bout); err != nil {
			t.Fatal(err)
		}
		e1.Record(s)
	}
	dt, err := driver.Elapsed(e0, e1)
	if err != nil || dt <= 0 {
		t.Errorf("Elapsed = %v, %v", dt, err)
	}
	bytes := float64(6 * n * 8)
	t.Logf("Lorenz map over %d trajectories: %v (%.0f GB/s)", n, dt, bytes/dt.Seconds()/1e9)
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	out := make([]float64, nout)
	bout.Read(out)
	got := [][]float64{out[:n], out[n : 2*n], out[2*n:]}
	lorenz.compare(t, "GPU Lorenz", got, tolerance{})
}

// TestGPUErrors: failures are *Errors naming the call and the CUDA error.
func TestGPUErrors(t *testing.T) {
	d := openGPU(t)
	src := kernelgen.NewSource(nil)
	src.Add("GS_GLOBAL void gs_fill(long long n, gs_real* x) {\n#ifdef GS_CUDA\n  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] = (gs_real)i;\n#endif\n}\n")
	mod, _, err := d.Build(src.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Unload()
	var ce *driver.Error
	if _, err := mod.Kernel("no_such_kernel"); !errors.As(err, &ce) || ce.Call != "cuModuleGetFunction" {
		t.Errorf("looking up a missing kernel: %v", err)
	} else {
		t.Logf("missing kernel: %v", err)
	}
	k, err := mod.Kernel("gs_fill")
	if err != nil {
		t.Fatal(err)
	}
	b, err := driver.Alloc[float64](d, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	err = k.Launch(driver.Launch{Grid: driver.Dim{X: 1}, Block: driver.Dim{X: 4096}}, int64(100), b)
	if !errors.As(err, &ce) || ce.Call != "cuLaunchKernel" || ce.Code != 1 || ce.Name != "CUDA_ERROR_INVALID_VALUE" {
		t.Errorf("a block of 4096 threads: want cuLaunchKernel CUDA_ERROR_INVALID_VALUE (1), got %v", err)
	} else {
		t.Logf("a block of 4096 threads: %v", err)
	}
	if err := k.Launch(driver.Linear(100, 64), 100, b); err == nil {
		t.Errorf("an int argument (not int32 or int64) was accepted")
	}
	if err := k.Launch(driver.Linear(100, 64), int64(100), b); err != nil {
		t.Fatal(err)
	}
	x := make([]float64, 100)
	if err := b.Read(x); err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		if v != float64(i) {
			t.Fatalf("gs_fill: element %d is %v", i, v)
		}
	}
	if _, err := d.Load(&driver.Image{Data: []byte("not an image")}); !errors.As(err, &ce) || ce.Call != "cuModuleLoadDataEx" {
		t.Errorf("loading garbage: %v", err)
	}
}
