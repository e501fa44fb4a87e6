package ode_test

import (
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
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
// recorded then. All were re-recorded when every step tried became an
// exact advance of t, h = (t + h) − t, so that spans far from the time
// origin meet the tolerance: as many accepted steps as before in every
// case (their sizes moved by rounding, hence the mesh fingerprints), states
// moved by at most 2.6e-13 relative and gradients by 2.8e-12 (Lorenz
// amplifies rounding), the shared gradient within its tolerance; the
// saved states of the two Rodas5P cases moved by 3.8e-6 and 5.4e-7
// relative as they came to be re-stepped, like every method's, instead of
// read from the order-4 continuous extension. When every method's saved
// states came to be read from its continuous extension by default, the
// re-stepped ones (Settings.Saves = SaveStep) kept their fingerprints,
// now ysStep, and ys was recorded anew.)
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
	// of Solve, the saved states (interpolated, the default, and with
	// Settings.Saves = SaveStep), and the gradient (Y0, P).
	mesh, y, ys, ysStep, grad string
	shared                    map[int]float64 // entries of the gradient with respect to Shared (tolerance)
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
	// Many save times, some on steps and some repeated, and a mean loss
	// of every saved state (its cotangents scaled by 1/N).
	kepler := goldenProblem(problems.Kepler(), 40, func(i int, _, p []float64) { p[0] = 0.95 + 0.1*float64(i)/39 })
	keplerTs := make([]float64, 0, 60)
	for k := 0; k < 57; k++ {
		keplerTs = append(keplerTs, 2*math.Pi*float64(k)/56)
	}
	keplerTs = append(keplerTs, keplerTs[56], keplerTs[56])
	savedMean := ode.Loss{Name: "saved-squares", Mean: true, F: func(y, ys, _ []tape.V) tape.V {
		s := y[0].Square()
		for _, x := range ys {
			s = s.Add(x.Square())
		}
		return s
	}}
	return []goldenCase{
		{name: "kepler-tsit5-saves", pr: withSave(kepler, keplerTs...), set: ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, AbsTol: 1e-11}, loss: savedMean,
			mesh: "665a31c452efaf47", y: "928c8f162d7fdd5d", ys: "378ce4837f95bdcb", ysStep: "13586abcf8ddacd8", grad: "a21ccc8edd15f8df"},
		{name: "kepler-vern7-saves", pr: withSave(kepler, keplerTs...), set: ode.Settings{Method: ode.Vern7, RelTol: 1e-8, AbsTol: 1e-11}, loss: savedMean,
			mesh: "8b8a8491f803c47e", y: "ce2533a6939b1821", ys: "8575fd8329487faf", ysStep: "9a3e6b37caa8618e", grad: "63a67cb7e3dbd9e8"},
		{name: "lorenz-tsit5", pr: withSave(lorenzRho, 0.25, 0.5, 1), set: ode.Settings{Method: ode.Tsit5}, loss: ode.SumSquares(),
			mesh: "0459a9f3a5e1af95", y: "40546e38dcdba778", ys: "7d62e3354b407188", ysStep: "64207724f5aacb3a", grad: "674503ad1271f2ab"},
		{name: "lorenz-vern7", pr: withSave(lorenzRho, 0.3, 0.9), set: ode.Settings{Method: ode.Vern7, RelTol: 1e-9, AbsTol: 1e-12}, loss: ode.Component(2),
			mesh: "b45a79fe64f23733", y: "c8977dc82a7710ab", ys: "f5048528608450d9", ysStep: "e68ef35ab28411c8", grad: "93cea4f7e3bf31bc"},
		{name: "lorenz-dt0", pr: withSave(lorenzRho, 0.5), set: ode.Settings{Dt0: 1e-3, RelTol: 1e-4}, loss: ode.SumSquares(),
			mesh: "614a78712c6dd570", y: "b921416224742721", ys: "d68ebfdcbdd8e303", ysStep: "6188977ca6dce1ee", grad: "01dfaa07c7018ef3"},
		{name: "vdp-pi", pr: withSave(goldenProblem(vdp, 16, func(i int, y, p []float64) { p[0] = 0.6 + 0.04*float64(i); y[0] = 1 + 0.1*float64(i) }), 0.25, 0.75),
			set: ode.Settings{Controller: ode.PIController(ode.Tsit5), RelTol: 1e-7}, loss: ode.SumSquares(),
			mesh: "12f923ad2b2842db", y: "3fd865d92109cb02", ys: "01f143875a450f54", ysStep: "acaa35a93af646a8", grad: "255dcc486d1636fd"},
		{name: "robertson-rodas5p", pr: withSave(goldenProblem(rob, 8, func(i int, _, p []float64) { p[0] = 0.02 + 0.005*float64(i) }), 1, 10, 500),
			set: ode.Settings{Method: ode.Rodas5P, RelTol: 1e-6, AbsTol: 1e-10}, loss: ode.Component(0),
			mesh: "f12f14bb0247c9a2", y: "84494b053317d8b2", ys: "e9ba3fb4f32490c2", ysStep: "54e695f0f1f0af91", grad: "b4eec2eea21d1b62"},
		{name: "hires-ros23", pr: withSave(goldenProblem(hires, 2, func(i int, y, _ []float64) { y[0] = 1 - 0.1*float64(i) }), 1, 100),
			set: ode.Settings{Method: ode.Rosenbrock23, RelTol: 1e-4, AbsTol: 1e-8}, loss: ode.SumSquares(),
			mesh: "6c2dd50ea1c65794", y: "5c01cdad5a88d2c2", ys: "9c5a456083d1e39d", ysStep: "f7c97a759b24666f", grad: "42ea7300996fa09c"},
		{name: "neural-robertson", pr: withSave(goldenProblem(neural, 4, func(i int, _, p []float64) { p[0] = 0.03 + 0.01*float64(i) }), 0.1, 1),
			set: ode.Settings{Method: ode.Rodas5P, RelTol: 1e-5, AbsTol: 1e-9}, loss: ode.Component(2),
			mesh: "6bf913611013f140", y: "3e4d4f2deb816024", ys: "27553b1b8c883315", ysStep: "d7a26770cd1f7c43", grad: "774bd33f3f491a3b",
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
		stepSet := c.set
		stepSet.Saves = ode.SaveStep
		stepSol, err := ode.Solve(pr, &stepSet)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ysStep := fingerprint(t, c.name+" saved states, SaveStep", stepSol.Ys)
		grad := fingerprint(t, c.name+" gradient", g.Y0, g.P, []float64{g.Loss}, g.Solution.Y)
		// On the recorded mesh the replay computes the saves itself.
		gm, err := sv.Grad(nil, &pr, c.loss, m)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := fingerprint(t, c.name+" gradient on the mesh", gm.Y0, gm.P, []float64{gm.Loss}, gm.Solution.Y); got != grad {
			t.Errorf("%s: gradient on the recorded mesh: fingerprint %s, recorded in the same call %s", c.name, got, grad)
		}
		if print {
			fmt.Printf("%s: mesh: %q, y: %q, ys: %q, ysStep: %q, grad: %q, shared %v\n", c.name, mesh, y, ys, ysStep, grad, g.Shared)
			continue
		}
		for _, x := range []struct{ what, got, want string }{{"mesh", mesh, c.mesh}, {"final states", y, c.y}, {"saved states", ys, c.ys}, {"saved states, SaveStep", ysStep, c.ysStep}, {"gradient", grad, c.grad}} {
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
