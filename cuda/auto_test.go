package cuda

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Method Auto on the GPU engine (here on the host backend): it cannot
// switch a trajectory's method in place, so package ode runs the Tsit5
// pass, which stops each trajectory whose stiffness test fires, then
// those alone on with Rodas5P from where they stopped (their own start
// times, ode.Job.T0s), and merges the two (ode/auto_continue.go).

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

// autoRobertson returns n trajectories of Robertson's kinetics on [0,
// 10] with save times 1 and 5: the classic rate constants (stiff from
// the start) for even i, slow ones (k2 = 0.3, k3 = 0.1: not stiff) for
// odd i, k1 varied; and a loss of the final and saved states.
func autoRobertson(n int) (ode.Problem, ode.Loss) {
	rb := problems.Robertson()
	rng := rand.New(rand.NewPCG(5, 25))
	p := ode.Problem{Field: rb.Field, N: n, Y0: rb.Y0, T1: 10, SaveAt: []float64{1, 5}}
	for i := 0; i < n; i++ {
		k1 := 0.03 + 0.02*rng.Float64()
		if i%2 == 1 {
			p.P = append(p.P, k1, 0.3, 0.1)
		} else {
			p.P = append(p.P, k1, 3e7, 1e4)
		}
	}
	loss := ode.Loss{Name: "rob", F: func(y, ys, _ []tape.V) tape.V {
		l := y[0].Square().Add(y[1].MulC(1e4)).Add(y[2].Square())
		for k := 0; k < len(ys)/3; k++ {
			l = l.Add(ys[3*k+2].MulC(float64(k + 1)))
		}
		return l
	}}
	return p, loss
}

// TestHostEngineAutoContinue checks Method Auto on cuda-host, which
// continues a trajectory whose stiffness test fires with Rodas5P from
// where it fired (ode/auto_continue.go: the Rodas5P jobs start at the
// trajectories' own times, Job.T0s), on a mixed Van der Pol ensemble and
// a mixed Robertson one: against the CPU engine's switch in place
// (odetest.AutoContinue: the same mesh lengths, switch points and
// counts; states, loss and gradients within 1e-10 relative; Grad against
// central differences), the trajectories that never turn stiff untouched
// (their rows Tsit5's alone on them, bit for bit), the trajectories
// launched (Trace), determinism, a Gradient passed back, and Solve,
// Record, Replay and Loss consistent with Grad.
func TestHostEngineAutoContinue(t *testing.T) {
	needHost(t)
	const engine = "cuda-host"
	rp, rl := autoRobertson(6)
	odetest.AutoContinue(t, engine, rp, rl, 1e-10, 1e-6)

	p, loss := autoMixed(8)
	odetest.AutoContinue(t, engine, p, loss, 1e-10, 1e-6)
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
	gt, err := solver(ode.Tsit5, engine).Grad(nil, &pt, lt, nil)
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
	if st := tr.Stats(); st.Reruns == 0 && st.Launches != 6 {
		t.Errorf("Grad made %d launches, want 6 (the Tsit5 pass, the others' replay, and for the stiff ones the Rodas5P record, its replay, both segments' gradients)", st.Launches)
	}
	check := func(what string, g2 *ode.Gradient) {
		t.Helper()
		m := g2.Mesh
		if m.Method != ode.Auto || g2.Solution.Method != "Auto" || m.Switch == nil {
			t.Fatalf("%s: mesh method %v, solution method %s, switch %v; want Auto with Switch", what, m.Method, g2.Solution.Method, m.Switch)
		}
		// The trajectories that never turn stiff: Tsit5's alone.
		odetest.SameRows(t, what+": dL/dY0", g2.Y0, gt.Y0, 2, tsit)
		odetest.SameRows(t, what+": dL/dP", g2.P, gt.P, 1, tsit)
		odetest.SameRows(t, what+": Y", g2.Solution.Y, gt.Solution.Y, 2, tsit)
		odetest.SameRows(t, what+": Ys", g2.Solution.Ys, gt.Solution.Ys, 4, tsit)
		if err := gt.Mesh.Host(); err != nil {
			t.Fatal(err)
		}
		for j, i := range tsit {
			if m.Len[i] != gt.Mesh.Len[j] || m.Switch[i] != m.Len[i] || m.Stiff[i] {
				t.Fatalf("%s: trajectory %d: Len %d, Switch %d, Stiff %v; want %d, Len, false", what, i, m.Len[i], m.Switch[i], m.Stiff[i], gt.Mesh.Len[j])
			}
		}
		for _, i := range stiff {
			if m.Switch[i] == 0 || m.Switch[i] >= m.Len[i] {
				t.Fatalf("%s: trajectory %d: Switch %d of %d steps; want a switch within them", what, i, m.Switch[i], m.Len[i])
			}
		}
		if !slices.Equal(g2.Y0, g.Y0) || !slices.Equal(g2.P, g.P) || !slices.Equal(g2.Shared, g.Shared) || g2.Loss != g.Loss {
			t.Errorf("%s: the gradient differs from the first Grad's", what)
		}
	}
	check("Grad", g)
	// The Tsit5 pass (all N), Tsit5 again on the N − S others for sums
	// without the stopped ones; for the S stiff ones the Rodas5P record
	// from the switch times, its replay for the saves (the engine's
	// record returns none), and the two segments' gradients.
	if want := p.N + len(tsit) + 4*len(stiff); gradTraj != want {
		t.Errorf("Grad launched %d trajectories, want %d (N + (N − S) + 4S)", gradTraj, want)
	}
	tr.Reset()
	sol, err := sv.SolveContext(ctx, &p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tr.Stats().Trajectories-tr.Stats().Reruns, p.N+len(stiff); got != want {
		t.Errorf("Solve launched %d trajectories, want %d (N + S: only the stiff ones again, from their switch)", got, want)
	}
	if st := tr.Stats(); st.Reruns == 0 && st.Launches != 2 {
		t.Errorf("Solve made %d launches, want 2", st.Launches)
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
}

// TestHostEngineAutoResident checks Method Auto's meshes on cuda-host:
// an ensemble without a stiff trajectory keeps its mesh (Tsit5's) on the
// device, and a replay there uses it in place; one whose trajectories
// all turn stiff switches each within its steps (a mesh of both methods,
// its Rodas5P steps left on the device), and a replay of it gives Grad's
// with the record, bit for bit; a mesh the CPU engine switched partway is replayed as its two
// segments, chained.
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
		switch {
		case c.method == "Tsit5" && (m.Resident == nil || m.Switch != nil || sol.Method != c.method):
			t.Errorf("no stiff trajectory: resident %v, switch %v, method %s; want a resident Tsit5 mesh", m.Resident != nil, m.Switch, sol.Method)
		case c.method == "Rodas5P" && (m.Resident == nil || m.H != nil || m.Switch == nil || sol.Method != "Auto"):
			// Its Rodas5P steps stay on the device until the mesh is
			// read (ode/auto_continue.go: joinSegs).
			t.Errorf("all stiff: resident %v, switch %v, method %s; want a resident mesh of Method Auto", m.Resident != nil, m.Switch, sol.Method)
		case c.method == "Rodas5P":
			for i, sw := range m.Switch {
				if sw == 0 || sw >= m.Len[i] {
					t.Errorf("all stiff: trajectory %d switched at step %d of %d; want within its steps", i, sw, m.Len[i])
				}
			}
		}
		g, err := sv.Grad(nil, &q, l, m)
		if err != nil {
			t.Fatal(err)
		}
		g0, err := sv.Grad(nil, &q, l, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(g.Y0, g0.Y0) || !slices.Equal(g.P, g0.P) || g.Loss != g0.Loss {
			t.Errorf("%s rows: Grad on the mesh differs from Grad with the record", c.method)
		}
		if c.method == "Rodas5P" {
			// Passed back, the Gradient's mesh is replaced: its steps
			// left on the device go back at once.
			old := g0.Mesh
			g1, err := sv.Grad(g0, &q, l, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !old.Resident.Released() || g1.Mesh.Resident == nil || g1.Mesh.Resident.Released() {
				t.Errorf("Gradient passed back: old mesh's steps released %v; new mesh resident %v", old.Resident.Released(), g1.Mesh.Resident != nil)
			}
			if !slices.Equal(g1.Y0, g.Y0) || !slices.Equal(g1.P, g.P) || g1.Loss != g.Loss {
				t.Errorf("Gradient passed back: the gradient differs from the first Grad's")
			}
			// Passed back again, the Tsit5 pass and the Rodas5P record
			// refill its meshes' device memory (no allocation: the
			// arenas are kept too), and the mesh and the gradient are a
			// fresh Grad's, bit for bit.
			hb := hostF64.be.(*hostBackend)
			before := hb.counts().allocs
			g2, err := sv.Grad(g1, &q, l, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n := hb.counts().allocs - before; n != 0 {
				t.Errorf("Gradient passed back again: %d device allocations, want none", n)
			}
			fresh, err := sv.Grad(nil, &q, l, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(g2.Y0, fresh.Y0) || !slices.Equal(g2.P, fresh.P) || g2.Loss != fresh.Loss {
				t.Errorf("Gradient passed back again: the gradient differs from a fresh Grad's")
			}
			if err := errors.Join(g2.Mesh.Host(), fresh.Mesh.Host()); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(g2.Mesh.H, fresh.Mesh.H) || !slices.Equal(g2.Mesh.Len, fresh.Mesh.Len) || !slices.Equal(g2.Mesh.Switch, fresh.Mesh.Switch) {
				t.Errorf("Gradient passed back again: its mesh differs from a fresh Grad's")
			}
		}
	}
	// A mesh the CPU engine switched partway: its two segments chained
	// (ode/auto_continue.go), the CPU's replay within the rounding.
	cm, err := ode.Record(p, &ode.Settings{Method: ode.Auto})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sv.Replay(&p, cm)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ode.Replay(p, cm, &ode.Settings{Method: ode.Auto})
	if err != nil {
		t.Fatal(err)
	}
	odetest.Close(t, "a mesh switched partway: Y", rep.Y, want.Y, 1e-10)
	odetest.Close(t, "a mesh switched partway: Ys", rep.Ys, want.Ys, 1e-10)
}

// TestHostEngineAutoReuse checks Method Auto's Grad on a mixed ensemble
// (some trajectories continued with Rodas5P, the others replayed on the
// Tsit5 pass's steps) with the Gradient passed back, on cuda-host and
// on Robertson's ensemble and the mixed Van der Pol one: from the third
// call on (the second keeps the pass's mesh with its own) no device
// allocation a call, the pass's mesh, both gathers of its columns and
// the Rodas5P record written into the memory of the result passed back
// (ode's autoMem); the gradient, the loss and the mesh those of a fresh
// Grad bit for bit; and Mesh.Host gives every block back.
func TestHostEngineAutoReuse(t *testing.T) {
	needHost(t)
	hb := hostF64.be.(*hostBackend)
	rp, rl := autoRobertson(6)
	vp, vl := autoMixed(6)
	for _, c := range []struct {
		name string
		p    ode.Problem
		loss ode.Loss
	}{{"robertson", rp, rl}, {"vdp", vp, vl}} {
		t.Run(c.name, func(t *testing.T) {
			sv, err := ode.NewSolver(c.p.Field, &ode.Settings{Method: ode.Auto, Engine: "cuda-host"})
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := sv.Grad(nil, &c.p, c.loss, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := fresh.Mesh.Host(); err != nil {
				t.Fatal(err)
			}
			cont, tsit := 0, 0
			for i, sw := range fresh.Mesh.Switch {
				switch l := fresh.Mesh.Len[i]; {
				case sw == l:
					tsit++
				case sw > 0 && sw < l:
					cont++
				}
			}
			if cont == 0 || tsit == 0 || cont+tsit != c.p.N {
				t.Fatalf("switches %v of %v steps: want some trajectories continued, the others Tsit5's alone", fresh.Mesh.Switch, fresh.Mesh.Len)
			}
			base := settledResident(hb)
			var g ode.Gradient
			for call := range 4 {
				before := hb.counts().allocs
				if _, err := sv.Grad(&g, &c.p, c.loss, nil); err != nil {
					t.Fatal(err)
				}
				if n := hb.counts().allocs - before; call >= 2 && n != 0 {
					t.Errorf("call %d with the Gradient passed back: %d device allocations, want none", call, n)
				}
				if !slices.Equal(g.Y0, fresh.Y0) || !slices.Equal(g.P, fresh.P) || !slices.Equal(g.Shared, fresh.Shared) || g.Loss != fresh.Loss {
					t.Errorf("call %d with the Gradient passed back: the gradient differs from a fresh Grad's", call)
				}
			}
			// (The mesh's own handle, not the backend's total: a
			// collection during the calls may free an earlier test's
			// unreachable device memory.)
			if g.Mesh.Resident == nil {
				t.Errorf("the Gradient's mesh holds no device memory")
			}
			// Host copies the steps over and gives the mesh's device
			// memory back, the pass's mesh that it kept too.
			if err := g.Mesh.Host(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(g.Mesh.H, fresh.Mesh.H) || !slices.Equal(g.Mesh.Len, fresh.Mesh.Len) || !slices.Equal(g.Mesh.Switch, fresh.Mesh.Switch) {
				t.Errorf("the mesh of the Gradient passed back differs from a fresh Grad's")
			}
			if left := residentOn(hb) - base; left > 0 {
				t.Errorf("after Mesh.Host, %d bytes of device memory held by the calls' meshes; want none", left)
			}
		})
	}
}

// TestHostEngineStopTimes checks that a gradient's record that stops
// trajectories where their stiffness test fires (Job.StopOnStiff: Grad
// with Tsit5, which refuses them; not Job.Continues, so its times and
// last steps stay on the device while every trajectory ends OK) reads
// the stopped ones' times in at most one batch after its results:
// Tsit5's Grad on Robertson's mixed ensemble on cuda-host takes at most
// one batch more than on its non-stiff rows alone, which stop none, and
// its error names the trajectory and the time (within 1e-10) where the
// CPU engine stops it. (Method Auto's pass, Job.Continues, copies them
// with its results: run.stopsBack.)
func TestHostEngineStopTimes(t *testing.T) {
	needHost(t)
	hb := hostF64.be.(*hostBackend)
	p, loss := autoRobertson(6)
	calm := p // its non-stiff rows (odd i)
	calm.N, calm.P = 3, nil
	for i := 1; i < p.N; i += 2 {
		calm.P = append(calm.P, p.P[3*i:3*i+3]...)
	}
	batches := func(e string, q ode.Problem) (int, error) {
		hb.mu.Lock()
		b0 := hb.batches
		hb.mu.Unlock()
		_, err := ode.Grad(nil, q, loss, nil, &ode.Settings{Method: ode.Tsit5, Engine: e})
		hb.mu.Lock()
		defer hb.mu.Unlock()
		return hb.batches - b0, err
	}
	if _, err := batches("cuda-host", calm); err != nil { // (the kernels compiled)
		t.Fatal(err)
	}
	ok, err := batches("cuda-host", calm)
	if err != nil {
		t.Fatal(err)
	}
	stopped, err := batches("cuda-host", p)
	var te, want *ode.TrajectoryError
	if !errors.As(err, &te) || te.Status != ode.Stiff {
		t.Fatalf("Tsit5's Grad of a stiff ensemble: error %v, want a trajectory stopped stiff", err)
	}
	_, cerr := ode.Grad(nil, p, loss, nil, &ode.Settings{Method: ode.Tsit5})
	if !errors.As(cerr, &want) || te.Index != want.Index {
		t.Fatalf("stopped at trajectory %d, t = %v; the CPU engine: %v", te.Index, te.T, cerr)
	}
	odetest.Close(t, "the time where it stopped", []float64{te.T}, []float64{want.T}, 1e-10)
	if stopped > ok+1 {
		t.Errorf("a Grad that stops trajectories stiff: %d batches; without stops %d, want at most one more", stopped, ok)
	}
}

// TestHostEngineAutoRestart checks Method Auto on cuda-host behind an
// executor without per-trajectory start times (restartEngine): the
// stiff trajectories run again from T0 with Rodas5P (Switch 0), their
// rows Rodas5P's alone on them bit for bit, the others Tsit5's.
func TestHostEngineAutoRestart(t *testing.T) {
	needHost(t)
	engine := restartEngine(hostF64)
	p, loss := autoMixed(4)
	tsit, stiff := []int{1, 3}, []int{0, 2}
	grad := func(m ode.Method, rows []int) *ode.Gradient {
		q, l := p, loss
		if rows != nil {
			q, l = odetest.Rows(p, loss, rows)
		}
		g, err := ode.Grad(nil, q, l, nil, &ode.Settings{Method: m, Engine: engine})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g, gt, gr := grad(ode.Auto, nil), grad(ode.Tsit5, tsit), grad(ode.Rodas5P, stiff)
	for _, part := range []struct {
		idx []int
		g   *ode.Gradient
	}{{tsit, gt}, {stiff, gr}} {
		odetest.SameRows(t, "dL/dY0", g.Y0, part.g.Y0, 2, part.idx)
		odetest.SameRows(t, "dL/dP", g.P, part.g.P, 1, part.idx)
	}
	for _, i := range stiff {
		if g.Mesh.Switch[i] != 0 {
			t.Errorf("trajectory %d: Switch %d, want 0 (restarted from T0)", i, g.Mesh.Switch[i])
		}
	}
}

// TestHostEngineAutoContinueEngines checks Method Auto's continuation on
// the other engines' host forms: cuda-multi over three fake devices (the
// shards' jobs take their rows of the start times) against the CPU
// engine's switch in place as TestHostEngineAutoContinue does (and
// cuda-host without save times: the Rodas5P segments' gradient fused
// with their record), and
// cuda-host-f32: the stiff trajectories switch within their steps, the
// others never, and the states and the gradient agree with the CPU
// engine's Auto at the same tolerance within float32's accuracy.
func TestHostEngineAutoContinueEngines(t *testing.T) {
	needHost(t)
	p, loss := autoMixed(8)
	odetest.AutoContinue(t, "cuda-multi-host3", p, loss, 1e-10, 1e-6)
	p0 := p
	p0.SaveAt = nil // the Rodas5P segments' record and gradient in one launch
	odetest.AutoContinue(t, "cuda-host", p0, loss, 1e-10, 1e-6)

	set := func(e string) *ode.Settings {
		return &ode.Settings{Method: ode.Auto, Engine: e, RelTol: 1e-4, AbsTol: 1e-6}
	}
	g32, err := ode.Grad(nil, p, loss, nil, set("cuda-host-f32"))
	if err != nil {
		t.Fatal(err)
	}
	g64, err := ode.Grad(nil, p, loss, nil, set("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	m := g32.Mesh
	for i := 0; i < p.N; i++ {
		stiff := i%2 == 0
		if stiff && (m.Switch[i] == 0 || m.Switch[i] >= m.Len[i]) || !stiff && m.Switch[i] != m.Len[i] {
			t.Errorf("f32: trajectory %d: Switch %d of %d steps (CPU: %d of %d)", i, m.Switch[i], m.Len[i], g64.Mesh.Switch[i], g64.Mesh.Len[i])
		}
	}
	t.Logf("f32 switches %v of %v steps; CPU %v of %v", m.Switch, m.Len, g64.Mesh.Switch, g64.Mesh.Len)
	odetest.Close(t, "f32: Y", g32.Solution.Y, g64.Solution.Y, 1e-2)
	odetest.Close(t, "f32: loss", []float64{g32.Loss}, []float64{g64.Loss}, 1e-2)
	odetest.Close(t, "f32: dL/dP", g32.P, g64.P, 5e-2)
}

// TestGPUAutoContinue is TestHostEngineAutoContinue's comparison with
// the CPU engine's switch in place (odetest.AutoContinue) on the GPU
// engine, on 64 trajectories of each mixed ensemble (two warps), and on
// cuda-multi where the host has two GPUs or more. It skips without a
// GPU.
//
//	go test ./cuda -run 'TestGPUAutoContinue' -v
func TestGPUAutoContinue(t *testing.T) {
	needGPUEngine(t)
	engines := []string{"cuda"}
	if NewMultiEngine("probe", nil, Float64).Available() == nil {
		if d, err := NewMultiEngine("probe", nil, Float64).Devices(); err == nil && len(d) > 1 {
			engines = append(engines, "cuda-multi")
		}
	}
	rp, rl := autoRobertson(64)
	vp, vl := autoMixed(64)
	for _, e := range engines {
		t.Run(e, func(t *testing.T) {
			// Step sizes within meshDeviations' 1e-4: the device's exp and
			// log differ from Go's in the last bit, which the stiff error
			// estimates amplify (an H100 gave 2.8e-6 on Robertson's
			// trajectory 18 at step 65; the host backend agrees to 1e-10).
			odetest.AutoContinue(t, e, rp, rl, 1e-10, 1e-4)
			odetest.AutoContinue(t, e, vp, vl, 1e-10, 1e-4)
		})
	}
}

// TestGPUAutoKeptGrads is TestHostEngineAutoKeptGrads' comparison on the
// GPU ("cuda", n = 1024): Method Auto's Grad keeping its Tsit5 pass's
// rows of the trajectories that did not stop gives, bit for bit, what
// the replay of those rows gives (replayEngine), with fewer trajectories
// launched. The calls run after a first one has compiled the kernels (a
// call served on the CPU engine meanwhile keeps nothing). It skips
// without a GPU.
//
//	go test ./cuda -run 'TestGPUAutoKeptGrads' -v
func TestGPUAutoKeptGrads(t *testing.T) {
	needGPUEngine(t)
	replay := replayEngine(registered[0])
	for _, c := range odetest.AutoCases(1024) {
		if c.Name != "mixed" && c.Name != "vdp-stiff" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			grad := func(engine string) (*ode.Gradient, TraceStats) {
				t.Helper()
				sv, err := ode.NewSolver(c.P.Field, &ode.Settings{Method: ode.Auto, RelTol: 1e-6, AbsTol: 1e-9, Engine: engine})
				if err != nil {
					t.Fatal(err)
				}
				var tr Trace
				var g *ode.Gradient
				for range 2 { // (the first compiles)
					tr.Reset()
					if g, err = sv.GradContext(WithTrace(context.Background(), &tr), nil, &c.P, ode.SumSquares(), nil); err != nil {
						t.Fatal(err)
					}
				}
				if g.Solution.Engine != engine {
					t.Fatalf("%s: served on %q", engine, g.Solution.Engine)
				}
				return g, tr.Stats()
			}
			g, st := grad("cuda")
			w, wst := grad(replay)
			if diff := sameGradient(t, g, w); diff != "" {
				t.Errorf("%s differs from the replay's (%s) bit for bit", diff, replay)
			}
			// Fewer trajectories launched where some are Tsit5's alone (every
			// one of the stiff Van der Pol ensemble switches since session
			// 53's stiffness test: nothing to keep there).
			tsit := 0
			for i, sw := range w.Mesh.Switch {
				if sw == w.Mesh.Len[i] {
					tsit++
				}
			}
			if w.Mesh.Switch == nil {
				tsit = c.P.N
			}
			if tsit > 0 && st.Trajectories >= wst.Trajectories || tsit == 0 && st.Trajectories != wst.Trajectories {
				t.Errorf("%d trajectories launched, the replay's %d (%d Tsit5's alone): want fewer where some are", st.Trajectories, wst.Trajectories, tsit)
			}
			t.Logf("launches %d (trajectories %d), the replay's %d (%d); %d of %d Tsit5's alone", st.Launches, st.Trajectories, wst.Launches, wst.Trajectories, tsit, c.P.N)
		})
	}
}

// TestHostEngineMeshColumns checks the gather of a resident mesh's
// columns on the device (residentMesh.Columns, the mesh columns' kernel)
// on cuda-host: random columns, in any order, with random lengths, give
// the same steps as the same gather on the host from the mesh's copy,
// zeros past each length; the source stays on the device; bad arguments
// and a released source are refused.
func TestHostEngineMeshColumns(t *testing.T) {
	needHost(t)
	pm, lm := autoMixed(46)
	var calm []int
	for i := 1; i < pm.N; i += 2 {
		calm = append(calm, i)
	}
	p, _ := odetest.Rows(pm, lm, calm) // (not stiff)
	sv, err := ode.NewSolver(p.Field, &ode.Settings{Method: ode.Tsit5, Engine: "cuda-host"})
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := sv.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	rm, ok := m.Resident.(*residentMesh)
	if !ok {
		t.Fatalf("the record's mesh is not resident on the device (%T)", m.Resident)
	}
	src := make([]float64, m.Rows*m.N)
	if err := rm.CopyTo(src); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(38, 1))
	hb := hostF64.be.(*hostBackend)
	for _, k := range []int{1, 5, 23} {
		cols := rng.Perm(m.N)[:k]
		lens := make([]int, k)
		rows := 0
		for x, c := range cols {
			lens[x] = rng.IntN(m.Len[c] + 1)
			rows = max(rows, lens[x])
		}
		rows += rng.IntN(3)
		rows = min(rows, m.Rows)
		want := make([]float64, rows*k)
		for x, c := range cols {
			for r := 0; r < lens[x]; r++ {
				want[r*k+x] = src[r*m.N+c]
			}
		}
		g, err := rm.Columns(cols, lens, rows, nil)
		if err != nil {
			t.Fatal(err)
		}
		check := func(what string, g ode.ResidentSteps) {
			got := make([]float64, rows*k)
			for i := range got {
				got[i] = 7 // (overwritten: zeros past the lengths come from the device)
			}
			if err := g.CopyTo(got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("k = %d, %s: the gathered columns differ from the host's gather", k, what)
			}
		}
		check("new", g)
		// The same gather given g back: written into its memory (no
		// allocation), the steps the same. Given a result too small: a
		// new one, that left as it is.
		before := hb.counts().allocs
		again, err := rm.Columns(cols, lens, rows, g)
		if err != nil {
			t.Fatal(err)
		}
		if again != g || hb.counts().allocs != before {
			t.Errorf("k = %d: a gather given an earlier result of its size back: %d allocations, the same memory %v; want none, true", k, hb.counts().allocs-before, again == g)
		}
		check("reused", again)
		if k*(rows+1) > 2 {
			small, err := rm.Columns(cols[:1], []int{0}, 1, nil) // (room for 2 steps)
			if err != nil {
				t.Fatal(err)
			}
			r, err := rm.Columns(cols, lens, rows, small)
			if err != nil {
				t.Fatal(err)
			}
			if r == small || small.Released() {
				t.Errorf("k = %d: a gather given a result too small back: it was returned %v, released %v; want neither", k, r == small, small.Released())
			}
			check("past a small one", r)
			r.Release()
			small.Release()
		}
		g.Release()
	}
	if rm.Released() {
		t.Errorf("the gather released the source mesh")
	}
	if _, err := rm.Columns([]int{m.N}, []int{0}, 1, nil); err == nil {
		t.Errorf("a column past the mesh's: no error")
	}
	if _, err := rm.Columns([]int{0}, []int{rm.rows + 1}, rm.rows+1, nil); err == nil {
		t.Errorf("more rows than the mesh's buffer: no error")
	}
	rm.Release()
	if _, err := rm.Columns([]int{0}, []int{1}, 1, nil); err == nil {
		t.Errorf("a released mesh's columns: no error")
	}
}

// TestHostEngineAutoSpare checks Method Auto's Grad with the Gradient
// passed back, on cuda-host, where the continuation's jobs write into the
// host arrays of the last call's jobs that its result did not hold
// (ode's autoSpare) and, every trajectory stopping, the Tsit5 segments'
// gradient into the Gradient's own arrays: on a stiff Robertson ensemble
// without save times (the Rodas5P segment's record, gradient and loss in
// one job), with save times (record, replay and gradient apart), and on
// the mixed Van der Pol ensemble (some continued, the others replayed).
// Eight calls in a row give a fresh Grad's gradient, loss, states,
// counts, statuses and mesh lengths and switches bit for bit, the fresh
// Grad the CPU engine's within 1e-10; on the stiff ensemble without save
// times the final states of the sixth call on come in arrays of earlier
// calls (each one's kept by the test, so that no new array can reuse a
// freed one's address): the spare arrays go round instead of one new
// array a call. (With save times the continuation's five jobs take
// more arrays than come back: some are still new each call.)
func TestHostEngineAutoSpare(t *testing.T) {
	needHost(t)
	stiff := func(saves []float64) (ode.Problem, ode.Loss) {
		p, loss := autoRobertson(6)
		p.P = slices.Clone(p.P)
		for i := 1; i < p.N; i += 2 {
			p.P[3*i+1], p.P[3*i+2] = 3e7, 1e4 // stiff from the start, as the even ones
		}
		p.SaveAt = saves
		return p, loss
	}
	rp, rl := stiff(nil)
	sp, sl := stiff([]float64{1, 5})
	vp, vl := autoMixed(6)
	for _, c := range []struct {
		name  string
		p     ode.Problem
		loss  ode.Loss
		cycle bool // every trajectory stops, no save times: the states' arrays go round
	}{{"robertson", rp, rl, true}, {"robertson-saves", sp, sl, false}, {"vdp-mixed", vp, vl, false}} {
		t.Run(c.name, func(t *testing.T) {
			sv, err := ode.NewSolver(c.p.Field, &ode.Settings{Method: ode.Auto, Engine: "cuda-host"})
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := sv.Grad(nil, &c.p, c.loss, nil)
			if err != nil {
				t.Fatal(err)
			}
			cpu, err := ode.Grad(nil, c.p, c.loss, nil, &ode.Settings{Method: ode.Auto})
			if err != nil {
				t.Fatal(err)
			}
			odetest.Close(t, "fresh dL/dy0 against the CPU engine's", fresh.Y0, cpu.Y0, 1e-10)
			odetest.Close(t, "fresh dL/dp against the CPU engine's", fresh.P, cpu.P, 1e-10)
			odetest.Close(t, "fresh loss against the CPU engine's", []float64{fresh.Loss}, []float64{cpu.Loss}, 1e-10)
			var g ode.Gradient
			var kept [][]float64 // every call's final states (none freed)
			seen := map[*float64]bool{}
			for call := range 8 {
				if _, err := sv.Grad(&g, &c.p, c.loss, nil); err != nil {
					t.Fatal(err)
				}
				s, fs := g.Solution, fresh.Solution
				switch {
				case !slices.Equal(g.Y0, fresh.Y0) || !slices.Equal(g.P, fresh.P) || !slices.Equal(g.Shared, fresh.Shared) || g.Loss != fresh.Loss:
					t.Errorf("call %d: the gradient or the loss differs from a fresh Grad's", call)
				case !slices.Equal(s.Y, fs.Y) || !slices.Equal(s.Ys, fs.Ys) || !slices.Equal(s.Status, fs.Status):
					t.Errorf("call %d: the states or statuses differ from a fresh Grad's", call)
				case !slices.Equal(s.Stats.Accepted, fs.Stats.Accepted) || !slices.Equal(s.Stats.Rejected, fs.Stats.Rejected) || !slices.Equal(s.Stats.FieldEvals, fs.Stats.FieldEvals):
					t.Errorf("call %d: the counts differ from a fresh Grad's", call)
				case !slices.Equal(g.Mesh.Len, fresh.Mesh.Len) || !slices.Equal(g.Mesh.Switch, fresh.Mesh.Switch):
					t.Errorf("call %d: the mesh's lengths or switches differ from a fresh Grad's", call)
				}
				kept = append(kept, s.Y)
				if c.cycle && call >= 5 && !seen[&s.Y[0]] {
					t.Errorf("call %d: the final states in a new array, none of the last calls' (want the continuation's spare arrays to go round)", call)
				}
				seen[&s.Y[0]] = true
			}
			t.Logf("final states in %d arrays over %d calls", len(seen), len(kept))
		})
	}
}

// replayEngine registers (once) and returns the name of an engine that
// runs e behind an executor that runs per-trajectory start times but does
// not report ode.StopGradsExecutor, "<e's name>-replay": Method Auto there
// continues the stiff trajectories as on e, but replays the Tsit5 pass's
// others for their loss and gradient instead of keeping that pass's rows
// of them (as before issue 25's kept rows). It shares e's device and
// kernels.
func replayEngine(e ode.Engine) string {
	name := e.Name() + "-replay"
	restartMu.Lock()
	defer restartMu.Unlock()
	if !restartDone[name] {
		ode.Register(replayWrap{e, name})
		restartDone[name] = true
	}
	return name
}

type replayWrap struct {
	ode.Engine
	name string
}

func (e replayWrap) Name() string { return e.name }

func (e replayWrap) Prepare(p *ode.Plan) (ode.Executor, error) {
	ex, err := e.Engine.Prepare(p)
	if err != nil {
		return nil, err
	}
	return replayExec{ex}, nil
}

// replayExec hides the executor's StopGrads (and its other optional
// methods but StartTimes).
type replayExec struct{ ode.Executor }

func (replayExec) StartTimes() bool { return true }

// sameGradient reports the first difference, bit for bit, between two
// Method Auto Gradients (their meshes brought to the host), or "".
func sameGradient(t *testing.T, g, w *ode.Gradient) string {
	t.Helper()
	s, ws := g.Solution, w.Solution
	for _, m := range []*ode.Mesh{g.Mesh, w.Mesh} {
		if err := m.Host(); err != nil {
			t.Fatal(err)
		}
	}
	switch {
	case !slices.Equal(g.Y0, w.Y0) || !slices.Equal(g.P, w.P) || !slices.Equal(g.Shared, w.Shared) || math.Float64bits(g.Loss) != math.Float64bits(w.Loss):
		return "the gradient or the loss"
	case !slices.Equal(s.Y, ws.Y) || !slices.Equal(s.Ys, ws.Ys) || !slices.Equal(s.T, ws.T) || !slices.Equal(s.Status, ws.Status):
		return "the states, times or statuses"
	case !slices.Equal(s.Stats.Accepted, ws.Stats.Accepted) || !slices.Equal(s.Stats.Rejected, ws.Stats.Rejected) || !slices.Equal(s.Stats.FieldEvals, ws.Stats.FieldEvals):
		return "the counts"
	case !slices.Equal(s.Switch, ws.Switch) || !slices.Equal(s.Stiff, ws.Stiff) || s.Method != ws.Method:
		return "the switches, stiffness flags or method"
	case !slices.Equal(g.Mesh.H, w.Mesh.H) || !slices.Equal(g.Mesh.Len, w.Mesh.Len) || !slices.Equal(g.Mesh.Switch, w.Mesh.Switch) || !slices.Equal(g.Mesh.Status, w.Mesh.Status):
		return "the mesh"
	}
	return ""
}

// TestHostEngineAutoKeptGrads checks Method Auto's gradient and loss on
// cuda-host, whose Tsit5 pass completes the trajectories that do not
// stop (ode.StopGradsExecutor: their rows of that pass are kept, not
// replayed), against the same engine behind replayEngine (the replay of
// those trajectories, as before), bit for bit: gradient, loss, states,
// counts and mesh, on ensembles without shared parameters (odetest's
// mixed and stiff Van der Pol, without and with save times), one launch
// fewer; against the CPU engine's switch in place within 1e-10; and with
// the Gradient passed back, the same again with no device allocation
// after the second call; the same on two fake devices (cuda-multi). With
// a shared parameter (autoMixed) the pass's rows are not kept (their sum
// would be the kernel's reduction), and nothing changes.
func TestHostEngineAutoKeptGrads(t *testing.T) {
	needHost(t)
	hb := hostF64.be.(*hostBackend)
	replay := replayEngine(hostF64)
	cases := odetest.AutoCases(16)
	var mixed, stiffVdP ode.Problem
	for _, c := range cases {
		switch c.Name {
		case "mixed":
			mixed = c.P
		case "vdp-stiff":
			stiffVdP = c.P
		}
	}
	saves := mixed
	saves.SaveAt = []float64{0.5, 1.5}
	data := make([]float64, saves.N)
	for i := range data {
		data[i] = 0.1 * float64(i+1)
	}
	dataLoss := ode.Loss{Name: "kept", DataDim: 1, Data: data, F: func(y, ys, d []tape.V) tape.V {
		l := y[0].Square().Add(y[1].Square()).Add(d[0].Mul(y[0]))
		for k := 0; k < len(ys)/2; k++ {
			l = l.Add(ys[2*k].MulC(float64(k + 1)))
		}
		return l
	}}
	shared, sharedLoss := autoMixed(8)
	for _, c := range []struct {
		name string
		p    ode.Problem
		loss ode.Loss
		keep bool // the pass's rows kept (no shared parameter)
	}{
		{"mixed", mixed, ode.SumSquares(), true},
		{"vdp-stiff", stiffVdP, ode.SumSquares(), true},
		{"mixed-saves", saves, dataLoss, true},
		{"shared", shared, sharedLoss, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			grad := func(engine string, g *ode.Gradient) (*ode.Gradient, TraceStats) {
				t.Helper()
				sv, err := ode.NewSolver(c.p.Field, &ode.Settings{Method: ode.Auto, Engine: engine})
				if err != nil {
					t.Fatal(err)
				}
				var tr Trace
				g, err = sv.GradContext(WithTrace(context.Background(), &tr), g, &c.p, c.loss, nil)
				if err != nil {
					t.Fatal(err)
				}
				return g, tr.Stats()
			}
			g, st := grad("cuda-host", nil)
			w, wst := grad(replay, nil)
			tsit, cont := 0, 0
			for i, sw := range w.Mesh.Switch {
				switch l := w.Mesh.Len[i]; {
				case sw == l:
					tsit++
				case sw > 0 && sw < l:
					cont++
				}
			}
			// (Every trajectory of the stiff Van der Pol ensemble, μ = 500
			// to 1000, switches since Auto's own stiffness test of session
			// 53; the mixed ones hold both kinds.)
			if cont == 0 || tsit == 0 && c.name != "vdp-stiff" {
				t.Fatalf("%d trajectories Tsit5's alone, %d continued: want some of each", tsit, cont)
			}
			if diff := sameGradient(t, g, w); diff != "" {
				t.Errorf("%s: differs from the replay's (%s) bit for bit", diff, replay)
			}
			want := wst.Launches
			if c.keep && tsit > 0 {
				want-- // no replay of the Tsit5 trajectories
			}
			if st.Reruns == 0 && wst.Reruns == 0 && st.Launches != want {
				t.Errorf("%d launches, want %d (the replay's engine %d)", st.Launches, want, wst.Launches)
			}
			cpu, err := ode.Grad(nil, c.p, c.loss, nil, &ode.Settings{Method: ode.Auto})
			if err != nil {
				t.Fatal(err)
			}
			// (The two segments' sums against the switch in place: rounding,
			// amplified by μ = 1000 to about 1e-9.)
			odetest.Close(t, "dL/dy0 against the CPU engine's", g.Y0, cpu.Y0, 1e-8)
			odetest.Close(t, "dL/dp against the CPU engine's", g.P, cpu.P, 1e-8)
			odetest.Close(t, "loss against the CPU engine's", []float64{g.Loss}, []float64{cpu.Loss}, 1e-8)

			// The loss alone, and the Gradient passed back.
			sv, err := ode.NewSolver(c.p.Field, &ode.Settings{Method: ode.Auto, Engine: "cuda-host"})
			if err != nil {
				t.Fatal(err)
			}
			svr, err := ode.NewSolver(c.p.Field, &ode.Settings{Method: ode.Auto, Engine: replay})
			if err != nil {
				t.Fatal(err)
			}
			lv, _, err := sv.Loss(&c.p, c.loss, nil)
			if err != nil {
				t.Fatal(err)
			}
			lw, _, err := svr.Loss(&c.p, c.loss, nil)
			if err != nil {
				t.Fatal(err)
			}
			if math.Float64bits(lv) != math.Float64bits(lw) || lv != g.Loss {
				t.Errorf("Loss %v, the replay's %v, Grad's %v: want all the same", lv, lw, g.Loss)
			}
			var back ode.Gradient
			for call := range 4 {
				before := hb.counts().allocs
				if _, err := sv.Grad(&back, &c.p, c.loss, nil); err != nil {
					t.Fatal(err)
				}
				if n := hb.counts().allocs - before; call >= 2 && n != 0 {
					t.Errorf("call %d with the Gradient passed back: %d device allocations, want none", call, n)
				}
				if call == 3 {
					if diff := sameGradient(t, &back, w); diff != "" {
						t.Errorf("call %d with the Gradient passed back: %s differs from the replay's bit for bit", call, diff)
					}
				}
			}
			t.Logf("N = %d: %d Tsit5's alone, %d continued; launches %d, the replay's %d", c.p.N, tsit, cont, st.Launches, wst.Launches)
			if c.name != "mixed-saves" && c.name != "shared" {
				return
			}
			// On two fake devices (cuda-multi: the shards' terms added
			// in index order), against its own replay and one device.
			multi := fakeMultis[2]
			gm, mst := grad(multi.Name(), nil)
			wm, wmst := grad(replayEngine(multi), nil)
			if diff := sameGradient(t, gm, wm); diff != "" {
				t.Errorf("%s: %s differs from its replay's bit for bit", multi.Name(), diff)
			}
			if kept := mst.Trajectories < wmst.Trajectories; kept != c.keep {
				t.Errorf("%s: %d trajectories launched, its replay's %d: want fewer %v", multi.Name(), mst.Trajectories, wmst.Trajectories, c.keep)
			}
			if diff := sameGradient(t, gm, w); diff != "" && c.keep {
				t.Errorf("%s: %s differs from cuda-host's replay bit for bit", multi.Name(), diff)
			}
		})
	}
}

// TestHostEngineAutoUploads checks that Method Auto's Grad on cuda-host,
// called again with the same inputs and the Gradient passed back, sends
// its jobs' inputs once: the stiff van der Pol ensemble (some
// trajectories continued, its Tsit5 pass and the Tsit5 segments'
// gradient each a launch on the Tsit5 executor, their inputs placed
// apart) uploads less than 16 bytes a trajectory a call from the third
// call on (it uploaded about 80 a call when the two took turns on one
// arena, each finding the other's inputs in it: takeArena), allocates
// no device memory, and its gradient is the first call's bit for bit.
// Robertson's (every trajectory continued) is checked the same way.
func TestHostEngineAutoUploads(t *testing.T) {
	needHost(t)
	hb := hostF64.be.(*hostBackend)
	const n = 256
	for _, c := range odetest.AutoCases(n) {
		if c.Name != "vdp-stiff" && c.Name != "robertson" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			sv, err := ode.NewSolver(c.P.Field, &ode.Settings{Method: ode.Auto, RelTol: 1e-6, AbsTol: 1e-9, Engine: "cuda-host"})
			if err != nil {
				t.Fatal(err)
			}
			var g ode.Gradient
			var first *ode.Gradient
			for call := range 5 {
				var tr Trace
				before := hb.counts().allocs
				if _, err := sv.GradContext(WithTrace(context.Background(), &tr), &g, &c.P, ode.SumSquares(), nil); err != nil {
					t.Fatal(err)
				}
				if call == 0 {
					first = &ode.Gradient{Loss: g.Loss, Y0: slices.Clone(g.Y0), P: slices.Clone(g.P), Shared: slices.Clone(g.Shared)}
					continue
				}
				if call < 2 {
					continue
				}
				if up := tr.Stats().Upload; up >= 16*n {
					t.Errorf("call %d: %d bytes uploaded, want less than %d (the inputs sent again)", call, up, 16*n)
				}
				if a := hb.counts().allocs - before; a != 0 {
					t.Errorf("call %d: %d device allocations, want none", call, a)
				}
				same := math.Float64bits(g.Loss) == math.Float64bits(first.Loss)
				for _, v := range [][2][]float64{{g.Y0, first.Y0}, {g.P, first.P}, {g.Shared, first.Shared}} {
					ok, _ := bitsEqual(v[0], v[1])
					same = same && ok
				}
				if !same {
					t.Errorf("call %d: the gradient differs from the first call's", call)
				}
			}
		})
	}
}

// rotationEnsemble returns n trajectories of the damped rotation y' =
// [[−a, ω], [−ω, −a]]·y, p = (a, ω), y0 = (1, 0), on [0, 0.05]: for even
// i a = 1e3, ω from 1e4 up (eigenvalues −a ± iω, at 95.7° and beyond,
// where Tsit5's stability boundary is below the stiffness test's
// threshold, so Hairer's Euclidean estimate, exactly h·|λ| for this
// normal Jacobian, never fires, and Method Auto's scale-invariant one
// does), for odd i a slow rotation (a = 1, ω = 100·(1 + i): not stiff).
func rotationEnsemble(n int) ode.Problem {
	f := ode.Field{Name: "damped-rotation", Dim: 2, Params: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
		a, w := p[0], p[1]
		return []tape.V{w.Mul(y[1]).Sub(a.Mul(y[0])), a.Mul(y[1]).Add(w.Mul(y[0])).Neg()}
	}}
	p := ode.Problem{Field: f, N: n, T1: 0.05}
	for i := 0; i < n; i++ {
		p.Y0 = append(p.Y0, 1, 0)
		if i%2 == 0 {
			p.P = append(p.P, 1e3, 1e4*(1+float64(i)/float64(n)))
		} else {
			p.P = append(p.P, 1, 100*float64(1+i))
		}
	}
	return p
}

// autoStiffTest checks that Method Auto on engine runs Auto's own Tsit5
// trial program, with the scale-invariant stiffness estimate (ode.Plan
// Variant "auto"), and plain Tsit5 its own, on rotationEnsemble(n) at
// rtol = atol = 1e-6: Auto on the CPU engine switches every stiff
// trajectory within its steps and no slow one (which the Euclidean
// estimate alone would not do), Auto on engine takes the same steps
// and switch points (states within 1e-10 relative), and plain Tsit5 on
// engine takes the CPU engine's Tsit5 steps and marks no trajectory
// Stiff (its Euclidean estimate), the slow ones' steps Auto's.
func autoStiffTest(t *testing.T, engine string, n int) {
	p := rotationEnsemble(n)
	solve := func(m ode.Method, e string) *ode.Solution {
		t.Helper()
		sv, err := ode.NewSolver(p.Field, &ode.Settings{Method: m, Engine: e, RelTol: 1e-6, AbsTol: 1e-6})
		if err != nil {
			t.Fatal(err)
		}
		if m == ode.Auto && (sv.Plan().Variant != "auto" || sv.Plan().Method != "Tsit5") {
			t.Fatalf("Auto's plan: method %s, variant %q; want Tsit5, \"auto\"", sv.Plan().Method, sv.Plan().Variant)
		}
		sol, err := sv.Solve(&p)
		if err != nil {
			t.Fatal(err)
		}
		return sol
	}
	ac, ae := solve(ode.Auto, "cpu"), solve(ode.Auto, engine)
	tc, te := solve(ode.Tsit5, "cpu"), solve(ode.Tsit5, engine)
	if ac.Switch == nil || ae.Switch == nil {
		t.Fatalf("Auto switched no trajectory (cpu %v, %s %v)", ac.Switch, engine, ae.Switch)
	}
	for i := 0; i < n; i++ {
		acc := ac.Stats.Accepted[i]
		if stiff := i%2 == 0; stiff != (ac.Switch[i] < acc) {
			t.Errorf("trajectory %d (a, ω = %v): the CPU engine's Auto switched after %d Tsit5 steps of %d; want a switch: %v",
				i, p.P[2*i:2*i+2], ac.Switch[i], acc, stiff)
		}
		if ae.Status[i] != ode.OK || ae.Switch[i] != ac.Switch[i] || ae.Stats.Accepted[i] != acc || ae.Stats.Rejected[i] != ac.Stats.Rejected[i] {
			t.Errorf("trajectory %d: %s's Auto: status %v, switch %d, %d accepted, %d rejected; the CPU engine's: switch %d, %d accepted, %d rejected",
				i, engine, ae.Status[i], ae.Switch[i], ae.Stats.Accepted[i], ae.Stats.Rejected[i], ac.Switch[i], acc, ac.Stats.Rejected[i])
		}
		if te.Stiff[i] || tc.Stiff[i] || te.Stats.Accepted[i] != tc.Stats.Accepted[i] || te.Stats.Rejected[i] != tc.Stats.Rejected[i] {
			t.Errorf("trajectory %d: Tsit5: Stiff %v (cpu %v), %d accepted, %d rejected (cpu %d, %d); want not Stiff (Hairer's estimate), the CPU engine's steps",
				i, te.Stiff[i], tc.Stiff[i], te.Stats.Accepted[i], te.Stats.Rejected[i], tc.Stats.Accepted[i], tc.Stats.Rejected[i])
		}
		if i%2 == 1 && te.Stats.Accepted[i] != ae.Stats.Accepted[i] {
			t.Errorf("trajectory %d (slow): Tsit5 took %d steps, Auto %d; want the same", i, te.Stats.Accepted[i], ae.Stats.Accepted[i])
		}
	}
	odetest.Close(t, "Auto: Y", ae.Y, ac.Y, 1e-10)
	odetest.Close(t, "Tsit5: Y", te.Y, tc.Y, 1e-10)
	t.Logf("%s: Auto's switches %v of %v accepted steps", engine, ae.Switch, ae.Stats.Accepted)
}

// TestHostEngineAutoStiffTest runs autoStiffTest on cuda-host: the
// kernels, compiled by g++, run Auto's trial program with the
// scale-invariant stiffness estimate and Tsit5's with Hairer's.
func TestHostEngineAutoStiffTest(t *testing.T) {
	needHost(t)
	autoStiffTest(t, "cuda-host", 6)
}

// TestGPUAutoStiffTest runs autoStiffTest on the GPU engine, on 64
// trajectories (two warps). It skips without a GPU.
//
//	go test ./cuda -run 'TestGPUAutoStiffTest' -v
func TestGPUAutoStiffTest(t *testing.T) {
	needGPUEngine(t)
	autoStiffTest(t, "cuda", 64)
}
