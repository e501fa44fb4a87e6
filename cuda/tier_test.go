package cuda

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
)

// The tests of tiered first calls (tier.go) run on host backends whose
// disk cache is cold (hostBackend.cold) and whose compiles wait for a
// gate the test opens (tierBackend): what runs on the CPU while a compile
// runs is decided by the test, not by timing. They do not run in
// parallel: they wait for the background compiles (compiling), theirs
// alone.

// tierBackend is a host backend whose compiles wait for gate to close (if
// not nil) and then fail with fail (if not nil) or compile with kernels
// (cuda-host's backend, whose executables every host engine shares).
// Where asked is not nil, a question to its disk cache (the last step of
// writing a kernel's source: kernelEntry.long) waits for it to close.
type tierBackend struct {
	*hostBackend
	kernels *hostBackend
	gate    chan struct{}
	asked   chan struct{}
	fail    error
	started atomic.Int32 // compiles begun
}

func (b *tierBackend) cached(src, name string, opts []string) bool {
	if b.asked != nil {
		<-b.asked
	}
	return b.hostBackend.cached(src, name, opts)
}

func (b *tierBackend) compile(src, name string, opts []string) (backendKernel, error) {
	b.started.Add(1)
	if b.gate != nil {
		<-b.gate
	}
	if b.fail != nil {
		return nil, b.fail
	}
	return b.kernels.compile(src, name, opts)
}

// newTierBackend returns a tierBackend with a cold cache (cold) or not.
func newTierBackend(gate chan struct{}, fail error, cold bool) *tierBackend {
	hb := newHostBackend(1 << 30)
	hb.cold = cold
	return &tierBackend{hostBackend: hb, kernels: hostF64.be.(*hostBackend), gate: gate, fail: fail}
}

var tierSeq atomic.Int32

// tierEngine registers a float64 engine on backend be with tuning tun
// and returns its name.
func tierEngine(be backend, tun Tuning) string {
	e := &Engine{name: fmt.Sprintf("cuda-host-tier-%d", tierSeq.Add(1)), prec: Float64, be: be}
	e.SetTuning(tun)
	ode.Register(e)
	return e.name
}

// heldTier is a tiered float64 engine on a host backend with a cold
// cache whose compiles wait until release: every kernel's compile is
// long (Tuning.tierMin 1), and the calls made before release run on the
// CPU engine.
type heldTier struct {
	name string
	tb   *tierBackend
	gate chan struct{}
	once sync.Once
}

// holdTier returns a heldTier whose compiles fail with fail (if not nil)
// once released. The test's end releases them, if it has not.
func holdTier(t *testing.T, fail error) *heldTier {
	h := &heldTier{gate: make(chan struct{})}
	h.tb = newTierBackend(h.gate, fail, true)
	h.name = tierEngine(h.tb, Tuning{tierMin: 1})
	t.Cleanup(h.release)
	return h
}

// release lets the held compiles run and waits until no compile runs in
// the background (compiling). A call after the first waits only.
func (h *heldTier) release() {
	h.once.Do(func() { close(h.gate) })
	compiling.Wait()
}

// oneCompile reports an error unless exactly one compile has started.
func (h *heldTier) oneCompile(t *testing.T) {
	t.Helper()
	if n := h.tb.started.Load(); n != 1 {
		t.Errorf("%d compiles started, want 1", n)
	}
}

// tierOut is what TestHostEngineTiered compares of an operation's
// result: its solution (nil for a record), its mesh (nil if none), whether
// that mesh's steps were on the device (before tierCall brought them to
// the host), and its values (the loss and the gradients, or the steps).
type tierOut struct {
	sol      *ode.Solution
	mesh     *ode.Mesh
	resident bool
	x        []float64
}

// tierCall is one operation of TestHostEngineTiered, run on solver sv
// with trace tr (where the operation takes a context: traced); mesh is
// the CPU engine's, for the operations on a given mesh.
type tierCall struct {
	name   string
	traced bool
	call   func(t *testing.T, sv *ode.Solver, c engineCase, mesh *ode.Mesh, tr *Trace) (tierOut, error)
}

var tierCalls = []tierCall{
	{"solve", true, func(t *testing.T, sv *ode.Solver, c engineCase, _ *ode.Mesh, tr *Trace) (tierOut, error) {
		s, err := sv.SolveContext(WithTrace(t.Context(), tr), &c.prob)
		return tierOut{sol: s}, err
	}},
	{"record", true, func(t *testing.T, sv *ode.Solver, c engineCase, _ *ode.Mesh, tr *Trace) (tierOut, error) {
		m, _, err := sv.RecordContext(WithTrace(t.Context(), tr), &c.prob)
		if err != nil {
			return tierOut{}, err
		}
		out := tierOut{mesh: m, resident: m.Resident != nil}
		hostMesh(t, m)
		out.x = m.H[:m.Rows*m.N]
		return out, nil
	}},
	{"grad", true, func(t *testing.T, sv *ode.Solver, c engineCase, _ *ode.Mesh, tr *Trace) (tierOut, error) {
		return tierGrad(t, sv, c, nil, tr)
	}},
	{"grad on a mesh", true, func(t *testing.T, sv *ode.Solver, c engineCase, m *ode.Mesh, tr *Trace) (tierOut, error) {
		return tierGrad(t, sv, c, m, tr)
	}},
	{"loss on a mesh", false, func(t *testing.T, sv *ode.Solver, c engineCase, m *ode.Mesh, _ *Trace) (tierOut, error) {
		l, s, err := sv.Loss(&c.prob, c.loss, m)
		return tierOut{sol: s, x: []float64{l}}, err
	}},
	{"replay", false, func(t *testing.T, sv *ode.Solver, c engineCase, m *ode.Mesh, _ *Trace) (tierOut, error) {
		s, err := sv.Replay(&c.prob, m)
		return tierOut{sol: s}, err
	}},
}

// tierGrad runs c's gradient (on mesh m if not nil) and returns its
// solution, its mesh, and the loss then the gradients.
func tierGrad(t *testing.T, sv *ode.Solver, c engineCase, m *ode.Mesh, tr *Trace) (tierOut, error) {
	g, err := sv.GradContext(WithTrace(t.Context(), tr), nil, &c.prob, c.loss, m)
	if err != nil {
		return tierOut{}, err
	}
	out := tierOut{sol: g.Solution}
	if m == nil {
		out.mesh, out.resident = g.Mesh, g.Mesh.Resident != nil
		hostMesh(t, g.Mesh)
	}
	out.x = append([]float64{g.Loss}, g.Y0...)
	out.x = append(append(out.x, g.P...), g.Shared...)
	return out, nil
}

// TestHostEngineTiered checks tiered first calls on each operation: while
// the kernel's compile is held (its gate closed) the first call and four
// concurrent ones run on the CPU engine, one compile started, their
// results the CPU engine's bit for bit, named "cpu" (Solution.Engine,
// Mesh.Engine: a host mesh) and counted by the trace (OnCPU, no
// launches); once the compile has ended, a call runs the kernel
// (launches, the engine's name) and its results match the CPU engine's
// to the usual tolerance.
func TestHostEngineTiered(t *testing.T) {
	needHost(t)
	c := problemCase(t, "lorenz", ode.Tsit5, 16)
	cpu, err := ode.NewSolver(c.prob.Field, &c.set)
	if err != nil {
		t.Fatal(err)
	}
	cpuGrad, err := tierGrad(t, cpu, c, nil, &Trace{})
	if err != nil {
		t.Fatal(err)
	}
	cpuMesh := cpuGrad.mesh
	for _, tc := range tierCalls {
		t.Run(tc.name, func(t *testing.T) {
			want, err := tc.call(t, cpu, c, cpuMesh, &Trace{})
			if err != nil {
				t.Fatal(err)
			}
			h := holdTier(t, nil)
			name := h.name
			set := c.set
			set.Engine = name
			sv, err := ode.NewSolver(c.prob.Field, &set)
			if err != nil {
				t.Fatal(err)
			}
			// onCPU checks a call made while the compile is held.
			onCPU := func(what string, got tierOut, tr *Trace, err error) {
				t.Helper()
				if err != nil {
					t.Errorf("%s: %v", what, err)
					return
				}
				if got.sol != nil {
					sameSolution(t, what, got.sol, want.sol)
					if got.sol.Engine != "cpu" {
						t.Errorf("%s: Solution.Engine %q, want cpu", what, got.sol.Engine)
					}
				}
				if ok, i := bitsEqual(got.x, want.x); !ok {
					t.Errorf("%s: results differ from the CPU engine's at %d", what, i)
				}
				if m := got.mesh; m != nil && (m.Engine != "cpu" || got.resident) {
					t.Errorf("%s: mesh of engine %q, resident %v: want a host mesh of cpu", what, m.Engine, got.resident)
				}
				if s := tr.Stats(); tc.traced && (s.OnCPU != 1 || s.Launches != 0) {
					t.Errorf("%s: trace %d calls on the CPU, %d launches: want 1 and 0", what, s.OnCPU, s.Launches)
				}
			}
			var tr Trace
			got, err := tc.call(t, sv, c, cpuMesh, &tr)
			onCPU("first call", got, &tr, err)
			var wg sync.WaitGroup
			for k := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var tr Trace
					got, err := tc.call(t, sv, c, cpuMesh, &tr)
					onCPU(fmt.Sprintf("concurrent call %d", k), got, &tr, err)
				}()
			}
			wg.Wait()
			h.oneCompile(t)
			h.release()
			tr.Reset()
			got, err = tc.call(t, sv, c, cpuMesh, &tr)
			if err != nil {
				t.Fatal(err)
			}
			if s := tr.Stats(); tc.traced && (s.OnCPU != 0 || s.Launches == 0) {
				t.Errorf("after the compile: trace %d calls on the CPU, %d launches: want 0 and some", s.OnCPU, s.Launches)
			}
			if got.sol != nil {
				if got.sol.Engine != name {
					t.Errorf("after the compile: Solution.Engine %q, want %q", got.sol.Engine, name)
				}
				if got.sol.Y != nil {
					compareSolutions(t, tc.name+" after the compile", got.sol, want.sol, c.tol, 0)
				}
			}
			if m := got.mesh; m != nil && m.Engine != name {
				t.Errorf("after the compile: mesh of engine %q, want %q", m.Engine, name)
			}
			if got.mesh != nil && tc.name == "record" {
				// Step sizes agree to the controller's rounding.
				compareMesh(t, tc.name+" after the compile", got.mesh, want.mesh, nil)
			} else {
				closeRows(t, tc.name+" after the compile", got.x, want.x, len(want.x), c.tol, nil)
			}
			h.oneCompile(t)
		})
	}
}

// TestHostEngineTierWhen checks where a first call runs on the CPU
// engine: a float64 engine whose kernel compile is long (a source of at
// least Tuning.tierMin bytes, not in the disk cache) and not
// Tuning.WaitForCompile; else it compiles in place and runs the kernel.
func TestHostEngineTierWhen(t *testing.T) {
	needHost(t)
	c := problemCase(t, "lorenz", ode.Tsit5, 8)
	for _, tc := range []struct {
		name string
		tun  Tuning
		cold bool
		prec Precision
		on   bool // runs on the CPU engine
	}{
		{name: "long", tun: Tuning{tierMin: 1}, cold: true, prec: Float64, on: true},
		{name: "cached", tun: Tuning{tierMin: 1}, cold: false, prec: Float64},
		{name: "short", tun: Tuning{tierMin: 1 << 30}, cold: true, prec: Float64},
		{name: "default threshold", tun: Tuning{}, cold: true, prec: Float64}, // Lorenz's Tsit5 kernel: below defaultTierFrom
		{name: "wait", tun: Tuning{tierMin: 1, WaitForCompile: true}, cold: true, prec: Float64},
		{name: "float32", tun: Tuning{tierMin: 1}, cold: true, prec: Float32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A compile in the background is held until the call has
			// returned (else it may end first: the call would run the
			// kernel, rightly).
			var gate chan struct{}
			if tc.on {
				gate = make(chan struct{})
			}
			tb := newTierBackend(gate, nil, tc.cold)
			if tc.prec == Float32 {
				tb.kernels = hostF32.be.(*hostBackend)
			}
			e := &Engine{name: fmt.Sprintf("cuda-host-tier-%d", tierSeq.Add(1)), prec: tc.prec, be: tb}
			e.SetTuning(tc.tun)
			ode.Register(e)
			set := c.set
			set.Engine = e.name
			if tc.prec == Float32 {
				set.RelTol = 1e-4
			}
			sv, err := ode.NewSolver(c.prob.Field, &set)
			if err != nil {
				t.Fatal(err)
			}
			var tr Trace
			g, err := sv.GradContext(WithTrace(t.Context(), &tr), nil, &c.prob, c.loss, nil)
			if gate != nil {
				close(gate)
			}
			compiling.Wait()
			if err != nil {
				t.Fatal(err)
			}
			s := tr.Stats()
			want := e.name
			if tc.on {
				want = "cpu"
			}
			if g.Solution.Engine != want || (s.OnCPU == 1) != tc.on || (s.Launches > 0) == tc.on {
				t.Errorf("engine %q, trace %d calls on the CPU, %d launches: want engine %q, on the CPU %v", g.Solution.Engine, s.OnCPU, s.Launches, want, tc.on)
			}
			if n := tb.started.Load(); n != 1 {
				t.Errorf("%d compiles started, want 1", n)
			}
		})
	}
}

// TestHostEngineTierFail checks a compile that fails in the background:
// the calls during it run on the CPU engine, the first after it returns
// its error (and so do the later ones: the kernel is remembered as
// failed), with no second compile.
func TestHostEngineTierFail(t *testing.T) {
	needHost(t)
	c := problemCase(t, "lorenz", ode.Tsit5, 8)
	injected := errors.New("injected compile failure")
	h := holdTier(t, injected)
	set := c.set
	set.Engine = h.name
	sv, err := ode.NewSolver(c.prob.Field, &set)
	if err != nil {
		t.Fatal(err)
	}
	g, err := sv.Grad(nil, &c.prob, c.loss, nil)
	if err != nil || g.Solution.Engine != "cpu" {
		t.Fatalf("during the compile: %v, engine %q: want a result of cpu", err, g.Solution.Engine)
	}
	h.release()
	for k := range 2 {
		if _, err := sv.Grad(nil, &c.prob, c.loss, nil); !errors.Is(err, injected) {
			t.Errorf("call %d after the compile: error %v, want the compile's", k, err)
		}
	}
	h.oneCompile(t)
}

// TestHostEngineTierWait checks a call that waits for a compile another
// call started in the background (an engine with WaitForCompile sharing
// the kernels, as the device trainer and cuda-multi wait): its context's
// end ends the wait with ctx's error, the compile running on; once it
// has ended the call runs the kernel.
func TestHostEngineTierWait(t *testing.T) {
	needHost(t)
	c := problemCase(t, "lorenz", ode.Tsit5, 8)
	h := holdTier(t, nil)
	waiting := tierEngine(h.tb, Tuning{tierMin: 1, WaitForCompile: true}) // the same kernel set
	set := c.set
	set.Engine = h.name
	if _, err := ode.Grad(nil, c.prob, c.loss, nil, &set); err != nil {
		t.Fatal(err)
	}
	set.Engine = waiting
	sv, err := ode.NewSolver(c.prob.Field, &set)
	if err != nil {
		t.Fatal(err)
	}
	// A context ended before the call: package ode hands the job to the
	// executor, whose wait for the held compile ends at once.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := sv.GradContext(ctx, nil, &c.prob, c.loss, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled wait: error %v, want context.Canceled", err)
	}
	h.release()
	g, s := c.tracedGrad(t, sv)
	if g.Solution.Engine != waiting || s.Launches == 0 || s.OnCPU != 0 {
		t.Errorf("after the compile: engine %q, %d launches, %d calls on the CPU: want %q, launches, none", g.Solution.Engine, s.Launches, s.OnCPU, waiting)
	}
	h.oneCompile(t)
}

// TestHostEngineTierAuto checks Method Auto on a tiered engine whose
// compiles are held: its Tsit5 pass and its Rodas5P continuation run on
// the CPU engine's executors (the continuation from the trajectories' own
// start times, as on the device) and agree with the CPU engine's switch
// in place (odetest.AutoContinue), the Solution naming the CPU engine;
// once the compiles end, the same calls run the kernels.
func TestHostEngineTierAuto(t *testing.T) {
	needHost(t)
	p, loss := autoMixed(8)
	h := holdTier(t, nil)
	name := h.name
	odetest.AutoContinue(t, name, p, loss, 1e-10, 1e-6)
	sv, err := ode.NewSolver(p.Field, &ode.Settings{Method: ode.Auto, Engine: name})
	if err != nil {
		t.Fatal(err)
	}
	var tr Trace
	g, err := sv.GradContext(WithTrace(t.Context(), &tr), nil, &p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := tr.Stats(); g.Solution.Engine != "cpu" || g.Mesh.Engine != "cpu" || s.OnCPU == 0 || s.Launches != 0 {
		t.Errorf("during the compiles: engine %q, mesh's %q, %d calls on the CPU, %d launches: want cpu, some, none", g.Solution.Engine, g.Mesh.Engine, s.OnCPU, s.Launches)
	}
	h.release()
	tr.Reset()
	// The calls above asked for every kernel of this Grad: their
	// compiles have ended, and it runs on the device.
	if g, err = sv.GradContext(WithTrace(t.Context(), &tr), nil, &p, loss, nil); err != nil {
		t.Fatal(err)
	}
	if s := tr.Stats(); g.Solution.Engine != name || s.Launches == 0 || s.OnCPU != 0 {
		t.Errorf("after the compiles: engine %q, %d launches, %d calls on the CPU: want %q, launches, none", g.Solution.Engine, s.Launches, s.OnCPU, name)
	}
	compiling.Wait()
}

// raceCase returns c's problem with n trajectories, solved by one
// worker in chunks of 8 (so that a CPU run reports its progress, and
// reads its context, between chunks), and a caller's Gradient whose
// arrays hold a sentinel.
func raceCase(t *testing.T, n int) (engineCase, *ode.Gradient) {
	c := problemCase(t, "lorenz", ode.Tsit5, n)
	c.set.Exec.Workers, c.set.Exec.BlockSize = 1, 8
	d, np, k := c.prob.Field.Dim, c.prob.Field.Params, len(c.prob.SaveAt)
	filled := func(m int) []float64 {
		x := make([]float64, m)
		for i := range x {
			x[i] = raceSentinel
		}
		return x
	}
	return c, &ode.Gradient{Y0: filled(n * d), P: filled(n * np), Solution: &ode.Solution{Y: filled(n * d), Ys: filled(n * k * d)}}
}

// raceSentinel is what the caller's arrays hold before a call.
const raceSentinel = -7.25

// callerArrays returns the caller's arrays of g by name.
func callerArrays(g *ode.Gradient) map[string][]float64 {
	return map[string][]float64{"Y0": g.Y0, "P": g.P, "Y": g.Solution.Y, "Ys": g.Solution.Ys}
}

// wholeOrUntouched checks each of the caller's arrays held before a call
// (callerArrays): it holds the sentinel throughout (the call did not
// write it), or, where the call returned g, g's array of that name (the
// call wrote all of it); never part of one and part of the other.
func wholeOrUntouched(t *testing.T, what string, held map[string][]float64, g *ode.Gradient) {
	t.Helper()
	var now map[string][]float64
	if g != nil {
		now = callerArrays(g)
	}
	for name, x := range held {
		untouched := !slices.ContainsFunc(x, func(v float64) bool { return v != raceSentinel })
		if untouched {
			continue
		}
		if g == nil {
			t.Errorf("%s: the caller's %s is written, by a call that returned no result", what, name)
		} else if ok, i := bitsEqual(x, now[name]); !ok {
			t.Errorf("%s: the caller's %s is written in part: differs from the result at %d", what, name, i)
		}
	}
}

// gradValues returns g's loss, gradients, final and saved states, in
// one array.
func gradValues(g *ode.Gradient) []float64 {
	x := append([]float64{g.Loss}, g.Y0...)
	x = append(append(x, g.P...), g.Shared...)
	return append(append(x, g.Solution.Y...), g.Solution.Ys...)
}

// TestHostEngineTierRace checks the race of a tiered call's CPU run and
// its kernel's compile, the compile released, or the caller's context
// ended, from the CPU run's progress after its first chunk of four or its
// last. A compile that ends while chunks are left stops the CPU run and
// the call runs on the device: its results are the device's bit for bit
// (those of a later call), the caller's arrays written whole, the trace
// counting the stopped run (CPUStopped) and launches. A compile that ends
// after the last chunk, or not during the call, leaves the CPU engine's
// results, bit for bit. A caller's context that ends returns its error
// (also where the compile has ended), with the caller's arrays as they
// were.
func TestHostEngineTierRace(t *testing.T) {
	needHost(t)
	const n = 32
	c, _ := raceCase(t, n)
	cpuWant, err := ode.Grad(nil, c.prob, c.loss, nil, &c.set)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name            string
		at              int  // trajectories done when the compile is released or the context ends (0: never)
		release, cancel bool // release the compile, end the caller's context
		device          bool // the device's results (else the CPU engine's, or with cancel an error)
	}{
		{name: "compile first", at: 8, release: true, device: true},
		{name: "cpu first", at: 0},
		{name: "cpu at the line", at: n, release: true},
		{name: "caller cancels", at: 8, cancel: true},
		{name: "caller cancels after the compile", at: 8, release: true, cancel: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := holdTier(t, nil)
			c, dst := raceCase(t, n)
			held := callerArrays(dst)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var once sync.Once
			c.set.Engine = h.name
			c.set.Progress = func(done, _ int) {
				if done == tc.at {
					once.Do(func() { // (the CPU run's: the device's comes after)
						if tc.release {
							h.release()
						}
						if tc.cancel {
							cancel()
						}
					})
				}
			}
			sv, err := ode.NewSolver(c.prob.Field, &c.set)
			if err != nil {
				t.Fatal(err)
			}
			var tr Trace
			g, err := sv.GradContext(WithTrace(ctx, &tr), dst, &c.prob, c.loss, nil)
			s := tr.Stats()
			h.release()
			if tc.cancel {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("error %v, want context.Canceled", err)
				}
				wholeOrUntouched(t, "a cancelled call", held, nil)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantEngine, want := "cpu", cpuWant
			if tc.device {
				wantEngine = h.name
				var after Trace
				if want, err = sv.GradContext(WithTrace(t.Context(), &after), nil, &c.prob, c.loss, nil); err != nil {
					t.Fatal(err)
				}
				if a := after.Stats(); a.Launches == 0 || want.Solution.Engine != h.name {
					t.Fatalf("the call after the race: engine %q, %d launches: want %q, launches", want.Solution.Engine, a.Launches, h.name)
				}
			}
			if g.Solution.Engine != wantEngine {
				t.Errorf("Solution.Engine %q, want %q", g.Solution.Engine, wantEngine)
			}
			if tc.device && (s.CPUStopped != 1 || s.OnCPU != 0 || s.Launches == 0) {
				t.Errorf("trace: %d CPU runs stopped, %d on the CPU, %d launches: want 1, 0, launches", s.CPUStopped, s.OnCPU, s.Launches)
			}
			if !tc.device && (s.CPUStopped != 0 || s.OnCPU != 1 || s.Launches != 0) {
				t.Errorf("trace: %d CPU runs stopped, %d on the CPU, %d launches: want 0, 1, none", s.CPUStopped, s.OnCPU, s.Launches)
			}
			if ok, i := bitsEqual(gradValues(g), gradValues(want)); !ok {
				t.Errorf("results differ from %s's at %d", wantEngine, i)
			}
			wholeOrUntouched(t, "the call", held, g)
			h.oneCompile(t)
		})
	}
}

// TestHostEngineTierSourceLate checks that a tiered call's CPU run starts
// before its kernel's source is written and its size known: the CPU run
// ends while the question to the disk cache (the source's last step) is
// held. Then a kernel that is not in the cache (long) leaves the CPU
// engine's results; one that is (short) has them dropped and runs on the
// device, as without tiers.
func TestHostEngineTierSourceLate(t *testing.T) {
	needHost(t)
	const n = 32
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) {
			c, _ := raceCase(t, n)
			tb := newTierBackend(nil, nil, !cached)
			tb.asked = make(chan struct{})
			var once sync.Once
			release := func() { once.Do(func() { close(tb.asked) }) }
			defer compiling.Wait()
			defer release()
			// A CPU run that waited for the source would wait for ever:
			// the question is let go after a minute, and the test fails.
			var late atomic.Bool
			timer := time.AfterFunc(time.Minute, func() { late.Store(true); release() })
			defer timer.Stop()
			c.set.Engine = tierEngine(tb, Tuning{tierMin: 1})
			c.set.Progress = func(done, _ int) {
				if done == n {
					release() // the CPU run has ended: the source's size is not known yet
				}
			}
			sv, err := ode.NewSolver(c.prob.Field, &c.set)
			if err != nil {
				t.Fatal(err)
			}
			g, st := c.tracedGrad(t, sv)
			if late.Load() {
				t.Errorf("the CPU run did not end before the source was written")
			}
			s := st
			if cached && (g.Solution.Engine != c.set.Engine || s.CPUStopped != 1 || s.OnCPU != 0 || s.Launches == 0) {
				t.Errorf("a cached kernel: engine %q, %d CPU results dropped, %d on the CPU, %d launches: want %q, 1, 0, launches",
					g.Solution.Engine, s.CPUStopped, s.OnCPU, s.Launches, c.set.Engine)
			}
			if !cached && (g.Solution.Engine != "cpu" || s.CPUStopped != 0 || s.OnCPU != 1 || s.Launches != 0) {
				t.Errorf("a long compile: engine %q, %d CPU results dropped, %d on the CPU, %d launches: want cpu, 0, 1, none",
					g.Solution.Engine, s.CPUStopped, s.OnCPU, s.Launches)
			}
		})
	}
}

// TestHostEngineTierWide checks a tiered first call whose kernel's
// layout waits for the wide layout's measure (Pollution with Rodas5P,
// d = 20: kernelSet.widePerWarp, seconds), computed in the background
// while the CPU engine runs: its results are the CPU engine's bit for
// bit, the measure is known once it has returned, and the kernel it
// raced is the one the calls after the compile run (its injected failure
// is theirs).
func TestHostEngineTierWide(t *testing.T) {
	needHost(t)
	c := problemCase(t, "pollution", ode.Rodas5P, 16)
	want, err := ode.Grad(nil, c.prob, c.loss, nil, &c.set)
	if err != nil {
		t.Fatal(err)
	}
	injected := errors.New("injected compile failure")
	h := holdTier(t, injected)
	set := c.set
	set.Engine = h.name
	sv, err := ode.NewSolver(c.prob.Field, &set)
	if err != nil {
		t.Fatal(err)
	}
	ks := kernelSetOf(h.tb, sv.Plan(), Float64, Tuning{tierMin: 1})
	if _, ok, _ := ks.widePerWarpKnown(true, true, false); ok {
		t.Fatal("the wide layout's measure is known before the first call")
	}
	g, s := c.tracedGrad(t, sv)
	if g.Solution.Engine != "cpu" || s.OnCPU != 1 || s.Launches != 0 {
		t.Errorf("engine %q, %d on the CPU, %d launches: want cpu, 1, none", g.Solution.Engine, s.OnCPU, s.Launches)
	}
	if ok, i := bitsEqual(gradValues(g), gradValues(want)); !ok {
		t.Errorf("results differ from the CPU engine's at %d", i)
	}
	if _, ok, _ := ks.widePerWarpKnown(true, true, false); !ok {
		t.Error("the wide layout's measure is not known after the first call")
	}
	h.release()
	if _, err := sv.Grad(nil, &c.prob, c.loss, nil); !errors.Is(err, injected) {
		t.Errorf("after the compile: error %v, want the compile's", err)
	}
	h.oneCompile(t)
}

// TestBackgroundCount checks the count of background compiles
// (WaitForCompiles): a wait returns at once when none runs, ends with
// its context's error while some run, returns once the last ends, and
// the count starts again from zero.
func TestBackgroundCount(t *testing.T) {
	t.Parallel()
	var c backgroundCount
	for round := range 2 {
		if err := c.WaitContext(t.Context()); err != nil {
			t.Fatalf("round %d: a wait with none running: %v", round, err)
		}
		c.Add(1)
		c.Add(1)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := c.WaitContext(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("round %d: a cancelled wait with two running: %v, want context.Canceled", round, err)
		}
		waited := make(chan error)
		go func() { waited <- c.WaitContext(t.Context()) }()
		c.Done()
		c.Done()
		if err := <-waited; err != nil {
			t.Errorf("round %d: a wait for two that end: %v", round, err)
		}
	}
}
