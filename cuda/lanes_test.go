package cuda

import (
	"fmt"
	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestUseLanes: the engine runs MLP fields one warp per trajectory and
// small scalar fields (Lorenz) one thread per trajectory.
func TestUseLanes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		c    engineCase
		want bool
	}{{mlpCase(4, []int{2, 32, 32, 2}), true}, {mlpCase(4, []int{2, 4, 2}), false}, {lorenzSharedCase(4), false}} {
		j := jobOf(t, c.c, ode.OpGrad)
		sp, err := kernelgen.NewStepPrograms(j.Plan)
		if err != nil {
			t.Fatal(err)
		}
		if sp.Lanes != c.want {
			t.Errorf("%s (%d values in the reverse step): lanes %v, want %v", c.c.name, len(sp.Rev.Values), sp.Lanes, c.want)
		}
		if c.want {
			v := kernelgen.ConfigOf(j)
			v.Lanes = true
			src, _, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(src, "#define GS_LANEMODE 1") || !strings.Contains(src, "GS_BCAST(") {
				t.Errorf("%s: the lanes kernel has no GS_LANEMODE or no shuffles", c.c.name)
			}
		}
	}
}

// hostGradSources returns the sources of the gradient kernels the host
// backend has compiled for fields of ns shared parameters.
func hostGradSources(t *testing.T, ns int) []string {
	t.Helper()
	hb := hostF64.be.(*hostBackend)
	hb.mu.Lock()
	defer hb.mu.Unlock()
	var srcs []string
	for key := range hb.exes {
		src, err := os.ReadFile(filepath.Join(hostDir, key+".cpp"))
		if err == nil && strings.Contains(string(src), fmt.Sprintf("#define GS_NS %d\n", ns)) && strings.Contains(string(src), "gs_backward(") {
			srcs = append(srcs, string(src))
		}
	}
	return srcs
}

// TestHostLanesBitwise: on the host engine, lanes mode and one thread per
// trajectory give the same bits (each value is the same op on the same
// arguments in the same order, and the shared gradients are summed in the
// same order on the host).
func TestHostLanesBitwise(t *testing.T) {
	t.Parallel()
	// A network size no other test uses, so that the kernels of its
	// shared-parameter count are this test's.
	c := mlpCase(24, []int{2, 24, 24, 2})
	grad := func(layout Layout) *ode.Gradient {
		g, err := c.solver(t, tuned(t, "cuda-host", Tuning{Layout: layout})).Grad(nil, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	on, off := grad(LayoutLanes), grad(LayoutThread)
	// Both layouts were compiled: had either setting been ignored, the
	// two runs would share one.
	kinds := map[bool]bool{}
	for _, src := range hostGradSources(t, c.prob.Field.Shared) {
		kinds[strings.Contains(src, "#define GS_LANEMODE 1")] = true
	}
	if !kinds[true] || !kinds[false] {
		t.Fatalf("gradient kernels compiled: lanes mode %v, thread per trajectory %v; want both", kinds[true], kinds[false])
	}
	if on.Loss != off.Loss {
		t.Errorf("loss: lanes %v, threads %v", on.Loss, off.Loss)
	}
	for _, x := range []struct {
		name   string
		on, of []float64
	}{{"dL/dy0", on.Y0, off.Y0}, {"dL/dshared", on.Shared, off.Shared}} {
		for k := range x.on {
			if x.on[k] != x.of[k] {
				t.Errorf("%s[%d]: lanes %v, threads %v", x.name, k, x.on[k], x.of[k])
				break
			}
		}
	}
	if on.Mesh == nil || off.Mesh == nil {
		t.Fatal("no mesh")
	}
}

// netCase is y' = MLP(y)·p₀ − p₁·y with a network of the given sizes and
// activations: shared weights and two per-trajectory parameters (a rate
// and a damping), each trajectory with its own target (loss data).
func netCase(n int, sizes []int, hidden, out nn.Activation, m ode.Method) engineCase {
	c := mlpCase(n, sizes)
	mlp := nn.NewMLP(sizes, hidden, out)
	d := sizes[0]
	c.name = fmt.Sprintf("net-%v-%v-%v-%s", sizes, hidden, out, m.Name())
	c.prob.Field = ode.Field{Name: c.name, Dim: d, Params: 2, Shared: mlp.NumParams(),
		F: func(_ tape.V, y, p []tape.V) []tape.V {
			z := mlp.Apply(p[2:], y)
			for k := range z {
				z[k] = z[k].Mul(p[0]).Sub(p[1].Mul(y[k]))
			}
			return z
		}}
	c.prob.Shared = mlp.Init(nil, rand.New(rand.NewPCG(5, uint64(len(sizes)))))
	c.prob.P = make([]float64, 2*n)
	for i := 0; i < n; i++ {
		c.prob.P[2*i] = 0.5 + float64(i)/float64(max(n-1, 1))
		c.prob.P[2*i+1] = 0.1 * float64(i%5)
	}
	c.set.Method = m
	return c
}

// testLanesNetworks runs networks of other widths (below, above and not a
// multiple of the warp's 32), activations, per-trajectory parameters and
// a Rosenbrock method on engine, n·scale trajectories each, against the
// CPU, and checks that the engine chose lanes mode for them.
//
// A ReLU network's field has kinks, where an error estimate is O(h)
// rather than O(h⁵) and the controller chaotic: on the CPU alone, a
// change of y0 by one ulp moves one of eight trajectories' steps by 38%
// (4-64-4 below). Its meshes are not compared; its gradients are, on the
// CPU's mesh and on the engine's own (compareOwnMesh).
func testLanesNetworks(t *testing.T, engine string, scale int) {
	for _, tc := range []struct {
		c     engineCase
		o     []string
		kinks bool
	}{
		{netCase(8*scale, []int{3, 20, 45, 3}, nn.Softplus, nn.Identity, ode.Tsit5), nil, false},
		{netCase(8*scale, []int{2, 33, 33, 2}, nn.Sigmoid, nn.Tanh, ode.Vern7), nil, false},
		{netCase(8*scale, []int{4, 64, 4}, nn.Relu, nn.Identity, ode.Tsit5), []string{"gradmesh", "lossmesh", "replay"}, true},
		{netCase(4*scale, []int{2, 24, 24, 2}, nn.Tanh, nn.Identity, ode.Rodas5P), []string{"solve", "grad"}, false},
	} {
		t.Run(tc.c.name, func(t *testing.T) {
			t.Parallel()
			sp, err := kernelgen.NewStepPrograms(jobOf(t, tc.c, ode.OpGrad).Plan)
			if err != nil {
				t.Fatal(err)
			}
			if !sp.Lanes {
				t.Errorf("%d shared weights, %d values in the reverse step: not lanes mode", tc.c.prob.Field.Shared, len(sp.Rev.Values))
			}
			ops := tc.o
			if ops == nil {
				ops = []string{"solve", "grad", "gradmesh", "loss"}
			}
			compareEngines(t, engine, tc.c, caseOpts{knife: knife(tc.c.prob.N), ops: ops})
			if tc.kinks {
				compareOwnMesh(t, engine, tc.c, tc.c.prob.N)
			}
		})
	}
}

func TestHostLanesNetworks(t *testing.T) {
	needHost(t)
	testLanesNetworks(t, "cuda-host", 1)
}

// TestHostLanesGlobal: lanes mode with the shared block in global memory
// (GS_LANES_GLOBAL, for networks too large for shared memory), the warps'
// accumulators there too or one per block (GS_LANES_BLOCKACC), gives the
// same bits as in shared memory.
func TestHostLanesGlobal(t *testing.T) {
	needHost(t)
	t.Parallel()
	// A network size no other test uses, so that its kernels are this
	// test's.
	c := mlpCase(20, []int{2, 26, 26, 2})
	grad := func(global, warps bool) *ode.Gradient {
		tun := Tuning{Layout: LayoutLanes, NoBlockAcc: warps}
		if global {
			tun.Layout = LayoutLanesGlobal
		}
		var tr Trace
		g, err := c.solver(t, tuned(t, "cuda-host", tun)).GradContext(WithTrace(t.Context(), &tr), nil, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[[2]bool]string{{false, false}: "lanes", {true, false}: "lanes-global-block", {true, true}: "lanes-global"}[[2]bool{global, warps}]
		if got := tr.Stats().Layout; got != want {
			t.Errorf("global %v, accumulator per warp %v: trace layout %q, want %q", global, warps, got, want)
		}
		return g
	}
	sh := grad(false, false)
	kinds := map[string]bool{}
	for _, warps := range []bool{false, true} {
		gl := grad(true, warps)
		what := fmt.Sprintf("global (accumulator per warp %v)", warps)
		if sh.Loss != gl.Loss {
			t.Errorf("loss: shared %v, %s %v", sh.Loss, what, gl.Loss)
		}
		for _, x := range []struct {
			name   string
			sh, gl []float64
		}{{"dL/dy0", sh.Y0, gl.Y0}, {"dL/dshared", sh.Shared, gl.Shared}, {"y", sh.Solution.Y, gl.Solution.Y}} {
			for k := range x.sh {
				if x.sh[k] != x.gl[k] {
					t.Errorf("%s[%d]: shared %v, %s %v", x.name, k, x.sh[k], what, x.gl[k])
					break
				}
			}
		}
	}
	for _, s := range hostGradSources(t, c.prob.Field.Shared) {
		for _, layout := range []string{"lanes", "lanes-global", "lanes-global-block"} {
			if strings.Contains(s, ", layout "+layout+": ") {
				kinds[layout] = true
			}
		}
	}
	if len(kinds) != 3 {
		t.Fatalf("gradient kernels compiled (global, block accumulator): %v; want shared, global and global with a block accumulator", kinds)
	}
	want, err := c.solver(t, "cpu").Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	closeRows(t, "dL/dshared", sh.Shared, want.Shared, len(want.Shared), 1e-10, nil)
}

// TestThreadsFill: a small network's large jobs run one thread per
// trajectory on a GPU (sms known), a large network's and small jobs in
// lanes mode, and LayoutLanes keeps lanes mode.
func TestThreadsFill(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ns, n, sms int
		want       bool
	}{
		{114, 65536, 132, true},
		{354, 65536, 132, true},
		{354, 4096, 132, false},
		{1218, 65536, 132, false},
		{354, 65536, 0, false},
		{kernelgen.LanesSmallNet, 132 * kernelgen.LanesThreadFill, 132, true},
		{kernelgen.LanesSmallNet + 1, 132 * kernelgen.LanesThreadFill, 132, false},
		{kernelgen.LanesSmallNet, 132*kernelgen.LanesThreadFill - 1, 132, false},
	} {
		if got := kernelgen.ThreadsFill(&ode.Plan{Shared: c.ns}, c.n, c.sms); got != c.want {
			t.Errorf("%d weights, %d trajectories, %d multiprocessors: one thread per trajectory %v, want %v", c.ns, c.n, c.sms, got, c.want)
		}
	}
	pl, sp := &ode.Plan{Shared: 114}, &kernelgen.StepPrograms{Lanes: true}
	dev := device{sms: 132, sharedLimit: maxShared}
	if v := chooseLayout(kernelgen.Config{Grad: true}, pl, sp, layoutJob{n: 65536}, Float64, false, dev, Tuning{}); v.Lanes {
		t.Errorf("default layout: lanes mode, want one thread per trajectory")
	}
	if v := chooseLayout(kernelgen.Config{Grad: true}, pl, sp, layoutJob{n: 65536}, Float64, false, dev, Tuning{Layout: LayoutLanes}); !v.Lanes || v.TileMode {
		t.Errorf("LayoutLanes: lanes mode %v, tile mode %v; want lanes mode", v.Lanes, v.TileMode)
	}
}

// TestLanesLaunchGlobal: a lanes-mode launch in global memory uses shared
// memory for its warps' staging rows, and one padded accumulator per
// block of lanesAccBlock threads, and no more warps than its
// multiprocessors run at once.
func TestLanesLaunchGlobal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n, ns    int
		blockAcc bool
		threads  int
		block    int
		shmem    int
	}{
		{65536, 17154, true, 132 * kernelgen.LanesAccBlock, kernelgen.LanesAccBlock, (kernelgen.PadLen(17154) + 16*kernelgen.LaneStageLen) * 8},
		{10, 17154, true, kernelgen.LanesAccBlock, kernelgen.LanesAccBlock, (kernelgen.PadLen(17154) + 16*kernelgen.LaneStageLen) * 8},
		{65536, 40000, false, 132 * kernelgen.LanesGlobalBlocksPerSM * kernelgen.LanesBlock, kernelgen.LanesBlock, 4 * kernelgen.LaneStageLen * 8},
		// 10 warps in whole blocks of 4: 12 warps, each with its row.
		{10, 40000, false, 12 * 32, kernelgen.LanesBlock, 4 * kernelgen.LaneStageLen * 8},
	} {
		threads, block, shmem := kernelgen.LanesLaunch(c.n, 2, c.ns, true, true, c.blockAcc, Float64, 1024, 132, 232448)
		if threads != c.threads || block != c.block || shmem != c.shmem {
			t.Errorf("n %d, %d weights, block accumulator %v: %d threads in blocks of %d, %d bytes; want %d, %d, %d",
				c.n, c.ns, c.blockAcc, threads, block, shmem, c.threads, c.block, c.shmem)
		}
		if _, accs := kernelgen.LanesGlobalLayout(2, c.ns, !c.blockAcc, threads); !c.blockAcc && accs != threads/32*kernelgen.PadLen(c.ns) {
			t.Errorf("%d weights: %d accumulator reals for %d warps", c.ns, accs, threads/32)
		}
	}
	if !kernelgen.LanesBlockAccFits(17154, Float64, 232448) || kernelgen.LanesBlockAccFits(40000, Float64, 232448) {
		t.Errorf("an H200's 227 KiB holds one accumulator of 17,154 weights, not of 40,000")
	}
}

// TestNVRTCLanesKernels compiles the lanes-mode gradient kernels of the
// neural suite's network with NVRTC to PTX (it needs NVRTC, not a GPU):
// the shared-memory layout, the global-memory layout with a block's
// shared accumulator (atomics on shared memory) and with each warp's in
// global memory, in float64 and float32, and both layouts with tile sums
// (MultiEngine); all shuffle, and only the block accumulator adds to
// shared memory atomically.
func TestNVRTCLanesKernels(t *testing.T) {
	needNVRTC(t)
	t.Parallel()
	c := mlpCase(8, []int{2, 32, 32, 2})
	j := jobOf(t, c, ode.OpGrad)
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	sharedAtom := regexp.MustCompile(`(?m)^\s*(@\S+\s+)?(atom|red)\.shared`)
	for _, tc := range []struct {
		name                    string
		global, blockAcc, tiles bool
		prec                    Precision
	}{
		{"shared", false, false, false, Float64},
		{"global-block", true, true, false, Float64},
		{"global-warps", true, false, false, Float64},
		{"global-block-f32", true, true, false, Float32},
		{"tiles", false, false, true, Float64},
		{"global-tiles", true, false, true, Float64},
	} {
		v := kernelgen.ConfigOf(j)
		v.Lanes, v.LanesMinBlocks, v.LanesGlobal, v.LanesBlockAcc, v.TileSums = true, 4, tc.global, tc.blockAcc, tc.tiles
		src, _, err := kernelgen.KernelSource(sp, v, j.Loss, tc.prec)
		if err != nil {
			t.Fatal(err)
		}
		code := compilePTX(t, src, tc.name)
		if !strings.Contains(code, "shfl.sync") {
			t.Errorf("%s: no shuffles in the PTX", tc.name)
		}
		if got := sharedAtom.MatchString(code); got != tc.blockAcc {
			t.Errorf("%s: atomics on shared memory %v, want %v", tc.name, got, tc.blockAcc)
		}
	}
}

// testLanesStatuses: in lanes mode too each trajectory gets its own
// status: a network field whose trajectories hit the step limit, blow up
// (a negative damping makes y' ≈ |p₁|·y², past overflow before t = 1) or
// go non-finite (a factor √(p₀ − t), NaN from the start for p₀ < 0),
// beside ones that finish; statuses, times and states equal the CPU's.
func testLanesStatuses(t *testing.T, engine string) { testNetStatuses(t, engine, true) }

// testNetStatuses is testLanesStatuses, with the case's save time or
// without (tile mode's kernels have none).
func testNetStatuses(t *testing.T, engine string, saveAt bool) {
	c := netCase(6, []int{2, 24, 24, 2}, nn.Tanh, nn.Identity, ode.Tsit5)
	if !saveAt {
		c.prob.SaveAt = nil
	}
	mlp := nn.NewMLP([]int{2, 24, 24, 2}, nn.Tanh, nn.Identity)
	c.prob.Field.F = func(tt tape.V, y, p []tape.V) []tape.V {
		z := mlp.Apply(p[2:], y)
		for k := range z {
			z[k] = z[k].Mul(p[0].Sub(tt).Sqrt()).Sub(p[1].Mul(y[k]).Mul(y[k]))
		}
		return z
	}
	c.prob.Field.Name = "net-statuses"
	c.prob.P = []float64{1.5, 0.1, 1.5, -3, -1, 0.1, 1.5, 0.1, 1.5, 0.1, 1.5, 0.1}
	c.prob.Y0 = []float64{0.5, 0.5, 4, 4, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.3, 0.2}
	c.set.AllowFailures = true
	for _, maxSteps := range []int{0, 3} {
		c := c
		c.set.MaxSteps = maxSteps
		sp, err := kernelgen.NewStepPrograms(jobOf(t, c, ode.OpSolve).Plan)
		if err != nil {
			t.Fatal(err)
		}
		if !sp.Lanes {
			t.Fatalf("%d shared weights: not lanes mode", c.prob.Field.Shared)
		}
		compareEngines(t, engine, c, caseOpts{ops: []string{"solve"}})
		sol, err := c.solver(t, engine).Solve(&c.prob)
		if err != nil {
			t.Fatal(err)
		}
		want := []ode.Status{ode.OK, ode.StepSizeUnderflow, ode.NonFinite, ode.OK, ode.OK, ode.OK}
		if maxSteps > 0 {
			want = []ode.Status{ode.MaxStepsReached, ode.MaxStepsReached, ode.NonFinite, ode.MaxStepsReached, ode.MaxStepsReached, ode.MaxStepsReached}
		}
		t.Logf("max steps %d: statuses %v", maxSteps, sol.Status)
		for i, st := range want {
			if sol.Status[i] != st {
				t.Errorf("max steps %d: trajectory %d: status %v, want %v", maxSteps, i, sol.Status[i], st)
			}
		}
	}
}

func TestHostLanesStatuses(t *testing.T) {
	needHost(t)
	t.Parallel()
	testLanesStatuses(t, "cuda-host")
}

// TestLanesStageSource: the engine's lanes-mode kernels stage the neural
// suite's layers (every slot within the four of a warp), and
// Config.LanesShuffle keeps the shuffles.
func TestLanesStageSource(t *testing.T) {
	t.Parallel()
	c := mlpCase(8, []int{2, 32, 32, 2})
	j := jobOf(t, c, ode.OpGrad)
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	stage := regexp.MustCompile(`GS_STAGE\((\d+), u\d+\);`)
	for _, shuffle := range []bool{false, true} {
		v := kernelgen.ConfigOf(j)
		// The step programs' reads: the stability probe (Config.Probe) of
		// the record reads the network's inputs through shuffles, staged or
		// not (its JVPs are not staged: session 53, for a device's measure).
		v.Lanes, v.LanesMinBlocks, v.LanesShuffle, v.Probe = true, 4, shuffle, false
		src, _, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
		if err != nil {
			t.Fatal(err)
		}
		staged := stage.FindAllStringSubmatch(src, -1)
		bcast := strings.Count(src, "= GS_BCAST(u")
		if shuffle {
			if len(staged) != 0 || bcast == 0 || strings.Contains(src, "#define GS_STAGE_LEN") {
				t.Errorf("shuffles: %d vectors staged, %d shuffled reads", len(staged), bcast)
			}
			continue
		}
		if len(staged) == 0 || bcast != 0 || !strings.Contains(src, fmt.Sprintf("#define GS_STAGE_LEN %d", kernelgen.LaneStageLen)) {
			t.Errorf("staged: %d vectors staged, %d shuffled reads", len(staged), bcast)
		}
		for _, m := range staged {
			if k, _ := strconv.Atoi(m[1]); k >= kernelgen.LaneStageSlots {
				t.Errorf("slot %d of %d", k, kernelgen.LaneStageSlots)
			}
		}
	}
}
