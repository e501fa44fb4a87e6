package cuda

import (
	"fmt"
	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// tileCase is netCase without save times (tile-mode kernels have none),
// its loss on the final state and the first shared weight only.
func tileCase(n int, sizes []int, m ode.Method) engineCase {
	c := netCase(n, sizes, nn.Tanh, nn.Identity, m)
	c.name = "tile-" + c.name
	c.prob.SaveAt = nil
	c.loss = ode.Loss{Name: "tile-mse", Data: c.loss.Data, DataDim: c.loss.DataDim, Mean: true,
		FP: func(y, _, dt, _, s []tape.V) tape.V {
			l := y[0].Mul(s[0])
			for k := range y {
				l = l.Add(y[k].Sub(dt[k]).Square())
			}
			return l
		}}
	return c
}

// tileSaveCase is tileCase with save times (one before the first step's
// end, two in the middle, one at the end) and a loss that reads them.
func tileSaveCase(n int, sizes []int, m ode.Method) engineCase {
	c := tileCase(n, sizes, m)
	c.name = "tile-save-" + c.name
	c.prob.SaveAt = []float64{1e-3, 0.3, 0.55, 1}
	c.loss.FP = func(y, ys, dt, _, s []tape.V) tape.V {
		l := y[0].Mul(s[0]).Add(ys[2].Mul(ys[3]))
		for k := range y {
			l = l.Add(y[k].Sub(dt[k]).Square())
		}
		return l
	}
	return c
}

// testTileMode runs tile-mode kernels on engine against lanes mode on
// the same engine (testTileAgainstLanes) and against the CPU: meshes,
// states, losses and gradients (shared ones summed over tiles), over
// ensembles that end in a partial tile, and checks that the kernels ran
// in tile mode.
func testTileMode(t *testing.T, engine string, cases []engineCase, ops []string) {
	tile := tuned(t, engine, Tuning{Layout: LayoutTile})
	for _, c := range cases {
		testTileAgainstLanes(t, engine, engine, c, Tuning{})
		compareEngines(t, tile, c, caseOpts{knife: knife(c.prob.N), ops: ops})
		var tr Trace
		if _, err := c.solver(t, tile).GradContext(WithTrace(t.Context(), &tr), nil, &c.prob, c.loss, nil); err != nil {
			t.Fatal(err)
		}
		if got := tr.Stats().Layout; got != "tile" {
			t.Errorf("%s: layout %q, want tile", c.name, got)
		}
	}
}

// TestHostSimTileMode runs the device form of tile-mode kernels on one
// simulated warp: eight trajectories in lockstep, the layers' tensor-core
// products, the tile sums of the shared gradient. Without longTests, the
// first case only (a full tile and a partial one), for a forward solve, a
// record and a gradient on a given mesh, and the gradient of the case of
// many save times (their dense steps and reverse steps in lockstep).
func TestHostSimTileMode(t *testing.T) {
	needHost(t)
	t.Parallel()
	saves := tileSavesCase(t, 11, []int{2, 16, 16, 2}, ode.Tsit5)
	cases := []engineCase{
		tileCase(13, []int{2, 16, 16, 2}, ode.Tsit5),
		tileCase(6, []int{3, 20, 9, 3}, ode.Vern7),
		tileSaveCase(11, []int{2, 16, 16, 2}, ode.Tsit5),
		tileSaveCase(5, []int{2, 12, 2}, ode.Rodas5P),
		// Layers of 64: two vectors of 32 rows each.
		netCase(5, []int{4, 64, 4}, nn.Softplus, nn.Identity, ode.Tsit5),
		saves,
	}
	if !longTests() {
		testTileMode(t, "cuda-host-sim", cases[:1], []string{"solve", "record", "gradmesh"})
		testTileMode(t, "cuda-host-sim", []engineCase{saves}, []string{"grad"})
		return
	}
	testTileMode(t, "cuda-host-sim", cases, nil)
}

// tileSavesCase is tileCase at a tighter tolerance (more steps) with many
// save times (saveTimesCase: 60 of them, at t0, on mesh points,
// duplicated, at T1), its loss reading them all.
func tileSavesCase(t *testing.T, n int, sizes []int, m ode.Method) engineCase {
	c := tileCase(n, sizes, m)
	c.set.RelTol, c.set.AbsTol = 1e-8, 1e-10
	return saveTimesCase(t, c, 60)
}

// TestHostTileMode runs tile-mode kernels' host form (a tile is one
// trajectory).
func TestHostTileMode(t *testing.T) {
	needHost(t)
	t.Parallel()
	testTileMode(t, "cuda-host", []engineCase{tileCase(5, []int{2, 16, 16, 2}, ode.Tsit5), tileSavesCase(t, 5, []int{2, 16, 16, 2}, ode.Rodas5P)}, nil)
}

// TestHostSimTileBitwise: tile mode on a simulated warp computes the
// meshes and states of lanes mode bit for bit (the tensor-core products
// round as the Dots' fused multiply-adds), and its gradients to rounding
// (the adjoint's products sum in other orders).
func TestHostSimTileBitwise(t *testing.T) {
	needHost(t)
	t.Parallel()
	testTileBitwise(t, "cuda-host-sim", "cuda-host", 13, Tuning{})
}

// testTileBitwise compares tile mode on engine tile with lanes mode on
// engine lanes, over n trajectories (TestHostSimTileBitwise).
func testTileBitwise(t *testing.T, tileEngine, lanesEngine string, n int, tun Tuning) {
	testTileAgainstLanes(t, tileEngine, lanesEngine, tileCase(n, []int{2, 16, 16, 2}, ode.Tsit5), tun)
}

// testTileAgainstLanes compares case c in tile mode on engine tileEngine
// with lanes mode on lanesEngine, both tuned by tun but for the layout.
func testTileAgainstLanes(t *testing.T, tileEngine, lanesEngine string, c engineCase, tun Tuning) {
	grad := func(engine string, layout Layout) *ode.Gradient {
		tun := tun
		tun.Layout = layout
		g, err := c.solver(t, tuned(t, engine, tun)).Grad(nil, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	tile, lanes := grad(tileEngine, LayoutTile), grad(lanesEngine, LayoutLanes)
	hostMesh(t, tile.Mesh)
	hostMesh(t, lanes.Mesh)
	for _, x := range []struct {
		name        string
		tile, lanes []float64
	}{{"mesh", tile.Mesh.H, lanes.Mesh.H}, {"y", tile.Solution.Y, lanes.Solution.Y}} {
		for k := range x.lanes {
			if x.tile[k] != x.lanes[k] {
				t.Errorf("%s[%d]: tile mode %v, lanes mode %v", x.name, k, x.tile[k], x.lanes[k])
				break
			}
		}
	}
	// The adjoint's products sum in another order, with fused
	// multiply-adds.
	closeRows(t, "dL/dy0", tile.Y0, lanes.Y0, c.prob.Field.Dim, 1e-10, nil)
	closeRows(t, "dL/dp", tile.P, lanes.P, max(1, c.prob.Field.Params), 1e-10, nil)
	closeRows(t, "dL/dshared", tile.Shared, lanes.Shared, len(lanes.Shared), 1e-10, nil)
}

// TestHostSimTileStatuses: in tile mode each trajectory of a tile gets
// its own status, steps and state, whatever the others of its tile do.
// A long test (longTests): statuses in lanes mode are
// TestHostLanesStatuses'.
func TestHostSimTileStatuses(t *testing.T) {
	needHost(t)
	if !longTests() {
		t.Skip("a long test: -long or GRADSOLVE_LONG_TESTS=1")
	}
	t.Parallel()
	testTileStatuses(t, "cuda-host-sim")
}

// testTileStatuses runs testNetStatuses on engine in tile mode.
func testTileStatuses(t *testing.T, engine string) {
	testNetStatuses(t, tuned(t, engine, Tuning{Layout: LayoutTile}), false)
}

// TestGPUTileMode runs tile-mode kernels on the GPU against lanes mode
// and the CPU (testTileMode) for the neural suite's network, and against
// lanes mode for Vern7 on another network. (On the device one trajectory
// of that ensemble, 293, takes its second step 3e-6 relative shorter than
// on the CPU, where the error estimate cancels and the device's tanh
// rounds otherwise than Go's: in lanes mode as in tile mode, whose meshes
// are the same bit for bit.)
func TestGPUTileMode(t *testing.T) {
	needGPUEngine(t)
	t.Parallel()
	testTileMode(t, "cuda", []engineCase{
		tileCase(1003, []int{2, 32, 32, 2}, ode.Tsit5),
		tileSaveCase(1003, []int{2, 32, 32, 2}, ode.Tsit5),
		tileSaveCase(203, []int{2, 24, 24, 2}, ode.Rodas5P),
		netCase(301, []int{4, 64, 4}, nn.Softplus, nn.Identity, ode.Tsit5),
	}, nil)
	testTileAgainstLanes(t, "cuda", "cuda", netCase(301, []int{2, 33, 33, 2}, nn.Sigmoid, nn.Tanh, ode.Vern7), Tuning{})
	testTileAgainstLanes(t, "cuda", "cuda", tileCase(301, []int{3, 20, 9, 3}, ode.Vern7), Tuning{})
}

// TestGPUTileBitwise: on the GPU, tile mode's tensor-core layers round
// as lanes mode's fused multiply-adds: the same meshes and states, bit for
// bit, and gradients to rounding (testTileAgainstLanes).
func TestGPUTileBitwise(t *testing.T) {
	needGPUEngine(t)
	t.Parallel()
	testTileBitwise(t, "cuda", "cuda", 2001, Tuning{})
}

// TestGPUTileGlobalAcc: tile mode with the warps' accumulators in global
// memory (Tuning.TileAccGlobal, where shared memory is the
// default for this network) against lanes mode, for the gradient and
// the states.
func TestGPUTileGlobalAcc(t *testing.T) {
	needGPUEngine(t)
	t.Parallel()
	testTileBitwise(t, "cuda", "cuda", 1001, Tuning{TileAccGlobal: true})
}

// TestGPUTileStatic: tile mode with warps running every gridth tile
// (Tuning.TileStatic; by default they take tiles in turn),
// with the accumulators in shared and in global memory, against lanes
// mode; the forward solve too.
func TestGPUTileStatic(t *testing.T) {
	needGPUEngine(t)
	t.Parallel()
	for _, acc := range []bool{false, true} {
		tun := Tuning{TileStatic: true, TileAccGlobal: acc}
		testTileBitwise(t, "cuda", "cuda", 3001, tun)
		c := tileCase(3001, []int{2, 16, 16, 2}, ode.Tsit5)
		tun.Layout = LayoutTile
		tile, err := c.solver(t, tuned(t, "cuda", tun)).Solve(&c.prob)
		if err != nil {
			t.Fatal(err)
		}
		tun.Layout = LayoutLanes
		lanes, err := c.solver(t, tuned(t, "cuda", tun)).Solve(&c.prob)
		if err != nil {
			t.Fatal(err)
		}
		for k := range lanes.Y {
			if tile.Y[k] != lanes.Y[k] {
				t.Fatalf("accumulators global %v: forward y[%d]: tile mode %v, lanes mode %v", acc, k, tile.Y[k], lanes.Y[k])
			}
		}
	}
}

// TestGPUTileStatuses: per-trajectory statuses in tile mode.
func TestGPUTileStatuses(t *testing.T) {
	needGPUEngine(t)
	t.Parallel()
	testTileStatuses(t, "cuda")
}

// TestNVRTCTileModeKernels compiles the tile-mode kernels of the neural
// suite's network with NVRTC (sm_90): the layers are tensor-core
// products, and the warp code shuffles.
func TestNVRTCTileModeKernels(t *testing.T) {
	needNVRTC(t)
	t.Parallel()
	c := tileCase(8, []int{2, 32, 32, 2}, ode.Tsit5)
	for _, op := range []ode.Op{ode.OpSolve, ode.OpGrad} {
		src := tileKernelSource(t, c, op)
		code := compilePTX(t, src, fmt.Sprintf("tile-%v", op))
		for _, want := range []string{"mma.sync.aligned.m8n8k4", "shfl.sync", "vote.sync.any"} {
			if !strings.Contains(code, want) {
				t.Errorf("%v: no %s in the PTX", op, want)
			}
		}
	}
}

// TestTileModeChoice: the jobs that run in tile mode, and the override.
func TestTileModeChoice(t *testing.T) {
	t.Parallel()
	big := tileCase(65536, []int{2, 16, 16, 2}, ode.Tsit5)
	small := tileCase(4096, []int{2, 16, 16, 2}, ode.Tsit5)
	saved := tileCase(65536, []int{2, 16, 16, 2}, ode.Tsit5)
	saved.prob.SaveAt = []float64{0.5}
	// A loss that evaluates a layer of the shared weights has vectors.
	vecLoss := tileCase(65536, []int{2, 16, 16, 2}, ode.Tsit5)
	vecLoss.loss.FP = func(y, _, dt, _, s []tape.V) tape.V {
		h := tape.Dense(s[:32], y, s[32:48])
		l := y[0].Sub(dt[0]).Square()
		for _, x := range h {
			l = l.Add(x.Square())
		}
		return l
	}
	dense := tileCase(65536, []int{2, 16, 16, 2}, ode.Rodas5P)
	for _, c := range []struct {
		name  string
		c     engineCase
		op    ode.Op
		prec  Precision
		tiles bool
		sms   int
		l     Layout
		want  bool
	}{
		{"65536 trajectories", big, ode.OpGrad, Float64, false, 132, LayoutAuto, true},
		{"forward", big, ode.OpSolve, Float64, false, 132, LayoutAuto, true},
		{"4096 trajectories", small, ode.OpGrad, Float64, false, 132, LayoutAuto, true},
		{"4096 on twice the multiprocessors", small, ode.OpGrad, Float64, false, 264, LayoutAuto, false},
		{"4096 forced", small, ode.OpGrad, Float64, false, 132, LayoutTile, true},
		{"65536 off", big, ode.OpGrad, Float64, false, 132, LayoutLanes, false},
		{"sms unknown", big, ode.OpGrad, Float64, false, 0, LayoutAuto, false},
		{"float32", big, ode.OpGrad, Float32, false, 132, LayoutTile, false},
		{"tile sums", big, ode.OpGrad, Float64, true, 132, LayoutTile, false},
		{"save times", saved, ode.OpGrad, Float64, false, 132, LayoutAuto, true},
		{"loss with vectors", vecLoss, ode.OpGrad, Float64, false, 132, LayoutTile, false},
		{"dense output", dense, ode.OpGrad, Float64, false, 132, LayoutAuto, true},
	} {
		j := jobOf(t, c.c, c.op)
		vecs := j.Loss != nil && kernelgen.LossHasVectors(j.Loss)
		lj := layoutJob{n: j.N, lossVectors: func() bool { return vecs }}
		if got := useTileMode(kernelgen.ConfigOf(j), j.Plan, lj, c.prec, c.tiles, c.sms, c.l); got != c.want {
			t.Errorf("%s: tile mode %v, want %v", c.name, got, c.want)
		}
	}
}

// TestTilesAdjoint checks that tile mode finds the adjoint's matrix
// products in the reverse step of the neural suite's network: the
// weights' and biases' cotangents as gs_touter (a hidden layer's bias in
// the call of its weights), Wᵀ·ȳ as transposed
// gs_tdot (by vector chains and by replicated chains), and few elements
// left to take one by one.
func TestTilesAdjoint(t *testing.T) {
	t.Parallel()
	src := tileKernelSource(t, tileCase(8, []int{2, 32, 32, 2}, ode.Tsit5), ode.OpGrad)
	// The field's VJP, the function that accumulates.
	start := strings.Index(src, "_vjp__0(const gs_real* GS_RESTRICT gs_sh, gs_real* GS_RESTRICT gs_acc")
	if start < 0 {
		t.Fatal("no accumulating VJP function in the kernel")
	}
	vjp := src[start:]
	vjp = vjp[:strings.Index(vjp, "\n}\n")]
	for _, x := range []struct {
		what string
		n    int
	}{
		{"gs_touter<32, 32, 0, 0, false>", 1}, // W2's cotangent, ȳ·xᵀ
		{"gs_touter<2, 32, 1, 0, false>", 1},  // W3's, rows by replicated ȳ
		{"gs_touter<32, 2, 0, 1, false>", 1},  // W1's, columns by replicated x
		{"gs_touter<32, 1, 0, 2, false>", 0},  // the hidden biases', taken over by
		{"0xffffffffu, 96, 32, 1120, 1);", 1}, // W2's product
		{"0xffffffffu, 0, 2, 64, 1);", 1},     // and W1's
		{"Wᵀ·g over", 2},                      // chains of vector adds
		{"Wᵀ·g, 2 columns", 1},                // the state's cotangent
		{"gs_ol", 2},                          // tanh out of line, both layers
	} {
		if got := strings.Count(vjp, x.what); got != x.n {
			t.Errorf("%q: %d in the VJP, want %d", x.what, got, x.n)
		}
	}
	if n := strings.Count(vjp, "GS_BCAST("); n > 8 {
		t.Errorf("%d elements taken one by one in the VJP, want at most 8", n)
	}
}

// tileKernelSource returns the source of the tile-mode kernel of case c's
// job op.
func tileKernelSource(t *testing.T, c engineCase, op ode.Op) string {
	t.Helper()
	j := jobOf(t, c, op)
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	src, _, err := kernelgen.KernelSource(sp, kernelgen.ConfigOf(j).Tiled(), j.Loss, Float64)
	if err != nil {
		t.Fatal(err)
	}
	return src
}
