package cuda

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// sameGrads checks that two gradients hold the same bits: the loss, the
// gradients, the solutions (sameSolution) and the recorded meshes'
// lengths, statuses, counts and end times.
func sameGrads(t *testing.T, what string, got, want *ode.Gradient) {
	t.Helper()
	if math.Float64bits(got.Loss) != math.Float64bits(want.Loss) {
		t.Errorf("%s: Loss %v, want %v bit for bit", what, got.Loss, want.Loss)
	}
	sameBits(t, what+": Y0", got.Y0, want.Y0)
	sameBits(t, what+": P", got.P, want.P)
	sameBits(t, what+": Shared", got.Shared, want.Shared)
	if got.Solution == nil || got.Mesh == nil {
		t.Fatalf("%s: Solution nil %v, Mesh nil %v", what, got.Solution == nil, got.Mesh == nil)
	}
	sameSolution(t, what, got.Solution, want.Solution)
	gm, wm := got.Mesh, want.Mesh
	if gm.N != wm.N || gm.Rows != wm.Rows || !slices.Equal(gm.Len, wm.Len) || !slices.Equal(gm.Status, wm.Status) ||
		!slices.Equal(gm.Stats.Accepted, wm.Stats.Accepted) || !slices.Equal(gm.Stats.Rejected, wm.Stats.Rejected) {
		t.Errorf("%s: meshes differ: N %d/%d, Rows %d/%d, Len or Status or Stats", what, gm.N, wm.N, gm.Rows, wm.Rows)
	}
	sameBits(t, what+": Mesh.T1", gm.T1, wm.T1)
}

// TestHostEngineKeepGrads checks a gradient's per-trajectory results
// kept in device memory (ode.Settings.KeepGrads) on the host engine
// (the generated kernels and the gradients' check kernel compiled as
// host C++): for Lorenz (Tsit5; the record, the record with
// Gradient.Omit, with save times, a shared-parameter gradient, the
// gradient on a resident mesh) and the events suite's bouncing balls and pharmacokinetic
// threshold (the record, with and without Omit; the gradient on the
// recorded mesh), each call passing its Gradient back three times
// unread, the call copies back only the loss terms and shared sums
// (Trace.Download: at most 8 bytes a trajectory and 8 more, against the
// tens of a call without KeepGrads), returns the loss and shared
// gradient of a call without KeepGrads bit for bit, and HostGrads fills
// Y0, P, Solution and Mesh equal bit for bit to that call's (random
// initial states, seeded). A call where some trajectories fail (MaxSteps
// that about half exhaust; MaxEvents 1 for balls that bounce twice) or
// returns the error of the
// call without KeepGrads, and the next call keeps again.
func TestHostEngineKeepGrads(t *testing.T) {
	needHost(t)
	testKeepGrads(t, "cuda-host", 1)
}

// TestGPUKeepGrads is TestHostEngineKeepGrads on the device ("cuda"),
// with ensembles 100 times as large (thousands of trajectories, none a
// multiple of a warp): the gradients' check kernel's warp shuffles and
// atomics run there only. It skips without a GPU.
func TestGPUKeepGrads(t *testing.T) {
	needGPUEngine(t)
	testKeepGrads(t, "cuda", 100)
}

// testKeepGrads runs TestHostEngineKeepGrads on engine eng with
// ensembles scale times as large.
func testKeepGrads(t *testing.T, eng string, scale int) {
	lorenz := lorenzCase(70*scale+3, 1e-6)
	lorenz.loss = ode.SumSquares()
	lorenzMesh := lorenz
	lorenzMesh.name = "lorenz-mesh"
	ball, pk := ballCase(24*scale+5, ode.Tsit5), pkCase(24*scale+7, ode.Tsit5)
	ball.set.RelTol, ball.set.AbsTol = 1e-6, 1e-8
	ballMesh := ball
	ballMesh.name = "ball-mesh"
	saves := saveTimesCase(t, lorenzCase(40*scale+1, 1e-6), 12)
	saves.name, saves.loss = "lorenz-saves", ode.SumSquares()
	shared := lorenzSharedCase(40 * scale)
	omit := ode.OmitStates | ode.OmitStats
	cases := []struct {
		c    engineCase
		omit ode.Omit
		mesh bool // the gradient on the mesh of a record without KeepGrads
	}{
		{c: lorenz},
		{c: lorenz, omit: omit},
		{c: lorenzMesh, mesh: true},
		{c: saves},
		{c: shared, omit: omit},
		{c: ball},
		{c: ball, omit: omit},
		{c: ballMesh, mesh: true},
		{c: pk, omit: omit},
	}
	rng := rand.New(rand.NewPCG(25, 3))
	for _, tc := range cases {
		name := tc.c.name
		if tc.omit != 0 {
			name += "-omit"
		}
		t.Run(name, func(t *testing.T) {
			c := tc.c
			c.prob.Y0 = slices.Clone(c.prob.Y0)
			for i := range c.prob.Y0 {
				c.prob.Y0[i] *= 1 + 1e-3*rng.Float64()
			}
			plain := c.solver(t, eng)
			kc := c
			kc.set.KeepGrads = true
			keep := kc.solver(t, eng)
			var m *ode.Mesh
			if tc.mesh {
				g, err := plain.Grad(nil, &c.prob, c.loss, nil)
				if err != nil {
					t.Fatal(err)
				}
				m = g.Mesh
			}
			var trw Trace
			want, err := plain.GradContext(WithTrace(context.Background(), &trw), &ode.Gradient{Omit: tc.omit}, &c.prob, c.loss, m)
			if err != nil {
				t.Fatal(err)
			}
			dst := &ode.Gradient{Omit: tc.omit}
			for it := range 3 {
				var tr Trace
				got, err := keep.GradContext(WithTrace(context.Background(), &tr), dst, &c.prob, c.loss, m)
				if err != nil {
					t.Fatal(err)
				}
				r := got.Resident
				if r == nil || got.Y0 != nil || got.Solution != nil || got.Mesh != nil {
					t.Fatalf("call %d: Resident %v, Y0 nil %v, Solution nil %v, Mesh nil %v: want the results on the device",
						it, r != nil, got.Y0 == nil, got.Solution == nil, got.Mesh == nil)
				}
				if r.Engine() != eng {
					t.Errorf("results held by engine %q", r.Engine())
				}
				n := int64(c.prob.N)
				if down, all := tr.Stats().Download, trw.Stats().Download; down > 8*n+8+16*int64(len(c.prob.Shared)) || down >= all {
					t.Errorf("call %d: %d bytes copied back (%d without KeepGrads): want the loss terms and shared sums alone", it, down, all)
				}
				if math.Float64bits(got.Loss) != math.Float64bits(want.Loss) {
					t.Fatalf("call %d: Loss %v, want %v bit for bit", it, got.Loss, want.Loss)
				}
				sameBits(t, "Shared", got.Shared, want.Shared)
				if it < 2 {
					continue // unread: the next call writes over it
				}
				if err := got.HostGrads(); err != nil {
					t.Fatal(err)
				}
				if got.Resident != nil || r.Released() {
					t.Errorf("HostGrads: Resident %v, released %v: want the device memory kept for the next call", got.Resident != nil, r.Released())
				}
				sameGrads(t, "HostGrads", got, want)
				if all := trw.Stats().Download; tr.Stats().Download < all {
					t.Errorf("HostGrads copied back %d bytes of the call's %d: want all", tr.Stats().Download, all)
				}
			}
		})
	}

	// Released unread (Release, or a call that reused their memory): an
	// error wrapping ode.ErrReleased, no panic.
	t.Run("released", func(t *testing.T) {
		kc := lorenz
		kc.set.KeepGrads = true
		keep := kc.solver(t, eng)
		g, err := keep.Grad(nil, &lorenz.prob, lorenz.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		old := *g
		if _, err := keep.Grad(g, &lorenz.prob, lorenz.loss, nil); err != nil {
			t.Fatal(err)
		}
		if g.Resident != old.Resident {
			t.Error("a Gradient passed back: its device memory was not reused")
		}
		if err := old.HostGrads(); !errors.Is(err, ode.ErrReleased) || old.Y0 != nil {
			t.Errorf("HostGrads of results written over: %v (Y0 nil %v), want an error wrapping ErrReleased", err, old.Y0 == nil)
		}
		if err := g.HostGrads(); err != nil {
			t.Fatal(err)
		}
		r := old.Resident
		if _, err := keep.Grad(g, &lorenz.prob, lorenz.loss, nil); err != nil {
			t.Fatal(err)
		}
		if g.Resident != r {
			t.Error("a Gradient passed back after HostGrads: its device memory was not reused")
		}
		g.Release()
		if err := g.HostGrads(); !errors.Is(err, ode.ErrReleased) || g.Y0 != nil || !r.Released() {
			t.Errorf("HostGrads after Release: %v (Y0 nil %v, released %v), want an error wrapping ErrReleased", err, g.Y0 == nil, r.Released())
		}
	})

	// Failures: the errors of the calls without KeepGrads.
	failing := lorenzCase(48*scale, 1e-4)
	failing.loss = ode.SumSquares()
	failing.set.MaxSteps = medianSteps(t, failing, eng)
	bounces := ballCase(24*scale, ode.Tsit5)
	bounces.set.MaxEvents = 1 // the balls bounce twice or more
	// √y(T) of a trajectory that stays at 0: its dL/dy0 is +Inf.
	decay := ode.Field{Name: "decay", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0])}
	}}
	nonFinite := engineCase{name: "sqrt-at-zero", prob: ode.Problem{Field: decay, N: 5, Y0: []float64{1, 2, 0, 3, 4}, P: []float64{0.5}, T1: 1},
		set: ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, AbsTol: 1e-10}, loss: ode.Loss{Name: "sqrt", F: func(y, _, _ []tape.V) tape.V { return y[0].Sqrt() }}}
	for _, c := range []engineCase{failing, bounces, nonFinite} {
		t.Run(c.name+"-fails", func(t *testing.T) {
			plain := c.solver(t, eng)
			kc := c
			kc.set.KeepGrads = true
			keep := kc.solver(t, eng)
			_, want := plain.Grad(nil, &c.prob, c.loss, nil)
			if want == nil {
				t.Fatal("without KeepGrads: no error, want a trajectory's failure or a gradient that is not finite")
			}
			for range 2 {
				g, err := keep.Grad(&ode.Gradient{}, &c.prob, c.loss, nil)
				if err == nil || err.Error() != want.Error() {
					t.Fatalf("KeepGrads: %v (Gradient %v), want %v", err, g != nil, want)
				}
			}
		})
	}
}
