package cuda

import (
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
)

// residentEngine is the host engine on a backend of its own, so that a
// test can count the device memory that resident meshes hold.
var residentEngine = &Engine{name: "cuda-host-resident", prec: Float64,
	be: &fakeDevice{hostBackend: newHostBackend(1 << 30), kernels: hostF64.be.(*hostBackend)}}

func init() { ode.Register(residentEngine) }

// TestHostEngineResident checks meshes kept in device memory on the host
// engine: a gradient's recorded mesh stays on the device (H nil) with the
// CPU engine's steps; a replay on it reads it in place (its steps are not
// uploaded) and gives the gradient of the same mesh on the host; a
// released mesh is refused; the CPU engine replays a resident mesh by
// copying it; reruns and chunked ensembles record to the host as before;
// and the device memory goes back on Release, on Host, and once the mesh
// is unreachable.
func TestHostEngineResident(t *testing.T) {
	fd := residentEngine.be.(*fakeDevice)
	used := func() int64 { fd.mu.Lock(); defer fd.mu.Unlock(); return fd.used }
	c := lorenzCase(64, 1e-6)
	cpu, err := ode.NewSolver(c.prob.Field, &c.set)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cpu.Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := c.set
	set.Engine = residentEngine.name
	sv, err := ode.NewSolver(c.prob.Field, &set)
	if err != nil {
		t.Fatal(err)
	}
	// Handles that earlier tests on this engine left unreachable (kept
	// saved states, meshes, Method Auto's Rodas5P steps) go back first,
	// so that their cleanups do not free memory while this test counts it.
	collectResident(fd, 0)
	base := used()
	rec, err := sv.Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := rec.Mesh
	if m.Resident == nil || m.H != nil {
		t.Fatalf("recorded mesh: Resident %v, len(H) %d; want it on the device", m.Resident, len(m.H))
	}
	meshBytes := int64(m.Rows * m.N * 8)
	steps := make([]float64, m.Rows*m.N)
	if err := m.Resident.CopyTo(steps); err != nil {
		t.Fatal(err)
	}
	onDevice := slices.Clone(steps)
	compareMesh(t, "resident", &ode.Mesh{N: m.N, Rows: m.Rows, H: steps, Len: m.Len, Status: m.Status, T0: m.T0, T1: m.T1}, want.Mesh, nil)

	// A replay in place: the steps are not uploaded.
	var tr Trace
	given, err := sv.GradContext(WithTrace(t.Context(), &tr), nil, &c.prob, c.loss, m)
	if err != nil {
		t.Fatal(err)
	}
	if up := tr.Stats().Upload; up >= meshBytes {
		t.Errorf("replay of a resident mesh uploaded %d bytes, as much as its %d bytes of steps", up, meshBytes)
	}
	if m.Resident == nil {
		t.Error("the replay moved the mesh to the host")
	}
	// The same mesh from the host.
	hm := *m
	hm.Resident, hm.H = nil, onDevice
	fromHost, err := sv.Grad(nil, &c.prob, c.loss, &hm)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(given.P, fromHost.P) || !slices.Equal(given.Y0, fromHost.Y0) || given.Loss != fromHost.Loss {
		t.Error("the gradient on the resident mesh differs from the gradient on its host copy")
	}
	// The CPU engine copies it, and the device's copy goes back.
	c2 := *m
	onCPU, err := cpu.Grad(nil, &c.prob, c.loss, &c2)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Resident != nil || !slices.Equal(c2.H, onDevice) {
		t.Error("the CPU engine did not replay the resident mesh from a host copy")
	}
	if !m.Resident.Released() {
		t.Error("Host did not give the device memory back")
	}
	_ = onCPU
	if _, err := sv.Grad(nil, &c.prob, c.loss, m); err == nil || !strings.Contains(err.Error(), "released") {
		t.Errorf("a released mesh: %v, want an error saying it was released", err)
	}

	// Passed back, the gradient fills its resident mesh in place.
	rec2, err := sv.Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2 := rec2.Mesh.Resident
	if _, err := sv.Grad(rec2, &c.prob, c.loss, nil); err != nil {
		t.Fatal(err)
	}
	if rec2.Mesh.Resident != r2 {
		t.Error("a Gradient passed back: its mesh's device memory was reallocated")
	}
	rec2.Mesh.Release()
	if !r2.Released() {
		t.Error("Release did not give the memory back")
	}

	// Reruns (short first records) and chunks go through the host.
	func() {
		set := set
		set.Engine = tuned(t, residentEngine.name, Tuning{firstRows: 4})
		sv, err := ode.NewSolver(c.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		g, err := sv.Grad(nil, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		if g.Mesh.Resident != nil {
			t.Error("a record with reruns left its mesh on the device")
		}
		compareMesh(t, "reruns", g.Mesh, want.Mesh, nil)
	}()
	lim := set
	lim.MemoryLimit = 256 << 10
	svl, err := ode.NewSolver(c.prob.Field, &lim)
	if err != nil {
		t.Fatal(err)
	}
	var trl Trace
	g, err := svl.GradContext(WithTrace(t.Context(), &trl), nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	if trl.Stats().Launches < 2 || g.Mesh.Resident != nil {
		t.Errorf("a chunked record: %d launches, resident %v; want chunks and a host mesh", trl.Stats().Launches, g.Mesh.Resident != nil)
	}
	compareMesh(t, "chunks", g.Mesh, want.Mesh, nil)

	// Unreachable meshes give their memory back.
	if rec, err = sv.Grad(nil, &c.prob, c.loss, nil); err != nil {
		t.Fatal(err)
	}
	if residentOn(fd) == 0 {
		t.Fatal("no resident mesh left to collect: the test checks nothing")
	}
	rec, given, g, m, rec2 = nil, nil, nil, nil, nil
	collectResident(fd, 0)
	if b := residentOn(fd); b != 0 {
		t.Errorf("device memory held by meshes that are gone: %d bytes", b)
	}
	_, _, _, _, _ = rec, given, g, m, rec2
	if u := used(); u < base {
		t.Errorf("device memory in use fell below the start: %d < %d (a double free?)", u, base)
	}
}

// TestStagingBestFit checks that a launch's inputs and results, staged in
// two buffers of different sizes at once, reuse the two kept buffers on
// every later launch instead of taking a new one from the backend.
func TestStagingBestFit(t *testing.T) {
	fd := &fakeDevice{hostBackend: newHostBackend(1 << 20), kernels: hostF64.be.(*hostBackend)}
	ex := newExecutor(fd, nil, Float64, "staging-fit", Tuning{})
	for range 4 {
		up := ex.takeStaging(100)
		down := ex.takeStaging(1000)
		ex.giveStaging(down) // given back in the order of the launch's defers
		ex.giveStaging(up)
	}
	if _, _, gets, err := fd.hostHeld(); err != nil || gets != 2 {
		t.Errorf("four launches took %d buffers from the backend (%v), want 2", gets, err)
	}
}

// TestHostEngineStopStiff checks that a gradient with an explicit method
// on a stiff ensemble stops each trajectory where the stiffness test
// fires, as the CPU engine does: the same status, time reached and step
// counts on the host engine as on the CPU, well before T1, and the same
// refusal.
func TestHostEngineStopStiff(t *testing.T) {
	c := robertsonCase(8, ode.Tsit5, 1e4)
	c.set.RelTol, c.set.AbsTol = 1e-4, 1e-8
	run := func(engine string) ([]*ode.TrajectoryError, error) {
		set := c.set
		set.Engine = engine
		sv, err := ode.NewSolver(c.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		_, fails, err := sv.GradPartial(t.Context(), nil, &c.prob, c.loss, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", engine, err)
		}
		_, gerr := sv.Grad(nil, &c.prob, c.loss, nil)
		return fails, gerr
	}
	want, wantErr := run("cpu")
	got, gotErr := run(hostF64.name)
	if len(want) != c.prob.N || len(got) != len(want) {
		t.Fatalf("failed trajectories: CPU %d, host engine %d; want all %d (the test checks nothing otherwise)", len(want), len(got), c.prob.N)
	}
	for k, w := range want {
		g := got[k]
		if w.Status != ode.Stiff || !(w.T < c.prob.T1/10) || w.H == 0 {
			t.Fatalf("CPU trajectory %d: status %v at t = %v; want it stopped as stiff early (the test checks nothing otherwise)", w.Index, w.Status, w.T)
		}
		if g.Index != w.Index || g.Status != w.Status || g.Accepted != w.Accepted || g.Rejected != w.Rejected {
			t.Errorf("trajectory %d: host engine %v after %d+%d steps at t = %v; CPU %v after %d+%d at t = %v", w.Index,
				g.Status, g.Accepted, g.Rejected, g.T, w.Status, w.Accepted, w.Rejected, w.T)
		}
		// The time reached and the last step come back only for failures
		// (lazyTimes): they must be the record's, as the CPU's.
		if !(math.Abs(g.T-w.T) <= 1e-9*math.Abs(w.T)) || !(math.Abs(g.H-w.H) <= 1e-6*math.Abs(w.H)) {
			t.Errorf("trajectory %d: host engine stopped at t = %v after a step of %v; CPU at %v after %v", w.Index, g.T, g.H, w.T, w.H)
		}
	}
	if gotErr == nil || wantErr == nil || !strings.Contains(gotErr.Error(), "stiff") {
		t.Errorf("Grad: host engine %v, CPU %v; want both refused as stiff", gotErr, wantErr)
	}
}

// settledResident collects until no more device memory of be goes back
// (cleanups run after a collection, on a goroutine of their own) and
// returns what resident meshes and saves still hold: a base that an
// earlier test's unreachable handles cannot lower later.
func settledResident(be backend) int64 {
	runtime.GC()
	last := residentOn(be)
	for range 50 {
		time.Sleep(10 * time.Millisecond)
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		n := residentOn(be)
		if n == last {
			return n
		}
		last = n
	}
	return last
}

// collectResident runs the garbage collector until the device memory
// that resident meshes and kept saves hold on be is down to want (their
// handles' cleanups run after a collection), for at most half a second.
func collectResident(be backend, want int64) {
	for range 50 {
		runtime.GC()
		if residentOn(be) == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
