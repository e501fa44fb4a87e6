package ode_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestKeepSaves checks package ode's handling of saved states an engine
// keeps (Settings.KeepSaves), on the test engine test-keepsaves (the CPU
// engine whose saves are held apart, as a GPU engine holds them in device
// memory): for each operation that returns saves (Solve, SolveTo, Replay,
// Loss, Grad with the record and on a mesh) the Solution holds them in
// Resident with Ys nil, and HostSaves gives the Ys of the CPU engine bit
// for bit, releasing the held copy; a second HostSaves does nothing;
// after Release, HostSaves fails with an error naming the fix and leaves
// Ys nil. Random ensembles (seeded).
func TestKeepSaves(t *testing.T) {
	t.Parallel()
	f := lorenzField()
	rng := rand.New(rand.NewPCG(37, 1))
	rho := make([]float64, 9)
	for i := range rho {
		rho[i] = 10 + 20*rng.Float64()
	}
	p := lorenzEnsemble(f, rho)
	p.SaveAt = []float64{0, 0.1, 0.1, 0.37, p.T1}
	loss := ode.SumSquares()
	set := ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, AbsTol: 1e-10}
	cpu := solverT(t, f, &set)
	set.Engine, set.KeepSaves = "test-keepsaves", true
	keep := solverT(t, f, &set)
	mesh, _, err := cpu.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	var dst ode.Solution
	for _, op := range []struct {
		name string
		run  func(sv *ode.Solver, dst *ode.Solution) (*ode.Solution, error)
	}{
		{"solve", func(sv *ode.Solver, _ *ode.Solution) (*ode.Solution, error) { return sv.Solve(&p) }},
		{"solveto", func(sv *ode.Solver, dst *ode.Solution) (*ode.Solution, error) { return sv.SolveTo(dst, &p) }},
		{"replay", func(sv *ode.Solver, _ *ode.Solution) (*ode.Solution, error) { return sv.Replay(&p, mesh) }},
		{"loss", func(sv *ode.Solver, _ *ode.Solution) (*ode.Solution, error) {
			_, s, err := sv.Loss(&p, loss, nil)
			return s, err
		}},
		{"grad", func(sv *ode.Solver, dst *ode.Solution) (*ode.Solution, error) {
			g, err := sv.Grad(&ode.Gradient{Solution: dst}, &p, loss, nil)
			if err != nil {
				return nil, err
			}
			return g.Solution, nil
		}},
		{"gradmesh", func(sv *ode.Solver, _ *ode.Solution) (*ode.Solution, error) {
			g, err := sv.Grad(nil, &p, loss, mesh)
			if err != nil {
				return nil, err
			}
			return g.Solution, nil
		}},
	} {
		want, err := op.run(cpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := op.run(keep, &dst)
		if err != nil {
			t.Fatal(err)
		}
		r := got.Resident
		if r == nil || got.Ys != nil {
			t.Fatalf("%s: Resident %v, len(Ys) %d: want the saves held by the engine", op.name, r, len(got.Ys))
		}
		if r.Engine() != "test-keepsaves" {
			t.Errorf("%s: saves held by %q", op.name, r.Engine())
		}
		if err := got.HostSaves(); err != nil {
			t.Fatal(err)
		}
		if !bitsEqualT(got.Ys, want.Ys) || got.Resident != nil || !r.Released() {
			t.Errorf("%s: HostSaves: Ys equal %v, Resident %v, released %v", op.name, bitsEqualT(got.Ys, want.Ys), got.Resident, r.Released())
		}
		ys := got.Ys
		if err := got.HostSaves(); err != nil || &got.Ys[0] != &ys[0] {
			t.Errorf("%s: a second HostSaves: %v", op.name, err)
		}
		dst = ode.Solution{}
	}

	// SolveTo passed its solution back writes into the held saves; one
	// passed back after Release gets new ones, and HostSaves of the
	// released ones fails, naming the fix.
	sol, err := keep.SolveTo(nil, &p)
	if err != nil {
		t.Fatal(err)
	}
	r := sol.Resident
	if _, err := keep.SolveTo(sol, &p); err != nil {
		t.Fatal(err)
	}
	if sol.Resident != r || r.Released() {
		t.Error("SolveTo passed its solution back: the held saves were not reused")
	}
	old := *sol
	sol.Release()
	if err := old.HostSaves(); err == nil || !strings.Contains(err.Error(), "released") || !strings.Contains(err.Error(), "HostSaves before Release") || old.Ys != nil {
		t.Errorf("HostSaves after Release: %v (Ys %v), want an error naming the fix", err, old.Ys)
	}
	if _, err := keep.SolveTo(sol, &p); err != nil {
		t.Fatal(err)
	}
	if sol.Resident == nil || sol.Resident == r {
		t.Error("SolveTo passed released saves back: want new ones")
	}
	// A Gradient passed back with OmitStates releases its old saves and
	// returns none.
	g, err := keep.Grad(nil, &p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	gr := g.Solution.Resident
	g.Omit = ode.OmitStates
	if _, err := keep.Grad(g, &p, loss, nil); err != nil {
		t.Fatal(err)
	}
	if gr == nil || !gr.Released() || g.Solution.Resident != nil || g.Solution.Ys != nil {
		t.Errorf("Grad with OmitStates passed a Gradient with held saves back: old released %v, new %v", gr != nil && gr.Released(), g.Solution.Resident)
	}
}

// TestKeepSavesHost checks the calls whose saves come back on the host
// with KeepSaves: the CPU engine (which keeps nothing apart: its saves
// are on the host), Method Auto on an engine that keeps saves (it merges
// its segments on the host: the job does not ask), and GradPartial with a
// trajectory left out (its subset's held saves copied to the host and
// spread over the rows of all); each with the Ys of the same call without
// KeepSaves, bit for bit. (Not parallel: it counts the test engine's
// jobs that keep saves.)
func TestKeepSavesHost(t *testing.T) {
	f := lorenzField()
	p := lorenzEnsemble(f, []float64{21, 25, 28, 30})
	p.SaveAt = []float64{0.2, 0.6}
	loss := ode.SumSquares()
	for _, tc := range []struct {
		name   string
		engine string
		method ode.Method
	}{
		{"cpu", "cpu", ode.Tsit5},
		{"auto", "test-keepsaves", ode.Auto},
	} {
		set := ode.Settings{Method: tc.method, RelTol: 1e-7, AbsTol: 1e-9, Engine: tc.engine}
		plain := solverT(t, f, &set)
		set.KeepSaves = true
		keep := solverT(t, f, &set)
		before := ode.KeptJobs()
		w, err := plain.Solve(&p)
		if err != nil {
			t.Fatal(err)
		}
		g, err := keep.Solve(&p)
		if err != nil {
			t.Fatal(err)
		}
		if g.Resident != nil || !bitsEqualT(g.Ys, w.Ys) {
			t.Errorf("%s: Resident %v, Ys equal %v: want the host's Ys", tc.name, g.Resident, bitsEqualT(g.Ys, w.Ys))
		}
		if tc.engine != "cpu" && ode.KeptJobs() != before {
			t.Errorf("%s: a job asked to keep its saves", tc.name)
		}
	}
	// GradPartial: trajectory 2 fails its step budget.
	set := ode.Settings{Method: ode.Tsit5, RelTol: 1e-7, AbsTol: 1e-9, Engine: "test-keepsaves", AllowFailures: true}
	cpuSet := set
	cpuSet.Engine = "cpu"
	cpu := solverT(t, f, &cpuSet)
	sol, err := cpu.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	set.MaxSteps = sol.Stats.Accepted[2] + sol.Stats.Rejected[2] - 1
	cpuSet.MaxSteps = set.MaxSteps
	set.KeepSaves = true
	keep := solverT(t, f, &set)
	cpu = solverT(t, f, &cpuSet)
	w, _, err := cpu.GradPartial(t.Context(), nil, &p, loss, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	gp, fails, err := keep.GradPartial(t.Context(), nil, &p, loss, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(fails) == 0 {
		t.Fatal("GradPartial: no trajectory left out; the case checks nothing")
	}
	if gp.Solution.Resident != nil || !bitsEqualT(gp.Solution.Ys, w.Solution.Ys) {
		t.Errorf("GradPartial: Resident %v, Ys equal %v", gp.Solution.Resident, bitsEqualT(gp.Solution.Ys, w.Solution.Ys))
	}
	if !slices.ContainsFunc(gp.Solution.Ys, math.IsNaN) {
		t.Error("GradPartial: the left-out trajectory's saves are not NaN")
	}
}

// TestSolutionHostSaves checks Solution.HostSaves and Release on saves
// held by a fake engine: a copy that fails is wrapped with the engine's
// name and leaves Ys and Resident as they were; Ys's storage is reused
// where it is large enough; a solution on the host is left alone.
func TestSolutionHostSaves(t *testing.T) {
	t.Parallel()
	want := []float64{1, 2, 3, 4, 5, 6}
	boom := errors.New("device lost")
	fs := &fakeSteps{engine: "gpu-x", h: want, fail: boom}
	s := &ode.Solution{N: 1, Dim: 2, SaveAt: []float64{0, 1, 2}, Resident: fs}
	if err := s.HostSaves(); !errors.Is(err, boom) || !strings.Contains(err.Error(), "gpu-x") || s.Ys != nil || s.Resident == nil {
		t.Errorf("a failed copy: %v, Ys %v, Resident %v", err, s.Ys, s.Resident)
	}
	fs.fail = nil
	storage := make([]float64, 0, 10)
	s.Ys = storage
	if err := s.HostSaves(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Ys, want) || &s.Ys[:1][0] != &storage[:1][0] || !fs.released || s.Resident != nil {
		t.Errorf("HostSaves: Ys %v (storage reused %v), released %v", s.Ys, &s.Ys[:1][0] == &storage[:1][0], fs.released)
	}
	host := &ode.Solution{N: 1, Dim: 2, SaveAt: []float64{0, 1, 2}, Ys: slices.Clone(want)}
	host.Release()
	if err := host.HostSaves(); err != nil || !slices.Equal(host.Ys, want) {
		t.Errorf("a solution on the host: %v, %v", err, host.Ys)
	}
	var nilSol *ode.Solution
	if err := nilSol.HostSaves(); err != nil {
		t.Error(err)
	}
}

// bitsEqualT reports whether a and b hold the same bits (NaN included).
func bitsEqualT(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}

// TestKeepSavesStiff checks a gradient whose trajectory the stiffness
// test stops (Job.StopOnStiff) with saves held by the engine: package ode
// brings them to the host to blank the stiff trajectory's rows and
// returns the *TrajectoryError of Status Stiff, as without KeepSaves.
func TestKeepSavesStiff(t *testing.T) {
	f := ode.Field{Name: "stifflinear", Dim: 2, F: func(_ tape.V, y, _ []tape.V) []tape.V {
		return []tape.V{y[0].MulC(-500.5).Add(y[1].MulC(499.5)), y[0].MulC(499.5).Add(y[1].MulC(-500.5))}
	}}
	p := ode.Problem{Field: f, Y0: []float64{2, 0}, T1: 100, SaveAt: []float64{0.5, 50}}
	for _, keep := range []bool{false, true} {
		sv := solverT(t, f, &ode.Settings{Method: ode.Tsit5, Engine: "test-keepsaves", KeepSaves: keep})
		before := ode.KeptJobs()
		_, err := sv.Grad(nil, &p, ode.SumSquares(), nil)
		var te *ode.TrajectoryError
		if !errors.As(err, &te) || te.Status != ode.Stiff {
			t.Errorf("KeepSaves %v: %v, want a *TrajectoryError with Status Stiff", keep, err)
		}
		if got := ode.KeptJobs() - before; keep && got == 0 {
			t.Error("the gradient's job did not ask to keep its saves: the case checks nothing")
		}
	}
}
