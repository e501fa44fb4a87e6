package cuda

import (
	"fmt"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// wideRosCase is the built-in problem name with method m, n trajectories
// (problemCase: rows spread over ±10%), to t1, with one save time at a
// third of the way (saves) or none and a loss of the final state only.
func wideRosCase(t *testing.T, name string, m ode.Method, n int, t1 float64, saves bool) engineCase {
	t.Helper()
	c := problemCase(t, name, m, n)
	c.prob.T1 = t1
	c.prob.SaveAt = []float64{c.prob.T0 + (t1-c.prob.T0)/3}
	d := c.prob.Field.Dim
	if !saves {
		c.name += "-nosaves"
		c.prob.SaveAt = nil
		c.loss = ode.Loss{Name: "problem-final", F: func(y, _, _ []tape.V) tape.V {
			l := y[0].Mul(y[d-1])
			for k := range y {
				l = l.Add(y[k].Square().MulC(float64(k + 1)))
			}
			return l
		}}
	}
	return c
}

// TestHostWideRosenbrock runs Rosenbrock methods in the wide layout (the
// factor of W in the warp's shared memory: kernelgen's widelu.go) on a
// simulated warp: Pollution (d = 20, the default from
// kernelgen.WideMinDimFactor) with Rodas5P and Rosenbrock23, Robertson
// (d = 3, the explicit factor of W and its VJP's d² terms; the wide
// layout forced by Tuning.wideFrom) with Rodas5P, with a save time and
// without; with -long the Brusselator (d = 64) with Rodas5P. See
// testWideRos for what is compared.
func TestHostWideRosenbrock(t *testing.T) {
	needHost(t)
	t.Parallel()
	type tc struct {
		name   string
		m      ode.Method
		n      int
		t1     float64
		saves  bool
		engine string
		ops    []string
	}
	small := tuned(t, "cuda-host-sim", Tuning{wideFrom: 1})
	cases := []tc{
		{"pollution", ode.Rodas5P, 2, 0.2, true, "cuda-host-sim", nil},
		{"pollution", ode.Rosenbrock23, 2, 0.2, false, "cuda-host-sim", []string{"grad"}},
		{"robertson", ode.Rodas5P, 2, 10, true, small, nil},
		{"robertson", ode.Rosenbrock23, 2, 10, false, small, []string{"grad"}},
	}
	if testing.Short() {
		cases = cases[:1]
	}
	if longTests() {
		cases = append(cases, tc{"brusselator", ode.Rodas5P, 2, 0.5, false, "cuda-host-sim-227k", []string{"grad"}})
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s-%s-saves=%t", c.name, c.m.Name(), c.saves), func(t *testing.T) {
			t.Parallel()
			testWideRos(t, c.engine, wideRosCase(t, c.name, c.m, c.n, c.t1, c.saves), c.ops)
		})
	}
}

// testWideRos runs case c (a Rosenbrock method) on engine, whose
// default for it is the wide layout: ops (nil: solve, record, grad), each
// in the wide layout (the trace says so), against the CPU engine. The
// step sizes of stiff problems carry their error estimates' rounding (the
// wide layout's solves subtract in another order, its sums run across
// the lanes; the thread layout's meshes part from the CPU's likewise,
// Pollution with Rodas5P by 3e-10 by t = 0.5), and the discrete gradient
// moves with the mesh (an entry of Pollution's dL/dy0 by 1e-6, in the
// thread layout too): so the solve's and the record's states are
// compared with the CPU's to c.tol, the same step counts, with the step
// sizes logged where they part (compareMeshDrift); the gradient with the
// record with the CPU's gradient on the wide layout's own mesh
// (compareOnOwnMesh: the mesh within meshDeviations' bounds of the CPU's)
// and the thread layout's on that mesh (wideOnMesh), to c.tol.
func testWideRos(t *testing.T, engine string, c engineCase, ops []string) {
	t.Helper()
	if ops == nil {
		ops = []string{"solve", "record", "grad"}
	}
	cpu, dev := c.solver(t, "cpu"), c.solver(t, engine)
	p := c.prob
	d := p.Field.Dim
	for _, op := range ops {
		var tr Trace
		ctx := WithTrace(t.Context(), &tr)
		what := c.name + " " + op
		switch op {
		case "solve":
			got, err := dev.SolveContext(ctx, &p)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			want, err := cpu.Solve(&p)
			if err != nil {
				t.Fatal(err)
			}
			compareSolutions(t, what, got, want, c.tol, 0)
		case "record":
			got, sol, err := dev.RecordContext(ctx, &p)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			want, wsol, err := cpu.Record(&p)
			if err != nil {
				t.Fatal(err)
			}
			skip := compareCounts(t, what, got.Stats, want.Stats, 0)
			compareMeshDrift(t, what, got, want, skip, true)
			closeRows(t, what+" Y", sol.Y, wsol.Y, d, c.tol, skip)
		case "grad":
			got, err := dev.GradContext(ctx, nil, &p, c.loss, nil)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			compareOnOwnMesh(t, engine, c, got, 0)
			wideOnMesh(t, engine, c, got)
		default:
			t.Fatalf("testWideRos: op %q", op)
		}
		if got := tr.Stats().Layout; got != "wide" {
			t.Errorf("%s: trace layout %q, want wide", what, got)
		}
	}
}

// wideOnMesh compares the gradient with the record g of case c (the wide
// layout's, on engine) with the thread layout's gradient on g's mesh
// (the same engine's backend, Tuning.Layout = LayoutThread): the same
// steps, the final states, the loss and the gradients within c.tol
// relative (closeRows' measure); it logs the largest differences.
func wideOnMesh(t *testing.T, engine string, c engineCase, g *ode.Gradient) {
	t.Helper()
	base := engine
	for _, e := range []*Engine{hostSim, hostSimBig} {
		if len(engine) >= len(e.name) && engine[:len(e.name)] == e.name {
			base = e.name
		}
	}
	p := c.prob
	thread, err := c.solver(t, tuned(t, base, Tuning{Layout: LayoutThread})).Grad(nil, &p, c.loss, g.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	d, np := p.Field.Dim, p.Field.Params
	what := fmt.Sprintf("%s, wide against thread on the wide mesh", c.name)
	closeRows(t, what+" Y", g.Solution.Y, thread.Solution.Y, d, c.tol, nil)
	closeRows(t, what+" dL/dY0", g.Y0, thread.Y0, d, c.tol, nil)
	closeRows(t, what+" dL/dP", g.P, thread.P, np, c.tol, nil)
	closeRows(t, what+" loss", []float64{g.Loss}, []float64{thread.Loss}, 1, c.tol, nil)
	t.Logf("%s: largest relative differences y %.2g, dL/dy0 %.2g, dL/dp %.2g, loss %.2g", what,
		largestRel(g.Solution.Y, thread.Solution.Y, d), largestRel(g.Y0, thread.Y0, d), largestRel(g.P, thread.P, np),
		largestRel([]float64{g.Loss}, []float64{thread.Loss}, 1))
}
