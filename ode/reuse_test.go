package ode_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
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
