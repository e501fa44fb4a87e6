package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Tests of events (ode.Settings.Events) on the engine against the CPU
// engine and against closed forms, shared by the host tests (engine
// "cuda-host") and the GPU tests (TestGPUEvents..., gpu_engine_test.go).

const gravity = problems.Gravity

// ballField is problems.BouncingBall (examples/bouncing-ball); ballClosedForm
// its closed form.
var (
	ballField      = problems.BouncingBall
	ballClosedForm = problems.BouncingBallClosedForm
)

// ballCase is an ensemble of n bouncing balls dropped from heights in
// [0.8, 1.2] with restitution in [0.65, 0.9], to T = 1.6 (several bounces
// each, before any comes to rest); the loss is the height at T.
func ballCase(n int, m ode.Method) engineCase {
	f, ev := ballField()
	rng := rand.New(rand.NewPCG(1, 1))
	y0, e := make([]float64, 2*n), make([]float64, n)
	for i := range e {
		y0[2*i] = 0.8 + 0.4*rng.Float64()
		e[i] = 0.65 + 0.25*rng.Float64()
	}
	return engineCase{
		name: "ball-" + m.Name(),
		prob: ode.Problem{Field: f, N: n, Y0: y0, P: e, T1: 1.6},
		set:  ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}},
		loss: ode.Component(0),
		tol:  1e-11,
	}
}

// pkThreshold is the threshold of pkCase's terminal event.
const pkThreshold = 0.25

// pkCase is a one-compartment pharmacokinetic model, C' = −k·C with a
// clock τ' = 1, stopped by a terminal event when C falls to pkThreshold;
// C0 in [1, 2], k in [0.2, 1.2]. The loss is the clock at the end: the
// crossing time t* = ln(C0/c)/k.
func pkCase(n int, m ode.Method) engineCase {
	f := ode.Field{Name: "pk", Dim: 2, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0]), y[0].Const(1)}
	}}
	ev := ode.Event{Name: "threshold", Direction: -1, Terminal: true,
		G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].Sub(y[0].Const(pkThreshold)) }}
	rng := rand.New(rand.NewPCG(2, 2))
	y0, k := make([]float64, 2*n), make([]float64, n)
	for i := range k {
		y0[2*i] = 1 + rng.Float64()
		k[i] = 0.2 + rng.Float64()
	}
	return engineCase{
		name: "pk-" + m.Name(),
		prob: ode.Problem{Field: f, N: n, Y0: y0, P: k, T1: 100},
		set:  ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-14, Events: []ode.Event{ev}},
		loss: ode.Component(1),
		tol:  1e-11,
	}
}

// eventsSuiteCase is case c (ballCase's or pkCase's; named
// suite-bounce or suite-threshold, so that a benchmark pattern of
// "ball" or "pk" does not select it) on the events
// suite's inputs (bench/events.go, the protocol of
// bench/anchors/diffrax_events.py) in place of random ones: the balls'
// heights linspace(0.8, 1.2, n) and restitutions linspace(0.9, 0.65, n),
// pk's C0 linspace(1, 2, n) and k linspace(0.2, 1.2, n); Tsit5's
// tolerances rtol, atol = rtol·1e-2. Neighbouring trajectories, a warp's,
// then take about the same steps, as in the suite's calls and Diffrax's.
func eventsSuiteCase(c engineCase, rtol float64) engineCase {
	n := c.prob.N
	y0 := make([]float64, 2*n)
	var h0, p []float64
	name, method, _ := strings.Cut(c.name, "-")
	switch name {
	case "ball":
		h0 = problems.LinSpace(make([]float64, n), 0.8, 1.2)
		p = problems.LinSpace(make([]float64, n), 0.9, 0.65)
		name = "suite-bounce"
	case "pk":
		h0 = problems.LinSpace(make([]float64, n), 1, 2)
		p = problems.LinSpace(make([]float64, n), 0.2, 1.2)
		name = "suite-threshold"
	default:
		panic("eventsSuiteCase: not a ball or pk case: " + c.name)
	}
	for i, x := range h0 {
		y0[2*i] = x
	}
	c.name = name + "-" + method
	c.prob.Y0, c.prob.P = y0, p
	c.set.RelTol, c.set.AbsTol = rtol, rtol*1e-2
	return c
}

// drivenBallCase is a ball driven by a periodic force bouncing on a
// moving floor (ode's TestEventNonAutonomous): the field and the condition
// depend on time, so every step after an event starts at a time that
// moves with it. The restitution is a shared parameter (its gradient is
// summed over the ensemble), the force's amplitude per trajectory; the
// loss is Σ y².
func drivenBallCase(n int, m ode.Method) engineCase {
	f := ode.Field{Name: "driven-ball", Dim: 2, Params: 1, Shared: 1, F: func(tt tape.V, y, p []tape.V) []tape.V {
		return []tape.V{y[1], p[0].Mul(tt.MulC(2).Cos()).Add(y[1].Const(-gravity))}
	}}
	ev := ode.Event{Name: "moving floor", Direction: -1,
		G:     func(tt tape.V, y, _ []tape.V) tape.V { return y[0].Sub(tt.MulC(3).Sin().MulC(0.05)) },
		Apply: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{y[0], p[1].Neg().Mul(y[1])} }}
	rng := rand.New(rand.NewPCG(3, 3))
	y0, a := make([]float64, 2*n), make([]float64, n)
	for i := range a {
		y0[2*i], y0[2*i+1] = 0.8+0.4*rng.Float64(), 0.5*rng.Float64()
		a[i] = 1 + rng.Float64()
	}
	return engineCase{
		name: "driven-ball-" + m.Name(),
		prob: ode.Problem{Field: f, N: n, Y0: y0, P: a, Shared: []float64{0.8}, T1: 1.5},
		set:  ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-10, Events: []ode.Event{ev}},
		loss: ode.SumSquares(),
		tol:  1e-11,
	}
}

// savedHeights is the loss Σ_k x(τ_k): the first component at every save
// time (ode's event save tests).
func savedHeights() ode.Loss {
	return ode.Loss{Name: "heights", F: func(_, ys, _ []tape.V) tape.V {
		s := ys[0]
		for k := 2; k < len(ys); k += 2 {
			s = s.Add(ys[k])
		}
		return s
	}}
}

// withSaves returns case c with K save times spread evenly over [0, T]
// (inside event steps, between events and at T0) and, for the balls, the
// loss Σ_k x(τ_k) of the saved heights, whose gradient runs through the
// save times' reverse; the threshold's loss stays the event time.
func withSaves(c engineCase, K int, T float64) engineCase {
	c.name += "-saves"
	c.prob.SaveAt = make([]float64, K)
	for k := range c.prob.SaveAt {
		c.prob.SaveAt[k] = T * float64(k) / float64(K-1)
	}
	if !strings.HasPrefix(c.name, "pk") {
		c.loss = savedHeights()
	}
	if strings.HasPrefix(c.name, "driven") {
		// Heights read near the moving floor (x ≈ 0.006) and a gradient
		// that cancels to 5e-4 carry the last bits in which the host's
		// (or the device's) sin and cos differ from Go's: 3e-11 relative
		// on one and the same mesh with Vern7 (the steps themselves drift
		// by 6e-7, as without save times); a wrong term of the save
		// times' reverse is off by far more.
		c.tol = 1e-9
	}
	return c
}

// eventOps are the operations of a problem with events: on the engine's
// own record, and on the CPU's mesh with its event marks (replay,
// lossmesh, gradmesh).
var eventOps = caseOpts{ops: []string{"solve", "record", "replay", "grad", "gradmesh", "loss", "lossmesh"}}

// testEvents runs the bouncing balls, the pharmacokinetic threshold and
// the driven balls with each method on engine and on the CPU, comparing
// steps, event counts, times, states and gradients (of all but knife
// trajectories, which may take other steps: see caseOpts), and checks
// them against the closed forms.
//
// On a GPU (gpu set) states and gradients are compared to 1e-10, the
// issue's bound for the same steps on both engines (the device's libm
// rounds some of them 2e-11 from the CPU's); the driven balls' steps,
// whose error estimates amplify the last bits in which CUDA's sin and cos
// differ from Go's, drift from the CPU's by up to 1e-3 relative on the
// H200 (2048 trajectories), so there the states and gradients are
// compared to 1e-7 (the tolerance's order: a wrong derivative of an event
// time is off by far more) and up to n/20 trajectories may take other
// step counts.
func testEvents(t *testing.T, engine string, n int, methods []ode.Method, gpu bool) {
	for _, m := range methods {
		for _, c := range []engineCase{ballCase(n, m), pkCase(n, m), drivenBallCase(n, m),
			withSaves(ballCase(n, m), 17, 1.6), withSaves(pkCase(n, m), 5, 1), withSaves(drivenBallCase(n, m), 13, 1.5)} {
			t.Run(c.name, func(t *testing.T) {
				o := eventOps
				o.knife = knife(n)
				if gpu {
					c.tol = max(c.tol, 1e-10)
					if strings.HasPrefix(c.name, "driven") {
						c.tol, o.knife, o.drift = 1e-7, n/20, true
					}
				}
				compareEngines(t, engine, c, o)
				cpu, dev := c.solver(t, "cpu"), c.solver(t, engine)
				want, err := cpu.Grad(nil, &c.prob, c.loss, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := dev.Grad(nil, &c.prob, c.loss, nil)
				if err != nil {
					t.Fatal(err)
				}
				sol, err := dev.Solve(&c.prob)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < n; i++ {
					if got.Mesh.Stats.Accepted[i] != want.Mesh.Stats.Accepted[i] {
						continue // a knife's edge (compareEngines)
					}
					if got.Solution.Events[i] != want.Solution.Events[i] || sol.Events[i] != want.Solution.Events[i] {
						t.Errorf("trajectory %d: %d events (solve %d), CPU %d", i, got.Solution.Events[i], sol.Events[i], want.Solution.Events[i])
					}
					if g, w := got.Solution.T[i], want.Solution.T[i]; math.Abs(g-w) > 1e-12*math.Abs(w) {
						t.Errorf("trajectory %d: ends at t = %.17g, CPU %.17g", i, g, w)
					}
				}
				checkEventClosedForms(t, c, got)
				// The engine's own mesh first, where it keeps it (its
				// steps and marks on the device): the CPU's replay of it
				// copies it to the host.
				checkEventGivenMesh(t, c, dev, got, want)
				checkEventMarks(t, c, cpu, got, want)
			})
		}
	}
}

// meshMarks returns the event marks of mesh m: Events, or those an
// engine keeps with its resident steps (ode.ResidentEvents, Events nil),
// copied without moving the mesh to the host.
func meshMarks(t testing.TB, m *ode.Mesh) []int32 {
	t.Helper()
	if m.Events != nil {
		return m.Events
	}
	re, ok := m.Resident.(ode.ResidentEvents)
	if !ok {
		return nil
	}
	ev := make([]int32, m.Rows*m.N)
	if err := re.CopyEventsTo(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// checkEventMarks checks the event marks of the mesh of the engine's
// gradient got (Mesh.Events, or kept with its resident steps, EventHash)
// against the CPU's (want), on the trajectories that take the CPU's
// steps, and that the CPU engine (cpu) replays the engine's mesh (a
// resident one copied to the host with its marks): its gradient on it
// is the engine's.
func checkEventMarks(t *testing.T, c engineCase, cpu *ode.Solver, got, want *ode.Gradient) {
	t.Helper()
	gm := got.Mesh
	marks := compareMarks(t, gm, want.Mesh)
	back, err := cpu.Grad(nil, &c.prob, c.loss, gm)
	if err != nil {
		t.Fatalf("CPU Grad on the engine's mesh: %v", err)
	}
	if !slices.Equal(gm.Events, marks) {
		t.Error("the CPU's replay of the engine's mesh copied other event marks to the host (Mesh.Host)")
	}
	d, np := c.prob.Field.Dim, c.prob.Field.Params
	closeRows(t, "CPU on the engine's mesh: Y", back.Solution.Y, got.Solution.Y, d, c.tol, nil)
	closeRows(t, "CPU on the engine's mesh: T", back.Solution.T, got.Solution.T, 1, c.tol, nil)
	closeRows(t, "CPU on the engine's mesh: dL/dY0", back.Y0, got.Y0, d, c.tol, nil)
	closeRows(t, "CPU on the engine's mesh: dL/dP", back.P, got.P, np, c.tol, nil)
	closeRows(t, "CPU on the engine's mesh: dL/dShared", back.Shared, got.Shared, len(got.Shared), c.tol, nil)
	for i, e := range back.Solution.Events {
		if e != got.Solution.Events[i] {
			t.Errorf("trajectory %d: CPU on the engine's mesh: %d events, engine %d", i, e, got.Solution.Events[i])
		}
	}
}

// compareMarks checks the event marks of mesh gm (meshMarks: on the host
// or on the device) and its EventHash against the CPU's mesh wm, on the
// trajectories that take the CPU's steps, and returns them.
func compareMarks(t *testing.T, gm, wm *ode.Mesh) []int32 {
	t.Helper()
	marks := meshMarks(t, gm)
	if gm.EventHash != wm.EventHash || len(marks) != gm.Rows*gm.N {
		t.Fatalf("mesh: event hash %q with %d marks for %d steps; CPU %q", gm.EventHash, len(marks), gm.Rows*gm.N, wm.EventHash)
	}
	bad := 0
	for i := 0; i < gm.N; i++ {
		if gm.Len[i] != wm.Len[i] {
			continue // a knife's edge
		}
		for s := 0; s < gm.Rows; s++ {
			g, w := marks[s*gm.N+i], int32(0)
			if s < wm.Rows {
				w = wm.Events[s*wm.N+i]
			}
			if g != w {
				if bad++; bad <= 3 {
					t.Errorf("trajectory %d step %d: event mark %d, CPU %d", i, s, g, w)
				}
			}
		}
	}
	return marks
}

// checkEventGivenMesh checks the engine's (dev) replay and gradient on
// the CPU's mesh with events (want's) and on its own (got's, kept on the
// device where the engine keeps meshes): the end times (a terminal
// event's) and event counts are those of the mesh's record, bit for bit,
// and on its own mesh the gradient is its record's.
func checkEventGivenMesh(t *testing.T, c engineCase, dev *ode.Solver, got, want *ode.Gradient) {
	t.Helper()
	for _, x := range []struct {
		what string
		rec  *ode.Gradient
	}{{"CPU mesh", want}, {"own mesh", got}} {
		g, err := dev.Grad(nil, &c.prob, c.loss, x.rec.Mesh)
		if err != nil {
			t.Fatalf("Grad on the %s: %v", x.what, err)
		}
		sol, err := dev.Replay(&c.prob, x.rec.Mesh)
		if err != nil {
			t.Fatalf("Replay on the %s: %v", x.what, err)
		}
		for i := 0; i < c.prob.N; i++ {
			w := x.rec.Solution
			if g.Solution.T[i] != w.T[i] || sol.T[i] != w.T[i] || g.Solution.Events[i] != w.Events[i] || sol.Events[i] != w.Events[i] {
				t.Errorf("%s: trajectory %d: Grad ends at t = %v with %d events, Replay at %v with %d; the record at %v with %d",
					x.what, i, g.Solution.T[i], g.Solution.Events[i], sol.T[i], sol.Events[i], w.T[i], w.Events[i])
			}
		}
		if x.rec == got {
			d, np := c.prob.Field.Dim, c.prob.Field.Params
			closeRows(t, "own mesh: Y", g.Solution.Y, got.Solution.Y, d, c.tol, nil)
			closeRows(t, "own mesh: dL/dY0", g.Y0, got.Y0, d, c.tol, nil)
			closeRows(t, "own mesh: dL/dP", g.P, got.P, np, c.tol, nil)
			closeRows(t, "own mesh: dL/dShared", g.Shared, got.Shared, len(got.Shared), c.tol, nil)
		}
	}
}

// checkEventClosedForms checks a gradient of ballCase or pkCase against
// its closed form.
func checkEventClosedForms(t *testing.T, c engineCase, g *ode.Gradient) {
	t.Helper()
	y0, p := c.prob.Y0, c.prob.P
	tol := 1e-10 // the event time's relative error
	if c.set.Method == ode.Rosenbrock23 {
		tol = 1e-6 // second order: 1e-7 at RelTol 1e-10
	}
	for i := 0; i < c.prob.N; i++ {
		switch {
		case strings.HasPrefix(c.name, "driven"):
			return // no closed form: compared with the CPU only
		case strings.HasPrefix(c.name, "ball") && len(c.prob.SaveAt) > 0:
			// Σ_k x(τ_k) and its derivative with respect to e.
			K, dwant := len(c.prob.SaveAt), 0.0
			for k, tau := range c.prob.SaveAt {
				x, dx, _ := ballClosedForm(y0[2*i], p[i], tau)
				dwant += dx
				if got := g.Solution.Ys[(i*K+k)*2]; math.Abs(got-x) > 1e-8 {
					t.Errorf("trajectory %d: x(%v) = %.12g, closed form %.12g", i, tau, got, x)
				}
			}
			if got := g.P[i]; math.Abs(got-dwant) > 1e-6*math.Max(1, math.Abs(dwant)) {
				t.Errorf("trajectory %d: d Σx(τ)/de = %.12g, closed form %.12g", i, got, dwant)
			}
		case strings.HasPrefix(c.name, "ball"):
			x, dx, bounces := ballClosedForm(y0[2*i], p[i], c.prob.T1)
			if got := g.Solution.Events[i]; got != bounces {
				t.Errorf("trajectory %d: %d bounces, closed form %d", i, got, bounces)
			}
			if got := g.Solution.Y[2*i]; math.Abs(got-x) > 1e-8 {
				t.Errorf("trajectory %d: x(T) = %.12g, closed form %.12g", i, got, x)
			}
			if got := g.P[i]; math.Abs(got-dx) > 1e-6*math.Max(1, math.Abs(dx)) {
				t.Errorf("trajectory %d: dx(T)/de = %.12g, closed form %.12g", i, got, dx)
			}
		default:
			ts := math.Log(y0[2*i]/pkThreshold) / p[i]
			for k, tau := range c.prob.SaveAt { // before the event: C0·exp(−kτ)
				K := len(c.prob.SaveAt)
				if got, want := g.Solution.Ys[(i*K+k)*2], y0[2*i]*math.Exp(-p[i]*tau); math.Abs(got-want) > max(1e-8, tol) {
					t.Errorf("trajectory %d: C(%v) = %.12g, closed form %.12g", i, tau, got, want)
				}
			}
			if got := g.Solution.T[i]; math.Abs(got-ts) > tol*ts {
				t.Errorf("trajectory %d: event at t = %.15g, closed form %.15g", i, got, ts)
			}
			if got, want := g.P[i], -ts/p[i]; math.Abs(got-want) > 1e-6*math.Abs(want) {
				t.Errorf("trajectory %d: dt*/dk = %.12g, closed form %.12g", i, got, want)
			}
			if got, want := g.Y0[2*i], 1/(p[i]*y0[2*i]); math.Abs(got-want) > 1e-6*math.Abs(want) {
				t.Errorf("trajectory %d: dt*/dC0 = %.12g, closed form %.12g", i, got, want)
			}
		}
	}
}

// testEventsBadInput checks the statuses of bad events on engine against
// the CPU's (a non-finite condition, one zero at T0, one that never
// fires, a ball coming to rest that passes MaxEvents) and the errors of
// what events do not support.
func testEventsBadInput(t *testing.T, engine string) {
	f, bounce := ballField()
	y0 := []float64{1, 0, 0.6, 0}
	cases := []struct {
		name string
		ev   ode.Event
		max  int
		T    float64
		want ode.Status
		n    int
	}{
		{"non-finite", ode.Event{G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].Sub(y[0].Const(0.5)).Sqrt().Add(y[0].Const(1)) }}, 0, 1, ode.EventNonFinite, 0},
		{"zero at T0", ode.Event{G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].Sub(y[0].Const(1)) }}, 0, 1, ode.EventAtStart, 0},
		{"never fires", ode.Event{G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].Add(y[0].Const(10)) }, Direction: 1}, 0, 1, ode.OK, 0},
		{"ball at rest", bounce, 20, 5, ode.TooManyEvents, 21},
		// At the rest time, below MaxEvents: how many bounces come first
		// depends on the rounding of the height (ode's
		// TestEventAccumulation checks the time against the closed form),
		// so the count is only compared between engines (-1).
		{"bounces accumulate", bounce, 1 << 20, 20, ode.TooManyEvents, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var sols [2]*ode.Solution
			for k, eng := range []string{"cpu", engine} {
				sv, err := ode.NewSolver(f, &ode.Settings{Engine: eng, Events: []ode.Event{c.ev}, MaxEvents: c.max, AllowFailures: true})
				if err != nil {
					t.Fatal(err)
				}
				if sols[k], err = sv.Solve(&ode.Problem{Field: f, N: 2, Y0: y0, P: []float64{0.8, 0.8}, T1: c.T}); err != nil {
					t.Fatalf("%s: %v", eng, err)
				}
			}
			want, got := sols[0], sols[1]
			if want.Status[0] != c.want || (c.n >= 0 && want.Events[0] != c.n) {
				t.Errorf("CPU: status %v with %d events, want %v with %d", want.Status[0], want.Events[0], c.want, c.n)
			}
			for i := range want.Status {
				if got.Status[i] != want.Status[i] || got.Events[i] != want.Events[i] || got.Stats.Accepted[i] != want.Stats.Accepted[i] {
					t.Errorf("trajectory %d: status %v with %d events and %d steps, CPU %v with %d and %d", i,
						got.Status[i], got.Events[i], got.Stats.Accepted[i], want.Status[i], want.Events[i], want.Stats.Accepted[i])
				}
			}
			closeRows(t, c.name+" Y", got.Y, want.Y, 2, 1e-12, nil)
			// In float32, against the CPU at the same tolerances: the same
			// statuses, and events where they do not depend on rounding.
			for k, eng := range []string{"cpu", engine + "-f32"} {
				sv, err := ode.NewSolver(f, &ode.Settings{Engine: eng, RelTol: 1e-4, Events: []ode.Event{c.ev}, MaxEvents: c.max, AllowFailures: true})
				if err != nil {
					t.Fatal(err)
				}
				if sols[k], err = sv.Solve(&ode.Problem{Field: f, N: 2, Y0: y0, P: []float64{0.8, 0.8}, T1: c.T}); err != nil {
					t.Fatalf("%s: %v", eng, err)
				}
			}
			for i, st := range sols[0].Status {
				if g := sols[1]; g.Status[i] != st || (c.n >= 0 && g.Events[i] != sols[0].Events[i]) {
					t.Errorf("float32: trajectory %d: status %v with %d events, CPU %v with %d", i, g.Status[i], g.Events[i], st, sols[0].Events[i])
				}
			}
		})
	}
	t.Run("errors", func(t *testing.T) {
		sv, err := ode.NewSolver(f, &ode.Settings{Engine: engine, Events: []ode.Event{bounce}})
		if err != nil {
			t.Fatal(err)
		}
		p := ode.Problem{Field: f, N: 1, Y0: y0[:2], P: []float64{0.8}, T1: 1}
		m, _, err := sv.Record(&p)
		if err != nil {
			t.Fatal(err)
		}
		// Meshes with events go both ways between this engine and the
		// CPU (they mark their event steps, Mesh.Events); one without
		// marks is refused.
		cpu, err := ode.NewSolver(f, &ode.Settings{Engine: "cpu", Events: []ode.Event{bounce}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cpu.Grad(nil, &p, ode.Component(0), m); err != nil {
			t.Errorf("CPU Grad on this engine's mesh: %v", err)
		}
		cm, _, err := cpu.Record(&p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sv.Grad(nil, &p, ode.Component(0), cm); err != nil {
			t.Errorf("Grad on the CPU's mesh with events: %v", err)
		}
		hostMesh(t, m)
		bare := *m
		bare.Events = nil
		if _, err := sv.Grad(nil, &p, ode.Component(0), &bare); err == nil || !strings.Contains(err.Error(), "event marks") {
			t.Errorf("Grad on a mesh without event marks: error %v, want one about event marks", err)
		}
	})
}

// testEventSavesEdges checks the edges of save times with events on
// engine against the CPU (ode's TestEventSaveAtBadInput): a save time
// exactly at a non-terminal event (the state after Apply), and save times
// at and past a terminal event (the state at the event, then NaN rows
// from Solve and Replay, an error naming the trajectory from Grad and
// Loss, on the record and on a given mesh).
func testEventSavesEdges(t *testing.T, engine string) {
	f, bounce := ballField()
	floor := ode.Event{Name: "floor", Direction: -1, Terminal: true, G: bounce.G}
	solver := func(eng string, ev ode.Event) *ode.Solver {
		sv, err := ode.NewSolver(f, &ode.Settings{Engine: eng, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}})
		if err != nil {
			t.Fatal(err)
		}
		return sv
	}
	// The first bounces' times, from the terminal event (the
	// non-terminal solve takes the same steps to them, bit for bit).
	p := ode.Problem{Field: f, N: 2, Y0: []float64{1, 0, 0.05, 0}, P: []float64{0.8, 0.8}, T1: 1}
	first, err := solver("cpu", floor).Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	ts := first.T[0]
	for _, eng := range []string{"cpu", engine} {
		q := ode.Problem{Field: f, N: 1, Y0: p.Y0[:2], P: p.P[:1], T1: 1, SaveAt: []float64{ts}}
		at, err := solver(eng, bounce).Solve(&q)
		if err != nil {
			t.Fatal(err)
		}
		if x, v, want := at.Ys[0], at.Ys[1], -0.8*first.Y[1]; math.Abs(v-want) > 1e-12*math.Abs(want) || math.Abs(x) > 1e-12 {
			t.Errorf("%s: save at the event: (x, v) = (%v, %v), want the state after Apply (0, %v)", eng, x, v, -0.8*first.Y[1])
		}
	}
	q := p
	q.SaveAt = []float64{0.05, ts, 0.9}
	var sols [2]*ode.Solution
	for x, eng := range []string{"cpu", engine} {
		term := solver(eng, floor)
		past, err := term.Solve(&q)
		if err != nil {
			t.Fatal(err)
		}
		sols[x] = past
		for i, want := range [][]bool{{false, false, true}, {false, true, true}} {
			for k, nan := range want {
				if got := math.IsNaN(past.Ys[(i*3+k)*2]); got != nan || past.Status[i] != ode.OK {
					t.Errorf("%s: trajectory %d (event at %v, status %v): save at %v: NaN %t, want %t", eng, i, past.T[i], past.Status[i], q.SaveAt[k], got, nan)
				}
			}
		}
		if past.Ys[2] != past.Y[0] || past.Ys[3] != past.Y[1] {
			t.Errorf("%s: save exactly at the terminal event %v, want the final state %v", eng, past.Ys[2:4], past.Y[:2])
		}
		m, _, err := term.Record(&p)
		if err != nil {
			t.Fatal(err)
		}
		for _, mesh := range []*ode.Mesh{nil, m} {
			if _, err := term.Grad(nil, &q, savedHeights(), mesh); err == nil || !strings.Contains(err.Error(), "after its terminal event (floor") || !errors.Is(err, ode.ErrInput) {
				t.Errorf("%s: Grad with saves past a terminal event (mesh %t): error %v, want one wrapping ode.ErrInput saying after its terminal event (floor", eng, mesh != nil, err)
			}
			if _, _, err := term.Loss(&q, savedHeights(), mesh); err == nil || !strings.Contains(err.Error(), "trajectory 0") || !errors.Is(err, ode.ErrInput) {
				t.Errorf("%s: Loss with saves past a terminal event (mesh %t): error %v, want one wrapping ode.ErrInput naming trajectory 0", eng, mesh != nil, err)
			}
		}
		rep, err := term.Replay(&q, m)
		if err != nil {
			t.Fatal(err)
		}
		closeRows(t, eng+" replay past a terminal event", rep.Ys, past.Ys, 6, 1e-12, nil)
	}
	closeRows(t, "past a terminal event", sols[1].Ys, sols[0].Ys, 6, 1e-10, nil)
}

// TestHostEvents runs the event tests on the host engine: Tsit5 and
// Vern7 here, the Rosenbrock methods in TestHostEventsRosenbrock.
func TestHostEvents(t *testing.T) {
	needHost(t)
	t.Parallel()
	testEvents(t, "cuda-host", 8, []ode.Method{ode.Tsit5, ode.Vern7}, false)
}

func TestHostEventsRosenbrock(t *testing.T) {
	needHost(t)
	t.Parallel()
	testEvents(t, "cuda-host", 6, []ode.Method{ode.Rodas5P, ode.Rosenbrock23}, false)
}

func TestHostEventsBadInput(t *testing.T) {
	needHost(t)
	t.Parallel()
	testEventsBadInput(t, "cuda-host")
}

func TestHostEventsSaveEdges(t *testing.T) {
	needHost(t)
	t.Parallel()
	testEventSavesEdges(t, "cuda-host")
}

// TestHostSimEvents runs the bouncing balls on a simulated warp (the
// device form of the kernel's warp reductions).
func TestHostSimEvents(t *testing.T) {
	needHost(t)
	t.Parallel()
	testEvents(t, "cuda-host-sim", 40, []ode.Method{ode.Tsit5}, false)
}

// testEventsReruns runs the bouncing balls' gradient on engine in
// launches of a few trajectories whose record buffers are too short (a
// first guess of 4 rows), with the lanes layout asked for: the trajectories
// are rerun, the kernels run in the thread layout (events run in no
// other), and the results are the CPU's.
func testEventsReruns(t *testing.T, engine string, n int, limit int64) {
	c := ballCase(n, ode.Tsit5)
	set := c.set
	set.Engine = tuned(t, engine, Tuning{firstRows: 4, Layout: LayoutLanes})
	set.MemoryLimit = limit
	sv, err := ode.NewSolver(c.prob.Field, &set)
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.solver(t, "cpu").Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, s := c.tracedGrad(t, sv)
	t.Logf("trace: %+v", s)
	if s.Launches < 4 || s.Reruns == 0 || s.Layout != "thread" {
		t.Errorf("%d launches, %d reruns, layout %q: want reruns in the thread layout", s.Launches, s.Reruns, s.Layout)
	}
	skip := compareCounts(t, "reruns", got.Mesh.Stats, want.Mesh.Stats, knife(n))
	compareMesh(t, "reruns", got.Mesh, want.Mesh, skip)
	closeRows(t, "reruns dL/dP", got.P, want.P, 1, c.tol, skip)
	closeRows(t, "reruns dL/dY0", got.Y0, want.Y0, 2, c.tol, skip)
	for i := range want.Solution.Events {
		if !skip[i] && got.Solution.Events[i] != want.Solution.Events[i] {
			t.Errorf("trajectory %d: %d events, CPU %d", i, got.Solution.Events[i], want.Solution.Events[i])
		}
	}
	// The event marks of chunks and reruns.
	checkEventMarks(t, c, c.solver(t, "cpu"), got, want)
}

func TestHostEventsReruns(t *testing.T) {
	needHost(t)
	t.Parallel()
	testEventsReruns(t, "cuda-host", 100, 24<<10)
}

// ulp32 returns the spacing of the float32 values above |x|.
func ulp32(x float64) float64 {
	f := float32(math.Abs(x))
	return float64(math.Nextafter32(f, float32(math.Inf(1))) - f)
}

// normErr returns max_i |got_i − want_i| / max_i |want_i|: the error
// relative to the ensemble's scale.
func normErr(got, want []float64) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	num, den := 0.0, 0.0
	for i, w := range want {
		num = math.Max(num, math.Abs(got[i]-w))
		den = math.Max(den, math.Abs(w))
	}
	if num == 0 {
		return 0
	}
	return num / den
}

// ballFloorCase is ballCase with the floor a terminal event: each ball
// ends at its first bounce, at t* = √(2·h0/g), which every method's steps
// reach exactly in float64 (the flight is a parabola), so that the event
// times' errors in float32 are those of the root location alone. The loss
// is the speed at the floor, v* = −g·t*: dv*/dh0 = −g/√(2·g·h0), dv*/dv0
// = 0.
func ballFloorCase(n int, m ode.Method) engineCase {
	c := ballCase(n, m)
	c.name = "ball-floor-" + m.Name()
	ev := c.set.Events[0]
	ev.Terminal, ev.Apply = true, nil
	c.set.Events = []ode.Event{ev}
	c.loss = ode.Component(1)
	return c
}

// testEventsFloat32 runs the event cases on the float32 engine engine at
// RelTol 1e-4, AbsTol 1e-6, against the float64 CPU engine at the same
// tolerances and against the closed forms: every trajectory goes through
// the CPU's events (on a GPU up to n/20 may differ: the device's libm);
// states, saved states and gradients agree to 2e-4 of the ensemble's
// scale, or, for saved states and gradients through them, to u·A where
// the extension's coefficients amplify float32 rounding more
// (denseAmplification: Vern7's A = 1.75e4, u·A = 1.0e-3; Tsit5's u·A =
// 2.3e-5). On the CPU's mesh (float64 steps, converted) the engine's
// gradient agrees as closely, and the CPU replays the engine's mesh with
// its event marks.
//
// A terminal event time is where the trajectory's state crosses the
// condition, so it carries the state's error there: δt ≈ ∂g/∂y·δy / |ġ|,
// ġ = ∂g/∂t + ∂g/∂y·f at the CPU's crossing (eventRate, from the traced
// field and condition), large where g changes slowly (a concentration
// decaying near its threshold). Trajectory i's end time may differ from
// the CPU's by
//
//	ulps·ulp(span) + |g(ȳ) − g(y)|/|ġ| + |g(y*(t_c)) − g(y_c)|/|ġ| + |g(y*(t̄)) − g(ȳ)|/|ġ|,
//
// ulps = 4 (8 on a GPU) for the root's polish: the engine's float32
// state error (its end state y against ȳ, the CPU's float64 replay of
// the engine's own mesh, which ends where it ends); and the two
// meshes' own discretisation errors at their crossings, the CPU's (y_c
// at t_c) and the engine's (ȳ at t̄) against the closed form y* (the
// engine's float32 controller takes steps that differ from the CPU's,
// so the two discrete solutions differ by up to the sum of their
// errors; the terminal cases, ball-floor and pk, have closed forms;
// the others end at T1). A wrong event time moves the engine's state and
// time together, so none of these terms grows with it: the kernel's root
// moved by 300 ulps of the span fails every pk trajectory (bounds 4 to 14
// ulps with Vern7, 14 to 90 with Tsit5, whose discretisation error is
// larger), by 30 ulps 10 of 24 with Tsit5. Trajectories whose step counts
// differ from the CPU's and whose end time exceeds this bound are
// another discrete solution: they are counted with the event counts'
// drift and held to 10 RelTol.
func testEventsFloat32(t *testing.T, engine string, n int, methods []ode.Method, gpu bool) {
	ulps, drift := 4.0, 0
	if gpu {
		ulps, drift = 8, n/20
	}
	const tol = 2e-4
	for _, m := range methods {
		for _, c := range []engineCase{ballFloorCase(n, m), pkCase(n, m), ballCase(n, m), drivenBallCase(n, m),
			withSaves(ballCase(n, m), 17, 1.6), withSaves(pkCase(n, m), 5, 1)} {
			t.Run(c.name, func(t *testing.T) {
				c.set.RelTol, c.set.AbsTol = 1e-4, 1e-6
				cpu, dev := c.solver(t, "cpu"), c.solver(t, engine)
				want, err := cpu.Grad(nil, &c.prob, c.loss, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := dev.Grad(nil, &c.prob, c.loss, nil)
				if err != nil {
					t.Fatal(err)
				}
				sol, err := dev.Solve(&c.prob)
				if err != nil {
					t.Fatal(err)
				}
				back, err := cpu.Grad(nil, &c.prob, c.loss, got.Mesh)
				if err != nil {
					t.Fatalf("CPU Grad on the engine's mesh: %v", err)
				}
				// Saved states and gradients through them: the float32
				// rounding of the extension's coefficients.
				stol := max(tol, 0x1p-24*denseAmplification(t, cpu.Plan()))
				ev := newEventRate(t, c)
				span := ulp32(c.prob.T1 - c.prob.T0)
				worst, other := 0.0, 0
				for i := 0; i < n; i++ {
					if got.Solution.Events[i] != want.Solution.Events[i] || sol.Events[i] != got.Solution.Events[i] {
						if other++; other > drift {
							t.Errorf("trajectory %d: %d events (solve %d), CPU %d", i, got.Solution.Events[i], sol.Events[i], want.Solution.Events[i])
						}
						continue
					}
					dt := math.Abs(got.Solution.T[i] - want.Solution.T[i])
					bound := ulps*span + ev.timeErr(i, want.Solution, got.Solution, back.Solution)
					if dt > bound && (got.Solution.Stats.Accepted[i] != want.Solution.Stats.Accepted[i] || got.Solution.Stats.Rejected[i] != want.Solution.Stats.Rejected[i]) {
						// Other steps than the CPU's (the controller's
						// float32 error estimate took a step near err = 1
						// the other way): another discrete solution, which
						// differs from the CPU's by the method's truncation
						// error (RelTol), not by float32 rounding; counted
						// with the event counts' drift.
						if other++; other > drift {
							t.Errorf("trajectory %d: %d / %d steps accepted / rejected, CPU %d / %d, its end time %.3g float32 ulps of the span from the CPU's (bound %.3g)", i, got.Solution.Stats.Accepted[i], got.Solution.Stats.Rejected[i], want.Solution.Stats.Accepted[i], want.Solution.Stats.Rejected[i], dt/span, bound/span)
						}
						if !(dt <= 10*c.set.RelTol*math.Max(math.Abs(want.Solution.T[i]), 1)) || sol.T[i] != got.Solution.T[i] {
							t.Errorf("trajectory %d (other steps than the CPU's): ends at t = %.9g (solve %.9g), CPU %.9g", i, got.Solution.T[i], sol.T[i], want.Solution.T[i])
						}
						continue
					}
					worst = math.Max(worst, dt/bound)
					if dt > bound || sol.T[i] != got.Solution.T[i] {
						t.Errorf("trajectory %d: ends at t = %.9g (solve %.9g), CPU %.9g: %.3g float32 ulps of the span, bound %.3g", i, got.Solution.T[i], sol.T[i], want.Solution.T[i], dt/span, bound/span)
					}
				}
				gtol := tol // gradients: through saved states, stol
				if c.loss.Name == savedHeights().Name {
					gtol = stol
				}
				errs := []struct {
					what      string
					got, want []float64
					tol       float64
				}{
					{"Y", got.Solution.Y, want.Solution.Y, tol}, {"Ys", got.Solution.Ys, want.Solution.Ys, stol}, {"solve Y", sol.Y, want.Solution.Y, tol},
					{"dL/dY0", got.Y0, want.Y0, gtol}, {"dL/dP", got.P, want.P, gtol}, {"dL/dShared", got.Shared, want.Shared, gtol},
				}
				msg := fmt.Sprintf("%d events, end times within %.2g of their bounds;", slices.Max(got.Solution.Events), worst)
				for _, e := range errs {
					x := normErr(e.got, e.want)
					msg += fmt.Sprintf(" %s %.1e", e.what, x)
					if other == 0 && !(x <= e.tol) {
						t.Errorf("%s: error %.2g of the ensemble's scale, want at most %.2g", e.what, x, e.tol)
					}
				}
				t.Logf("against the float64 CPU: %s", msg)
				checkFloat32ClosedForms(t, c, got, ulps*span)

				// On the CPU's mesh (the same steps: float32 rounding
				// alone); the CPU on the engine's.
				onCPU, err := dev.Grad(nil, &c.prob, c.loss, want.Mesh)
				if err != nil {
					t.Fatalf("Grad on the CPU's mesh: %v", err)
				}
				for i := 0; i < n; i++ {
					if d := math.Abs(onCPU.Solution.T[i] - want.Solution.T[i]); onCPU.Solution.Events[i] != want.Solution.Events[i] || d > ulps*span+ev.timeErr(i, want.Solution, onCPU.Solution, want.Solution) {
						t.Errorf("on the CPU's mesh: trajectory %d: %d events, ends at %.9g; CPU %d at %.9g", i, onCPU.Solution.Events[i], onCPU.Solution.T[i], want.Solution.Events[i], want.Solution.T[i])
					}
				}
				if x := max(normErr(onCPU.P, want.P), normErr(onCPU.Y0, want.Y0), normErr(onCPU.Shared, want.Shared)); !(x <= gtol) {
					t.Errorf("on the CPU's mesh: gradient error %.2g of the ensemble's scale, want at most %.2g", x, gtol)
				}
				if !slices.Equal(back.Solution.Events, got.Solution.Events) {
					t.Errorf("CPU on the engine's mesh: events %v, engine %v", back.Solution.Events, got.Solution.Events)
				}
				if x := max(normErr(got.P, back.P), normErr(got.Y0, back.Y0)); !(x <= gtol) {
					t.Errorf("CPU on the engine's mesh: gradient error %.2g of the ensemble's scale, want at most %.2g", x, gtol)
				}
			})
		}
	}
}

// eventRate evaluates an event case's first condition g and its rate
// along the flow, ġ = ∂g/∂t + ∂g/∂y·f, from the traced field and
// condition (tape programs evaluated in float64), and knows the closed
// form of the terminal cases' states (closedFormState).
type eventRate struct {
	c          engineCase
	field, cnd *tape.Program
}

func newEventRate(t testing.TB, c engineCase) *eventRate {
	t.Helper()
	f := c.prob.Field
	fp, err := f.Program()
	if err != nil {
		t.Fatal(err)
	}
	ev := c.set.Events[0]
	cp, err := tape.Trace("condition", fp.Inputs, func(in []tape.V) []tape.V {
		return []tape.V{ev.G(in[0], in[1:1+f.Dim], in[1+f.Dim:])}
	})
	if err != nil {
		t.Fatal(err)
	}
	return &eventRate{c: c, field: fp, cnd: cp}
}

// inputs returns the programs' inputs for trajectory i at (t, y).
func (e *eventRate) inputs(i int, t float64, y []float64) []float64 {
	p := &e.c.prob
	np := e.c.prob.Field.Params
	in := append(append([]float64{t}, y...), p.P[i*np:(i+1)*np]...)
	return append(in, p.Shared...)
}

// g returns the condition at (t, y) of trajectory i.
func (e *eventRate) g(i int, t float64, y []float64) float64 {
	return e.cnd.Eval(nil, e.inputs(i, t, y))[0]
}

// rate returns |ġ| at (t, y) of trajectory i: a central difference of
// g along the flow, step δ = 1e-6·max(|t|, 1).
func (e *eventRate) rate(i int, t float64, y []float64) float64 {
	f := e.field.Eval(nil, e.inputs(i, t, y))
	dl := 1e-6 * math.Max(math.Abs(t), 1)
	yp, ym := slices.Clone(y), slices.Clone(y)
	for k := range y {
		yp[k] += dl * f[k]
		ym[k] -= dl * f[k]
	}
	return math.Abs(e.g(i, t+dl, yp)-e.g(i, t-dl, ym)) / (2 * dl)
}

// timeErr returns the propagated state errors of testEventsFloat32's
// bound on trajectory i's end time (0 where it ends at T1): |g(ȳ) −
// g(y)| + |g(y*(t_c)) − g(y_c)| + |g(y*(t̄)) − g(ȳ)|, over |ġ| at the
// CPU's crossing, with y the engine's end state, ȳ the float64 replay of
// the engine's mesh (ref; the CPU's own solution where the engine ran on
// the CPU's mesh), y_c the CPU's (cpu) and y* the closed form (none: the
// last two terms are 0).
func (e *eventRate) timeErr(i int, cpu, eng, ref *ode.Solution) float64 {
	d := e.c.prob.Field.Dim
	at := func(s *ode.Solution) (float64, []float64) { return s.T[i], s.Y[d*i : d*(i+1)] }
	tc, yc := at(cpu)
	if tc == e.c.prob.T1 {
		return 0
	}
	te, ye := at(eng)
	tr, yr := at(ref)
	num := math.Abs(e.g(i, tr, yr) - e.g(i, te, ye))
	if ys := closedFormState(e.c, i, tc); ys != nil && ref != cpu {
		num += math.Abs(e.g(i, tc, ys) - e.g(i, tc, yc))
		num += math.Abs(e.g(i, tr, closedFormState(e.c, i, tr)) - e.g(i, tr, yr))
	}
	return num / e.rate(i, tc, yc)
}

// closedFormState returns the state at time t of trajectory i of a case
// whose event is terminal, before it: ballFloorCase's falling ball, x =
// h0 − g·t²/2, v = −g·t; pkCase's C = C0·exp(−k·t) and clock t; nil for
// the other cases.
func closedFormState(c engineCase, i int, t float64) []float64 {
	y0, p := c.prob.Y0, c.prob.P
	switch {
	case strings.HasPrefix(c.name, "ball-floor"):
		return []float64{y0[2*i] - gravity*t*t/2, -gravity * t}
	case strings.HasPrefix(c.name, "pk"):
		return []float64{y0[2*i] * math.Exp(-p[i]*t), t}
	}
	return nil
}

// checkFloat32ClosedForms checks a float32 gradient of ballFloorCase,
// ballCase or pkCase (without save times) against its closed form: event
// times within dt, the rest within 2e-4 of the ensemble's scale.
func checkFloat32ClosedForms(t *testing.T, c engineCase, g *ode.Gradient, dt float64) {
	t.Helper()
	n, y0, p := c.prob.N, c.prob.Y0, c.prob.P
	var gotX, wantX, gotD, wantD []float64
	for i := 0; i < n; i++ {
		switch {
		case strings.HasPrefix(c.name, "ball-floor"):
			ts := math.Sqrt(2 * y0[2*i] / gravity)
			if d := math.Abs(g.Solution.T[i] - ts); d > dt {
				t.Errorf("trajectory %d: first bounce at %.9g, closed form %.9g", i, g.Solution.T[i], ts)
			}
			gotX, wantX = append(gotX, g.Solution.Y[2*i+1]), append(wantX, -gravity*ts)
			gotD, wantD = append(gotD, g.Y0[2*i], g.Y0[2*i+1]), append(wantD, -gravity/math.Sqrt(2*gravity*y0[2*i]), 0)
		case len(c.prob.SaveAt) > 0 || strings.HasPrefix(c.name, "driven"):
			return
		case strings.HasPrefix(c.name, "ball"):
			x, dx, bounces := ballClosedForm(y0[2*i], p[i], c.prob.T1)
			if g.Solution.Events[i] != bounces {
				t.Errorf("trajectory %d: %d bounces, closed form %d", i, g.Solution.Events[i], bounces)
			}
			gotX, wantX = append(gotX, g.Solution.Y[2*i]), append(wantX, x)
			gotD, wantD = append(gotD, g.P[i]), append(wantD, dx)
		default:
			// The tolerance's error (1e-4), not float32's, bounds these.
			ts := math.Log(y0[2*i]/pkThreshold) / p[i]
			gotX, wantX = append(gotX, g.Solution.T[i]), append(wantX, ts)
			gotD, wantD = append(gotD, g.P[i], g.Y0[2*i]), append(wantD, -ts/p[i], 1/(p[i]*y0[2*i]))
		}
	}
	tol := 2e-4
	if strings.HasPrefix(c.name, "pk") {
		tol = 2e-3 // RelTol 1e-4
	}
	if x, d := normErr(gotX, wantX), normErr(gotD, wantD); !(x <= tol && d <= tol) {
		t.Errorf("closed form: states (or times) within %.2g, gradients within %.2g of the ensemble's scale, want %g", x, d, tol)
	}
}

// testEventsAtRest solves n balls that come to rest on engine with
// MaxEvents maxEvents, reached before their bounces get shorter than the
// time's resolution in the engine's precision: every ball bounces
// maxEvents+1 times (TooManyEvents, as on the CPU) and none falls through
// the floor (ode's TestEventBallsAtRest: an event step of size 0 after a
// bounce, from a secant through the fired condition's stand-in value; in
// float32 most of these balls fell).
func testEventsAtRest(t *testing.T, engine string, n, maxEvents int, rtol float64) {
	f, ev := ballField()
	rng := rand.New(rand.NewPCG(9, 9))
	y0, e := make([]float64, 2*n), make([]float64, n)
	for i := range e {
		y0[2*i] = 0.2 + rng.Float64()
		e[i] = 0.5 + 0.4*rng.Float64()
	}
	sv, err := ode.NewSolver(f, &ode.Settings{Engine: engine, RelTol: rtol, Events: []ode.Event{ev}, MaxEvents: maxEvents, AllowFailures: true})
	if err != nil {
		t.Fatal(err)
	}
	sol, err := sv.Solve(&ode.Problem{Field: f, N: n, Y0: y0, P: e, T1: 20})
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i, st := range sol.Status {
		if st != ode.TooManyEvents || sol.Events[i] != maxEvents+1 {
			if bad++; bad <= 3 {
				t.Errorf("ball %d (h0 %v, e %v): status %v after %d bounces at t = %v, height %v; want TooManyEvents after %d",
					i, y0[2*i], e[i], st, sol.Events[i], sol.T[i], sol.Y[2*i], maxEvents+1)
			}
		}
	}
	if bad > 3 {
		t.Errorf("%d of %d balls did not come to rest", bad, n)
	}
}

func TestHostEventsAtRest(t *testing.T) {
	needHost(t)
	t.Parallel()
	t.Run("float64", func(t *testing.T) { testEventsAtRest(t, "cuda-host", 1000, 30, 1e-6) })
	t.Run("float32", func(t *testing.T) { testEventsAtRest(t, "cuda-host-f32", 1000, 12, 1e-4) })
}

// TestHostEventsFloat32 runs the event cases in float32 on the host
// engine (Tsit5, Rodas5P) and on two fake float32 devices of a
// MultiEngine.
func TestHostEventsFloat32(t *testing.T) {
	needHost(t)
	t.Parallel()
	testEventsFloat32(t, "cuda-host-f32", 24, []ode.Method{ode.Tsit5, ode.Rodas5P}, false)
	t.Run("multi", func(t *testing.T) { testEventsFloat32(t, "cuda-multi-host2-f32", 24, []ode.Method{ode.Tsit5}, false) })
}

// TestHostEventsReuse checks on the host engine that a Gradient with
// events passed back to Grad equals a fresh call's bit for bit, its event
// marks (Mesh.Events), event counts (Solution.Events) and, after chunks,
// its steps on the host (Mesh.H), each of which the reused call must
// overwrite (they are set to −1 before it): after a longer mesh, a shorter one (the marks grow), fewer
// trajectories, and launches in chunks with reruns of a few trajectories
// (marks and steps written column by column); the reused call copies them
// back through small chunk buffers.
func TestHostEventsReuse(t *testing.T) {
	needHost(t)
	t.Parallel()
	var g ode.Gradient
	for k, c := range []struct {
		mk     func(int, ode.Method) engineCase
		rtol   float64
		reruns bool
		n      int
	}{
		{drivenBallCase, 1e-10, false, 40}, {ballCase, 1e-5, false, 40}, {drivenBallCase, 1e-5, false, 40},
		{ballCase, 1e-10, true, 40}, {drivenBallCase, 1e-10, false, 33}, {ballCase, 1e-5, true, 33},
		{drivenBallCase, 1e-10, false, 100}, {ballCase, 1e-5, true, 100}, {ballCase, 1e-5, false, 100},
	} {
		bc := c.mk(c.n, ode.Tsit5)
		set := bc.set
		set.RelTol, set.AbsTol = c.rtol, c.rtol*1e-2
		tun := Tuning{}
		if c.reruns {
			tun.firstRows = 9
			set.MemoryLimit = 24 << 10 // chunks of the balls (not of the driven balls' longer rows)
		}
		set.Engine = tuned(t, hostF64.name, tun)
		fresh, err := ode.NewSolver(bc.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		want, err := fresh.Grad(nil, &bc.prob, bc.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The reused call's copies of marks and steps back go through
		// chunk buffers of 256 bytes.
		tun.meshChunk = 256
		set.Engine = tuned(t, hostF64.name, tun)
		sv, err := ode.NewSolver(bc.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		if g.Mesh != nil {
			// Stale marks everywhere: each must be overwritten.
			for i := range g.Mesh.Events {
				g.Mesh.Events[i] = -1
			}
			for i := range g.Mesh.H { // on the host after chunks
				g.Mesh.H[i] = -1
			}
			for i := range g.Solution.Events {
				g.Solution.Events[i] = -1
			}
		}
		var tr Trace
		if _, err := sv.GradContext(WithTrace(t.Context(), &tr), &g, &bc.prob, bc.loss, nil); err != nil {
			t.Fatal(err)
		}
		hostMesh(t, want.Mesh)
		hostMesh(t, g.Mesh)
		gm, wm := g.Mesh, want.Mesh
		if slices.Max(want.Solution.Events) == 0 || len(wm.Events) != wm.Rows*wm.N {
			t.Fatalf("case %d: events %v, %d marks for %d steps: want events marked", k, want.Solution.Events, len(wm.Events), wm.Rows*wm.N)
		}
		if g.Loss != want.Loss || !slices.Equal(g.P, want.P) || !slices.Equal(g.Y0, want.Y0) ||
			!slices.Equal(g.Solution.Y, want.Solution.Y) || !slices.Equal(g.Solution.Events, want.Solution.Events) ||
			!slices.Equal(g.Solution.T, want.Solution.T) || gm.Rows != wm.Rows || !slices.Equal(gm.Len, wm.Len) ||
			!slices.Equal(gm.H, wm.H) || !slices.Equal(gm.Events, wm.Events) {
			t.Errorf("case %d: the reused result differs from a fresh one (marks equal %t, rows %d, want %d)",
				k, slices.Equal(gm.Events, wm.Events), gm.Rows, wm.Rows)
		}
		if s := tr.Stats(); c.reruns && (s.Launches < 2 || s.Reruns == 0) {
			t.Errorf("case %d: %d launches, %d reruns: want chunks and reruns", k, s.Launches, s.Reruns)
		}
	}
}

// TestHostEventsResident checks the event marks of a mesh kept on the
// device (ode.ResidentEvents) on the host engine: a gradient's record
// leaves them there with its steps (Mesh.Events nil) and copies back only
// its per-trajectory results (Trace.Download: the statuses, counts and
// flags, the event counts, the times, the final states, the loss terms
// and the gradients, N values each); they are the CPU's; a gradient on
// the mesh reads them in place (neither steps nor marks go up) and
// equals the gradient on its host copy bit for bit; a Gradient passed
// back records new marks into the same memory; Mesh.Host copies steps
// and marks; and records with reruns or in chunks bring them to the host
// with the steps.
func TestHostEventsResident(t *testing.T) {
	needHost(t)
	t.Parallel()
	const n = 64 // a multiple of 64: the arena's arrays need no padding
	c := ballCase(n, ode.Tsit5)
	c.set.RelTol, c.set.AbsTol = 1e-8, 1e-10
	cpu := c.solver(t, "cpu")
	want, err := cpu.Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	engine := tuned(t, hostF64.name, Tuning{NoInputReuse: true})
	sv := c.solver(t, engine)
	var tr Trace
	rec, err := sv.GradContext(WithTrace(t.Context(), &tr), nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := rec.Mesh
	if m.Resident == nil || m.H != nil || m.Events != nil {
		t.Fatalf("recorded mesh: Resident %v, len(H) %d, len(Events) %d; want steps and marks on the device", m.Resident != nil, len(m.H), len(m.Events))
	}
	d, np := int64(c.prob.Field.Dim), int64(c.prob.Field.Params)
	perTraj := 5*4 + 8 + 8*d + 8 + 8*d + 8*np // status, counts, flags, events; T; Y; loss; dY0; dP
	if got := tr.Stats().Download; got != n*perTraj {
		t.Errorf("the record copied back %d bytes, want its %d results of %d bytes (the marks, %d bytes, stay on the device)", got, n, perTraj, m.Rows*m.N*4)
	}
	compareMarks(t, m, want.Mesh)

	// A gradient on the mesh reads its steps and marks in place; on its
	// host copy they go up.
	steps := make([]float64, m.Rows*m.N)
	if err := m.Resident.CopyTo(steps); err != nil {
		t.Fatal(err)
	}
	marks := meshMarks(t, m)
	var tIn, tHost Trace
	in, err := sv.GradContext(WithTrace(t.Context(), &tIn), nil, &c.prob, c.loss, m)
	if err != nil {
		t.Fatal(err)
	}
	if m.Resident == nil || m.Events != nil {
		t.Error("the gradient on the resident mesh moved it to the host")
	}
	hm := *m
	hm.Resident, hm.H, hm.Events = nil, steps, marks
	onHost, err := sv.GradContext(WithTrace(t.Context(), &tHost), nil, &c.prob, c.loss, &hm)
	if err != nil {
		t.Fatal(err)
	}
	if up, want := tHost.Stats().Upload-tIn.Stats().Upload, int64(m.Rows*m.N)*(8+4); up != want {
		t.Errorf("the host copy of the mesh uploaded %d bytes more than the resident mesh, want its steps and marks, %d", up, want)
	}
	if in.Loss != onHost.Loss || !slices.Equal(in.P, onHost.P) || !slices.Equal(in.Y0, onHost.Y0) ||
		!slices.Equal(in.Solution.T, onHost.Solution.T) || !slices.Equal(in.Solution.Events, onHost.Solution.Events) {
		t.Error("the gradient on the resident mesh differs from the gradient on its host copy")
	}
	if !slices.Equal(in.Solution.Events, rec.Solution.Events) || !slices.Equal(in.Solution.T, rec.Solution.T) {
		t.Error("the gradient on the resident mesh: event counts or end times differ from its record's")
	}

	// Passed back with other restitutions (other event steps), the
	// record writes its steps and marks into the same memory.
	p2 := c.prob
	p2.P = slices.Clone(c.prob.P)
	for i := range p2.P {
		p2.P[i] *= 0.95
	}
	want2, err := cpu.Grad(nil, &p2, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	r0 := m.Resident
	if _, err := sv.Grad(rec, &p2, c.loss, nil); err != nil {
		t.Fatal(err)
	}
	if rec.Mesh.Resident != r0 || rec.Mesh.Events != nil {
		t.Error("a Gradient passed back: its mesh's device memory was reallocated, or its marks came to the host")
	}
	compareMarks(t, rec.Mesh, want2.Mesh)
	// Host copies both, and gives the memory back.
	dm := meshMarks(t, rec.Mesh)
	hostMesh(t, rec.Mesh)
	if !slices.Equal(rec.Mesh.Events, dm) || len(rec.Mesh.H) != rec.Mesh.Rows*n || !r0.Released() {
		t.Error("Mesh.Host: the marks on the host differ from the device's, or the steps are missing, or the memory was kept")
	}

	// Reruns (short first records) and chunks record their marks to the
	// host with the steps.
	for _, x := range []struct {
		name string
		tun  Tuning
		lim  int64
	}{{"reruns", Tuning{firstRows: 4}, 0}, {"chunks", Tuning{}, 200 << 10}} {
		set := c.set
		set.Engine, set.MemoryLimit = tuned(t, hostF64.name, x.tun), x.lim
		sv, err := ode.NewSolver(c.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		g, s := c.tracedGrad(t, sv)
		if g.Mesh.Resident != nil || g.Mesh.Events == nil || s.Reruns == 0 && s.Launches < 2 {
			t.Errorf("%s: resident %t, %d marks, %d reruns, %d launches: want reruns or chunks, and the mesh on the host", x.name, g.Mesh.Resident != nil, len(g.Mesh.Events), s.Reruns, s.Launches)
		}
		checkEventMarks(t, c, cpu, g, want)
	}
}

// denseAmplification returns A = max_c Σ_j Σ_i |R_ij| over the
// coefficients w_j[c] = h·Σ_i R_ij·k_i[c] of the plan's continuous
// extension (Plan.DenseStep: one Dot of constant weights per
// coefficient, read off the program), or 0 where a coefficient is no
// such Dot.
func denseAmplification(t testing.TB, pl *ode.Plan) float64 {
	t.Helper()
	p := pl.DenseStep
	if p == nil {
		return 0
	}
	d := pl.Dim
	sums := make([]float64, d)
	for m := d; m < len(p.Outputs); m++ {
		v := p.Values[p.Outputs[m].ID]
		dot := -1
		for _, a := range v.Args {
			if p.Values[a].Op == ops.OpDot {
				dot = int(a)
			}
		}
		if v.Op == ops.OpConst {
			continue
		}
		if v.Op != ops.OpMul {
			return 0
		}
		if dot < 0 {
			sums[(m-d)%d]++ // h·k_i: one stage
			continue
		}
		args := p.Values[dot].Args
		k := (len(args) - 1) / 2
		for _, w := range args[:k] {
			if p.Values[w].Op != ops.OpConst {
				return 0
			}
			sums[(m-d)%d] += math.Abs(p.Values[w].Aux)
		}
	}
	return slices.Max(sums)
}
