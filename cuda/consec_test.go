package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// TestHostEngineConsecutive checks that the staging and result loops of
// a launch of consecutive trajectories (gatherRows, fillRow for an input
// given as one row, scatterRows, scatterStatus) give the results of the
// general loops that index each trajectory's row (Tuning.generic) bit
// for bit: a solve, a gradient with its record and one on the mesh
// (sameRuns), with the states and counts omitted, with reruns (short
// first record buffers), with failed trajectories, in float32, with
// inputs given per trajectory and as one row, per-trajectory end times,
// and rows wider than the loops for consecutive rows take (d = 6).
func TestHostEngineConsecutive(t *testing.T) {
	needHost(t)
	const n = 2500 // three result blocks or more
	lor := lorenzCase(n, 1e-4)
	row := lorenzCase(n, 1e-4)
	row.name = "lorenz-rows"
	row.prob.Y0, row.prob.P = row.prob.Y0[:3], row.prob.P[:3]
	ends := lorenzCase(n, 1e-4)
	ends.name = "lorenz-T1s"
	ends.prob.T1s = make([]float64, n)
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range ends.prob.T1s {
		ends.prob.T1s[i] = 0.75 + 0.25*rng.Float64()
	}
	lp := problems.Linear(wideA(6), 6)
	wide := engineCase{name: "linear-6", prob: ode.Problem{Field: lp.Field, N: n, Y0: lp.Y0, P: make([]float64, n), T1: 1, SaveAt: []float64{0.5}},
		set: ode.Settings{Method: ode.Tsit5, RelTol: 1e-4, AbsTol: 1e-7}, loss: ode.SumSquares()}
	for i := range wide.prob.P {
		wide.prob.P[i] = 0.5 + rng.Float64()
	}
	for _, c := range []engineCase{lor, row, ends, wide} {
		for _, eng := range []string{"cuda-host", "cuda-host-f32"} {
			for _, rows := range []int{0, 4} {
				t.Run(fmt.Sprintf("%s/%s/rows=%d", c.name, eng, rows), func(t *testing.T) {
					fast := c.solver(t, tuned(t, eng, Tuning{firstRows: rows}))
					gen := c.solver(t, tuned(t, eng, Tuning{firstRows: rows, generic: true}))
					sameRuns(t, c, fast, gen)
					sameOmitted(t, c, fast, gen)
				})
			}
		}
	}
	// Failures: a step budget that about half the trajectories exhaust
	// (ρ spread over [0, 28]: the larger ones take more steps).
	t.Run("failures", func(t *testing.T) {
		c := lor
		c.set.MaxSteps = medianSteps(t, c, "cuda-host")
		c.set.AllowFailures = true
		for _, eng := range []string{"cuda-host", "cuda-host-f32"} {
			fast, gen := c.solver(t, tuned(t, eng, Tuning{firstRows: 8})), c.solver(t, tuned(t, eng, Tuning{firstRows: 8, generic: true}))
			p := c.prob
			fs, err := fast.Solve(&p)
			if err != nil {
				t.Fatal(err)
			}
			gs, err := gen.Solve(&p)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(gs.Status, ode.MaxStepsReached) || !slices.Contains(gs.Status, ode.OK) {
				t.Fatalf("%s: want some trajectories OK and some out of steps", eng)
			}
			sameSolution(t, eng+" solve", fs, gs)
			_, ferr := fast.Grad(nil, &p, c.loss, nil)
			_, gerr := gen.Grad(nil, &p, c.loss, nil)
			if ferr == nil || gerr == nil || ferr.Error() != gerr.Error() {
				t.Errorf("%s: grad errors differ:\n%v\n%v", eng, ferr, gerr)
			}
		}
	})
}

// sameOmitted checks that gradients with the states and counts omitted
// (Gradient.Omit), with the record and on its mesh, passed back each
// call, agree bit for bit between solvers got and want.
func sameOmitted(t *testing.T, c engineCase, got, want *ode.Solver) {
	t.Helper()
	p := c.prob
	g, w := ode.Gradient{Omit: ode.OmitStates | ode.OmitStats}, ode.Gradient{Omit: ode.OmitStates | ode.OmitStats}
	for k := range 2 {
		var gm, wm *ode.Mesh
		if k == 1 {
			gm, wm = g.Mesh, w.Mesh
		}
		if _, err := got.Grad(&g, &p, c.loss, gm); err != nil {
			t.Fatal(err)
		}
		if _, err := want.Grad(&w, &p, c.loss, wm); err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("%s omitted (call %d)", c.name, k)
		sameSolution(t, what, g.Solution, w.Solution)
		for _, f := range []struct {
			name      string
			got, want []float64
		}{{"loss", []float64{g.Loss}, []float64{w.Loss}}, {"dL/dY0", g.Y0, w.Y0}, {"dL/dP", g.P, w.P}, {"dL/dShared", g.Shared, w.Shared}} {
			if ok, i := bitsEqual(f.got, f.want); !ok {
				t.Errorf("%s: %s differs at %d", what, f.name, i)
			}
		}
	}
}

// wideA is a d×d damped rotation ladder: a stable linear field whose
// components all move.
func wideA(d int) []float64 {
	a := make([]float64, d*d)
	for i := range d {
		a[i*d+i] = -0.3
		a[i*d+(i+1)%d] = 1
		a[((i+1)%d)*d+i] = -1
	}
	return a
}

// medianSteps returns the median of the steps (accepted and rejected)
// that case c's trajectories take on engine: a MaxSteps that about half
// of them exhaust.
func medianSteps(t *testing.T, c engineCase, engine string) int {
	t.Helper()
	sol, err := c.solver(t, engine).Solve(&c.prob)
	if err != nil {
		t.Fatal(err)
	}
	steps := make([]int, len(sol.Stats.Accepted))
	for i := range steps {
		steps[i] = sol.Stats.Accepted[i] + sol.Stats.Rejected[i]
	}
	slices.Sort(steps)
	return steps[len(steps)/2]
}
