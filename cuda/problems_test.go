package cuda

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Every built-in problem (problems.Names) with every method that suits it,
// on the device engine against the CPU engine: meshes, states, loss and
// gradients with respect to y0, the per-trajectory parameters and the
// shared ones. The engine suite (testSuite) picks its problems and losses
// by hand; this one takes them as a user would, at their defaults.

// problemCase is n trajectories of the built-in problem name solved with
// m: the default state and parameters, each row scaled by its own factor
// in [0.9, 1.1] (a spread of meshes), one save time mid-way, and a loss of
// the final and saved states.
func problemCase(t testing.TB, name string, m ode.Method, n int) engineCase {
	t.Helper()
	pr, err := problems.ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	d, np := pr.Field.Dim, pr.Field.Params
	y0, p := pr.Ensemble(n)
	for i := 0; i < n; i++ {
		f := 0.9 + 0.2*float64(i)/float64(max(n-1, 1))
		for c := 0; c < d; c++ {
			y0[i*d+c] *= f
		}
		for c := 0; c < np; c++ {
			p[i*np+c] *= 2 - f
		}
	}
	ts := pr.T0 + (pr.T1-pr.T0)/3
	rtol, atol := 1e-6, 1e-9
	if pr.Stiff {
		atol = 1e-10
	}
	return engineCase{
		name: fmt.Sprintf("%s-%s", name, m.Name()),
		prob: ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, Shared: pr.Shared,
			T0: pr.T0, T1: pr.T1, SaveAt: []float64{ts}},
		set: ode.Settings{Method: m, RelTol: rtol, AbsTol: atol},
		loss: ode.Loss{Name: "problem-loss", F: func(y, ys, _ []tape.V) tape.V {
			l := ys[0].Mul(ys[d-1])
			for c := range y {
				l = l.Add(y[c].Square().MulC(float64(c + 1)))
			}
			return l
		}},
		tol: 1e-10,
	}
}

// problemMethods returns the methods each built-in problem runs with:
// the explicit ones for non-stiff problems, the Rosenbrock ones for stiff
// problems, and Rodas5P on one non-stiff problem too.
func problemMethods(name string) []ode.Method {
	pr, err := problems.ByName(name)
	if err != nil {
		panic(err)
	}
	switch {
	case pr.Stiff:
		return []ode.Method{ode.Rodas5P, ode.Rosenbrock23}
	case name == "vdp":
		return []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P}
	}
	return []ode.Method{ode.Tsit5, ode.Vern7}
}

// testProblems compares engine with the CPU on every built-in problem and
// method, n trajectories each.
func testProblems(t *testing.T, engine string, n int) {
	for _, name := range problems.Names() {
		if pr, err := problems.ByName(name); err == nil && pr.Field.Dim > maxProblemDim && !longTests() {
			// Lorenz-96 at d = 64 and 256, the Brusselator (d = 64): their
			// kernels unroll the state (and a Rosenbrock method's LU)
			// into straight-line code that takes NVRTC and g++ minutes.
			t.Logf("%s (d = %d) runs with -long", name, pr.Field.Dim)
			continue
		}
		for _, m := range problemMethods(name) {
			c := problemCase(t, name, m, n)
			if c.name == "pollution-Rodas5P" && engine == "cuda-host" && !longTests() {
				// The largest kernels of the suite (20 states, Rodas5P's
				// six stages); Rodas5P runs on the others, Pollution
				// with Rosenbrock23.
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				if size := gradSource(t, c); size > defaultMaxSource {
					// Past the engines' bound on a kernel's source: refused,
					// naming the CPU engine.
					_, err := c.solver(t, engine).Grad(nil, &c.prob, c.loss, nil)
					var se *SizeError
					if !errors.As(err, &se) {
						t.Fatalf("a kernel of %d bytes: error %v, want a *SizeError", size, err)
					}
					return
				}
				compareEngines(t, engine, c, caseOpts{knife: knife(n), ops: []string{"solve", "gradmesh"}})
				compareOwnMesh(t, engine, c, problemKnife(n))
			})
		}
	}
}

// maxProblemDim is the largest state of the built-in problems that
// testProblems runs without -long.
const maxProblemDim = 20

// problemKnife is the number of trajectories of n whose meshes may part
// from the CPU's (other step counts, or step sizes beyond compareMesh's
// tolerance) on the built-in problems: 1%. Stiff Van der Pol (μ = 1e3)
// with Rodas5P is the sensitive one: on the CPU alone, a change of y0 by
// one ulp moves the step sizes of 4 of 1000 trajectories by up to 1e-3
// relative at the fast transitions (same counts); on the H200, 2 of 1000
// parted from the CPU's thus.
func problemKnife(n int) int { return n / 100 }

// compareOwnMesh compares the gradient with the record on engine against
// the CPU's. The meshes agree to the rounding of the controller's exp and
// log, which the error estimates of stiff problems amplify (Pollution with
// Rodas5P: 1e-16 at the first step, 6e-10 at the last); the discrete
// derivative moves with the mesh (there, one entry of dL/dy0 by 2e-6). So
// the device's mesh is checked against the CPU's (counts, step sizes), and
// its gradient against the CPU's gradient on that same mesh, to c.tol
// (dL/dy0 to c.tol plus ten times the CPU's own rounding sensitivity:
// the wide layout's forward states are the CPU's to rounding, not bit for
// bit. That sensitivity is the larger of ulpSpread and the change of the
// CPU's gradient between its own mesh and the engine's, where those take
// the same steps: an entry of y0 that is zero moves by 5e-324 in
// ulpSpread, while the rounding of the steps moves its gradient as the
// mesh's does — Pollution's dL/dy0[15], y0[15] = 0, by 2e-6 relative
// between the CPU's and the device's meshes, and its central differences
// scatter as much for steps of 1e-9 to 1e-6; rows whose step counts
// differ keep ulpSpread alone).
// At most knife trajectories may take other steps than the CPU's (see
// problemKnife); their gradients are still checked on their own mesh.
func compareOwnMesh(t *testing.T, engine string, c engineCase, knife int) {
	t.Helper()
	cpu, dev := c.solver(t, "cpu"), c.solver(t, engine)
	p := c.prob
	got, err := dev.Grad(nil, &p, c.loss, nil)
	if err != nil {
		t.Fatalf("%s: %s grad: %v", c.name, engine, err)
	}
	rec, _, err := cpu.Record(&p)
	if err != nil {
		t.Fatalf("%s: CPU record: %v", c.name, err)
	}
	what := c.name + " grad"
	skip := compareCounts(t, what, got.Mesh.Stats, rec.Stats, knife)
	parted := meshDeviations(t, what, got.Mesh, rec, skip)
	for k, msg := range parted {
		if k < 5 {
			t.Logf("%s: mesh parts from the CPU's: %s", what, msg)
		}
	}
	if len(skip)+len(parted) > knife {
		t.Errorf("%s: %d of %d trajectories take other steps than on the CPU (%d allowed)", what, len(skip)+len(parted), p.N, knife)
	}
	want, err := cpu.Grad(nil, &p, c.loss, got.Mesh)
	if err != nil {
		t.Fatalf("%s: CPU gradient on the %s mesh: %v", c.name, engine, err)
	}
	d, np := p.Field.Dim, p.Field.Params
	closeRows(t, what+" Y", got.Solution.Y, want.Solution.Y, d, c.tol, nil)
	closeRows(t, what+" Ys", got.Solution.Ys, want.Solution.Ys, d*len(p.SaveAt), c.tol, nil)
	spread := ulpSpread(t, cpu, c, got.Mesh, want)
	own, err := cpu.Grad(nil, &p, c.loss, rec)
	if err != nil {
		t.Fatalf("%s: CPU gradient on its own mesh: %v", c.name, err)
	}
	for i := range p.N {
		if skip[i] {
			continue
		}
		for k := i * d; k < (i+1)*d; k++ {
			spread[k] = math.Max(spread[k], math.Abs(own.Y0[k]-want.Y0[k]))
		}
	}
	if w := closeSpread(t, what+" dL/dY0", got.Y0, want.Y0, spread, d, c.tol); w > 0.1 {
		t.Logf("%s dL/dY0: the largest difference is %.3g of its bound", what, w)
	}
	closeRows(t, what+" dL/dP", got.P, want.P, np, c.tol, nil)
	closeRows(t, what+" loss", []float64{got.Loss}, []float64{want.Loss}, 1, c.tol, nil)
	closeRows(t, what+" dL/dShared", got.Shared, want.Shared, len(got.Shared), c.tol, nil)
}

// ulpSpread returns dL/dy0's rounding sensitivity on the CPU (cpu) for
// case c on mesh m, whose gradient there is want: by entry, the largest
// change of dL/dy0 when every entry of y0 moves by one ulp, up or down.
// An engine whose forward states differ from the CPU's by rounding (the
// wide layout's: its solves and sums in another order) moves the
// gradient so: Pollution's dL/dy0[15] with Rodas5P, where y[15] ≈ 1e-17,
// by 3e-6 relative.
func ulpSpread(t *testing.T, cpu *ode.Solver, c engineCase, m *ode.Mesh, want *ode.Gradient) []float64 {
	t.Helper()
	p := c.prob
	spread := make([]float64, len(want.Y0))
	for _, dir := range []float64{1, -1} {
		q := p
		q.Y0 = slices.Clone(p.Y0)
		for k := range q.Y0 {
			q.Y0[k] = math.Nextafter(q.Y0[k], dir*math.Inf(1))
		}
		moved, err := cpu.Grad(nil, &q, c.loss, m)
		if err != nil {
			t.Fatal(err)
		}
		for k := range spread {
			spread[k] = math.Max(spread[k], math.Abs(moved.Y0[k]-want.Y0[k]))
		}
	}
	return spread
}

// closeSpread is closeRows for dL/dy0 (rows of w) with each entry's
// rounding sensitivity spread (ulpSpread): every entry within tol
// relative to the larger of its own magnitude and 1e-3 of the row's
// largest, plus ten times its spread. It returns the largest difference
// in units of its bound.
func closeSpread(t *testing.T, what string, got, want, spread []float64, w int, tol float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return math.Inf(1)
	}
	worst, bad := 0.0, 0
	for i := 0; w > 0 && i*w < len(want); i++ {
		row := want[i*w : (i+1)*w]
		scale := 0.0
		for _, x := range row {
			scale = math.Max(scale, math.Abs(x))
		}
		for k, x := range row {
			bound := tol*math.Max(math.Abs(x), 1e-3*scale) + 10*spread[i*w+k]
			diff := math.Abs(got[i*w+k] - x)
			if !(diff <= bound) && !(math.IsNaN(x) && math.IsNaN(got[i*w+k])) {
				if bad++; bad <= 5 {
					t.Errorf("%s: row %d entry %d: %v, want %v within %.2g (the CPU's one-ulp spread %.2g)", what, i, k, got[i*w+k], x, bound, spread[i*w+k])
				}
			}
			if bound > 0 {
				worst = math.Max(worst, diff/bound)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d entries differ", what, bad)
	}
	return worst
}

func TestHostEngineProblems(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("compiles a kernel per problem and method; skipped with -short")
	}
	testProblems(t, "cuda-host", 6)
}

func TestGPUEngineProblems(t *testing.T) {
	needGPUEngine(t)
	testProblems(t, "cuda", 1000)
}

// TestGPUStiffLayouts runs compareOwnMesh on the built-in stiff problems
// that a Rosenbrock method runs in the wide layout by default (d from
// kernelgen.WideMinDimFactor to maxProblemDim), in that layout and in the
// thread layout (Tuning.NoWideStiff): where only the wide layout parts
// from the CPU, its own order of sums (the LU's triangles, the warp's
// reductions) is what moves the gradient.
func TestGPUStiffLayouts(t *testing.T) {
	needGPUEngine(t)
	const n = 1000
	for _, name := range problems.Names() {
		pr, err := problems.ByName(name)
		if err != nil || !pr.Stiff || pr.Field.Dim < 8 || pr.Field.Dim > maxProblemDim {
			continue
		}
		for _, m := range problemMethods(name) {
			c := problemCase(t, name, m, n)
			for _, l := range []struct {
				name string
				tun  Tuning
			}{{"wide", Tuning{Layout: LayoutWide}}, {"thread", Tuning{NoWideStiff: true}}} {
				t.Run(c.name+"/"+l.name, func(t *testing.T) {
					compareOwnMesh(t, tuned(t, "cuda", l.tun), c, problemKnife(n))
				})
			}
		}
	}
}
