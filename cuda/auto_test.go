package cuda

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Method Auto on the GPU engine (here on the host backend): it cannot
// switch a trajectory's method in place, so package ode runs the Tsit5
// pass, then only the trajectories whose stiffness test fired again from
// T0 with Rodas5P, and merges the two (ode/auto_split.go).

// autoVdP is the Van der Pol field with μ = p·s (p per trajectory, s
// shared), forced by 0.01·sin(t).
func autoVdP() ode.Field {
	return ode.Field{Name: "vdp-auto", Dim: 2, Params: 1, Shared: 1, F: func(t tape.V, y, p []tape.V) []tape.V {
		mu := p[0].Mul(p[1])
		return []tape.V{y[1], mu.Mul(t.Const(1).Sub(y[0].Square()).Mul(y[1])).Sub(y[0]).Add(t.Sin().MulC(0.01))}
	}}
}

// autoMixed returns n Van der Pol trajectories on [0, 2], μ of 300 to
// 900 (stiff) for even i and 1 to 4 for odd i, save times 0.5 and 1.5,
// and a loss of final and saved states with a data row per trajectory.
func autoMixed(n int) (ode.Problem, ode.Loss) {
	rng := rand.New(rand.NewPCG(3, 25))
	p := ode.Problem{Field: autoVdP(), N: n, Shared: []float64{1}, T1: 2, SaveAt: []float64{0.5, 1.5}}
	data := make([]float64, n)
	for i := 0; i < n; i++ {
		p.Y0 = append(p.Y0, 1.8+0.4*rng.Float64(), 0.2*rng.Float64())
		if i%2 == 1 {
			p.P = append(p.P, 1+3*rng.Float64())
		} else {
			p.P = append(p.P, 300+600*rng.Float64())
		}
		data[i] = 0.1 * float64(i+1)
	}
	loss := ode.Loss{Name: "auto", DataDim: 1, Data: data, F: func(y, ys, d []tape.V) tape.V {
		l := y[0].Square().Add(y[1].Square()).Add(d[0].Mul(y[0]))
		for k := 0; k < len(ys)/2; k++ {
			l = l.Add(ys[2*k].MulC(float64(k + 1)))
		}
		return l
	}}
	return p, loss
}

// TestHostEngineAutoSplit checks Method Auto on cuda-host on a mixed
// ensemble: Grad, Solve, Record and Loss against Tsit5 on the non-stiff
// rows and Rodas5P on the stiff rows, both on cuda-host (every row bit
// for bit; the loss and the shared gradient the parts' sums added), only
// the stiff trajectories launched again (Trace.Trajectories), Replay and
// Grad on the merged mesh reproducing Solve and Grad, determinism (a
// Gradient passed back included), the CPU engine's Auto on the merged
// mesh (the same map: within the device's rounding), Grad against
// central differences on the merged mesh, and the CPU engine's own Auto
// (which switches in place) within the tolerance.
func TestHostEngineAutoSplit(t *testing.T) {
	needHost(t)
	const engine = "cuda-host"
	p, loss := autoMixed(8)
	var tsit, stiff []int
	for i := 0; i < p.N; i++ {
		if i%2 == 1 {
			tsit = append(tsit, i)
		} else {
			stiff = append(stiff, i)
		}
	}
	solver := func(m ode.Method, engine string) *ode.Solver {
		sv, err := ode.NewSolver(p.Field, &ode.Settings{Method: m, Engine: engine})
		if err != nil {
			t.Fatal(err)
		}
		return sv
	}
	pt, lt := odetest.Rows(p, loss, tsit)
	pr, lr := odetest.Rows(p, loss, stiff)
	gt, err := solver(ode.Tsit5, engine).Grad(nil, &pt, lt, nil)
	if err != nil {
		t.Fatal(err)
	}
	gr, err := solver(ode.Rodas5P, engine).Grad(nil, &pr, lr, nil)
	if err != nil {
		t.Fatal(err)
	}
	sv := solver(ode.Auto, engine)
	var tr Trace
	ctx := WithTrace(context.Background(), &tr)
	g, err := sv.GradContext(ctx, nil, &p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	gradTraj := tr.Stats().Trajectories - tr.Stats().Reruns
	check := func(what string, g *ode.Gradient) {
		t.Helper()
		m := g.Mesh
		if m.Method != ode.Auto || g.Solution.Method != "Auto" || m.Switch == nil || m.Resident != nil {
			t.Fatalf("%s: mesh method %v, solution method %s, switch %v, resident %v; want Auto with Switch, on the host", what, m.Method, g.Solution.Method, m.Switch, m.Resident != nil)
		}
		for _, part := range []struct {
			idx []int
			g   *ode.Gradient
		}{{tsit, gt}, {stiff, gr}} {
			odetest.SameRows(t, what+": dL/dY0", g.Y0, part.g.Y0, 2, part.idx)
			odetest.SameRows(t, what+": dL/dP", g.P, part.g.P, 1, part.idx)
			odetest.SameRows(t, what+": Y", g.Solution.Y, part.g.Solution.Y, 2, part.idx)
			odetest.SameRows(t, what+": Ys", g.Solution.Ys, part.g.Solution.Ys, 4, part.idx)
			pm := part.g.Mesh
			if err := pm.Host(); err != nil {
				t.Fatal(err)
			}
			for j, i := range part.idx {
				want := pm.Len[j]
				if part.g == gr {
					want = 0
				}
				if m.Len[i] != pm.Len[j] || m.Switch[i] != want || m.Stiff[i] {
					t.Fatalf("%s: trajectory %d: Len %d, Switch %d, Stiff %v; want %d, %d, false", what, i, m.Len[i], m.Switch[i], m.Stiff[i], pm.Len[j], want)
				}
				for s := 0; s < pm.Len[j]; s++ {
					if m.H[s*m.N+i] != pm.H[s*pm.N+j] {
						t.Fatalf("%s: trajectory %d, step %d: %v, want %v", what, i, s, m.H[s*m.N+i], pm.H[s*pm.N+j])
					}
				}
			}
		}
		if want := gt.Loss + gr.Loss; math.Float64bits(g.Loss) != math.Float64bits(want) {
			t.Errorf("%s: loss %v, want the parts' %v + %v = %v", what, g.Loss, gt.Loss, gr.Loss, want)
		}
		if want := gt.Shared[0] + gr.Shared[0]; math.Float64bits(g.Shared[0]) != math.Float64bits(want) {
			t.Errorf("%s: dL/dShared %v, want the parts' %v + %v = %v", what, g.Shared[0], gt.Shared[0], gr.Shared[0], want)
		}
	}
	check("Grad", g)
	// The Tsit5 pass (all N), Tsit5 again on the N − S others for sums
	// without the stopped ones, Rodas5P on the S stiff ones.
	if want := p.N + len(tsit) + len(stiff); gradTraj != want {
		t.Errorf("Grad launched %d trajectories, want %d (N + (N − S) + S)", gradTraj, want)
	}
	tr.Reset()
	sol, err := sv.SolveContext(ctx, &p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tr.Stats().Trajectories-tr.Stats().Reruns, p.N+len(stiff); got != want {
		t.Errorf("Solve launched %d trajectories, want %d (N + S: only the stiff ones again)", got, want)
	}
	t.Logf("trajectories launched for N = %d, S = %d: Grad %d, Solve %d", p.N, len(stiff), gradTraj, p.N+len(stiff))

	// Determinism, a Gradient passed back, and the other operations.
	g2, err := sv.Grad(nil, &p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("Grad again", g2)
	m, rec, err := sv.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	lv, _, err := sv.Loss(&p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lv != g.Loss {
		t.Errorf("Loss %v, Grad's %v", lv, g.Loss)
	}
	rep, err := sv.Replay(&p, m)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*ode.Solution{"Solve": sol, "Record": rec, "Replay": rep} {
		if name == "Record" && len(s.Ys) == 0 {
			s.Ys = g.Solution.Ys // the engine's record returns no saved states
		}
		if !slices.Equal(s.Y, g.Solution.Y) || !slices.Equal(s.Ys, g.Solution.Ys) || s.Method != "Auto" {
			t.Errorf("%s: states differ from Grad's bit for bit (method %s)", name, s.Method)
		}
	}
	gm, err := sv.Grad(nil, &p, loss, m)
	if err != nil {
		t.Fatal(err)
	}
	check("Grad on the merged mesh", gm)
	if _, err := sv.Grad(g2, &p, loss, nil); err != nil {
		t.Fatal(err)
	}
	check("Grad into the last Gradient", g2)

	// The CPU engine replays the merged mesh in place (Switch 0 is
	// Rodas5P from T0): the same map, within the device's rounding.
	cpu := solver(ode.Auto, "cpu")
	gc, err := cpu.Grad(nil, &p, loss, m)
	if err != nil {
		t.Fatal(err)
	}
	closeRows(t, "cpu on the merged mesh: dL/dY0", gc.Y0, g.Y0, 2, 1e-10, nil)
	closeRows(t, "cpu on the merged mesh: dL/dP", gc.P, g.P, 1, 1e-10, nil)
	closeRows(t, "cpu on the merged mesh: dL/dShared", gc.Shared, g.Shared, 1, 1e-10, nil)
	closeRows(t, "cpu on the merged mesh: loss", []float64{gc.Loss}, []float64{g.Loss}, 1, 1e-12, nil)
	// The CPU's own Auto switches in place: another mesh, the same
	// solution within the tolerance.
	cs, err := cpu.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	closeRows(t, "cpu's own Auto: Ys", cs.Ys, sol.Ys, 4, 1e-4, nil)

	// Grad against central differences of Loss on the merged mesh.
	fd := func(what string, x []float64, k int, want float64) {
		old := x[k]
		h := 1e-6 * math.Max(math.Abs(old), 1)
		x[k] = old + h
		lp, _, err := sv.Loss(&p, loss, m)
		if err != nil {
			t.Fatal(err)
		}
		x[k] = old - h
		lm, _, err := sv.Loss(&p, loss, m)
		if err != nil {
			t.Fatal(err)
		}
		x[k] = old
		d := (lp - lm) / (2 * h)
		if tol := 1e-6*math.Abs(want) + 1e-14*math.Abs(lp)/h; math.Abs(d-want) > tol {
			t.Errorf("%s[%d]: gradient %v, central difference %v (tolerance %.2g)", what, k, want, d, tol)
		}
	}
	p.Y0, p.P, p.Shared = slices.Clone(p.Y0), slices.Clone(p.P), slices.Clone(p.Shared)
	for _, i := range []int{0, 1, 6, 7} {
		fd("P", p.P, i, g.P[i])
		fd("Y0", p.Y0, 2*i, g.Y0[2*i])
	}
	fd("Shared", p.Shared, 0, g.Shared[0])
}

// TestHostEngineAutoResident checks Method Auto's meshes of one method
// on cuda-host: an ensemble without a stiff trajectory and one that is
// all stiff keep their meshes on the device (Tsit5's and Rodas5P's, as
// before), and a replay there uses them in place; a mesh the CPU engine
// switched partway is refused with an error naming the CPU engine.
func TestHostEngineAutoResident(t *testing.T) {
	needHost(t)
	p, loss := autoMixed(6)
	sv, err := ode.NewSolver(p.Field, &ode.Settings{Method: ode.Auto, Engine: "cuda-host"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rows   []int
		method string
	}{{[]int{1, 3, 5}, "Tsit5"}, {[]int{0, 2, 4}, "Rodas5P"}} {
		q, l := odetest.Rows(p, loss, c.rows)
		m, sol, err := sv.Record(&q)
		if err != nil {
			t.Fatal(err)
		}
		if m.Resident == nil || m.Switch != nil || sol.Method != c.method {
			t.Errorf("all %s: resident %v, switch %v, method %s; want a resident %s mesh", c.method, m.Resident != nil, m.Switch, sol.Method, c.method)
		}
		g, err := sv.Grad(nil, &q, l, m)
		if err != nil {
			t.Fatal(err)
		}
		g0, err := sv.Grad(nil, &q, l, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(g.Y0, g0.Y0) || g.Loss != g0.Loss {
			t.Errorf("all %s: Grad on the resident mesh differs from Grad with the record", c.method)
		}
	}
	cm, err := ode.Record(p, &ode.Settings{Method: ode.Auto})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Replay(&p, cm); err == nil {
		t.Errorf("cuda-host replayed a mesh switched partway on the cpu engine")
	} else {
		t.Logf("a mesh switched partway: %v", err)
	}
}
