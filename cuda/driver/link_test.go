package driver

import (
	"errors"
	"math"
	"os"
	"path/filepath"
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
	d, err := Open(0)
	if errors.Is(err, ErrNoGPU) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
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
	_, _, err = d.BuildUnits(bad, &CompileSettings{NoCache: true})
	var ue *UnitError
	if !errors.As(err, &ue) || ue.Unit != "gs_broken" || !strings.Contains(err.Error(), "gs_broken") {
		t.Errorf("a unit that fails to compile gave %v, want a *UnitError naming gs_broken", err)
	}
	_, _, err = d.BuildUnits(linkUnits[:1], &CompileSettings{NoCache: true})
	if err == nil || !strings.Contains(err.Error(), "cuLink") {
		t.Errorf("a call to a function defined nowhere gave %v, want the linker's error", err)
	}
}
