package ode_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// sameGradient fails t unless got is want bit for bit: the loss, the
// gradients, the Solution's arrays and the Mesh's.
func sameGradient(t *testing.T, what string, want, got *ode.Gradient) {
	t.Helper()
	if math.Float64bits(want.Loss) != math.Float64bits(got.Loss) {
		t.Fatalf("%s: Loss %v, want %v bit for bit", what, got.Loss, want.Loss)
	}
	sameBitsF(t, what+": Y0", want.Y0, got.Y0)
	sameBitsF(t, what+": P", want.P, got.P)
	sameBitsF(t, what+": Shared", want.Shared, got.Shared)
	ws, gs := want.Solution, got.Solution
	if gs == nil {
		t.Fatalf("%s: Solution nil", what)
	}
	sameBitsF(t, what+": Solution.T", ws.T, gs.T)
	sameBitsF(t, what+": Solution.Y", ws.Y, gs.Y)
	sameBitsF(t, what+": Solution.Ys", ws.Ys, gs.Ys)
	if !slices.Equal(ws.Status, gs.Status) || !slices.Equal(ws.Stiff, gs.Stiff) {
		t.Fatalf("%s: Solution.Status %v, Stiff %v; want %v, %v", what, gs.Status, gs.Stiff, ws.Status, ws.Stiff)
	}
	sameInts(t, what+": Solution.Stats.Accepted", ws.Stats.Accepted, gs.Stats.Accepted)
	sameInts(t, what+": Solution.Stats.Rejected", ws.Stats.Rejected, gs.Stats.Rejected)
	sameInts(t, what+": Solution.Stats.FieldEvals", ws.Stats.FieldEvals, gs.Stats.FieldEvals)
	sameInts(t, what+": Solution.Events", ws.Events, gs.Events)
	wm, gm := want.Mesh, got.Mesh
	if gm == nil {
		t.Fatalf("%s: Mesh nil", what)
	}
	if wm.N != gm.N || wm.Rows != gm.Rows || wm.Engine != gm.Engine && gm.Engine != "test-keepsaves" {
		t.Fatalf("%s: Mesh N %d, Rows %d (engine %s); want %d, %d", what, gm.N, gm.Rows, gm.Engine, wm.N, wm.Rows)
	}
	sameInts(t, what+": Mesh.Len", wm.Len, gm.Len)
	sameBitsF(t, what+": Mesh.T1", wm.T1, gm.T1)
	sameBitsF(t, what+": Mesh.H", wm.H, gm.H)
	if !slices.Equal(wm.Status, gm.Status) || !slices.Equal(wm.Events, gm.Events) {
		t.Fatalf("%s: Mesh.Status %v, Events %v; want %v, %v", what, gm.Status, gm.Events, wm.Status, wm.Events)
	}
	sameInts(t, what+": Mesh.Stats.Accepted", wm.Stats.Accepted, gm.Stats.Accepted)
	sameInts(t, what+": Mesh.Stats.Rejected", wm.Stats.Rejected, gm.Stats.Rejected)
}

// TestKeepGrads checks package ode's handling of per-trajectory results
// an engine keeps (Settings.KeepGrads), on the test engine
// test-keepsaves (the CPU engine whose results are held apart, with NaN,
// -1 and NotRun written over the result's arrays, as a GPU engine keeps
// them in device memory): a Grad (with the record and on a mesh; with
// save times, per-trajectory end times, Omit, events) returns the loss
// and the shared gradient of the CPU engine bit for bit, with Resident
// set and Y0, P, Solution and Mesh nil; HostGrads then fills them bit for
// bit as the CPU engine's Grad, also after the caller changed the
// Problem's save times, and keeps the engine's memory for the next call
// (which reuses it; Release frees it); a second HostGrads does nothing. A loop that
// passes its Gradient back without reading it gets the CPU engine's
// results in its last call, in the storage of the first. Random
// ensembles (seeded).
func TestKeepGrads(t *testing.T) {
	t.Parallel()
	lorenz, shared := lorenzField(), lorenzSharedField()
	rng := rand.New(rand.NewPCG(25, 40))
	rho := make([]float64, 9)
	for i := range rho {
		rho[i] = 10 + 20*rng.Float64()
	}
	ballF, ev := ball()
	y0, e := ballDrops(12, 7)
	type tc struct {
		name  string
		f     ode.Field
		set   ode.Settings
		prob  func() ode.Problem
		loss  ode.Loss
		mesh  bool // replay the CPU engine's mesh
		omit  ode.Omit
		touch bool // change the Problem's save times and end times before HostGrads
	}
	lorenzP := func() ode.Problem { return lorenzEnsemble(lorenz, rho) }
	tsit := ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, AbsTol: 1e-10}
	cases := []tc{
		{name: "record", f: lorenz, set: tsit, prob: lorenzP, loss: ode.SumSquares()},
		{name: "mesh", f: lorenz, set: tsit, prob: lorenzP, loss: ode.SumSquares(), mesh: true},
		{name: "omit", f: lorenz, set: tsit, prob: lorenzP, loss: ode.SumSquares(), omit: ode.OmitStates | ode.OmitStats},
		{name: "saves-t1s", f: lorenz, set: tsit, loss: ode.SumSquares(), touch: true, prob: func() ode.Problem {
			p := lorenzEnsemble(lorenz, rho)
			p.SaveAt = []float64{0, 0.2, 0.45, 0.5}
			p.T1s = make([]float64, p.N)
			for i := range p.T1s {
				p.T1s[i] = 0.5 + 0.05*float64(i)
			}
			return p
		}},
		{name: "shared", f: shared, set: ode.Settings{Method: ode.Vern7, RelTol: 1e-9, AbsTol: 1e-11}, loss: ode.SumSquares(), prob: func() ode.Problem {
			p := lorenzProblem()
			p.Field, p.N, p.P, p.Shared = shared, len(rho), rho, []float64{10, 8.0 / 3}
			return p
		}},
		{name: "events", f: ballF, set: ode.Settings{Method: ode.Tsit5, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}},
			loss: ode.Component(0), prob: func() ode.Problem { return ode.Problem{Field: ballF, N: 12, Y0: y0, P: e, T1: 1.6} }},
		{name: "events-mesh-omit", f: ballF, set: ode.Settings{Method: ode.Tsit5, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}},
			loss: ode.Component(0), mesh: true, omit: ode.OmitStates | ode.OmitStats,
			prob: func() ode.Problem { return ode.Problem{Field: ballF, N: 12, Y0: y0, P: e, T1: 1.6} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cpu := solverT(t, c.f, &c.set)
			set := c.set
			set.Engine, set.KeepGrads = "test-keepsaves", true
			keep := solverT(t, c.f, &set)
			p := c.prob()
			var m *ode.Mesh
			if c.mesh {
				var err error
				if m, _, err = cpu.Record(&p); err != nil {
					t.Fatal(err)
				}
			}
			want, err := cpu.Grad(&ode.Gradient{Omit: c.omit}, &p, c.loss, m)
			if err != nil {
				t.Fatal(err)
			}
			dst := &ode.Gradient{Omit: c.omit}
			var first []float64
			var kept ode.ResidentGrads
			for it := range 3 {
				q := c.prob()
				got, err := keep.Grad(dst, &q, c.loss, m)
				if err != nil {
					t.Fatal(err)
				}
				if got != dst {
					t.Fatal("Grad did not fill its dst")
				}
				if got.Resident == nil || got.Y0 != nil || got.P != nil || got.Solution != nil || got.Mesh != nil {
					t.Fatalf("call %d: Resident %v, Y0 nil %v, P nil %v, Solution nil %v, Mesh nil %v: want the results held by the engine", it, got.Resident, got.Y0 == nil, got.P == nil, got.Solution == nil, got.Mesh == nil)
				}
				if got.Resident.Engine() != "test-keepsaves" {
					t.Errorf("results held by %q", got.Resident.Engine())
				}
				if math.Float64bits(got.Loss) != math.Float64bits(want.Loss) {
					t.Fatalf("call %d: Loss %v before HostGrads, want %v bit for bit", it, got.Loss, want.Loss)
				}
				sameBitsF(t, "Shared before HostGrads", want.Shared, got.Shared)
				if it < 2 {
					continue // not read: written over by the next call
				}
				if c.touch {
					for k := range q.SaveAt {
						q.SaveAt[k] = 0.1
					}
					for i := range q.T1s {
						q.T1s[i] = 9
					}
				}
				r := got.Resident
				if err := got.HostGrads(); err != nil {
					t.Fatal(err)
				}
				if got.Resident != nil || r.Released() {
					t.Errorf("after HostGrads: Resident %v, released %v: want the engine's memory kept for the next call", got.Resident, r.Released())
				}
				kept = r
				sameGradient(t, "HostGrads", want, got)
				first = got.Y0
				if err := got.HostGrads(); err != nil || &got.Y0[0] != &first[0] {
					t.Errorf("a second HostGrads: %v", err)
				}
			}
			// The next call reuses the storage HostGrads filled, and the
			// engine's memory.
			q := c.prob()
			if _, err := keep.Grad(dst, &q, c.loss, m); err != nil {
				t.Fatal(err)
			}
			if dst.Resident != kept {
				t.Error("the next call did not reuse the engine's memory that HostGrads kept")
			}
			if err := dst.HostGrads(); err != nil {
				t.Fatal(err)
			}
			sameGradient(t, "a reused Gradient", want, dst)
			if &dst.Y0[0] != &first[0] {
				t.Error("a Gradient passed back: Y0 not filled in its storage")
			}
			dst.Release()
			if !kept.Released() {
				t.Error("Release after HostGrads: the engine's memory was not freed")
			}
		})
	}
}

// TestKeepGradsFailure checks that Settings.KeepGrads reports failures as
// without it: a trajectory that reaches MaxSteps, one stiff for Tsit5,
// and a gradient that is not finite give the CPU engine's error, message
// and trajectory, and the test engine keeps nothing for them.
func TestKeepGradsFailure(t *testing.T) {
	t.Parallel()
	f := lorenzField()
	rho := []float64{28, 28, 28, 28}
	p := lorenzEnsemble(f, rho)
	p.T1s = []float64{1, 1, 40, 1} // trajectory 2 runs out of steps
	for _, c := range []struct {
		name string
		set  ode.Settings
	}{
		{"maxsteps", ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, AbsTol: 1e-10, MaxSteps: 600}},
		{"maxsteps-vern7", ode.Settings{Method: ode.Vern7, RelTol: 1e-8, AbsTol: 1e-10, MaxSteps: 400}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cpu := solverT(t, f, &c.set)
			set := c.set
			set.Engine, set.KeepGrads = "test-keepsaves", true
			keep := solverT(t, f, &set)
			_, want := cpu.Grad(nil, &p, ode.SumSquares(), nil)
			var te *ode.TrajectoryError
			if !errors.As(want, &te) || te.Index != 2 {
				t.Fatalf("CPU engine: %v, want trajectory 2's failure", want)
			}
			g, got := keep.Grad(nil, &p, ode.SumSquares(), nil)
			if got == nil || got.Error() != want.Error() || g != nil {
				t.Fatalf("KeepGrads: %v (%v), want %v", got, g, want)
			}
			var kte *ode.TrajectoryError
			if !errors.As(got, &kte) || kte.Index != te.Index || kte.Status != te.Status || kte.T != te.T || kte.Accepted != te.Accepted {
				t.Errorf("KeepGrads: trajectory error %+v, want %+v", kte, te)
			}
		})
	}
}

// TestKeepGradsRelease checks that results released unread, by Release or
// by a Grad that writes over them (on the same solver or on another
// one, of another engine), make HostGrads fail with an error wrapping
// ode.ErrReleased and naming the fix, without a panic and leaving the
// Gradient unchanged; and that on the CPU engine KeepGrads keeps nothing
// (Resident nil, HostGrads does nothing) and changes nothing.
func TestKeepGradsRelease(t *testing.T) {
	t.Parallel()
	f := lorenzField()
	p := lorenzEnsemble(f, []float64{21, 28, 35})
	loss := ode.SumSquares()
	set := ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, AbsTol: 1e-10, KeepGrads: true}
	cpu := solverT(t, f, &set)
	want, err := cpu.Grad(nil, &p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want.Resident != nil || want.Y0 == nil {
		t.Fatalf("CPU engine with KeepGrads: Resident %v, Y0 nil %v: want the results on the host", want.Resident, want.Y0 == nil)
	}
	y0 := want.Y0
	if err := want.HostGrads(); err != nil || &want.Y0[0] != &y0[0] {
		t.Fatalf("HostGrads on the CPU engine's Gradient: %v", err)
	}
	want.Release() // does nothing
	set.Engine = "test-keepsaves"
	keep := solverT(t, f, &set)
	released := func(what string, g *ode.Gradient) {
		t.Helper()
		err := g.HostGrads()
		if !errors.Is(err, ode.ErrReleased) || !strings.Contains(err.Error(), "HostGrads before Release") {
			t.Errorf("%s: HostGrads: %v, want an error wrapping ErrReleased naming the fix", what, err)
		}
		if g.Y0 != nil || g.Solution != nil || g.Resident == nil {
			t.Errorf("%s: the Gradient changed: Y0 nil %v, Solution nil %v, Resident %v", what, g.Y0 == nil, g.Solution == nil, g.Resident)
		}
	}
	g, err := keep.Grad(nil, &p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Release()
	released("Release", g)
	g.Release() // again: nothing
	// Passed back unread: the copy of the first call's Gradient is
	// released by the second call.
	if _, err := keep.Grad(g, &p, loss, nil); err != nil {
		t.Fatal(err)
	}
	old := *g
	if _, err := keep.Grad(g, &p, loss, nil); err != nil {
		t.Fatal(err)
	}
	released("written over", &old)
	// Passed to a solver of another engine: the CPU engine's results,
	// the held ones released.
	old = *g
	if _, err := cpu.Grad(g, &p, loss, nil); err != nil {
		t.Fatal(err)
	}
	released("passed to the CPU engine", &old)
	sameGradient(t, "the CPU engine's Grad into a kept Gradient", want, g)
	if g.Resident != nil {
		t.Error("the CPU engine's Grad left Resident set")
	}
}
