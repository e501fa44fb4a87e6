package cuda

import (
	"context"
	"runtime"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// callAllocs returns the allocations and bytes of a repeated Solver.Grad
// of n Lorenz trajectories (P per trajectory, one row of Y0, one T1) on
// engine, a Gradient passed back, recording (mesh false) or on the mesh of
// an earlier call, averaged over runs calls after two warm-up calls.
func callAllocs(t testing.TB, engine string, n int, mesh bool, runs int) (allocs, bytes float64) {
	t.Helper()
	pr := problems.Lorenz()
	p := make([]float64, 3*n)
	for i := range n {
		p[3*i], p[3*i+1], p[3*i+2] = 10, 21*float64(i)/float64(max(n-1, 1)), 8.0/3
	}
	prob := ode.Problem{Field: pr.Field, N: n, Y0: []float64{1, 0, 0}, P: p, T1: 1}
	sv, err := ode.NewSolver(prob.Field, &ode.Settings{Method: ode.Tsit5, RelTol: 1e-4, AbsTol: 1e-7, Engine: engine})
	if err != nil {
		t.Fatal(err)
	}
	loss := ode.SumSquares()
	var g ode.Gradient
	if _, err := sv.GradContext(context.Background(), &g, &prob, loss, nil); err != nil {
		t.Fatal(err)
	}
	var m *ode.Mesh
	if mesh {
		m = g.Mesh
	}
	var g2 ode.Gradient
	call := func() {
		if _, err := sv.GradContext(context.Background(), &g2, &prob, loss, m); err != nil {
			t.Fatal(err)
		}
	}
	call()
	call()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		call()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs), float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}

// allocsHostWork returns the name of the hostWork engine that waits for
// its compiles (Tuning.WaitForCompile), which the allocations' tests
// measure: the first call on the hostWork engine itself runs on the CPU
// engine while its kernel's source is generated, and that gradient's
// record builds its replay's executors on a goroutine of its own
// (ode's cpuExec.stepMaster), which may still run when the call has gone
// on to the kernel, allocating thousands of objects in the calls
// measured after it: 840 allocations in 40 calls became 2,700 to 10,800
// with GOGC=5 in one process in three, in the first case measured
// (n = 128, whose kernel no case before it had generated).
func allocsHostWork(t testing.TB) string {
	return tuned(t, hostWork.name, Tuning{WaitForCompile: true})
}

// TestCallAllocs checks that a repeated gradient call, a Gradient passed
// back, allocates nothing that grows with the ensemble beyond a few words
// per block of trajectories on the engine whose copies and kernels cost
// nothing (the host's share of a GPU call): with the record in the call
// and on a mesh, 64 times as many trajectories cost at most 16 KiB more a
// call. The CPU engine still allocates per chunk (its scans' layouts,
// results and stored states: about 100 to 150 bytes a trajectory); it is
// held below 192 bytes a trajectory, a third of what the checkpoints of
// its replays took before its workers kept them (ForwardTo).
func TestCallAllocs(t *testing.T) {
	hostWork := allocsHostWork(t)
	for _, c := range []struct {
		engine   string
		small    int
		large    int
		runs     int
		perTraj  float64 // bytes a trajectory allowed beyond the small call's
		fixedCap float64 // bytes allowed beyond the small call's
	}{
		{hostWork, 1 << 12, 1 << 18, 10, 0, 16 << 10},
		{"cpu", 1 << 8, 1 << 12, 3, 192, 0},
	} {
		for _, mesh := range []bool{false, true} {
			if testing.Short() && c.engine == "cpu" {
				continue
			}
			as, bs := callAllocs(t, c.engine, c.small, mesh, c.runs)
			al, bl := callAllocs(t, c.engine, c.large, mesh, c.runs)
			t.Logf("%s, mesh %t: n = %d: %.0f allocations, %.0f bytes a call; n = %d: %.0f allocations, %.0f bytes a call",
				c.engine, mesh, c.small, as, bs, c.large, al, bl)
			if limit := bs + c.fixedCap + c.perTraj*float64(c.large-c.small); bl > limit {
				t.Errorf("%s, mesh %t: a call of %d trajectories allocates %.0f bytes, one of %d %.0f: more than %.0f",
					c.engine, mesh, c.large, bl, c.small, bs, limit)
			}
		}
	}
}

// callAllocsMax is the most allocations TestCallAllocsSteady allows a
// repeated Grad call of the Lorenz ensemble on the hostWork engine (a
// Gradient passed back, inputs unchanged), per case. The loss's trace,
// the checks, the job's set-up, the staging and the executor's
// bookkeeping allocate nothing (tape.Tracer, runScratch, par's pooled
// tasks); what is left is the call's result structs (the Solution, the
// recorded Mesh and its voucher, the Result, the Job, the checked
// problem: 6, 5 on a given mesh, which records none) and launch's and
// scatter's closures and the variables they capture (the batch handed to
// the device's goroutine, the result blocks handed to par.Run: 15 to
// 20, more where a launch's results come back in chunks). A new allocation a
// call fails the test: lower a bound where a change removes some.
var callAllocsMax = []struct {
	n    int
	mesh bool
	max  float64
}{
	{128, false, 21},
	{128, true, 25},
	{1 << 15, false, 21},
	{1 << 15, true, 25},
	{1 << 18, false, 29},
}

// callAllocsSlack is the fraction of an allocation a call that
// TestCallAllocsSteady allows past callAllocsMax for n trajectories: the
// pools a collection empties are refilled once per object, so more
// objects (a chunk's each, from 262,144 trajectories) cost more after a
// collection (29.1–29.5 a call measured on a loaded two-core machine,
// before and after session 48's changes).
func callAllocsSlack(n int) float64 {
	if n >= 1<<18 {
		return 0.9 // (a new allocation a call, 1.0 more, still fails)
	}
	return 0.5
}

// TestCallAllocsSteady checks the allocations of a repeated Solver.Grad
// call on the engine whose copies and kernels cost nothing (the host's
// share of a GPU call), the Gradient passed back: with the record and on
// the mesh of an earlier call, at 128, 32,768 and 262,144 trajectories
// (one launch; at 262,144 its results come back in chunks), against
// callAllocsMax. The counts are averages over 40 calls, which a
// collection may raise by a fraction (a pool refilled): half an
// allocation is allowed (0.9 from 262,144 trajectories: callAllocsSlack),
// a new one a call is not. The engine waits for
// its compiles (allocsHostWork).
func TestCallAllocsSteady(t *testing.T) {
	engine := allocsHostWork(t)
	for _, c := range callAllocsMax {
		if testing.Short() && c.n > 1<<15 {
			continue
		}
		got, _ := callAllocs(t, engine, c.n, c.mesh, 40)
		t.Logf("n = %d, mesh %t: %.1f allocations a call (at most %.0f)", c.n, c.mesh, got, c.max)
		if got > c.max+callAllocsSlack(c.n) {
			t.Errorf("n = %d, mesh %t: %.1f allocations a call, want at most %.0f", c.n, c.mesh, got, c.max)
		}
	}
}

// keptAllocsMax is the most allocations TestKeptCallAllocs allows a
// repeated kept gradient call (ode.Settings.KeepGrads, the Gradient
// passed back unread, inputs unchanged). What is left is the call's
// result structs (the Result, the recorded Mesh, the Job, the checked
// problem and its kept copy, the Gradient's keptGrads and reuse), the
// launch's batch closure and the compare run ahead of the launch (its
// goroutine's closure). The launch's layout, bcast, result offsets,
// device time, clocks, the check's argument words and the compare's
// verdict channel are in the run's scratch (17 allocations before
// session 49). The run itself, with its scratch, is recycled
// between kept calls (keepGrads gives the run of the results written over
// back), and no error value is made to choose the layout (wideCheck's are
// made once). A new allocation a call fails the test: lower the bound
// where a change removes some.
const keptAllocsMax = 10

// TestKeptCallAllocs checks the allocations of a repeated kept gradient
// call of the events suite's problems (ballCase, pkCase; Tsit5 at rtol
// 1e-6, 4,096 trajectories) on the engine whose kernels write only the
// counts and whose check finds all well (cuda-counts: the host's share
// of a GPU call), against keptAllocsMax, averaged over 50 calls
// (testing.AllocsPerRun; half an allocation is allowed for a pool
// refilled by a collection), every call keeping its results.
func TestKeptCallAllocs(t *testing.T) {
	for _, mk := range []func(int, ode.Method) engineCase{ballCase, pkCase} {
		c := mk(1<<12, ode.Tsit5)
		c.set.RelTol, c.set.AbsTol, c.set.Engine, c.set.KeepGrads = 1e-6, 1e-8, countsF64.name, true
		sv, err := ode.NewSolver(c.prob.Field, &c.set)
		if err != nil {
			t.Fatal(err)
		}
		g := ode.Gradient{Omit: ode.OmitStates | ode.OmitStats}
		kept := 0
		call := func() {
			if _, err := sv.GradContext(context.Background(), &g, &c.prob, c.loss, nil); err != nil {
				t.Fatal(err)
			}
			if g.Resident != nil {
				kept++
			}
		}
		call()
		call()
		kept = 0
		const runs = 50
		got := testing.AllocsPerRun(runs, call)
		t.Logf("%s: %.1f allocations a kept call (at most %d)", c.name, got, keptAllocsMax)
		if kept != runs+1 { // (AllocsPerRun calls once more, untimed)
			t.Errorf("%s: %d of %d calls kept their results", c.name, kept, runs+1)
		}
		if got > keptAllocsMax+0.5 {
			t.Errorf("%s: %.1f allocations a kept call, want at most %d", c.name, got, keptAllocsMax)
		}
	}
}
