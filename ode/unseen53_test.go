package ode_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Session 53 (H4): defects a new user met on problems the package had not
// seen.

// TestGradPartialCauseIndex checks that where GradPartial runs again on
// the trajectories that did not fail, a non-finite loss term found in
// that run is reported with the ensemble's index in the cause too (the
// *tape.NonFiniteError it wraps, and so the message), not the index of
// the re-run subset. The field is y' = a·y², whose solution y0/(1 −
// a·y0·t) blows up at t = 1/(a·y0): trajectory 1 fails (its span passes
// the blow-up) and trajectory 3 ends negative, where the loss log y is
// NaN. Before session 53 its error read "trajectory 3 ... tape: program
// loss.grad: trajectory 2: ...", the index of trajectory 3 in the re-run.
func TestGradPartialCauseIndex(t *testing.T) {
	f := ode.Field{Name: "riccati", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0].Square())}
	}}
	loss := ode.Loss{F: func(y, _, _ []tape.V) tape.V { return y[0].Log() }}
	for _, m := range []ode.Method{ode.Tsit5, ode.Rodas5P} {
		sv, err := ode.NewSolver(f, &ode.Settings{Method: m, RelTol: 1e-8})
		if err != nil {
			t.Fatal(err)
		}
		prob := ode.Problem{Field: f, Y0: []float64{1, 2, 0.5, -1}, P: []float64{1, 1, 1, 1}, T1s: []float64{0.5, 0.7, 1.5, 3}}
		g, fails, err := sv.GradPartial(context.Background(), nil, &prob, loss, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", m.Name(), err)
		}
		if len(fails) != 2 || fails[0].Index != 1 || fails[1].Index != 3 {
			t.Fatalf("%s: failures %v, want trajectories 1 (blow-up) and 3 (log of a negative)", m.Name(), fails)
		}
		var nf *tape.NonFiniteError
		if !errors.As(fails[1].Cause, &nf) || nf.Trajectory != 3 {
			t.Errorf("%s: trajectory 3's cause %v: want a *tape.NonFiniteError of trajectory 3", m.Name(), fails[1].Cause)
		}
		if msg := fails[1].Error(); strings.Contains(msg, "trajectory 2") {
			t.Errorf("%s: trajectory 3's error names trajectory 2: %s", m.Name(), msg)
		}
		if st := g.Solution.Status; st[0] != ode.OK || st[2] != ode.OK || st[3] != ode.NonFinite {
			t.Errorf("%s: statuses %v", m.Name(), st)
		}
	}
}

// TestGradPartialEventsReported checks that GradPartial and Loss report
// what Grad reports of a problem with events: Solution.T the time of a
// terminal event where one fired (not T1) and Solution.Events the count
// of each trajectory (not nil), whether it leaves trajectories out or
// not; a left-out trajectory counts 0 events, as its Len is 0. A falling
// ball (d²x/dt² = −1, from x = 1) bounces (v ← −e·v where x falls through
// 0, e per trajectory) and stops at t = p[1] (a terminal event of time).
// Before session 53 GradPartial and Loss gave T = T1 for the stopped
// ones, and GradPartial Events nil where it left trajectories out.
func TestGradPartialEventsReported(t *testing.T) {
	f := ode.Field{Name: "ball", Dim: 2, Params: 2, F: func(_ tape.V, y, _ []tape.V) []tape.V {
		return []tape.V{y[1], y[0].Const(-1)}
	}}
	events := []ode.Event{
		{Name: "bounce", Direction: -1, G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0] },
			Apply: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{y[0], y[1].Mul(p[0]).Neg()} }},
		{Name: "stop", Terminal: true, G: func(t tape.V, _, p []tape.V) tape.V { return t.Sub(p[1]) }},
	}
	prob := ode.Problem{Field: f, N: 3, Y0: []float64{1, 0}, P: []float64{0.8, 2.5, 0.9, 10, 0.7, 3}, T1: 4}
	for _, m := range []ode.Method{ode.Tsit5, ode.Rodas5P} {
		sv, err := ode.NewSolver(f, &ode.Settings{Method: m, RelTol: 1e-8, Events: events})
		if err != nil {
			t.Fatal(err)
		}
		g, err := sv.Grad(nil, &prob, ode.SumSquares(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if g.Solution.T[0] != 2.5 || g.Solution.T[1] != 4 || g.Solution.T[2] != 3 {
			t.Fatalf("%s: Grad's T = %v, want [2.5 4 3]", m.Name(), g.Solution.T)
		}
		// Loss reports the solution it evaluated, with or without a mesh.
		for _, mesh := range []*ode.Mesh{nil, g.Mesh} {
			_, sol, err := sv.Loss(&prob, ode.SumSquares(), mesh)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if sol.T[i] != g.Solution.T[i] || sol.Events == nil || sol.Events[i] != g.Solution.Events[i] {
					t.Errorf("%s Loss (mesh given: %v): T %v, events %v; Grad's %v, %v", m.Name(), mesh != nil, sol.T, sol.Events, g.Solution.T, g.Solution.Events)
					break
				}
			}
		}
		for _, skip := range [][]bool{nil, {false, true, false}, {true, true, true}} {
			p, _, err := sv.GradPartial(context.Background(), nil, &prob, ode.SumSquares(), nil, skip)
			if err != nil {
				t.Fatalf("%s skip %v: %v", m.Name(), skip, err)
			}
			sol := p.Solution
			if len(sol.Events) != 3 {
				t.Errorf("%s skip %v: Events = %v, want 3 counts", m.Name(), skip, sol.Events)
				continue
			}
			for i := range 3 {
				wantT, wantEv := g.Solution.T[i], g.Solution.Events[i]
				if skip != nil && skip[i] {
					wantT, wantEv = prob.T0, 0
				}
				if sol.T[i] != wantT || sol.Events[i] != wantEv {
					t.Errorf("%s skip %v: trajectory %d: T %v, %d events; want %v, %d (Grad's T %v, events %v)",
						m.Name(), skip, i, sol.T[i], sol.Events[i], wantT, wantEv, g.Solution.T, g.Solution.Events)
				}
			}
		}
	}
}

// TestGradPartialAllLeftOutShapes checks that a GradPartial that leaves
// every trajectory out returns the arrays any other call returns, N
// entries each (zero counts): Stats.Accepted, and Rejected and
// FieldEvals unless Omit has OmitStats, in the Solution and in the Mesh.
// Before session 53 they were nil there, so code that reads
// Stats.Accepted[i] after a GradPartial panicked when every trajectory
// was skipped or had failed.
func TestGradPartialAllLeftOutShapes(t *testing.T) {
	f := ode.Field{Name: "decay", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{p[0].Mul(y[0]).Neg()} }}
	prob := ode.Problem{Field: f, Y0: []float64{1, 2, 3}, P: []float64{1, 2, 3}, T1: 1}
	sv, err := ode.NewSolver(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, omit := range []ode.Omit{0, ode.OmitStates, ode.OmitStats} {
		g, _, err := sv.GradPartial(context.Background(), &ode.Gradient{Omit: omit}, &prob, ode.SumSquares(), nil, []bool{true, true, true})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range []ode.Stats{g.Solution.Stats, g.Mesh.Stats} {
			counts := st.Rejected == nil && st.FieldEvals == nil
			if omit&ode.OmitStats == 0 {
				counts = len(st.Rejected) == 3 && len(st.FieldEvals) == 3
			}
			if len(st.Accepted) != 3 || !counts {
				t.Errorf("Omit %v: Stats %+v; want 3 accepted counts (and rejected and field evaluations unless OmitStats)", omit, st)
			}
		}
	}
}

// TestGradPartialRunsTwice checks that GradPartial finds every failure
// of an ensemble in one run, so that it runs twice (the ensemble, then
// the trajectories that did not fail) however the failures are spread,
// and that the survivors' gradients are those of their ensemble alone,
// bit for bit. The field is Prothero–Robinson's y' = λ·(y − sin 2t) +
// 2·cos 2t; every third trajectory has λ = −1e5, where Tsit5's stiffness
// test fires and Grad refuses it. Before session 53 the CPU engine left
// the chunks after a failed one NotRun, and each rerun found the
// failures of the next chunks: 3,000 trajectories took 10 runs, 12,000
// took 67 (2.0 s, against 0.13 s for the survivors alone).
func TestGradPartialRunsTwice(t *testing.T) {
	f := ode.Field{Name: "prothero-robinson", Dim: 1, Params: 1, F: func(t tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0].Sub(t.MulC(2).Sin())).Add(t.MulC(2).Cos().MulC(2))}
	}}
	const n = 3000
	y0, lam := make([]float64, n), make([]float64, n)
	var keep []int
	for i := range n {
		y0[i], lam[i] = 0.5+float64(i%7)/10, -1-float64(i%5)
		if i%3 == 0 {
			lam[i] = -1e5
		} else {
			keep = append(keep, i)
		}
	}
	totals := map[int]bool{}
	var mu sync.Mutex
	sv, err := ode.NewSolver(f, &ode.Settings{Method: ode.Tsit5, Progress: func(_, total int) {
		mu.Lock()
		totals[total] = true
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	g, fails, err := sv.GradPartial(context.Background(), nil, &ode.Problem{Field: f, Y0: y0, P: lam, T1: 1}, ode.SumSquares(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(fails) != n/3 || len(totals) > 2 {
		t.Errorf("%d failures (want %d) in %d runs (ensembles of %v); want 2 runs", len(fails), n/3, len(totals), totals)
	}
	sy0, slam := make([]float64, len(keep)), make([]float64, len(keep))
	for j, i := range keep {
		sy0[j], slam[j] = y0[i], lam[i]
	}
	alone, err := sv.Grad(nil, &ode.Problem{Field: f, Y0: sy0, P: slam, T1: 1}, ode.SumSquares(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for j, i := range keep {
		if g.Y0[i] != alone.Y0[j] || g.P[i] != alone.P[j] {
			t.Fatalf("trajectory %d: gradient %v, %v; alone %v, %v", i, g.Y0[i], g.P[i], alone.Y0[j], alone.P[j])
		}
	}
}

// TestGradEventsStoredBytes checks that Gradient.StoredBytes reports the
// states a gradient with events stores (every state of its chunk: at
// least (1 + Dim) values a step), as it does without events. Before
// session 53 it was 0 with events.
func TestGradEventsStoredBytes(t *testing.T) {
	const d = 5
	f := ode.Field{Name: "decay5", Dim: d, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		out := make([]tape.V, d)
		for c := range out {
			out[c] = p[0].Mul(y[c]).MulC(-float64(c + 1))
		}
		return out
	}}
	dose := ode.Event{Name: "dose", G: func(t tape.V, _, _ []tape.V) tape.V { return t.AddC(-0.7) },
		Apply: func(_ tape.V, y, _ []tape.V) []tape.V {
			out := append([]tape.V(nil), y...)
			out[0] = y[0].AddC(1)
			return out
		}}
	prob := ode.Problem{Field: f, Y0: []float64{1, 1, 1, 1, 1}, P: []float64{1}, T1: 2}
	for _, m := range []ode.Method{ode.Tsit5, ode.Rodas5P} {
		for _, events := range [][]ode.Event{nil, {dose}} {
			g, err := ode.Grad(nil, prob, ode.SumSquares(), nil, &ode.Settings{Method: m, Events: events})
			if err != nil {
				t.Fatal(err)
			}
			if least := int64((1+d)*8) * int64(g.Mesh.Len[0]); events != nil && g.StoredBytes < least || g.StoredBytes <= 0 {
				t.Errorf("%s, %d events: StoredBytes = %d for %d steps of %d values", m.Name(), len(events), g.StoredBytes, g.Mesh.Len[0], 1+d)
			}
		}
	}
}
