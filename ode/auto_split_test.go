package ode_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Tests of Method Auto on an engine that does not switch in place (every
// engine but the CPU's): the stiff trajectories alone are run again from
// T0 with Rodas5P and the results merged (Switch 0 for them, Len for the
// others). "auto-split-test" is the CPU engine's executor behind a
// wrapper that notes its jobs (export_split_test.go), so each part is
// the CPU engine's result on the sub-ensemble, bit for bit.

// splitLoss is autoLoss plus a data term d·y_0, one data row per
// trajectory.
func splitLoss(data []float64) ode.Loss {
	return ode.Loss{Name: "split", DataDim: 1, Data: data, F: func(y, ys, d []tape.V) tape.V {
		l := y[0].Square().Add(y[1].Square()).Add(d[0].Mul(y[0]))
		for k := 0; k < len(ys)/2; k++ {
			l = l.Add(ys[2*k].MulC(float64(k + 1)))
		}
		return l
	}}
}

// splitCase returns mixedVdP(n) with save times and the split loss.
func splitCase(n int) (ode.Problem, ode.Loss) {
	p := mixedVdP(n)
	p.SaveAt = []float64{0.5, 1.5}
	data := make([]float64, n)
	for i := range data {
		data[i] = 0.1 * float64(i+1)
	}
	return p, splitLoss(data)
}

// splitParts returns the odd (non-stiff) and even (stiff) rows of n.
func splitParts(n int) (tsit, stiff []int) {
	for i := 0; i < n; i++ {
		if i%2 == 1 {
			tsit = append(tsit, i)
		} else {
			stiff = append(stiff, i)
		}
	}
	return tsit, stiff
}

// checkSplitGrad checks g, Method Auto's gradient on the mixed ensemble p,
// against Tsit5's on its non-stiff rows and Rodas5P's on its stiff rows
// (gt, gr): every row bit for bit, the loss and the shared gradient the
// parts' sums added, the mesh of both methods with Switch Len and 0.
func checkSplitGrad(t *testing.T, what string, g, gt, gr *ode.Gradient, tsit, stiff []int) {
	t.Helper()
	m := g.Mesh
	if m.Method != ode.Auto || g.Solution.Method != "Auto" || m.Switch == nil {
		t.Fatalf("%s: mesh method %v, solution method %s, switch %v; want Auto with Switch", what, m.Method, g.Solution.Method, m.Switch)
	}
	for _, part := range []struct {
		idx []int
		g   *ode.Gradient
	}{{tsit, gt}, {stiff, gr}} {
		odetest.SameRows(t, what+": dL/dY0", g.Y0, part.g.Y0, 2, part.idx)
		odetest.SameRows(t, what+": dL/dP", g.P, part.g.P, 1, part.idx)
		odetest.SameRows(t, what+": Y", g.Solution.Y, part.g.Solution.Y, 2, part.idx)
		odetest.SameRows(t, what+": Ys", g.Solution.Ys, part.g.Solution.Ys, 2*len(g.Solution.SaveAt), part.idx)
		pm := part.g.Mesh
		hostMeshT(t, pm)
		for j, i := range part.idx {
			if m.Len[i] != pm.Len[j] || m.Stats.Accepted[i] != pm.Stats.Accepted[j] || m.Stats.Rejected[i] != pm.Stats.Rejected[j] {
				t.Fatalf("%s: trajectory %d: Len %d, accepted %d, rejected %d; want %d %d %d", what, i, m.Len[i], m.Stats.Accepted[i], m.Stats.Rejected[i],
					pm.Len[j], pm.Stats.Accepted[j], pm.Stats.Rejected[j])
			}
			for s := 0; s < pm.Len[j]; s++ {
				if m.H[s*m.N+i] != pm.H[s*pm.N+j] {
					t.Fatalf("%s: trajectory %d, step %d: %v, want %v", what, i, s, m.H[s*m.N+i], pm.H[s*pm.N+j])
				}
			}
			want := m.Len[i]
			if part.g == gr {
				want = 0
			}
			if m.Switch[i] != want || g.Solution.Switch[i] != want || m.Stiff[i] || m.Status[i] != ode.OK {
				t.Fatalf("%s: trajectory %d: Switch %d (solution %d), Stiff %v, status %v; want %d, not stiff, ok", what, i, m.Switch[i], g.Solution.Switch[i], m.Stiff[i], m.Status[i], want)
			}
		}
	}
	if want := gt.Loss + gr.Loss; math.Float64bits(g.Loss) != math.Float64bits(want) {
		t.Errorf("%s: loss %v, want the parts' %v + %v = %v", what, g.Loss, gt.Loss, gr.Loss, want)
	}
	for c := range g.Shared {
		if want := gt.Shared[c] + gr.Shared[c]; math.Float64bits(g.Shared[c]) != math.Float64bits(want) {
			t.Errorf("%s: dL/dShared[%d] = %v, want the parts' %v + %v = %v", what, c, g.Shared[c], gt.Shared[c], gr.Shared[c], want)
		}
	}
}

// hostMeshT brings m's steps to the host.
func hostMeshT(t *testing.T, m *ode.Mesh) {
	t.Helper()
	if err := m.Host(); err != nil {
		t.Fatal(err)
	}
}

// TestAutoSplit checks Method Auto on an engine that does not switch in
// place, on a mixed Van der Pol ensemble: Grad, Solve, Record and Loss
// against Tsit5 on the non-stiff rows and Rodas5P on the stiff rows (bit
// for bit), Replay and Grad on the merged mesh reproducing them, only the
// stiff trajectories run with Rodas5P (the engine's jobs), and the CPU
// engine's Auto on the merged mesh agreeing row by row.
func TestAutoSplit(t *testing.T) {
	p, loss := splitCase(10)
	tsit, stiff := splitParts(p.N)
	pt, lt := odetest.Rows(p, loss, tsit)
	pr, lr := odetest.Rows(p, loss, stiff)
	gt, err := solverT(t, p.Field, &ode.Settings{Method: ode.Tsit5}).Grad(nil, &pt, lt, nil)
	if err != nil {
		t.Fatal(err)
	}
	gr, err := solverT(t, p.Field, &ode.Settings{Method: ode.Rodas5P}).Grad(nil, &pr, lr, nil)
	if err != nil {
		t.Fatal(err)
	}
	sv := solverT(t, p.Field, &ode.Settings{Method: ode.Auto, Engine: "auto-split-test"})
	ode.SplitSpyJobs()
	g, err := sv.Grad(nil, &p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSplitGrad(t, "Grad", g, gt, gr, tsit, stiff)
	rodasN := func(jobs []ode.SpyJob) (n, jobsN int) {
		for _, j := range jobs {
			if j.Method == "Rodas5P" {
				n += j.N
				jobsN++
			}
		}
		return n, jobsN
	}
	jobs := ode.SplitSpyJobs()
	if n, k := rodasN(jobs); n != len(stiff) || k != 1 {
		t.Errorf("Grad: Rodas5P ran %d trajectories in %d jobs, want the %d stiff ones in one (jobs %+v)", n, k, len(stiff), jobs)
	}
	t.Logf("Grad's jobs: %+v", jobs)

	// One chunk: the first pass finishes every trajectory, as a GPU's
	// does, and the others are replayed on its mesh, not recorded again.
	one := solverT(t, p.Field, &ode.Settings{Method: ode.Auto, Engine: "auto-split-test", Exec: tape.ExecSettings{Workers: 1, BlockSize: 64}})
	g1, err := one.Grad(nil, &p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSplitGrad(t, "Grad in one chunk", g1, gt, gr, tsit, stiff)
	jobs = ode.SplitSpyJobs()
	if len(jobs) != 3 || jobs[1].Method != "Tsit5" || !jobs[1].Mesh || jobs[1].N != len(tsit) {
		t.Errorf("Grad in one chunk: jobs %+v, want Tsit5's record, its replay of the %d others, Rodas5P", jobs, len(tsit))
	}
	lv1, _, err := one.Loss(&p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lv1 != g.Loss {
		t.Errorf("Loss in one chunk %v, Grad's %v", lv1, g.Loss)
	}

	// Determinism, and the record's other forms.
	g2, err := sv.Grad(nil, &p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSplitGrad(t, "Grad again", g2, gt, gr, tsit, stiff)
	sol, err := sv.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	m, rec, err := sv.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	lv, lsol, err := sv.Loss(&p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lv != g.Loss {
		t.Errorf("Loss %v, Grad's loss %v", lv, g.Loss)
	}
	ode.SplitSpyJobs()
	rep, err := sv.Replay(&p, m)
	if err != nil {
		t.Fatal(err)
	}
	if n, k := rodasN(ode.SplitSpyJobs()); n != len(stiff) || k != 1 {
		t.Errorf("Replay: Rodas5P replayed %d trajectories in %d jobs, want %d in one", n, k, len(stiff))
	}
	for name, s := range map[string]*ode.Solution{"Solve": sol, "Record": rec, "Loss": lsol, "Replay": rep} {
		if !slices.Equal(s.Y, g.Solution.Y) || !slices.Equal(s.Ys, g.Solution.Ys) || s.Method != "Auto" {
			t.Errorf("%s: states differ from Grad's bit for bit (method %s)", name, s.Method)
		}
	}
	if !slices.Equal(m.H, g.Mesh.H) || !slices.Equal(m.Switch, g.Mesh.Switch) || !slices.Equal(sol.Switch, m.Switch) {
		t.Errorf("Record's mesh differs from Grad's")
	}
	gm, err := sv.Grad(nil, &p, loss, m)
	if err != nil {
		t.Fatal(err)
	}
	checkSplitGrad(t, "Grad on the merged mesh", gm, gt, gr, tsit, stiff)

	// The CPU engine replays the merged mesh in place, Switch 0 as
	// Rodas5P from T0: the same rows; the sums in index order instead.
	gc, err := solverT(t, p.Field, &ode.Settings{Method: ode.Auto}).Grad(nil, &p, loss, m)
	if err != nil {
		t.Fatal(err)
	}
	all := append(append([]int(nil), tsit...), stiff...)
	slices.Sort(all)
	odetest.SameRows(t, "cpu: dL/dY0", gc.Y0, g.Y0, 2, all)
	odetest.SameRows(t, "cpu: dL/dP", gc.P, g.P, 1, all)
	if d := math.Abs(gc.Loss - g.Loss); d > 1e-14*math.Abs(g.Loss) {
		t.Errorf("cpu: loss %v, split %v", gc.Loss, g.Loss)
	}
	if d := math.Abs(gc.Shared[0] - g.Shared[0]); d > 1e-13*math.Abs(g.Shared[0]) {
		t.Errorf("cpu: dL/dShared %v, split %v", gc.Shared[0], g.Shared[0])
	}

	// A mean: every part's terms scaled by 1/N of the whole ensemble.
	mean := loss
	mean.Mean = true
	gmean, err := sv.Grad(nil, &p, mean, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(gmean.Loss - g.Loss/float64(p.N)); d > 1e-14*math.Abs(g.Loss) {
		t.Errorf("mean loss %v, want %v", gmean.Loss, g.Loss/float64(p.N))
	}
	for i := range g.Y0 {
		if d := math.Abs(gmean.Y0[i] - g.Y0[i]/float64(p.N)); d > 1e-14*math.Abs(g.Y0[i]) {
			t.Errorf("mean: dL/dY0[%d] = %v, want %v", i, gmean.Y0[i], g.Y0[i]/float64(p.N))
		}
	}

	// Dense output follows the merged mesh's methods: Evaluate at the
	// save times is Solve's, bit for bit.
	ds, err := sv.SolveDense(&p)
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
				t.Errorf("SolveDense: trajectory %d at t = %v: Evaluate %v, Solve %v", i, tau, y, want)
			}
		}
	}

	// An engine that stops every trajectory when one stops: more Tsit5
	// passes, the same result.
	gs, err := solverT(t, p.Field, &ode.Settings{Method: ode.Auto, Engine: "stopall-test"}).Grad(nil, &p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSplitGrad(t, "stopall-test", gs, gt, gr, tsit, stiff)
	ss, err := solverT(t, p.Field, &ode.Settings{Method: ode.Auto, Engine: "stopall-test"}).Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ss.Y, sol.Y) || !slices.Equal(ss.Ys, sol.Ys) || !slices.Equal(ss.Switch, sol.Switch) {
		t.Errorf("stopall-test: Solve differs")
	}
}

// TestAutoSplitEnds checks the ensembles of one kind on an engine that
// does not switch in place: none stiff is Tsit5's single pass, all stiff
// is Rodas5P's result on the whole ensemble (method Rodas5P, no Switch);
// and that a mesh the CPU engine switched partway is refused there with
// an error naming the CPU engine.
func TestAutoSplitEnds(t *testing.T) {
	p, loss := splitCase(6)
	tsit, stiff := splitParts(p.N)
	sv := solverT(t, p.Field, &ode.Settings{Method: ode.Auto, Engine: "auto-split-test"})
	for _, c := range []struct {
		idx    []int
		method string
	}{{tsit, "Tsit5"}, {stiff, "Rodas5P"}} {
		q, l := odetest.Rows(p, loss, c.idx)
		want, err := solverT(t, p.Field, &ode.Settings{Method: methodNamed(c.method)}).Grad(nil, &q, l, nil)
		if err != nil {
			t.Fatal(err)
		}
		ode.SplitSpyJobs()
		g, err := sv.Grad(nil, &q, l, nil)
		if err != nil {
			t.Fatal(err)
		}
		jobs := ode.SplitSpyJobs()
		if g.Solution.Method != c.method || g.Mesh.Switch != nil || g.Loss != want.Loss || !slices.Equal(g.Y0, want.Y0) || !slices.Equal(g.Shared, want.Shared) {
			t.Errorf("all %s: method %s, switch %v, loss %v; want %s's result %v", c.method, g.Solution.Method, g.Mesh.Switch, g.Loss, c.method, want.Loss)
		}
		if wantJobs := map[string]int{"Tsit5": 1, "Rodas5P": 2}[c.method]; len(jobs) != wantJobs {
			t.Errorf("all %s: jobs %+v, want %d", c.method, jobs, wantJobs)
		}
	}
	m, _, err := solverT(t, p.Field, &ode.Settings{Method: ode.Auto}).Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sv.Replay(&p, m)
	if err == nil || !strings.Contains(err.Error(), `"cpu" engine`) || !strings.Contains(err.Error(), "auto-split-test") {
		t.Errorf("a mesh switched partway on auto-split-test: error %v, want one naming the cpu engine", err)
	}
}

func methodNamed(name string) ode.Method {
	for _, m := range []ode.Method{ode.Tsit5, ode.Rodas5P} {
		if m.Name() == name {
			return m
		}
	}
	return nil
}

// TestAutoSplitFailures checks a trajectory that fails with Tsit5 (it
// runs out of steps) in a mixed ensemble, on engines that do not switch
// in place: Solve with AllowFailures reports it and finishes the others
// (the stiff ones with Rodas5P), Grad names it, and GradPartial leaves it
// out and gives the gradient of the others, bit for bit that of the
// ensemble without it.
func TestAutoSplitFailures(t *testing.T) {
	p, loss := splitCase(8)
	const bad = 3 // non-stiff, with a span too long for MaxSteps
	p.T1s = make([]float64, p.N)
	for i := range p.T1s {
		p.T1s[i] = 2
	}
	p.T1s[bad] = 1e4
	var keep []int
	for i := 0; i < p.N; i++ {
		if i != bad {
			keep = append(keep, i)
		}
	}
	for _, engine := range []string{"auto-split-test", "stopall-test"} {
		set := ode.Settings{Method: ode.Auto, Engine: engine, MaxSteps: 2000}
		sv := solverT(t, p.Field, &set)
		allow := set
		allow.AllowFailures = true
		sol, err := solverT(t, p.Field, &allow).Solve(&p)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range sol.Status {
			want := ode.OK
			if i == bad {
				want = ode.MaxStepsReached
			}
			if s != want || (i%2 == 0) != (sol.Switch[i] == 0) {
				t.Errorf("%s: Solve: trajectory %d: status %v, switch %d; want %v, switch 0 iff stiff", engine, i, s, sol.Switch[i], want)
			}
		}
		_, err = sv.Grad(nil, &p, loss, nil)
		var te *ode.TrajectoryError
		if !errors.As(err, &te) || te.Index != bad || te.Status != ode.MaxStepsReached {
			t.Errorf("%s: Grad: error %v, want trajectory %d out of steps", engine, err, bad)
		}
		g, fails, err := sv.GradPartial(context.Background(), nil, &p, loss, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(fails) != 1 || fails[0].Index != bad {
			t.Fatalf("%s: GradPartial: failures %v, want trajectory %d", engine, fails, bad)
		}
		q, l := odetest.Rows(p, loss, keep)
		q.T1s = nil
		q.T1 = 2
		want, err := sv.Grad(nil, &q, l, nil)
		if err != nil {
			t.Fatal(err)
		}
		odetest.SameRows(t, engine+": GradPartial: dL/dY0", g.Y0, want.Y0, 2, keep)
		if g.Loss != want.Loss || !slices.Equal(g.Shared, want.Shared) {
			t.Errorf("%s: GradPartial: loss %v, shared %v; without the failure %v, %v", engine, g.Loss, g.Shared, want.Loss, want.Shared)
		}
	}
}

// TestAutoSplitWork logs the work of Method Auto's restart (on
// auto-split-test) against its switch in place (the CPU engine) and
// Rodas5P alone, in field evaluations of the records (all of a call's
// jobs; deterministic, unlike times on a shared machine), for a Solve
// and a Grad of the ensembles of BenchmarkAuto (256 trajectories).
func TestAutoSplitWork(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, c := range odetest.AutoCases(256) {
		if c.Name == "vdp" {
			continue // not stiff: nothing restarts
		}
		for _, op := range []string{"solve", "grad"} {
			evals := func(m ode.Method, engine string) (int, int) {
				sv := solverT(t, c.P.Field, &ode.Settings{Method: m, RelTol: 1e-6, AbsTol: 1e-9, Engine: engine})
				ode.SplitSpyJobs()
				var st ode.Stats
				if op == "solve" {
					sol, err := sv.Solve(&c.P)
					if err != nil {
						t.Fatal(err)
					}
					st = sol.Stats
				} else {
					g, err := sv.Grad(nil, &c.P, ode.SumSquares(), nil)
					if err != nil {
						t.Fatal(err)
					}
					st = g.Solution.Stats
				}
				jobs := ode.SplitSpyJobs()
				if engine == "cpu" {
					return sumInts(st.FieldEvals), 0
				}
				e, rerun := 0, 0
				for _, j := range jobs {
					e += j.FieldEvals
					if j.Method == "Rodas5P" {
						rerun += j.N
					}
				}
				return e, rerun
			}
			inPlace, _ := evals(ode.Auto, "cpu")
			restart, rerun := evals(ode.Auto, "auto-split-test")
			cont, _ := evals(ode.Auto, "auto-continue-test")
			rodas, _ := evals(ode.Rodas5P, "cpu")
			t.Logf("%-9s %-5s field evaluations: Auto in place %7d, Auto restart %7d (%.2f×; %d of %d trajectories rerun), Auto continued %7d (%.2f×), Rodas5P %7d",
				c.Name, op, inPlace, restart, float64(restart)/float64(inPlace), rerun, c.P.N, cont, float64(cont)/float64(inPlace), rodas)
			if op == "solve" && cont != inPlace {
				// The continuation takes the in-place switch's steps.
				t.Errorf("%s: Solve on auto-continue-test made %d field evaluations, the switch in place %d", c.Name, cont, inPlace)
			}
		}
	}
}

func sumInts(x []int) int {
	s := 0
	for _, v := range x {
		s += v
	}
	return s
}

// TestAutoContinue checks Method Auto on an engine that continues a
// stiff trajectory with Rodas5P from where its stiffness test fired
// ("auto-continue-test": the CPU executor, with Job.T0s, behind a
// wrapper) against the CPU engine's switch in place (odetest.AutoContinue),
// on the mixed Van der Pol ensemble with save times and a data loss, and
// the jobs it runs for a Grad: the Tsit5 pass, the non-stiff rows'
// replay on its mesh, then for the stiff rows alone the Rodas5P record
// from the switch times (the Tsit5 pass kept their states there) and the
// two segments' gradients on their meshes.
func TestAutoContinue(t *testing.T) {
	p, loss := splitCase(10)
	odetest.AutoContinue(t, "auto-continue-test", p, loss, 1e-10, 0)
	p0 := p
	p0.SaveAt = nil // the Rodas5P segments' record and gradient in one job
	odetest.AutoContinue(t, "auto-continue-test", p0, loss, 1e-10, 0)

	_, stiff := splitParts(p.N)
	sv := solverT(t, p.Field, &ode.Settings{Method: ode.Auto, Engine: "auto-continue-test"})
	ode.SplitSpyJobs()
	if _, err := sv.Grad(nil, &p, loss, nil); err != nil {
		t.Fatal(err)
	}
	// The Tsit5 passes (runAutoSplit's: the first of all N, then of the
	// others until a pass is clean), then the continuation's four jobs.
	k := len(stiff)
	want := []ode.SpyJob{
		{Op: ode.OpRecord, Method: "Rodas5P", N: k},
		{Op: ode.OpGrad, Method: "Rodas5P", N: k, Mesh: true},
		{Op: ode.OpGrad, Method: "Tsit5", N: k, Mesh: true},
	}
	got := ode.SplitSpyJobs()
	if len(got) < len(want)+1 || got[0].N != p.N || got[0].Method != "Tsit5" {
		t.Fatalf("jobs %+v, want the Tsit5 pass of %d, then %+v", got, p.N, want)
	}
	for x, j := range got[:len(got)-len(want)] {
		if j.Method != "Tsit5" || j.Op != ode.OpGrad {
			t.Fatalf("job %d: %+v, want a Tsit5 pass (all: %+v)", x, j, got)
		}
	}
	for x, w := range want {
		g := got[len(got)-len(want)+x]
		if g.FieldEvals = 0; g != w {
			t.Fatalf("job %d from the end: %+v, want %+v (all: %+v)", len(want)-x, g, w, got)
		}
	}
	// Without save times: the Rodas5P segments' record and gradient in
	// one job, then the Tsit5 segments' gradient.
	if _, err := sv.Grad(nil, &p0, loss, nil); err != nil {
		t.Fatal(err)
	}
	got = ode.SplitSpyJobs()
	want = []ode.SpyJob{
		{Op: ode.OpGrad, Method: "Rodas5P", N: k},
		{Op: ode.OpGrad, Method: "Tsit5", N: k, Mesh: true},
	}
	if len(got) < 3 || !slices.Equal(zeroEvals(got[len(got)-2:]), want) {
		t.Fatalf("jobs without save times %+v, want the Tsit5 passes, then %+v", got, want)
	}
}

// zeroEvals returns jobs with their field evaluations 0.
func zeroEvals(jobs []ode.SpyJob) []ode.SpyJob {
	out := slices.Clone(jobs)
	for x := range out {
		out[x].FieldEvals = 0
	}
	return out
}
