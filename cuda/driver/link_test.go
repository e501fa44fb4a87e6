package driver

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLinkKey: the linked image's cache key changes with any unit's key,
// their order, the architecture and the driver's version, and is the
// same for the same ingredients.
func TestLinkKey(t *testing.T) {
	t.Parallel()
	h90 := Arch{Major: 9, Minor: 0}
	base := linkKey([]string{"a", "b"}, h90, 13000)
	if again := linkKey([]string{"a", "b"}, h90, 13000); again != base {
		t.Errorf("the same ingredients gave keys %s and %s", base, again)
	}
	for _, tc := range []struct {
		name string
		key  string
	}{
		{"a unit changed", linkKey([]string{"a", "c"}, h90, 13000)},
		{"units swapped", linkKey([]string{"b", "a"}, h90, 13000)},
		{"a unit more", linkKey([]string{"a", "b", "c"}, h90, 13000)},
		{"units joined", linkKey([]string{"ab"}, h90, 13000)},
		{"another architecture", linkKey([]string{"a", "b"}, Arch{Major: 8, Minor: 0}, 13000)},
		{"another driver", linkKey([]string{"a", "b"}, h90, 12080)},
	} {
		if tc.key == base {
			t.Errorf("%s: the key did not change", tc.name)
		}
	}
	if got, want := unitName("gs_engine.cu", "kernel"), "gs_engine.kernel.cu"; got != want {
		t.Errorf("unitName = %q, want %q", got, want)
	}
	if got, want := unitName("", "gs_step_0"), "gradsolve.gs_step_0.cu"; got != want {
		t.Errorf("unitName = %q, want %q", got, want)
	}
}

// TestUnitError: a unit's failure names the unit and unwraps to the
// compile's error.
func TestUnitError(t *testing.T) {
	t.Parallel()
	ce := &CompileError{Program: "gs_engine.gs_step_0.cu", Code: 6, Msg: "NVRTC_ERROR_COMPILATION", Log: "error: expected a ;"}
	err := error(&UnitError{Unit: "gs_step_0", Index: 1, Count: 3, Err: ce})
	if s := err.Error(); !strings.HasPrefix(s, "cuda: unit 2 of 3 (gs_step_0): cuda: NVRTC compiling gs_engine.gs_step_0.cu") {
		t.Errorf("error %q does not name the unit first", s)
	}
	var got *CompileError
	if !errors.As(err, &got) || got != ce {
		t.Errorf("errors.As found %v, want the compile's error", got)
	}
}

// linkUnits are two units of one program: the kernel, which calls a
// function defined in the other unit, and that function.
var linkUnits = []Unit{
	{Name: "kernel", Source: `__device__ double gs_twice_plus(double v);
extern "C" __global__ void gs_link_probe(double* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = gs_twice_plus(x[i]);
}
`},
	{Name: "gs_twice_plus", Source: `__device__ __noinline__ double gs_twice_plus(double v) { return 2.0 * v + 1.0; }
`},
}

// TestBuildUnits: two units compiled apart, linked and loaded run as one
// program; a second build reads the linked image from the cache; a unit
// that fails to compile is named in the error, and a program whose
// function is defined nowhere fails at the link. It skips without a GPU.
func TestBuildUnits(t *testing.T) {
	if _, err := loadNVRTC(); err != nil {
		t.Skip(err)
	}
	d := openDevice(t)
	t.Setenv(cacheEnv, t.TempDir())
	set := &CompileSettings{Name: "gs_link_probe.cu"}
	if d.CachedUnits(linkUnits, set) {
		t.Fatal("CachedUnits reports an empty cache's entry")
	}
	for round, wantCached := range []bool{false, true} {
		m, img, err := d.BuildUnits(linkUnits, set)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if img.Cached != wantCached {
			t.Errorf("round %d: Cached = %t, want %t", round, img.Cached, wantCached)
		}
		k, err := m.Kernel("gs_link_probe")
		if err != nil {
			t.Fatal(err)
		}
		const n = 100
		x := make([]float64, n)
		for i := range x {
			x[i] = float64(i) - 0.5
		}
		buf, err := Alloc[float64](d, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := buf.Write(x); err != nil {
			t.Fatal(err)
		}
		if err := k.Launch(Linear(n, 64), buf, int32(n)); err != nil {
			t.Fatal(err)
		}
		got := make([]float64, n)
		if err := buf.Read(got); err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if want := 2*x[i] + 1; v != want || math.IsNaN(v) {
				t.Fatalf("round %d: x[%d] = %v, want %v", round, i, v, want)
			}
		}
		buf.Free()
		m.Unload()
	}
	if !d.CachedUnits(linkUnits, set) {
		t.Error("CachedUnits does not find the linked image written")
	}
	entries, _ := filepath.Glob(filepath.Join(os.Getenv(cacheEnv), "*"))
	if len(entries) != 3 {
		t.Errorf("cache entries %q, want the two units' and the link's", entries)
	}

	bad := []Unit{linkUnits[0], {Name: "gs_broken", Source: "__device__ double gs_twice_plus(double v) { return v +; }\n"}}
	_, _, err := d.BuildUnits(bad, &CompileSettings{NoCache: true})
	var ue *UnitError
	if !errors.As(err, &ue) || ue.Unit != "gs_broken" || !strings.Contains(err.Error(), "gs_broken") {
		t.Errorf("a unit that fails to compile gave %v, want a *UnitError naming gs_broken", err)
	}
	_, _, err = d.BuildUnits(linkUnits[:1], &CompileSettings{NoCache: true})
	if err == nil || !strings.Contains(err.Error(), "cuLink") {
		t.Errorf("a call to a function defined nowhere gave %v, want the linker's error", err)
	}
}

// TestLinkable: Link refuses, before the driver's linker sees them,
// images of different targets or register caps (a kernel's callee in
// another image compiled to use more registers than the kernel may:
// session 42's "entry function 'gs_engine' with max regcount of 128 calls
// function … with regcount of 254") and empty images, and finds the cap
// of images compiled alike, as BuildUnits compiles them (unitSettings:
// the program's options, and -rdc=true, for every unit).
func TestLinkable(t *testing.T) {
	t.Parallel()
	s := &CompileSettings{Name: "gs_engine.cu", Options: []string{"--ptxas-options=-O1", "--maxrregcount=128"}}
	unit := func(name, target string, opts []string) *Image {
		us := unitSettings(Unit{Name: name}, &CompileSettings{Name: s.Name, Options: opts})
		if !slices.Contains(us.Options, rdcOption) || us.Name != unitName(s.Name, name) {
			t.Fatalf("unit %s compiled as %s with %q, want relocatable code", name, us.Name, us.Options)
		}
		return &Image{Data: []byte{1}, Target: target, Options: us.Options}
	}
	alike := []*Image{unit("kernel", "sm_90", s.Options), unit("gs_step_0", "sm_90", s.Options), unit("gs_step_1", "sm_90", s.Options)}
	if regs, err := linkable(alike); err != nil || regs != 128 {
		t.Errorf("units compiled alike: cap %d, %v; want 128, nil", regs, err)
	}
	if regs, err := linkable([]*Image{unit("kernel", "sm_90", nil), unit("gs_step_0", "sm_90", []string{"-O1"})}); err != nil || regs != 0 {
		t.Errorf("units without a cap: cap %d, %v; want 0, nil", regs, err)
	}
	for _, tc := range []struct {
		name  string
		imgs  []*Image
		index int
	}{
		{"a callee without the kernel's cap", []*Image{alike[0], unit("gs_step_0", "sm_90", []string{"--ptxas-options=-O1"})}, 1},
		{"a callee with another cap", []*Image{alike[0], alike[1], unit("gs_step_1", "sm_90", []string{"-maxrregcount=168"})}, 2},
		{"another architecture", []*Image{alike[0], unit("gs_step_0", "sm_80", s.Options)}, 1},
		{"an empty image", []*Image{alike[0], {Target: "sm_90", Options: alike[0].Options}}, 1},
	} {
		_, err := linkable(tc.imgs)
		var le *LinkError
		if !errors.As(err, &le) || le.Index != tc.index {
			t.Errorf("%s: %v, want a *LinkError naming image %d", tc.name, err, tc.index)
		}
	}
	if _, err := linkable(nil); err == nil {
		t.Error("no images linked")
	}
	for _, tc := range []struct {
		opts []string
		want int
	}{{nil, 0}, {[]string{"--maxrregcount=64"}, 64}, {[]string{"-maxrregcount=96", "-O1"}, 96}, {[]string{"--maxrregcount=64", "--maxrregcount=128"}, 128}, {[]string{"--maxrregcount=x"}, 0}} {
		if got := regCap(tc.opts); got != tc.want {
			t.Errorf("regCap(%q) = %d, want %d", tc.opts, got, tc.want)
		}
	}
}

// heavyUnits are a kernel with launch bounds of 7 blocks of 64 threads
// (on an H100 a cap of 128 registers) and, in another unit, a callee
// that keeps 96 doubles live (about 192 registers uncapped): session
// 42's failed link in small. With GS_UNITS defined the kernel has no
// bounds, as a kernel in parts of package cuda.
var heavyUnits = []Unit{
	{Name: "kernel", Source: `__device__ double gs_heavy(const double* x, int n);
#ifdef GS_UNITS
#define GS_BOUNDS
#else
#define GS_BOUNDS __launch_bounds__(64, 7)
#endif
extern "C" __global__ void GS_BOUNDS gs_heavy_probe(const double* x, double* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = gs_heavy(x, 1 + i % 3);
}
`},
	{Name: "gs_heavy", Source: `__device__ __noinline__ double gs_heavy(const double* x, int n) {
  double a[96];
#pragma unroll
  for (int k = 0; k < 96; k++) a[k] = x[k];
  for (int r = 0; r < n; r++) {
#pragma unroll
    for (int k = 0; k < 96; k++) a[k] = a[k] * a[(k + 1) % 96] + 1.0 / (k + 1);
  }
  double s = 0;
#pragma unroll
  for (int k = 0; k < 96; k++) s = s * 0.5 + a[k];
  return s;
}
`},
}

// heavy is gs_heavy in Go, rounded alike (no contraction).
func heavy(x []float64, n int) float64 {
	a := append([]float64(nil), x[:96]...)
	for range n {
		for k := range 96 {
			a[k] = float64(a[k]*a[(k+1)%96]) + 1.0/float64(k+1)
		}
	}
	s := 0.0
	for k := range 96 {
		s = float64(s*0.5) + a[k]
	}
	return s
}

// TestBuildUnitsRegs: a kernel in parts whose units are all compiled with
// one register cap (--maxrregcount=128, the kernel without launch bounds:
// package cuda's units) links, stays within the cap and computes what Go
// computes; the kernel with launch bounds and its callee uncapped is
// built too, and what the linker said logged (session 42: refused). It
// skips without a GPU.
func TestBuildUnitsRegs(t *testing.T) {
	if _, err := loadNVRTC(); err != nil {
		t.Skip(err)
	}
	d := openDevice(t)
	_, _, err := d.BuildUnits(heavyUnits, &CompileSettings{NoCache: true})
	t.Logf("bounded kernel, callee uncapped: %v", err)
	capped := []Unit{{Name: "kernel", Source: "#define GS_UNITS 1\n" + heavyUnits[0].Source}, heavyUnits[1]}
	m, _, err := d.BuildUnits(capped, &CompileSettings{NoCache: true, Options: []string{"--maxrregcount=128"}})
	if err != nil {
		t.Fatalf("units capped alike: %v", err)
	}
	defer m.Unload()
	k, err := m.Kernel("gs_heavy_probe")
	if err != nil {
		t.Fatal(err)
	}
	a, err := k.Attrs()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("units capped at 128: %+v", a)
	if a.Registers > 128 {
		t.Errorf("the linked kernel uses %d registers, its cap 128", a.Registers)
	}
	x := make([]float64, 96)
	for k := range x {
		x[k] = 0.25 + float64(k)/192
	}
	const n = 256
	xb, err := Alloc[float64](d, len(x))
	if err != nil {
		t.Fatal(err)
	}
	defer xb.Free()
	ob, err := Alloc[float64](d, n)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Free()
	if err := xb.Write(x); err != nil {
		t.Fatal(err)
	}
	if err := k.Launch(Linear(n, 64), xb, ob, int32(n)); err != nil {
		t.Fatal(err)
	}
	got := make([]float64, n)
	if err := ob.Read(got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if want := heavy(x, 1+i%3); v != want {
			t.Fatalf("out[%d] = %v, want %v", i, v, want)
		}
	}
}
