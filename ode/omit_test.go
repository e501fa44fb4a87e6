package ode_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// omitBits reports whether a and b hold the same bits (NaNs included).
func omitBits(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return x == y || x != x && y != y })
}

// checkOmitted compares got, a Grad with Omit o, with want, the same
// Grad without it: every returned array the same bit for bit, the
// omitted ones nil (in the recorded mesh too, where recorded).
func checkOmitted(t *testing.T, name string, got, want *ode.Gradient, o ode.Omit, recorded bool) {
	t.Helper()
	if got.Loss != want.Loss || !omitBits(got.Y0, want.Y0) || !omitBits(got.P, want.P) || !omitBits(got.Shared, want.Shared) {
		t.Errorf("%s: loss or gradient differs from the call without Omit", name)
	}
	gs, ws := got.Solution, want.Solution
	if !omitBits(gs.T, ws.T) || !slices.Equal(gs.Status, ws.Status) || !slices.Equal(gs.Stats.Accepted, ws.Stats.Accepted) ||
		!slices.Equal(gs.Stiff, ws.Stiff) || !slices.Equal(gs.Events, ws.Events) || !slices.Equal(gs.Switch, ws.Switch) || gs.Method != ws.Method {
		t.Errorf("%s: times, statuses, accepted counts, events, stiffness or switches differ", name)
	}
	if o&ode.OmitStates == 0 {
		if !omitBits(gs.Y, ws.Y) || !omitBits(gs.Ys, ws.Ys) {
			t.Errorf("%s: states differ", name)
		}
	} else if gs.Y != nil || gs.Ys != nil {
		t.Errorf("%s: states returned (len %d, %d)", name, len(gs.Y), len(gs.Ys))
	}
	if o&ode.OmitStats == 0 {
		if !slices.Equal(gs.Stats.Rejected, ws.Stats.Rejected) || !slices.Equal(gs.Stats.FieldEvals, ws.Stats.FieldEvals) {
			t.Errorf("%s: rejected or field evaluation counts differ", name)
		}
	} else if gs.Stats.Rejected != nil || gs.Stats.FieldEvals != nil || recorded && (got.Mesh.Stats.Rejected != nil || got.Mesh.Stats.FieldEvals != nil) {
		t.Errorf("%s: rejected or field evaluation counts returned", name)
	}
	if recorded {
		gm, wm := got.Mesh, want.Mesh
		if !omitBits(gm.H[:gm.Rows*gm.N], wm.H[:wm.Rows*wm.N]) || !slices.Equal(gm.Len, wm.Len) || !slices.Equal(gm.Switch, wm.Switch) || !slices.Equal(gm.Events, wm.Events) {
			t.Errorf("%s: the recorded mesh differs", name)
		}
	}
}

// TestGradOmit checks Gradient.Omit on the CPU engine: Grad (recording
// and on a given mesh, twice on one dst), GradPartial with skipped
// trajectories, Method Auto (switching in place, and split on an engine
// that does not) and events with save times give the results of the call
// without Omit, bit for bit, less the omitted arrays. (The GPU engines'
// are checked in package cuda, TestOmit.)
func TestGradOmit(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 23))
	rho := make([]float64, 30)
	for i := range rho {
		rho[i] = 20 + 10*r.Float64()
	}
	lorenz := lorenzEnsemble(lorenzField(), rho)
	lorenz.SaveAt = []float64{0.25, 0.5}
	split, splitL := splitCase(10)
	auto := mixedVdP(10)
	auto.SaveAt = []float64{0.5, 1.5}
	f, ev := ball()
	h0, e := make([]float64, 2*12), make([]float64, 12)
	for i := range e {
		h0[2*i], e[i] = 0.8+0.4*r.Float64(), 0.65+0.25*r.Float64()
	}
	balls := ode.Problem{Field: f, N: 12, Y0: h0, P: e, T1: 1.6, SaveAt: []float64{0.3, 0.9}}
	skip := make([]bool, lorenz.N)
	skip[4], skip[17] = true, true
	cases := []struct {
		name string
		p    ode.Problem
		loss ode.Loss
		set  ode.Settings
		skip []bool // GradPartial
	}{
		{name: "lorenz", p: lorenz, loss: ode.SumSquares(), set: ode.Settings{Method: ode.Tsit5, RelTol: 1e-8}},
		{name: "partial", p: lorenz, loss: ode.SumSquares(), set: ode.Settings{Method: ode.Tsit5, RelTol: 1e-8}, skip: skip},
		{name: "auto", p: auto, loss: autoLoss(), set: ode.Settings{Method: ode.Auto, RelTol: 1e-6}},
		{name: "auto-split", p: split, loss: splitL, set: ode.Settings{Method: ode.Auto, Engine: "auto-split-test"}},
		{name: "events", p: balls, loss: ode.SumSquares(), set: ode.Settings{Method: ode.Tsit5, RelTol: 1e-9, Events: []ode.Event{ev}}},
	}
	for _, c := range cases {
		sv, err := ode.NewSolver(c.p.Field, &c.set)
		if err != nil {
			t.Fatal(err)
		}
		grad := func(dst *ode.Gradient, m *ode.Mesh) *ode.Gradient {
			var g *ode.Gradient
			var err error
			if c.skip != nil {
				g, _, err = sv.GradPartial(context.Background(), dst, &c.p, c.loss, m, c.skip)
			} else {
				g, err = sv.Grad(dst, &c.p, c.loss, m)
			}
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			return g
		}
		want := grad(nil, nil)
		if err := want.Mesh.Host(); err != nil {
			t.Fatal(err)
		}
		wantOn := grad(nil, want.Mesh)
		for _, o := range []ode.Omit{ode.OmitStates, ode.OmitStats, ode.OmitStates | ode.OmitStats} {
			dst := &ode.Gradient{Omit: o}
			for call := range 2 { // the second reuses dst
				name := fmt.Sprintf("%s/omit=%d/call %d", c.name, o, call)
				checkOmitted(t, name, grad(dst, nil), want, o, true)
				if dst.Omit != o {
					t.Fatalf("%s: Omit changed to %d", name, dst.Omit)
				}
			}
			// On a given mesh: the mesh's own counts are left as they are.
			on := grad(&ode.Gradient{Omit: o}, want.Mesh)
			checkOmitted(t, c.name+fmt.Sprintf("/omit=%d/mesh", o), on, wantOn, o, false)
			if want.Mesh.Stats.Rejected == nil {
				t.Errorf("%s: a given mesh's counts were dropped", c.name)
			}
		}
	}
}
