package kernelgen

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen/kerneltest"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// widePlan returns the plan of Lorenz-96 with d components and method m.
func widePlan(t *testing.T, d int, m ode.Method) *ode.Plan {
	t.Helper()
	return planCase{field: problems.Lorenz96(d).Field, m: m}.plan(t)
}

// planCase is a field and a method whose plan's wide functions a test
// reads, by name.
type planCase struct {
	name  string
	field ode.Field
	m     ode.Method
}

// plan returns the plan of c's field with c's method.
func (c planCase) plan(t *testing.T) *ode.Plan {
	t.Helper()
	sv, err := ode.NewSolver(c.field, &ode.Settings{Method: c.m})
	if err != nil {
		t.Fatal(err)
	}
	return sv.Plan()
}

// stepPrograms returns the step programs of c's plan.
func (c planCase) stepPrograms(t *testing.T) *StepPrograms {
	t.Helper()
	sp, err := NewStepPrograms(c.plan(t))
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// wideJob is an ensemble the kernel harness runs: n trajectories of
// Lorenz-96 with forcings F, from y0 = F + perturbations, to t1.
type wideJob struct {
	n          int
	y0, p, t1  []float64 // [D][n], [NP][n], [n]
	rtol, atol float64
	maxSteps   int
}

// wideOut is what a kernel wrote: final states [D][n], times, accepted
// and rejected steps and statuses.
type wideOut struct {
	y             []float64
	t             []float64
	acc, rej, sts []int
}

// runKernel compiles kernel source src with a main that runs job j (on
// a simulated warp with sim) and returns what it wrote.
func runKernel(t *testing.T, src string, d, np int, j wideJob, sim bool) wideOut {
	t.Helper()
	cc := kerneltest.GXX(t)
	vec := func(xs []float64) string {
		s := make([]string, len(xs))
		for k, x := range xs {
			s[k] = strconv.FormatFloat(x, 'g', -1, 64)
		}
		return "{" + strings.Join(s, ", ") + "}"
	}
	sh := []float64{j.rtol}
	for c := 0; c < d; c++ {
		sh = append(sh, j.atol)
	}
	sh = append(sh, float64(j.maxSteps))
	n := j.n
	var m strings.Builder
	fmt.Fprintf(&m, `
#include <stdio.h>
static gs_real h_sh[] = %s;
static gs_real h_y0[] = %s;
static gs_real h_p[] = %s;
static gs_real h_t1[] = %s;
static gs_real h_y[%d], h_t[%d], h_lasth[%d];
static int h_status[%d], h_acc[%d], h_rej[%d], h_flags[%d];
int main() {
  gs_args a{};
  a.n = %d; a.first = 0; a.end = a.n; a.t0 = 0;
  a.sh = h_sh; a.t1 = h_t1; a.y0 = h_y0; a.p = h_p;
  a.y = h_y; a.t = h_t; a.lasth = h_lasth; a.status = h_status; a.acc = h_acc; a.rej = h_rej; a.flags = h_flags;
`, vec(sh), vec(j.y0), vec(j.p), vec(j.t1), d*n, n, n, n, n, n, n, n)
	if sim {
		m.WriteString(`  std::barrier<> bar(32);
  gs_sim_bar = &bar;
  std::vector<std::thread> th;
  for (int lane = 0; lane < 32; lane++) th.emplace_back([&, lane] { threadIdx.x = lane; gs_engine(a); });
  for (auto& x : th) x.join();
`)
	} else {
		m.WriteString("  gs_engine(a);\n")
	}
	fmt.Fprintf(&m, `  for (int k = 0; k < %d; k++) printf("y %%a\n", h_y[k]);
  for (int i = 0; i < %d; i++) printf("r %%a %%d %%d %%d\n", h_t[i], h_acc[i], h_rej[i], h_status[i]);
  return 0;
}
`, d*n, n)
	text := src + m.String()
	flags := []string{"-std=c++17", "-O1"}
	if sim {
		head, body, _ := strings.Cut(src, "#ifndef GS_PRELUDE_CUH")
		text = head + kerneltest.WarpSim + "#ifndef GS_PRELUDE_CUH" + body + m.String()
		flags = []string{"-std=c++20", "-O1", "-pthread"}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "k.cpp")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "k")
	if out, err := exec.Command(cc, append(flags, "-ffp-contract=off", "-fno-fast-math", "-w", "-o", exe, file)...).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, kerneltest.FirstLines(string(out), 30))
	}
	out, err := exec.Command(exe).Output()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	var o wideOut
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch f[0] {
		case "y":
			x, _ := strconv.ParseFloat(f[1], 64)
			o.y = append(o.y, x)
		case "r":
			x, _ := strconv.ParseFloat(f[1], 64)
			a, _ := strconv.Atoi(f[2])
			r, _ := strconv.Atoi(f[3])
			s, _ := strconv.Atoi(f[4])
			o.t, o.acc, o.rej, o.sts = append(o.t, x), append(o.acc, a), append(o.rej, r), append(o.sts, s)
		}
	}
	if len(o.y) != d*n || len(o.t) != n {
		t.Fatalf("the harness printed %d states and %d trajectories, want %d and %d", len(o.y), len(o.t), d*n, n)
	}
	return o
}

// lorenzJob returns n trajectories of Lorenz-96 (d components) with
// forcings spread over [7, 9] and perturbed starts, to t1 = 0.5 at rtol
// 1e-8 (18 to 27 steps; Lorenz-96 is chaotic: by t1 = 1 the two layouts'
// rounding has grown to 1e-12).
func lorenzJob(d, n int) wideJob {
	r := rand.New(rand.NewPCG(35, uint64(d)))
	j := wideJob{n: n, y0: make([]float64, d*n), p: make([]float64, n), t1: make([]float64, n), rtol: 1e-8, atol: 1e-9, maxSteps: 100000}
	for i := 0; i < n; i++ {
		f := 7 + 2*float64(i)/float64(max(n-1, 1))
		j.p[i] = f
		j.t1[i] = 0.5
		for c := 0; c < d; c++ {
			j.y0[c*n+i] = f + 0.01*r.NormFloat64()
		}
	}
	return j
}

// TestWideSolve runs the forward solve of Lorenz-96 (d = 64, 70, 256)
// with Tsit5 in the wide layout on a simulated warp (GS_WARP_SIM) and in
// the thread layout, with the same trajectories of different forcings:
// the same accepted and rejected steps and statuses, and final states
// and times within 1e-12 relative (the wide layout sums the error norm
// across the lanes in another order). d = 70 is not a multiple of 32.
func TestWideSolve(t *testing.T) {
	t.Parallel()
	kerneltest.GXX(t)
	for _, d := range []int{64, 70, 256} {
		t.Run(fmt.Sprintf("lorenz96-%d", d), func(t *testing.T) {
			t.Parallel()
			pl := widePlan(t, d, ode.Tsit5)
			sp, err := NewStepPrograms(pl)
			if err != nil {
				t.Fatal(err)
			}
			v := Config{Adaptive: true}
			thread, _, err := KernelSource(sp, v, nil, Float64)
			if err != nil {
				t.Fatal(err)
			}
			v.Wide = true
			wide, _, err := KernelSource(sp, v, nil, Float64)
			if err != nil {
				t.Fatal(err)
			}
			j := lorenzJob(d, 5)
			want := runKernel(t, thread, d, pl.Params, j, false)
			got := runKernel(t, wide, d, pl.Params, j, true)
			for i := 0; i < j.n; i++ {
				if got.acc[i] != want.acc[i] || got.rej[i] != want.rej[i] || got.sts[i] != want.sts[i] {
					t.Errorf("trajectory %d: wide %d accepted, %d rejected, status %d; thread %d, %d, %d", i, got.acc[i], got.rej[i], got.sts[i], want.acc[i], want.rej[i], want.sts[i])
				}
				if want.sts[i] != 0 || want.acc[i] < 10 {
					t.Errorf("trajectory %d: thread layout status %d after %d steps: not a test", i, want.sts[i], want.acc[i])
				}
				if !close12(got.t[i], want.t[i]) {
					t.Errorf("trajectory %d: wide t = %v, thread %v", i, got.t[i], want.t[i])
				}
			}
			worst := 0.0
			for k := range want.y {
				worst = max(worst, math.Abs(got.y[k]-want.y[k])/math.Max(math.Abs(want.y[k]), 1))
			}
			t.Logf("steps %v, largest relative difference of the final states %.3g", want.acc, worst)
			bad := 0
			for k := range want.y {
				if !close12(got.y[k], want.y[k]) {
					if bad++; bad <= 5 {
						t.Errorf("y[%d][%d]: wide %v, thread %v", k/j.n, k%j.n, got.y[k], want.y[k])
					}
				}
			}
			if bad > 5 {
				t.Errorf("%d states differ", bad)
			}
		})
	}
}

// close12 reports whether x is within 1e-12 of y relative to max(|y|, 1).
func close12(x, y float64) bool { return math.Abs(x-y) <= 1e-12*math.Max(math.Abs(y), 1) }

// TestWideSource checks the form of a wide kernel (Lorenz-96, Tsit5, d =
// 64 and 256): the component loops split over the lanes, the error norm
// summed across the lanes, no sequential loop left in the trial, no
// function taking the state as scalars, and a warp's shared memory as
// the layout's formula states: (3+2f)d + np + 2·NumState + 6 reals for
// the programs' inputs and outputs (f = 1 with FSAL), plus the scratch,
// whose arrays the test bounds by the stages' count; a block of
// WideWarps warps within an H100's 227 KiB at d = 256.
func TestWideSource(t *testing.T) {
	t.Parallel()
	for _, d := range []int{64, 256} {
		pl := widePlan(t, d, ode.Tsit5)
		sp, err := NewStepPrograms(pl)
		if err != nil {
			t.Fatal(err)
		}
		src, _, err := KernelSource(sp, Config{Adaptive: true, Wide: true}, nil, Float64)
		if err != nil {
			t.Fatal(err)
		}
		_, body, _ := strings.Cut(src, "#endif  // GS_PRELUDE_CUH")
		split := strings.Count(body, "for (int gs_c = gs_lane; gs_c < ")
		seq := strings.Count(body, "sequential in every lane")
		if split < 20 || seq != 0 {
			t.Errorf("d = %d: %d loops split over the lanes, %d sequential; want ≥ 20 and 0", d, split, seq)
		}
		if n := strings.Count(body, "gs_wide_sums("); n < 4 {
			t.Errorf("d = %d: %d sums across the lanes, want the error norms' (≥ 4)", d, n)
		}
		if regexp.MustCompile(`gs_real a\d+[,)]`).MatchString(body) {
			t.Errorf("d = %d: a function takes scalar per-trajectory arguments", d)
		}
		if strings.Contains(body, "gs_real y[GS_D]") || strings.Contains(body, "gs_real yn[GS_D]") {
			t.Errorf("d = %d: the driver keeps d-long arrays per thread", d)
		}
		per, err := WideSharedPerWarp(pl, false, false)
		if err != nil {
			t.Fatal(err)
		}
		f := B2i(pl.FSAL)
		fixed := 8 * ((3+2*f)*d + pl.Params + 2*ode.NumState + 6)
		scratch := per - fixed
		lenDef := regexp.MustCompile(`#define GS_W_LEN (\d+)`).FindStringSubmatch(src)
		if lenDef == nil || lenDef[1] != strconv.Itoa(per/8) {
			t.Errorf("d = %d: the kernel's GS_W_LEN %v, WideSharedPerWarp %d reals", d, lenDef, per/8)
		}
		// Tsit5's trial holds its six later stages' inputs and fields, y⁺
		// and err: at most 16 d-long arrays live at once.
		if scratch <= 0 || scratch > 8*16*d {
			t.Errorf("d = %d: scratch %d bytes, want in (0, %d]", d, scratch, 8*16*d)
		}
		block := WideWarps * per
		t.Logf("d = %d: %d bytes of source, %d bytes of shared memory per warp (%d scratch), %d per block of %d warps",
			d, len(src), per, scratch, block, WideWarps)
		if block > 227<<10 {
			t.Errorf("d = %d: %d bytes of shared memory per block, more than an H100's 227 KiB", d, block)
		}
	}
}

// TestWideRefuses checks that the wide layout refuses what it does not
// run (save times without the continuous extension, a given mesh, tile
// sums, a Rosenbrock method, float32) and runs a solve, a record, a loss
// and a gradient with the record, with interpolated save times or none.
func TestWideRefuses(t *testing.T) {
	t.Parallel()
	pl := widePlan(t, 64, ode.Tsit5)
	sv, err := ode.NewSolver(problems.Lorenz96(64).Field, &ode.Settings{Method: ode.Tsit5, Saves: ode.SaveStep})
	if err != nil {
		t.Fatal(err)
	}
	stepped := sv.Plan()
	grad := Config{Adaptive: true, Grad: true, Store: true, MeshOut: true}
	saves := grad
	saves.Saves = 3
	for _, c := range []struct {
		v    Config
		pl   *ode.Plan
		prec Precision
		want bool
	}{
		{Config{Adaptive: true}, pl, Float64, true},
		{Config{Adaptive: true, MeshOut: true}, pl, Float64, true},
		{Config{Adaptive: true, MeshOut: true, Loss: true}, pl, Float64, true},
		{grad, pl, Float64, true},
		{Config{Adaptive: true, Saves: 3}, pl, Float64, true},
		{saves, pl, Float64, true},
		{saves, stepped, Float64, false},
		{Config{Adaptive: true, Saves: 3}, stepped, Float64, false},
		{grad, stepped, Float64, true},
		{Config{Adaptive: true, Grad: true, Store: true, MeshOut: true, TileSums: true}, pl, Float64, false},
		{Config{Adaptive: false}, pl, Float64, false},
		{Config{Adaptive: false, Grad: true, Store: true}, pl, Float64, false},
		{Config{Adaptive: true}, pl, Float32, false},
		{grad, widePlan(t, 64, ode.Rodas5P), Float64, true},
		{saves, widePlan(t, 64, ode.Rodas5P), Float64, true},
	} {
		if got := WideAllowed(c.v, c.pl, c.prec); got != c.want {
			t.Errorf("%s %s %v: allowed %v, want %v", c.pl.Method, c.v.Key(), c.prec, got, c.want)
		}
	}
}

// TestWideLaunch checks the wide layout's blocks: WideWarps warps, or
// one where that puts more warps on a multiprocessor of an H100's 227 +
// 1 KiB or a block of two would not fit.
func TestWideLaunch(t *testing.T) {
	t.Parallel()
	const h100 = 227 << 10
	for _, c := range []struct {
		per, limit, block int
	}{
		{8512, h100, 64},      // solve, d = 64: 26 warps either way
		{33088, h100, 64},     // solve, d = 256: 6 either way
		{61488, h100, 32},     // gradient, d = 256: 3 warps against 2
		{100000, h100, 64},    // 2 either way
		{130000, h100, 32},    // a block of two does not fit
		{61488, 0, 64},        // no limit (the host)
		{300000, h100, 32},    // nothing fits: one warp (the launch fails)
		{15408, 48 << 10, 32}, // 48 + 1 KiB: three blocks of one against one of two
	} {
		threads, block, shmem := WideLaunch(100, LaneWidth, c.per, c.limit)
		if threads != 3200 || block != c.block || shmem != block/32*c.per {
			t.Errorf("per warp %d, limit %d: %d threads, blocks of %d, %d bytes; want 3200, %d, %d", c.per, c.limit, threads, block, shmem, c.block, c.block/32*c.per)
		}
	}
}

// TestRotation checks rotation: a gather's indices b + (c + k) mod n
// (Lorenz-96's neighbours, a plain run) give b and k; any other gather
// (a stride, a repeat, a gap, an index past the rotation, a name) none.
func TestRotation(t *testing.T) {
	for _, x := range []struct {
		idx  string
		b, k int
		ok   bool
	}{
		{"3 4 5 6 7 2", 2, 1, true},
		{"6 7 2 3 4 5", 2, 4, true},
		{"0 1 2 3", 0, 0, true},
		{"9", 9, 0, true},
		{"1 2 3 0", 0, 1, true},
		{"0 2 4 6", 0, 0, false},
		{"1 1 1 1", 0, 0, false},
		{"3 4 5 7", 0, 0, false},
		{"3 2 1 0", 0, 0, false},
		{"8 9 2 3", 0, 0, false},
		{"1 x 3 0", 0, 0, false},
		{"", 0, 0, false},
	} {
		b, k, ok := rotation(strings.Fields(x.idx))
		if ok != x.ok || ok && (b != x.b || k != x.k) {
			t.Errorf("rotation(%q) = %d, %d, %v; want %d, %d, %v", x.idx, b, k, ok, x.b, x.k, x.ok)
		}
	}
}
