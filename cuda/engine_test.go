package cuda

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/cname"
	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Tests of the engine against the CPU engine, shared by the host tests
// (engine "cuda-host", every kernel template compiled with g++) and the
// GPU tests (engine "cuda").

// engineCase is an ensemble, settings and a loss run on two engines.
type engineCase struct {
	name string
	prob ode.Problem
	set  ode.Settings
	loss ode.Loss
	tol  float64 // relative tolerance of states and gradients
}

// caseOpts say what to run and how strictly to compare.
type caseOpts struct {
	// knife is the number of trajectories whose step counts may differ
	// from the CPU's (a controller decision at the edge of rounding,
	// where the device's exp and log differ from Go's in the last bit);
	// they are left out of the comparisons of states and gradients.
	knife int
	// ops lists the operations: "solve", "record", "grad", "gradmesh",
	// "loss", "lossmesh", "replay"; nil means all.
	ops []string
	// drift logs the step sizes of the record and the grad that deviate from the CPU's
	// instead of failing: a field whose error estimate amplifies the last
	// bits in which the device's transcendental functions differ from Go's
	// (the states and gradients are still compared, to the case's tol).
	drift bool
}

func (o caseOpts) has(op string) bool {
	if o.ops == nil {
		return true
	}
	for _, x := range o.ops {
		if x == op {
			return true
		}
	}
	return false
}

// lorenzCase is a Lorenz ensemble with ρ spread over [0, 28] and perturbed
// initial states, two save times, and a loss of the final and saved states.
func lorenzCase(n int, rtol float64) engineCase {
	pr := problems.Lorenz()
	r := rand.New(rand.NewPCG(1, 2))
	y0 := make([]float64, 3*n)
	p := make([]float64, 3*n)
	for i := 0; i < n; i++ {
		for c := 0; c < 3; c++ {
			y0[3*i+c] = pr.Y0[c] + 0.1*r.Float64()
		}
		p[3*i], p[3*i+1], p[3*i+2] = pr.P[0], 28*float64(i)/float64(max(n-1, 1)), pr.P[2]
	}
	return engineCase{
		name: "lorenz",
		prob: ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, T0: 0, T1: 1, SaveAt: []float64{0, 0.25, 0.5}},
		set:  ode.Settings{Method: ode.Tsit5, RelTol: rtol, AbsTol: rtol * 1e-3},
		loss: ode.Loss{Name: "lorenz-loss", F: func(y, ys, _ []tape.V) tape.V {
			s := y[0].Square().Add(y[1].Square()).Add(y[2].Square())
			return s.Add(ys[3].Mul(ys[7])).Add(ys[8].MulC(0.5))
		}},
		tol: 1e-10,
	}
}

// vdpCase is a Van der Pol ensemble with μ spread over [0.5, 3].
func vdpCase(n int) engineCase {
	pr := problems.VanDerPol()
	y0, p := pr.Ensemble(n)
	for i := 0; i < n; i++ {
		p[i] = 0.5 + 2.5*float64(i)/float64(max(n-1, 1))
		y0[2*i] += 0.01 * float64(i%7)
	}
	return engineCase{
		name: "vdp",
		prob: ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, T0: pr.T0, T1: 3, SaveAt: []float64{1.5}},
		set:  ode.Settings{Method: ode.Tsit5, RelTol: 1e-7, AbsTol: 1e-9},
		loss: ode.Loss{Name: "vdp-loss", F: func(y, ys, _ []tape.V) tape.V { return y[0].Add(ys[1].Square()) }},
		tol:  1e-10,
	}
}

// robertsonCase is a Robertson ensemble with Rodas5P (or Rosenbrock23),
// k1 spread over [0.02, 0.06], save times on the dense output.
func robertsonCase(n int, m ode.Method, t1 float64) engineCase {
	pr := problems.Robertson()
	y0, p := pr.Ensemble(n)
	k1 := problems.LinSpace(make([]float64, n), 0.02, 0.06)
	for i := range k1 {
		p[3*i] = k1[i]
	}
	return engineCase{
		name: "robertson-" + m.Name(),
		prob: ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, T0: 0, T1: t1, SaveAt: []float64{t1 / 100, t1 / 3}},
		set:  ode.Settings{Method: m, RelTol: 1e-6, AbsTol: 1e-10},
		loss: ode.Loss{Name: "robertson-loss", F: func(y, ys, _ []tape.V) tape.V { return y[0].Add(ys[4].MulC(1e4)) }},
		tol:  1e-10,
	}
}

// mlpCase is y' = MLP(y) with a small network whose weights are shared,
// each trajectory with its own target (loss data).
func mlpCase(n int, sizes []int) engineCase {
	mlp := nn.NewMLP(sizes, nn.Tanh, nn.Identity)
	w := mlp.Init(nil, rand.New(rand.NewPCG(3, 3)))
	r := rand.New(rand.NewPCG(4, 4))
	d := sizes[0]
	y0 := make([]float64, d*n)
	data := make([]float64, d*n)
	for i := range y0 {
		y0[i] = 2*r.Float64() - 1
		data[i] = r.Float64()
	}
	f := ode.Field{Name: "mlp", Dim: d, Shared: mlp.NumParams(),
		F: func(_ tape.V, y, p []tape.V) []tape.V { return mlp.Apply(p, y) }}
	return engineCase{
		name: "mlp",
		prob: ode.Problem{Field: f, N: n, Y0: y0, Shared: w, T0: 0, T1: 1, SaveAt: []float64{0.5}},
		set:  ode.Settings{Method: ode.Tsit5, RelTol: 1e-6, AbsTol: 1e-8},
		loss: ode.Loss{Name: "mlp-mse", Data: data, DataDim: d, Mean: true,
			FP: func(y, ys, dt, _, s []tape.V) tape.V {
				l := ys[0].Mul(s[0])
				for c := range y {
					l = l.Add(y[c].Sub(dt[c]).Square())
				}
				return l
			}},
		tol: 1e-10,
	}
}

// solver returns a solver of c on engine.
func (c *engineCase) solver(t testing.TB, engine string) *ode.Solver {
	t.Helper()
	set := c.set
	set.Engine = engine
	sv, err := ode.NewSolver(c.prob.Field, &set)
	if err != nil {
		t.Fatalf("%s on %s: %v", c.name, engine, err)
	}
	return sv
}

// tracedGrad returns sv's Grad (with its record) of c under a Trace and
// the trace's stats; an error fails the test.
func (c *engineCase) tracedGrad(t testing.TB, sv *ode.Solver) (*ode.Gradient, TraceStats) {
	t.Helper()
	var tr Trace
	g, err := sv.GradContext(WithTrace(t.Context(), &tr), nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return g, tr.Stats()
}

// compareEngines runs c on engine and on the CPU and compares what o
// asks for.
func compareEngines(t *testing.T, engine string, c engineCase, o caseOpts) {
	t.Helper()
	cpu, dev := c.solver(t, "cpu"), c.solver(t, engine)
	if dev.Engine() != engine {
		t.Fatalf("solver runs on %s, want %s", dev.Engine(), engine)
	}
	p := c.prob
	var skip map[int]bool
	if o.has("solve") {
		want, err := cpu.Solve(&p)
		if err != nil {
			t.Fatalf("%s: CPU solve: %v", c.name, err)
		}
		got, err := dev.Solve(&p)
		if err != nil {
			t.Fatalf("%s: %s solve: %v", c.name, engine, err)
		}
		skip = compareSolutions(t, c.name+" solve", got, want, c.tol, o.knife)
	}
	mesh, _, err := cpu.Record(&p)
	if err != nil {
		t.Fatalf("%s: CPU record: %v", c.name, err)
	}
	if o.has("record") {
		got, sol, err := dev.Record(&p)
		if err != nil {
			t.Fatalf("%s: %s record: %v", c.name, engine, err)
		}
		skip = compareCounts(t, c.name+" record", got.Stats, mesh.Stats, o.knife)
		compareMeshDrift(t, c.name+" record", got, mesh, skip, o.drift)
		if got.Engine != engine || sol.Engine != engine {
			t.Errorf("%s: mesh engine %q, solution engine %q, want %q", c.name, got.Engine, sol.Engine, engine)
		}
	}
	if o.has("replay") {
		want, err := cpu.Replay(&p, mesh)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dev.Replay(&p, mesh)
		if err != nil {
			t.Fatalf("%s: %s replay: %v", c.name, engine, err)
		}
		closeRows(t, c.name+" replay Y", got.Y, want.Y, c.prob.Field.Dim, c.tol, nil)
		closeRows(t, c.name+" replay Ys", got.Ys, want.Ys, c.prob.Field.Dim*len(p.SaveAt), c.tol, nil)
	}
	for _, op := range []string{"loss", "lossmesh"} {
		if !o.has(op) {
			continue
		}
		m := mesh
		if op == "loss" {
			m = nil
		}
		want, _, err := cpu.Loss(&p, c.loss, m)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := dev.Loss(&p, c.loss, m)
		if err != nil {
			t.Fatalf("%s: %s %s: %v", c.name, engine, op, err)
		}
		if len(skip) == 0 || m != nil {
			closeRows(t, c.name+" "+op, []float64{got}, []float64{want}, 1, c.tol, nil)
		}
	}
	for _, op := range []string{"grad", "gradmesh"} {
		if !o.has(op) {
			continue
		}
		m := mesh
		if op == "grad" {
			m = nil
		}
		want, err := cpu.Grad(nil, &p, c.loss, m)
		if err != nil {
			t.Fatalf("%s: CPU %s: %v", c.name, op, err)
		}
		got, err := dev.Grad(nil, &p, c.loss, m)
		if err != nil {
			t.Fatalf("%s: %s %s: %v", c.name, engine, op, err)
		}
		s := skip
		if m != nil {
			s = nil
		} else {
			s = compareCounts(t, c.name+" "+op, got.Mesh.Stats, want.Mesh.Stats, o.knife)
			compareMeshDrift(t, c.name+" "+op, got.Mesh, want.Mesh, s, o.drift)
		}
		d, np := c.prob.Field.Dim, c.prob.Field.Params
		what := c.name + " " + op
		closeRows(t, what+" Y", got.Solution.Y, want.Solution.Y, d, c.tol, s)
		closeRows(t, what+" Ys", got.Solution.Ys, want.Solution.Ys, d*len(p.SaveAt), c.tol, s)
		closeRows(t, what+" dL/dY0", got.Y0, want.Y0, d, c.tol, s)
		closeRows(t, what+" dL/dP", got.P, want.P, np, c.tol, s)
		if len(s) == 0 {
			closeRows(t, what+" loss", []float64{got.Loss}, []float64{want.Loss}, 1, c.tol, nil)
			closeRows(t, what+" dL/dShared", got.Shared, want.Shared, len(got.Shared), c.tol, nil)
		}
	}
}

// compareCounts checks the accepted and rejected steps of every
// trajectory and returns those that differ (at most knife may).
func compareCounts(t *testing.T, what string, got, want ode.Stats, knife int) map[int]bool {
	t.Helper()
	if len(got.Accepted) != len(want.Accepted) || len(got.Rejected) != len(want.Rejected) {
		t.Fatalf("%s: stats of %d and %d trajectories, want %d and %d", what, len(got.Accepted), len(got.Rejected), len(want.Accepted), len(want.Rejected))
	}
	skip := map[int]bool{}
	for i := range want.Accepted {
		if got.Accepted[i] != want.Accepted[i] || got.Rejected[i] != want.Rejected[i] {
			skip[i] = true
			if len(skip) <= 5 {
				t.Logf("%s: trajectory %d: %d accepted, %d rejected; CPU %d, %d", what, i, got.Accepted[i], got.Rejected[i], want.Accepted[i], want.Rejected[i])
			}
		}
		if got.FieldEvals != nil && got.FieldEvals[i] != want.FieldEvals[i] && !skip[i] {
			t.Errorf("%s: trajectory %d: %d field evaluations, CPU %d", what, i, got.FieldEvals[i], want.FieldEvals[i])
		}
	}
	if len(skip) > knife {
		t.Errorf("%s: %d of %d trajectories take other steps than on the CPU (%d allowed)", what, len(skip), len(want.Accepted), knife)
	}
	return skip
}

// hostMesh brings m's steps to the host (Mesh.Host), failing the test if
// that fails.
func hostMesh(t testing.TB, m *ode.Mesh) {
	t.Helper()
	if err := m.Host(); err != nil {
		t.Fatal(err)
	}
}

// compareMesh checks the step sizes of the trajectories not in skip.
func compareMesh(t *testing.T, what string, got, want *ode.Mesh, skip map[int]bool) {
	t.Helper()
	for i, msg := range meshDeviations(t, what, got, want, skip) {
		if i < 3 {
			t.Errorf("%s: %s", what, msg)
		}
	}
}

// compareMeshDrift is compareMesh, except that with drift (caseOpts.drift:
// steps allowed to drift from the CPU's) deviating meshes are logged, not
// errors; the states and gradients are then checked to the case's looser
// tolerance.
func compareMeshDrift(t *testing.T, what string, got, want *ode.Mesh, skip map[int]bool, drift bool) {
	t.Helper()
	if !drift {
		compareMesh(t, what, got, want, skip)
		return
	}
	if dev := meshDeviations(t, what, got, want, skip); len(dev) > 0 {
		t.Logf("%s: %d trajectories' steps drift from the CPU's, as %s", what, len(dev), dev[0])
	}
}

// meshDeviations compares the step sizes of the trajectories not in skip
// and returns a line for each trajectory whose mesh deviates, in order.
// It fails the test where a status differs.
func meshDeviations(t *testing.T, what string, got, want *ode.Mesh, skip map[int]bool) []string {
	hostMesh(t, got)
	hostMesh(t, want)
	t.Helper()
	if got.N != want.N {
		t.Fatalf("%s: mesh of %d trajectories, want %d", what, got.N, want.N)
	}
	var bad []string
	worst, worstAt := 0.0, [2]int{}
	for i := 0; i < want.N; i++ {
		if skip[i] || got.Status[i] != want.Status[i] {
			if !skip[i] {
				t.Errorf("%s: trajectory %d: status %v, CPU %v", what, i, got.Status[i], want.Status[i])
			}
			continue
		}
		// The accepted and rejected counts are equal (compareCounts); the
		// step sizes agree to the rounding of the controller's exp and log
		// (CUDA's and Go's differ in the last bit), which the error
		// estimate can amplify where it cancels (stiff problems) and which
		// makes a tiny last step (t1 − t) differ relatively while the mesh
		// points agree; on the long steps of a stiff solution's late phase
		// the mesh points then drift apart by about 1e-8 of t. A step is
		// wrong only beyond 1e-4 relative plus 1e-8 of the span, a mesh
		// point beyond 1e-6 of t plus 1e-8 of the span; the largest
		// step-size deviation is logged.
		span := want.T1[i] - want.T0
		tg, tw := 0.0, 0.0
		for s := 0; s < want.Len[i]; s++ {
			g, w := got.H[s*got.N+i], want.H[s*want.N+i]
			tg, tw = tg+g, tw+w
			if r := math.Abs(g-w) / math.Abs(w); r > worst {
				worst, worstAt = r, [2]int{i, s}
			}
			if math.Abs(g-w) > 1e-4*math.Abs(w)+1e-8*span || math.Abs(tg-tw) > 1e-6*math.Abs(tw)+1e-8*span {
				bad = append(bad, fmt.Sprintf("trajectory %d step %d: h = %v, CPU %v", i, s, g, w))
				break
			}
		}
	}
	if worst > 0 {
		t.Logf("%s: largest relative step-size difference %.2g (trajectory %d, step %d)", what, worst, worstAt[0], worstAt[1])
	}
	return bad
}

// driftRows returns the trajectories not in skip whose recorded mesh
// points differ from want's by more than rel of the span at some step
// (the engines' exp and log round differently in the controller), with
// the largest such difference of each. Their recorded gradients follow their
// own meshes; a gradient on a given mesh does not drift.
func driftRows(t *testing.T, got, want *ode.Mesh, skip map[int]bool, rel float64) map[int]float64 {
	t.Helper()
	hostMesh(t, got)
	hostMesh(t, want)
	drift := map[int]float64{}
	for i := 0; i < want.N; i++ {
		if skip[i] {
			continue
		}
		span := want.T1[i] - want.T0
		tg, tw := 0.0, 0.0
		for s := 0; s < want.Len[i]; s++ {
			tg, tw = tg+got.H[s*got.N+i], tw+want.H[s*want.N+i]
			if r := math.Abs(tg-tw) / span; r > rel && r > drift[i] {
				drift[i] = r
			}
		}
	}
	return drift
}

// closeDrifting checks the rows of got against want, [n×w], as closeRows
// does: rows in drift to loose, the others (but those in skip) to tol.
func closeDrifting(t *testing.T, what string, got, want []float64, w int, tol, loose float64, skip map[int]bool, drift map[int]float64) {
	t.Helper()
	strict, others := maps.Clone(skip), map[int]bool{}
	if strict == nil {
		strict = map[int]bool{}
	}
	for i := 0; i*w < len(want); i++ {
		if _, ok := drift[i]; ok {
			strict[i] = true
		} else {
			others[i] = true
		}
	}
	closeRows(t, what, got, want, w, tol, strict)
	if len(drift) > 0 {
		closeRows(t, what+" (steps drifting)", got, want, w, loose, others)
	}
}

// compareSolutions compares two solutions and returns the trajectories
// whose step counts differ.
func compareSolutions(t *testing.T, what string, got, want *ode.Solution, tol float64, knife int) map[int]bool {
	t.Helper()
	skip := compareCounts(t, what, got.Stats, want.Stats, knife)
	for i := range want.Status {
		if !skip[i] && (got.Status[i] != want.Status[i] || !(math.Abs(got.T[i]-want.T[i]) <= 1e-9*math.Abs(want.T[i]))) {
			t.Errorf("%s: trajectory %d: status %v at t = %v, CPU %v at %v", what, i, got.Status[i], got.T[i], want.Status[i], want.T[i])
		}
		if want.Stiff != nil && got.Stiff[i] != want.Stiff[i] && !skip[i] {
			t.Errorf("%s: trajectory %d: stiff %v, CPU %v", what, i, got.Stiff[i], want.Stiff[i])
		}
	}
	closeRows(t, what+" Y", got.Y, want.Y, got.Dim, tol, skip)
	closeRows(t, what+" Ys", got.Ys, want.Ys, got.Dim*len(want.SaveAt), tol, skip)
	return skip
}

// closeRows checks got against want, [n×w] row-major, row by row (rows
// in skip are left out): every entry within tol relative to the largest
// of its own magnitude, 1e-3 of the row's largest and 1e-3 of the median
// row's largest, NaN where NaN. The last floor keeps an entry that
// cancels to near zero in one trajectory (a gradient of 1e-6 where the
// typical row's is 0.06) from being judged on its last bits alone.
func closeRows(t *testing.T, what string, got, want []float64, w int, tol float64, skip map[int]bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return
	}
	if w == 0 {
		return
	}
	if len(want)%w != 0 {
		t.Errorf("%s: %d values are not rows of %d", what, len(want), w)
		return
	}
	scales := make([]float64, 0, len(want)/w)
	for i := 0; i*w < len(want); i++ {
		if skip[i] {
			continue
		}
		scale := 0.0
		for _, x := range want[i*w : (i+1)*w] {
			if !math.IsNaN(x) {
				scale = math.Max(scale, math.Abs(x))
			}
		}
		scales = append(scales, scale)
	}
	median := 0.0
	if len(scales) > 0 {
		sorted := slices.Clone(scales)
		slices.Sort(sorted)
		median = sorted[len(sorted)/2]
	}
	bad, k := 0, 0
	for i := 0; i*w < len(want); i++ {
		if skip[i] {
			continue
		}
		row, grow := want[i*w:(i+1)*w], got[i*w:(i+1)*w]
		floor := 1e-3 * math.Max(scales[k], median)
		k++
		for c, x := range row {
			g := grow[c]
			if math.IsNaN(x) && math.IsNaN(g) {
				continue
			}
			if !(math.Abs(g-x) <= tol*math.Max(math.Abs(x), floor)) {
				if bad++; bad <= 3 {
					t.Errorf("%s: row %d entry %d: %v, CPU %v (rel %.2g)", what, i, c, g, x, math.Abs(g-x)/math.Abs(x))
				}
			}
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d entries differ", what, bad)
	}
}

// needHost skips a test where g++ is missing.
func needHost(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("g++"); err != nil {
		t.Skip("g++ not found; the host engine tests need it")
	}
}

// The host tests run the engine's tests on small ensembles with the
// kernels compiled by g++; the GPU tests (gpu_engine_test.go) run the same
// on larger ones.

func TestHostEngine(t *testing.T) {
	needHost(t)
	testSuite(t, "cuda-host", 1)
}

func TestHostEngineSharedSum(t *testing.T) {
	needHost(t)
	t.Parallel()
	testSharedSum(t, "cuda-host", 12)
}

func TestHostEngineFiniteDifferences(t *testing.T) {
	needHost(t)
	t.Parallel()
	testFiniteDifferences(t, "cuda-host", 24)
}

func TestHostEngineStatuses(t *testing.T) {
	needHost(t)
	t.Parallel()
	testStatuses(t, "cuda-host")
}

// TestHostEngineChunks runs an ensemble in several launches (a memory
// limit of a few trajectories) whose record buffers are too short (a
// first guess of 4 rows), so that trajectories are rerun.
func TestHostEngineChunks(t *testing.T) {
	needHost(t)
	t.Parallel()
	testChunks(t, "cuda-host", 200, 160<<10, 4)
}

func TestHostEngineMeshChunks(t *testing.T) {
	needHost(t)
	testMeshChunks(t, "cuda-host", 200)
}

func TestHostEngineFloat32(t *testing.T) {
	needHost(t)
	t.Parallel()
	testFloat32(t, "cuda-host-f32", 64)
	testFloat32Lanes(t, "cuda-host-f32", 32)
}

// TestHostEngineErrors: a loss that is not finite names the trajectory.
func TestHostEngineErrors(t *testing.T) {
	needHost(t)
	t.Parallel()
	c := lorenzCase(8, 1e-5)
	loss := ode.Loss{Name: "logloss", F: func(y, _, _ []tape.V) tape.V { return y[2].Sub(y[2]).Log() }}
	_, _, err := c.solver(t, "cuda-host").Loss(&c.prob, loss, nil)
	var nf *tape.NonFiniteError
	if !errors.As(err, &nf) || nf.Trajectory != 0 {
		t.Errorf("loss error %v, want a NonFiniteError of trajectory 0", err)
	}
}

// spyEngine captures the jobs it is given (and runs nothing), so tests
// can see the loss plans ode builds.
type spyEngine struct{}

func (spyEngine) Name() string                            { return "cuda-spy" }
func (spyEngine) Available() error                        { return nil }
func (spyEngine) Prepare(*ode.Plan) (ode.Executor, error) { return spyExec{}, nil }
func (spyEngine) SupportsEvents() bool                    { return true } // jobs with events too

type spyExec struct{}

// errSpy carries the job a spy executor was given.
type errSpy struct{ j *ode.Job }

func (errSpy) Error() string { return "spy" }

func (spyExec) Run(_ context.Context, j *ode.Job) (*ode.Result, error) { return nil, errSpy{j} }

func init() { ode.Register(spyEngine{}) }

// jobOf returns the job that op (OpGrad or OpSolve) of c makes.
func jobOf(t testing.TB, c engineCase, op ode.Op) *ode.Job {
	t.Helper()
	sv := c.solver(t, "cuda-spy")
	var err error
	if op == ode.OpGrad {
		_, err = sv.Grad(nil, &c.prob, c.loss, nil)
	} else {
		_, err = sv.Solve(&c.prob)
	}
	var spy errSpy
	if !errors.As(err, &spy) {
		t.Fatalf("spy engine: %v", err)
	}
	return spy.j
}

// saveTimesCase is c with k save times (k ≥ 12) that stress the bracket
// rule of the continuous extension: t0 twice, points of trajectory 0's
// mesh as the CPU records it (one of them twice), T1 twice, and the rest
// spread over (t0, T1), every seventh twice; its loss reads every saved
// state (linearly, every seventh squared) and the final state.
func saveTimesCase(t *testing.T, c engineCase, k int) engineCase {
	t.Helper()
	p := c.prob
	p.SaveAt = nil
	m, _, err := c.solver(t, "cpu").Record(&p)
	if err != nil {
		t.Fatalf("%s: CPU record: %v", c.name, err)
	}
	hostMesh(t, m)
	// The mesh points accumulated as the engines accumulate them.
	var pts []float64
	tt := p.T0
	for s := 0; s < m.Len[0]; s++ {
		tt += m.H[s*m.N]
		pts = append(pts, tt)
	}
	if len(pts) < 3 {
		t.Fatalf("%s: trajectory 0 takes %d steps, want at least 3", c.name, len(pts))
	}
	mid := pts[len(pts)/2]
	ts := []float64{p.T0, p.T0, pts[0], pts[1], mid, mid, pts[len(pts)-2], p.T1, p.T1}
	spread := k - len(ts) - (k-len(ts))/8
	for q := 1; len(ts) < k; q++ {
		x := p.T0 + (p.T1-p.T0)*float64(q)/float64(spread+1)
		ts = append(ts, x)
		if q%7 == 0 && len(ts) < k {
			ts = append(ts, x)
		}
	}
	slices.Sort(ts)
	c.prob.SaveAt = ts
	c.name = fmt.Sprintf("%s-%dsaves", c.name, k)
	c.loss = ode.Loss{Name: c.name, F: func(y, ys, _ []tape.V) tape.V {
		l := y[0].Square()
		for q, v := range ys {
			w := float64(1+q%5) / float64(k)
			if q%7 == 0 {
				v = v.Square()
			}
			l = l.Add(v.MulC(w))
		}
		return l
	}}
	return c
}

// saveMethodCases are the save-time cases of every built-in method, n·scale
// trajectories each: Lorenz with Tsit5 and Vern7, Robertson with Rodas5P
// and Rosenbrock23.
func saveMethodCases(t *testing.T, scale, k int) []engineCase {
	vern7 := lorenzCase(12*scale, 1e-7)
	vern7.name, vern7.set.Method = "lorenz-Vern7", ode.Vern7
	tsit5 := lorenzCase(12*scale, 1e-7)
	tsit5.name = "lorenz-Tsit5"
	var cs []engineCase
	for _, c := range []engineCase{tsit5, vern7, robertsonCase(8*scale, ode.Rodas5P, 1e3), robertsonCase(8*scale, ode.Rosenbrock23, 10)} {
		cs = append(cs, saveTimesCase(t, c, k))
	}
	return cs
}

// testSaveTimes compares engine with the CPU on many save times (t0, mesh
// points, duplicates, T1: saveTimesCase) for every built-in method, in
// the thread and lanes layouts (and Tsit5 in lanes mode's global-memory
// layout): the saved states, losses and gradients of
// solves, replays and gradients, recorded and on the CPU's mesh; and with
// ode.SaveStep (each save time a step of its own). With exact, replays
// and gradients on the CPU's mesh must give the CPU's bits (the CPU's
// bracket rule, its dense steps and Horner sums in its order, and fields
// without libm calls).
func testSaveTimes(t *testing.T, engine string, scale, k int, exact bool) {
	lanes := tuned(t, engine, Tuning{Layout: LayoutLanes})
	step := saveTimesCase(t, lorenzCase(12*scale, 1e-7), k)
	step.name, step.set.Saves = step.name+"-SaveStep", ode.SaveStep
	type run struct {
		c      engineCase
		engine string
		ops    []string
	}
	var runs []run
	// The kernels that save: solves, replays and losses forward only,
	// gradients recorded (the adaptive forward) and on a mesh (the
	// replay's); in lanes mode the gradients' cover both forward loops.
	for _, c := range saveMethodCases(t, scale, k) {
		runs = append(runs, run{c, engine, []string{"solve", "replay", "loss", "grad", "gradmesh"}}, run{c, lanes, []string{"grad", "gradmesh"}})
	}
	global := tuned(t, engine, Tuning{Layout: LayoutLanesGlobal})
	runs = append(runs, run{runs[0].c, global, []string{"grad", "gradmesh"}},
		run{step, engine, []string{"solve", "replay", "grad", "gradmesh"}},
		run{step, lanes, []string{"grad", "gradmesh"}})
	for _, r := range runs {
		t.Run(r.c.name+"/"+r.engine, func(t *testing.T) {
			t.Parallel()
			compareEngines(t, r.engine, r.c, caseOpts{knife: knife(r.c.prob.N), ops: r.ops})
			if exact && r.c.set.Saves == ode.SaveInterpolate {
				c := r.c
				c.tol = 0
				compareEngines(t, r.engine, c, caseOpts{ops: []string{"replay", "gradmesh"}})
			}
		})
	}
}

func TestHostEngineSaveTimes(t *testing.T) {
	needHost(t)
	t.Parallel()
	testSaveTimes(t, "cuda-host", 1, 200, true)
}

// countBackend is the host backend with kernels that count the calls of
// every called program's function (GS_CALLEE: the field, its VJP): each
// launch appends its counts, a line "name calls" per function called, to
// the file its source names (countFile).
type countBackend struct{ *hostBackend }

// countEngine runs on a countBackend.
var countEngine = &Engine{name: "cuda-host-count", prec: Float64, be: &countBackend{newHostBackend(1 << 30)}}

func init() { ode.Register(countEngine) }

// countFile is the file the counting kernels append to; a test that counts
// sets it, and runs alone.
var countFile string

// callee matches the first line of a called program's function.
var callee = regexp.MustCompile(`(?m)^GS_CALLEE(?:_INLINE)? \w+_out (\w+)\(.*\) \{$`)

func (b *countBackend) compile(src, name string, opts []string) (backendKernel, error) {
	var names []string
	body := callee.ReplaceAllStringFunc(src, func(line string) string {
		names = append(names, callee.FindStringSubmatch(line)[1])
		return fmt.Sprintf("%s\n  gs_counts[%d]++;", line, len(names)-1)
	})
	if len(names) == 0 {
		return nil, fmt.Errorf("count backend: no called function in the kernel")
	}
	head := fmt.Sprintf(`#include <stdio.h>
static long long gs_counts[%d];
static const char* gs_count_names[] = {"%s"};
static struct gs_count_dump {
  ~gs_count_dump() {
    FILE* f = fopen(%q, "a");
    for (int k = 0; f && k < %d; k++)
      if (gs_counts[k]) fprintf(f, "%%s %%lld\n", gs_count_names[k], gs_counts[k]);
    if (f) fclose(f);
  }
} gs_count_dumper;
`, len(names), strings.Join(names, `", "`), countFile, len(names))
	return b.hostBackend.compile(head+body, name, opts)
}

// takeCounts returns the calls counted since the last take, by function,
// and empties the file.
func takeCounts(t *testing.T) map[string]int {
	t.Helper()
	data, err := os.ReadFile(countFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.WriteFile(countFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var name string
		var k int
		if _, err := fmt.Sscan(line, &name, &k); err != nil {
			t.Fatalf("count line %q: %v", line, err)
		}
		counts[name] += k
	}
	return counts
}

// programCalls returns the calls of the program called name that one run
// of p makes, through its callees.
func programCalls(p *tape.Program, name string) int {
	n := 0
	for _, v := range p.Values {
		if v.Op == ops.OpCall {
			f := p.Funcs[int(v.Aux)]
			if f.Name == name {
				n++
			}
			n += programCalls(f, name)
		}
	}
	return n
}

// TestHostEngineSaveCounts: save times cost no field evaluations of
// their own. On the count backend, 200 save times in three windows, each
// inside one step of every trajectory, make exactly the field and VJP
// calls of three save times one per window, in every kind of kernel
// (solve, replay, gradient recorded and on a mesh); those three steps
// cost, over none, the dense step's surplus over the replay step
// (replays), or TrialDense's over Trial's (adaptive solves: none with
// Tsit5, whose extension takes no stage of its own; they recomputed each
// such step with a dense step before), as the plan's programs count
// their calls. Each save time read by one Dense step of
// its own, as before, would cost 7 field calls.
func TestHostEngineSaveCounts(t *testing.T) {
	needHost(t)
	countFile = filepath.Join(t.TempDir(), "counts")
	const n, perWindow = 6, 67
	c := lorenzCase(n, 1e-7)
	p := c.prob
	p.SaveAt = nil
	cpu, dev := c.solver(t, "cpu"), c.solver(t, countEngine.name)
	mesh, _, err := cpu.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	hostMesh(t, mesh)
	// Windows [w, w + 1e-6] each inside one step of every trajectory.
	windows := []float64{0.1, 0.45, 0.8}
	for i := 0; i < n; i++ {
		tt := p.T0
		for s := 0; s < mesh.Len[i]; s++ {
			next := tt + mesh.H[s*mesh.N+i]
			for _, w := range windows {
				if tt < w+1e-6 && next > w && !(tt < w && next > w+1e-6) {
					t.Fatalf("trajectory %d: window at %v not inside step %d [%v, %v]", i, w, s, tt, next)
				}
			}
			tt = next
		}
	}
	var many []float64
	for _, w := range windows {
		for q := 0; q < perWindow; q++ {
			many = append(many, w+1e-6*float64(q)/perWindow)
		}
	}
	many = many[:200]
	pl := jobOf(t, c, ode.OpSolve).Plan
	// The functions of the field and of its VJP: gs_<name>_<k>.
	fn := func(name string) *regexp.Regexp {
		return regexp.MustCompile(`^gs_` + regexp.QuoteMeta(cname.Ident(name)) + `_\d+$`)
	}
	field, vjp := fn(pl.Field.Name), fn(pl.Field.Name+".vjp")
	// calls returns the field's and its VJP's calls of op with save times
	// ts, and checks the saved states against the CPU's.
	calls := func(op string, ts []float64) (f, v int) {
		q := c.prob
		q.SaveAt = ts
		loss := ode.Loss{Name: fmt.Sprintf("count-%d", len(ts)), F: func(y, ys, _ []tape.V) tape.V {
			l := y[0].Square()
			for _, x := range ys {
				l = l.Add(x)
			}
			return l
		}}
		takeCounts(t)
		var got, want *ode.Solution
		var err error
		switch op {
		case "solve":
			got, err = dev.Solve(&q)
			if err == nil {
				want, err = cpu.Solve(&q)
			}
		case "replay":
			got, err = dev.Replay(&q, mesh)
			if err == nil {
				want, err = cpu.Replay(&q, mesh)
			}
		case "grad", "gradmesh":
			m := mesh
			if op == "grad" {
				m = nil
			}
			var g, w *ode.Gradient
			g, err = dev.Grad(nil, &q, loss, m)
			if err == nil {
				w, err = cpu.Grad(nil, &q, loss, m)
			}
			if err == nil {
				got, want = g.Solution, w.Solution
				closeRows(t, op+" dL/dP", g.P, w.P, 3, 1e-10, nil)
			}
		}
		if err != nil {
			t.Fatalf("%s with %d save times: %v", op, len(ts), err)
		}
		closeRows(t, op+" Ys", got.Ys, want.Ys, 3*len(ts), 1e-10, nil)
		for name, k := range takeCounts(t) {
			switch {
			case field.MatchString(name):
				f += k
			case vjp.MatchString(name):
				v += k
			}
		}
		return f, v
	}
	drev, err := pl.DenseStepReverse()
	if err != nil {
		t.Fatal(err)
	}
	rev, err := pl.Reverse()
	if err != nil {
		t.Fatal(err)
	}
	fname, vname := pl.Field.Name, pl.Field.Name+".vjp"
	// The surplus of three steps that save, in field and VJP calls, by
	// the programs: an adaptive kernel tries them with TrialDense in place
	// of Trial (with Tsit5 no field call more, so the rejected trials
	// with a save time inside add none either), a replay runs DenseStep
	// in place of Replay, a gradient DenseStepReverse in place of Reverse.
	perStep := map[string][2]int{
		"solve":  {programCalls(pl.TrialDense, fname) - programCalls(pl.Trial, fname), 0},
		"replay": {programCalls(pl.DenseStep, fname) - programCalls(pl.Replay, fname), 0},
	}
	perStep["grad"] = [2]int{perStep["solve"][0] + programCalls(drev, fname) - programCalls(rev, fname), programCalls(drev, vname) - programCalls(rev, vname)}
	perStep["gradmesh"] = [2]int{perStep["replay"][0] + perStep["grad"][0] - perStep["solve"][0], perStep["grad"][1]}
	for _, op := range []string{"solve", "replay", "grad", "gradmesh"} {
		f0, v0 := calls(op, nil)
		f3, v3 := calls(op, windows)
		f200, v200 := calls(op, many)
		t.Logf("%s: field and VJP calls: %d, %d without save times; %d, %d with 3; %d, %d with 200 (one Dense step per save time: %d field calls more)",
			op, f0, v0, f3, v3, f200, v200, n*len(many)*programCalls(pl.Dense, fname))
		if f200 != f3 || v200 != v3 {
			t.Errorf("%s: 200 save times make %d field and %d VJP calls, 3 in the same steps %d and %d", op, f200, v200, f3, v3)
		}
		if want := perStep[op]; f3-f0 != 3*n*want[0] || v3-v0 != 3*n*want[1] {
			t.Errorf("%s: 3 save times add %d field and %d VJP calls, want %d and %d (the dense programs' surplus)", op, f3-f0, v3-v0, 3*n*want[0], 3*n*want[1])
		}
	}
}

// TestHostEngineSaveTimesFiniteDifferences: gradients of losses of 200
// save times against central differences, on the engine's own mesh, for
// an explicit and a Rosenbrock method.
func TestHostEngineSaveTimesFiniteDifferences(t *testing.T) {
	needHost(t)
	t.Parallel()
	vern7 := lorenzCase(6, 1e-8)
	vern7.name, vern7.set.Method = "lorenz-Vern7", ode.Vern7
	for _, c := range []engineCase{vern7, robertsonCase(6, ode.Rodas5P, 10)} {
		checkFiniteDifferences(t, "cuda-host", saveTimesCase(t, c, 200))
	}
}

// TestHostSimThread runs the thread layout's kernels on one simulated
// warp, each lane on its own trajectories (the warp's reductions of the
// shared gradient, and the warp's choice of the reverse step where save
// times lie inside a step of some of its trajectories), against the CPU:
// a network field (accumulating reverse steps) with many save times read
// from the extension and with ode.SaveStep, in two launches of a partial
// warp's round. Two runs give the same bits.
func TestHostSimThread(t *testing.T) {
	needHost(t)
	t.Parallel()
	sim := tuned(t, "cuda-host-sim", Tuning{Layout: LayoutThread})
	c := saveTimesCase(t, mlpCase(40, []int{2, 5, 2}), 60)
	step := c
	step.name, step.set.Saves = c.name+"-SaveStep", ode.SaveStep
	for _, c := range []engineCase{c, step} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			compareEngines(t, sim, c, caseOpts{ops: []string{"grad", "gradmesh"}})
			sv := c.solver(t, sim)
			var first *ode.Gradient
			for run := 0; run < 2; run++ {
				g, err := sv.Grad(nil, &c.prob, c.loss, nil)
				if err != nil {
					t.Fatal(err)
				}
				if first == nil {
					first = g
					continue
				}
				for _, x := range []struct {
					name      string
					got, want []float64
				}{{"dL/dy0", g.Y0, first.Y0}, {"dL/dshared", g.Shared, first.Shared}} {
					if !slices.Equal(x.got, x.want) {
						t.Errorf("%s differs from run to run", x.name)
					}
				}
			}
		})
	}
}
