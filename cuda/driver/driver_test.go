package driver

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	if _, ok, bad := cacheRead(dir, "p.cu", img); ok || bad != nil {
		t.Fatalf("hit in an empty cache (%v)", bad)
	}
	cacheWrite(dir, "p.cu", img)
	data, ok, bad := cacheRead(dir, "p.cu", img)
	if !ok || bad != nil || !bytes.Equal(data, img.Data) {
		t.Fatalf("cache read back %q, %v, %v", data, ok, bad)
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

// TestCacheDamage: a cache entry that is truncated, has a byte flipped or
// was written for another key is not read: cacheRead reports it, removes
// it, and the next write gives a good entry again.
func TestCacheDamage(t *testing.T) {
	t.Parallel()
	mk := func(src string) *Image {
		img := &Image{Data: []byte("cubin bytes of " + src), Target: "sm_90"}
		img.Key = cacheKey(src, "p.cu", nil, "sm_90", 13, 0)
		return img
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string, img *Image)
	}{
		{"truncated", func(t *testing.T, dir string, img *Image) {
			path := cacheFile(dir, "p.cu", img)
			raw, _ := os.ReadFile(path)
			os.WriteFile(path, raw[:len(raw)-3], 0o644)
		}},
		{"truncated header", func(t *testing.T, dir string, img *Image) {
			path := cacheFile(dir, "p.cu", img)
			raw, _ := os.ReadFile(path)
			os.WriteFile(path, raw[:20], 0o644)
		}},
		{"flipped byte", func(t *testing.T, dir string, img *Image) {
			path := cacheFile(dir, "p.cu", img)
			raw, _ := os.ReadFile(path)
			raw[len(raw)-5] ^= 0x20
			os.WriteFile(path, raw, 0o644)
		}},
		{"another key", func(t *testing.T, dir string, img *Image) {
			other := mk("other src")
			cacheWrite(dir, "p.cu", other)
			raw, _ := os.ReadFile(cacheFile(dir, "p.cu", other))
			os.WriteFile(cacheFile(dir, "p.cu", img), raw, 0o644)
		}},
		{"raw data (format 1)", func(t *testing.T, dir string, img *Image) {
			os.WriteFile(cacheFile(dir, "p.cu", img), img.Data, 0o644)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			img := mk("src")
			cacheWrite(dir, "p.cu", img)
			c.damage(t, dir, img)
			data, ok, bad := cacheRead(dir, "p.cu", img)
			if ok || !errors.Is(bad, errCacheEntry) {
				t.Fatalf("damaged entry read: %q, ok %v, error %v", data, ok, bad)
			}
			if _, err := os.Stat(cacheFile(dir, "p.cu", img)); !os.IsNotExist(err) {
				t.Errorf("damaged entry left in place (%v)", err)
			}
			cacheWrite(dir, "p.cu", img)
			if data, ok, bad := cacheRead(dir, "p.cu", img); !ok || bad != nil || !bytes.Equal(data, img.Data) {
				t.Errorf("rewritten entry: %q, ok %v, error %v", data, ok, bad)
			}
		})
	}
}

// TestCacheConcurrent: processes sharing a folder write entries through
// temporary files renamed into place, so a reader sees a whole entry or
// none, and no temporary file is left.
func TestCacheConcurrent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	img := &Image{Data: bytes.Repeat([]byte("0123456789abcdef"), 1<<14), Target: "sm_90"}
	img.Key = cacheKey("big", "p.cu", nil, "sm_90", 13, 0)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 20 {
				cacheWrite(dir, "p.cu", img)
			}
		}()
		go func() {
			defer wg.Done()
			for range 20 {
				if _, _, bad := cacheRead(dir, "p.cu", img); bad != nil {
					t.Errorf("reader saw %v", bad)
				}
			}
		}()
	}
	wg.Wait()
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("cache folder holds %v, want the entry alone", names)
	}
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

// -minimal is passed to NVRTC 12.4 and later and dropped before.
func TestVersionOptions(t *testing.T) {
	for _, c := range []struct {
		opts         []string
		major, minor int
		want         []string
	}{
		{[]string{"-a", "-minimal", "-b"}, 12, 4, []string{"-a", "-minimal", "-b"}},
		{[]string{"-a", "--minimal"}, 13, 0, []string{"-a", "--minimal"}},
		{[]string{"-a", "-minimal", "-b", "--minimal"}, 12, 3, []string{"-a", "-b"}},
		{[]string{"-minimal"}, 11, 8, nil},
		{[]string{"-a"}, 11, 2, []string{"-a"}},
		{nil, 12, 0, nil},
	} {
		if got := versionOptions(c.opts, c.major, c.minor); !slices.Equal(got, c.want) {
			t.Errorf("NVRTC %d.%d, %q: %q, want %q", c.major, c.minor, c.opts, got, c.want)
		}
	}
}

// TestCached checks Cached against the disk cache: false before a
// Compile, true after it, false with NoCache or the cache off, and false
// without NVRTC (then the rest is skipped).
func TestCached(t *testing.T) {
	t.Setenv(cacheEnv, filepath.Join(t.TempDir(), "cache"))
	const src = "extern \"C\" __global__ void gs_cached(double* x) { x[threadIdx.x] *= 2.0; }\n"
	arch := Arch{Major: 8, Minor: 0}
	set := &CompileSettings{Name: "cached.cu"}
	if Cached(src, arch, set) {
		t.Fatal("cached before its compile")
	}
	if err := LoadNVRTC(); err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	if _, err := Compile(src, arch, set); err != nil {
		t.Fatal(err)
	}
	if !Cached(src, arch, set) {
		t.Error("not cached after its compile")
	}
	if Cached(src+" ", arch, set) || Cached(src, arch, &CompileSettings{Name: "cached.cu", Options: []string{"-lineinfo"}}) {
		t.Error("another source or options cached")
	}
	if Cached(src, arch, &CompileSettings{Name: "cached.cu", NoCache: true}) {
		t.Error("cached with NoCache")
	}
	t.Setenv(cacheEnv, "off")
	if Cached(src, arch, set) {
		t.Error("cached with the cache off")
	}
}

// TestOpenDriverNamesEachLibrary checks that the error of a driver that
// does not load names every library it tried, with the loader's reason,
// also where the loader gives none (a second try in one process).
func TestOpenDriverNamesEachLibrary(t *testing.T) {
	names := []string{"libgradsolve-missing-a.so.1", "libgradsolve-missing-b.so"}
	for range 2 {
		_, err := openDriver(names)
		if !errors.Is(err, ErrNoGPU) {
			t.Fatalf("openDriver of missing libraries: %v, want ErrNoGPU", err)
		}
		for _, n := range names {
			if !strings.Contains(err.Error(), n+": ") {
				t.Errorf("%q does not say why %s did not open", err, n)
			}
		}
		if strings.Contains(err.Error(), "(; ") || strings.Contains(err.Error(), "; ;") {
			t.Errorf("%q: an empty reason", err)
		}
	}
	for _, c := range []struct {
		msg, want string
	}{
		{"", "libx.so: cannot open shared object file"},
		{"libx.so: cannot open shared object file: No such file or directory", "libx.so: cannot open shared object file: No such file or directory"},
		{"undefined symbol: cuInit", "libx.so: undefined symbol: cuInit"},
	} {
		if got := dlopenError("libx.so", errors.New(c.msg)); got != c.want {
			t.Errorf("dlopenError(%q) = %q, want %q", c.msg, got, c.want)
		}
	}
}
