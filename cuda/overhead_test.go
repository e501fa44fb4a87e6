package cuda

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/fit"
	"github.com/gradsolve-go/gradsolve/internal/cputime"
	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// nullBackend is the host backend with kernels that do no work: every
// trajectory "takes" nullSteps steps of size 1/nullSteps and ends OK. It
// measures what a call costs outside the kernels.
type nullBackend struct{ *hostBackend }

const nullSteps = 20

type nullKernel struct{}

func (nullKernel) maxBlock() int { return 0 }

func (b nullBackend) compile(src, name string, opts []string) (backendKernel, error) {
	return nullKernel{}, nil
}

// fake writes what a kernel launch with args would: every trajectory
// took nullSteps steps of 1/nullSteps and reached t = 1.
func (b nullBackend) fake(args []uint64) {
	n := int(args[argN])
	rows := int(args[argRows])
	first, end := int(args[argFirst]), int(args[argEnd])
	if args[argAcc] != 0 {
		m, _, off := b.at(args[argAcc])
		for i := first; i < end; i++ {
			binary.LittleEndian.PutUint32(m[off+uint64(4*i):], nullSteps)
		}
	}
	if args[argHout] != 0 {
		m, _, off := b.at(args[argHout])
		for s := 0; s < min(rows, nullSteps); s++ {
			for i := first; i < end; i++ {
				binary.LittleEndian.PutUint64(m[off+uint64(8*(s*n+i)):], math.Float64bits(1.0/nullSteps))
			}
		}
		// The rows past the steps that the kernel zeroes (solve.cuh).
		for s := nullSteps; s < int(args[argZRows]); s++ {
			clear(m[off+uint64(8*(s*n+first)) : off+uint64(8*(s*n+end))])
		}
	}
	if args[argEvOut] != 0 {
		// No step ends at an event; rows past the steps zeroed as above.
		m, _, off := b.at(args[argEvOut])
		for s := range min(max(nullSteps, int(args[argZRows])), rows) {
			clear(m[off+uint64(4*(s*n+first)) : off+uint64(4*(s*n+end))])
		}
	}
	if args[argT] != 0 {
		m, _, off := b.at(args[argT])
		for i := first; i < end; i++ {
			binary.LittleEndian.PutUint64(m[off+uint64(8*i):], math.Float64bits(1))
		}
	}
}

// batch runs f on a queue whose launches only fake their results.
func (b nullBackend) batch(f func(q queue) error) error {
	return f(nullQueue{hostQueue{b.hostBackend}, b})
}

type nullQueue struct {
	hostQueue
	b nullBackend
}

func (q nullQueue) enqueue(bk backendKernel, threads, block, shmem int, args []uint64) error {
	if len(args) == numSavesWords {
		return nil // the saves kernel (saves.cuh): no work either
	}
	q.b.fake(args)
	return nil
}

var nullF64 = &Engine{name: "cuda-null", prec: Float64, be: nullBackend{newHostBackend(16 << 30)}}

func init() { ode.Register(nullF64) }

// BenchmarkCallOverhead measures a whole Solver.Grad call (record
// included, or on a given mesh) of the Lorenz protocol on kernels that do no work: what the
// engine and package ode cost around the kernels.
func BenchmarkCallOverhead(b *testing.B) {
	b.Run("record", func(b *testing.B) { benchCallOverhead(b, false) })
	b.Run("mesh", func(b *testing.B) { benchCallOverhead(b, true) })
	b.Run("neural", benchCallOverheadNeural)
}

// benchCallOverheadNeural is a gradient call (record included) of 65,536
// trajectories of the neural suite's network (2-32-32-2, 1,218 shared
// weights, a mean loss against per-trajectory targets) on kernels that do
// no work.
func benchCallOverheadNeural(b *testing.B) {
	c := mlpCase(1<<16, []int{2, 32, 32, 2})
	set := c.set
	set.Engine = "cuda-null"
	sv, err := ode.NewSolver(c.prob.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	var g ode.Gradient
	if _, err := sv.GradContext(context.Background(), &g, &c.prob, c.loss, nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := sv.GradContext(context.Background(), &g, &c.prob, c.loss, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func benchCallOverhead(b *testing.B, mesh bool) { benchCallOn(b, "cuda-null", mesh) }

// benchCallOn times Solver.Grad of 2^20 Lorenz trajectories on engine,
// with the record or on the mesh of an earlier call, a Gradient passed
// back.
func benchCallOn(b *testing.B, engine string, mesh bool) { benchCallOmit(b, engine, mesh, 0) }

// benchCallOmit is benchCallOn with Gradient.Omit o on the timed calls.
func benchCallOmit(b *testing.B, engine string, mesh bool, o ode.Omit) {
	benchCallN(b, 1<<20, engine, mesh, o)
}

// benchCallN is benchCallOmit of n trajectories.
func benchCallN(b *testing.B, n int, engine string, mesh bool, o ode.Omit) {
	b.ReportAllocs()
	c := lorenzCallCase(n)
	prob, loss := c.prob, c.loss
	c.set.Engine = engine
	sv, err := ode.NewSolver(prob.Field, &c.set)
	if err != nil {
		b.Fatal(err)
	}
	var g ode.Gradient
	if _, err := sv.GradContext(context.Background(), &g, &prob, loss, nil); err != nil {
		b.Fatal(err)
	}
	var m *ode.Mesh
	if mesh {
		m = g.Mesh
	}
	g2 := ode.Gradient{Omit: o}
	b.ResetTimer()
	for range b.N {
		if _, err := sv.GradContext(context.Background(), &g2, &prob, loss, m); err != nil {
			b.Fatal(err)
		}
	}
}

// lorenzCallCase is the Lorenz ensemble of the call benchmarks: n
// trajectories from (1, 0, 0) with ρ spread over [0, 21], to T = 1, Tsit5
// at rtol 1e-4, loss Σ y².
func lorenzCallCase(n int) engineCase {
	pr := problems.Lorenz()
	p := make([]float64, 3*n)
	for i := range n {
		p[3*i], p[3*i+1], p[3*i+2] = 10, 21*float64(i)/float64(n-1), 8.0/3
	}
	return engineCase{
		name: "lorenz",
		prob: ode.Problem{Field: pr.Field, N: n, Y0: []float64{1, 0, 0}, P: p, T0: 0, T1: 1},
		set:  ode.Settings{Method: ode.Tsit5, RelTol: 1e-4, AbsTol: 1e-7},
		loss: ode.SumSquares(),
	}
}

// TestHostEngineReuse checks on the host engine that a Gradient passed
// back to Grad is filled in place (its mesh's device memory, solution,
// gradients) and equals a fresh call's result bit for bit, after a longer
// mesh (stale steps must read 0) and after a shorter one (the storage
// grows).
func TestHostEngineReuse(t *testing.T) {
	f := problems.Lorenz().Field
	prob := func(n int) *ode.Problem {
		p := make([]float64, 3*n)
		for i := range n {
			p[3*i], p[3*i+1], p[3*i+2] = 10, 20+float64(i%7), 8.0/3
		}
		return &ode.Problem{Field: f, N: n, Y0: []float64{1, 0, 0}, P: p, T1: 1}
	}
	solver := func(rtol float64) *ode.Solver {
		sv, err := ode.NewSolver(f, &ode.Settings{Method: ode.Tsit5, RelTol: rtol, AbsTol: rtol * 1e-3, Engine: hostF64.name})
		if err != nil {
			t.Fatal(err)
		}
		return sv
	}
	long, short := solver(1e-8), solver(1e-4)
	loss := ode.SumSquares()
	var g ode.Gradient
	for k, c := range []struct {
		sv     *ode.Solver
		n      int
		reused bool
	}{{long, 40, false}, {short, 40, true}, {long, 40, false}, {short, 33, true}} {
		p := prob(c.n)
		want, err := c.sv.Grad(nil, p, loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		var old ode.ResidentSteps
		if g.Mesh != nil {
			old = g.Mesh.Resident
		}
		if _, err := c.sv.Grad(&g, p, loss, nil); err != nil {
			t.Fatal(err)
		}
		if g.Mesh.Resident == nil || g.Mesh.H != nil {
			t.Fatalf("case %d: the mesh is not resident on the device (Resident %v, len(H) %d)", k, g.Mesh.Resident, len(g.Mesh.H))
		}
		if c.reused && g.Mesh.Resident != old {
			t.Errorf("case %d: the mesh's device memory was reallocated", k)
		}
		steps := make([]float64, g.Mesh.Rows*g.Mesh.N)
		if err := g.Mesh.Resident.CopyTo(steps); err != nil {
			t.Fatal(err)
		}
		hostMesh(t, want.Mesh)
		if g.Loss != want.Loss || !slices.Equal(g.P, want.P) || !slices.Equal(g.Y0, want.Y0) ||
			!slices.Equal(g.Solution.Y, want.Solution.Y) || !slices.Equal(steps, want.Mesh.H) ||
			!slices.Equal(g.Mesh.Len, want.Mesh.Len) || g.Mesh.Rows != want.Mesh.Rows ||
			!slices.Equal(g.Solution.Stats.Rejected, want.Solution.Stats.Rejected) {
			t.Errorf("case %d: the reused result differs from a fresh one (rows %d, want %d)", k, g.Mesh.Rows, want.Mesh.Rows)
		}
	}
}

// stagingEngine is the host engine on a backend of its own, so that a
// test can count the staging memory its executors take and give back.
var stagingEngine = &Engine{name: "cuda-host-staging", prec: Float64,
	be: &fakeDevice{hostBackend: newHostBackend(1 << 30), kernels: hostF64.be.(*hostBackend)}}

func init() { ode.Register(stagingEngine) }

// TestHostEngineStaging checks that the executor stages copies in the
// backend's host memory (page-locked on a GPU), keeps at most two staging
// buffers and two chunk buffers per executor, gives every buffer it drops
// back once, moves meshes through the chunk buffers (4 KiB here, so that
// a mesh takes many), and gives all it keeps back, device memory too, once
// its solver is gone: over launches of several sizes (chunks, reruns,
// meshes given and recorded), with results bitwise those of the host
// engine.
func TestHostEngineStaging(t *testing.T) {
	needHost(t)
	fd := stagingEngine.be.(*fakeDevice)
	held := func() (int, int64) {
		bufs, _, _, err := fd.hostHeld()
		if err != nil {
			t.Error(err)
		}
		fd.mu.Lock()
		defer fd.mu.Unlock()
		return bufs, fd.used
	}
	base, baseUsed := held()
	const chunk = 4 << 10
	defer stagingEngine.SetTuning(Tuning{})
	c := lorenzCase(200, 1e-6)
	want, err := c.solver(t, hostF64.name).Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	hostMesh(t, want.Mesh)
	if b := 8 * len(want.Mesh.H); b < 8*chunk {
		t.Fatalf("the mesh has %d bytes: want several chunks of %d", b, chunk)
	}
	set := c.set
	set.Engine = stagingEngine.name
	for _, limit := range []int64{0, 160 << 10} {
		set.MemoryLimit = limit
		tun := Tuning{meshChunk: chunk}
		if limit > 0 {
			tun.firstRows = 4 // short first records: reruns
		}
		stagingEngine.SetTuning(tun)
		before, _ := held()
		sv, err := ode.NewSolver(c.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		got, st := c.tracedGrad(t, sv)
		onMesh, err := sv.Grad(nil, &c.prob, c.loss, want.Mesh)
		if err != nil {
			t.Fatal(err)
		}
		hostMesh(t, got.Mesh) // a resident mesh (limit 0) comes back through the chunk buffers
		if !slices.Equal(got.P, want.P) || !slices.Equal(got.Mesh.H, want.Mesh.H) || !slices.Equal(onMesh.P, want.P) {
			t.Errorf("memory limit %d: results differ from the host engine's (recorded %t, on the mesh %t)",
				limit, slices.Equal(got.P, want.P) && slices.Equal(got.Mesh.H, want.Mesh.H), slices.Equal(onMesh.P, want.P))
		}
		after, _ := held()
		_, bytes, gets, _ := fd.hostHeld()
		if gets == 0 || after-before > 4 {
			t.Errorf("memory limit %d: %d host buffers taken from the backend, %d more held (%d bytes in all): want some taken, at most 4 more held",
				limit, gets, after-before, bytes)
		}
		t.Logf("memory limit %d: %d host buffers taken, %d held (%d bytes); trace %+v", limit, gets, after, bytes, st)
	}
	// Buffers over Tuning.maxStaging are Go memory: none more is taken.
	func() {
		const maxStaging = 64
		// No chunk buffers either.
		stagingEngine.SetTuning(Tuning{maxStaging: maxStaging, meshChunk: 1 << 40})
		_, _, before, _ := fd.hostHeld()
		set.MemoryLimit = 0
		sv, err := ode.NewSolver(c.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sv.Grad(nil, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.P, want.P) {
			t.Error("staging in Go memory: results differ from the host engine's")
		}
		if _, _, after, _ := fd.hostHeld(); after != before {
			t.Errorf("staging capped at %d bytes: %d buffers taken from the backend, want none", maxStaging, after-before)
		}
	}()
	// The solvers are gone: their executors' memory goes back.
	for range 100 {
		runtime.GC()
		if bufs, used := held(); bufs == base && used == baseUsed {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	bufs, used := held()
	t.Errorf("after the solvers: %d host buffers and %d bytes of device memory held, want %d and %d", bufs, used, base, baseUsed)
}

// noHostMem is a backend that gives no host memory (a driver without
// page-locked memory to spare).
type noHostMem struct{ *fakeDevice }

func (noHostMem) hostAlloc(int64) []byte { return nil }

// TestCopyChunked copies byte arrays of sizes around multiples of the
// chunk size to the device and back through the chunk buffers, and checks
// that a copy reports false (copying nothing) where the buffers are busy
// or the backend gives no host memory.
func TestCopyChunked(t *testing.T) {
	t.Parallel()
	fd := &fakeDevice{hostBackend: newHostBackend(1 << 26), kernels: hostF64.be.(*hostBackend)}
	r := &run{ex: newExecutor(fd, nil, Float64, "copy-test", Tuning{meshChunk: 1000})}
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 999, 1000, 1001, 2000, 2999, 3500} {
		addr, err := fd.alloc(int64(n))
		if err != nil {
			t.Fatal(err)
		}
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rnd.IntN(256))
		}
		if ok, err := r.copyChunked(src, addr, true); !ok || err != nil {
			t.Fatalf("%d bytes to the device: ok %t, err %v", n, ok, err)
		}
		got := make([]byte, n)
		if err := fd.read(got, addr); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, n)
		if ok, err := r.copyChunked(back, addr, false); !ok || err != nil {
			t.Fatalf("%d bytes from the device: ok %t, err %v", n, ok, err)
		}
		if !slices.Equal(got, src) || !slices.Equal(back, src) {
			t.Errorf("%d bytes: to the device equal %t, back equal %t", n, slices.Equal(got, src), slices.Equal(back, src))
		}
		if err := fd.free(addr); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 10)
	r.ex.chunkMu.Lock()
	if ok, _ := r.copyChunked(buf, 0, true); ok {
		t.Error("copyChunked with its buffers busy reports a copy")
	}
	r.ex.chunkMu.Unlock()
	none := &run{ex: newExecutor(noHostMem{fd}, nil, Float64, "copy-test-none", Tuning{meshChunk: 1000})}
	if ok, _ := none.copyChunked(buf, 0, true); ok {
		t.Error("copyChunked without host memory reports a copy")
	}
}

// hostWorkBackend is the null backend with device memory that holds
// nothing: copies, zeroing and kernels cost nothing, so a call on it
// costs only the host's work (checks, staging, the result loop, package
// ode), the part of a whole call that is not the device's or the bus's.
type hostWorkBackend struct {
	nullBackend
	next atomic.Uint64
}

func (b *hostWorkBackend) alloc(n int64) (uint64, error) { return b.next.Add(1) << hostAddrBits, nil }
func (b *hostWorkBackend) free(uint64) error             { return nil }
func (b *hostWorkBackend) write(uint64, []byte) error    { return nil }
func (b *hostWorkBackend) read([]byte, uint64) error     { return nil }
func (b *hostWorkBackend) zero(uint64, int64) error      { return nil }

// batch runs f on a queue that, like the backend, moves nothing.
func (b *hostWorkBackend) batch(f func(q queue) error) error { return f(hostWorkQueue{}) }

type hostWorkQueue struct{}

func (hostWorkQueue) write(uint64, []byte) error                           { return nil }
func (hostWorkQueue) writeQueued(uint64, []byte) error                     { return nil }
func (hostWorkQueue) read([]byte, uint64) error                            { return nil }
func (hostWorkQueue) zero(uint64, int64) error                             { return nil }
func (hostWorkQueue) copyDevice(uint64, uint64, int64) error               { return nil }
func (hostWorkQueue) enqueue(backendKernel, int, int, int, []uint64) error { return nil }
func (hostWorkQueue) mark(clock, bool) error                               { return nil }
func (hostWorkQueue) elapsed(clock) (time.Duration, error)                 { return 0, nil }
func (hostWorkQueue) readAfter(clock, [][]byte, []uint64) (time.Duration, error) {
	return 0, nil
}

var hostWork = &Engine{name: "cuda-hostwork", prec: Float64, be: &hostWorkBackend{nullBackend: nullBackend{newHostBackend(1 << 50)}}}

// slowWorkBackend is hostWorkBackend whose engine kernels take
// slowKernel (a sleep: the host's thread waits for the device, as on a
// GPU), about a Lorenz gradient kernel of 32,768 trajectories on an
// H100: the host work that overlaps a kernel (a compare run ahead of
// it, reuse.go) is hidden, the rest is the host's.
type slowWorkBackend struct{ hostWorkBackend }

func (b *slowWorkBackend) batch(f func(q queue) error) error { return f(slowWorkQueue{}) }

type slowWorkQueue struct{ hostWorkQueue }

func (slowWorkQueue) enqueue(_ backendKernel, _, _, _ int, args []uint64) error {
	if len(args) == numArgs {
		time.Sleep(slowKernel)
	}
	return nil
}

var slowWork = &Engine{name: "cuda-slowwork", prec: Float64, be: &slowWorkBackend{hostWorkBackend{nullBackend: nullBackend{newHostBackend(1 << 50)}}}}

func init() {
	ode.Register(hostWork)
	ode.Register(slowWork)
}

// BenchmarkCallHostWork measures the host's work in a whole Solver.Grad
// call of 2^20 Lorenz trajectories (record included, or on the resident
// mesh), on a backend whose copies and kernels take no time: on the H200
// host this is what a whole call costs beyond its kernels and copies.
// The -omit variants ask for the loss and the gradients only
// (Gradient.Omit = OmitStates|OmitStats: no final states, no rejected
// and field-evaluation counts scattered; on a device, none copied back).
func BenchmarkCallHostWork(b *testing.B) {
	for _, o := range []ode.Omit{0, ode.OmitStates | ode.OmitStats} {
		for _, mesh := range []bool{false, true} {
			name := "record"
			if mesh {
				name = "mesh"
			}
			if o != 0 {
				name += "-omit"
			}
			b.Run(name, func(b *testing.B) { benchCallOmit(b, hostWork.name, mesh, o) })
		}
	}
}

// BenchmarkCallHostWorkSmall is BenchmarkCallHostWork at 128
// trajectories, where a call's fixed costs (the loss's trace, the
// checks, the executor's bookkeeping, allocations) are what the host
// adds to a kernel of a tenth of a millisecond: a record, and a repeated
// call on the resident mesh of an earlier one.
func BenchmarkCallHostWorkSmall(b *testing.B) {
	b.Run("record", func(b *testing.B) { benchCallN(b, 128, hostWork.name, false, 0) })
	b.Run("mesh", func(b *testing.B) { benchCallN(b, 128, hostWork.name, true, 0) })
}

// BenchmarkCallHostWorkMid is BenchmarkCallHostWork at 32,768 and
// 262,144 trajectories, where a call's host work is mostly the fixed
// costs of its passes over the trajectories (waking the cores, a pass
// where one would do) rather than memory traffic: a record, and the
// record omitting the states and counts.
func BenchmarkCallHostWorkMid(b *testing.B) {
	for _, n := range []int{1 << 15, 1 << 18} {
		b.Run(fmt.Sprintf("n=%d/record", n), func(b *testing.B) { benchCallN(b, n, hostWork.name, false, 0) })
		b.Run(fmt.Sprintf("n=%d/record-omit", n), func(b *testing.B) {
			benchCallN(b, n, hostWork.name, false, ode.OmitStates|ode.OmitStats)
		})
	}
}

// BenchmarkCallHostWorkReuse measures the host's work of a repeated
// Grad call (the record, a Gradient passed back) of n Lorenz
// trajectories, Y0 and P per trajectory, on the backend whose copies and
// kernels take no time, at 32,768, 65,536 and 262,144 trajectories:
// "same" calls again on the same inputs (the arena holds Y0, P and T1:
// none staged or uploaded, each compared with the engine's copy), "p"
// gives each call other values of P (two arrays in turn, as a sweep: P
// staged and uploaded, and after two calls found changed left to rest,
// copied and compared on two calls in 6, then in 10, 18, … up to 258;
// Y0 and T1 kept), and "off" is
// "same" with Tuning.NoInputReuse (everything staged every call, as
// before the reuse). reused-KB/op is the trace's bytes not uploaded.
//
//	go test ./cuda -run '^$' -bench CallHostWorkReuse -benchtime 200x -count 6
func BenchmarkCallHostWorkReuse(b *testing.B) {
	for _, n := range []int{1 << 15, 1 << 16, 1 << 18} {
		for _, mode := range []string{"same", "p", "off"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, mode), func(b *testing.B) { benchCallReuse(b, n, mode) })
		}
	}
}

func benchCallReuse(b *testing.B, n int, mode string) {
	b.ReportAllocs()
	c := lorenzCallCase(n)
	y0 := make([]float64, 3*n)
	for i := range n {
		y0[3*i], y0[3*i+1], y0[3*i+2] = 1, 0.01*float64(i%7), 0
	}
	c.prob.Y0 = y0
	c.set.Engine = hostWork.name
	if mode == "off" {
		c.set.Engine = tuned(b, hostWork.name, Tuning{NoInputReuse: true})
	}
	sv, err := ode.NewSolver(c.prob.Field, &c.set)
	if err != nil {
		b.Fatal(err)
	}
	ps := [2][]float64{c.prob.P, slices.Clone(c.prob.P)}
	for i := 1; i < len(ps[1]); i += 3 {
		ps[1][i] *= 1.01
	}
	var g ode.Gradient
	var tr Trace
	ctx := WithTrace(context.Background(), &tr)
	call := func(k int) {
		if mode == "p" {
			c.prob.P = ps[k%2]
		}
		if _, err := sv.GradContext(ctx, &g, &c.prob, c.loss, nil); err != nil {
			b.Fatal(err)
		}
	}
	call(1)
	tr.Reset()
	b.ResetTimer()
	for k := range b.N {
		call(k)
	}
	b.StopTimer()
	b.ReportMetric(float64(tr.Stats().Reused)/1e3/float64(b.N), "reused-KB/op")
}

// BenchmarkTrainStepHostWork measures the host's work in one step of a
// fit held in the engine's memory (fit.Run's device loop: the rule, the
// evaluation's launches and its summary read back, the update's
// launches), the Lorenz calibration of n fits of ρ, on the backend whose
// copies and kernels take no time (hostWork): what a step costs beyond
// its kernels and its one synchronous read. A cost that grows with n is
// host work per trajectory or per fit.
//
// The step runs through the trainer's graphs; "/nograph" launches its
// operations one by one (Tuning.NoTrainGraph).
func BenchmarkTrainStepHostWork(b *testing.B) {
	for _, n := range []int{1 << 16, 1 << 18} {
		for _, off := range []bool{false, true} {
			name, eng := fmt.Sprintf("fits=%d", n), hostWork.name
			if off {
				name, eng = name+"/nograph", tuned(b, hostWork.name, Tuning{NoTrainGraph: true})
			}
			b.Run(name, func(b *testing.B) { benchTrainStepHostWork(b, n, eng) })
		}
	}
}

func benchTrainStepHostWork(b *testing.B, n int, engine string) {
	f := hostWorkCalibration(b, n, engine)
	clk := &benchSteps{b: b, last: b.N + 1}
	res, err := f.Run(context.Background(), &fit.Settings{Steps: b.N + 1, Optimizer: &optim.Adam{LearnRate: 0.1}, SkipFinal: true, Progress: clk})
	if err != nil {
		b.Fatal(err)
	}
	if res.DeviceSteps != b.N+1 {
		b.Fatalf("%d device steps of %d (%s)", res.DeviceSteps, b.N+1, res.DeviceNote)
	}
}

// benchSteps times the steps of a fit after its first: the timer runs
// from the first step's report to the last's.
type benchSteps struct {
	b    *testing.B
	last int
}

func (c *benchSteps) Report(step int, _ float64) {
	switch step {
	case 1:
		c.b.ResetTimer()
	case c.last:
		c.b.StopTimer()
	}
}

func (c *benchSteps) Finish() {}

// hostWorkCalibration is the Lorenz calibration of n fits of ρ as the
// training suite builds it (one initial state for all trajectories, P
// of n rows) on the hostWork engine.
func hostWorkCalibration(b *testing.B, n int, engine string) *fit.Fitter {
	lz := problems.Lorenz()
	p := make([]float64, 3*n)
	for i := range n {
		p[3*i], p[3*i+1], p[3*i+2] = 10, 10, 8.0/3
	}
	prob := fit.Problem{ODE: ode.Problem{Field: lz.Field, N: n, Y0: []float64{1, 0, 0}, P: p, T1: 1},
		Loss: ode.Loss{Name: "sq", DataDim: 3, Data: make([]float64, 3*n), F: func(y, _, d []tape.V) tape.V {
			return y[0].Sub(d[0]).Square().Add(y[1].Sub(d[1]).Square()).Add(y[2].Sub(d[2]).Square())
		}},
		Vars: fit.Vars{P: []int{1}}, Fits: n}
	f, err := fit.New(prob, &ode.Settings{Method: ode.Tsit5, RelTol: 1e-6, AbsTol: 1e-9, Engine: engine})
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkTrainRunHostWork measures the host's work in a whole fit.Run
// of one step held in the engine's memory, at 262,144 fits on the
// hostWork backend: the run's set-up (the starting values, the Trainer:
// its checks of the inputs and their staging, Load), the step and the
// hand-back, what a Run adds to its steps.
func BenchmarkTrainRunHostWork(b *testing.B) {
	f := hostWorkCalibration(b, 1<<18, hostWork.name)
	set := &fit.Settings{Steps: 1, Optimizer: &optim.Adam{LearnRate: 0.1}, SkipFinal: true}
	if _, err := f.Run(context.Background(), set); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		res, err := f.Run(context.Background(), set)
		if err != nil {
			b.Fatal(err)
		}
		if res.DeviceSteps != 1 {
			b.Fatalf("%d device steps (%s)", res.DeviceSteps, res.DeviceNote)
		}
	}
}

// BenchmarkCallHostWorkEvents measures the host's work in whole calls of
// the events suite's problems (gradsolve bench -suite gpu-events: the
// bouncing balls and the pharmacokinetic threshold, Tsit5, atol =
// rtol·1e-2) at 65,536 trajectories on the backend whose copies and
// kernels take no time: a forward solve and a gradient with its record,
// each repeated with its result passed back as the suite does, beside a
// Lorenz solve and
// gradient of as many trajectories for scale. The kernels write
// nothing (every trajectory reads as 0 steps, OK), so the results are
// meaningless and only the host's time counts; the record buffers have
// the rows a warm device call of the suite gives them (eventsRows), as the
// executor would size them from the steps it saw.
func BenchmarkCallHostWorkEvents(b *testing.B) {
	const n = 1 << 16
	engine := tuned(b, hostWork.name, Tuning{firstRows: eventsRows})
	for _, mk := range []func(int, ode.Method) engineCase{ballCase, pkCase} {
		for _, rtol := range []float64{1e-6, 1e-8} {
			c := mk(n, ode.Tsit5)
			c.set.RelTol, c.set.AbsTol, c.set.Engine = rtol, rtol*1e-2, engine
			name := fmt.Sprintf("%s-%.0e", strings.TrimSuffix(c.name, "-Tsit5"), rtol)
			b.Run(name+"/solve", func(b *testing.B) { benchEventsCall(b, &c, false) })
			b.Run(name+"/grad", func(b *testing.B) { benchEventsCall(b, &c, true) })
		}
	}
	lc := lorenzCallCase(n)
	lc.set.Engine = hostWork.name
	b.Run("lorenz/solve", func(b *testing.B) { benchEventsCall(b, &lc, false) })
	b.Run("lorenz/grad", func(b *testing.B) { benchEventsCall(b, &lc, true) })
}

// countsBackend is the host backend with kernels that write only the
// accepted-step counts (nullSteps for every trajectory, all OK, every
// other result 0) and device memsets that take no time (a GPU's take
// microseconds): a call on it costs the host's work and its copies
// (copies of host memory here), the bytes those of a record of
// nullSteps steps a trajectory, event marks included.
type countsBackend struct{ *hostBackend }

func (countsBackend) compile(string, string, []string) (backendKernel, error) {
	return nullKernel{}, nil
}
func (countsBackend) zero(uint64, int64) error { return nil }
func (b countsBackend) batch(f func(q queue) error) error {
	return f(countsQueue{hostQueue{b.hostBackend}})
}

type countsQueue struct{ hostQueue }

func (countsQueue) zero(uint64, int64) error { return nil }

func (q countsQueue) enqueue(_ backendKernel, _, _, _ int, args []uint64) error {
	if len(args) == numSavesWords {
		return nil
	}
	if len(args) == numGradsWords {
		// The gradients' check: all well, the kernels' counts, the
		// loss terms' sum 0.
		m, _, off := q.b.at(args[gwOut])
		binary.LittleEndian.PutUint32(m[off:], 0)
		binary.LittleEndian.PutUint32(m[off+4:], nullSteps)
		clear(m[off+8 : off+gradsTail])
		return nil
	}
	lo, hi := uint64(args[argFirst]), uint64(args[argEnd])
	// The statuses and flags (OK, none set): the memsets that zero the
	// other results are skipped.
	for _, a := range []int{argStatus, argFlags} {
		if args[a] != 0 {
			m, _, off := q.b.at(args[a])
			clear(m[off+4*lo : off+4*hi])
		}
	}
	if args[argAcc] != 0 {
		m, _, off := q.b.at(args[argAcc])
		for i := lo; i < hi; i++ {
			binary.LittleEndian.PutUint32(m[off+4*i:], nullSteps)
		}
	}
	return nil
}

var countsF64 = &Engine{name: "cuda-counts", prec: Float64, be: countsBackend{newHostBackend(16 << 30)}}

// slowCounts is countsBackend whose engine kernel takes slowKernel (a
// sleep: the host's thread waits for the device, as on a GPU), about the
// kernels of a kept events gradient of 65,536 trajectories on the H100
// (0.1-0.2 ms): the host work that overlaps them (a kept gradient's
// compare of its inputs, run ahead: reuse.go) is hidden.
type slowCounts struct{ countsBackend }

const slowKernel = 150 * time.Microsecond

func (b slowCounts) batch(f func(q queue) error) error {
	return f(slowQueue{countsQueue{hostQueue{b.hostBackend}}})
}

type slowQueue struct{ countsQueue }

func (q slowQueue) enqueue(k backendKernel, threads, block, shmem int, args []uint64) error {
	if len(args) == numArgs {
		time.Sleep(slowKernel)
	}
	return q.countsQueue.enqueue(k, threads, block, shmem, args)
}

// slowCountsF64 is an engine on slowCounts.
var slowCountsF64 = &Engine{name: "cuda-slow", prec: Float64, be: slowCounts{countsBackend{newHostBackend(16 << 30)}}}

func init() {
	ode.Register(countsF64)
	ode.Register(slowCountsF64)
}

// BenchmarkGradEventsCall measures what a whole Solver.Grad call of the
// events suite's problems moves and costs on the host, at 65,536
// trajectories (ball and pk of events_test.go, Tsit5 at rtol 1e-6, atol
// 1e-8): with its record, the Gradient passed back ("record"); the same
// asking for the loss and the gradients alone ("record-omit":
// Gradient.Omit = OmitStates|OmitStats); the same on a solver with
// ode.Settings.KeepGrads, the per-trajectory results left on the device
// unread ("record-keep": the loss, the shared gradient and the check
// come back) and read after each call ("record-keep-read":
// Gradient.HostGrads), with the thread kernel's launch bounds of one round
// of blocks ("record-keep-round", "record-keep-untraced-round", on
// "cuda": Tuning.threadRound; "cuda" reports its kept modes' kernel's
// regs, local-B and bounds-blocks), with its inputs' compare run ahead
// one input after the other as before session 47 ("record-keep-each",
// "record-keep-untraced-each": Tuning.compareEach), without the
// batch's help with that compare, as before session 48
// ("record-keep-nohelp", "record-keep-untraced-nohelp":
// Tuning.compareNoHelp), with the check's words zeroed before every
// launch as before session 48 ("record-keep-checkmemset",
// "record-keep-untraced-checkmemset": Tuning.checkMemset), with the
// shared block uploaded on every call as before session 49
// ("record-keep-uploadshared", "record-keep-untraced-uploadshared":
// Tuning.uploadShared), with the check
// kernel's lane-by-lane atomics of a warp whose loss terms have several
// first limbs as before session 47 ("record-keep-lanes",
// "record-keep-untraced-lanes", on "cuda": Tuning.checkLaneAtomics),
// timed without a Trace, as a
// user calls ("record-keep-untraced": no clock's marks nor wait, keptTimed;
// the trace's figures then from 20 traced calls after the timed ones);
// on the mesh of an earlier call
// ("mesh", resident where the engine keeps meshes); and a record followed
// by a gradient on its new mesh ("record+mesh", two calls an op, as a
// study that records, then replays with other losses). down-B/op and
// up-B/op are the bytes copied from and to the device per call (the
// trace's Download and Upload: deterministic for a given engine and
// step counts), kernel-ns/op the kernels' time, copy-ns/op the copies',
// stage-ns/op and scatter-ns/op the host's before and after each batch
// (TraceStats.Stage and Scatter: ns/op less the four is package ode's
// work, the driver's calls and synchronisation), batch-ns/op the wall
// time in the batches and, kept, ahead-wait-ns/op the time of a compare
// run ahead past the kernel (TraceStats.Batch, AheadWait: ns/op less
// stage, batch and scatter, and ahead-wait where the compare ran apart,
// is package ode's and the engine's work outside the launch), cpu-ns/op
// the CPU time
// of the process (user + system, all threads: the host's work, where
// other processes share the cores). Engines: "cuda-counts"
// (countsBackend: ns/op is the host's work and the copies, as copies
// of host memory, of a record of nullSteps steps a trajectory),
// "cuda-slow" (the same, its engine kernel a sleep of slowKernel: the
// host work that overlaps the device's, as a kept gradient's compare
// run ahead, is hidden), "cuda-host" (the generated kernels on the CPU: the bytes of the true
// step counts; its ns/op is mostly the kernels and the device's
// memsets) and "cuda" where a GPU is found (the whole call). Cases: ball
// and pk (events_test.go's, random inputs), and suite-bounce and
// suite-threshold, the same problems on the events suite's inputs
// (eventsSuiteCase: the linspaces of bench/events.go and of the Diffrax
// anchor, whose neighbouring trajectories take about the same steps).
//
//	go test ./cuda -run '^$' -bench GradEventsCall/cuda-counts -benchtime 200x -count 6
//	go test ./cuda -run '^$' -bench 'GradEventsCall/cuda-slow.*/record-keep$' -benchtime 200x -count 6
//	go test ./cuda -run '^$' -bench GradEventsCall/cuda-host -benchtime 2x
//	go test ./cuda -run '^$' -bench 'GradEventsCall/cuda/' -benchtime 200x -count 6   (on a GPU)
//	go test ./cuda -run '^$' -bench 'GradEventsCall/^cuda$/(ball|pk)/record(-keep)?(-untraced)?$' -benchtime 400x -count 6   (on a GPU)
//	go test ./cuda -run '^$' -bench 'GradEventsCall/^cuda$/(ball|pk|suite-bounce|suite-threshold)/record-keep(-untraced)?(-round|-each|-lanes)?$' -benchtime 400x -count 3   (on a GPU)
//	go test ./cuda -run '^$' -bench 'GradEventsCall/cuda-slow/(pk|suite-threshold)/record-keep(-untraced)?(-each)?$' -benchtime 300x -count 5
func BenchmarkGradEventsCall(b *testing.B) {
	const n = 1 << 16
	engines := []string{countsF64.name, slowCountsF64.name}
	if _, err := exec.LookPath("g++"); err == nil {
		engines = append(engines, hostF64.name)
	}
	if NewEngine("probe", 0, Float64).Available() == nil {
		engines = append(engines, "cuda")
	}
	for _, eng := range engines {
		modes := []string{"record", "record-omit", "record-keep", "record-keep-read", "mesh", "record+mesh"}
		modes = append(modes, "record-keep-untraced", "record-keep-each", "record-keep-untraced-each", "record-keep-nohelp", "record-keep-untraced-nohelp", "record-keep-checkmemset", "record-keep-untraced-checkmemset", "record-keep-uploadshared", "record-keep-untraced-uploadshared")
		if eng == "cuda" {
			modes = append(modes, "record-keep-round", "record-keep-untraced-round", "record-keep-lanes", "record-keep-untraced-lanes")
		}
		suiteBall := func(n int, m ode.Method) engineCase { return eventsSuiteCase(ballCase(n, m), 1e-6) }
		suitePK := func(n int, m ode.Method) engineCase { return eventsSuiteCase(pkCase(n, m), 1e-6) }
		for _, mk := range []func(int, ode.Method) engineCase{ballCase, pkCase, suiteBall, suitePK} {
			for _, mode := range modes {
				c := mk(n, ode.Tsit5)
				c.set.RelTol, c.set.AbsTol, c.set.Engine = 1e-6, 1e-8, eng
				var tun Tuning
				switch mode {
				case "record-keep-round", "record-keep-untraced-round":
					tun = Tuning{threadRound: true}
					c.set.Engine = tuned(b, eng, tun)
				case "record-keep-each", "record-keep-untraced-each":
					tun = Tuning{compareEach: true}
					c.set.Engine = tuned(b, eng, tun)
				case "record-keep-checkmemset", "record-keep-untraced-checkmemset":
					tun = Tuning{checkMemset: true}
					c.set.Engine = tuned(b, eng, tun)
				case "record-keep-uploadshared", "record-keep-untraced-uploadshared":
					tun = Tuning{uploadShared: true}
					c.set.Engine = tuned(b, eng, tun)
				case "record-keep-nohelp", "record-keep-untraced-nohelp":
					tun = Tuning{compareNoHelp: true}
					c.set.Engine = tuned(b, eng, tun)
				case "record-keep-lanes", "record-keep-untraced-lanes":
					tun = Tuning{checkLaneAtomics: true}
					c.set.Engine = tuned(b, eng, tun)
				}
				name := fmt.Sprintf("%s/%s/%s", eng, strings.TrimSuffix(c.name, "-Tsit5"), mode)
				b.Run(name, func(b *testing.B) {
					benchGradEventsCall(b, &c, mode)
					if eng == "cuda" && strings.HasPrefix(mode, "record-keep") {
						// The gradient kernel's registers and local memory
						// (its configuration as the engine chooses it for
						// the case's trajectories on this device), compiled
						// once a case and tuning.
						key := fmt.Sprintf("%s %+v", c.name, tun)
						at, ok := eventsKernelAttrs[key]
						if !ok {
							at.a, at.v = gradKernelAttrs(b, c, tun)
							eventsKernelAttrs[key] = at
						}
						a, v := at.a, at.v
						b.ReportMetric(float64(a.Registers), "regs")
						b.ReportMetric(float64(a.LocalBytes), "local-B")
						b.ReportMetric(float64(v.ThreadMinBlocks), "bounds-blocks")
					}
				})
			}
		}
	}
}

// eventsKernelAttrs are the kernels' resources BenchmarkGradEventsCall
// reports, by case and tuning.
var eventsKernelAttrs = map[string]struct {
	a driver.KernelAttrs
	v kernelgen.Config
}{}

func benchGradEventsCall(b *testing.B, c *engineCase, mode string) {
	b.ReportAllocs()
	set := c.set
	keep := strings.HasPrefix(mode, "record-keep")
	set.KeepGrads = keep
	sv, err := ode.NewSolver(c.prob.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	var g ode.Gradient
	var tr Trace
	ctx := WithTrace(context.Background(), &tr)
	if _, err := sv.GradContext(ctx, &g, &c.prob, c.loss, nil); err != nil {
		b.Fatal(err)
	}
	var m *ode.Mesh
	g2 := &g
	kept := 0 // calls whose results stayed on the device (KeepGrads)
	switch {
	case mode == "record-omit" || keep:
		g2 = &ode.Gradient{Omit: ode.OmitStates | ode.OmitStats}
	case mode == "mesh" || mode == "record+mesh":
		m, g2 = g.Mesh, &ode.Gradient{}
	}
	// Untraced modes time calls without a Trace (keptTimed).
	untraced := strings.HasPrefix(mode, "record-keep-untraced")
	timedCtx := ctx
	if untraced {
		timedCtx = context.Background()
	}
	call := func(ctx context.Context) {
		if mode == "record+mesh" {
			if _, err := sv.GradContext(ctx, &g, &c.prob, c.loss, nil); err != nil {
				b.Fatal(err)
			}
			m = g.Mesh
		}
		if _, err := sv.GradContext(ctx, g2, &c.prob, c.loss, m); err != nil {
			b.Fatal(err)
		}
		if keep && g2.Resident != nil {
			kept++
		}
		if mode == "record-keep-read" {
			if err := g2.HostGrads(); err != nil {
				b.Fatal(err)
			}
		}
	}
	// A first call of the mode, untimed (the staging's and the
	// results' storage).
	call(ctx)
	tr.Reset()
	kept = 0
	b.ResetTimer()
	c0 := cputime.Process()
	for range b.N {
		call(timedCtx)
	}
	cpu := cputime.Process() - c0
	b.StopTimer()
	keptN := kept
	traced := b.N // the calls the trace's figures are of
	if untraced {
		// The trace's figures from calls of their own, after the timed.
		traced = 20
		for range traced {
			call(ctx)
		}
	}
	st := tr.Stats()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(st.Download)/float64(traced), "down-B/op")
	b.ReportMetric(float64(st.Upload)/float64(traced), "up-B/op")
	b.ReportMetric(float64(st.Kernel)/float64(traced), "kernel-ns/op")
	b.ReportMetric(float64(st.Transfer)/float64(traced), "copy-ns/op")
	b.ReportMetric(float64(st.Stage)/float64(traced), "stage-ns/op")
	b.ReportMetric(float64(st.Scatter)/float64(traced), "scatter-ns/op")
	b.ReportMetric(float64(st.Batch)/float64(traced), "batch-ns/op")
	if keep {
		b.ReportMetric(float64(st.AheadWait)/float64(traced), "ahead-wait-ns/op")
		// 1 where every timed call kept its results (a call served on
		// the CPU engine while the kernel compiles keeps none).
		b.ReportMetric(float64(keptN)/float64(b.N), "kept/op")
	}
}

// eventsRows is the record buffer's rows in a warm call of the events
// suite on a GPU: rowsGuess after a longest trajectory of 14 steps (the
// balls at rtol 1e-6 on cuda-host).
const eventsRows = 14 + 14/8 + 8

// benchEventsCall times Solver.Solve (or Grad with its record) of case c
// after an untimed first call, the Gradient passed back to every call.
func benchEventsCall(b *testing.B, c *engineCase, grad bool) {
	b.ReportAllocs()
	sv, err := ode.NewSolver(c.prob.Field, &c.set)
	if err != nil {
		b.Fatal(err)
	}
	var g ode.Gradient
	var tr Trace
	ctx := WithTrace(context.Background(), &tr)
	call := func() error {
		if grad {
			_, err := sv.GradContext(ctx, &g, &c.prob, c.loss, nil)
			return err
		}
		_, err := sv.SolveContext(ctx, &c.prob)
		return err
	}
	if err := call(); err != nil {
		b.Fatal(err)
	}
	kernel := tr.Stats().Kernel
	b.ResetTimer()
	for range b.N {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// The kernels' time (0 on a backend whose kernels do nothing): the
	// host's work is ns/op less it.
	b.ReportMetric(float64(tr.Stats().Kernel-kernel)/float64(b.N), "kernel-ns/op")
}

// keplerSaves is the save benchmarks' problem: n Kepler orbits (the
// problem's own start) with k save times evenly to T1, Tsit5 at rtol
// 1e-8 on the hostWork backend.
func keplerSaves(n, k int) (ode.Problem, ode.Settings) {
	kp := problems.Kepler()
	ts := make([]float64, k)
	for j := range ts {
		ts[j] = kp.T1 * float64(j+1) / float64(k)
	}
	return ode.Problem{Field: kp.Field, N: n, Y0: kp.Y0, P: kp.P, T1: kp.T1, SaveAt: ts},
		ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, AbsTol: 1e-11, Engine: hostWork.name}
}

// BenchmarkSaveHostWork is the host's work in a SolveTo of 4,096 Kepler
// orbits with 1 and with 1,000 save times (131 MB of saved states) on
// the hostWork backend, whose copies and kernels take no time: the
// staging and the transpose of the saved states into the Solution's rows
// (scatterSaves; with 1,000, in saveGroups' groups).
//
//	go test ./cuda -run '^$' -bench SaveHostWork -benchtime 20x -count 5
func BenchmarkSaveHostWork(b *testing.B) {
	const n = 4096
	for _, k := range []int{1, 1000} {
		b.Run(fmt.Sprintf("saves=%d", k), func(b *testing.B) {
			p, set := keplerSaves(n, k)
			sv, err := ode.NewSolver(p.Field, &set)
			if err != nil {
				b.Fatal(err)
			}
			var sol ode.Solution
			if _, err := sv.SolveTo(&sol, &p); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(n * k * p.Field.Dim * 8))
			b.ResetTimer()
			for range b.N {
				if _, err := sv.SolveTo(&sol, &p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSaveKeptHostWork is the host's work in a SolveTo of 4,096
// Kepler orbits with 1 and with 1,000 save times on the hostWork backend
// (copies and kernels take no time), three ways alternated within each
// iteration, medians: the saves returned in Ys ("returned-ms": staged
// and transposed on the host), kept on the device (ode.Settings.KeepSaves,
// "kept-ms": neither copied nor transposed) and kept, then read
// (Solution.HostSaves after the call, "kept-read-ms": the copy's host
// side, through the page-locked chunk buffers, no transpose). A fourth,
// "grad-kept-ms", is BenchmarkGPUSaveSplit's grad-kept call (Grad with
// KeepSaves, the saved states' sum of squares, the Gradient passed back):
// its loss, traced on every call (Solver.Grad), has K·Dim inputs.
//
//	go test ./cuda -run '^$' -bench SaveKeptHostWork -benchtime 20x
func BenchmarkSaveKeptHostWork(b *testing.B) {
	const n = 4096
	for _, k := range []int{1, 1000} {
		b.Run(fmt.Sprintf("saves=%d", k), func(b *testing.B) {
			p, set := keplerSaves(n, k)
			plain, err := ode.NewSolver(p.Field, &set)
			if err != nil {
				b.Fatal(err)
			}
			set.KeepSaves = true
			keep, err := ode.NewSolver(p.Field, &set)
			if err != nil {
				b.Fatal(err)
			}
			var ret, kept, read ode.Solution
			var g ode.Gradient
			calls := []struct {
				sv   *ode.Solver
				dst  *ode.Solution
				read bool
				grad bool
				ms   []float64
			}{{sv: plain, dst: &ret}, {sv: keep, dst: &kept}, {sv: keep, dst: &read, read: true}, {sv: keep, grad: true}}
			call := func(i int) error {
				c := &calls[i]
				if c.grad {
					_, err := c.sv.Grad(&g, &p, odetest.SavedSquares(), nil)
					return err
				}
				_, err := c.sv.SolveTo(c.dst, &p)
				return err
			}
			for i := range calls {
				c := &calls[i]
				if err := call(i); err != nil { // warm: buffers, pages
					b.Fatal(err)
				}
				if c.read {
					if err := c.dst.HostSaves(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ResetTimer()
			for range b.N {
				for i := range calls {
					c := &calls[i]
					t := time.Now()
					if err := call(i); err != nil {
						b.Fatal(err)
					}
					if c.read {
						if err := c.dst.HostSaves(); err != nil {
							b.Fatal(err)
						}
					}
					c.ms = append(c.ms, float64(time.Since(t))/1e6)
				}
			}
			b.StopTimer()
			for i, name := range []string{"returned-ms", "kept-ms", "kept-read-ms", "grad-kept-ms"} {
				b.ReportMetric(odetest.Median(calls[i].ms), name)
			}
		})
	}
}

// BenchmarkGPUCall times whole Grad calls of 2^20 Lorenz trajectories on
// the device (rtol 1e-6; the record; everything returned, and Gradient.Omit's loss
// and gradients only) with a kernel per chunk of results, the default,
// and with one kernel for the launch (Tuning.NoChunkLaunch); run with
// -count to alternate them. kernel-ms and copy-ms are the trace's.
func BenchmarkGPUCall(b *testing.B) {
	needGPUEngine(b)
	for _, o := range []ode.Omit{0, ode.OmitStates | ode.OmitStats} {
		for _, one := range []bool{false, true} {
			name := "chunks"
			if one {
				name = "one"
			}
			if o != 0 {
				name += "-omit"
			}
			b.Run(name, func(b *testing.B) {
				timeGradCalls(b, 1<<20, Tuning{NoChunkLaunch: one}, o)
			})
		}
	}
}

// timeGradCalls times b.N whole Grad calls (with the record) of n Lorenz
// trajectories at the protocol (rtol 1e-6, atol 1e-9: gradsolve
// bench -suite gpu-train) on engine "cuda" with tuning tun and
// Gradient.Omit o, after one untimed call; it reports the trace's
// kernel-ms and copy-ms per call, and cpu-ms, the process's CPU time a
// call (the host's work on all its cores), and returns the trace's
// totals.
func timeGradCalls(b *testing.B, n int, tun Tuning, o ode.Omit) TraceStats {
	return timeGradCallsOn(b, "cuda", n, tun, o)
}

// timeGradCallsOn is timeGradCalls on the engine called engine.
func timeGradCallsOn(b *testing.B, engine string, n int, tun Tuning, o ode.Omit) TraceStats {
	c := lorenzCallCase(n)
	c.set.RelTol, c.set.AbsTol = 1e-6, 1e-9
	c.set.Engine = tuned(b, engine, tun)
	sv, err := ode.NewSolver(c.prob.Field, &c.set)
	if err != nil {
		b.Fatal(err)
	}
	g := ode.Gradient{Omit: o}
	if _, err := sv.Grad(&g, &c.prob, c.loss, nil); err != nil {
		b.Fatal(err)
	}
	var tr Trace
	ctx := WithTrace(context.Background(), &tr)
	c0 := cputime.Process()
	b.ResetTimer()
	for range b.N {
		if _, err := sv.GradContext(ctx, &g, &c.prob, c.loss, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cputime.Process()-c0)/1e6/float64(b.N), "cpu-ms/op")
	s := tr.Stats()
	b.ReportMetric(float64(s.Kernel)/1e6/float64(b.N), "kernel-ms/op")
	b.ReportMetric(float64(s.Transfer)/1e6/float64(b.N), "copy-ms/op")
	b.ReportMetric(float64(s.Upload)/1e3/float64(b.N), "up-KB/op")
	b.ReportMetric(float64(s.Reused)/1e3/float64(b.N), "reused-KB/op")
	return s
}

// BenchmarkGPUCallBound times whole Grad calls of n Lorenz trajectories
// on the device (rtol 1e-6, the record, everything returned: the issue's
// protocol) at 32,768, 262,144 and 2^20 trajectories, with each chunk's
// inputs staged while the chunk before runs (the default from two
// chunks: stagesByChunk) and staged at once (Tuning.NoChunkStage), beside
// the bound the issue sets: kernel-ms + 1.3·copy-ms + 0.2 ms (bound-ms),
// and host-ms, the call's time beyond its kernels and copies (of which
// stage-ms and scatter-ms are the staging before the batch and the
// results' scatter, which may overlap the copies: TraceStats). The calls
// repeat the same inputs, which the arena keeps (up-KB and reused-KB:
// the trace's bytes uploaded and not); "-noreuse" stages and uploads
// them every call (Tuning.NoInputReuse). Run with -count to alternate
// them.
func BenchmarkGPUCallBound(b *testing.B) {
	needGPUEngine(b)
	callBoundCases(b, func(b *testing.B, n int, tun Tuning) {
		reportCallBound(b, timeGradCalls(b, n, tun, 0))
	})
}

// callBoundCases runs f as BenchmarkGPUCallBound's sub-benchmarks: n =
// 32,768, 262,144 and 2^20, staged chunk by chunk ("stage") or at once
// ("whole", from two chunks), the inputs reused or staged and uploaded
// every call ("-noreuse"); at 32,768 also with the staging's and the
// scatter's blocks on par.RunShort ("-short": Tuning.shortStage and
// shortScatter), with the changed inputs' staging alone on it
// ("-noreuse-shortstage"), and with P staged beside the upload of the
// other inputs ("-noreuse-parts": Tuning.stageParts; "-parts-short" with
// both).
func callBoundCases(b *testing.B, f func(b *testing.B, n int, tun Tuning)) {
	for _, n := range []int{1 << 15, 1 << 18, 1 << 20} {
		for _, whole := range []bool{false, true} {
			if whole && n < 1<<18 {
				continue // one chunk: staged at once either way
			}
			for _, off := range []bool{false, true} {
				name := fmt.Sprintf("n=%d/stage", n)
				if whole {
					name = fmt.Sprintf("n=%d/whole", n)
				}
				if off {
					name += "-noreuse"
				}
				b.Run(name, func(b *testing.B) { f(b, n, Tuning{NoChunkStage: whole, NoInputReuse: off}) })
			}
		}
		if n == 1<<15 {
			for _, c := range []struct {
				name string
				tun  Tuning
			}{
				{"stage-short", Tuning{shortStage: true, shortScatter: true}},
				{"stage-noreuse-short", Tuning{NoInputReuse: true, shortStage: true, shortScatter: true}},
				{"stage-noreuse-shortstage", Tuning{NoInputReuse: true, shortStage: true}},
				{"stage-noreuse-parts", Tuning{NoInputReuse: true, stageParts: true}},
				{"stage-noreuse-parts-short", Tuning{NoInputReuse: true, stageParts: true, shortStage: true, shortScatter: true}},
			} {
				b.Run(fmt.Sprintf("n=%d/%s", n, c.name), func(b *testing.B) { f(b, n, c.tun) })
			}
		}
	}
}

// BenchmarkCallAheadHost times repeated Grad calls of n Lorenz
// trajectories (BenchmarkGPUCallBound's, inputs the same every call) on
// the backend whose kernel takes slowKernel, about the H100's at 32,768,
// and nothing else (slowWork), whose results come back in one copy
// at 32,768 and 65,536, in two halves, a kernel each, at 262,144:
// "ahead" runs each launch ahead of its inputs' compare (the compare in
// the batch as the kernel runs, or on the launch's goroutine as the
// batch runs on its own; compared before the batch before session 46).
// stage-ms is the trace's staging before the batch; ns/op the call.
//
//	cuda.test -test.run '^$' -test.bench 'CallAheadHost' -test.benchtime 400x -test.count 6
func BenchmarkCallAheadHost(b *testing.B) {
	for _, n := range []int{1 << 15, 1 << 16, 1 << 18} {
		b.Run(fmt.Sprintf("n=%d/ahead", n), func(b *testing.B) {
			s := timeGradCallsOn(b, slowWork.name, n, Tuning{}, 0)
			b.ReportMetric(float64(s.Stage)/1e6/float64(b.N), "stage-ms/op")
			b.ReportMetric(float64(s.Ahead)/float64(b.N), "ahead/op")
		})
	}
}

// BenchmarkCallBoundHost is BenchmarkGPUCallBound on the backend whose
// copies and kernels take no time (hostWork): the host's part of each of
// its calls, with and without input reuse ("-noreuse": Y0's one row, P
// and T1 staged every call, the changed-input call), as stage-ms (the
// staging before the batch), scatter-ms and cpu-ms (the process's CPU
// time a call: on a shared machine the figure to compare at -test.cpu 1).
// On a device's host it needs no device:
//
//	cuda.test -test.run '^$' -test.bench 'CallBoundHost' -test.benchtime 100x -test.cpu 1,16
func BenchmarkCallBoundHost(b *testing.B) {
	callBoundCases(b, func(b *testing.B, n int, tun Tuning) {
		s := timeGradCallsOn(b, hostWork.name, n, tun, 0)
		b.ReportMetric(float64(s.Stage)/1e6/float64(b.N), "stage-ms/op")
		b.ReportMetric(float64(s.Scatter)/1e6/float64(b.N), "scatter-ms/op")
	})
}

// BenchmarkGPUCallSplit is BenchmarkGPUCallBound at 16,384, 32,768 and
// 131,072 trajectories with the results copied back at once ("one":
// Tuning.splitMin -1) and in two parts, the first part's statuses,
// counts and loss terms written while the second is copied ("split":
// splitAt, the default from defaultSplitMin). Run with -count to
// alternate them:
//
//	cuda.test -test.run '^$' -test.bench 'BenchmarkGPUCallSplit' -test.benchtime 200x -test.count 3
func BenchmarkGPUCallSplit(b *testing.B) {
	needGPUEngine(b)
	for _, n := range []int{1 << 14, 1 << 15, 1 << 17} {
		for _, one := range []bool{true, false} {
			name, tun := fmt.Sprintf("n=%d/split", n), Tuning{splitMin: 1 << 14}
			if one {
				name, tun = fmt.Sprintf("n=%d/one", n), Tuning{splitMin: -1}
			}
			b.Run(name, func(b *testing.B) { reportCallBound(b, timeGradCalls(b, n, tun, 0)) })
		}
	}
}

// reportCallBound reports BenchmarkGPUCallBound's figures of the calls
// whose trace's stats are s: the bound (kernel-ms + 1.3·copy-ms
// + 0.2 ms), the host's time beyond the kernels and copies, the staging
// and the scatter.
func reportCallBound(b *testing.B, s TraceStats) {
	call := float64(b.Elapsed()) / 1e6 / float64(b.N)
	kernel := float64(s.Kernel) / 1e6 / float64(b.N)
	copies := float64(s.Transfer) / 1e6 / float64(b.N)
	b.ReportMetric(kernel+1.3*copies+0.2, "bound-ms/op")
	b.ReportMetric(call-kernel-copies, "host-ms/op")
	b.ReportMetric(float64(s.Stage)/1e6/float64(b.N), "stage-ms/op")
	b.ReportMetric(float64(s.Scatter)/1e6/float64(b.N), "scatter-ms/op")
}

// TestGPUSplitDownload checks on the device that a launch whose results
// come back in two parts (splitAt: the default at 32,768 trajectories)
// gives the results of one copy back (Tuning.splitMin -1) bit for bit:
// the same kernel, its arrays read at other offsets.
func TestGPUSplitDownload(t *testing.T) {
	needGPUEngine(t)
	c := lorenzCallCase(1 << 15)
	var gs [2]*ode.Gradient
	for k, tun := range []Tuning{{}, {splitMin: -1}} {
		set := c.set
		set.Engine = tuned(t, "cuda", tun)
		sv, err := ode.NewSolver(c.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		if gs[k], err = sv.Grad(nil, &c.prob, c.loss, nil); err != nil {
			t.Fatal(err)
		}
	}
	sameGrads(t, "split against one copy", gs[0], gs[1])
}

// TestGPUChunkLaunch checks on the device that a launch run as a kernel
// per chunk of results, its copies beside the next chunks' kernels (the
// default from 2^19 trajectories), gives the results of one kernel
// (Tuning.NoChunkLaunch) bit for bit: every trajectory's arithmetic is
// the same, and the loss is summed on the host in trajectory order.
func TestGPUChunkLaunch(t *testing.T) {
	needGPUEngine(t)
	c := lorenzCallCase(1<<19 + 1000)
	var gs [2]*ode.Gradient
	var launches [2]int
	for k, one := range []bool{false, true} {
		set := c.set
		set.Engine = tuned(t, "cuda", Tuning{NoChunkLaunch: one})
		sv, err := ode.NewSolver(c.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		var tr Trace
		if gs[k], err = sv.GradContext(WithTrace(context.Background(), &tr), nil, &c.prob, c.loss, nil); err != nil {
			t.Fatal(err)
		}
		launches[k] = tr.Stats().Launches
	}
	if launches[0] <= launches[1] {
		t.Errorf("%d kernels with a kernel per chunk, %d with one: want more", launches[0], launches[1])
	}
	for _, f := range []struct {
		name      string
		got, want []float64
	}{{"loss", []float64{gs[0].Loss}, []float64{gs[1].Loss}}, {"dL/dY0", gs[0].Y0, gs[1].Y0}, {"dL/dP", gs[0].P, gs[1].P}, {"Y", gs[0].Solution.Y, gs[1].Solution.Y}} {
		if ok, i := bitsEqual(f.got, f.want); !ok {
			t.Errorf("%s differs at %d", f.name, i)
		}
	}
}
