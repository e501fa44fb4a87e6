package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda"
	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// The GPU suite: the Lorenz protocol, a Robertson row and the neural
// protocol on the GPU engine (package cuda), with the hand-written fused
// Lorenz kernels beside the Lorenz rows. Every case is timed twice: at the
// kernel boundary (the device time of the kernels, CUDA events, inputs
// already on the device) and as the whole ode.Solver call (uploads,
// kernels, downloads and host work).

// Defaults of GPUConfig.
var (
	DefaultGPUN               = []int{128, 2048, 32768, 262144, 1048576}
	DefaultGPURobertsonN      = []int{2048}
	DefaultGPURobertsonRelTol = []float64{1e-4, 1e-5, 1e-6, 1e-7, 1e-8}
	DefaultGPUNeuralB         = []int{4096, 65536}
)

// The GPU Robertson protocol: k1 = linspace(0.02, 0.06, n), T = 1e4,
// atol = rtol·1e-4, loss Σ y1(T) (bench/anchors/diffrax_robertson.py).
const (
	gpuRobertsonK1Lo, gpuRobertsonK1Hi = 0.02, 0.06
	gpuRobertsonT1                     = 1e4
	gpuRobertsonRefSample              = 16
)

// GPUConfig configures RunGPU, RunGPURobertson and RunGPUNeural. The zero
// value runs their full protocols on the engine "cuda".
type GPUConfig struct {
	// N lists the ensemble sizes (batch sizes of the neural suite); nil
	// means the suite's default.
	N []int
	// RelTol lists the relative tolerances; nil means the suite's default
	// (the neural suite has one, NeuralRelTol).
	RelTol []float64
	// Reps is the number of timed repetitions; 0 means DefaultReps.
	Reps int
	// RefSample is the most trajectories the reference is computed for;
	// 0 means the suite's default.
	RefSample int
	// Engine is the engine; "" means "cuda" ("cuda-f32" runs in float32).
	Engine string
	// JSON writes one JSON object per row instead of the table.
	JSON bool
	// Dump, if not nil, receives the neural problem and the engine's
	// results as RunNeural's NeuralConfig.Dump does.
	Dump io.Writer
	// Hidden lists the widths of the neural suite's hidden layers (tanh;
	// the input and output have 2); nil means those of NeuralSizes (32,
	// 32). The weights are MLP.Init's from the protocol's seed.
	Hidden []int
}

func (c *GPUConfig) engine() string {
	if c.Engine == "" {
		return "cuda"
	}
	return c.Engine
}

// GPURow is one row of the GPU suite. Times are medians in milliseconds:
// the kernel times are device times of the kernels alone, the call times
// those of the whole ode.Solver calls.
type GPURow struct {
	Suite  string  `json:"suite"` // "lorenz", "robertson" or "neural"
	Engine string  `json:"engine"`
	N      int     `json:"n"`
	RelTol float64 `json:"rtol"`
	AbsTol float64 `json:"atol"`

	// Steps and Rejected are the mean accepted and rejected steps per
	// trajectory.
	Steps    float64 `json:"steps_per_traj"`
	Rejected float64 `json:"rejected_per_traj"`

	// Forward is a forward solve, GradRecord a gradient that records its
	// mesh (one launch: record and adjoint), Grad a gradient on a given
	// mesh (replay and adjoint).
	Forward    float64 `json:"forward_ms"`
	GradRecord float64 `json:"grad_record_ms"`
	Grad       float64 `json:"grad_ms"`

	ForwardCall    float64 `json:"forward_call_ms"`
	GradRecordCall float64 `json:"grad_record_call_ms"`
	GradCall       float64 `json:"grad_call_ms"`
	// GradRecordTransfer is the time the last GradRecordCall spent in
	// copies between host and device (cuda.TraceStats.Transfer; Lorenz
	// suite).
	GradRecordTransfer float64 `json:"grad_record_transfer_ms,omitempty"`

	// HandForward and HandGrad are the device times of the hand-written
	// kernels (Lorenz, and the neural protocol's network): the forward
	// Tsit5 kernel and the fused record+adjoint kernel.
	HandForward float64 `json:"hand_forward_ms,omitempty"`
	HandGrad    float64 `json:"hand_grad_ms,omitempty"`

	// ForwardOverHand = Forward/HandForward, GradRecordOverHand =
	// GradRecord/HandGrad, GradOverForward = Grad/Forward,
	// GradRecordOverForward = GradRecord/Forward.
	ForwardOverHand       float64 `json:"forward_over_hand,omitempty"`
	GradRecordOverHand    float64 `json:"grad_record_over_hand,omitempty"`
	GradOverForward       float64 `json:"grad_over_forward"`
	GradRecordOverForward float64 `json:"grad_record_over_forward"`

	// Err is the median relative error of the final states against the
	// reference over RefSample trajectories.
	Err       float64 `json:"median_rel_err"`
	RefSample int     `json:"ref_sample"`

	// HandDiff is the largest relative difference of the final states of
	// the engine and the hand-written forward kernel; HandGradDiff that of
	// the two fused gradients (dL/dρ, or the weights'), relative to the
	// gradient's largest entry.
	HandDiff     float64 `json:"hand_max_rel_diff,omitempty"`
	HandGradDiff float64 `json:"hand_grad_max_rel_diff,omitempty"`

	// Loss is the loss (neural), Compile the time spent generating and
	// compiling kernels (their first use, in the warm-up), Rows the record
	// buffer rows and Reruns the trajectories rerun for a longer one
	// during the timed gradients.
	Loss    float64 `json:"loss,omitempty"`
	Compile float64 `json:"compile_ms"`
	Rows    int     `json:"record_rows"`
	Reruns  int     `json:"reruns"`
	// Layout is the GPU kernels' layout of the gradient with the record
	// (cuda.TraceStats.Layout: thread, lanes, lanes-global, ...).
	Layout string `json:"layout,omitempty"`
}

// gpuTiming is the median kernel and call time of one case, in ms.
type gpuTiming struct{ kernel, call float64 }

// timeGPU runs every case once (the warm-up: compilation, the record
// buffer's size), waits for the kernels' compiles, then reps rounds of every case in turn, each case
// reporting the device time of its kernels.
func timeGPU(reps int, cases ...func() (time.Duration, error)) ([]gpuTiming, error) {
	return timeGPUOrder(reps, false, cases...)
}

// timeGPUInRow is timeGPU with each case's reps calls in a row, case
// after case, as the anchors time a function (bench/anchors/_common.py's
// time_fn: a warm-up, then the timed calls back to back): a call is
// timed after a call of its own kind, not after the other cases' (whose
// work in between, tens of megabytes of other arrays, leaves the
// caches and the device's memory to the case that follows).
func timeGPUInRow(reps int, cases ...func() (time.Duration, error)) ([]gpuTiming, error) {
	return timeGPUOrder(reps, true, cases...)
}

// timeGPUOrder is timeGPU (inRow false) or timeGPUInRow.
func timeGPUOrder(reps int, inRow bool, cases ...func() (time.Duration, error)) ([]gpuTiming, error) {
	if reps <= 0 {
		reps = DefaultReps
	}
	for _, c := range cases {
		if _, err := c(); err != nil {
			return nil, err
		}
	}
	// The warm-up's calls may have run on the CPU engine while their
	// kernels compiled (cuda's package doc, "First calls"): the timed
	// calls are the device's.
	if err := cuda.WaitForCompiles(context.Background()); err != nil {
		return nil, err
	}
	kern := make([][]float64, len(cases))
	call := make([][]float64, len(cases))
	one := func(k int) error {
		start := time.Now()
		dt, err := cases[k]()
		if err != nil {
			return err
		}
		call[k] = append(call[k], ms(time.Since(start)))
		kern[k] = append(kern[k], ms(dt))
		return nil
	}
	if inRow {
		for k := range cases {
			for range reps {
				if err := one(k); err != nil {
					return nil, err
				}
			}
		}
	} else {
		for range reps {
			for k := range cases {
				if err := one(k); err != nil {
					return nil, err
				}
			}
		}
	}
	t := make([]gpuTiming, len(cases))
	for k := range cases {
		t[k] = gpuTiming{median(kern[k]), median(call[k])}
	}
	return t, nil
}

// traced returns a function that runs f with a fresh trace and returns
// the kernels' device time; compile accumulates the compilation time and
// last keeps the last trace's counts.
func traced(compile *time.Duration, last *cuda.TraceStats, f func(ctx context.Context) error) func() (time.Duration, error) {
	return tracedEach(compile, func(s cuda.TraceStats) { *last = s }, f)
}

// tracedEach is traced calling each with every call's trace counts.
func tracedEach(compile *time.Duration, each func(cuda.TraceStats), f func(ctx context.Context) error) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		var tr cuda.Trace
		err := f(cuda.WithTrace(context.Background(), &tr))
		s := tr.Stats()
		*compile += s.Compile
		each(s)
		return s.Kernel, err
	}
}

// warmUp runs the cases concurrently once, so that their kernels compile
// side by side (NVRTC runs one compilation per thread); compile
// accumulates the compilation time.
func warmUp(compile *time.Duration, cases ...func(ctx context.Context) error) error {
	errs := make([]error, len(cases))
	traces := make([]cuda.Trace, len(cases))
	var wg sync.WaitGroup
	for k, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = c(cuda.WithTrace(context.Background(), &traces[k]))
		}()
	}
	wg.Wait()
	// Calls that ran on the CPU engine while their kernels compiled in
	// the background: the compiles' times reach the traces when they end.
	if err := cuda.WaitForCompiles(context.Background()); err != nil {
		return err
	}
	for k := range traces {
		*compile += traces[k].Stats().Compile
	}
	return errors.Join(errs...)
}

// writeGPURow writes a row as JSON or as a table line.
func writeGPURow(w io.Writer, row *GPURow, asJSON bool) error {
	if asJSON {
		return writeJSON(w, row)
	}
	_, err := fmt.Fprintf(w, "%-9s %8d %6.0e %7.1f | %9.3f %9.3f %9.3f | %9.3f %9.3f | %7.2f %7.2f %7.2f | %9.3f %9.3f %9.3f | %9.2e %s\n",
		row.Suite, row.N, row.RelTol, row.Steps, row.Forward, row.GradRecord, row.Grad, row.HandForward, row.HandGrad,
		row.ForwardOverHand, row.GradRecordOverHand, row.GradOverForward, row.ForwardCall, row.GradRecordCall, row.GradCall, row.Err, row.Layout)
	return err
}

// writeGPUHeader writes the table's header.
func writeGPUHeader(w io.Writer, title string, reps int, engine string) {
	fmt.Fprintf(w, "%s on engine %s, median of %d (ms): kernel = device time of the kernels, call = whole ode.Solver call\n", title, engine, repsOrDefault(reps))
	fmt.Fprintf(w, "%-9s %8s %6s %7s | %9s %9s %9s | %9s %9s | %7s %7s %7s | %9s %9s %9s | %9s %s\n",
		"suite", "n", "rtol", "steps", "fwd", "grad+rec", "grad", "hand-fwd", "hand-g+r", "fw/hand", "g+r/hd", "grad/fw",
		"call-fwd", "call-g+r", "call-grad", "err", "layout")
}

// RunGPU runs the Lorenz protocol of RunLorenz on the GPU engine: for
// every n and rtol of cfg it times the forward solve, the gradient with
// the record and the gradient on a reused mesh, at the kernel boundary and
// as whole calls, beside the hand-written kernels (LorenzTsit5CUDA,
// LorenzGradCUDA), measures the achieved error, writes a row to w as it
// completes and returns the rows. Its error wraps ErrNoCUDA where there is
// no GPU.
func RunGPU(w io.Writer, cfg GPUConfig) ([]GPURow, error) {
	ns, rtols := cfg.N, cfg.RelTol
	if ns == nil {
		ns = DefaultGPUN
	}
	if rtols == nil {
		rtols = DefaultLorenzRelTol
	}
	refSample := cfg.RefSample
	if refSample <= 0 {
		refSample = DefaultLorenzRefSample
	}
	if !cfg.JSON {
		writeGPUHeader(w, "Lorenz, Tsit5, atol = rtol·1e-3", cfg.Reps, cfg.engine())
	}
	var rows []GPURow
	for _, n := range ns {
		if n <= 0 {
			return rows, fmt.Errorf("bench: GPU Lorenz: n = %d must be positive", n)
		}
		e := ProtocolLorenz(n)
		idx := subsample(n, refSample)
		ref, err := LorenzReference(e, idx)
		if err != nil {
			return rows, err
		}
		for _, rtol := range rtols {
			row, err := gpuLorenzRow(e, rtol, &cfg, idx, ref)
			if err != nil {
				return rows, fmt.Errorf("bench: GPU Lorenz n=%d rtol=%g: %w", n, rtol, err)
			}
			rows = append(rows, *row)
			if err := writeGPURow(w, row, cfg.JSON); err != nil {
				return rows, err
			}
		}
	}
	return rows, nil
}

// gpuLorenzRow measures one row of the GPU Lorenz protocol.
func gpuLorenzRow(e *LorenzEnsemble, rtol float64, cfg *GPUConfig, idx []int, ref [][]float64) (*GPURow, error) {
	n := len(e.Rho)
	atol := rtol * lorenzAbsTolOverRelTol
	p := e.Problem()
	set := ode.Settings{Method: ode.Tsit5, RelTol: rtol, AbsTol: atol, Engine: cfg.engine()}
	sv, err := ode.NewSolver(p.Field, &set)
	if err != nil {
		return nil, err
	}
	var compile time.Duration
	var last cuda.TraceStats
	var mesh *ode.Mesh
	var sol *ode.Solution
	if _, err := traced(&compile, &last, func(ctx context.Context) (err error) {
		mesh, sol, err = sv.RecordContext(ctx, &p)
		return err
	})(); err != nil {
		return nil, err
	}
	loss := ode.SumSquares()
	if err := warmUp(&compile,
		func(ctx context.Context) error { _, err := sv.SolveContext(ctx, &p); return err },
		func(ctx context.Context) error { _, err := sv.GradContext(ctx, nil, &p, loss, nil); return err },
		func(ctx context.Context) error { _, err := sv.GradContext(ctx, nil, &p, loss, mesh); return err },
	); err != nil {
		return nil, err
	}
	bset := &BaselineSettings{RelTol: rtol, AbsTol: atol}
	yhand := make([]float64, 3*n)
	yhand2 := make([]float64, 3*n)
	drho := make([]float64, n)
	var g, gm ode.Gradient
	var gr cuda.TraceStats
	times, err := timeGPU(cfg.Reps,
		traced(&compile, &last, func(ctx context.Context) error { _, err := sv.SolveContext(ctx, &p); return err }),
		traced(&compile, &gr, func(ctx context.Context) error { _, err := sv.GradContext(ctx, &g, &p, loss, nil); return err }),
		traced(&compile, &last, func(ctx context.Context) error { _, err := sv.GradContext(ctx, &gm, &p, loss, mesh); return err }),
		func() (time.Duration, error) {
			var cs CUDAStats
			_, err := LorenzTsit5CUDA(yhand, e, bset, &cs)
			return cs.Kernel, err
		},
		func() (time.Duration, error) {
			var cs CUDAStats
			err := LorenzGradCUDA(yhand2, drho, e, bset, mesh.Rows+1, &cs)
			return cs.Kernel, err
		},
	)
	if err != nil {
		return nil, err
	}
	row := &GPURow{
		Suite: "lorenz", Engine: cfg.engine(), N: n, RelTol: rtol, AbsTol: atol,
		Steps: meanInts(mesh.Stats.Accepted), Rejected: meanInts(mesh.Stats.Rejected),
		Forward: times[0].kernel, GradRecord: times[1].kernel, Grad: times[2].kernel,
		ForwardCall: times[0].call, GradRecordCall: times[1].call, GradCall: times[2].call,
		HandForward: times[3].kernel, HandGrad: times[4].kernel,
		Err: medianRelErr(sol.Y, 3, idx, ref), RefSample: len(idx),
		HandDiff: maxRelDiff(yhand, sol.Y, 3),
		Compile:  ms(compile), Rows: gr.Rows, Reruns: gr.Reruns, Layout: gr.Layout,
		GradRecordTransfer: ms(gr.Transfer),
	}
	var gmax, dmax float64
	for i := range drho {
		gmax = math.Max(gmax, math.Abs(g.P[3*i+1]))
		dmax = math.Max(dmax, math.Abs(g.P[3*i+1]-drho[i]))
	}
	if gmax > 0 {
		row.HandGradDiff = dmax / gmax
	}
	row.ratios()
	return row, nil
}

// ratios fills the row's ratios.
func (r *GPURow) ratios() {
	if r.HandForward > 0 {
		r.ForwardOverHand = r.Forward / r.HandForward
	}
	if r.HandGrad > 0 {
		r.GradRecordOverHand = r.GradRecord / r.HandGrad
	}
	if r.Forward > 0 {
		r.GradOverForward = r.Grad / r.Forward
		r.GradRecordOverForward = r.GradRecord / r.Forward
	}
}

// RunGPURobertson runs Robertson's kinetics with Rodas5P on the GPU
// engine: k1 = linspace(0.02, 0.06, n), k2 = 3e7, k3 = 1e4, y0 = (1, 0, 0),
// t ∈ [0, 1e4], atol = rtol·1e-4, loss Σ_i y1_i(T) (the protocol of
// bench/anchors/diffrax_robertson.py); errors against refode's Radau5 at
// rtol 1e-12, atol 1e-20 on RefSample trajectories (default 16).
func RunGPURobertson(w io.Writer, cfg GPUConfig) ([]GPURow, error) {
	ns, rtols := cfg.N, cfg.RelTol
	if ns == nil {
		ns = DefaultGPURobertsonN
	}
	if rtols == nil {
		rtols = DefaultGPURobertsonRelTol
	}
	refSample := cfg.RefSample
	if refSample <= 0 {
		refSample = gpuRobertsonRefSample
	}
	if !cfg.JSON {
		writeGPUHeader(w, "Robertson, Rodas5P, T = 1e4, atol = rtol·1e-4, loss sum y1(T)", cfg.Reps, cfg.engine())
	}
	pr := problems.Robertson()
	var rows []GPURow
	for _, n := range ns {
		if n <= 0 {
			return rows, fmt.Errorf("bench: GPU Robertson: n = %d must be positive", n)
		}
		k1 := problems.LinSpace(make([]float64, n), gpuRobertsonK1Lo, gpuRobertsonK1Hi)
		y0, p := pr.Ensemble(n)
		for i := range k1 {
			p[3*i] = k1[i]
		}
		prob := ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, T0: 0, T1: gpuRobertsonT1}
		idx := subsample(n, refSample)
		ref := make([][]float64, len(idx))
		for q, i := range idx {
			f, jac := refode.Robertson().Bind(p[3*i : 3*i+3])
			ys, err := refode.Radau5(f, jac, 0, pr.Y0, []float64{gpuRobertsonT1}, robertsonRefRelTol, robertsonRefAbsTol)
			if err != nil {
				return rows, fmt.Errorf("bench: GPU Robertson reference, trajectory %d: %w", i, err)
			}
			ref[q] = ys[0]
		}
		for _, rtol := range rtols {
			set := ode.Settings{Method: ode.Rodas5P, RelTol: rtol, AbsTol: rtol * stiffAbsTolOverRelTol, Engine: cfg.engine()}
			loss := ode.Loss{Name: "sum-y1", F: func(y, _, _ []tape.V) tape.V { return y[0] }}
			row, _, err := gpuRow("robertson", &prob, &set, loss, &cfg, idx, ref)
			if err != nil {
				return rows, fmt.Errorf("bench: GPU Robertson n=%d rtol=%g: %w", n, rtol, err)
			}
			rows = append(rows, *row)
			if err := writeGPURow(w, row, cfg.JSON); err != nil {
				return rows, err
			}
		}
	}
	return rows, nil
}

// gpuRow measures the forward solve and the two gradients of prob on the
// GPU engine and returns the row and the gradient with the record.
func gpuRow(suite string, prob *ode.Problem, set *ode.Settings, loss ode.Loss, cfg *GPUConfig, idx []int, ref [][]float64) (*GPURow, *ode.Gradient, error) {
	sv, err := ode.NewSolver(prob.Field, set)
	if err != nil {
		return nil, nil, err
	}
	var compile time.Duration
	var last, gr cuda.TraceStats
	var mesh *ode.Mesh
	var sol *ode.Solution
	if _, err := traced(&compile, &last, func(ctx context.Context) (err error) {
		mesh, sol, err = sv.RecordContext(ctx, prob)
		return err
	})(); err != nil {
		return nil, nil, err
	}
	if err := warmUp(&compile,
		func(ctx context.Context) error { _, err := sv.SolveContext(ctx, prob); return err },
		func(ctx context.Context) error { _, err := sv.GradContext(ctx, nil, prob, loss, nil); return err },
		func(ctx context.Context) error { _, err := sv.GradContext(ctx, nil, prob, loss, mesh); return err },
	); err != nil {
		return nil, nil, err
	}
	var g, gm ode.Gradient
	times, err := timeGPU(cfg.Reps,
		traced(&compile, &last, func(ctx context.Context) error { _, err := sv.SolveContext(ctx, prob); return err }),
		traced(&compile, &gr, func(ctx context.Context) error { _, err := sv.GradContext(ctx, &g, prob, loss, nil); return err }),
		traced(&compile, &last, func(ctx context.Context) error { _, err := sv.GradContext(ctx, &gm, prob, loss, mesh); return err }),
	)
	if err != nil {
		return nil, nil, err
	}
	d := prob.Field.Dim
	row := &GPURow{
		Suite: suite, Engine: cfg.engine(), N: prob.N, RelTol: set.RelTol, AbsTol: set.AbsTol,
		Steps: meanInts(mesh.Stats.Accepted), Rejected: meanInts(mesh.Stats.Rejected),
		Forward: times[0].kernel, GradRecord: times[1].kernel, Grad: times[2].kernel,
		ForwardCall: times[0].call, GradRecordCall: times[1].call, GradCall: times[2].call,
		Err: medianRelErr(sol.Y, d, idx, ref), RefSample: len(idx),
		Loss: g.Loss, Compile: ms(compile), Rows: gr.Rows, Reruns: gr.Reruns, Layout: gr.Layout,
	}
	row.ratios()
	return row, &g, nil
}

// RunGPUNeural runs the neural protocol of RunNeural (ProtocolNeural,
// Tsit5, rtol 1e-6, atol 1e-8, the mean-square loss, gradient with
// respect to the 1,218 shared weights) on the GPU engine for the batch
// sizes cfg.N (default 4096 and 65536), and writes the dump of
// cfg.Dump (the input of bench/anchors/diffrax_neural.py) if asked. With
// cfg.Hidden, the network has those hidden layers instead.
func RunGPUNeural(w io.Writer, cfg GPUConfig) ([]GPURow, error) {
	bs := cfg.N
	if bs == nil {
		bs = DefaultGPUNeuralB
	}
	refSample := cfg.RefSample
	if refSample <= 0 {
		refSample = DefaultLorenzRefSample
	}
	bmax := slices.Max(bs)
	sizes := NeuralSizes
	if cfg.Hidden != nil {
		sizes = append(append([]int{NeuralSizes[0]}, cfg.Hidden...), NeuralSizes[len(NeuralSizes)-1])
		for _, k := range cfg.Hidden {
			if k < 1 {
				return nil, fmt.Errorf("bench: GPU neural: hidden layer width %d must be positive", k)
			}
		}
	}
	full := protocolNeural(bmax, NeuralSeed, nn.NewMLP(sizes, nn.Tanh, nn.Identity))
	if !cfg.JSON {
		writeGPUHeader(w, fmt.Sprintf("Neural ODE y' = MLP(y), %s tanh (%d shared weights), Tsit5, rtol 1e-6, atol 1e-8",
			strings.Trim(strings.ReplaceAll(fmt.Sprint(sizes), " ", "-"), "[]"), full.MLP.NumParams()), cfg.Reps, cfg.engine())
	}
	var dump *NeuralDump
	if cfg.Dump != nil {
		dump = &NeuralDump{
			Protocol: "neural ODE y' = MLP(y), t in [t0, t1], Tsit5; loss = mean_i |y_i(t1) - targets_i|^2; " +
				"gradient with respect to the weights (gradsolve engine " + cfg.engine() + ")",
			Sizes: sizes, Hidden: full.MLP[0].Act.String(), Output: full.MLP[len(full.MLP)-1].Act.String(), Layout: neuralLayout,
			Seed: NeuralSeed, T0: full.T0, T1: full.T1, RelTol: NeuralRelTol, AbsTol: NeuralAbsTol,
			Weights: full.Weights, Y0: full.Y0, Targets: full.Targets,
		}
	}
	var rows []GPURow
	for _, b := range bs {
		if b <= 0 {
			return rows, fmt.Errorf("bench: GPU neural: B = %d must be positive", b)
		}
		e := &NeuralEnsemble{MLP: full.MLP, Weights: full.Weights, Y0: full.Y0[:2*b], Targets: full.Targets[:2*b], T0: full.T0, T1: full.T1}
		idx := subsample(b, refSample)
		ref, err := e.Reference(idx)
		if err != nil {
			return rows, err
		}
		p := e.Problem()
		set := ode.Settings{Method: ode.Tsit5, RelTol: NeuralRelTol, AbsTol: NeuralAbsTol, Engine: cfg.engine()}
		row, g, err := gpuRow("neural", &p, &set, e.Loss(), &cfg, idx, ref)
		if err != nil {
			return rows, fmt.Errorf("bench: GPU neural B=%d: %w", b, err)
		}
		if slices.Equal(sizes, NeuralSizes) {
			if err := neuralHandColumns(row, e, g, cfg.Reps); err != nil {
				return rows, fmt.Errorf("bench: GPU neural B=%d: hand-written kernels: %w", b, err)
			}
		}
		rows = append(rows, *row)
		if dump != nil {
			dump.Results = append(dump.Results, NeuralDumpResult{B: b, Loss: g.Loss, Grad: g.Shared, Steps: row.Steps})
		}
		if err := writeGPURow(w, row, cfg.JSON); err != nil {
			return rows, err
		}
	}
	if dump != nil {
		if err := json.NewEncoder(cfg.Dump).Encode(dump); err != nil {
			return rows, fmt.Errorf("bench: GPU neural: writing the dump: %w", err)
		}
	}
	return rows, nil
}
