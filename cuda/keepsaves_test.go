package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// keepSavesOp is one operation of TestHostEngineKeepSaves: it runs on sv
// (with dst, where the operation takes one: SolveTo, Grad) and returns the
// solution whose saves it checks.
type keepSavesOp struct {
	name string
	// kept reports whether an engine that keeps saves keeps this
	// operation's, on a case with events or not: a loss or gradient with
	// events reads them on the host.
	kept func(events bool) bool
	run  func(sv *ode.Solver, c *engineCase, dst *ode.Solution, mesh *ode.Mesh) (*ode.Solution, error)
}

var keepSavesOps = []keepSavesOp{
	{"solve", func(bool) bool { return true }, func(sv *ode.Solver, c *engineCase, _ *ode.Solution, _ *ode.Mesh) (*ode.Solution, error) {
		return sv.Solve(&c.prob)
	}},
	{"solveto", func(bool) bool { return true }, func(sv *ode.Solver, c *engineCase, dst *ode.Solution, _ *ode.Mesh) (*ode.Solution, error) {
		return sv.SolveTo(dst, &c.prob)
	}},
	{"record", func(bool) bool { return false }, func(sv *ode.Solver, c *engineCase, _ *ode.Solution, _ *ode.Mesh) (*ode.Solution, error) {
		_, sol, err := sv.Record(&c.prob)
		return sol, err
	}},
	{"replay", func(bool) bool { return true }, func(sv *ode.Solver, c *engineCase, _ *ode.Solution, m *ode.Mesh) (*ode.Solution, error) {
		return sv.Replay(&c.prob, m)
	}},
	{"grad", func(ev bool) bool { return !ev }, func(sv *ode.Solver, c *engineCase, dst *ode.Solution, _ *ode.Mesh) (*ode.Solution, error) {
		g, err := sv.Grad(&ode.Gradient{Solution: dst}, &c.prob, c.loss, nil)
		if err != nil {
			return nil, err
		}
		return g.Solution, nil
	}},
	{"gradmesh", func(ev bool) bool { return !ev }, func(sv *ode.Solver, c *engineCase, _ *ode.Solution, m *ode.Mesh) (*ode.Solution, error) {
		g, err := sv.Grad(nil, &c.prob, c.loss, m)
		if err != nil {
			return nil, err
		}
		return g.Solution, nil
	}},
	{"loss", func(ev bool) bool { return !ev }, func(sv *ode.Solver, c *engineCase, _ *ode.Solution, _ *ode.Mesh) (*ode.Solution, error) {
		_, sol, err := sv.Loss(&c.prob, c.loss, nil)
		return sol, err
	}},
}

// TestHostEngineKeepSaves checks saved states kept in device memory
// (ode.Settings.KeepSaves) on the host engine: for Lorenz with Tsit5
// (save times on mesh points, repeated, at T0 and T1) and Vern7,
// Robertson with Rodas5P, bouncing balls with events, and a step budget
// that about half the trajectories exhaust (NaN rows), every operation
// that returns saves leaves them on the device (Ys nil, nothing of them
// copied back: Trace.Download, SavesKept), and HostSaves reads them back
// equal bit for bit to the Ys of the same call without KeepSaves
// (random input sets: the trajectories' initial states perturbed, seeded),
// after which the device's copy is released and a second HostSaves does
// nothing. A loss or gradient with events returns them on the host.
// SolveTo passed its earlier solution back writes into the same device
// memory.
func TestHostEngineKeepSaves(t *testing.T) {
	needHost(t)
	testKeepSaves(t, residentEngine.name, residentEngine.be, 1)
}

// TestGPUKeepSaves is TestHostEngineKeepSaves on the device ("cuda"),
// with ensembles 100 times as large (thousands of trajectories, none a
// multiple of the saves kernel's tile). It skips without a GPU.
func TestGPUKeepSaves(t *testing.T) {
	needGPUEngine(t)
	testKeepSaves(t, "cuda", nil, 100)
}

// testKeepSaves runs TestHostEngineKeepSaves on engine, whose resident
// saves' Owner is owner (nil: not checked), with ensembles scale times
// as large.
func testKeepSaves(t *testing.T, eng string, owner any, scale int) {
	vern7 := saveTimesCase(t, lorenzCase(40*scale+3, 1e-8), 24)
	vern7.name, vern7.set.Method = "lorenz-Vern7", ode.Vern7
	failing := saveTimesCase(t, lorenzCase(48*scale+1, 1e-4), 20)
	failing.name = "lorenz-failures"
	failing.set.MaxSteps = medianSteps(t, failing, eng)
	failing.set.AllowFailures = true
	cases := []struct {
		c    engineCase
		ops  []string // nil: all
		fail bool     // some trajectories fail
	}{
		{c: saveTimesCase(t, lorenzCase(70*scale, 1e-6), 40)},
		{c: vern7},
		{c: robertsonCase(24*scale, ode.Rodas5P, 1e3)},
		{c: withSaves(ballCase(24*scale, ode.Tsit5), 9, 1.6)},
		{c: failing, ops: []string{"solve", "solveto", "record"}, fail: true},
	}
	rng := rand.New(rand.NewPCG(37, 2))
	for _, tc := range cases {
		t.Run(tc.c.name, func(t *testing.T) {
			c := tc.c
			// Initial states of this run: perturbed at random (seeded).
			c.prob.Y0 = slices.Clone(c.prob.Y0)
			for i := range c.prob.Y0 {
				c.prob.Y0[i] *= 1 + 1e-3*rng.Float64()
			}
			events := len(c.set.Events) > 0
			plain := c.solver(t, eng)
			kc := c
			kc.set.KeepSaves = true
			keep := kc.solver(t, eng)
			// A mesh both replay: the plain solver's.
			m, _, err := plain.Record(&c.prob)
			if err != nil && !tc.fail {
				t.Fatal(err)
			}
			K, d := len(c.prob.SaveAt), c.prob.Field.Dim
			var dst ode.Solution
			for _, op := range keepSavesOps {
				if tc.ops != nil && !slices.Contains(tc.ops, op.name) {
					continue
				}
				want, err := op.run(plain, &c, nil, m)
				if err != nil {
					t.Fatalf("%s without KeepSaves: %v", op.name, err)
				}
				got, err := op.run(keep, &c, &dst, m)
				if err != nil {
					t.Fatalf("%s with KeepSaves: %v", op.name, err)
				}
				if !op.kept(events) {
					if got.Resident != nil {
						t.Errorf("%s: saves resident: want them as without KeepSaves (len(Ys) %d)", op.name, len(want.Ys))
					}
					sameSolution(t, op.name, got, want)
					continue
				}
				r := got.Resident
				if r == nil || got.Ys != nil {
					t.Fatalf("%s: saves resident %v, len(Ys) %d: want them on the device", op.name, r != nil, len(got.Ys))
				}
				if r.Engine() != eng || owner != nil && r.Owner() != owner {
					t.Errorf("%s: resident saves of engine %q, owner %v", op.name, r.Engine(), r.Owner())
				}
				if err := got.HostSaves(); err != nil {
					t.Fatalf("%s: HostSaves: %v", op.name, err)
				}
				if got.Resident != nil || !r.Released() {
					t.Errorf("%s: HostSaves left the saves on the device", op.name)
				}
				sameSolution(t, op.name, got, want)
				if tc.fail {
					bad := 0
					for i, st := range got.Status {
						if st != ode.OK {
							bad++
							if slices.ContainsFunc(got.Ys[i*K*d:(i+1)*K*d], func(x float64) bool { return !math.IsNaN(x) }) {
								t.Fatalf("%s: trajectory %d (%v): a saved state is not NaN", op.name, i, st)
							}
						}
					}
					if bad == 0 || bad == len(got.Status) {
						t.Fatalf("%s: %d of %d failed: want some", op.name, bad, len(got.Status))
					}
				}
				ys := got.Ys
				if err := got.HostSaves(); err != nil || &got.Ys[0] != &ys[0] {
					t.Errorf("%s: HostSaves again: %v, Ys moved %v", op.name, err, &got.Ys[0] != &ys[0])
				}
				if op.name == "solveto" {
					dst = ode.Solution{}
				}
			}
		})
	}
}

// TestHostEngineKeepSavesCopies checks what stays on the device with
// KeepSaves: nothing of the saves is copied back (Trace.Download falls
// by their bytes, Trace.SavesKept counts them); a SolveTo passed its
// solution back writes into the same device memory, and one passed a
// released solution allocates anew; the CPU engine, Method Auto, a
// launch in chunks (MemoryLimit), the float32 engine and the multi-GPU
// engine (two fake devices) return host Ys, equal to those without
// KeepSaves, as does a gradient whose records overflow (Tuning.firstRows:
// every trajectory run again, its saves copied to the host first).
func TestHostEngineKeepSavesCopies(t *testing.T) {
	needHost(t)
	c := saveTimesCase(t, lorenzCase(64, 1e-6), 30)
	eng := residentEngine.name
	kc := c
	kc.set.KeepSaves = true
	plain, keep := c.solver(t, eng), kc.solver(t, eng)
	var tp, tk Trace
	want, err := plain.SolveToContext(WithTrace(t.Context(), &tp), nil, &c.prob)
	if err != nil {
		t.Fatal(err)
	}
	var dst ode.Solution
	if _, err := keep.SolveToContext(WithTrace(t.Context(), &tk), &dst, &c.prob); err != nil {
		t.Fatal(err)
	}
	savesBytes := int64(len(want.Ys) * 8)
	if got := tp.Stats().Download - tk.Stats().Download; got != savesBytes {
		t.Errorf("kept saves: %d fewer bytes copied back, want their %d", got, savesBytes)
	}
	if got := tk.Stats().SavesKept; got != savesBytes {
		t.Errorf("Trace.SavesKept = %d, want %d", got, savesBytes)
	}
	r := dst.Resident
	if _, err := keep.SolveTo(&dst, &c.prob); err != nil {
		t.Fatal(err)
	}
	if dst.Resident != r || r.Released() {
		t.Error("SolveTo passed its solution back: the saves' device memory was not reused")
	}
	dst.Release()
	if err := dst.HostSaves(); err == nil || !strings.Contains(err.Error(), "released") || !strings.Contains(err.Error(), "HostSaves before Release") {
		t.Errorf("HostSaves after Release: %v, want an error saying they were released and what to do", err)
	}
	if err := r.CopyTo(make([]float64, len(want.Ys))); err == nil || !strings.Contains(err.Error(), "released") {
		t.Errorf("CopyTo after Release: %v, want an error", err)
	}
	if _, err := keep.SolveTo(&dst, &c.prob); err != nil {
		t.Fatal(err)
	}
	if dst.Resident == nil || dst.Resident == r {
		t.Fatal("SolveTo passed a released solution back: want new device memory")
	}
	if err := dst.Resident.CopyTo(make([]float64, len(want.Ys)-1)); err == nil || !strings.Contains(err.Error(), "N·K·Dim") {
		t.Errorf("CopyTo into too short a slice: %v, want an error", err)
	}
	if err := dst.HostSaves(); err != nil {
		t.Fatal(err)
	}
	sameSolution(t, "solveto again", &dst, want)

	// Engines and calls that return host Ys all the same.
	hostCases := []struct {
		name   string
		engine string
		set    func(s *ode.Settings)
	}{
		{"cpu", "cpu", func(*ode.Settings) {}},
		{"auto", eng, func(s *ode.Settings) { s.Method = ode.Auto }},
		{"chunks", eng, func(s *ode.Settings) { s.MemoryLimit = 40 << 10 }},
		{"float32", hostF32.name, func(s *ode.Settings) { s.RelTol = 1e-4 }},
		{"multi", "cuda-multi-host2", func(*ode.Settings) {}},
	}
	for _, hc := range hostCases {
		t.Run(hc.name, func(t *testing.T) {
			set := c.set
			hc.set(&set)
			set.Engine = hc.engine
			sv, err := ode.NewSolver(c.prob.Field, &set)
			if err != nil {
				t.Fatal(err)
			}
			set.KeepSaves = true
			svk, err := ode.NewSolver(c.prob.Field, &set)
			if err != nil {
				t.Fatal(err)
			}
			w, err := sv.Solve(&c.prob)
			if err != nil {
				t.Fatal(err)
			}
			var tr Trace
			g, err := svk.SolveToContext(WithTrace(t.Context(), &tr), nil, &c.prob)
			if err != nil {
				t.Fatal(err)
			}
			if g.Resident != nil {
				t.Fatalf("saves kept on engine %s", hc.engine)
			}
			if hc.name == "chunks" && tr.Stats().Launches < 2 {
				t.Fatalf("%d launches: want chunks", tr.Stats().Launches)
			}
			sameSolution(t, hc.name, g, w)
		})
	}
	t.Run("reruns", func(t *testing.T) {
		set := kc.set
		set.Engine = tuned(t, eng, Tuning{firstRows: 4})
		sv, err := ode.NewSolver(c.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		g, st := c.tracedGrad(t, sv)
		if st.Reruns == 0 {
			t.Fatal("no reruns: the case checks nothing")
		}
		w, err := plain.Grad(nil, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		if g.Solution.Resident != nil {
			t.Fatal("a gradient with reruns kept its saves on the device")
		}
		sameSolution(t, "reruns", g.Solution, w.Solution)
	})
}

// TestHostEngineKeepSavesRelease checks the device memory of kept saves:
// HostSaves and Release give it back, Omit's OmitStates keeps none, a
// Gradient passed back releases the saves its new call does not reuse,
// and saves that become unreachable are freed by their cleanup.
func TestHostEngineKeepSavesRelease(t *testing.T) {
	needHost(t)
	fd := residentEngine.be.(*fakeDevice)
	c := saveTimesCase(t, lorenzCase(32, 1e-6), 16)
	c.set.KeepSaves = true
	sv := c.solver(t, residentEngine.name)
	base := settledResident(fd)
	sol, err := sv.Solve(&c.prob)
	if err != nil {
		t.Fatal(err)
	}
	// (Component-major, the launch's statuses and flags after them.)
	kept := savesBytes(c.prob.N, len(c.prob.SaveAt)*c.prob.Field.Dim, true)
	if got := residentOn(fd) - base; got != kept {
		t.Fatalf("a solve's kept saves hold %d bytes of device memory, want %d", got, kept)
	}
	sol.Release()
	if got := residentOn(fd) - base; got != 0 {
		t.Errorf("after Release: %d bytes held", got)
	}
	g := &ode.Gradient{Omit: ode.OmitStates}
	if _, err := sv.Grad(g, &c.prob, c.loss, nil); err != nil {
		t.Fatal(err)
	}
	if g.Solution.Resident != nil || g.Solution.Ys != nil {
		t.Error("a gradient with OmitStates returned saves")
	}
	g.Mesh.Release()
	g.Omit = 0
	if _, err := sv.Grad(g, &c.prob, c.loss, nil); err != nil {
		t.Fatal(err)
	}
	r := g.Solution.Resident
	if r == nil {
		t.Fatal("a gradient's saves were not kept")
	}
	g.Omit = ode.OmitStates
	if _, err := sv.Grad(g, &c.prob, c.loss, nil); err != nil {
		t.Fatal(err)
	}
	if !r.Released() {
		t.Error("a Gradient passed back with OmitStates: its old saves were not released")
	}
	g.Mesh.Release()
	// Unreachable saves go back.
	for range 3 {
		if _, err := sv.Solve(&c.prob); err != nil {
			t.Fatal(err)
		}
	}
	if residentOn(fd) == base {
		t.Fatal("no kept saves to collect: the test checks nothing")
	}
	collectResident(fd, base)
	if got := residentOn(fd) - base; got != 0 {
		t.Errorf("device memory held by saves that are gone: %d bytes", got)
	}
}

// TestHostEngineKeepSavesOtherEngine checks a solution whose saves one
// engine keeps passed to another engine's SolveTo: that engine does not
// write into the first's memory (its Owner differs), the old saves are
// released, and the new ones are the second engine's; and that reading
// saves released in between fails with an error that names the fix,
// wrapping nothing that panics.
func TestHostEngineKeepSavesOtherEngine(t *testing.T) {
	needHost(t)
	c := saveTimesCase(t, lorenzCase(16, 1e-6), 12)
	c.set.KeepSaves = true
	a, b := c.solver(t, residentEngine.name), c.solver(t, hostF64.name)
	sol, err := a.Solve(&c.prob)
	if err != nil {
		t.Fatal(err)
	}
	old := sol.Resident
	if _, err := b.SolveTo(sol, &c.prob); err != nil {
		t.Fatal(err)
	}
	if sol.Resident == nil || sol.Resident == old || sol.Resident.Engine() != hostF64.name {
		t.Fatalf("SolveTo on another engine: resident saves %v (old %v)", sol.Resident, old)
	}
	if !old.Released() {
		t.Error("the other engine's saves were not released")
	}
	cp := *sol // copies share the handle
	sol.Release()
	err = cp.HostSaves()
	var te *ode.TrajectoryError
	if err == nil || errors.As(err, &te) || !strings.Contains(err.Error(), hostF64.name) {
		t.Errorf("HostSaves of a copy after Release: %v, want an error naming the engine", err)
	}
	if cp.Ys != nil {
		t.Error("a failed HostSaves set Ys")
	}
}

// savesBlockSim runs the device form of the saves kernel (saves.cuh's
// GS_CUDA branch: a block's tile through shared memory) on the host: the
// blocks one after another, each as savesThreads threads that meet at
// __syncthreads, and compares every value with the layouts' definition
// (component-major in, row-major out, NaN rows where a trajectory
// failed and did not overflow) for launches whose sizes are and are not
// multiples of the tile.
const savesBlockSim = `
#include <barrier>
#include <thread>
#include <vector>
#include <stdio.h>
#include <string.h>
#define GS_CUDA 1
struct gs_sim_dim { long long x; };
static thread_local gs_sim_dim threadIdx;
static gs_sim_dim blockIdx;
static std::barrier<>* gs_sim_block_bar;
#define __shared__ static
#define __syncthreads() gs_sim_block_bar->arrive_and_wait()
`

const savesBlockMain = `
int main() {
  const long long sizes[][2] = {{1, 1}, {31, 33}, {32, 32}, {70, 45}, {129, 4}, {5, 300}};
  double nan_;
  unsigned long long bits = NAN_BITS;
  memcpy(&nan_, &bits, 8);
  for (auto& s : sizes) {
    const long long n = s[0], w = s[1];
    std::vector<double> ys(n * w), rows(n * w, -1.0);
    std::vector<int> status(n), flags(n);
    for (long long i = 0; i < n * w; i++) ys[i] = 0.5 * i + 0.25;
    for (long long q = 0; q < n; q++) {
      status[q] = q % 5 == 1 ? 3 : (q % 7 == 2 ? GS_S_STIFF : GS_S_OK);
      flags[q] = q % 10 == 1 ? GS_FLAG_OVERFLOW : 0;
    }
    gs_sargs a{n, w, 0, nan_, status.data(), flags.data(), ys.data(), rows.data()};
    const long long blocks = ((w + 31) / 32) * ((n + 31) / 32);
    for (long long b = 0; b < blocks; b++) {
      blockIdx.x = b;
      std::barrier<> bar(THREADS);
      gs_sim_block_bar = &bar;
      std::vector<std::thread> th;
      for (int t = 0; t < THREADS; t++) th.emplace_back([&, t] { threadIdx.x = t; gs_s_rows(a); });
      for (auto& t : th) t.join();
    }
    for (long long q = 0; q < n; q++) {
      const bool bad = status[q] != GS_S_OK && status[q] != GS_S_STIFF && !(flags[q] & GS_FLAG_OVERFLOW);
      for (long long c = 0; c < w; c++) {
        const double want = bad ? nan_ : ys[c * n + q];
        if (memcmp(&rows[q * w + c], &want, 8) != 0) {
          printf("n=%lld w=%lld: row %lld value %lld is %g, want %g\n", n, w, q, c, rows[q * w + c], want);
          return 1;
        }
      }
    }
  }
  printf("ok\n");
  return 0;
}
`

// TestSavesKernelDeviceForm runs savesBlockSim: the saves kernel's
// device branch, which the host engine's loop does not run.
func TestSavesKernelDeviceForm(t *testing.T) {
	needHost(t)
	cc, err := exec.LookPath("g++")
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	src := fmt.Sprintf("#define GS_S_OK %d\n#define GS_S_STIFF %d\n#define GS_FLAG_OVERFLOW %d\n#define NAN_BITS %dULL\n#define THREADS %d\n",
		ode.OK, ode.Stiff, flagOverflow, math.Float64bits(math.NaN()), savesThreads) +
		kernelgen.Prelude() + savesBlockSim + savesCuh + savesBlockMain
	file, exe := filepath.Join(dir, "saves.cpp"), filepath.Join(dir, "saves")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-std=c++20", "-O1", "-pthread", "-w", "-o", exe, file).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, firstLines(string(out), 30))
	}
	out, err := exec.Command(exe).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok") {
		t.Fatalf("the device form of the saves kernel: %v\n%s", err, out)
	}
}
