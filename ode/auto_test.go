package ode_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Tests of Method Auto's switch, per trajectory and during the solve, on
// the CPU engine: a trajectory whose stiffness test fires goes on with
// Rodas5P from that step's end (Mesh.Switch), and replay, gradient, save
// times and dense output follow the recorded methods.

// vdpScaled is the Van der Pol field with μ = p·s, p per trajectory and
// s shared, non-autonomous through a small forcing 0.01·sin(t), so that
// the switch time enters the stiff steps' f_t terms.
func vdpScaled() ode.Field {
	return ode.Field{Name: "vdp-scaled", Dim: 2, Params: 1, Shared: 1, F: func(t tape.V, y, p []tape.V) []tape.V {
		mu := p[0].Mul(p[1])
		return []tape.V{
			y[1],
			mu.Mul(t.Const(1).Sub(y[0].Square()).Mul(y[1])).Sub(y[0]).Add(t.Sin().MulC(0.01)),
		}
	}}
}

// mixedVdP returns an ensemble of n Van der Pol trajectories on [0, 2]
// whose μ alternates between non-stiff (odd i: 1 to 4) and stiff (even
// i: 300 to 900), with initial states drawn from a seeded source.
func mixedVdP(n int) ode.Problem {
	rng := rand.New(rand.NewPCG(1, 25))
	y0 := make([]float64, 0, 2*n)
	p := make([]float64, n)
	for i := range p {
		y0 = append(y0, 1.8+0.4*rng.Float64(), 0.2*rng.Float64())
		if i%2 == 1 {
			p[i] = 1 + 3*rng.Float64()
		} else {
			p[i] = 300 + 600*rng.Float64()
		}
	}
	return ode.Problem{Field: vdpScaled(), N: n, Y0: y0, P: p, Shared: []float64{1}, T1: 2}
}

// autoLoss reads the final state and the saved states: Σ_c y_c² +
// Σ_k (k+1)·ys_k,0 (+ its data row's weight on y_0, if any).
func autoLoss() ode.Loss {
	return ode.Loss{Name: "auto", F: func(y, ys, _ []tape.V) tape.V {
		l := y[0].Square().Add(y[1].Square())
		for k := 0; k < len(ys)/2; k++ {
			l = l.Add(ys[2*k].MulC(float64(k + 1)))
		}
		return l
	}}
}

// autoLossValue is autoLoss of a solution, in plain Go.
func autoLossValue(sol *ode.Solution) float64 {
	var l float64
	K := len(sol.SaveAt)
	for i := 0; i < sol.N; i++ {
		y := sol.Y[2*i:]
		l += y[0]*y[0] + y[1]*y[1]
		for k := 0; k < K; k++ {
			l += float64(k+1) * sol.Ys[(i*K+k)*2]
		}
	}
	return l
}

// switchTime returns the time where trajectory i of m switched: T0 plus
// its steps before the switch, accumulated as a replay does.
func switchTime(m *ode.Mesh, i int) float64 {
	t := m.T0
	for s := 0; s < m.Switch[i]; s++ {
		t += m.H[s*m.N+i]
	}
	return t
}

// TestAutoSwitchMixed checks that a mixed ensemble gives each trajectory
// the method it needs: the stiff ones switch to Rodas5P partway, the
// others finish with Tsit5; that the states are as accurate as the
// tolerance asks (against Rodas5P at RelTol 1e-11); and that Solve,
// Record and Replay of the recorded mesh agree bit for bit, save times
// before, at and after a switch included.
func TestAutoSwitchMixed(t *testing.T) {
	t.Parallel()
	p := mixedVdP(12)
	sv := solverT(t, p.Field, &ode.Settings{Method: ode.Auto})
	m, rec, err := sv.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	if m.Method != ode.Auto || m.Switch == nil || rec.Method != "Auto" {
		t.Fatalf("mesh method %v, switch %v, solution method %s; want Auto with Switch", m.Method, m.Switch, rec.Method)
	}
	for i := 0; i < p.N; i++ {
		stiff := i%2 == 0
		switched := m.Switch[i] < m.Len[i]
		if switched != stiff || m.Switch[i] == 0 || rec.Stiff[i] {
			t.Errorf("trajectory %d (μ = %.4g): switch at step %d of %d, Stiff %v; want a switch iff μ is large, after some Tsit5 steps",
				i, p.P[i], m.Switch[i], m.Len[i], rec.Stiff[i])
		}
	}
	// Save times: T0, before the first stiff trajectory's switch, at it
	// exactly, and after it.
	ts := switchTime(m, 0)
	p.SaveAt = []float64{0, ts / 2, ts, (ts + 2) / 2, 1.9, 2}
	sol, err := sv.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	m2, rec2, err := sv.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sv.Replay(&p, m2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m2.Switch, m.Switch) || !slices.Equal(m2.Len, m.Len) {
		t.Errorf("the save times changed the mesh: switch %v len %v, want %v %v", m2.Switch, m2.Len, m.Switch, m.Len)
	}
	svs := solverT(t, p.Field, &ode.Settings{Method: ode.Auto, Saves: ode.SaveStep})
	steps, err := svs.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	repSteps, err := svs.Replay(&p, m2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(steps.Ys, repSteps.Ys) || !slices.Equal(steps.Y, sol.Y) {
		t.Errorf("SaveStep: Replay's states differ from Solve's bit for bit")
	}
	for name, got := range map[string]*ode.Solution{"Record": rec2, "Replay": rep} {
		if !slices.Equal(got.Y, sol.Y) || !slices.Equal(got.Ys, sol.Ys) {
			t.Errorf("%s's states differ from Solve's bit for bit", name)
		}
	}
	if !slices.Equal(sol.Y, rec.Y) {
		t.Errorf("the save times changed the final states")
	}
	ref, err := ode.Solve(p, &ode.Settings{Method: ode.Rodas5P, RelTol: 1e-11, AbsTol: 1e-13})
	if err != nil {
		t.Fatal(err)
	}
	for x, want := range ref.Ys {
		for _, got := range []float64{sol.Ys[x], steps.Ys[x]} {
			if d := math.Abs(got - want); !(d <= 2e-4*(1+math.Abs(want))) {
				t.Errorf("saved state %d (trajectory %d) = %v, want %v (error %.2g)", x, x/(2*len(p.SaveAt)), got, want, d)
			}
		}
	}
	for i := 0; i < p.N; i++ {
		if st := sol.Stats; st.FieldEvals[i] <= 6*st.Accepted[i] {
			t.Errorf("trajectory %d: %d field evaluations for %d steps", i, st.FieldEvals[i], st.Accepted[i])
		}
	}
}

// TestAutoGradFD checks Grad on an Auto mesh with switched trajectories
// against central differences of Replay on the same mesh (the map whose
// exact derivative Grad is), with respect to Y0, P and Shared, the loss
// reading saved states on both sides of the switches; and, loosely,
// against central differences of whole solves (the mesh re-recorded).
func TestAutoGradFD(t *testing.T) {
	t.Parallel()
	for _, saves := range []ode.SaveMode{ode.SaveInterpolate, ode.SaveStep} {
		t.Run(saves.String(), func(t *testing.T) {
			t.Parallel()
			testAutoGradFD(t, saves)
		})
	}
}

func testAutoGradFD(t *testing.T, saves ode.SaveMode) {
	p := mixedVdP(4)
	p.SaveAt = []float64{0.3, 1, 1.5}
	sv := solverT(t, p.Field, &ode.Settings{Method: ode.Auto, RelTol: 1e-9, AbsTol: 1e-12, Saves: saves})
	g, err := sv.Grad(nil, &p, autoLoss(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := g.Mesh
	if m.Switch == nil || m.Switch[0] >= m.Len[0] {
		t.Fatalf("trajectory 0 did not switch: %v", m.Switch)
	}
	type variable struct {
		name string
		x    *float64
		got  float64
	}
	var vars []variable
	for i := range p.Y0 {
		vars = append(vars, variable{"Y0", &p.Y0[i], g.Y0[i]})
	}
	for i := range p.P {
		vars = append(vars, variable{"P", &p.P[i], g.P[i]})
	}
	vars = append(vars, variable{"Shared", &p.Shared[0], g.Shared[0]})
	eval := func(mesh *ode.Mesh) float64 {
		var sol *ode.Solution
		var err error
		if mesh != nil {
			sol, err = sv.Replay(&p, mesh)
		} else {
			sol, err = sv.Solve(&p)
		}
		if err != nil {
			t.Fatal(err)
		}
		return autoLossValue(sol)
	}
	var worst, worstSolve float64 // the largest relative differences
	defer func() {
		t.Logf("%v: Grad against central differences: %.2g on the frozen mesh, %.2g of the solve", saves, worst, worstSolve)
	}()
	for k, v := range vars {
		x := *v.x
		h := 1e-6 * math.Max(math.Abs(x), 1)
		*v.x = x + h
		lp, sp := eval(m), eval(nil)
		*v.x = x - h
		lm, sm := eval(m), eval(nil)
		*v.x = x
		fd, sfd := (lp-lm)/(2*h), (sp-sm)/(2*h)
		worst = math.Max(worst, math.Abs(v.got-fd)/math.Max(math.Abs(fd), 1))
		worstSolve = math.Max(worstSolve, math.Abs(v.got-sfd)/math.Max(math.Abs(sfd), 1))
		if d := math.Abs(v.got - fd); !(d <= 1e-6*math.Max(math.Abs(fd), 1)) {
			t.Errorf("%s[%d]: Grad %v, frozen-mesh central difference %v (error %.2g)", v.name, k, v.got, fd, d)
		}
		if d := math.Abs(v.got - sfd); !(d <= 1e-4*math.Max(math.Abs(sfd), 1)) {
			t.Errorf("%s[%d]: Grad %v, central difference of the solve %v (error %.2g)", v.name, k, v.got, sfd, d)
		}
	}
}

// TestAutoGradComposition checks the gradient of a switched trajectory
// against an independent composition: Tsit5 replaying the mesh's steps
// before the switch on [T0, t_s], and Rodas5P replaying the rest on
// [t_s, T1] from the state there, as two problems of their own; the
// second's gradient with respect to its initial state is the first's
// loss cotangent (a loss linear in y(t_s), the cotangent as data), and
// the parameter gradients add.
func TestAutoGradComposition(t *testing.T) {
	t.Parallel()
	p := mixedVdP(1)
	p.P[0] = 700
	sv := solverT(t, p.Field, &ode.Settings{Method: ode.Auto})
	g, err := sv.Grad(nil, &p, ode.SumSquares(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := g.Mesh
	s := m.Switch[0]
	if s >= m.Len[0] {
		t.Fatalf("no switch: %v of %v steps", s, m.Len)
	}
	ts := switchTime(m, 0)
	mesh := func(steps []float64, t0, t1 float64, method ode.Method) *ode.Mesh {
		return &ode.Mesh{N: 1, Rows: len(steps), H: steps, Len: []int{len(steps)}, Status: []ode.Status{ode.OK},
			T0: t0, T1: []float64{t1}, Method: method}
	}
	m1 := mesh(m.H[:s], 0, ts, ode.Tsit5)
	m2 := mesh(m.H[s:m.Len[0]], ts, 2, ode.Rodas5P)
	sv1 := solverT(t, p.Field, &ode.Settings{Method: ode.Tsit5})
	sv2 := solverT(t, p.Field, &ode.Settings{Method: ode.Rodas5P})
	p1 := p
	p1.T1 = ts
	s1, err := sv1.Replay(&p1, m1)
	if err != nil {
		t.Fatal(err)
	}
	p2 := p
	p2.T0, p2.Y0 = ts, s1.Y
	g2, err := sv2.Grad(nil, &p2, ode.SumSquares(), m2)
	if err != nil {
		t.Fatal(err)
	}
	lin := ode.Loss{Name: "lin", Data: g2.Y0, DataDim: 2, F: func(y, _, data []tape.V) tape.V {
		return y[0].Mul(data[0]).Add(y[1].Mul(data[1]))
	}}
	g1, err := sv1.Grad(nil, &p1, lin, m1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Solution.Y, g2.Solution.Y) {
		t.Errorf("final state %v, the composition's %v", g.Solution.Y, g2.Solution.Y)
	}
	var worst float64
	defer func() { t.Logf("Grad against the composition: largest relative difference %.2g", worst) }()
	close := func(name string, got, want []float64) {
		for i := range want {
			worst = math.Max(worst, math.Abs(got[i]-want[i])/math.Max(math.Abs(want[i]), 1))
			if d := math.Abs(got[i] - want[i]); !(d <= 1e-12*math.Max(math.Abs(want[i]), 1)) {
				t.Errorf("%s[%d] = %v, the composition's %v", name, i, got[i], want[i])
			}
		}
	}
	close("loss", []float64{g.Loss}, []float64{g2.Loss})
	close("Y0", g.Y0, g1.Y0)
	close("P", g.P, []float64{g1.P[0] + g2.P[0]})
	close("Shared", g.Shared, []float64{g1.Shared[0] + g2.Shared[0]})
}

// TestAutoSwitchEnds checks hand-made switches at the ends of a mesh: a
// switch at step 0 replays as Rodas5P on the whole mesh, and a switch at
// Len as Tsit5, bit for bit, gradients included.
func TestAutoSwitchEnds(t *testing.T) {
	t.Parallel()
	p := mixedVdP(3)
	p.SaveAt = []float64{0.5, 1.5}
	loss := autoLoss()
	for _, c := range []struct {
		method ode.Method
		at     func(l int) int
	}{
		{ode.Rodas5P, func(int) int { return 0 }},
		{ode.Tsit5, func(l int) int { return l }},
	} {
		svm := solverT(t, p.Field, &ode.Settings{Method: c.method})
		m, _, err := svm.Record(&p)
		if err != nil {
			t.Fatal(err)
		}
		m.Stiff = nil // Tsit5's replay of the stiff trajectories is the reference here
		want, err := svm.Grad(nil, &p, loss, m)
		if err != nil {
			t.Fatal(err)
		}
		am := *m
		am.Method, am.Fingerprint, am.Switch = ode.Auto, "", make([]int, m.N)
		for i, l := range m.Len {
			am.Switch[i] = c.at(l)
		}
		sv := solverT(t, p.Field, &ode.Settings{Method: ode.Auto})
		got, err := sv.Grad(nil, &p, loss, &am)
		if err != nil {
			t.Fatal(err)
		}
		for name, pair := range map[string][2][]float64{"Y": {got.Solution.Y, want.Solution.Y}, "Ys": {got.Solution.Ys, want.Solution.Ys},
			"Y0": {got.Y0, want.Y0}, "P": {got.P, want.P}, "Shared": {got.Shared, want.Shared}, "loss": {{got.Loss}, {want.Loss}}} {
			if !slices.Equal(pair[0], pair[1]) {
				t.Errorf("%s at every step: %s %v, want %v", c.method.Name(), name, pair[0], pair[1])
			}
		}
	}
}

// TestAutoDeterminism checks that switched chunks give the same results,
// bit for bit, for any chunk size and worker count (the shared gradient
// included), and that the trajectories that did not switch have the
// gradient of a Tsit5 solve exactly.
func TestAutoDeterminism(t *testing.T) {
	t.Parallel()
	p := mixedVdP(40)
	p.SaveAt = []float64{0.25, 1}
	var first *ode.Gradient
	for _, set := range []ode.Settings{
		{Exec: tape.ExecSettings{Workers: 1, BlockSize: 256}},
		{Exec: tape.ExecSettings{Workers: 2, BlockSize: 8}},
		{Exec: tape.ExecSettings{Workers: 2, BlockSize: 16}},
		{Checkpoint: 3},   // states recomputed between checkpoints
		{MemoryLimit: 64}, // the record's states dropped: the scans step again
	} {
		ex := set
		set.Method = ode.Auto
		sv := solverT(t, p.Field, &set)
		g, err := sv.Grad(nil, &p, autoLoss(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = g
			continue
		}
		if !slices.Equal(g.Y0, first.Y0) || !slices.Equal(g.P, first.P) || !slices.Equal(g.Shared, first.Shared) || g.Loss != first.Loss {
			t.Errorf("%+v: the gradient differs from the first settings'", ex)
		}
	}
	// The non-stiff trajectories alone, with Tsit5.
	var idx []int
	for i := 1; i < p.N; i += 2 {
		idx = append(idx, i)
	}
	q := p
	q.N = len(idx)
	q.Y0, q.P = nil, nil
	for _, i := range idx {
		q.Y0 = append(q.Y0, p.Y0[2*i:2*i+2]...)
		q.P = append(q.P, p.P[i])
	}
	g, err := solverT(t, p.Field, &ode.Settings{Method: ode.Tsit5}).Grad(nil, &q, autoLoss(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for j, i := range idx {
		if !slices.Equal(g.Y0[2*j:2*j+2], first.Y0[2*i:2*i+2]) || g.P[j] != first.P[i] {
			t.Errorf("trajectory %d (not switched): gradient %v %v, Tsit5's %v %v", i, first.Y0[2*i:2*i+2], first.P[i], g.Y0[2*j:2*j+2], g.P[j])
		}
	}
}

// TestAutoDense checks SolveDense across switches: Evaluate gives the
// saved states of a Solve bit for bit, at the switch time and on both
// sides of it.
func TestAutoDense(t *testing.T) {
	t.Parallel()
	p := mixedVdP(4)
	sv := solverT(t, p.Field, &ode.Settings{Method: ode.Auto})
	ds, err := sv.SolveDense(&p)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := sv.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	ts := switchTime(m, 0)
	p.SaveAt = []float64{0, 0.1, ts / 2, ts, ts + 1e-3, (ts + 2) / 2, 2}
	slices.Sort(p.SaveAt)
	sol, err := sv.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	K := len(p.SaveAt)
	for i := 0; i < p.N; i++ {
		for k, tau := range p.SaveAt {
			y, err := ds.Evaluate(nil, i, tau)
			if err != nil {
				t.Fatal(err)
			}
			if want := sol.Ys[(i*K+k)*2 : (i*K+k+1)*2]; !slices.Equal(y, want) {
				t.Errorf("trajectory %d at t = %v: Evaluate %v, Solve %v", i, tau, y, want)
			}
		}
	}
}

// TestAutoFailures checks per-trajectory statuses when the stiff segment
// fails (MaxSteps reached after the switch), and the refusal of a
// switched mesh by a solver without Method Auto.
func TestAutoFailures(t *testing.T) {
	t.Parallel()
	p := mixedVdP(4)
	sv := solverT(t, p.Field, &ode.Settings{Method: ode.Auto})
	m, _, err := sv.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	// One attempt fewer than trajectory 0 (stiff) took fails it after
	// its switch; the non-stiff ones take far fewer.
	budget := m.Stats.Accepted[0] + m.Stats.Rejected[0] - 1
	svf := solverT(t, p.Field, &ode.Settings{Method: ode.Auto, MaxSteps: budget, AllowFailures: true})
	sol, err := svf.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range sol.Status {
		want := ode.OK
		switch {
		case i == 2:
			continue // stiff: it may fail before or after its switch
		case i == 0:
			want = ode.MaxStepsReached
			if sol.Switch == nil || sol.Switch[i] >= sol.Stats.Accepted[i] {
				t.Errorf("trajectory %d failed before its switch (%v of %v steps)", i, sol.Switch, sol.Stats.Accepted)
			}
		}
		if st != want || (st == ode.OK) != !math.IsNaN(sol.Y[2*i]) {
			t.Errorf("trajectory %d: status %v, y %v; want %v", i, st, sol.Y[2*i:2*i+2], want)
		}
	}
	_, err = svf.Grad(nil, &p, ode.SumSquares(), nil)
	var te *ode.TrajectoryError
	if !errors.As(err, &te) || te.Index != 0 || te.Status != ode.MaxStepsReached || te.Method != "Rodas5P" {
		t.Errorf("Grad: %v; want a *TrajectoryError for trajectory 0, MaxStepsReached", err)
	}
	gp, fails, err := svf.GradPartial(context.Background(), nil, &p, ode.SumSquares(), nil, nil)
	if err != nil || len(fails) == 0 || fails[0].Index != 0 || gp.Solution.Status[1] != ode.OK || gp.Y0[0] != 0 || gp.Y0[2] == 0 {
		t.Errorf("GradPartial: %v, failures %v; want trajectory 0's, and the others' gradient", err, fails)
	}
	// A switched mesh is Method Auto's.
	_, err = solverT(t, p.Field, &ode.Settings{Method: ode.Tsit5}).Replay(&p, m)
	if err == nil || !strings.Contains(err.Error(), "Auto") {
		t.Errorf("Tsit5 replaying a switched mesh: %v; want an error naming Method Auto", err)
	}
	bad := *m
	bad.Switch = slices.Clone(m.Switch)
	bad.Switch[1] = m.Len[1] + 1
	_, err = sv.Replay(&p, &bad)
	if err == nil || !strings.Contains(err.Error(), "switches methods at step") {
		t.Errorf("a switch past the end: %v", err)
	}
}
