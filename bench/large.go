package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda"
	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// The large-state suite ("gpu-large"): the built-in problems of larger
// state, each an ensemble that sweeps its first per-trajectory parameter,
// with the loss Σ_i ‖y_i(T)‖², timed on the GPU engine (kernels and whole
// calls, as the other GPU suites) and, for the same gradient with the
// record, as a whole call on the CPU engine. The cases and their sweeps
// are those of bench/anchors/diffrax_large.py (Lorenz-96, POLL, the
// Brusselator) and of the first-call table (HIRES, neural Robertson):
//
//	lorenz96-64, lorenz96-256  Tsit5,   n = 4096, F = linspace(7, 9),         atol = rtol·1e-3
//	pollution                  Rodas5P, n = 4096, k1 = linspace(0.28, 0.42),  atol = rtol·1e-4
//	brusselator                Rodas5P, n = 1024, α = linspace(0.01, 0.03),   atol = rtol·1e-4
//	hires                      Rodas5P, n = 4096, y8(0) = linspace(0.005, 0.006), atol = rtol·1e-4
//	neural-robertson           Rodas5P, n = 4096, p0 = its default ± 10%,    atol = rtol·1e-4

// largeCase is one problem of the large-state suite.
type largeCase struct {
	name   string
	method ode.Method
	n      int
	lo, hi float64 // the sweep of the first parameter (hires: of y8(0))
	atolR  float64 // atol = rtol·atolR
}

var largeCases = []largeCase{
	{"lorenz96-64", ode.Tsit5, 4096, 7, 9, 1e-3},
	{"lorenz96-256", ode.Tsit5, 4096, 7, 9, 1e-3},
	{"pollution", ode.Rodas5P, 4096, 0.28, 0.42, 1e-4},
	{"brusselator", ode.Rodas5P, 1024, 0.01, 0.03, 1e-4},
	{"hires", ode.Rodas5P, 4096, 0.005, 0.006, 1e-4},
	{"neural-robertson", ode.Rodas5P, 4096, 0, 0, 1e-4},
}

// LargeCases returns the names of the large-state suite's problems, in
// the order RunGPULarge runs them.
func LargeCases() []string {
	names := make([]string, len(largeCases))
	for i, c := range largeCases {
		names[i] = c.name
	}
	return names
}

// DefaultLargeRelTol is the large-state suite's relative tolerance.
const DefaultLargeRelTol = 1e-6

// largeRefSample is the default number of trajectories of the suite's
// reference solutions (DOP853 for the non-stiff problems, Radau5 for the
// stiff ones, at rtol 1e-11 or 1e-12: seconds each for POLL and the
// Brusselator).
const largeRefSample = 4

// LargeRow is a row of the large-state suite: a GPU row (kernels and
// whole calls) and the CPU engine's whole gradient-with-record call.
type LargeRow struct {
	GPURow
	Problem string `json:"problem"`
	Method  string `json:"method"`
	Dim     int    `json:"dim"`
	// CPUGradRecordCall is the CPU engine's whole Solver.Grad call with
	// the record (every core), the median of CPUReps calls after one
	// warm-up; CPUOverGPU = CPUGradRecordCall / GradRecordCall.
	CPUGradRecordCall float64 `json:"cpu_grad_record_call_ms,omitempty"`
	CPUReps           int     `json:"cpu_reps,omitempty"`
	CPUOverGPU        float64 `json:"cpu_over_gpu_call,omitempty"`
	// MaxGradDiff is the largest difference of the GPU and CPU gradients
	// with respect to the per-trajectory parameters, relative to the
	// largest entry.
	MaxGradDiff float64 `json:"cpu_gpu_grad_max_rel_diff,omitempty"`
	// GradKeepCall is the whole gradient-with-record call on a solver
	// with ode.Settings.KeepGrads (the gradients stay on the device, as
	// a jitted Diffrax's arrays do; states and statistics omitted), the
	// median of Reps calls in a row after one warm-up, and GradKeep its
	// kernels' time; the kept gradients, read once after, are
	// GradRecordCall's bit for bit (else RunGPULarge fails).
	GradKeepCall float64 `json:"grad_keep_call_ms,omitempty"`
	GradKeep     float64 `json:"grad_keep_ms,omitempty"`
}

// LargeConfig configures RunGPULarge.
type LargeConfig struct {
	GPUConfig
	// Problems lists the problems to run (LargeCases' names); nil runs
	// them all.
	Problems []string
	// CPUReps is the number of timed CPU engine calls per row; 0 means 3,
	// a negative value skips the CPU engine.
	CPUReps int
}

// largeProblem returns case c's ensemble (its first parameter swept, or
// hires's y8(0)) and a reference for trajectory i at rtol.
func largeProblem(c largeCase) (ode.Problem, func(i int) ([]float64, error), error) {
	switch c.name {
	case "pollution", "brusselator", "hires":
		return StiffEnsemble(c.name, c.n, 0)
	}
	pr, err := problems.ByName(c.name)
	if err != nil {
		return ode.Problem{}, nil, err
	}
	y0, p := pr.Ensemble(c.n)
	np := pr.Field.Params
	lo, hi := c.lo, c.hi
	if lo == 0 && hi == 0 {
		lo, hi = 0.9*pr.P[0], 1.1*pr.P[0]
	}
	for i, x := range problems.LinSpace(make([]float64, c.n), lo, hi) {
		p[np*i] = x
	}
	prob := ode.Problem{Field: pr.Field, N: c.n, Y0: y0, P: p, Shared: pr.Shared, T0: pr.T0, T1: pr.T1}
	// The parameters of trajectory i as the field's program reads them:
	// its own, then the shared ones.
	params := func(i int) []float64 { return append(slices.Clone(p[np*i:np*(i+1)]), pr.Shared...) }
	if pr.Stiff {
		solve, err := radau5Field(pr.Field)
		if err != nil {
			return ode.Problem{}, nil, err
		}
		return prob, func(i int) ([]float64, error) {
			return solve(pr.Y0, params(i), pr.T0, pr.T1, pollutionRefRelTol, 1e-20)
		}, nil
	}
	prog, err := pr.Field.Program()
	if err != nil {
		return ode.Problem{}, nil, err
	}
	d := pr.Field.Dim
	return prob, func(i int) ([]float64, error) {
		ys, err := refode.DOP853(fieldRHS(prog, d, params(i)), pr.T0, y0[d*i:d*(i+1)], []float64{pr.T1}, 1e-11, 1e-12)
		if err != nil {
			return nil, err
		}
		return ys[0], nil
	}, nil
}

// RunGPULarge runs the large-state suite (see largeCases) on the GPU
// engine of cfg and, unless cfg.CPUReps < 0, the CPU engine: for every
// problem it times the forward solve and the two gradients as gpuRow
// does, the gradient with the record kept on the device (KeepGrads),
// the CPU engine's gradient with the record, and the achieved error
// of the GPU's final states against the reference. It writes a row to w
// as it completes (JSON lines with cfg.JSON) and returns the rows.
func RunGPULarge(w io.Writer, cfg LargeConfig) ([]LargeRow, error) {
	rtols := cfg.RelTol
	if rtols == nil {
		rtols = []float64{DefaultLargeRelTol}
	}
	cases := largeCases
	if cfg.Problems != nil {
		cases = nil
		for _, name := range cfg.Problems {
			k := slices.IndexFunc(largeCases, func(c largeCase) bool { return c.name == name })
			if k < 0 {
				return nil, fmt.Errorf("bench: large-state suite: unknown problem %q; valid names are %v", name, LargeCases())
			}
			cases = append(cases, largeCases[k])
		}
	}
	refSample := cfg.RefSample
	if refSample <= 0 {
		refSample = largeRefSample
	}
	cpuReps := cfg.CPUReps
	if cpuReps == 0 {
		cpuReps = 3
	}
	if !cfg.JSON {
		fmt.Fprintf(w, "Large states on engine %s, median of %d (ms): loss sum |y(T)|^2; cpu = the CPU engine's whole grad+record call\n", cfg.engine(), repsOrDefault(cfg.Reps))
		fmt.Fprintf(w, "%-16s %-8s %4s %6s %6s %7s | %9s %9s | %9s %9s %9s | %9s %7s | %9s %9s %s\n",
			"problem", "method", "d", "n", "rtol", "steps", "fwd", "grad+rec", "call-fwd", "call-g+r", "call-keep", "cpu-g+r", "cpu/gpu", "err", "gpu-cpu", "compile")
	}
	var rows []LargeRow
	for _, c := range cases {
		if len(cfg.N) > 0 {
			c.n = cfg.N[0]
		}
		prob, reff, err := largeProblem(c)
		if err != nil {
			return rows, fmt.Errorf("bench: large-state suite, %s: %w", c.name, err)
		}
		idx := subsample(prob.N, refSample)
		ref := make([][]float64, len(idx))
		for q, i := range idx {
			if ref[q], err = reff(i); err != nil {
				return rows, fmt.Errorf("bench: large-state suite, %s reference, trajectory %d: %w", c.name, i, err)
			}
		}
		for _, rtol := range rtols {
			set := ode.Settings{Method: c.method, RelTol: rtol, AbsTol: rtol * c.atolR, Engine: cfg.engine()}
			gcfg := cfg.GPUConfig
			row, g, err := gpuRow(c.name, &prob, &set, ode.SumSquares(), &gcfg, idx, ref)
			if err != nil {
				return rows, fmt.Errorf("bench: large-state suite, %s rtol=%g: %w", c.name, rtol, err)
			}
			lr := LargeRow{GPURow: *row, Problem: c.name, Method: c.method.Name(), Dim: prob.Field.Dim}
			if lr.GradKeep, lr.GradKeepCall, err = keptLargeCall(&prob, set, cfg.Reps, g); err != nil {
				return rows, fmt.Errorf("bench: large-state suite, %s rtol=%g, kept call: %w", c.name, rtol, err)
			}
			if cpuReps > 0 {
				cset := set
				cset.Engine = "cpu"
				sv, err := ode.NewSolver(prob.Field, &cset)
				if err != nil {
					return rows, err
				}
				var cg ode.Gradient
				var ts []float64
				for k := range cpuReps + 1 {
					start := time.Now()
					if _, err := sv.Grad(&cg, &prob, ode.SumSquares(), nil); err != nil {
						return rows, fmt.Errorf("bench: large-state suite, %s on the CPU engine: %w", c.name, err)
					}
					if k > 0 {
						ts = append(ts, ms(time.Since(start)))
					}
				}
				lr.CPUGradRecordCall, lr.CPUReps = median(ts), cpuReps
				lr.CPUOverGPU = lr.CPUGradRecordCall / row.GradRecordCall
				lr.MaxGradDiff = maxDiffOfLargest(g.P, cg.P)
			}
			rows = append(rows, lr)
			if cfg.JSON {
				err = writeJSON(w, &lr)
			} else {
				_, err = fmt.Fprintf(w, "%-16s %-8s %4d %6d %6.0e %7.1f | %9.3f %9.3f | %9.3f %9.3f %9.3f | %9.3f %7.1f | %9.2e %9.2e %.1fs\n",
					c.name, lr.Method, lr.Dim, lr.N, rtol, lr.Steps, lr.Forward, lr.GradRecord, lr.ForwardCall, lr.GradRecordCall, lr.GradKeepCall,
					lr.CPUGradRecordCall, lr.CPUOverGPU, lr.Err, lr.MaxGradDiff, lr.Compile/1e3)
			}
			if err != nil {
				return rows, err
			}
		}
	}
	return rows, nil
}

// keptLargeCall times reps whole gradient-with-record calls of prob
// (loss ode.SumSquares) on a solver of set with KeepGrads, in a row after
// a warm-up, and returns the medians of their kernels' time and of the
// calls (ms). It checks that the kept gradients, read after the last
// call, are ref's bit for bit.
func keptLargeCall(prob *ode.Problem, set ode.Settings, reps int, ref *ode.Gradient) (kernel, call float64, err error) {
	set.KeepGrads = true
	sv, err := ode.NewSolver(prob.Field, &set)
	if err != nil {
		return 0, 0, err
	}
	var compile time.Duration
	var last cuda.TraceStats
	g := ode.Gradient{Omit: ode.OmitStates | ode.OmitStats}
	t, err := timeGPUInRow(reps, traced(&compile, &last, func(ctx context.Context) error {
		_, err := sv.GradContext(ctx, &g, prob, ode.SumSquares(), nil)
		return err
	}))
	if err != nil {
		return 0, 0, err
	}
	if err := g.HostGrads(); err != nil {
		return 0, 0, err
	}
	if d := maxDiffOfLargest(g.P, ref.P); d != 0 {
		return 0, 0, fmt.Errorf("the kept gradients differ from the call's by %.3g of the largest", d)
	}
	return t[0].kernel, t[0].call, nil
}
