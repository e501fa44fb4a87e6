package cuda

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNoDriver(t *testing.T) {
	t.Parallel()
	_, err := openDriver([]string{"libgradsolve-missing-driver.so.1"})
	if !errors.Is(err, ErrNoGPU) {
		t.Fatalf("want an error wrapping ErrNoGPU, got %v", err)
	}
	if want := "no GPU: libgradsolve-missing-driver.so.1 not found"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestErrorMessages(t *testing.T) {
	t.Parallel()
	e := &Error{Call: "cuLaunchKernel", Code: 1, Name: "CUDA_ERROR_INVALID_VALUE", Desc: "invalid argument"}
	if got, want := e.Error(), "cuda: cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1): invalid argument"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if errors.Is(e, ErrNoGPU) {
		t.Errorf("CUDA_ERROR_INVALID_VALUE reported as ErrNoGPU")
	}
	if nd := (&Error{Call: "cuInit", Code: errNoDevice}); !errors.Is(nd, ErrNoGPU) {
		t.Errorf("CUDA_ERROR_NO_DEVICE not reported as ErrNoGPU")
	}
	c := &CompileError{Program: "p.cu", Options: []string{"--fmad=false"}, Code: 6, Msg: "NVRTC_ERROR_COMPILATION", Log: "p.cu(3): error: x\n"}
	if got := c.Error(); !strings.Contains(got, "p.cu(3): error: x") || !strings.Contains(got, "NVRTC_ERROR_COMPILATION (6)") {
		t.Errorf("CompileError %q lacks the log or the code", got)
	}
}

func TestVersionString(t *testing.T) {
	t.Parallel()
	for v, want := range map[int]string{12000: "12.0", 12040: "12.4", 13000: "13.0", 11080: "11.8"} {
		if got := versionString(v); got != want {
			t.Errorf("versionString(%d) = %q, want %q", v, got, want)
		}
	}
}

func TestSortNewestFirst(t *testing.T) {
	t.Parallel()
	got := []string{"/usr/local/cuda-11.8/lib64", "/usr/local/cuda-12.9/lib64", "/usr/local/cuda-13.0/lib64", "/usr/local/cuda-12.10/lib64"}
	sortNewestFirst(got)
	want := []string{"/usr/local/cuda-13.0/lib64", "/usr/local/cuda-12.10/lib64", "/usr/local/cuda-12.9/lib64", "/usr/local/cuda-11.8/lib64"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestNVRTCCandidates(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib64")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc-builtins.so.13.0"} {
		os.WriteFile(filepath.Join(lib, f), nil, 0o644)
	}
	t.Setenv("CUDA_HOME", dir)
	t.Setenv("CUDA_PATH", "")
	c := nvrtcCandidates()
	if !slices.Equal(c[:len(nvrtcSonames)], nvrtcSonames) {
		t.Errorf("candidates do not start with the sonames: %v", c)
	}
	i13 := slices.Index(c, filepath.Join(lib, "libnvrtc.so.13"))
	i12 := slices.Index(c, filepath.Join(lib, "libnvrtc.so.12"))
	if i13 < 0 || i12 < 0 || i13 > i12 {
		t.Errorf("$CUDA_HOME/lib64 libraries missing or out of order: %v", c)
	}
	if slices.ContainsFunc(c, func(s string) bool { return strings.Contains(s, "builtins") }) {
		t.Errorf("the builtins library is a candidate: %v", c)
	}
	if !slices.Contains(c, "/usr/local/cuda/lib64/libnvrtc.so") {
		t.Errorf("/usr/local/cuda/lib64 not searched: %v", c)
	}
}

func TestCache(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "cache")
	img := &Image{Data: []byte("cubin bytes"), Target: "sm_90"}
	img.Key = cacheKey("src", "p.cu", []string{"-a"}, "sm_90", 13, 0)
	if _, ok := cacheRead(dir, "p.cu", img); ok {
		t.Fatalf("hit in an empty cache")
	}
	cacheWrite(dir, "p.cu", img)
	data, ok := cacheRead(dir, "p.cu", img)
	if !ok || !bytes.Equal(data, img.Data) {
		t.Fatalf("cache read back %q, %v", data, ok)
	}
	if name := filepath.Base(cacheFile(dir, "p.cu", img)); name != "gs_p_"+img.Key[:16]+".sm_90.cubin" {
		t.Errorf("cache file named %s", name)
	}
	// Every ingredient changes the key.
	base := img.Key
	for _, k := range []string{
		cacheKey("src2", "p.cu", []string{"-a"}, "sm_90", 13, 0),
		cacheKey("src", "q.cu", []string{"-a"}, "sm_90", 13, 0),
		cacheKey("src", "p.cu", []string{"-b"}, "sm_90", 13, 0),
		cacheKey("src", "p.cu", []string{"-a"}, "sm_80", 13, 0),
		cacheKey("src", "p.cu", []string{"-a"}, "sm_90", 12, 0),
		cacheKey("src", "p.cu", []string{"-a"}, "sm_90", 13, 1),
	} {
		if k == base {
			t.Errorf("key unchanged by an ingredient")
		}
	}
	// A cache that cannot be written is no error.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	cacheWrite(filepath.Join(file, "sub"), "p.cu", img)
}

func TestCacheDir(t *testing.T) {
	t.Setenv(cacheEnv, "/some/where")
	if got := cacheDir(); got != "/some/where" {
		t.Errorf("cacheDir with %s set = %q", cacheEnv, got)
	}
	t.Setenv(cacheEnv, "off")
	if got := cacheDir(); got != "" {
		t.Errorf("cacheDir with %s=off = %q", cacheEnv, got)
	}
	t.Setenv(cacheEnv, "")
	if got := cacheDir(); got != "" && !strings.HasSuffix(got, filepath.Join("gradsolve", "cuda")) {
		t.Errorf("default cacheDir = %q", got)
	}
}

func TestSpreadBlock(t *testing.T) {
	for _, c := range []struct{ threads, block, sms, want int }{
		{4096, 128, 132, 32},     // 128 blocks of 32 instead of 32 of 128
		{65536, 128, 132, 128},   // 512 blocks: every multiprocessor has one
		{16896, 128, 132, 128},   // exactly one block of 128 per multiprocessor
		{16000, 128, 132, 128},   // 125 blocks of 128 → 121.2 per SM → 128
		{8000, 128, 132, 64},     // 61 per multiprocessor, rounded up to a warp
		{10, 128, 132, 32},       // a warp at least
		{4096, 256, 0, 256},      // unknown multiprocessor count
		{4096, 64, 132, 32},      // never more than block
		{1 << 20, 128, 132, 128}, // large grids unchanged
	} {
		got := spreadBlock(c.threads, c.block, c.sms)
		if got != c.want {
			t.Errorf("spreadBlock(%d, %d, %d) = %d, want %d", c.threads, c.block, c.sms, got, c.want)
		}
		if c.sms > 0 && got < c.block && (c.threads+got-1)/got > c.sms && got > 32 {
			t.Errorf("spreadBlock(%d, %d, %d) = %d gives more blocks than multiprocessors", c.threads, c.block, c.sms, got)
		}
	}
}

func TestLaunchShape(t *testing.T) {
	grad, tiles := variant{grad: true, adaptive: true}, variant{grad: true, tiles: true}
	const scratch = 32 * xposeRow * 8 // one warp's, float64
	for _, c := range []struct {
		name             string
		n, block, sms    int
		v                variant
		ns               int
		prec             Precision
		wantBlock, wantB int
	}{
		// 1,218 weights: a 19,488-byte accumulator and 8,448 bytes per
		// warp fit 48 KiB with 3 warps, so a block of 128 halves to 64.
		{"neural 65536", 65536, 128, 132, grad, 1218, Float64, 64, 2*1218*8 + 2*scratch},
		{"neural 4096", 4096, 128, 132, grad, 1218, Float64, 32, 2*1218*8 + scratch},
		{"float32", 65536, 128, 132, grad, 1218, Float32, 128, 2*1218*4 + 4*scratch/2},
		// No shared parameters: no scratch, no accumulator.
		{"lorenz", 1 << 20, 128, 132, grad, 0, Float64, 128, 0},
		// Tiles sum without atomics: no scratch.
		{"tiles", 65536, 128, 132, tiles, 1218, Float64, 128, 0},
		// A large network: the accumulator is global, the scratch alone.
		{"wide", 65536, 256, 132, grad, 5000, Float64, 128, 4 * scratch},
		{"forward", 65536, 128, 132, variant{adaptive: true}, 1218, Float64, 128, 0},
	} {
		b, sh := launchShape(c.n, c.block, c.sms, c.v, c.ns, c.prec)
		if b != c.wantBlock || sh != c.wantB {
			t.Errorf("%s: launchShape = %d threads, %d bytes; want %d, %d", c.name, b, sh, c.wantBlock, c.wantB)
		}
		if sh > maxShared {
			t.Errorf("%s: %d bytes of shared memory exceed %d", c.name, sh, maxShared)
		}
	}
}
