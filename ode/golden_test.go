package ode_test

import (
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// The golden tests pin the meshes, solutions and per-trajectory gradients
// of a set of problems bit for bit, as fingerprints (FNV-64a of the float
// bits). They were recorded with the step-by-step recorder that preceded
// the engines and guard that every engine change keeps the library's
// numbers: the same accepted steps, the same states, the same gradients.
// (Four gradient fingerprints were re-recorded when step programs began
// to call the field instead of inlining it: the reverse sweep accumulates
// adjoints call by call, which moved those gradients by at most 1.8e-12
// relative; meshes and states did not change. Three again when an FSAL
// method's replay step came to call the field for its first stage too:
// 3e-15 relative. The saved-state fingerprints of five cases were of no
// data until those cases got save times; adding them left the cases'
// meshes, states and gradients unchanged, and only those five were
// recorded then.)
// Gradients with respect to shared parameters are sums over trajectories
// whose order is an engine's choice; they are compared to a tolerance.
// Every fingerprint covers data: one of no values, or of a value of a
// type fingerprint does not know, fails the test.
//
// GOLDEN_PRINT=1 go test -run Golden ./ode prints the current
// fingerprints instead of checking them, and then fails, so that a run
// with it set can never pass.

type goldenCase struct {
	name string
	pr   func() ode.Problem
	set  ode.Settings
	loss ode.Loss
	// Fingerprints of the mesh (H, Len, Status, counts), the final states
	// of Solve, the saved states, and the gradient (Y0, P).
	mesh, y, ys, grad string
	shared            map[int]float64 // entries of the gradient with respect to Shared (tolerance)
}

// fingerprint hashes the float64, int and Status slices xs in order. It
// fails the test if they hold no value at all (such a fingerprint would
// pin nothing) or if one of them is of another type (it would be left
// out).
func fingerprint(t *testing.T, what string, xs ...any) string {
	t.Helper()
	h := fnv.New64a()
	var b [8]byte
	put := func(u uint64) {
		for i := range b {
			b[i] = byte(u >> (8 * i))
		}
		h.Write(b[:])
	}
	n := 0
	for k, x := range xs {
		switch v := x.(type) {
		case []float64:
			for _, f := range v {
				put(math.Float64bits(f))
			}
			n += len(v)
		case []int:
			for _, i := range v {
				put(uint64(i))
			}
			n += len(v)
		case []ode.Status:
			for _, s := range v {
				put(uint64(s))
			}
			n += len(v)
		default:
			t.Fatalf("%s: fingerprint of value %d: type %T not hashed", what, k, x)
		}
	}
	if n == 0 {
		t.Fatalf("%s: fingerprint of no values, which would pin nothing", what)
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

func goldenProblem(p problems.Problem, n int, vary func(i int, y0, params []float64)) func() ode.Problem {
	return func() ode.Problem {
		y0, params := p.Ensemble(n)
		d, np := p.Field.Dim, p.Field.Params
		for i := 0; i < n; i++ {
			vary(i, y0[i*d:(i+1)*d], params[i*np:(i+1)*np])
		}
		return ode.Problem{Field: p.Field, N: n, Y0: y0, P: params, Shared: append([]float64(nil), p.Shared...), T0: p.T0, T1: p.T1}
	}
}

func goldenCases() []goldenCase {
	lorenz := problems.Lorenz()
	lorenzRho := goldenProblem(lorenz, 48, func(i int, _, p []float64) { p[1] = 21 * float64(i) / 47 })
	withSave := func(f func() ode.Problem, ts ...float64) func() ode.Problem {
		return func() ode.Problem { p := f(); p.SaveAt = ts; return p }
	}
	vdp := problems.VanDerPol()
	rob := problems.Robertson()
	rob.T1 = 1e3
	hires := problems.HIRES()
	neural := problems.NeuralRobertson(3)
	neural.T1 = 10
	return []goldenCase{
		{name: "lorenz-tsit5", pr: withSave(lorenzRho, 0.25, 0.5, 1), set: ode.Settings{Method: ode.Tsit5}, loss: ode.SumSquares(),
			mesh: "47a169efa584318c", y: "059abc463dd8245e", ys: "e5d04b369d407426", grad: "71b134cb8e765db4"},
		{name: "lorenz-vern7", pr: withSave(lorenzRho, 0.3, 0.9), set: ode.Settings{Method: ode.Vern7, RelTol: 1e-9, AbsTol: 1e-12}, loss: ode.Component(2),
			mesh: "68d82126afb7a6a2", y: "a2d74578eac78c74", ys: "1f6ce0d402e6db98", grad: "78a08149a15658d0"},
		{name: "lorenz-dt0", pr: withSave(lorenzRho, 0.5), set: ode.Settings{Dt0: 1e-3, RelTol: 1e-4}, loss: ode.SumSquares(),
			mesh: "9d6b60ab3ade039a", y: "7af05cbc6f14bb9d", ys: "343bd46dc6f00a6c", grad: "65d8652d1dcd026f"},
		{name: "vdp-pi", pr: withSave(goldenProblem(vdp, 16, func(i int, y, p []float64) { p[0] = 0.6 + 0.04*float64(i); y[0] = 1 + 0.1*float64(i) }), 0.25, 0.75),
			set: ode.Settings{Controller: ode.PIController(ode.Tsit5), RelTol: 1e-7}, loss: ode.SumSquares(),
			mesh: "6fbcb4ad6e016ebd", y: "383aa704d620595a", ys: "b33f4652867e2595", grad: "d968a1490591ee85"},
		{name: "robertson-rodas5p", pr: withSave(goldenProblem(rob, 8, func(i int, _, p []float64) { p[0] = 0.02 + 0.005*float64(i) }), 1, 10, 500),
			set: ode.Settings{Method: ode.Rodas5P, RelTol: 1e-6, AbsTol: 1e-10}, loss: ode.Component(0),
			mesh: "b95c55fb4d1d5fa4", y: "3b7ce8ccb2036a91", ys: "e6196454ae0ed774", grad: "cd1a810f5ae66062"},
		{name: "hires-ros23", pr: withSave(goldenProblem(hires, 2, func(i int, y, _ []float64) { y[0] = 1 - 0.1*float64(i) }), 1, 100),
			set: ode.Settings{Method: ode.Rosenbrock23, RelTol: 1e-4, AbsTol: 1e-8}, loss: ode.SumSquares(),
			mesh: "39af009826ebc5aa", y: "4fcc4a4c9d7ee2dc", ys: "42bdbcd7b752238d", grad: "fbf9a3e2483ccc20"},
		{name: "neural-robertson", pr: withSave(goldenProblem(neural, 4, func(i int, _, p []float64) { p[0] = 0.03 + 0.01*float64(i) }), 0.1, 1),
			set: ode.Settings{Method: ode.Rodas5P, RelTol: 1e-5, AbsTol: 1e-9}, loss: ode.Component(2),
			mesh: "93e8c605620e9aaa", y: "2c2ec0d7166b7d74", ys: "9cc5349fdefcb33c", grad: "b6a70ef8629c63e1",
			shared: map[int]float64{0: -0.011712387460437332, 40: 0.019725772291071624, 100: 0.0027812623927970146, 336: -0.21685987502884568}},
	}
}

// TestGolden checks the fingerprints (see goldenCase).
func TestGolden(t *testing.T) {
	print := os.Getenv("GOLDEN_PRINT") != ""
	for _, c := range goldenCases() {
		pr := c.pr()
		sv, err := ode.NewSolver(pr.Field, &c.set)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		m, _, err := sv.Record(&pr)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		sol, err := sv.Solve(&pr)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		g, err := sv.Grad(nil, &pr, c.loss, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		mesh := fingerprint(t, c.name+" mesh", m.H[:m.Rows*m.N], m.Len, m.Status, m.Stats.Accepted, m.Stats.Rejected, m.Stats.FieldEvals)
		y := fingerprint(t, c.name+" final states", sol.Y, sol.T)
		ys := fingerprint(t, c.name+" saved states", sol.Ys)
		grad := fingerprint(t, c.name+" gradient", g.Y0, g.P, []float64{g.Loss}, g.Solution.Y)
		if print {
			fmt.Printf("%s: mesh: %q, y: %q, ys: %q, grad: %q, shared %v\n", c.name, mesh, y, ys, grad, g.Shared)
			continue
		}
		for _, x := range []struct{ what, got, want string }{{"mesh", mesh, c.mesh}, {"final states", y, c.y}, {"saved states", ys, c.ys}, {"gradient", grad, c.grad}} {
			if x.got != x.want {
				t.Errorf("%s: %s fingerprint %s, want %s", c.name, x.what, x.got, x.want)
			}
		}
		for k, want := range c.shared {
			if d := math.Abs(g.Shared[k] - want); d > 1e-12*math.Max(1, math.Abs(want)) {
				t.Errorf("%s: dL/dShared[%d] = %v, want %v", c.name, k, g.Shared[k], want)
			}
		}
	}
	if print {
		t.Fatal("GOLDEN_PRINT is set: the fingerprints were printed, not checked")
	}
}
