package bench

import (
	"fmt"
	"io"
	"runtime"

	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Defaults of LorenzConfig.
var (
	DefaultLorenzN      = []int{128, 2048, 32768}
	DefaultLorenzRelTol = []float64{1e-4, 1e-6, 1e-8}
)

// DefaultLorenzRefSample is LorenzConfig.RefSample's default.
const DefaultLorenzRefSample = 512

// The protocol's atol/rtol and the reference's tolerances (DOP853).
const (
	lorenzAbsTolOverRelTol = 1e-3
	lorenzRefRelTol        = 1e-12
	lorenzRefAbsTol        = 1e-14
)

// LorenzConfig configures RunLorenz. The zero value runs the full
// protocol.
type LorenzConfig struct {
	// N lists the ensemble sizes; nil means DefaultLorenzN.
	N []int
	// RelTol lists the relative tolerances; nil means DefaultLorenzRelTol.
	// The absolute tolerance is always RelTol·1e-3.
	RelTol []float64
	// Reps is the number of timed repetitions; 0 means DefaultReps.
	Reps int
	// RefSample is the most trajectories the reference is computed for;
	// larger ensembles use an evenly spaced subsample. 0 means
	// DefaultLorenzRefSample.
	RefSample int
	// Workers is the number of goroutines of the parallel runs; 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
	// JSON writes one JSON object per row instead of the table.
	JSON bool
}

// LorenzRow is one (n, rtol) row of the Lorenz protocol. Times are
// medians in milliseconds; the library runs with Workers goroutines unless
// the name ends in 1 (one goroutine).
type LorenzRow struct {
	N       int     `json:"n"`
	RelTol  float64 `json:"rtol"`
	AbsTol  float64 `json:"atol"`
	Workers int     `json:"workers"`

	// Steps and Rejected are the mean accepted and rejected steps per
	// trajectory.
	Steps    float64 `json:"steps_per_traj"`
	Rejected float64 `json:"rejected_per_traj"`

	// Forward is the library's solve (ode.Solver.Solve), Baseline the
	// hand-written loop (LorenzTsit5), each with Workers goroutines and,
	// as Forward1 and Baseline1, with one.
	Forward   float64 `json:"forward_ms"`
	Forward1  float64 `json:"forward1_ms"`
	Baseline  float64 `json:"baseline_ms"`
	Baseline1 float64 `json:"baseline1_ms"`

	// Record is ode.Solver.Record alone; Grad is a gradient on a recorded
	// mesh (ode.Solver.Grad with the mesh given: replay, loss, backward
	// sweep); GradRecord a gradient that records its mesh first.
	Record     float64 `json:"record_ms"`
	Grad       float64 `json:"grad_ms"`
	GradRecord float64 `json:"grad_record_ms"`

	// GradRatio = Grad/Forward, GradRecordRatio = GradRecord/Forward,
	// ForwardRatio = Forward/Baseline, ForwardRatio1 = Forward1/Baseline1.
	GradRatio       float64 `json:"grad_over_forward"`
	GradRecordRatio float64 `json:"grad_record_over_forward"`
	ForwardRatio    float64 `json:"forward_over_baseline"`
	ForwardRatio1   float64 `json:"forward1_over_baseline1"`

	// Forward1CPU and Baseline1CPU are the median process CPU times of
	// the single-threaded runs, and ForwardRatio1CPU their ratio: on a
	// machine shared with other work it is the more robust comparison.
	Forward1CPU      float64 `json:"forward1_cpu_ms"`
	Baseline1CPU     float64 `json:"baseline1_cpu_ms"`
	ForwardRatio1CPU float64 `json:"forward1_over_baseline1_cpu"`

	// Err is the median relative error of the library's final states
	// against the DOP853 reference over RefSample trajectories;
	// BaselineDiff the largest relative difference between the baseline's
	// and the library's final states.
	Err          float64 `json:"median_rel_err"`
	RefSample    int     `json:"ref_sample"`
	BaselineDiff float64 `json:"baseline_max_rel_diff"`

	// StoredBytes is the gradient's checkpoint memory.
	StoredBytes int64 `json:"stored_bytes"`
}

// LorenzReference returns the final states of the sampled trajectories idx
// of e from refode's DOP853 at rtol 1e-12, atol 1e-14.
func LorenzReference(e *LorenzEnsemble, idx []int) ([][]float64, error) {
	ref := make([][]float64, len(idx))
	pr := refode.Lorenz()
	for k, i := range idx {
		f, _ := pr.Bind([]float64{e.Sigma, e.Rho[i], e.Beta})
		ys, err := refode.DOP853(f, e.T0, e.Y0[:], []float64{e.T1}, lorenzRefRelTol, lorenzRefAbsTol)
		if err != nil {
			return nil, fmt.Errorf("bench: Lorenz reference, trajectory %d: %w", i, err)
		}
		ref[k] = ys[0]
	}
	return ref, nil
}

// RunLorenz runs gradsolve's Lorenz protocol (REFERENCE.md §5.1): σ = 10,
// β = 8/3, ρ = linspace(0, 21, n), y0 = (1, 0, 0), t ∈ [0, 1], Tsit5,
// atol = rtol·1e-3, loss Σ_i ‖y_i(1)‖², gradient with respect to every
// parameter (ρ among them). For every n and rtol of cfg it times the
// library's forward solve, record and gradient and the baseline
// LorenzTsit5 side by side, measures the achieved error, writes a row to w
// as it completes (a table, or JSON lines with cfg.JSON) and returns the
// rows.
func RunLorenz(w io.Writer, cfg LorenzConfig) ([]LorenzRow, error) {
	ns, rtols := cfg.N, cfg.RelTol
	if ns == nil {
		ns = DefaultLorenzN
	}
	if rtols == nil {
		rtols = DefaultLorenzRelTol
	}
	refSample := cfg.RefSample
	if refSample <= 0 {
		refSample = DefaultLorenzRefSample
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if !cfg.JSON {
		fmt.Fprintf(w, "Lorenz, Tsit5, atol = rtol·1e-3, median of %d (ms); library and baseline with %d goroutines (suffix 1: one)\n", repsOrDefault(cfg.Reps), workers)
		fmt.Fprintf(w, "%7s %6s %7s %9s %9s %9s %9s %9s %9s %9s %8s %8s %8s %8s %8s %9s\n",
			"n", "rtol", "steps", "forward", "baseline", "fwd1", "base1", "record", "grad", "grad+rec",
			"grad/fw", "g+r/fw", "fw/base", "fw1/b1", "(cpu)", "err")
	}
	var rows []LorenzRow
	for _, n := range ns {
		if n <= 0 {
			return rows, fmt.Errorf("bench: Lorenz: n = %d must be positive", n)
		}
		e := ProtocolLorenz(n)
		idx := subsample(n, refSample)
		ref, err := LorenzReference(e, idx)
		if err != nil {
			return rows, err
		}
		for _, rtol := range rtols {
			row, err := lorenzRow(e, rtol, workers, cfg.Reps, idx, ref)
			if err != nil {
				return rows, fmt.Errorf("bench: Lorenz n=%d rtol=%g: %w", n, rtol, err)
			}
			rows = append(rows, *row)
			if cfg.JSON {
				if err := writeJSON(w, row); err != nil {
					return rows, err
				}
			} else {
				fmt.Fprintf(w, "%7d %6.0e %7.1f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %8.2f %8.2f %8.2f %8.2f %8.2f %9.2e\n",
					row.N, row.RelTol, row.Steps, row.Forward, row.Baseline, row.Forward1, row.Baseline1,
					row.Record, row.Grad, row.GradRecord, row.GradRatio, row.GradRecordRatio, row.ForwardRatio,
					row.ForwardRatio1, row.ForwardRatio1CPU, row.Err)
			}
		}
	}
	return rows, nil
}

func repsOrDefault(r int) int {
	if r <= 0 {
		return DefaultReps
	}
	return r
}

// lorenzRow measures one row of the protocol.
func lorenzRow(e *LorenzEnsemble, rtol float64, workers, reps int, idx []int, ref [][]float64) (*LorenzRow, error) {
	n := len(e.Rho)
	atol := rtol * lorenzAbsTolOverRelTol
	p := e.Problem()
	set := ode.Settings{Method: ode.Tsit5, RelTol: rtol, AbsTol: atol, Exec: tape.ExecSettings{Workers: workers}}
	sv, err := ode.NewSolver(p.Field, &set)
	if err != nil {
		return nil, err
	}
	set1 := set
	set1.Exec.Workers = 1
	sv1, err := ode.NewSolver(p.Field, &set1)
	if err != nil {
		return nil, err
	}
	mesh, sol, err := sv.Record(&p)
	if err != nil {
		return nil, err
	}
	loss := ode.SumSquares()
	bset := &BaselineSettings{RelTol: rtol, AbsTol: atol, Workers: workers}
	bset1 := *bset
	bset1.Workers = 1
	ybase := make([]float64, 3*n)
	var g ode.Gradient
	times, err := timeCases(reps,
		func() error { _, err := sv.Solve(&p); return err },
		func() error { _, err := LorenzTsit5(ybase, e, bset, nil); return err },
		func() error { _, err := sv1.Solve(&p); return err },
		func() error { _, err := LorenzTsit5(ybase, e, &bset1, nil); return err },
		func() error { _, _, err := sv.Record(&p); return err },
		func() error { _, err := sv.Grad(&g, &p, loss, mesh); return err },
		func() error { _, err := sv.Grad(&g, &p, loss, nil); return err },
	)
	if err != nil {
		return nil, err
	}
	row := &LorenzRow{
		N: n, RelTol: rtol, AbsTol: atol, Workers: workers,
		Steps:    meanInts(mesh.Stats.Accepted),
		Rejected: meanInts(mesh.Stats.Rejected),
		Forward:  times[0].wall, Baseline: times[1].wall, Forward1: times[2].wall, Baseline1: times[3].wall,
		Record: times[4].wall, Grad: times[5].wall, GradRecord: times[6].wall,
		Forward1CPU: times[2].cpu, Baseline1CPU: times[3].cpu,
		Err:          medianRelErr(sol.Y, 3, idx, ref),
		RefSample:    len(idx),
		BaselineDiff: maxRelDiff(ybase, sol.Y, 3),
		StoredBytes:  g.StoredBytes,
	}
	row.GradRatio = row.Grad / row.Forward
	row.GradRecordRatio = row.GradRecord / row.Forward
	row.ForwardRatio = row.Forward / row.Baseline
	row.ForwardRatio1 = row.Forward1 / row.Baseline1
	row.ForwardRatio1CPU = row.Forward1CPU / row.Baseline1CPU
	return row, nil
}
