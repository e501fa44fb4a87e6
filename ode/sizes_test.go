package ode_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// sizesField is a coupled nonlinear field of dimension d with np
// per-trajectory and ns shared parameters: component j relaxes at a rate
// scaled by p[j%np] (shifted by the shared s[j%ns]), is driven by
// sin(y_{j+1}) and cos t, and couples to y_{j−1} quadratically. A large
// p[0] makes a trajectory stiff.
func sizesField(d, np, ns int) ode.Field {
	return ode.Field{Name: fmt.Sprintf("sizes-%d-%d-%d", d, np, ns), Dim: d, Params: np, Shared: ns,
		F: func(t tape.V, y, p []tape.V) []tape.V {
			out := make([]tape.V, d)
			for j := range out {
				r := y[j].Const(-(0.5 + 0.1*float64(j)))
				if np > 0 {
					r = r.Mul(p[j%np])
				}
				if ns > 0 {
					r = r.Add(p[np+j%ns].MulC(0.3))
				}
				f := r.Mul(y[j]).Add(y[(j+1)%d].Sin().MulC(0.7)).Add(t.Cos().MulC(0.2))
				if d > 1 {
					f = f.Sub(y[j].Mul(y[(j+d-1)%d]).MulC(0.05))
				}
				out[j] = f
			}
			return out
		}}
}

// TestEnsembleSizes runs ensembles of sizes, state dimensions and
// parameter counts that are not multiples of the CPU engine's blocks
// (1 … 1,000 trajectories, Dim 1 … 33, the matrix-free Rosenbrock steps
// from Dim 16 included), with per-trajectory and shared parameters, save
// times at T0, at T1, repeated and many, on every method and Auto (a
// third of the trajectories stiff where the method is implicit or Auto).
// Each trajectory's solve and gradient must be the one it has when solved
// alone, bit for bit, and the same for other block sizes and worker
// counts; the gradient must match central differences of the loss on the
// recorded mesh.
func TestEnsembleSizes(t *testing.T) {
	t.Parallel()
	const t0, t1 = 0.25, 2.25
	many := make([]float64, 41)
	for k := range many {
		many[k] = t0 + (t1-t0)*float64(k)/40
	}
	cases := []struct {
		m      ode.Method
		n, d   int
		np, ns int
		save   []float64
		stiff  bool
		short  bool
	}{
		{ode.Tsit5, 1, 1, 0, 0, nil, false, true},
		{ode.Tsit5, 33, 5, 4, 3, []float64{t0, 1, 1, t1}, false, true},
		{ode.Vern7, 65, 9, 1, 1, []float64{t1}, false, false},
		{ode.Vern7, 2, 33, 0, 3, many, false, false},
		{ode.Rodas5P, 31, 7, 1, 1, many, true, true},
		{ode.Rodas5P, 5, 17, 4, 0, []float64{t0}, true, false},
		{ode.Rosenbrock23, 127, 2, 4, 3, []float64{t0, t1}, true, false},
		{ode.Rosenbrock23, 3, 33, 1, 1, []float64{1}, true, false},
		{ode.Auto, 129, 3, 4, 1, []float64{1, t1}, true, true},
		{ode.Auto, 1000, 2, 1, 0, nil, true, false},
	}
	for ci, c := range cases {
		name := fmt.Sprintf("%s/n=%d/d=%d/p=%d/s=%d/K=%d", c.m.Name(), c.n, c.d, c.np, c.ns, len(c.save))
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if testing.Short() && !c.short {
				t.Skip("-short")
			}
			rng := rand.New(rand.NewPCG(uint64(ci), 50))
			pr := ode.Problem{Field: sizesField(c.d, c.np, c.ns), N: c.n, T0: t0, T1: t1, SaveAt: c.save,
				Y0: make([]float64, c.n*c.d), P: make([]float64, c.n*c.np), Shared: make([]float64, c.ns)}
			for i := range pr.Y0 {
				pr.Y0[i] = 2*rng.Float64() - 1
			}
			for i := range pr.P {
				pr.P[i] = 0.5 + rng.Float64()
			}
			if c.stiff && c.np > 0 {
				for i := 0; i < c.n; i += 3 {
					pr.P[i*c.np] *= 3000
				}
			}
			for i := range pr.Shared {
				pr.Shared[i] = rng.Float64() - 0.5
			}
			set := ode.Settings{Method: c.m, RelTol: 1e-7, AbsTol: 1e-9}
			sv, err := ode.NewSolver(pr.Field, &set)
			if err != nil {
				t.Fatal(err)
			}
			l := obsLoss{d: c.d, K: len(c.save), data: make([]float64, c.n*len(c.save)*c.d)}
			for i := range l.data {
				l.data[i] = rng.Float64() - 0.5
			}
			g, err := sv.Grad(nil, &pr, l.loss(), nil)
			if err != nil {
				t.Fatal(err)
			}
			sol, err := sv.Solve(&pr)
			if err != nil {
				t.Fatal(err)
			}
			d, np, kd := c.d, c.np, len(c.save)*c.d
			if c.m == ode.Auto {
				// Method Auto's records run the stability probe on every
				// Tsit5 trial (Plan.Probe), which may switch a stiff
				// trajectory to Rodas5P before the stiffness test that a
				// Solve runs alone: Solve's states agree to the tolerance,
				// and the trajectories alone are compared with Grad's.
				for i := range sol.Y {
					if e := math.Abs(sol.Y[i]-g.Solution.Y[i]) / (1e-9 + 1e-7*math.Abs(sol.Y[i])); !(e <= 100) {
						t.Errorf("Solve and Grad's final states[%d] = %v, %v: %.3g tolerances apart", i, sol.Y[i], g.Solution.Y[i], e)
					}
				}
				sol = g.Solution
			} else {
				sameBitsF(t, "Solve and Grad's final states", sol.Y, g.Solution.Y)
			}
			for _, i := range []int{0, c.n - 1, rng.IntN(c.n)} {
				q := pr
				q.N, q.Y0, q.P = 1, pr.Y0[i*d:(i+1)*d], pr.P[i*np:(i+1)*np]
				ql := l
				ql.data = l.data[i*kd : (i+1)*kd]
				g1, err := sv.Grad(nil, &q, ql.loss(), nil)
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("trajectory %d alone", i)
				sameBitsF(t, what+": final state", sol.Y[i*d:(i+1)*d], g1.Solution.Y)
				sameBitsF(t, what+": saved states", sol.Ys[i*kd:(i+1)*kd], g1.Solution.Ys)
				sameBitsF(t, what+": ∂L/∂Y0", g.Y0[i*d:(i+1)*d], g1.Y0)
				sameBitsF(t, what+": ∂L/∂P", g.P[i*np:(i+1)*np], g1.P)
				sameInts(t, what+": accepted steps", sol.Stats.Accepted[i:i+1], g1.Mesh.Stats.Accepted)
			}
			for _, bs := range []int{1, 7} {
				s2 := set
				s2.Exec.Workers, s2.Exec.BlockSize = 2, bs
				sv2, err := ode.NewSolver(pr.Field, &s2)
				if err != nil {
					t.Fatal(err)
				}
				g2, err := sv2.Grad(nil, &pr, l.loss(), nil)
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("block size %d", bs)
				sameBitsF(t, what+": saved states", g.Solution.Ys, g2.Solution.Ys)
				sameBitsF(t, what+": ∂L/∂Y0", g.Y0, g2.Y0)
				sameBitsF(t, what+": ∂L/∂P", g.P, g2.P)
				sameBitsF(t, what+": ∂L/∂Shared", g.Shared, g2.Shared)
			}
			// Central differences of stiff trajectories (rates of 1e3) carry
			// a few 1e-6 of noise.
			for _, fc := range pickCoords(rng, &pr, 3, 3) {
				fd := fdFrozen(t, sv, pr, g.Mesh, l, fc)
				got := fc.grad(g)
				if e := math.Abs(got-fd) / math.Max(math.Abs(fd), gradScale(g, pr.Field, fc)); !(e <= 1e-5) {
					t.Errorf("∂L/∂%s[%d] (trajectory %d) = %v, central difference %v (relative error %.2g)", fc.kind, fc.idx, fc.traj, got, fd, e)
				}
			}
		})
	}
}
