package cuda

import (
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

func TestCompileOptions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tun  Tuning
		src  int
		want []string
	}{
		{Tuning{}, defaultFastCompileFrom - 1, nil},
		{Tuning{}, defaultFastCompileFrom, []string{"--ptxas-options=-O1"}},
		{Tuning{FastCompile: "-Ofast-compile=mid"}, defaultFastCompileFrom - 1, nil},
		{Tuning{FastCompile: "-Ofast-compile=mid"}, defaultFastCompileFrom, []string{"-Ofast-compile=mid"}},
		{Tuning{FastCompile: " -a  -b ", FastCompileFrom: 100}, 100, []string{"-a", "-b"}},
		{Tuning{FastCompile: "-a", FastCompileFrom: 100}, 99, nil},
		{Tuning{FastCompile: "none", FastCompileFrom: 1}, 1 << 30, nil},
	} {
		if got := c.tun.compileOptions(c.src); !slices.Equal(got, c.want) {
			t.Errorf("%+v, %d bytes: options %q, want %q", c.tun, c.src, got, c.want)
		}
	}
}

// An engine passes Tuning.FastCompile's options to its backend's
// compiler for kernels from FastCompileFrom bytes of source on, and none
// below.
func TestHostEngineFastCompile(t *testing.T) {
	needHost(t)
	t.Parallel()
	c := lorenzCase(4, 1e-6)
	for _, tc := range []struct {
		marker string
		from   int
		passed bool
	}{{"-gs-test-fast-compile-1", 1, true}, {"-gs-test-fast-compile-2", 1 << 40, false}} {
		sv := c.solver(t, tuned(t, "cuda-host", Tuning{FastCompile: "-x " + tc.marker, FastCompileFrom: tc.from}))
		if _, err := sv.Solve(&c.prob); err != nil {
			t.Fatal(err)
		}
		hb := hostF64.be.(*hostBackend)
		hb.mu.Lock()
		passed := false
		for _, cp := range hb.opts {
			if slices.Contains(cp.opts, tc.marker) {
				passed = true
				if !slices.Equal(cp.opts, []string{"-x", tc.marker}) || cp.src < tc.from {
					t.Errorf("a kernel of %d bytes compiled with %q, want [-x %s] from %d bytes", cp.src, cp.opts, tc.marker, tc.from)
				}
			}
		}
		hb.mu.Unlock()
		if passed != tc.passed {
			t.Errorf("FastCompileFrom %d: options passed %t, want %t", tc.from, passed, tc.passed)
		}
	}
}

// TestFastCompileSplit: the default FastCompileFrom keeps the Rodas5P
// gradient kernels of three-state problems at full optimisation (their
// first call is within the cold-start target at -O3) and compiles those
// of Pollution and HIRES, whose ptxas time at -O3 is tens of seconds,
// with FastCompile's options. The LU loops of the latter (d >= 8) stay
// loops (GS_LU_ROLLED), those of the d = 3 problems are unrolled.
func TestFastCompileSplit(t *testing.T) {
	for _, tc := range []struct {
		problem string
		fast    bool
	}{{"lorenz", false}, {"robertson", false}, {"pollution", true}, {"hires", true}} {
		src := kernelSource(t, problemCase(t, tc.problem, ode.Rodas5P, 4), ode.OpGrad, false)
		if fast := (Tuning{}).compileOptions(len(src)) != nil; fast != tc.fast {
			t.Errorf("%s Rodas5P gradient kernel, %d bytes of source: fast compile %t, want %t (FastCompileFrom %d)",
				tc.problem, len(src), fast, tc.fast, defaultFastCompileFrom)
		}
		if rolled := strings.Contains(src, "#define GS_LU_ROLLED 1"); rolled != tc.fast {
			t.Errorf("%s Rodas5P gradient kernel: LU loops kept loops %t, want %t", tc.problem, rolled, tc.fast)
		}
	}
}
