package odetest

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// AutoContinue checks Method Auto on engine, which does not switch in
// place but continues a trajectory whose stiffness test fired with
// Rodas5P from where it fired (ode.StartTimesExecutor), against the CPU
// engine's Auto, which switches in place, on problem p (with save times)
// and loss l: Solve, Record, Grad (with the record and on the CPU's
// mesh) and Loss take the same steps (the same mesh lengths, switch
// points and counts) and agree within tol relative (states, loss,
// gradients, the steps' sizes); at least one trajectory switches within
// its steps and one never does (Switch = Len); a mean loss and a Grad
// with Gradient.Omit agree as well; and Grad on the engine
// agrees with central differences of its Loss on the mesh it recorded
// (the replay's own derivative), for a parameter of each kind of
// trajectory, within 1e-6 relative.
func AutoContinue(t *testing.T, engine string, p ode.Problem, l ode.Loss, tol, stepTol float64) {
	t.Helper()
	newSolver := func(e string) *ode.Solver {
		sv, err := ode.NewSolver(p.Field, &ode.Settings{Method: ode.Auto, Engine: e})
		if err != nil {
			t.Fatal(err)
		}
		return sv
	}
	cpu, sv := newSolver("cpu"), newSolver(engine)

	// Solve.
	sc, err := cpu.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	se, err := sv.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	switched, calm := -1, -1
	for i := 0; i < p.N; i++ {
		if sc.Switch[i] > 0 && sc.Switch[i] < sc.Stats.Accepted[i] && switched < 0 {
			switched = i
		}
		if sc.Switch[i] == sc.Stats.Accepted[i] && calm < 0 {
			calm = i
		}
	}
	if switched < 0 || calm < 0 {
		t.Fatalf("the CPU engine's Auto: switches %v of accepted %v; want a trajectory that switches within its steps and one that does not", sc.Switch, sc.Stats.Accepted)
	}
	sameCounts(t, "Solve", se, sc)
	Close(t, "Solve: Y", se.Y, sc.Y, tol)
	Close(t, "Solve: Ys", se.Ys, sc.Ys, tol)

	// Record.
	mc, _, err := cpu.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	me, re, err := sv.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	sameCounts(t, "Record", re, sc)
	sameMesh(t, "Record", me, mc, stepTol)
	Close(t, "Record: Y", re.Y, sc.Y, tol)

	// Grad with the record, and on the CPU's mesh.
	gc, err := cpu.Grad(nil, &p, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		m    *ode.Mesh
	}{{"Grad", nil}, {"Grad on the CPU's mesh", mc}} {
		g, err := sv.Grad(nil, &p, l, c.m)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		sameCounts(t, c.what, g.Solution, sc)
		if c.m == nil {
			sameMesh(t, c.what, g.Mesh, mc, stepTol)
		}
		Close(t, c.what+": loss", []float64{g.Loss}, []float64{gc.Loss}, tol)
		Close(t, c.what+": dL/dY0", g.Y0, gc.Y0, tol)
		Close(t, c.what+": dL/dP", g.P, gc.P, tol)
		Close(t, c.what+": dL/dShared", g.Shared, gc.Shared, tol)
		Close(t, c.what+": Ys", g.Solution.Ys, gc.Solution.Ys, tol)
	}

	// A mean loss, and a Grad that leaves the states and the counts out
	// (Gradient.Omit: the switched trajectories' states at their switch
	// then come from a replay of their Tsit5 steps).
	lm := l
	lm.Mean = true
	gcm, err := cpu.Grad(nil, &p, lm, nil)
	if err != nil {
		t.Fatal(err)
	}
	gm, err := sv.Grad(nil, &p, lm, nil)
	if err != nil {
		t.Fatal(err)
	}
	Close(t, "mean: loss", []float64{gm.Loss}, []float64{gcm.Loss}, tol)
	Close(t, "mean: dL/dP", gm.P, gcm.P, tol)
	Close(t, "mean: dL/dShared", gm.Shared, gcm.Shared, tol)
	gom, err := sv.Grad(&ode.Gradient{Omit: ode.OmitStates | ode.OmitStats}, &p, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	Close(t, "omit: loss", []float64{gom.Loss}, []float64{gc.Loss}, tol)
	Close(t, "omit: dL/dY0", gom.Y0, gc.Y0, tol)
	Close(t, "omit: dL/dP", gom.P, gc.P, tol)
	Close(t, "omit: dL/dShared", gom.Shared, gc.Shared, tol)

	// Central differences of the loss on the engine's mesh.
	g, err := sv.Grad(nil, &p, l, me)
	if err != nil {
		t.Fatal(err)
	}
	np := p.Field.Params
	for _, i := range []int{switched, calm} {
		x := i * np
		h := 1e-6 * math.Max(1, math.Abs(p.P[x]))
		at := func(v float64) float64 {
			q := p
			q.P = append([]float64(nil), p.P...)
			q.P[x] = v
			f, _, err := sv.Loss(&q, l, me)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		fd := (at(p.P[x]+h) - at(p.P[x]-h)) / (2 * h)
		if d := math.Abs(g.P[x] - fd); d > 1e-6*math.Max(math.Abs(fd), 1e-3) {
			t.Errorf("trajectory %d (switch %d of %d steps): dL/dP = %v, central difference %v", i, sc.Switch[i], sc.Stats.Accepted[i], g.P[x], fd)
		}
	}
}

// Close fails t unless got and want have the same length and every
// |got_k − want_k| ≤ tol·max(|want_k|, max_k |want_k|·1e-3): within tol
// relative, components far below the array's largest held to that
// largest's scale.
func Close(t testing.TB, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var big float64
	for _, w := range want {
		big = math.Max(big, math.Abs(w))
	}
	for k := range got {
		if math.IsNaN(got[k]) && math.IsNaN(want[k]) {
			continue
		}
		if d := math.Abs(got[k] - want[k]); !(d <= tol*math.Max(math.Abs(want[k]), 1e-3*big)) {
			t.Fatalf("%s: value %d: %v, want %v (relative difference %.3g)", what, k, got[k], want[k], d/math.Abs(want[k]))
		}
	}
}

// sameCounts fails t unless sol's statuses, switch points and accepted
// and rejected steps are want's.
func sameCounts(t testing.TB, what string, sol, want *ode.Solution) {
	t.Helper()
	for i := range want.Status {
		if sol.Status[i] != ode.OK || sol.Switch == nil || sol.Switch[i] != want.Switch[i] ||
			sol.Stats.Accepted[i] != want.Stats.Accepted[i] || sol.Stats.Rejected != nil && sol.Stats.Rejected[i] != want.Stats.Rejected[i] {
			t.Fatalf("%s: trajectory %d: status %v, switch %v, accepted %d; want OK, switch %d, accepted %d, rejected %d",
				what, i, sol.Status[i], sol.Switch, sol.Stats.Accepted[i], want.Switch[i], want.Stats.Accepted[i], want.Stats.Rejected[i])
		}
	}
}

// sameMesh fails t unless m has want's lengths and switch points and its
// steps within tol relative.
func sameMesh(t testing.TB, what string, m, want *ode.Mesh, tol float64) {
	t.Helper()
	if err := m.Host(); err != nil {
		t.Fatal(err)
	}
	if err := want.Host(); err != nil {
		t.Fatal(err)
	}
	if m.Method != ode.Auto || m.Switch == nil || m.N != want.N {
		t.Fatalf("%s: mesh method %v, switch %v, N %d; want Auto with Switch, N %d", what, m.Method, m.Switch, m.N, want.N)
	}
	for i := 0; i < want.N; i++ {
		if m.Len[i] != want.Len[i] || m.Switch[i] != want.Switch[i] {
			t.Fatalf("%s: trajectory %d: %d steps, switch at %d; want %d, %d", what, i, m.Len[i], m.Switch[i], want.Len[i], want.Switch[i])
		}
		for s := 0; s < want.Len[i]; s++ {
			a, b := m.H[s*m.N+i], want.H[s*want.N+i]
			if math.Abs(a-b) > tol*math.Abs(b) {
				t.Fatalf("%s: trajectory %d, step %d: %v, want %v", what, i, s, a, b)
			}
		}
	}
}
