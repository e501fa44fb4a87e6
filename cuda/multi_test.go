package cuda

import (
	"errors"
	"fmt"
	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/fit"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Tests of MultiEngine on a fake multi-device layer: host backends (the
// kernels compiled with g++, run on the CPU) stand for the GPUs, so the
// sharding, the gather and the tile sums of shared gradients are tested on
// machines without a GPU. They skip where g++ is missing.

// fakeDevice is a host backend standing for one device of a MultiEngine:
// its own memory and launches; its kernels are compiled once for all fake
// devices (and the host engine "cuda-host") by kernels.
type fakeDevice struct {
	*hostBackend
	kernels *hostBackend
	fail    error // if not nil, every launch fails with it
}

func (f *fakeDevice) compile(src, name string, opts []string) (backendKernel, error) {
	return f.kernels.compile(src, name, opts)
}

// batch runs f on a queue whose launches fail with fail, if set.
func (f *fakeDevice) batch(fn func(q queue) error) error {
	return f.hostBackend.batch(func(q queue) error { return fn(fakeQueue{q.(hostQueue), f}) })
}

type fakeQueue struct {
	hostQueue
	f *fakeDevice
}

func (q fakeQueue) enqueue(k backendKernel, threads, block, shmem int, args []uint64) error {
	if q.f.fail != nil {
		return q.f.fail
	}
	return q.hostQueue.enqueue(k, threads, block, shmem, args)
}

// fakeMulti returns a MultiEngine called name in precision prec on fake
// devices, each with mem bytes of memory.
func fakeMulti(name string, devices int, mem int64, prec Precision) *MultiEngine {
	// One compiling backend per precision: two that compiled one source
	// would write the same executable while the other may run it.
	kernels := hostF64.be.(*hostBackend)
	if prec == Float32 {
		kernels = hostF32.be.(*hostBackend)
	}
	bes := make([]backend, devices)
	for k := range bes {
		bes[k] = &fakeDevice{hostBackend: newHostBackend(mem), kernels: kernels}
	}
	return newMultiEngineOn(name, prec, bes)
}

// The fake multi-device engines of the tests, registered as
// "cuda-multi-host<devices>".
var fakeMultis = map[int]*MultiEngine{}

func init() {
	for _, k := range []int{1, 2, 3} {
		fakeMultis[k] = fakeMulti(fmt.Sprintf("cuda-multi-host%d", k), k, 1<<30, Float64)
		ode.Register(fakeMultis[k])
		ode.Register(fakeMulti(fmt.Sprintf("cuda-multi-host%d-f32", k), k, 1<<30, Float32))
	}
}

// lorenzSharedCase is Lorenz with ρ per trajectory (spread over [0, 28])
// and σ, β shared, two save times, and a mean loss whose terms use σ too
// (so the loss has a shared gradient of its own).
func lorenzSharedCase(n int) engineCase {
	f := ode.Field{Name: "lorenz-shared", Dim: 3, Params: 1, Shared: 2,
		F: func(_ tape.V, y, p []tape.V) []tape.V {
			rho, sigma, beta := p[0], p[1], p[2]
			return []tape.V{
				sigma.Mul(y[1].Sub(y[0])),
				y[0].Mul(rho.Sub(y[2])).Sub(y[1]),
				y[0].Mul(y[1]).Sub(beta.Mul(y[2])),
			}
		}}
	r := rand.New(rand.NewPCG(5, 6))
	y0 := make([]float64, 3*n)
	p := make([]float64, n)
	for i := 0; i < n; i++ {
		for c := 0; c < 3; c++ {
			y0[3*i+c] = []float64{1, 0, 0}[c] + 0.1*r.Float64()
		}
		p[i] = 28 * float64(i) / float64(max(n-1, 1))
	}
	return engineCase{
		name: "lorenz-shared",
		prob: ode.Problem{Field: f, N: n, Y0: y0, P: p, Shared: []float64{10, 8.0 / 3}, T0: 0, T1: 1, SaveAt: []float64{0.25, 0.5}},
		set:  ode.Settings{Method: ode.Tsit5, RelTol: 1e-6, AbsTol: 1e-9},
		loss: ode.Loss{Name: "lorenz-shared-loss", Mean: true, FP: func(y, ys, _, _, s []tape.V) tape.V {
			return y[0].Square().Add(y[2]).Add(ys[1].Mul(ys[3])).Add(s[0].Mul(y[1]))
		}},
		tol: 1e-10,
	}
}

// bitsEqual reports whether got and want hold the same bits (NaNs
// included), and the first index where they differ.
func bitsEqual(got, want []float64) (bool, int) {
	if len(got) != len(want) || (got == nil) != (want == nil) {
		return false, -1
	}
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			return false, i
		}
	}
	return true, 0
}

// sameResult checks that two results of one job are bitwise equal in
// everything but timings and stored bytes.
func sameResult(t *testing.T, what string, got, want *ode.Result) {
	t.Helper()
	for _, f := range []struct {
		name      string
		got, want []float64
	}{
		{"T", got.T, want.T}, {"Y", got.Y, want.Y}, {"Ys", got.Ys, want.Ys}, {"LastH", got.LastH, want.LastH},
		{"Loss", []float64{got.Loss}, []float64{want.Loss}},
		{"GradY0", got.GradY0, want.GradY0}, {"GradP", got.GradP, want.GradP}, {"GradS", got.GradS, want.GradS},
	} {
		if ok, i := bitsEqual(f.got, f.want); !ok {
			if i < 0 {
				t.Errorf("%s: %s has %d values, want %d", what, f.name, len(f.got), len(f.want))
			} else {
				t.Errorf("%s: %s[%d] = %v, want %v (bits differ)", what, f.name, i, f.got[i], f.want[i])
			}
		}
	}
	if !slices.Equal(got.Status, want.Status) || !slices.Equal(got.Stiff, want.Stiff) {
		t.Errorf("%s: statuses or stiffness flags differ", what)
	}
	if !slices.Equal(got.Events, want.Events) {
		i := 0
		for i < min(len(got.Events), len(want.Events))-1 && got.Events[i] == want.Events[i] {
			i++
		}
		t.Errorf("%s: %d event counts, want %d (first difference at or before %d)", what, len(got.Events), len(want.Events), i)
	}
	if !slices.Equal(got.Stats.Accepted, want.Stats.Accepted) || !slices.Equal(got.Stats.Rejected, want.Stats.Rejected) ||
		!slices.Equal(got.Stats.FieldEvals, want.Stats.FieldEvals) {
		t.Errorf("%s: step counts differ", what)
	}
	switch {
	case (got.Mesh == nil) != (want.Mesh == nil):
		t.Errorf("%s: mesh %v, want %v", what, got.Mesh != nil, want.Mesh != nil)
	case got.Mesh != nil:
		gm, wm := got.Mesh, want.Mesh
		hostMesh(t, gm)
		hostMesh(t, wm)
		if gm.N != wm.N || gm.Rows != wm.Rows || !slices.Equal(gm.Len, wm.Len) || !slices.Equal(gm.Status, wm.Status) {
			t.Errorf("%s: mesh shape: N %d rows %d, want N %d rows %d (or lengths, statuses differ)", what, gm.N, gm.Rows, wm.N, wm.Rows)
		} else if ok, i := bitsEqual(gm.H, wm.H); !ok {
			t.Errorf("%s: mesh H[%d] differs", what, i)
		} else if !slices.Equal(gm.Events, wm.Events) || gm.EventHash != wm.EventHash {
			t.Errorf("%s: mesh event marks (%d, hash %q) differ from %d (hash %q)", what, len(gm.Events), gm.EventHash, len(wm.Events), wm.EventHash)
		}
	}
}

// multiJob returns the job of op on c as ode builds it (recorded by the
// spy engine): "solve", "record", "loss" (record and loss), "grad" (record
// and gradient), "replay" and "gradmesh" on mesh.
func multiJob(t *testing.T, c engineCase, op string, mesh *ode.Mesh) *ode.Job {
	t.Helper()
	if op == "solve" {
		return jobOf(t, c, ode.OpSolve)
	}
	j := jobOf(t, c, ode.OpGrad)
	switch op {
	case "record":
		j.Op, j.Loss = ode.OpRecord, nil
	case "loss":
		j.Op = ode.OpLoss
	case "replay":
		j.Op, j.Loss, j.Mesh = ode.OpReplay, nil, mesh
	case "gradmesh":
		j.Mesh = mesh
	}
	return j
}

// runOn prepares e for j's plan, sets the per-trajectory times its
// balancer starts from (nil: not measured, an even split), runs j and
// returns the result and the shard boundaries it used.
func runOn(t *testing.T, e *MultiEngine, j *ode.Job, per []float64) (*ode.Result, []int) {
	t.Helper()
	x, err := e.Prepare(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	m := x.(*multiExecutor)
	copy(m.bal.per, per)
	bounds := m.bal.split(j.N)
	res, err := m.Run(t.Context(), j)
	if err != nil {
		t.Fatalf("%s: %v", e.Name(), err)
	}
	return res, bounds
}

// TestMultiBitwise runs every operation of Lorenz with shared parameters,
// of an MLP field (42 shared weights) and of one that runs in lanes mode
// (722 weights) on 1, 2 and 3 fake devices, evenly split and skewed, and
// checks that every result is bitwise that of one device: per-trajectory
// results, meshes, the loss and the shared gradient. N = 45 leaves a
// partial last tile.
func TestMultiBitwise(t *testing.T) {
	needHost(t)
	t.Parallel()
	lanes := mlpCase(45, []int{2, 24, 24, 2})
	lanes.name = "mlp-lanes"
	for _, c := range []engineCase{lorenzSharedCase(45), mlpCase(45, []int{2, 8, 2}), lanes} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			one := fakeMultis[1]
			rec, _ := runOn(t, one, multiJob(t, c, "record", nil), nil)
			for _, op := range []string{"solve", "record", "loss", "grad", "replay", "gradmesh"} {
				j := multiJob(t, c, op, rec.Mesh)
				want, _ := runOn(t, one, j, nil)
				if op == "grad" && c.prob.Field.Shared > 0 && len(want.GradS) != c.prob.Field.Shared {
					t.Fatalf("grad: %d shared gradients, want %d", len(want.GradS), c.prob.Field.Shared)
				}
				for _, cfg := range []struct {
					devices int
					per     []float64
				}{{2, nil}, {3, nil}, {3, []float64{1, 5, 2}}, {2, []float64{3, 1}}} {
					got, bounds := runOn(t, fakeMultis[cfg.devices], j, cfg.per)
					sameResult(t, fmt.Sprintf("%s %s on %d devices, shards %v", c.name, op, cfg.devices, bounds), got, want)
				}
			}
			if c.name == lanes.name {
				tiled := false
				for _, src := range hostGradSources(t, c.prob.Field.Shared) {
					tiled = tiled || strings.Contains(src, "#define GS_LANEMODE 1") && strings.Contains(src, "#define GS_TILES 1")
				}
				if !tiled {
					t.Errorf("%s: no gradient kernel in lanes mode with tile sums was compiled", c.name)
				}
			}
		})
	}
}

// TestMultiEvents runs every operation of problems with events on 1, 2
// and 3 fake devices, evenly split and skewed: the driven balls (a jump
// through a shared parameter, whose gradient is summed per tile) and the
// pharmacokinetic threshold (a terminal event) with save times. Every
// result is bitwise that of one device, event counts and the mesh's event
// marks included; and the one-device results are the one-GPU host
// engine's (cuda-host) in everything computed per trajectory: steps,
// statuses, event counts, times, states, meshes and their event marks,
// dL/dy0 and dL/dp (the shared gradient is summed in another order there,
// so it is compared within rounding). N = 45 leaves a partial last tile.
func TestMultiEvents(t *testing.T) {
	needHost(t)
	t.Parallel()
	for _, c := range []engineCase{drivenBallCase(45, ode.Tsit5), withSaves(pkCase(45, ode.Tsit5), 5, 1)} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			one := fakeMultis[1]
			rec, _ := runOn(t, one, multiJob(t, c, "record", nil), nil)
			if rec.Mesh == nil || len(rec.Mesh.Events) != rec.Mesh.Rows*rec.Mesh.N || slices.Max(rec.Events) == 0 {
				t.Fatalf("record: no event marks, or no events: %v", rec.Events)
			}
			for _, op := range []string{"solve", "record", "loss", "grad", "replay", "gradmesh"} {
				j := multiJob(t, c, op, rec.Mesh)
				want, _ := runOn(t, one, j, nil)
				for _, cfg := range []struct {
					devices int
					per     []float64
				}{{2, nil}, {3, nil}, {3, []float64{1, 5, 2}}, {2, []float64{3, 1}}} {
					got, bounds := runOn(t, fakeMultis[cfg.devices], j, cfg.per)
					sameResult(t, fmt.Sprintf("%s %s on %d devices, shards %v", c.name, op, cfg.devices, bounds), got, want)
				}
				x, err := hostF64.Prepare(j.Plan)
				if err != nil {
					t.Fatal(err)
				}
				host, err := x.Run(t.Context(), j)
				if err != nil {
					t.Fatalf("cuda-host %s: %v", op, err)
				}
				gs := want.GradS
				closeRows(t, c.name+" "+op+" dL/dShared against cuda-host", gs, host.GradS, len(gs), 1e-13, nil)
				want.GradS, host.GradS = nil, nil
				sameResult(t, fmt.Sprintf("%s %s on one device against cuda-host", c.name, op), want, host)
			}
		})
	}
}

// TestMultiEventsChunks: a gradient through events (the driven balls,
// with their shared parameter) on 1 and 3 fake devices in launches of a
// few trajectories whose record buffers are first too short (whole tiles
// rerun) is bitwise the one without chunks or reruns, event marks
// included.
func TestMultiEventsChunks(t *testing.T) {
	needHost(t)
	t.Parallel()
	multiChunks(t, "cuda-multi-events-rows4", drivenBallCase(100, ode.Tsit5), 40<<10)
}

// TestMultiEventsAgainstCPU runs the event tests (the bouncing balls,
// the threshold and the driven balls, with and without save times) on 3
// fake devices against the CPU engine and the closed forms, as
// TestHostEvents runs them on the one-GPU host engine.
func TestMultiEventsAgainstCPU(t *testing.T) {
	needHost(t)
	t.Parallel()
	testEvents(t, "cuda-multi-host3", 20, []ode.Method{ode.Tsit5}, false)
}

// TestMultiEventsEdges runs the tests of bad events (statuses and errors)
// and of save times at and past events on the fake devices.
func TestMultiEventsEdges(t *testing.T) {
	needHost(t)
	t.Parallel()
	t.Run("bad-input", func(t *testing.T) { testEventsBadInput(t, "cuda-multi-host3") })
	t.Run("save-edges", func(t *testing.T) { testEventSavesEdges(t, "cuda-multi-host3") })
}

// TestMultiFloat32: in float32 too, a gradient (the tile sums in float32
// on the devices) has the same bits on 1 and 3 fake devices, also through
// events.
func TestMultiFloat32(t *testing.T) {
	needHost(t)
	t.Parallel()
	c := lorenzSharedCase(45)
	c.set.RelTol, c.set.AbsTol = 1e-4, 1e-7
	ev := drivenBallCase(45, ode.Tsit5) // events, a shared parameter
	ev.set.RelTol, ev.set.AbsTol = 1e-4, 1e-6
	one, three := fakeMulti("f32-1", 1, 1<<30, Float32), fakeMulti("f32-3", 3, 1<<30, Float32)
	for _, x := range []engineCase{c, ev} {
		j := multiJob(t, x, "grad", nil)
		want, _ := runOn(t, one, j, nil)
		got, bounds := runOn(t, three, j, []float64{1, 3, 2})
		sameResult(t, fmt.Sprintf("%s float32 grad, shards %v", x.name, bounds), got, want)
	}
}

// TestMultiChunks: with a memory limit that makes each device run its
// shard in several launches, and record buffers first too short (so whole
// tiles are rerun), a gradient on 1 and 3 fake devices is bitwise the
// same, and matches the one without chunks or reruns.
func TestMultiChunks(t *testing.T) {
	needHost(t)
	t.Parallel()
	multiChunks(t, "cuda-multi-rows4", lorenzSharedCase(150), 100<<10)
}

// multiChunks runs c's gradient on 1 and 3 fake devices under a memory
// limit of limit bytes and records of 4 rows first (chunks and reruns),
// against one device without the limit, bit for bit.
func multiChunks(t *testing.T, name string, c engineCase, limit int64) {
	t.Helper()
	j := multiJob(t, c, "grad", nil)
	want, _ := runOn(t, fakeMultis[1], j, nil)
	j.MemoryLimit = limit
	for _, devices := range []int{1, 3} {
		var tr Trace
		e := fakeMulti(fmt.Sprintf("%s-%d", name, devices), devices, 1<<30, Float64)
		e.SetTuning(Tuning{firstRows: 4})
		x, err := e.Prepare(j.Plan)
		if err != nil {
			t.Fatal(err)
		}
		got, err := x.Run(WithTrace(t.Context(), &tr), j)
		if err != nil {
			t.Fatal(err)
		}
		s := tr.Stats()
		t.Logf("%d devices: %+v", devices, s)
		if s.Launches < 2*devices+1 || s.Reruns == 0 {
			t.Errorf("%d devices: %d launches, %d reruns: want chunks and reruns", devices, s.Launches, s.Reruns)
		}
		sameResult(t, fmt.Sprintf("chunked on %d devices", devices), got, want)
	}
}

// TestMultiAgainstCPU compares the engine on 3 fake devices with the CPU
// engine through ode.Solver (every operation; states and gradients within
// rounding, the same steps).
func TestMultiAgainstCPU(t *testing.T) {
	needHost(t)
	t.Parallel()
	lanes := mlpCase(40, []int{2, 24, 24, 2})
	lanes.name = "mlp-lanes"
	for _, c := range []engineCase{lorenzSharedCase(45), mlpCase(40, []int{2, 5, 2}), lanes} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			compareEngines(t, "cuda-multi-host3", c, caseOpts{})
		})
	}
}

// TestMultiFit runs a fit of the shared parameters (σ, β of Lorenz) on 1
// and 3 fake devices through package fit, which only names the engine in
// ode.Settings: the loss history and the fitted values are bitwise the
// same, and the loss falls.
func TestMultiFit(t *testing.T) {
	needHost(t)
	t.Parallel()
	c := lorenzSharedCase(29)
	// Observations: the final states at σ = 10, β = 8/3; the fit starts
	// from σ = 9, β = 2.5.
	truth := c.prob
	sol, err := c.solver(t, "cpu").Solve(&truth)
	if err != nil {
		t.Fatal(err)
	}
	p := c.prob
	p.Shared = []float64{9, 2.5}
	loss := fitMSE(sol.Y)
	var runs []*fit.Result
	for _, engine := range []string{"cuda-multi-host1", "cuda-multi-host3"} {
		set := c.set
		set.Engine = engine
		res, err := fit.Fit(t.Context(), fit.Problem{ODE: p, Loss: loss, Vars: fit.Vars{Shared: true}}, &set,
			&fit.Settings{Steps: 6, Optimizer: &optim.Adam{LearnRate: 0.05}})
		if err != nil {
			t.Fatalf("%s: %v", engine, err)
		}
		runs = append(runs, res)
	}
	a, b := runs[0], runs[1]
	if ok, i := bitsEqual(b.History, a.History); !ok {
		t.Errorf("loss history on 3 devices differs from 1 device at step %d: %v vs %v", i, b.History, a.History)
	}
	if ok, _ := bitsEqual(b.X, a.X); !ok || math.Float64bits(a.FinalLoss) != math.Float64bits(b.FinalLoss) {
		t.Errorf("fitted values %v (final loss %v) on 3 devices, %v (%v) on 1", b.X, b.FinalLoss, a.X, a.FinalLoss)
	}
	if !(a.FinalLoss < a.History[0]) {
		t.Errorf("the loss did not fall: %v → %v", a.History[0], a.FinalLoss)
	}
}

// TestMultiProgressAndErrors: progress adds up over the devices to N;
// a failing device's error is returned (not the cancellation of the
// others), naming the device.
func TestMultiProgressAndErrors(t *testing.T) {
	needHost(t)
	t.Parallel()
	c := lorenzSharedCase(45)
	j := multiJob(t, c, "solve", nil)
	var seen []int
	j.Progress = func(done, total int) {
		if total != 45 {
			t.Errorf("progress total %d, want 45", total)
		}
		seen = append(seen, done)
	}
	runOn(t, fakeMultis[3], j, nil)
	if len(seen) == 0 || seen[len(seen)-1] != 45 || !slices.IsSorted(seen) {
		t.Errorf("progress %v: want increasing to 45", seen)
	}

	broken := fakeMulti("cuda-multi-broken", 3, 1<<30, Float64)
	boom := errors.New("boom")
	broken.devs[1].be.(*fakeDevice).fail = boom
	x, err := broken.Prepare(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	j.Progress = nil
	_, err = x.Run(t.Context(), j)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "device 1") {
		t.Errorf("error %v, want boom from device 1", err)
	}
}

// TestSplitShards checks the shard boundaries: contiguous, covering all
// trajectories, on multiples of scan.TileSize (or N), each within half a
// tile of its exact proportion.
func TestSplitShards(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		w    []float64
		want []int
	}{
		{45, []float64{1}, []int{0, 45}},
		{45, []float64{1, 1, 1}, []int{0, 16, 32, 45}},
		{64, []float64{1, 1}, []int{0, 32, 64}},
		{64, []float64{3, 1}, []int{0, 48, 64}},
		{5, []float64{1, 1, 1}, []int{0, 0, 0, 5}},
		{13, []float64{1, 1}, []int{0, 8, 13}},
		{0, []float64{1, 2}, []int{0, 0, 0}},
		{1 << 20, []float64{1, 1, 2}, []int{0, 1 << 18, 1 << 19, 1 << 20}},
	} {
		if got := splitShards(tc.n, tc.w); !slices.Equal(got, tc.want) {
			t.Errorf("splitShards(%d, %v) = %v, want %v", tc.n, tc.w, got, tc.want)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 200 {
		n := r.IntN(5000)
		w := make([]float64, 1+r.IntN(8))
		total := 0.0
		for k := range w {
			w[k] = 0.1 + r.Float64()
			total += w[k]
		}
		b := splitShards(n, w)
		if len(b) != len(w)+1 || b[0] != 0 || b[len(w)] != n {
			t.Fatalf("splitShards(%d, %v) = %v: does not cover [0, %d)", n, w, b, n)
		}
		acc := 0.0
		for k := range w {
			acc += w[k]
			if b[k+1] < b[k] || (b[k+1] != n && b[k+1]%scan.TileSize != 0) {
				t.Fatalf("splitShards(%d, %v) = %v: boundary %d", n, w, b, k+1)
			}
			if exact := float64(n) * acc / total; math.Abs(float64(b[k+1])-exact) > scan.TileSize/2 {
				t.Fatalf("splitShards(%d, %v) = %v: boundary %d is %d, exact %.1f", n, w, b, k+1, b[k+1], exact)
			}
		}
	}
}

// TestBalancer: the split follows the measured time per trajectory; a
// device not yet measured counts as the mean of the others.
func TestBalancer(t *testing.T) {
	t.Parallel()
	b := newBalancer(3)
	if got := b.split(96); !slices.Equal(got, []int{0, 32, 64, 96}) {
		t.Errorf("first split %v, want even", got)
	}
	// Device 1 took twice as long per trajectory as device 0; device 2
	// ran nothing.
	b.observe(0, 32, 32*time.Millisecond)
	b.observe(1, 32, 64*time.Millisecond)
	b.observe(2, 0, 0)
	// Speeds 1, 0.5 and (the mean) 0.75 of 2.25: 42.7, 21.3, 32 → tiles.
	if got := b.split(96); !slices.Equal(got, []int{0, 40, 64, 96}) {
		t.Errorf("split after measuring %v, want [0 40 64 96]", got)
	}
}

// TestGather assembles three shards' synthetic results and checks that
// every per-trajectory array, the merged step-major mesh, the loss terms
// and the tiles land in order, and the sums are those of the whole.
func TestGather(t *testing.T) {
	t.Parallel()
	const n, d, ns = 29, 2, 3
	j := &ode.Job{Op: ode.OpGrad, N: n, Loss: &ode.LossPlan{Scale: 0.5}}
	v := kernelgen.Config{Adaptive: true, MeshOut: true, Store: true, Grad: true, TileSums: true}
	bounds := []int{0, 8, 24, 29}
	val := func(i, c int) float64 { return float64(100*i + c) }
	var shards []*shard
	for k := 0; k < 3; k++ {
		lo, hi := bounds[k], bounds[k+1]
		m := hi - lo
		r := &run{v: v, d: d, ns: ns, res: &ode.Result{}}
		res := r.res
		res.Status = make([]ode.Status, m)
		res.T, res.LastH, r.terms = make([]float64, m), make([]float64, m), make([]float64, m)
		res.Stiff = make([]bool, m)
		res.Stats = ode.Stats{Accepted: make([]int, m), Rejected: make([]int, m), FieldEvals: make([]int, m)}
		res.Y, res.GradY0, res.GradP = make([]float64, m*d), make([]float64, m*d), []float64{}
		rows := 0
		for q := 0; q < m; q++ {
			i := lo + q
			res.T[q], res.LastH[q], r.terms[q] = val(i, 0), val(i, 1), val(i, 2)
			res.Stiff[q] = i%3 == 0
			res.Stats.Accepted[q], res.Stats.Rejected[q], res.Stats.FieldEvals[q] = 1+i%5, i%2, i
			rows = max(rows, 1+i%5)
			for c := 0; c < d; c++ {
				res.Y[q*d+c], res.GradY0[q*d+c] = val(i, 3+c), val(i, 5+c)
			}
		}
		// The shard's mesh buffer has a spare row, as a launch's may.
		r.meshH = make([]float64, (rows+1)*m)
		for s := 0; s < rows; s++ {
			for q := 0; q < m; q++ {
				if i := lo + q; s < 1+i%5 {
					r.meshH[s*m+q] = val(i, 10+s)
				}
			}
		}
		r.tiles = make([]float64, numTiles(m)*2*ns)
		for q := range r.tiles {
			r.tiles[q] = float64(lo/scan.TileSize*2*ns + q)
		}
		r.stored = int64(1000 * (k + 1))
		shards = append(shards, &shard{dev: k, lo: lo, hi: hi, r: r})
	}
	g := gather(j, shards)
	res, err := g.finish(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if res.T[i] != val(i, 0) || res.LastH[i] != val(i, 1) || res.Stiff[i] != (i%3 == 0) ||
			res.Y[i*d+1] != val(i, 4) || res.GradY0[i*d] != val(i, 5) || res.Stats.FieldEvals[i] != i {
			t.Errorf("trajectory %d out of place", i)
		}
		m := res.Mesh
		for s := 0; s < m.Rows; s++ {
			want := 0.0
			if s < 1+i%5 {
				want = val(i, 10+s)
			}
			if m.H[s*n+i] != want {
				t.Errorf("mesh row %d of trajectory %d: %v, want %v", s, i, m.H[s*n+i], want)
			}
		}
	}
	if res.Mesh.Rows != 5 || res.Mesh.N != n || len(res.Mesh.H) != 5*n {
		t.Errorf("mesh %d×%d (len %d), want 5×%d", res.Mesh.Rows, res.Mesh.N, len(res.Mesh.H), n)
	}
	terms := 0.0
	for i := 0; i < n; i++ {
		terms += val(i, 2)
	}
	if res.Loss != 0.5*terms {
		t.Errorf("loss %v, want %v", res.Loss, 0.5*terms)
	}
	// Tile k holds 6k … 6k+5: steps 6k+c, loss 6k+3+c.
	per := make([]float64, numTiles(n)*ns)
	for k := 0; k < numTiles(n); k++ {
		for c := 0; c < ns; c++ {
			per[k*ns+c] = float64(6*k+c) + 0.5*float64(6*k+3+c)
		}
	}
	if want := scan.SumTiles(nil, per, ns); !slices.Equal(res.GradS, want) {
		t.Errorf("shared gradient %v, want %v", res.GradS, want)
	}
	if res.StoredBytes != 6000 {
		t.Errorf("stored bytes %d, want the sum 6000", res.StoredBytes)
	}
}

// TestSubJob: a shard's job views its trajectories' rows and copies its
// part of the mesh step-major.
func TestSubJob(t *testing.T) {
	t.Parallel()
	const n = 20
	mesh := &ode.Mesh{N: n, Rows: 4, H: make([]float64, 4*n), Len: make([]int, n)}
	for i := 0; i < n; i++ {
		mesh.Len[i] = i % 5
		for s := 0; s < mesh.Len[i]; s++ {
			mesh.H[s*n+i] = float64(10*i + s)
		}
	}
	j := &ode.Job{Plan: &ode.Plan{Dim: 2, Params: 1}, N: n, T1: make([]float64, n), Y0: make([]float64, 2*n), P: make([]float64, n),
		Mesh: mesh, Loss: &ode.LossPlan{DataDim: 3, Data: make([]float64, 3*n)}}
	for i := range j.Y0 {
		j.Y0[i] = float64(i)
	}
	s := subJob(j, 8, 16, nil)
	if s.N != 8 || len(s.T1) != 8 || len(s.P) != 8 || len(s.Loss.Data) != 24 || s.Y0[0] != 16 || len(s.Y0) != 16 {
		t.Errorf("sub-job: N %d, %d T1, %d P, %d data, Y0[0] %v", s.N, len(s.T1), len(s.P), len(s.Loss.Data), s.Y0[0])
	}
	m := s.Mesh
	if m.N != 8 || m.Rows != 4 {
		t.Fatalf("sub-mesh %d×%d, want 4×8", m.Rows, m.N)
	}
	for q := 0; q < 8; q++ {
		for r := 0; r < m.Len[q]; r++ {
			if m.H[r*8+q] != float64(10*(8+q)+r) {
				t.Errorf("sub-mesh step %d of trajectory %d: %v", r, q, m.H[r*8+q])
			}
		}
	}
	if j.Loss.Data == nil || len(j.Loss.Data) != 3*n {
		t.Errorf("the job's loss was changed")
	}
}

func TestParseDevices(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want []int
		err  bool
	}{
		{"0", []int{0}, false},
		{"0,2", []int{0, 2}, false},
		{" 3 , 1 ", []int{3, 1}, false},
		{"0,,1", nil, true},
		{"a", nil, true},
		{"-1", nil, true},
		{"1,1", nil, true},
	} {
		got, err := parseDevices(tc.s)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("parseDevices(%q) = %v, %v; want %v (error %v)", tc.s, got, err, tc.want, tc.err)
		}
	}
	t.Setenv(devicesEnv, "1,0")
	if got, err := NewMultiEngine("x", nil, Float64).Devices(); err != nil || !slices.Equal(got, []int{1, 0}) {
		t.Errorf("Devices with %s=1,0: %v, %v", devicesEnv, got, err)
	}
	if got, err := NewMultiEngine("x", []int{2}, Float64).Devices(); err != nil || !slices.Equal(got, []int{2}) {
		t.Errorf("Devices of ordinals [2]: %v, %v", got, err)
	}
}

// tileSimMain runs the tile reductions (GS_TILES) of the warp collectives
// on a simulated warp and prints, per check, the number of mismatches:
// each tile's sums bitwise against the documented butterfly computed
// serially; tiles without an active lane untouched; a tile's sums bitwise
// unchanged when the other tiles' values and flags change.
const tileSimMain = `
static unsigned __ballot_sync(unsigned, bool p) {
  const int lane = threadIdx.x & 31;
  gs_sim_slot[lane] = p ? 1 : 0;
  gs_sim_bar->arrive_and_wait();
  unsigned m = 0;
  for (int l = 0; l < 32; l++) if (gs_sim_slot[l] != 0) m |= 1u << l;
  gs_sim_bar->arrive_and_wait();
  return m;
}
` + "#include \"prelude\"\n" + `
static double val(int lane, int k, int salt) { return (double)((lane * 7919 + k * 104729 + salt * 31) % 1000) / 7.0 - 50.0 + 1e-9 * lane; }
// Lanes 8-15 (tile 1) are all off; the others mostly on.
static bool onOf(int lane, int salt) { return lane / 8 != 1 && (lane * 37 + salt) % 5 != 0; }
const int NS = 45;  // gs_warp_add<NS>: a group of 32 and one of 13 (gs_acc32)
static double acc3[4][3], accNS[4][NS];
static void run(int salt) {
  std::barrier<> bar(32);
  gs_sim_bar = &bar;
  for (int t = 0; t < 4; t++) {
    for (int k = 0; k < 3; k++) acc3[t][k] = -0.0;
    for (int k = 0; k < NS; k++) accNS[t][k] = -0.0;
  }
  std::vector<std::thread> th;
  for (int lane = 0; lane < 32; lane++) th.emplace_back([&, lane] {
    threadIdx.x = lane;
    double x[NS];
    for (int k = 0; k < NS; k++) x[k] = val(lane, k, (lane / 8 == 2) ? 0 : salt);
    const bool on = (lane / 8 == 2) ? onOf(lane, 0) : onOf(lane, salt);
    gs_warp_add<3>(acc3[lane / 8], x, on);
    gs_warp_add<NS>(accNS[lane / 8], x, on);
  });
  for (auto& t : th) t.join();
}
// butterfly returns the sum of entry k over the lanes of tile t as the
// device code forms it: x[l] = x[l] + x[l^w] for w = 4, 2, 1, at lane 0.
static double butterfly(int t, int k, int salt) {
  double x[8];
  for (int l = 0; l < 8; l++) {
    const int lane = 8 * t + l;
    const int s = (t == 2) ? 0 : salt;
    x[l] = onOf(lane, s) ? val(lane, k, s) : 0.0;
  }
  for (int w = 4; w >= 1; w >>= 1) {
    double y[8];
    for (int l = 0; l < 8; l++) y[l] = x[l] + x[l ^ w];
    for (int l = 0; l < 8; l++) x[l] = y[l];
  }
  return x[0];
}
// transposed returns the same sum as gs_acc32 forms it: entry k of a
// block of 8 is kept, at each level w, by the lanes whose bit w matches
// bit w of k, each adding its partner's value to its own.
static double transposed(int t, int k, int salt) {
  double x[8][8];
  const int b = k - k % 8;
  for (int l = 0; l < 8; l++) {
    const int lane = 8 * t + l;
    const int s = (t == 2) ? 0 : salt;
    for (int e = 0; e < 8; e++) x[l][e] = (onOf(lane, s) && b + e < NS) ? val(lane, b + e, s) : 0.0;
  }
  for (int w = 4; w >= 1; w >>= 1) {
    double y[8][8];
    for (int l = 0; l < 8; l++) {
      const bool upper = (l & w) != 0;
      for (int e = 0; e < w; e++) {
        const double keep = upper ? x[l][e + w] : x[l][e];
        const double recv = upper ? x[l ^ w][e + w] : x[l ^ w][e];
        y[l][e] = keep + recv;
      }
    }
    for (int l = 0; l < 8; l++) for (int e = 0; e < w; e++) x[l][e] = y[l][e];
  }
  return x[k % 8][0];
}
static bool same(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }
int main() {
  int order = 0, idle = 0, isolated = 0;
  run(1);
  double keep3[3], keepNS[NS];
  for (int k = 0; k < 3; k++) keep3[k] = acc3[2][k];
  for (int k = 0; k < NS; k++) keepNS[k] = accNS[2][k];
  for (int t = 0; t < 4; t++) {
    for (int k = 0; k < 3; k++) {
      if (t == 1) idle += !same(acc3[t][k], -0.0);
      else order += !same(acc3[t][k], -0.0 + butterfly(t, k, 1));
    }
    for (int k = 0; k < NS; k++) {
      if (t == 1) idle += !same(accNS[t][k], -0.0);
      else order += !same(accNS[t][k], -0.0 + transposed(t, k, 1));
    }
  }
  run(2);  // other values and flags in tiles 0, 1 and 3; tile 2 as before
  for (int k = 0; k < 3; k++) isolated += !same(acc3[2][k], keep3[k]);
  for (int k = 0; k < NS; k++) isolated += !same(accNS[2][k], keepNS[k]);
  printf("%d %d %d\n", order, idle, isolated);
  return 0;
}
`

// TestTileCollectives runs the device code of the tile reductions
// (GS_TILES) on a warp simulated with threads: each tile's sums are
// exactly the documented butterfly of its own lanes (so they do not depend
// on the rest of the warp, block or launch), and a tile with no active
// lane adds nothing.
func TestTileCollectives(t *testing.T) {
	t.Parallel()
	cc := gxx(t)
	dir := t.TempDir()
	pre := fmt.Sprintf("#include <string.h>\n#define GS_TILES 1\n#define GS_TILE %d\n", scan.TileSize)
	if err := os.WriteFile(filepath.Join(dir, "prelude"), []byte(kernelgen.NewSource(nil).String()), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "tiles.cpp")
	if err := os.WriteFile(file, []byte(pre+warpSim+tileSimMain), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "tiles")
	if out, err := exec.Command(cc, "-std=c++20", "-O1", "-pthread", "-ffp-contract=off", "-w", "-o", exe, file).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, firstLines(string(out), 30))
	}
	out, err := exec.Command(exe).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var order, idle, isolated int
	if _, err := fmt.Sscan(string(out), &order, &idle, &isolated); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if order != 0 || idle != 0 || isolated != 0 {
		t.Errorf("tile sums: %d differ from the butterfly, %d written by idle tiles, %d changed with other tiles", order, idle, isolated)
	}
}

// ExampleMultiEngine shows how to run on several GPUs: name the engine in
// the solver settings (here with a fallback to the CPU where there is no
// GPU). GRADSOLVE_CUDA_DEVICES=0,2 restricts it to GPUs 0 and 2.
func ExampleMultiEngine() {
	engine := "cuda-multi"
	if err := NewMultiEngine("probe", nil, Float64).Available(); err != nil {
		engine = "cpu"
	}
	set := &ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, AbsTol: 1e-10, Engine: engine}
	field := ode.Field{Name: "decay", Dim: 1, Shared: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Neg()}
	}}
	prob := ode.Problem{Field: field, N: 1000, Y0: []float64{1}, Shared: []float64{2}, T1: 1}
	g, err := ode.Grad(nil, prob, ode.SumSquares(), nil, set)
	if err != nil {
		fmt.Println(err)
		return
	}
	// L = N·e^(−2k), dL/dk = −2N·e^(−2k) at k = 2.
	fmt.Printf("dL/dk = %.4f (exact %.4f)\n", g.Shared[0], -2000*math.Exp(-4))
	// Output:
	// dL/dk = -36.6313 (exact -36.6313)
}

// TestNVRTCTileKernels compiles the tile-mode gradient kernels of Lorenz
// with shared parameters (per-entry butterflies) and of an MLP field
// (22 weights: accumulating functions, 32 entries at a time) with NVRTC
// to PTX, and checks that they hold warp shuffles and no atomic
// instruction (atom, red), where the one-GPU engine's kernel of the same
// job does have atomics. It needs NVRTC, not a GPU.
func TestNVRTCTileKernels(t *testing.T) {
	needNVRTC(t)
	t.Parallel()
	ptx := func(c engineCase, tiles bool) string {
		start := time.Now()
		j := jobOf(t, c, ode.OpGrad)
		sp, err := kernelgen.NewStepPrograms(j.Plan)
		if err != nil {
			t.Fatal(err)
		}
		v := kernelgen.ConfigOf(j)
		v.TileSums = tiles
		src, _, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
		if err != nil {
			t.Fatal(err)
		}
		code := compilePTX(t, src, fmt.Sprintf("%s-tiles-%v", c.name, tiles))
		t.Logf("%s (tiles %v): %v", c.name, tiles, time.Since(start))
		return code
	}
	atomic := regexp.MustCompile(`(?m)^\s*(@\S+\s+)?(atom|red)\.`)
	atomics := func(code string) int { return len(atomic.FindAllString(code, -1)) }
	for _, c := range []engineCase{lorenzSharedCase(8), mlpCase(8, []int{2, 4, 2})} {
		code := ptx(c, true)
		if n := atomics(code); n != 0 || !strings.Contains(code, "shfl.sync.bfly") {
			t.Errorf("%s: the tile kernel has %d atomic instructions and shuffles %v; want none and some", c.name, n, strings.Contains(code, "shfl.sync.bfly"))
		}
	}
	if n := atomics(ptx(lorenzSharedCase(8), false)); n == 0 {
		t.Errorf("the one-GPU kernel has no atomic instruction: the check above proves nothing")
	}
}

// TestGPUMultiEngine runs MultiEngine on the GPUs (skipped without one):
// on every visible GPU (on one GPU, two shards on it, each with its own
// Device), evenly and skewed, every result bitwise that of GPU 0 alone,
// and close to the CPU engine's; for Lorenz with shared parameters, a
// small MLP and a network in lanes mode.
func TestGPUMultiEngine(t *testing.T) {
	needGPUEngine(t)
	one, many, skew := gpuMultiEngines(t)
	ords, _ := many.Devices()
	t.Logf("devices %v", ords)
	lanes := mlpCase(1029, []int{2, 32, 32, 2})
	lanes.name = "mlp-lanes"
	for _, c := range []engineCase{lorenzSharedCase(4099), mlpCase(1027, []int{2, 8, 2}), lanes} {
		rec, _ := runOn(t, one, multiJob(t, c, "record", nil), nil)
		for _, op := range []string{"solve", "record", "grad", "gradmesh"} {
			j := multiJob(t, c, op, rec.Mesh)
			want, _ := runOn(t, one, j, nil)
			for _, per := range [][]float64{nil, skew} {
				got, bounds := runOn(t, many, j, per)
				sameResult(t, fmt.Sprintf("%s %s, shards %v", c.name, op, bounds), got, want)
			}
		}
	}
	compareEngines(t, "gpu-multi-test", lorenzSharedCase(4099), caseOpts{knife: knife(4099), ops: []string{"solve", "grad", "gradmesh"}})
	compareEngines(t, "gpu-multi-test", lanes, caseOpts{knife: knife(lanes.prob.N), ops: []string{"grad", "gradmesh"}})
}

var (
	gpuMultiOnce            sync.Once
	gpuMultiOne, gpuMultiOn *MultiEngine
)

// gpuMultiEngines returns the MultiEngines of the GPU tests: one on GPU 0
// alone and one registered as "gpu-multi-test" on every visible GPU (on
// one GPU, two shards on it, each with its own Device), and the skewed
// per-trajectory times of the latter's devices.
func gpuMultiEngines(t *testing.T) (one, many *MultiEngine, skew []float64) {
	t.Helper()
	n, err := driver.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	ords := make([]int, max(n, 2)) // one GPU: [0 0]
	for k := range ords {
		ords[k] = k % n
	}
	gpuMultiOnce.Do(func() {
		gpuMultiOne = NewMultiEngine("gpu-multi-one", []int{0}, Float64)
		gpuMultiOn = NewMultiEngine("gpu-multi-test", ords, Float64)
		ode.Register(gpuMultiOn)
	})
	skew = make([]float64, len(ords))
	for k := range skew {
		skew[k] = float64(1 + k%3)
	}
	return gpuMultiOne, gpuMultiOn, skew
}

// TestGPUMultiEvents runs problems with events on MultiEngine on the GPUs
// (skipped without one): every operation of the driven balls (a shared
// parameter) and of the threshold with save times, evenly and skewed,
// bitwise that of GPU 0 alone; then the event tests against the CPU
// engine, as TestGPUEvents runs them on "cuda".
func TestGPUMultiEvents(t *testing.T) {
	needGPUEngine(t)
	one, many, skew := gpuMultiEngines(t)
	for _, c := range []engineCase{drivenBallCase(4099, ode.Tsit5), withSaves(pkCase(4099, ode.Vern7), 5, 1)} {
		rec, _ := runOn(t, one, multiJob(t, c, "record", nil), nil)
		for _, op := range []string{"solve", "record", "loss", "grad", "replay", "gradmesh"} {
			j := multiJob(t, c, op, rec.Mesh)
			want, _ := runOn(t, one, j, nil)
			for _, per := range [][]float64{nil, skew} {
				got, bounds := runOn(t, many, j, per)
				sameResult(t, fmt.Sprintf("%s %s, shards %v", c.name, op, bounds), got, want)
			}
		}
	}
	testEvents(t, many.Name(), 2048, []ode.Method{ode.Tsit5, ode.Rodas5P}, true)
	t.Run("save-edges", func(t *testing.T) { testEventSavesEdges(t, many.Name()) })
}
