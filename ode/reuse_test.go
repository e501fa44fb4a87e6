package ode_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestGradReuse checks that a Gradient passed back to Grad has its arrays
// (and its Solution's and Mesh's) filled again rather than reallocated,
// and that the result equals a fresh call's bit for bit: after a longer
// mesh (stale steps past the new trajectories' ends must read 0), after a
// shorter one (the storage grows), on a given mesh (the dst's own), and
// with another ensemble size.
func TestGradReuse(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 7))
	f := lorenzField()
	problem := func(n int) *ode.Problem {
		rho := make([]float64, n)
		for i := range rho {
			rho[i] = 20 + 10*r.Float64()
		}
		p := lorenzEnsemble(f, rho)
		return &p
	}
	solver := func(rtol float64) *ode.Solver {
		sv, err := ode.NewSolver(f, &ode.Settings{Method: ode.Tsit5, RelTol: rtol, AbsTol: rtol * 1e-3})
		if err != nil {
			t.Fatal(err)
		}
		return sv
	}
	long, short := solver(1e-9), solver(1e-4)
	loss := ode.SumSquares()
	p, q := problem(45), problem(45)
	var g ode.Gradient
	for k, c := range []struct {
		sv     *ode.Solver
		p      *ode.Problem
		mesh   bool // replay g's own mesh
		reused bool // g's mesh storage is expected to be reused
	}{
		{long, p, false, false},
		{short, q, false, true}, // shorter mesh into the longer one's storage
		{short, q, true, false}, // g's own mesh, given
		{long, p, false, false}, // the storage grows
		{short, problem(20), false, true},
	} {
		var m *ode.Mesh
		if c.mesh {
			m = g.Mesh
		}
		want, err := c.sv.Grad(nil, c.p, loss, m)
		if err != nil {
			t.Fatalf("case %d: fresh: %v", k, err)
		}
		oldH := []float64(nil)
		if g.Mesh != nil {
			oldH = g.Mesh.H[:1]
		}
		oldY := []float64(nil)
		if g.Solution != nil {
			oldY = g.Solution.Y[:1]
		}
		got, err := c.sv.Grad(&g, c.p, loss, m)
		if err != nil {
			t.Fatalf("case %d: reused: %v", k, err)
		}
		if got != &g {
			t.Fatalf("case %d: Grad did not return dst", k)
		}
		if c.reused && (&g.Mesh.H[0] != &oldH[0] || &g.Solution.Y[0] != &oldY[0]) {
			t.Errorf("case %d: the mesh or the solution was reallocated", k)
		}
		if got.Loss != want.Loss || !slices.Equal(got.Y0, want.Y0) || !slices.Equal(got.P, want.P) {
			t.Errorf("case %d: loss or gradient differs from a fresh call's", k)
		}
		gm, wm := got.Mesh, want.Mesh
		if gm.N != wm.N || gm.Rows != wm.Rows || !slices.Equal(gm.H, wm.H) || !slices.Equal(gm.Len, wm.Len) ||
			!slices.Equal(gm.T1, wm.T1) || !slices.Equal(gm.Status, wm.Status) {
			t.Errorf("case %d: mesh differs from a fresh call's (rows %d, want %d)", k, gm.Rows, wm.Rows)
		}
		gs, ws := got.Solution, want.Solution
		if !slices.Equal(gs.Y, ws.Y) || !slices.Equal(gs.T, ws.T) || !slices.Equal(gs.Status, ws.Status) ||
			!slices.Equal(gs.Stats.Accepted, ws.Stats.Accepted) || !slices.Equal(gs.Stats.Rejected, ws.Stats.Rejected) {
			t.Errorf("case %d: solution differs from a fresh call's", k)
		}
	}
}

// TestReuseSavesOverwritten checks that Solve and Grad into a reused
// Solution or Gradient write every saved state: the reused Ys is filled
// with a stale value (1e300, and NaN) first, and the saved states, final
// states and gradients must equal a fresh call's bit for bit, with both
// save modes, explicit, stiff and switching methods, save times at T0,
// repeated and at the end, trajectories that fail (MaxSteps) or end at
// their own T1s, events, checkpointing and a given mesh.
func TestReuseSavesOverwritten(t *testing.T) {
	t.Parallel()
	kp := problems.Kepler()
	rng := rand.New(rand.NewPCG(25, 3))
	const n = 37
	gm, y0 := make([]float64, n), make([]float64, 4*n)
	for i := range gm {
		gm[i] = 0.9 + 0.2*rng.Float64()
		for c := range 4 {
			y0[i*4+c] = kp.Y0[c] * (1 + 0.05*rng.Float64())
		}
	}
	ts := []float64{0, 0, 0.3, 0.3, 1, 2.5, 4, 4, 5.5}
	kepler := ode.Problem{Field: kp.Field, N: n, Y0: y0, P: gm, T1: kp.T1, SaveAt: append(ts, kp.T1, kp.T1)}
	ends := kepler
	ends.T1s = make([]float64, n)
	for i := range ends.T1s {
		ends.T1s[i] = 5.5 + rng.Float64()
	}
	ends.T1 = 0
	ends.SaveAt = ts
	sq := ode.Loss{Name: "sq", F: func(y, ys, _ []tape.V) tape.V {
		s := y[0].Square()
		for k, x := range ys {
			s = s.Add(x.Square().MulC(1 + float64(k%5)))
		}
		return s
	}}
	ball, ev := drivenBall()
	const nb = 9
	by0, bp := make([]float64, 2*nb), make([]float64, 2*nb)
	for i := range nb {
		by0[2*i], bp[2*i], bp[2*i+1] = 1+0.1*rng.Float64(), 0.8+0.1*rng.Float64(), 0.3*rng.Float64()
	}
	balls := ode.Problem{Field: ball, N: nb, Y0: by0, P: bp, T1: 3, SaveAt: []float64{0, 0.1, 0.5, 0.77, 1.2, 2, 2.9, 3}}
	vdp := mixedVdP(8)
	for k := 0; k <= 20; k++ {
		vdp.SaveAt = append(vdp.SaveAt, 2*float64(k)/20)
	}
	for _, c := range []struct {
		name string
		p    ode.Problem
		set  ode.Settings
		loss ode.Loss
	}{
		{"tsit5", kepler, ode.Settings{Method: ode.Tsit5, RelTol: 1e-8}, sq},
		{"tsit5/step", kepler, ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, Saves: ode.SaveStep}, sq},
		{"tsit5/checkpoint", kepler, ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, Checkpoint: 3}, sq},
		{"tsit5/T1s", ends, ode.Settings{Method: ode.Tsit5, RelTol: 1e-7}, sq},
		{"tsit5/fail", kepler, ode.Settings{Method: ode.Tsit5, RelTol: 1e-9, MaxSteps: 60, AllowFailures: true}, sq},
		{"vern7", kepler, ode.Settings{Method: ode.Vern7, RelTol: 1e-8}, sq},
		{"rodas5p", kepler, ode.Settings{Method: ode.Rodas5P, RelTol: 1e-6}, sq},
		{"rosenbrock23/step", kepler, ode.Settings{Method: ode.Rosenbrock23, RelTol: 1e-4, Saves: ode.SaveStep}, sq},
		{"auto", vdp, ode.Settings{Method: ode.Auto}, autoLoss()},
		{"events", balls, ode.Settings{Method: ode.Tsit5, RelTol: 1e-9, Events: []ode.Event{ev}}, sq},
	} {
		sv, err := ode.NewSolver(c.p.Field, &c.set)
		if err != nil {
			t.Fatal(err)
		}
		p := c.p
		want, err := sv.Solve(&p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, stale := range []float64{1e300, math.NaN()} {
			dst := &ode.Solution{Ys: make([]float64, len(want.Ys))}
			for i := range dst.Ys {
				dst.Ys[i] = stale
			}
			got, err := sv.SolveTo(dst, &p)
			if err != nil {
				t.Fatalf("%s: reused: %v", c.name, err)
			}
			what := fmt.Sprintf("%s: Solve into a Solution with stale %v", c.name, stale)
			sameBits(t, what+": Ys", got.Ys, want.Ys)
			sameBits(t, what+": Y", got.Y, want.Y)
		}
		if c.set.AllowFailures {
			continue // no gradient of failed trajectories
		}
		gw, err := sv.Grad(nil, &p, c.loss, nil)
		if err != nil {
			t.Fatalf("%s: grad: %v", c.name, err)
		}
		for _, mesh := range []*ode.Mesh{nil, gw.Mesh} {
			g := &ode.Gradient{Solution: &ode.Solution{Ys: make([]float64, len(gw.Solution.Ys)), Events: make([]int, p.N)}}
			for i := range g.Solution.Ys {
				g.Solution.Ys[i] = 1e300
			}
			for i := range g.Solution.Events {
				g.Solution.Events[i] = -1 // stale event counts
			}
			if _, err := sv.Grad(g, &p, c.loss, mesh); err != nil {
				t.Fatalf("%s: grad reused: %v", c.name, err)
			}
			what := fmt.Sprintf("%s: Grad into a Gradient with stale saves (mesh given: %v)", c.name, mesh != nil)
			if !slices.Equal(g.Solution.Events, gw.Solution.Events) {
				t.Errorf("%s: event counts %v, want %v", what, g.Solution.Events, gw.Solution.Events)
			}
			sameBits(t, what+": Ys", g.Solution.Ys, gw.Solution.Ys)
			sameBits(t, what+": loss", []float64{g.Loss}, []float64{gw.Loss})
			sameBits(t, what+": Y0", g.Y0, gw.Y0)
			sameBits(t, what+": P", g.P, gw.P)
		}
	}
}
