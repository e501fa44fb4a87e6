package bench

import (
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Defaults of StiffConfig.
var (
	DefaultStiffProblems      = []string{"robertson", "hires"}
	DefaultStiffN             = []int{128, 2048}
	DefaultStiffRelTol        = []float64{1e-4, 1e-6, 1e-8}
	DefaultRosenbrock23RelTol = []float64{1e-4}
)

// DefaultStiffRefSample is StiffConfig.RefSample's default.
const DefaultStiffRefSample = 128

// stiffAbsTolOverRelTol is atol/rtol of the stiff suite: SciMLBenchmarks'
// ROBER and HIRES work-precision diagrams pair rtol 10^−k with atol
// 10^−(k+4).
const stiffAbsTolOverRelTol = 1e-4

// Stiff references: Radau5 (Robertson, POLL, the Brusselator) and DOP853
// (HIRES) tolerances.
const (
	robertsonRefRelTol   = 1e-12
	robertsonRefAbsTol   = 1e-20
	hiresRefRelTol       = 1e-13
	hiresRefAbsTol       = 1e-17
	pollutionRefRelTol   = 1e-12
	pollutionRefAbsTol   = 1e-30
	brusselatorRefRelTol = 1e-12
	brusselatorRefAbsTol = 1e-14
)

// StiffConfig configures RunStiff. The zero value runs the full suite.
type StiffConfig struct {
	// Problems lists the problems: "robertson", "hires", "pollution" or
	// "brusselator" (see StiffEnsemble); nil means DefaultStiffProblems
	// (robertson and hires).
	Problems []string
	// N lists the ensemble sizes; nil means DefaultStiffN.
	N []int
	// RelTol lists the relative tolerances of Rodas5P; nil means
	// DefaultStiffRelTol. The absolute tolerance is RelTol·1e-4.
	RelTol []float64
	// Rosenbrock23RelTol lists the relative tolerances of Rosenbrock23;
	// nil means DefaultRosenbrock23RelTol.
	Rosenbrock23RelTol []float64
	// RobertsonT1 is the end time of Robertson; 0 means 100.
	RobertsonT1 float64
	// Reps is the number of timed repetitions; 0 means DefaultReps.
	Reps int
	// RefSample is the most trajectories the reference is computed for;
	// 0 means DefaultStiffRefSample.
	RefSample int
	// Workers is the number of goroutines; 0 means runtime.GOMAXPROCS(0).
	Workers int
	// JSON writes one JSON object per row instead of the table.
	JSON bool
}

// StiffRow is one (problem, method, n, rtol) row of the stiff suite. Times
// are medians in milliseconds.
type StiffRow struct {
	Problem string  `json:"problem"`
	Method  string  `json:"method"`
	N       int     `json:"n"`
	RelTol  float64 `json:"rtol"`
	AbsTol  float64 `json:"atol"`
	Workers int     `json:"workers"`

	// Steps and Rejected are the mean accepted and rejected steps per
	// trajectory.
	Steps    float64 `json:"steps_per_traj"`
	Rejected float64 `json:"rejected_per_traj"`

	// Forward is ode.Solver.Solve, Record ode.Solver.Record, Grad a
	// gradient on a recorded mesh and GradRecord one that records first.
	Forward    float64 `json:"forward_ms"`
	Record     float64 `json:"record_ms"`
	Grad       float64 `json:"grad_ms"`
	GradRecord float64 `json:"grad_record_ms"`

	// GradRatio = Grad/Forward, GradRecordRatio = GradRecord/Forward.
	GradRatio       float64 `json:"grad_over_forward"`
	GradRecordRatio float64 `json:"grad_record_over_forward"`

	// Err is the median relative error of the final states against the
	// reference over RefSample trajectories.
	Err       float64 `json:"median_rel_err"`
	RefSample int     `json:"ref_sample"`

	// StoredBytes is the gradient's checkpoint memory.
	StoredBytes int64 `json:"stored_bytes"`
}

// StiffEnsemble returns the stiff suite's ensemble of n trajectories of
// the named problem, with a reference function for trajectory i:
//
//   - "robertson": Robertson's kinetics with k1 = linspace(0.03, 0.05, n),
//     k2 = 3e7, k3 = 1e4, y0 = (1, 0, 0), t ∈ [0, t1] (t1 = 0 means 100);
//     reference Radau5 at rtol 1e-12, atol 1e-20.
//   - "hires": HIRES with y0[7] = linspace(0.0050, 0.0060, n) (the
//     standard value is 0.0057), t ∈ [0, 321.8122]; reference DOP853 at
//     rtol 1e-13, atol 1e-17, which refode documents as more accurate
//     than Radau5 here (3e-13 against the published solution, Radau5 at
//     rtol 1e-12 3e-11).
//   - "pollution": POLL (problems.Pollution, d = 20, the 25 rate
//     constants per trajectory) with k1 = linspace(0.28, 0.42, n) (0.35
//     ± 20%), the other rates at pollu.f's values, t ∈ [0, 60];
//     reference Radau5 at rtol 1e-12, atol 1e-30 (1.5e-12 against the
//     published y(60) at k1 = 0.35).
//   - "brusselator": the Brusselator with diffusion on 32 cells
//     (problems.Brusselator(32), d = 64) with α = linspace(0.01, 0.03, n),
//     t ∈ [0, 10]; reference Radau5 at rtol 1e-12, atol 1e-14.
//
// The references of POLL and the Brusselator integrate the traced field
// (Program.Eval, Jacobian by tape.Jacobian): package problems checks the
// fields against plain-Go transcriptions of the literature's equations.
func StiffEnsemble(name string, n int, t1 float64) (ode.Problem, func(i int) ([]float64, error), error) {
	switch name {
	case "robertson":
		pr := problems.Robertson()
		if t1 == 0 {
			t1 = pr.T1
		}
		k1 := problems.LinSpace(make([]float64, n), 0.03, 0.05)
		p := make([]float64, 3*n)
		for i := range n {
			p[3*i], p[3*i+1], p[3*i+2] = k1[i], pr.P[1], pr.P[2]
		}
		prob := ode.Problem{Field: pr.Field, N: n, Y0: pr.Y0, P: p, T0: pr.T0, T1: t1}
		ref := func(i int) ([]float64, error) {
			f, jac := refode.Robertson().Bind(p[3*i : 3*i+3])
			ys, err := refode.Radau5(f, jac, prob.T0, pr.Y0, []float64{t1}, robertsonRefRelTol, robertsonRefAbsTol)
			if err != nil {
				return nil, err
			}
			return ys[0], nil
		}
		return prob, ref, nil
	case "hires":
		pr := problems.HIRES()
		y8 := problems.LinSpace(make([]float64, n), 0.0050, 0.0060)
		d := pr.Field.Dim
		y0 := make([]float64, d*n)
		for i := range n {
			copy(y0[d*i:], pr.Y0)
			y0[d*i+7] = y8[i]
		}
		prob := ode.Problem{Field: pr.Field, N: n, Y0: y0, T0: pr.T0, T1: pr.T1}
		ref := func(i int) ([]float64, error) {
			f, _ := refode.HIRES().Bind(nil)
			ys, err := refode.DOP853(f, prob.T0, y0[d*i:d*(i+1)], []float64{pr.T1}, hiresRefRelTol, hiresRefAbsTol)
			if err != nil {
				return nil, err
			}
			return ys[0], nil
		}
		return prob, ref, nil
	case "pollution", "brusselator":
		pr, rtol, atol := problems.Pollution(), pollutionRefRelTol, pollutionRefAbsTol
		lo, hi := 0.28, 0.42 // k1
		if name == "brusselator" {
			pr, rtol, atol = problems.Brusselator(32), brusselatorRefRelTol, brusselatorRefAbsTol
			lo, hi = 0.01, 0.03 // α
		}
		np := pr.Field.Params
		p := make([]float64, np*n)
		for i, x := range problems.LinSpace(make([]float64, n), lo, hi) {
			copy(p[np*i:], pr.P)
			p[np*i] = x
		}
		prob := ode.Problem{Field: pr.Field, N: n, Y0: pr.Y0, P: p, T0: pr.T0, T1: pr.T1}
		solve, err := radau5Field(pr.Field)
		if err != nil {
			return ode.Problem{}, nil, err
		}
		ref := func(i int) ([]float64, error) {
			return solve(pr.Y0, p[np*i:np*(i+1)], pr.T0, pr.T1, rtol, atol)
		}
		return prob, ref, nil
	}
	return ode.Problem{}, nil, fmt.Errorf("bench: unknown stiff problem %q; valid names are %s", name, strings.Join(StiffCases(), ", "))
}

// StiffCases returns the problem names StiffEnsemble (and StiffConfig's
// Problems) accept.
func StiffCases() []string { return []string{"robertson", "hires", "pollution", "brusselator"} }

// radau5Field returns a function that integrates the field f (one
// trajectory, per-trajectory parameters p, no shared ones) from y0 at t0
// to t1 with refode's Radau5, evaluating the traced field with
// Program.Eval and its Jacobian with tape.Jacobian. It may be called from
// several goroutines.
func radau5Field(f ode.Field) (func(y0, p []float64, t0, t1, rtol, atol float64) ([]float64, error), error) {
	prog, err := f.Program()
	if err != nil {
		return nil, err
	}
	d := f.Dim
	wrt := make([]int, d)
	for i := range wrt {
		wrt[i] = 1 + i
	}
	jprog, err := tape.Jacobian(prog, wrt)
	if err != nil {
		return nil, err
	}
	return func(y0, p []float64, t0, t1, rtol, atol float64) ([]float64, error) {
		rhs := fieldRHS(prog, d, p)
		in := make([]float64, 1+d+len(p))
		copy(in[1+d:], p)
		jac := func(t float64, y, J []float64) {
			in[0] = t
			copy(in[1:], y)
			copy(J, jprog.Eval(nil, in)[d:])
		}
		ys, err := refode.Radau5(rhs, jac, t0, y0, []float64{t1}, rtol, atol)
		if err != nil {
			return nil, err
		}
		return ys[0], nil
	}, nil
}

// fieldRHS returns the right-hand side of a traced field's program prog
// (inputs t, the d states, then the parameters p: a trajectory's, then
// the shared ones) for one trajectory, as refode's integrators call it.
// Each function it returns is for one goroutine.
func fieldRHS(prog *tape.Program, d int, p []float64) func(t float64, y, dy []float64) {
	in := make([]float64, 1+d+len(p))
	copy(in[1+d:], p)
	return func(t float64, y, dy []float64) {
		in[0] = t
		copy(in[1:], y)
		copy(dy, prog.Eval(nil, in))
	}
}

// RunStiff runs the stiff suite: for every problem and n of cfg, Rodas5P
// at every RelTol and Rosenbrock23 at every Rosenbrock23RelTol, with
// atol = rtol·1e-4 and the loss Σ_i ‖y_i(t1)‖². It times the forward solve,
// the record and the gradient (with and without the record) side by side,
// measures the achieved error, writes a row to w as it completes (a table,
// or JSON lines with cfg.JSON) and returns the rows.
func RunStiff(w io.Writer, cfg StiffConfig) ([]StiffRow, error) {
	names, ns, rtols, r23 := cfg.Problems, cfg.N, cfg.RelTol, cfg.Rosenbrock23RelTol
	if names == nil {
		names = DefaultStiffProblems
	}
	if ns == nil {
		ns = DefaultStiffN
	}
	if rtols == nil {
		rtols = DefaultStiffRelTol
	}
	if r23 == nil {
		r23 = DefaultRosenbrock23RelTol
	}
	refSample := cfg.RefSample
	if refSample <= 0 {
		refSample = DefaultStiffRefSample
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	type run struct {
		method ode.Method
		rtol   float64
	}
	var runs []run
	for _, r := range rtols {
		runs = append(runs, run{ode.Rodas5P, r})
	}
	for _, r := range r23 {
		runs = append(runs, run{ode.Rosenbrock23, r})
	}
	if !cfg.JSON {
		fmt.Fprintf(w, "Stiff ensembles, atol = rtol·1e-4, median of %d (ms), %d goroutines\n", repsOrDefault(cfg.Reps), workers)
		fmt.Fprintf(w, "%-11s %-13s %6s %6s %8s %9s %9s %9s %9s %8s %8s %9s\n",
			"problem", "method", "n", "rtol", "steps", "forward", "record", "grad", "grad+rec", "grad/fw", "g+r/fw", "err")
	}
	var rows []StiffRow
	for _, name := range names {
		for _, n := range ns {
			if n <= 0 {
				return rows, fmt.Errorf("bench: stiff: n = %d must be positive", n)
			}
			prob, refFn, err := StiffEnsemble(name, n, cfg.RobertsonT1)
			if err != nil {
				return rows, err
			}
			idx := subsample(n, refSample)
			ref := make([][]float64, len(idx))
			for k, i := range idx {
				if ref[k], err = refFn(i); err != nil {
					return rows, fmt.Errorf("bench: %s reference, trajectory %d: %w", name, i, err)
				}
			}
			for _, r := range runs {
				row, err := stiffRow(name, &prob, r.method, r.rtol, workers, cfg.Reps, idx, ref)
				if err != nil {
					return rows, fmt.Errorf("bench: %s %s n=%d rtol=%g: %w", name, r.method.Name(), n, r.rtol, err)
				}
				rows = append(rows, *row)
				if cfg.JSON {
					if err := writeJSON(w, row); err != nil {
						return rows, err
					}
				} else {
					fmt.Fprintf(w, "%-11s %-13s %6d %6.0e %8.1f %9.3f %9.3f %9.3f %9.3f %8.2f %8.2f %9.2e\n",
						row.Problem, row.Method, row.N, row.RelTol, row.Steps, row.Forward, row.Record,
						row.Grad, row.GradRecord, row.GradRatio, row.GradRecordRatio, row.Err)
				}
			}
		}
	}
	return rows, nil
}

// stiffRow measures one row of the stiff suite.
func stiffRow(name string, p *ode.Problem, m ode.Method, rtol float64, workers, reps int, idx []int, ref [][]float64) (*StiffRow, error) {
	atol := rtol * stiffAbsTolOverRelTol
	set := ode.Settings{Method: m, RelTol: rtol, AbsTol: atol, Exec: tape.ExecSettings{Workers: workers}}
	sv, err := ode.NewSolver(p.Field, &set)
	if err != nil {
		return nil, err
	}
	mesh, sol, err := sv.Record(p)
	if err != nil {
		return nil, err
	}
	loss := ode.SumSquares()
	var g ode.Gradient
	times, err := timeCases(reps,
		func() error { _, err := sv.Solve(p); return err },
		func() error { _, _, err := sv.Record(p); return err },
		func() error { _, err := sv.Grad(&g, p, loss, mesh); return err },
		func() error { _, err := sv.Grad(&g, p, loss, nil); return err },
	)
	if err != nil {
		return nil, err
	}
	row := &StiffRow{
		Problem: name, Method: m.Name(), N: mesh.N, RelTol: rtol, AbsTol: atol, Workers: workers,
		Steps:    meanInts(mesh.Stats.Accepted),
		Rejected: meanInts(mesh.Stats.Rejected),
		Forward:  times[0].wall, Record: times[1].wall, Grad: times[2].wall, GradRecord: times[3].wall,
		Err:         medianRelErr(sol.Y, p.Field.Dim, idx, ref),
		RefSample:   len(idx),
		StoredBytes: g.StoredBytes,
	}
	row.GradRatio = row.Grad / row.Forward
	row.GradRecordRatio = row.GradRecord / row.Forward
	return row, nil
}
