package cuda

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
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
		{Tuning{Minimal: true}, 1, []string{"-minimal"}},
		{Tuning{Minimal: true}, defaultFastCompileFrom, []string{"-minimal", "--ptxas-options=-O1"}},
		{Tuning{Minimal: true, FastCompile: "none"}, 1 << 30, []string{"-minimal"}},
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

// splitSource returns the source of the kernel that runs c's op in the
// thread layout with Tuning{SplitFrom: from}'s kernelgen.Config.SplitFrom.
func splitSource(t *testing.T, c engineCase, op ode.Op, from int) string {
	t.Helper()
	return kernelSourceWith(t, c, op, func(v *kernelgen.Config) { v.SplitFrom = Tuning{SplitFrom: from}.splitFrom() })
}

// stepQual matches the first line of a program's function in a split
// kernel (GS_STEP) or not (GS_FUNC).
var stepQual = regexp.MustCompile(`(?m)^GS_(STEP|FUNC) (gs_\w+)_out `)

// TestSplitKernels: Tuning.SplitFrom = 256 KiB (proposedSplitFrom)
// leaves the kernels of
// Lorenz (Tsit5, Vern7, Rodas5P), Robertson and Kepler (Rodas5P) byte
// for byte as they are without it, and compiles the large step programs
// of Pollution's and HIRES's Rodas5P gradient kernels and a small
// network's stability probe as functions of their own (GS_STEP): the source is the unsplit one but
// for their qualifiers and GS_STEP's definition.
func TestSplitKernels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c     engineCase
		op    ode.Op
		steps []string // the GS_STEP functions, by the start of their names
	}{
		{problemCase(t, "lorenz", ode.Tsit5, 4), ode.OpGrad, nil},
		{problemCase(t, "lorenz", ode.Vern7, 4), ode.OpGrad, nil},
		{problemCase(t, "lorenz", ode.Rodas5P, 4), ode.OpGrad, nil},
		{problemCase(t, "lorenz", ode.Rodas5P, 4), ode.OpRecord, nil},
		{problemCase(t, "robertson", ode.Rodas5P, 4), ode.OpGrad, nil},
		{problemCase(t, "kepler", ode.Rodas5P, 4), ode.OpGrad, nil},
		// The network's record runs the stability probe (two JVPs of the
		// network: session 53), a program past 256 KiB of its own.
		{mlpCase(4, []int{2, 32, 32, 2}), ode.OpGrad, []string{"gs_mlp_probe"}},
		{problemCase(t, "pollution", ode.Rodas5P, 4), ode.OpRecord, nil},
		{problemCase(t, "pollution", ode.Rodas5P, 4), ode.OpGrad, []string{"gs_pollution_Rodas5P_trial_dense", "gs_pollution_Rodas5P_dense_step_rev"}},
		{problemCase(t, "hires", ode.Rodas5P, 4), ode.OpGrad, []string{"gs_hires_Rodas5P_trial_dense_", "gs_hires_Rodas5P_replay_rev", "gs_hires_Rodas5P_dense_step_rev"}},
	} {
		name := fmt.Sprintf("%s %v", tc.c.name, tc.op)
		whole, split := splitSource(t, tc.c, tc.op, -1), splitSource(t, tc.c, tc.op, proposedSplitFrom)
		if tc.steps == nil {
			if split != whole {
				t.Errorf("%s: SplitFrom 256 KiB changed the kernel's source (%d bytes, %d unsplit)", name, len(split), len(whole))
			}
			continue
		}
		var steps []string
		for _, m := range stepQual.FindAllStringSubmatch(split, -1) {
			if m[1] == "STEP" {
				steps = append(steps, m[2])
			}
		}
		if len(steps) != len(tc.steps) {
			t.Errorf("%s: GS_STEP functions %q, want %d: %q", name, steps, len(tc.steps), tc.steps)
		} else {
			for k, s := range steps {
				if !strings.HasPrefix(s, tc.steps[k]) {
					t.Errorf("%s: GS_STEP function %d is %s, want %s…", name, k, s, tc.steps[k])
				}
			}
		}
		// Without GS_STEP's definition and with GS_FUNC for GS_STEP, the
		// split source is the unsplit one.
		def := regexp.MustCompile(`(?s)\n// GS_STEP qualifies .*?#define GS_STEP __device__ __noinline__\n.*?#endif\n#endif\n`)
		if n := len(def.FindAllString(split, -1)); n != 1 {
			t.Fatalf("%s: %d definitions of GS_STEP, want 1", name, n)
		}
		back := strings.ReplaceAll(def.ReplaceAllString(split, ""), "\nGS_STEP gs_", "\nGS_FUNC gs_")
		if back != whole {
			t.Errorf("%s: the split source differs from the unsplit one beyond its qualifiers", name)
		}
	}
}

// TestHostEngineSplit: the split kernels' results are the unsplit ones'
// bit for bit (solve, gradient with its record, gradient on a given
// mesh, one save time) on Pollution and HIRES with Rodas5P, whose
// gradient kernels split at 256 KiB (TestSplitKernels);
// g++ compiles their GS_STEP functions not inlined, as the device does.
func TestHostEngineSplit(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("compiles Rodas5P kernels of d = 8 and 20; skipped with -short")
	}
	for _, name := range []string{"pollution", "hires"} {
		c := problemCase(t, name, ode.Rodas5P, 3)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// Split kernels are of the thread layout: Pollution (d = 20)
			// runs Rodas5P wide unless NoWideStiff.
			sameRuns(t, c, c.solver(t, tuned(t, "cuda-host", Tuning{SplitFrom: proposedSplitFrom, NoWideStiff: true})), c.solver(t, tuned(t, "cuda-host", Tuning{SplitFrom: -1, NoWideStiff: true})))
			// Both forms of the gradient kernel were compiled.
			split, whole := len(splitSource(t, c, ode.OpGrad, proposedSplitFrom)), len(splitSource(t, c, ode.OpGrad, -1))
			hb := hostF64.be.(*hostBackend)
			hb.mu.Lock()
			var sizes []int
			for _, cp := range hb.opts {
				sizes = append(sizes, cp.src)
			}
			hb.mu.Unlock()
			if split == whole || !slices.Contains(sizes, split) || !slices.Contains(sizes, whole) {
				t.Errorf("compiled sources of %v bytes, want the split gradient kernel's %d and the unsplit one's %d", sizes, split, whole)
			}
		})
	}
}
