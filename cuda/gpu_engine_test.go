package cuda

import (
	"flag"
	"fmt"
	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Tests of the engine "cuda" against the CPU engine on a GPU. They skip
// where there is no GPU (or no NVRTC). Run them alone with -run GPUEngine.
// The cases and test bodies are shared with the host tests (engine_test.go).

// long runs the GPU tests whose kernels take NVRTC minutes.
var long = flag.Bool("long", false, "run the long tests (also GRADSOLVE_LONG_TESTS=1): GPU tests with kernels that take NVRTC minutes to compile, and every case of the host simulations")

// longTests reports whether the long tests run (-long or
// GRADSOLVE_LONG_TESTS=1); without, the host simulations run a
// representative subset of their cases.
func longTests() bool { return *long || os.Getenv("GRADSOLVE_LONG_TESTS") == "1" }

// needGPUEngine skips the test unless the engine "cuda" can run.
func needGPUEngine(t testing.TB) {
	t.Helper()
	if err := NewEngine("probe", 0, Float64).Available(); err != nil {
		t.Skip(err)
	}
}

// lorenz96Case is Lorenz-96 with d components and forcing spread around 8.
func lorenz96Case(n, d int, m ode.Method) engineCase {
	pr := problems.Lorenz96(d)
	y0, p := pr.Ensemble(n)
	for i := 0; i < n; i++ {
		p[i] = 7 + 2*float64(i)/float64(max(n-1, 1))
		y0[i*d] += 0.01 * float64(i%11)
	}
	return engineCase{
		name: "lorenz96-" + m.Name(),
		prob: ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, T0: 0, T1: 0.5, SaveAt: []float64{0.25}},
		set:  ode.Settings{Method: m, RelTol: 1e-6, AbsTol: 1e-9},
		loss: ode.Loss{Name: "l96", F: func(y, ys, _ []tape.V) tape.V { return y[0].Square().Add(y[d-1]).Add(ys[1].Mul(ys[2])) }},
		tol:  1e-10,
	}
}

// lorenzNoSaveCase is lorenzCase without save times (the kernels then
// store no times: the field is autonomous) and the loss Σ‖y(T)‖².
func lorenzNoSaveCase(n int, rtol float64) engineCase {
	c := lorenzCase(n, rtol)
	c.name, c.prob.SaveAt, c.loss = "lorenz-nosave", nil, ode.SumSquares()
	return c
}

// hiresCase is HIRES with y0[7] spread over [0.005, 0.006].
func hiresCase(n int) engineCase {
	pr := problems.HIRES()
	y0, p := pr.Ensemble(n)
	for i := 0; i < n; i++ {
		y0[8*i+7] = 0.005 + 0.001*float64(i)/float64(max(n-1, 1))
	}
	return engineCase{
		name: "hires",
		prob: ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, T0: pr.T0, T1: pr.T1, SaveAt: []float64{5}},
		set:  ode.Settings{Method: ode.Rodas5P, RelTol: 1e-7, AbsTol: 1e-11},
		loss: ode.Loss{Name: "hires", F: func(y, ys, _ []tape.V) tape.V { return y[7].Add(ys[0].Square()) }},
		tol:  1e-10,
	}
}

// neuralRobertsonCase is the neural Robertson problem (Rodas5P, 337 shared
// weights) with k1 spread over [0.03, 0.05].
func neuralRobertsonCase(n int) engineCase {
	pr := problems.NeuralRobertson(1)
	y0, p := pr.Ensemble(n)
	k1 := problems.LinSpace(make([]float64, n), 0.03, 0.05)
	for i := range k1 {
		p[2*i] = k1[i]
	}
	return engineCase{
		name: "neural-robertson",
		prob: ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, Shared: pr.Shared, T0: 0, T1: 100, SaveAt: []float64{10}},
		set:  ode.Settings{Method: ode.Rodas5P, RelTol: 1e-6, AbsTol: 1e-10},
		loss: ode.Loss{Name: "nr", F: func(y, ys, _ []tape.V) tape.V { return y[0].Add(ys[1].MulC(1e4)) }},
		tol:  1e-10,
	}
}

// knife allows a few trajectories of a large ensemble to take other steps
// than on the CPU (see caseOpts.knife); every one is logged.
func knife(n int) int {
	if n < 1000 {
		return 0
	}
	return n / 1000
}

// testSuite compares engine with the CPU on the problems of the suite,
// n·scale trajectories each.
func testSuite(t *testing.T, engine string, scale int) {
	grads := []string{"solve", "grad", "gradmesh"}
	for _, tc := range []struct {
		c engineCase
		o []string
	}{
		{lorenzCase(37*scale, 1e-7), nil},
		{lorenzNoSaveCase(23*scale, 1e-6), grads},
		{vdpCase(20 * scale), []string{"solve", "grad", "lossmesh"}},
		{lorenz96Case(8*scale, 40, ode.Tsit5), grads},
		{robertsonCase(12*scale, ode.Rodas5P, 1e3), grads},
		{robertsonCase(8*scale, ode.Rosenbrock23, 10), []string{"solve", "grad"}},
		{hiresCase(8 * scale), grads},
		{neuralRobertsonCase(8 * scale), grads},
		{mlpCase(40*scale, []int{2, 5, 2}), []string{"solve", "grad", "gradmesh", "loss"}},
	} {
		t.Run(tc.c.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			compareEngines(t, engine, tc.c, caseOpts{knife: knife(tc.c.prob.N), ops: tc.o})
			t.Logf("%s: %v", tc.c.name, time.Since(start))
		})
	}
}

func TestGPUEngine(t *testing.T) {
	needGPUEngine(t)
	testSuite(t, "cuda", 100)
}

// TestGPUEngineDims: a field of d = 64 (Tsit5, gradient) compiles and
// runs, and Rodas5P at d = 16 (gradient) and d = 32 (forward). Larger
// Rosenbrock kernels (d = 32 gradients, d = 64) take NVRTC minutes (their
// Jacobians and LU factors are unrolled into scalar values) and run only
// with -long.
func TestGPUEngineDims(t *testing.T) {
	needGPUEngine(t)
	cases := []struct {
		c engineCase
		o caseOpts
	}{
		{lorenz96Case(256, 64, ode.Tsit5), caseOpts{ops: []string{"solve", "grad"}}},
		{lorenz96Case(64, 16, ode.Rodas5P), caseOpts{ops: []string{"solve", "grad"}}},
		{lorenz96Case(64, 32, ode.Rodas5P), caseOpts{ops: []string{"solve"}}},
	}
	if longTests() {
		cases = append(cases, struct {
			c engineCase
			o caseOpts
		}{lorenz96Case(64, 32, ode.Rodas5P), caseOpts{ops: []string{"grad"}}}, struct {
			c engineCase
			o caseOpts
		}{lorenz96Case(64, 64, ode.Rodas5P), caseOpts{ops: []string{"solve"}}})
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s-%d-%s", tc.c.name, tc.c.prob.Field.Dim, tc.o.ops[len(tc.o.ops)-1]), func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			compareEngines(t, "cuda", tc.c, tc.o)
			t.Logf("%v", time.Since(start))
		})
	}
}

// TestGPUEngineSaveTimes: 200 save times (at t0, on mesh points,
// duplicated, at T1) read from the steps' extension, for every built-in
// method, in the thread and lanes layouts, against the CPU.
func TestGPUEngineSaveTimes(t *testing.T) {
	needGPUEngine(t)
	testSaveTimes(t, "cuda", 40, 200, false)
}

func TestGPUEngineSharedSum(t *testing.T) {
	needGPUEngine(t)
	testSharedSum(t, "cuda", 40)
}

func TestGPUEngineFiniteDifferences(t *testing.T) {
	needGPUEngine(t)
	testFiniteDifferences(t, "cuda", 64)
}

func TestGPUEngineStatuses(t *testing.T) {
	needGPUEngine(t)
	testStatuses(t, "cuda")
}

// TestGPUEvents runs the event tests (events_test.go) on the GPU: the
// bouncing balls, the pharmacokinetic threshold and the driven balls with
// every method, against the CPU engine and the closed forms.
func TestGPUEvents(t *testing.T) {
	needGPUEngine(t)
	testEvents(t, "cuda", 2048, []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23}, true)
}

// TestGPUEventsFloat32 runs the event cases in float32 ("cuda-f32")
// against the float64 CPU engine and the closed forms.
func TestGPUEventsFloat32(t *testing.T) {
	needGPUEngine(t)
	testEventsFloat32(t, "cuda-f32", 2048, []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P}, true)
}

func TestGPUEventsAtRest(t *testing.T) {
	needGPUEngine(t)
	testEventsAtRest(t, "cuda", 100000, 30, 1e-6)
	testEventsAtRest(t, "cuda-f32", 100000, 12, 1e-4)
}

func TestGPUEventsBadInput(t *testing.T) {
	needGPUEngine(t)
	testEventsBadInput(t, "cuda")
}

func TestGPUEventsSaveEdges(t *testing.T) {
	needGPUEngine(t)
	testEventSavesEdges(t, "cuda")
}

// TestGPUEventCases runs the timed doses and stops (save times at event
// times, an event at T1) and the two-compartment doses
// (event_cases_test.go) on the GPU against the CPU and the closed form.
func TestGPUEventCases(t *testing.T) {
	needGPUEngine(t)
	testEventCases(t, "cuda", true)
}

// TestGPUDenseSolution runs SolveDense on the GPU's records against the
// CPU's (events, every method, Method Auto), to 1e-6: the steps drift
// from the CPU's by the rounding of the device's exp and log (up to 4e-5
// relative at RelTol 1e-10 on the host's libm), and the states with them
// within their errors (Rosenbrock23's: 1e-7 here); a wrong jump or step
// is off by far more.
func TestGPUDenseSolution(t *testing.T) {
	needGPUEngine(t)
	testDenseSolution(t, "cuda", 1e-6)
}

func TestGPUEventsReruns(t *testing.T) {
	needGPUEngine(t)
	testEventsReruns(t, "cuda", 20000, 2<<20)
}

func TestGPUEngineChunks(t *testing.T) {
	needGPUEngine(t)
	testChunks(t, "cuda", 20000, 2<<20, 8)
}

// TestGPUEngineMeshChunks: meshes copied through the executor's
// page-locked chunk buffers, 4 KiB each (many chunks), give the results
// of direct copies bit for bit, recorded and given.
func TestGPUEngineMeshChunks(t *testing.T) {
	needGPUEngine(t)
	testMeshChunks(t, "cuda", 4096)
}

// testMeshChunks runs an ensemble of n on engine twice, with meshes copied
// directly and through chunk buffers of 4 KiB, and compares the results.
func testMeshChunks(t *testing.T, engine string, n int) {
	c := lorenzCase(n, 1e-6)
	set := c.set
	set.Engine = engine
	run := func(chunk int) (*ode.Gradient, *ode.Gradient) {
		set := set
		set.Engine = tuned(t, engine, Tuning{meshChunk: chunk})
		sv, err := ode.NewSolver(c.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := sv.Grad(nil, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The resident mesh comes back to the host, then goes up again
		// for the replay: both copies go through the chunk buffers.
		hostMesh(t, rec.Mesh)
		given, err := sv.Grad(nil, &c.prob, c.loss, rec.Mesh)
		if err != nil {
			t.Fatal(err)
		}
		return rec, given
	}
	const chunk = 4 << 10
	wantRec, wantGiven := run(1 << 40) // direct copies
	if b := 8 * len(wantRec.Mesh.H); b < 4*chunk {
		t.Fatalf("the mesh has %d bytes: want several chunks of %d", b, chunk)
	}
	rec, given := run(chunk)
	if !slices.Equal(rec.Mesh.H, wantRec.Mesh.H) || !slices.Equal(rec.P, wantRec.P) || !slices.Equal(given.P, wantGiven.P) || !slices.Equal(given.Y0, wantGiven.Y0) {
		t.Errorf("meshes through chunks: recorded mesh equal %t, gradient %t; on the mesh %t",
			slices.Equal(rec.Mesh.H, wantRec.Mesh.H), slices.Equal(rec.P, wantRec.P), slices.Equal(given.P, wantGiven.P))
	}
}

func TestGPUEngineFloat32(t *testing.T) {
	needGPUEngine(t)
	testFloat32(t, "cuda-f32", 4096)
	testFloat32Lanes(t, "cuda-f32", 2048)
}

// testSharedSum: the shared-parameter gradient of an ensemble of n is
// the sum of those of its trajectories, each run alone.
func testSharedSum(t *testing.T, engine string, n int) {
	c := mlpCase(n, []int{2, 16, 16, 2})
	c.loss.Mean = false
	sv := c.solver(t, engine)
	all, err := sv.Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := c.prob.Field.Dim
	sum := make([]float64, len(all.Shared))
	for i := 0; i < c.prob.N; i++ {
		p := c.prob
		p.N, p.Y0 = 1, c.prob.Y0[i*d:(i+1)*d]
		l := c.loss
		l.Data = c.loss.Data[i*d : (i+1)*d]
		g, err := sv.Grad(nil, &p, l, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, x := range g.Shared {
			sum[k] += x
		}
	}
	closeRows(t, "shared gradient vs sum over trajectories", all.Shared, sum, len(sum), 1e-10, nil)
}

// testFiniteDifferences checks the gradient on a recorded mesh against
// central differences of the loss replayed on that mesh, both on engine:
// per-trajectory parameters and initial states (Lorenz) and shared weights
// (MLP), n trajectories each.
func testFiniteDifferences(t *testing.T, engine string, n int) {
	for _, c := range []engineCase{lorenzCase(n, 1e-8), mlpCase(n, []int{2, 8, 2})} {
		checkFiniteDifferences(t, engine, c)
	}
}

// checkFiniteDifferences checks the gradient of case c on engine, on the
// engine's own mesh, against central differences of its loss on that
// mesh: the per-trajectory parameters and y0[0] of the first, a middle
// and the last trajectory, and four shared parameters.
func checkFiniteDifferences(t *testing.T, engine string, c engineCase) {
	n := c.prob.N
	sv := c.solver(t, engine)
	mesh, _, err := sv.Record(&c.prob)
	if err != nil {
		t.Fatal(err)
	}
	g, err := sv.Grad(nil, &c.prob, c.loss, mesh)
	if err != nil {
		t.Fatal(err)
	}
	// Central differences of step h: truncation O(h²), rounding of the
	// loss about 1e-15·|L|/h.
	check := func(what string, x []float64, k int, want float64) {
		p := c.prob
		old := x[k]
		h := 1e-5 * math.Max(math.Abs(old), 1)
		x[k] = old + h
		lp, _, err := sv.Loss(&p, c.loss, mesh)
		if err != nil {
			t.Fatal(err)
		}
		x[k] = old - h
		lm, _, err := sv.Loss(&p, c.loss, mesh)
		if err != nil {
			t.Fatal(err)
		}
		x[k] = old
		fd := (lp - lm) / (2 * h)
		if tol := 1e-6*math.Abs(want) + 1e-14*math.Abs(lp)/h; math.Abs(fd-want) > tol {
			t.Errorf("%s %s[%d]: gradient %v, central difference %v (tolerance %.2g)", c.name, what, k, want, fd, tol)
		}
	}
	c.prob.Y0 = append([]float64(nil), c.prob.Y0...)
	c.prob.P = append([]float64(nil), c.prob.P...)
	c.prob.Shared = append([]float64(nil), c.prob.Shared...)
	np := c.prob.Field.Params
	for _, i := range []int{0, n / 3, n - 1} {
		for q := 0; q < np; q++ {
			check("P", c.prob.P, i*np+q, g.P[i*np+q])
		}
		check("Y0", c.prob.Y0, i*c.prob.Field.Dim, g.Y0[i*c.prob.Field.Dim])
	}
	if ns := len(c.prob.Shared); ns > 0 {
		for _, k := range []int{0, 7, ns / 2, ns - 1} {
			check("Shared", c.prob.Shared, k, g.Shared[k])
		}
	}
}

// testStatuses: trajectories that go non-finite, underflow their step size
// or run out of steps get their own statuses and counts, as on the CPU;
// the others finish.
func testStatuses(t *testing.T, engine string) {
	nan := ode.Field{Name: "sqrt", Dim: 1, Params: 1, F: func(tt tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Sub(tt).Sqrt().Mul(y[0])}
	}}
	blowup := ode.Field{Name: "blowup", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0].Square())}
	}}
	for _, tc := range []struct {
		f        ode.Field
		maxSteps int
		want     []ode.Status
	}{
		{nan, 0, []ode.Status{ode.NonFinite, ode.OK, ode.OK}},
		{blowup, 0, []ode.Status{ode.OK, ode.StepSizeUnderflow, ode.StepSizeUnderflow}},
		{blowup, 40, []ode.Status{ode.OK, ode.MaxStepsReached, ode.MaxStepsReached}},
	} {
		prob := ode.Problem{Field: tc.f, N: 3, Y0: []float64{1, 1, 1}, P: []float64{0.5, 2, 3}, T0: 0, T1: 1}
		c := engineCase{name: tc.f.Name, prob: prob, set: ode.Settings{Method: ode.Tsit5, AllowFailures: true, MaxSteps: tc.maxSteps}, tol: 1e-10}
		compareEngines(t, engine, c, caseOpts{ops: []string{"solve"}})
		sol, err := c.solver(t, engine).Solve(&prob)
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range tc.want {
			if sol.Status[i] != st {
				t.Errorf("%s (max steps %d): trajectory %d: status %v, want %v", tc.f.Name, tc.maxSteps, i, sol.Status[i], st)
			}
			if st != ode.OK && !math.IsNaN(sol.Y[i]) {
				t.Errorf("%s: failed trajectory %d has state %v, want NaN", tc.f.Name, i, sol.Y[i])
			}
		}
	}
}

// testChunks: an ensemble of n processed in many launches (a memory limit
// of limit bytes) whose record buffers are too short at first (rows rows)
// gives the CPU's results.
func testChunks(t *testing.T, engine string, n int, limit int64, rows int) {
	c := lorenzCase(n, 1e-6)
	// solver returns a solver on engine whose first record buffers have
	// rows rows.
	solver := func(rows int) *ode.Solver {
		set := c.set
		set.Engine = tuned(t, engine, Tuning{firstRows: rows})
		set.MemoryLimit = limit
		sv, err := ode.NewSolver(c.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		return sv
	}
	sv := solver(rows)
	want, err := c.solver(t, "cpu").Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, s := c.tracedGrad(t, sv)
	t.Logf("trace: %+v", s)
	if s.Launches < 4 || s.Reruns == 0 {
		t.Errorf("%d launches, %d reruns: want several of each", s.Launches, s.Reruns)
	}
	if s.Upload == 0 || s.Download == 0 || s.Transfer <= 0 {
		t.Errorf("trace: %d bytes up, %d down in %v: want some of each", s.Upload, s.Download, s.Transfer)
	}
	if s.Layout != "thread" && envTuning().Layout == LayoutAuto {
		t.Errorf("Lorenz: trace layout %q, want thread", s.Layout)
	}
	skip := compareCounts(t, "chunks", got.Mesh.Stats, want.Mesh.Stats, knife(n))
	compareMesh(t, "chunks", got.Mesh, want.Mesh, skip)
	// Trajectories whose mesh points drift from the CPU's by more than
	// 1e-11 of the span (the controller's exp and log round differently:
	// on the H100 one dL/dY0 entry came 3.7e-10 from the CPU's, every
	// gradient on the CPU's mesh within c.tol) are held to 1e-8; the
	// gradients on the CPU's mesh below are all held to c.tol.
	const driftMin = 1e-11
	drift := driftRows(t, got.Mesh, want.Mesh, skip, driftMin)
	t.Logf("chunks: %d of %d trajectories' mesh points drift past %g of the span", len(drift), n, driftMin)
	closeDrifting(t, "chunks dL/dP", got.P, want.P, 3, c.tol, 1e-8, skip, drift)
	closeDrifting(t, "chunks dL/dY0", got.Y0, want.Y0, 3, c.tol, 1e-8, skip, drift)
	if len(skip) == 0 {
		closeRows(t, "chunks loss", []float64{got.Loss}, []float64{want.Loss}, 1, c.tol, nil)
	}
	// Passed back with every element of its storage NaN, the result is
	// filled in place with the same numbers: what the launches do not
	// write (rows past a chunk's longest, a rerun trajectory's rows of
	// its first launch, the rows a rerun adds to the others) reads 0.
	// First records of the median length and of one less than the
	// longest make half of the trajectories, then the longest alone, run
	// again.
	hostMesh(t, got.Mesh)
	keepH, keepP, keepY0 := slices.Clone(got.Mesh.H), slices.Clone(got.P), slices.Clone(got.Y0)
	lens := slices.Sorted(slices.Values(want.Mesh.Len))
	for _, first := range []int{lens[len(lens)/2], lens[len(lens)-1] - 1} {
		sv := solver(max(1, first))
		for _, x := range [][]float64{got.Mesh.H[:cap(got.Mesh.H)], got.P, got.Y0, got.Solution.Y} {
			for i := range x {
				x[i] = math.NaN()
			}
		}
		again, err := sv.GradContext(t.Context(), got, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(again.Mesh.H, keepH) || !slices.Equal(again.P, keepP) || !slices.Equal(again.Y0, keepY0) {
			t.Errorf("chunks, a result passed back, first record of %d rows: mesh equal %t (%d elements, want %d), dL/dP equal %t, dL/dY0 equal %t",
				first, slices.Equal(again.Mesh.H, keepH), len(again.Mesh.H), len(keepH), slices.Equal(again.P, keepP), slices.Equal(again.Y0, keepY0))
		}
	}
	// On the CPU's mesh: the replay's launches take it in chunks of rows.
	onMesh, err := sv.Grad(nil, &c.prob, c.loss, want.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	closeRows(t, "chunks dL/dP on a mesh", onMesh.P, want.P, 3, c.tol, nil)
	closeRows(t, "chunks dL/dY0 on a mesh", onMesh.Y0, want.Y0, 3, c.tol, nil)
}

// testFloat32: the float32 engine agrees with float64 to its precision.
func testFloat32(t *testing.T, engine string, n int) {
	c := lorenzCase(n, 1e-4)
	got, err := c.solver(t, engine).Solve(&c.prob)
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.solver(t, "cpu").Solve(&c.prob)
	if err != nil {
		t.Fatal(err)
	}
	med, worst := rowErrors(got.Y, want.Y, 3)
	t.Logf("float32 final states: median relative error %.2g, largest %.2g", med, worst)
	if med > 1e-4 || worst > 0.1 {
		t.Errorf("float32 final states: median relative error %.2g, largest %.2g", med, worst)
	}
	g, err := c.solver(t, engine).Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.solver(t, "cpu").Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	if med, _ := rowErrors(g.P, w.P, 3); med > 1e-3 {
		t.Errorf("float32 gradient: median relative error %.2g", med)
	}
	// On the float64 mesh, converted as it goes up.
	gm, err := c.solver(t, engine).Grad(nil, &c.prob, c.loss, w.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	if med, _ := rowErrors(gm.P, w.P, 3); med > 1e-3 {
		t.Errorf("float32 gradient on a mesh: median relative error %.2g", med)
	}
}

// rowErrors returns the median and the largest of ‖got_i − want_i‖/‖want_i‖
// over the rows of [n×w] arrays.
func rowErrors(got, want []float64, w int) (med, worst float64) {
	var errs []float64
	for i := 0; i+w <= len(want); i += w {
		var num, den float64
		for c := i; c < i+w; c++ {
			num += (got[c] - want[c]) * (got[c] - want[c])
			den += want[c] * want[c]
		}
		e := math.Sqrt(num / math.Max(den, 1e-300))
		errs = append(errs, e)
		worst = math.Max(worst, e)
	}
	slices.Sort(errs)
	return errs[len(errs)/2], worst
}

// TestGPUEngineLanes: MLP fields run one warp per trajectory (lanes mode;
// the 64-wide network's block needs more than 48 KiB of shared memory)
// and agree with the CPU engine.
func TestGPUEngineLanes(t *testing.T) {
	needGPUEngine(t)
	// The last network (16,898 weights) does not fit in shared memory: its
	// kernels keep the weights and accumulators in global memory.
	for _, c := range []engineCase{mlpCase(3000, []int{2, 32, 32, 2}), mlpCase(700, []int{2, 64, 64, 2}), mlpCase(300, []int{2, 128, 128, 2})} {
		sizes := c.prob.Field.Shared
		t.Run(fmt.Sprintf("%s-%d", c.name, sizes), func(t *testing.T) {
			t.Parallel()
			pl := jobOf(t, c, ode.OpGrad).Plan
			sp, err := kernelgen.NewStepPrograms(pl)
			if err != nil {
				t.Fatal(err)
			}
			if !sp.Lanes {
				t.Fatalf("%d shared weights: not lanes mode", sizes)
			}
			t.Logf("%d shared weights: gradient blocks fit in 227 KiB of shared memory (an H200's): %v", sizes, kernelgen.LanesFit(pl, true, Float64, 227<<10))
			start := time.Now()
			compareEngines(t, "cuda", c, caseOpts{knife: knife(c.prob.N), ops: []string{"solve", "grad", "gradmesh"}})
			t.Logf("%v", time.Since(start))
		})
	}
}

// testFloat32Lanes: an MLP field in float32 runs in lanes mode, with
// gradients (dL/dy0 and the shared gradient) near the CPU's float64 ones.
func testFloat32Lanes(t *testing.T, engine string, n int) {
	c := mlpCase(n, []int{2, 32, 32, 2})
	// The tightest tolerance float32 meets (ode.MinRelTol of its unit
	// roundoff, 1.2e-5), on both engines.
	c.set.RelTol, c.set.AbsTol = 2e-5, 1e-7
	got, err := c.solver(t, engine).Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.solver(t, "cpu").Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	med, worst := rowErrors(got.Y0, want.Y0, 2)
	var num, den float64
	for k := range want.Shared {
		num += (got.Shared[k] - want.Shared[k]) * (got.Shared[k] - want.Shared[k])
		den += want.Shared[k] * want.Shared[k]
	}
	rel := math.Sqrt(num / den)
	t.Logf("float32 lanes: dL/dy0 median relative error %.2g, largest %.2g; shared gradient %.2g", med, worst, rel)
	if med > 1e-3 || worst > 0.1 || rel > 1e-3 {
		t.Errorf("float32 lanes: dL/dy0 median relative error %.2g, largest %.2g; shared gradient relative error %.2g", med, worst, rel)
	}
}

// TestGPULanesNetworks: lanes mode on networks of other widths,
// activations, per-trajectory parameters and Rodas5P (testLanesNetworks).
func TestGPULanesNetworks(t *testing.T) {
	needGPUEngine(t)
	testLanesNetworks(t, "cuda", 100)
}

// TestGPULanesGlobal: lanes mode with the shared block in global memory
// and one accumulator per block (GS_LANES_BLOCKACC) or per warp in global
// memory, forced on the neural suite's network, against the CPU.
func TestGPULanesGlobal(t *testing.T) {
	needGPUEngine(t)
	t.Parallel()
	c := mlpCase(2000, []int{2, 32, 32, 2})
	for _, warps := range []bool{false, true} {
		t.Run(fmt.Sprintf("warp-accumulators-%v", warps), func(t *testing.T) {
			engine := tuned(t, "cuda", Tuning{Layout: LayoutLanesGlobal, NoBlockAcc: warps})
			compareEngines(t, engine, c, caseOpts{knife: knife(c.prob.N), ops: []string{"grad", "gradmesh"}})
		})
	}
}

// TestGPULanesStatuses: per-trajectory statuses in lanes mode
// (testLanesStatuses).
func TestGPULanesStatuses(t *testing.T) {
	needGPUEngine(t)
	t.Parallel()
	testLanesStatuses(t, "cuda")
}

// TestGPUEventCoinciding runs the events whose roots coincide
// (event_cases_test.go: two doses at one time for some trajectories, a
// bounce with a counter and a stop on its condition) on the GPU against
// the CPU.
func TestGPUEventCoinciding(t *testing.T) {
	needGPUEngine(t)
	testEventCoinciding(t, "cuda", true)
}
