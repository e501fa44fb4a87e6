package ode_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// savedHeights is the loss Σ_k x(τ_k): the sum of the first component at
// every save time.
func savedHeights() ode.Loss {
	return ode.Loss{Name: "heights", F: func(_, ys, _ []tape.V) tape.V {
		s := ys[0]
		for k := 2; k < len(ys); k += 2 {
			s = s.Add(ys[k])
		}
		return s
	}}
}

// ballDrops returns n balls dropped at rest from heights in [0.8, 1.2]
// with restitution in [0.65, 0.9].
func ballDrops(n int, seed uint64) (y0, e []float64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	y0, e = make([]float64, 2*n), make([]float64, n)
	for i := range e {
		y0[2*i] = 0.8 + 0.4*rng.Float64()
		e[i] = 0.65 + 0.25*rng.Float64()
	}
	return y0, e
}

// TestEventSaveAtBall checks a bouncing ball's heights at many save times
// (some inside event steps, between bounces and across several of them)
// and the gradient of their sum with respect to the restitution
// coefficient against the closed form, and the gradient against central
// differences of re-solves.
func TestEventSaveAtBall(t *testing.T) {
	t.Parallel()
	f, ev := ball()
	const n, T, K = 12, 1.6, 41
	y0, e := ballDrops(n, 4)
	saveAt := make([]float64, K)
	for k := range saveAt {
		saveAt[k] = T * float64(k) / (K - 1)
	}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P} {
		t.Run(m.Name(), func(t *testing.T) {
			sv, err := ode.NewSolver(f, &ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}})
			if err != nil {
				t.Fatal(err)
			}
			p := ode.Problem{Field: f, N: n, Y0: y0, P: e, T1: T, SaveAt: saveAt}
			sol, err := sv.Solve(&p)
			if err != nil {
				t.Fatal(err)
			}
			g, err := sv.Grad(nil, &p, savedHeights(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var worstX, worstG float64
			for i := 0; i < n; i++ {
				want, dwant := 0.0, 0.0
				for k, tau := range saveAt {
					x, dx, _ := ballClosedForm(y0[2*i], e[i], tau)
					want, dwant = want+x, dwant+dx
					got := sol.Ys[(i*K+k)*2]
					if got != g.Solution.Ys[(i*K+k)*2] {
						t.Errorf("trajectory %d, τ = %v: Solve saves %v, Grad %v", i, tau, got, g.Solution.Ys[(i*K+k)*2])
					}
					worstX = max(worstX, math.Abs(got-x))
					if math.Abs(got-x) > 1e-8 {
						t.Errorf("trajectory %d: x(%v) = %.12g, closed form %.12g", i, tau, got, x)
					}
				}
				rel := math.Abs(g.P[i]-dwant) / math.Max(1, math.Abs(dwant))
				worstG = max(worstG, rel)
				if rel > 1e-6 {
					t.Errorf("trajectory %d (%d bounces): d Σx(τ)/de = %.12g, closed form %.12g", i, g.Solution.Events[i], g.P[i], dwant)
				}
			}
			t.Logf("x(τ): max abs error %.2g; d Σx(τ)/de: max rel error %.2g against the closed form", worstX, worstG)
			// Central differences of re-solves.
			const h = 1e-6
			pp, pm := p, p
			pp.P, pm.P = append([]float64(nil), e...), append([]float64(nil), e...)
			for i := range e {
				pp.P[i] += h
				pm.P[i] -= h
			}
			sp, err := sv.Solve(&pp)
			if err != nil {
				t.Fatal(err)
			}
			sm, err := sv.Solve(&pm)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				fd := 0.0
				for k := 0; k < K; k++ {
					fd += (sp.Ys[(i*K+k)*2] - sm.Ys[(i*K+k)*2]) / (2 * h)
				}
				if math.Abs(g.P[i]-fd) > 1e-5*math.Max(1, math.Abs(fd)) {
					t.Errorf("trajectory %d: d Σx(τ)/de = %.10g, central difference %.10g", i, g.P[i], fd)
				}
			}
		})
	}
}

// drivenBall is a ball driven by a periodic force bouncing on a moving
// floor: field and condition depend on time (see TestEventNonAutonomous).
func drivenBall() (ode.Field, ode.Event) {
	f := ode.Field{Name: "driven-ball", Dim: 2, Params: 2, F: func(tt tape.V, y, p []tape.V) []tape.V {
		return []tape.V{y[1], p[1].Mul(tt.MulC(2).Cos()).Add(y[1].Const(-gravity))}
	}}
	ev := ode.Event{Name: "moving floor", Direction: -1,
		G:     func(tt tape.V, y, _ []tape.V) tape.V { return y[0].Sub(tt.MulC(3).Sin().MulC(0.05)) },
		Apply: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{y[0], p[0].Neg().Mul(y[1])} }}
	return f, ev
}

// TestEventSaveAtGrad checks the gradient of a loss of saved states and
// the final state, through events whose times move the steps after them
// (a non-autonomous field and condition), against central differences of
// re-solves, with respect to the initial state and both parameters.
func TestEventSaveAtGrad(t *testing.T) {
	t.Parallel()
	f, ev := drivenBall()
	const n = 6
	rng := rand.New(rand.NewPCG(5, 5))
	y0, prm := make([]float64, 2*n), make([]float64, 2*n)
	for i := 0; i < n; i++ {
		y0[2*i], y0[2*i+1] = 0.8+0.4*rng.Float64(), 0.5*rng.Float64()
		prm[2*i], prm[2*i+1] = 0.7+0.2*rng.Float64(), 1+rng.Float64()
	}
	saveAt := []float64{0, 0.13, 0.4, 0.55, 0.71, 0.9, 1.05, 1.3, 1.5}
	K := len(saveAt)
	loss := ode.Loss{Name: "saved", F: func(y, ys, _ []tape.V) tape.V {
		s := y[0].Mul(y[1])
		for k := 0; k < len(ys); k += 2 {
			s = s.Add(ys[k].Square()).Add(ys[k+1].MulC(0.3 * float64(k+1)))
		}
		return s
	}}
	per := func(sol *ode.Solution) []float64 {
		l := make([]float64, n)
		for i := range l {
			l[i] = sol.Y[2*i] * sol.Y[2*i+1]
			for k := 0; k < K; k++ {
				x, v := sol.Ys[(i*K+k)*2], sol.Ys[(i*K+k)*2+1]
				l[i] += x*x + v*0.3*float64(2*k+1)
			}
		}
		return l
	}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P} {
		t.Run(m.Name(), func(t *testing.T) {
			sv, err := ode.NewSolver(f, &ode.Settings{Method: m, RelTol: 1e-11, AbsTol: 1e-13, Events: []ode.Event{ev}})
			if err != nil {
				t.Fatal(err)
			}
			p := ode.Problem{Field: f, N: n, Y0: y0, P: prm, T1: 1.5, SaveAt: saveAt}
			g, err := sv.Grad(nil, &p, loss, nil)
			if err != nil {
				t.Fatal(err)
			}
			if l := per(g.Solution); math.Abs(sum(l)-g.Loss) > 1e-12*math.Max(1, math.Abs(g.Loss)) {
				t.Fatalf("loss %v, want %v from the saved states", g.Loss, sum(l))
			}
			solve := func(q ode.Problem) []float64 {
				sol, err := sv.Solve(&q)
				if err != nil {
					t.Fatal(err)
				}
				return per(sol)
			}
			checkEventFD(t, p, g, solve)
		})
	}
}

func sum(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s
}

// TestEventGivenMesh checks Replay, Loss and Grad on a mesh recorded with
// events (bouncing balls with save times, a terminal threshold): the
// replay reproduces the record's final and saved states bit for bit, and
// Loss and Grad on the mesh equal those of a fresh record bit for bit.
func TestEventGivenMesh(t *testing.T) {
	t.Parallel()
	f, bounce := ball()
	y0, e := ballDrops(10, 6)
	saveAt := []float64{0.1, 0.45, 0.8, 1.2, 1.55}
	pk := ode.Field{Name: "pk", Dim: 2, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0]), y[0].Const(1)}
	}}
	threshold := ode.Event{Name: "threshold", Direction: -1, Terminal: true,
		G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].Sub(y[0].Const(0.25)) }}
	ky0, k := make([]float64, 2*8), make([]float64, 8)
	for i := range k {
		ky0[2*i], k[i] = 1+0.1*float64(i), 0.3+0.1*float64(i)
	}
	cases := []struct {
		name string
		f    ode.Field
		ev   ode.Event
		p    ode.Problem
		loss ode.Loss
	}{
		{"ball", f, bounce, ode.Problem{Field: f, N: 10, Y0: y0, P: e, T1: 1.6}, ode.SumSquares()},
		{"ball with saves", f, bounce, ode.Problem{Field: f, N: 10, Y0: y0, P: e, T1: 1.6, SaveAt: saveAt}, savedHeights()},
		{"terminal", pk, threshold, ode.Problem{Field: pk, N: 8, Y0: ky0, P: k, T1: 100}, ode.Component(1)},
		{"terminal with saves", pk, threshold, ode.Problem{Field: pk, N: 8, Y0: ky0, P: k, T1: 100, SaveAt: []float64{0.5, 1}}, savedHeights()},
	}
	for _, c := range cases {
		for _, m := range []ode.Method{ode.Tsit5, ode.Rodas5P} {
			t.Run(c.name+"/"+m.Name(), func(t *testing.T) {
				sv, err := ode.NewSolver(c.f, &ode.Settings{Method: m, RelTol: 1e-9, AbsTol: 1e-12, Events: []ode.Event{c.ev}})
				if err != nil {
					t.Fatal(err)
				}
				p := c.p
				g0, err := sv.Grad(nil, &p, c.loss, nil)
				if err != nil {
					t.Fatal(err)
				}
				mesh := g0.Mesh
				marks := 0
				for _, x := range mesh.Events {
					if x != 0 {
						marks++
					}
				}
				if marks != sum32(g0.Solution.Events) || marks == 0 {
					t.Fatalf("mesh marks %d event steps, the solution counts %d", marks, sum32(g0.Solution.Events))
				}
				rep, err := sv.Replay(&p, mesh)
				if err != nil {
					t.Fatal(err)
				}
				sameBits(t, "replay: final states", rep.Y, g0.Solution.Y)
				sameBits(t, "replay: saved states", rep.Ys, g0.Solution.Ys)
				sameBits(t, "replay: end times", rep.T, g0.Solution.T)
				l, _, err := sv.Loss(&p, c.loss, mesh)
				if err != nil {
					t.Fatal(err)
				}
				if l != g0.Loss {
					t.Errorf("Loss on the mesh %v, record's %v", l, g0.Loss)
				}
				g1, err := sv.Grad(nil, &p, c.loss, mesh)
				if err != nil {
					t.Fatal(err)
				}
				if g1.Loss != g0.Loss {
					t.Errorf("Grad on the mesh: loss %v, record's %v", g1.Loss, g0.Loss)
				}
				sameBits(t, "Grad on the mesh: ∂L/∂y0", g1.Y0, g0.Y0)
				sameBits(t, "Grad on the mesh: ∂L/∂p", g1.P, g0.P)
				sameBits(t, "Grad on the mesh: end times", g1.Solution.T, g0.Solution.T)
				for i := range g1.Solution.Events {
					if g1.Solution.Events[i] != g0.Solution.Events[i] {
						t.Fatalf("trajectory %d: %d events on the mesh, %d recorded", i, g1.Solution.Events[i], g0.Solution.Events[i])
					}
				}
			})
		}
	}
}

func sum32(x []int) int {
	s := 0
	for _, v := range x {
		s += v
	}
	return s
}

// sameBits fails unless got and want are equal bit for bit (NaN equal to
// NaN).
func sameBits(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("%s: [%d] = %v, want %v bit for bit", what, i, got[i], want[i])
		}
	}
}

// TestEventSaveAtBadInput checks the edges of save times with events and
// of meshes with events: a save time exactly at an event (the state after
// Apply), save times after a terminal event (NaN rows from Solve, an
// error naming the trajectory from Grad and Loss), and a mesh recorded
// without events, with other events, or given to a problem without them.
func TestEventSaveAtBadInput(t *testing.T) {
	t.Parallel()
	f, bounce := ball()
	floor := ode.Event{Name: "floor", Direction: -1, Terminal: true, G: bounce.G}
	y0, e := []float64{1, 0}, []float64{0.8}
	solver := func(evs ...ode.Event) *ode.Solver {
		sv, err := ode.NewSolver(f, &ode.Settings{RelTol: 1e-10, AbsTol: 1e-12, Events: evs})
		if err != nil {
			t.Fatal(err)
		}
		return sv
	}
	// The first bounce's time, from a terminal event: the non-terminal
	// solve takes the same steps to it, bit for bit.
	term := solver(floor)
	sol, err := term.Solve(&ode.Problem{Field: f, N: 1, Y0: y0, P: e, T1: 2})
	if err != nil {
		t.Fatal(err)
	}
	ts := sol.T[0]
	if want := math.Sqrt(2 / gravity); math.Abs(ts-want) > 1e-9 {
		t.Fatalf("first bounce at %v, want %v", ts, want)
	}
	vIn := sol.Y[1] // the velocity at the floor, before the bounce
	sv := solver(bounce)
	at, err := sv.Solve(&ode.Problem{Field: f, N: 1, Y0: y0, P: e, T1: 1, SaveAt: []float64{ts}})
	if err != nil {
		t.Fatal(err)
	}
	if x, v := at.Ys[0], at.Ys[1]; v != -e[0]*vIn || math.Abs(x) > 1e-12 {
		t.Errorf("save at the event: (x, v) = (%v, %v), want the state after Apply (%v, %v)", x, v, 0, -e[0]*vIn)
	}

	// Past a terminal event: NaN rows from Solve, an error from Grad.
	p := ode.Problem{Field: f, N: 2, Y0: []float64{1, 0, 0.05, 0}, P: []float64{0.8, 0.8}, T1: 1, SaveAt: []float64{0.05, ts, 0.9}}
	past, err := term.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]bool{{false, false, true}, {false, true, true}} { // NaN rows
		if past.Status[i] != ode.OK {
			t.Errorf("trajectory %d: status %v, want OK", i, past.Status[i])
		}
		for k, nan := range want {
			if got := math.IsNaN(past.Ys[(i*3+k)*2]); got != nan {
				t.Errorf("trajectory %d (event at %v): save at %v: NaN %t, want %t", i, past.T[i], p.SaveAt[k], got, nan)
			}
		}
	}
	if past.Ys[2] != past.Y[0] || past.Ys[3] != past.Y[1] {
		t.Errorf("save exactly at the terminal event %v, want the final state %v", past.Ys[2:4], past.Y[:2])
	}
	if _, err := term.Grad(nil, &p, savedHeights(), nil); err == nil || !strings.Contains(err.Error(), "after its terminal event") {
		t.Errorf("Grad with saves past a terminal event: error %v, want one saying after its terminal event", err)
	}
	if _, _, err := term.Loss(&p, savedHeights(), nil); err == nil || !strings.Contains(err.Error(), "trajectory 0") {
		t.Errorf("Loss with saves past a terminal event: error %v, want one naming trajectory 0", err)
	}

	// Meshes from elsewhere.
	q := ode.Problem{Field: f, N: 1, Y0: y0, P: e, T1: 1}
	plain, err := ode.NewSolver(f, &ode.Settings{RelTol: 1e-10, AbsTol: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	noEvents, _, err := plain.Record(&q)
	if err != nil {
		t.Fatal(err)
	}
	withEvents, _, err := sv.Record(&q)
	if err != nil {
		t.Fatal(err)
	}
	other := solver(ode.Event{Name: "floor", Direction: 0, G: bounce.G, Apply: bounce.Apply})
	cases := []struct {
		name string
		sv   *ode.Solver
		m    *ode.Mesh
		want string
	}{
		{"mesh without events", sv, noEvents, "recorded without events"},
		{"mesh with other events", other, withEvents, "other events"},
		{"mesh with events, solver without", plain, withEvents, "solver has none"},
	}
	for _, c := range cases {
		if _, err := c.sv.Grad(nil, &q, ode.Component(0), c.m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Grad: error %v, want one containing %q", c.name, err, c.want)
		}
		if _, err := c.sv.Replay(&q, c.m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Replay: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	// A mesh whose marks were dropped.
	bad := *withEvents
	bad.Events = nil
	if _, err := sv.Grad(nil, &q, ode.Component(0), &bad); err == nil || !strings.Contains(err.Error(), "event marks") {
		t.Errorf("mesh without its marks: error %v, want one about event marks", err)
	}
}

// TestEventSaveAtChunks checks that save times and meshes with events
// give the same bits for any worker count and chunk size, and when a
// gradient reuses its destination: 150 balls in one chunk or in chunks
// of 32 on two workers, the mesh of one replayed by the other.
func TestEventSaveAtChunks(t *testing.T) {
	t.Parallel()
	f, bounce := ball()
	const n = 150
	y0, e := ballDrops(n, 7)
	p := ode.Problem{Field: f, N: n, Y0: y0, P: e, T1: 1.6, SaveAt: []float64{0, 0.3, 0.9, 1.1, 1.6}}
	var gs [2]*ode.Gradient
	var svs [2]*ode.Solver
	for k, x := range []tape.ExecSettings{{Workers: 1, BlockSize: n}, {Workers: 2, BlockSize: 32}} {
		sv, err := ode.NewSolver(f, &ode.Settings{RelTol: 1e-9, AbsTol: 1e-12, Events: []ode.Event{bounce}, Exec: x})
		if err != nil {
			t.Fatal(err)
		}
		svs[k] = sv
		if gs[k], err = sv.Grad(nil, &p, savedHeights(), nil); err != nil {
			t.Fatal(err)
		}
	}
	sameBits(t, "saved states", gs[1].Solution.Ys, gs[0].Solution.Ys)
	sameBits(t, "∂L/∂p", gs[1].P, gs[0].P)
	sameBits(t, "∂L/∂y0", gs[1].Y0, gs[0].Y0)
	// The one's mesh on the other, into a reused destination.
	mesh := gs[0].Mesh
	g, err := svs[1].Grad(nil, &p, savedHeights(), mesh)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if g, err = svs[1].Grad(g, &p, savedHeights(), mesh); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "mesh: ∂L/∂p", g.P, gs[0].P)
		sameBits(t, "mesh: saved states", g.Solution.Ys, gs[0].Solution.Ys)
	}
	g2, err := svs[0].Grad(gs[0], &p, savedHeights(), nil) // a record into the reused result
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, "reused record: ∂L/∂p", g2.P, gs[1].P)
}

// TestEventGradPartial checks GradPartial with events and save times: a
// ball coming to rest (TooManyEvents) is left out, the others' gradients
// are Grad's on them alone, and GradPartial on the mesh it returned (its
// event marks expanded to the whole ensemble) gives the same bits.
func TestEventGradPartial(t *testing.T) {
	t.Parallel()
	f, bounce := ball()
	y0 := []float64{1, 0, 0.9, 0, 1.1, 0}
	e := []float64{0.85, 0.2, 0.8}
	saveAt := []float64{0.2, 0.7, 1.2}
	sv, err := ode.NewSolver(f, &ode.Settings{RelTol: 1e-9, AbsTol: 1e-12, Events: []ode.Event{bounce}, MaxEvents: 12})
	if err != nil {
		t.Fatal(err)
	}
	p := ode.Problem{Field: f, N: 3, Y0: y0, P: e, T1: 1.5, SaveAt: saveAt}
	g, fails, err := sv.GradPartial(context.Background(), nil, &p, savedHeights(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(fails) != 1 || fails[0].Index != 1 || fails[0].Status != ode.TooManyEvents {
		t.Fatalf("failures %v, want trajectory 1 with TooManyEvents", fails)
	}
	ok := ode.Problem{Field: f, N: 2, Y0: []float64{1, 0, 1.1, 0}, P: []float64{0.85, 0.8}, T1: 1.5, SaveAt: saveAt}
	want, err := sv.Grad(nil, &ok, savedHeights(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, "∂L/∂p", []float64{g.P[0], g.P[2]}, want.P)
	m := g.Mesh
	for i := 0; i < 3; i += 2 {
		marks := 0
		for s := 0; s < m.Len[i]; s++ {
			if m.Events[s*m.N+i] != 0 {
				marks++
			}
		}
		if marks != want.Solution.Events[i/2] || marks == 0 {
			t.Errorf("trajectory %d: the returned mesh marks %d event steps, want %d", i, marks, want.Solution.Events[i/2])
		}
	}
	g2, _, err := sv.GradPartial(context.Background(), nil, &p, savedHeights(), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, "on the returned mesh: ∂L/∂p", g2.P, g.P)
}
