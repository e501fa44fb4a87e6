package cuda

import (
	"fmt"
	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// More event cases on the engine against the CPU (ode's event_cases_test
// checks them against closed forms): save times exactly at event times,
// two conditions of which one is terminal, a jump into another component,
// per-trajectory parameters and ensembles that are no multiple of a warp.

// timedDoseCase is y' = −k·y with a dose of 1 at t = td (an event on
// time), td per trajectory, three of five at a save time and one at T1;
// the loss is the sum of the saved states and the final one, whose
// gradient with respect to td runs through the saves read at the event
// times (θ = 0 of the step after each event, whose start moves with it)
// and the final state at an event at T1 (read at T1, which does not move).
// With stop, the event is terminal (no dose), at 1 (a save time), 1.5,
// 1.75 and 2, and the save at its time is read at that fixed time too.
func timedDoseCase(m ode.Method, stop bool) engineCase {
	f := ode.Field{Name: "decay", Dim: 1, Params: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0])}
	}}
	ev := ode.Event{Name: "dose", Direction: 1, G: func(tt tape.V, _, p []tape.V) tape.V { return tt.Sub(p[1]) },
		Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0].AddC(1)} }}
	tds, saveAt, name := []float64{0.3, 1, 1.5, 1.75, 2}, []float64{0.5, 1, 1.25, 1.5, 1.75}, "timed-dose-"
	if stop {
		ev.Apply, ev.Terminal, tds, saveAt, name = nil, true, tds[1:], saveAt[:2], "timed-stop-"
	}
	y0, p := make([]float64, len(tds)), make([]float64, 2*len(tds))
	for i, td := range tds {
		y0[i], p[2*i], p[2*i+1] = 1+0.1*float64(i), 0.7, td
	}
	return engineCase{
		name: name + m.Name(),
		prob: ode.Problem{Field: f, N: len(tds), Y0: y0, P: p, T1: 2, SaveAt: saveAt},
		set:  ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}},
		loss: odetest.EndPlusSaves(),
		tol:  1e-11,
	}
}

// pkDoseCase is a two-compartment pharmacokinetic model, gut a and
// central c: a' = −ka·a, c' = ka·a − ke·c, p = (ka, ke, D, Tend) per
// trajectory; event "dose" (c falls to 0.3) puts D into the gut (a jump
// of the other component), event "stop" (t reaches Tend) is terminal.
// n = 1 or 37 (no multiple of a warp) in TestHostEventCases; at n =
// 1001 one trajectory's event step (a remainder of 0.002 before the stop)
// differs by 2e-4 relative from the CPU's, the mesh points' drift (2e-6
// relative in the steps at RelTol 1e-10, from the controller's rounding)
// absorbed by a short step: 4e-7 absolute, past compareMesh's bound on
// a step (1e-4 relative plus 1e-8 of the span).
func pkDoseCase(n int, m ode.Method) engineCase {
	f := ode.Field{Name: "pk2", Dim: 2, Params: 4, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0]), p[0].Mul(y[0]).Sub(p[1].Mul(y[1]))}
	}}
	evs := []ode.Event{
		{Name: "dose", Direction: -1, G: func(_ tape.V, y, _ []tape.V) tape.V { return y[1].AddC(-0.3) },
			Apply: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{y[0].Add(p[2]), y[1]} }},
		{Name: "stop", Direction: 1, Terminal: true, G: func(tt tape.V, _, p []tape.V) tape.V { return tt.Sub(p[3]) }},
	}
	rng := rand.New(rand.NewPCG(11, 11))
	y0, p := make([]float64, 2*n), make([]float64, 4*n)
	for i := 0; i < n; i++ {
		y0[2*i+1] = 1 + rng.Float64()
		p[4*i], p[4*i+1], p[4*i+2], p[4*i+3] = 1+rng.Float64(), 0.2+0.3*rng.Float64(), 0.5+rng.Float64(), 8+4*rng.Float64()
	}
	return engineCase{
		name: fmt.Sprintf("pk-dose-%d-%s", n, m.Name()),
		prob: ode.Problem{Field: f, N: n, Y0: y0, P: p, T1: 15},
		set:  ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: evs},
		loss: ode.SumSquares(),
		tol:  1e-10,
	}
}

// twoDosesCase has events whose roots coincide for some trajectories of
// the ensemble: y' = −k·y with "dose1" of D1 at t1 and "dose2" of D2 at
// t2, p = (k, t1, t2, D1, D2) per trajectory, t1 = t2 for four of seven
// (one at a save time, one at T1): both fire at one time, the second a
// step of size 0 after the first's (ode's TestEventCoincidingDoses checks
// the closed form).
func twoDosesCase(m ode.Method) engineCase {
	f := ode.Field{Name: "decay2", Dim: 1, Params: 5, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0])}
	}}
	dose := func(name string, at, amount int) ode.Event {
		return ode.Event{Name: name, Direction: 1, G: func(tt tape.V, _, p []tape.V) tape.V { return tt.Sub(p[at]) },
			Apply: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{y[0].Add(p[amount])} }}
	}
	times := [][2]float64{{1, 1}, {0.7, 1.3}, {1.5, 1.5}, {1, 1.5}, {2, 2}, {0.3, 0.3}, {1.7, 0.4}}
	n := len(times)
	y0, p := make([]float64, n), make([]float64, 5*n)
	for i, tt := range times {
		y0[i] = 1 + 0.1*float64(i)
		copy(p[5*i:], []float64{0.7, tt[0], tt[1], 0.5 + 0.1*float64(i), 1.25 - 0.05*float64(i)})
	}
	return engineCase{
		name: "two-doses-" + m.Name(),
		prob: ode.Problem{Field: f, N: n, Y0: y0, P: p, T1: 2, SaveAt: []float64{0.5, 1, 1.5}},
		set:  ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{dose("dose1", 1, 3), dose("dose2", 2, 4)}},
		loss: odetest.EndPlusSaves(),
		tol:  1e-11,
	}
}

// counterBallCase has events on one condition: a ball's bounce (its
// height falling to 0, v → −e·v), a counter of its impact speed (c += v)
// and, with stop, a terminal event on it too, in the order names gives
// ("bounce", "counter", "stop"): all fire at the impact, the
// non-terminal ones in Settings.Events order, a terminal one last (ode's
// TestEventCoincidingBall checks the closed form). n balls from x0, v0,
// c0 per trajectory, e per trajectory, one bounce before T = 0.7.
func counterBallCase(n int, m ode.Method, names ...string) engineCase {
	const gr = 9.81
	f := ode.Field{Name: "ball3", Dim: 3, Params: 1, F: func(_ tape.V, y, _ []tape.V) []tape.V {
		return []tape.V{y[1], y[1].Const(-gr), y[1].Const(0)}
	}}
	height := func(_ tape.V, y, _ []tape.V) tape.V { return y[0] }
	all := map[string]ode.Event{
		"bounce": {Name: "bounce", Direction: -1, G: height,
			Apply: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{y[0], p[0].Neg().Mul(y[1]), y[2]} }},
		"counter": {Name: "counter", Direction: -1, G: height,
			Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0], y[1], y[2].Add(y[1])} }},
		"stop": {Name: "stop", Direction: -1, Terminal: true, G: height},
	}
	var evs []ode.Event
	for _, x := range names {
		evs = append(evs, all[x])
	}
	rng := rand.New(rand.NewPCG(25, 51))
	y0, p := make([]float64, 3*n), make([]float64, n)
	for i := 0; i < n; i++ {
		y0[3*i], y0[3*i+1], y0[3*i+2] = 0.8+0.4*rng.Float64(), -0.5+rng.Float64(), rng.Float64()
		p[i] = 0.6 + 0.3*rng.Float64()
	}
	return engineCase{
		name: fmt.Sprintf("counter-ball-%v-%d-%s", names, n, m.Name()),
		prob: ode.Problem{Field: f, N: n, Y0: y0, P: p, T1: 0.7},
		set:  ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: evs},
		loss: ode.Loss{Name: "sum", F: func(y, _, _ []tape.V) tape.V { return y[0].Add(y[1]).Add(y[2]) }},
		tol:  1e-11,
	}
}

// TestHostEventCoinciding runs events whose roots coincide on the host
// engine against the CPU (twoDosesCase, counterBallCase): the same
// events, event steps (the steps of size 0 of the coinciding ones
// included), states and gradients.
func TestHostEventCoinciding(t *testing.T) {
	needHost(t)
	t.Parallel()
	testEventCoinciding(t, "cuda-host", false)
	// A first record buffer of few rows: the steps of size 0 overflow it
	// as the event steps do, and the record runs again with more.
	for _, rows := range []int{2, 9} {
		c := twoDosesCase(ode.Tsit5)
		c.name += fmt.Sprintf("-rows%d", rows)
		t.Run(c.name, func(t *testing.T) {
			compareEngines(t, tuned(t, hostF64.name, Tuning{firstRows: rows}), c, eventOps)
		})
	}
}

// testEventCoinciding runs TestHostEventCoinciding's cases on engine (on
// a GPU, gpu set, to 1e-10 as testEventCases).
func testEventCoinciding(t *testing.T, engine string, gpu bool) {
	cases := []engineCase{twoDosesCase(ode.Tsit5), twoDosesCase(ode.Rodas5P),
		counterBallCase(5, ode.Tsit5, "bounce", "counter"), counterBallCase(37, ode.Vern7, "counter", "bounce"),
		counterBallCase(5, ode.Tsit5, "stop", "counter", "bounce"),
		refillCountCase(ode.Tsit5, "refill"), refillCountCase(ode.Rodas5P, "count")}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := eventOps
			if gpu {
				c.tol, o.knife, o.drift = max(c.tol, 1e-10), max(1, c.prob.N/20), true
			}
			compareEngines(t, engine, c, o)
			sol, err := c.solver(t, engine).Solve(&c.prob)
			if err != nil {
				t.Fatal(err)
			}
			want := len(c.set.Events)
			for i, got := range sol.Events {
				if got != want && c.prob.Field.Name != "decay2" || got != 2 && c.prob.Field.Name == "decay2" {
					t.Errorf("trajectory %d: %d events", i, got)
				}
			}
		})
	}
}

// refillCountCase is refillCase's refill with a counter on the same
// condition (y1 += 1), both Direction 0, in the order first gives:
// they fire together and the refill moves the condition off its root, so
// both start the next step from +0.5 (ode's TestEventCoincidingOffRoot
// checks the closed form); one refill each for k in [0.4, 0.65] to T1 = 2.
func refillCountCase(m ode.Method, first string) engineCase {
	f := ode.Field{Name: "refill-count", Dim: 2, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0]), y[1].Const(0)}
	}}
	level := func(_ tape.V, y, _ []tape.V) tape.V { return y[0].AddC(-0.5) }
	evs := []ode.Event{
		{Name: "refill", G: level, Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0].MulC(2), y[1]} }},
		{Name: "count", G: level, Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0], y[1].AddC(1)} }},
	}
	if first == "count" {
		evs[0], evs[1] = evs[1], evs[0]
	}
	ks := []float64{0.4, 0.5, 0.6, 0.65}
	y0 := make([]float64, 2*len(ks))
	for i := range ks {
		y0[2*i] = 1
	}
	return engineCase{
		name: "refill-count-" + first + "-" + m.Name(),
		prob: ode.Problem{Field: f, N: len(ks), Y0: y0, P: ks, T1: 2, SaveAt: []float64{0.5, 1.5}},
		set:  ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: evs},
		loss: ode.SumSquares(),
		tol:  1e-10,
	}
}

// refillCase is y' = −k·y refilled to twice the level whenever it falls
// to 0.5 (event "refill", Direction 0, its jump into the component its
// condition watches: the condition goes from 0 to +0.5 at the event),
// k per trajectory: ⌊k·T1/ln 2⌋ events each. The engine takes the
// condition after such a jump as it is (ode's offRoot); before, it
// fired again on the jump and ended the trajectory with TooManyEvents.
func refillCase(m ode.Method) engineCase {
	f := ode.Field{Name: "refill", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0])}
	}}
	ev := ode.Event{Name: "refill", G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].AddC(-0.5) },
		Apply: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0].MulC(2)} }}
	ks := []float64{0.3, 1, 1.7, 2.2, 3.1}
	return engineCase{
		name: "refill-" + m.Name(),
		prob: ode.Problem{Field: f, N: len(ks), Y0: []float64{1}, P: ks, T1: 2, SaveAt: []float64{0.5, 1.5}},
		set:  ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}},
		loss: ode.SumSquares(),
		tol:  1e-10,
	}
}

// TestHostEventCases runs the timed doses and the two-compartment doses
// on the host engine against the CPU, and the timed doses' gradient
// against the closed form y(τ) = y0·e^{−kτ} + [τ ≥ td]·e^{−k(τ−td)}
// (d/d td = k·e^{−k(τ−td)} on the branch after the dose, the one a save
// at the dose time reads).
func TestHostEventCases(t *testing.T) {
	needHost(t)
	t.Parallel()
	testEventCases(t, "cuda-host", false)
}

// testEventCases runs TestHostEventCases's cases on engine; on a GPU
// (gpu set) states and gradients are compared to 1e-10 (the device's exp
// and log, in the controller, round differently: see testEvents) with a
// trajectory or two allowed other step counts and the steps' drift
// logged.
func testEventCases(t *testing.T, engine string, gpu bool) {
	for _, c := range []engineCase{timedDoseCase(ode.Tsit5, false), timedDoseCase(ode.Rodas5P, false), timedDoseCase(ode.Vern7, true), pkDoseCase(1, ode.Tsit5), pkDoseCase(37, ode.Tsit5),
		refillCase(ode.Tsit5), refillCase(ode.Rodas5P)} {
		t.Run(c.name, func(t *testing.T) {
			o := eventOps
			if gpu {
				c.tol, o.knife, o.drift = max(c.tol, 1e-10), max(1, c.prob.N/20), true
			}
			compareEngines(t, engine, c, o)
			if c.prob.Field.Name != "decay" || c.set.Events[0].Terminal {
				return
			}
			g, err := c.solver(t, engine).Grad(nil, &c.prob, c.loss, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < c.prob.N; i++ {
				k, td := c.prob.P[2*i], c.prob.P[2*i+1]
				want := 0.0
				for _, tau := range append([]float64{c.prob.T1}, c.prob.SaveAt...) {
					if tau >= td {
						want += k * math.Exp(-k*(tau-td))
					}
				}
				if got := g.P[2*i+1]; math.Abs(got-want) > 1e-8*want {
					t.Errorf("td %v: ∂L/∂td = %.12g, closed form %.12g", td, got, want)
				}
			}
		})
	}
}

// TestHostDenseSolution checks SolveDense on the host engine (the
// engine's record, the dense steps replayed on the host) against the
// CPU's, for every method, with events and with Method Auto's switch:
// Evaluate at 201 times of each span (T0, the end, mesh points and
// between) within 1e-12 relative of the CPU's, the same Bytes, and, at a
// few times, the engine's own Solve with those save times.
func TestHostDenseSolution(t *testing.T) {
	needHost(t)
	t.Parallel()
	testDenseSolution(t, "cuda-host", 1e-12)
}

// testDenseSolution runs TestHostDenseSolution's cases on engine, its
// states compared to the CPU's to tol relative.
func testDenseSolution(t *testing.T, engine string, tol float64) {
	mixed, _ := autoMixed(6)
	cases := []engineCase{pkDoseCase(37, ode.Tsit5), timedDoseCase(ode.Rodas5P, false), ballCase(5, ode.Vern7), pkDoseCase(3, ode.Rosenbrock23),
		{name: "auto-mixed", prob: mixed, set: ode.Settings{Method: ode.Auto}}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.prob.SaveAt = nil
			cpu, dev := c.solver(t, "cpu"), c.solver(t, engine)
			want, err := cpu.SolveDense(&c.prob)
			if err != nil {
				t.Fatal(err)
			}
			got, err := dev.SolveDense(&c.prob)
			if err != nil {
				t.Fatal(err)
			}
			if got.Engine != engine || got.Bytes != want.Bytes {
				t.Errorf("engine %s, %d bytes; want %s, %d bytes (the CPU's)", got.Engine, got.Bytes, engine, want.Bytes)
			}
			d, np := c.prob.Field.Dim, c.prob.Field.Params
			for i := 0; i < c.prob.N; i++ {
				end := got.T[i]
				if math.Abs(end-want.T[i]) > tol*end {
					t.Fatalf("trajectory %d ends at %v, on the CPU at %v", i, end, want.T[i])
				}
				for k := 0; k <= 200; k++ {
					tt := end * float64(k) / 200
					a, err := got.Evaluate(nil, i, tt)
					if err != nil {
						t.Fatal(err)
					}
					b, err := want.Evaluate(nil, i, min(tt, want.T[i]))
					if err != nil {
						t.Fatal(err)
					}
					for x := range a {
						if math.Abs(a[x]-b[x]) > tol*math.Max(1, math.Abs(b[x])) {
							t.Errorf("trajectory %d: Evaluate(%v)[%d] = %v, CPU %v", i, tt, x, a[x], b[x])
						}
					}
				}
				p := c.prob
				p.N, p.Y0, p.SaveAt = 1, c.prob.Y0[i*d:(i+1)*d], []float64{0, end / 3, end / 2, end}
				p.P = c.prob.P[i*np : (i+1)*np]
				sol, err := dev.Solve(&p)
				if err != nil {
					t.Fatal(err)
				}
				for k, tt := range p.SaveAt {
					a, err := got.Evaluate(nil, i, tt)
					if err != nil {
						t.Fatal(err)
					}
					for x := range a {
						if math.Abs(a[x]-sol.Ys[k*d+x]) > tol*math.Max(1, math.Abs(a[x])) {
							t.Errorf("trajectory %d: Evaluate(%v)[%d] = %v, the engine's Solve saves %v", i, tt, x, a[x], sol.Ys[k*d+x])
						}
					}
				}
			}
			if _, err := got.Evaluate(nil, 0, math.Nextafter(got.T[0], math.Inf(1))); err == nil {
				t.Errorf("Evaluate past the end: no error")
			}
		})
	}
}
