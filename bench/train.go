package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda"
	"github.com/gradsolve-go/gradsolve/fit"
	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// The training suite: steps of fits and whole Solver.Grad calls, timed as
// a user runs them (issue 23). Three kinds of case:
//
//   - "neural-fit": one fit of the neural protocol's 1,218 shared weights
//     (ProtocolNeural, Tsit5, rtol 1e-6, atol 1e-8, loss mean
//     |y(1) − target|²), fit.Run with Adam (lr 1e-3) and a fresh mesh
//     every step;
//   - "lorenz-fit": the Lorenz calibration, n independent fits of ρ
//     (fit.Problem.Fits = n, Vars.P = {ρ}): σ = 10, β = 8/3,
//     y0 = (1, 0, 0), t ∈ [0, 1], rtol 1e-6, atol 1e-9, targets y(1) at
//     ρ* = linspace(5, 20, n) from the same solver, start ρ = 10, Adam
//     lr 0.1, loss Σ_i |y_i(1) − target_i|², a fresh mesh every step;
//   - "pk-fit": a calibration through events, n independent fits of the
//     elimination rate k of the events suite's pharmacokinetic model
//     (C' = −k·C with a clock τ' = 1, C0 = linspace(1, 2, n), a terminal
//     event when C falls to 0.25, T1 = 100): targets the crossing times
//     t*_i = ln(C0_i/0.25)/k*_i at k* = linspace(0.2, 1.2, n) (closed
//     form), start k = 0.7, loss Σ_i (τ_i(end) − t*_i)², Tsit5, rtol 1e-6,
//     atol 1e-8, Adam lr 0.05, a fresh mesh every step;
//   - "grad-record" and "grad-mesh": whole ode.Solver.Grad calls of the
//     Lorenz protocol (ProtocolLorenz, loss Σ|y(1)|², rtol 1e-6) with host
//     slices in and out, recording the mesh in the call or replaying a
//     mesh recorded before; the two take turns in every repetition.
//
// A fit runs Reps + 1 optimiser steps: the first is the warm-up (kernel
// compilation, first allocations), the other Reps are timed one by one
// from the fit's progress reports (fit.Settings.Progress is told after
// every update), so a step is everything from one update to the next:
// record, replay, reverse sweep, loss and Adam, with nothing asked of the
// fit but its loss.

// Defaults of TrainConfig: the CPU suite ("train") and the GPU suite
// ("gpu-train").
var (
	DefaultTrainNeuralB = []int{256, 4096}
	DefaultTrainFitN    = []int{2048, 32768}
	DefaultTrainCallN   = []int{128, 32768}

	DefaultGPUTrainNeuralB = []int{4096, 65536}
	DefaultGPUTrainFitN    = []int{65536, 262144}
	DefaultGPUTrainCallN   = []int{128, 32768, 262144, 1 << 20}
)

// The training protocols' constants.
const (
	TrainNeuralLearnRate = 1e-3
	TrainLorenzLearnRate = 0.1
	TrainLorenzRelTol    = 1e-6
	TrainLorenzRho0      = 10.0
	TrainLorenzRhoStarLo = 5.0
	TrainLorenzRhoStarHi = 20.0
	TrainPKLearnRate     = 0.05
	TrainPKRelTol        = 1e-6
	TrainPKK0            = 0.7
	TrainPKKStarLo       = 0.2
	TrainPKKStarHi       = 1.2

	// TrainTightRelTol and TrainTightAbsTol are the tolerances of the
	// tight step-1 loss (TrainRow.LossFirstTight).
	TrainTightRelTol = 1e-12
	TrainTightAbsTol = 1e-14
)

// TrainCases are the names of the training suite's kinds of case, for
// TrainConfig.Cases.
var TrainCases = []string{"neural", "lorenz-fit", "pk-fit", "grad-call"}

// TrainConfig configures RunTrain. The zero value runs the CPU suite.
type TrainConfig struct {
	// NeuralB, FitN and CallN list the batch sizes of the neural fit, the
	// numbers of fits of the Lorenz and PK calibrations and the ensemble sizes of
	// the whole Grad calls; nil means the suite's default.
	NeuralB, FitN, CallN []int
	// Cases selects kinds of case from TrainCases; nil means all.
	Cases []string
	// Reps is the number of timed steps (and calls); 0 means DefaultReps.
	Reps int
	// Engine is the engine; "" is the CPU engine. With GPU set it must
	// name a registered GPU engine ("" then means "cuda").
	Engine string
	// GPU runs the GPU suite ("gpu-train"): its default sizes, and an
	// error before any work if the engine is not available.
	GPU bool
	// Workers is the CPU engine's number of goroutines; 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
	// JSON writes one JSON object per row instead of the table.
	JSON bool
	// Dump, if not nil, receives the problems and gradsolve's losses as
	// one JSON document (TrainDump), the input of
	// bench/anchors/diffrax_train.py and torchdiffeq_train.py.
	Dump io.Writer
}

func (c *TrainConfig) engine() string {
	if c.Engine == "" && c.GPU {
		return "cuda"
	}
	return c.Engine
}

func (c *TrainConfig) suite() string {
	if c.GPU {
		return "gpu-train"
	}
	return "train"
}

func (c *TrainConfig) reps() int { return repsOrDefault(c.Reps) }

func (c *TrainConfig) has(kind string) bool { return c.Cases == nil || slices.Contains(c.Cases, kind) }

func (c *TrainConfig) sizes(got, cpu, gpu []int) []int {
	switch {
	case got != nil:
		return got
	case c.GPU:
		return gpu
	}
	return cpu
}

func (c *TrainConfig) settings(rtol, atol float64) *ode.Settings {
	return &ode.Settings{Method: ode.Tsit5, RelTol: rtol, AbsTol: atol, Engine: c.engine(),
		Exec: tape.ExecSettings{Workers: c.Workers}}
}

// TrainRow is one case of the training suite. Times are in milliseconds;
// Ms and MinMs are the median and the minimum over Reps steps (fits) or
// calls (grad-record, grad-mesh).
type TrainRow struct {
	Suite  string  `json:"suite"` // "train" or "gpu-train"
	Case   string  `json:"case"`  // "neural-fit", "lorenz-fit", "pk-fit", "grad-record" or "grad-mesh"
	Engine string  `json:"engine"`
	N      int     `json:"n"` // batch size (neural), number of fits (lorenz-fit, pk-fit) or trajectories (calls)
	RelTol float64 `json:"rtol"`
	AbsTol float64 `json:"atol"`
	// LearnRate is Adam's learning rate (fits).
	LearnRate float64 `json:"lr,omitempty"`
	Reps      int     `json:"reps"`
	Workers   int     `json:"workers,omitempty"` // CPU engine

	// StepsPerTraj is the mean accepted steps per trajectory of the first
	// mesh.
	StepsPerTraj float64 `json:"steps_per_traj"`

	// Ms and MinMs: a fit's step (from one update to the next) or a whole
	// call; FirstMs the untimed warm-up step or call (compilation
	// included); NewMs fit.New (fits).
	Ms      float64 `json:"ms"`
	MinMs   float64 `json:"min_ms"`
	FirstMs float64 `json:"first_ms"`
	NewMs   float64 `json:"new_ms,omitempty"`

	// KernelMs and TransferMs are the median device time of the kernels
	// and host-device copy time per step or call, UploadBytes and
	// DownloadBytes the bytes copied in the last one (GPU engines, where
	// the engine's trace sees the work: cuda.TraceStats).
	KernelMs      float64 `json:"kernel_ms,omitempty"`
	TransferMs    float64 `json:"transfer_ms,omitempty"`
	UploadBytes   int64   `json:"upload_bytes,omitempty"`
	DownloadBytes int64   `json:"download_bytes,omitempty"`
	CompileMs     float64 `json:"compile_ms,omitempty"`

	// Fits: GradCallMs (median, MinMs alike) is a whole ode.Solver.Grad
	// call with the record on the fit's problem at its starting values,
	// the fit's own solver, and GradKernelMs its kernel time (GPU): the
	// work of one step without the fit around it. StepOverKernel is
	// Ms/GradKernelMs (fits) or Ms/KernelMs (calls), StepOverCall
	// Ms/GradCallMs.
	GradCallMs     float64 `json:"grad_call_ms,omitempty"`
	GradKernelMs   float64 `json:"grad_kernel_ms,omitempty"`
	StepOverKernel float64 `json:"step_over_kernel,omitempty"`
	StepOverCall   float64 `json:"step_over_call,omitempty"`

	// LossFirst is the loss at step 1 (the starting values; of a call: its
	// loss), LossLast the loss at the start of the last step and
	// LossFinal that after the last update, on a fresh mesh (fits). Steps
	// is the number of optimiser steps the fit took (Reps + 1).
	LossFirst float64 `json:"loss_first"`
	LossLast  float64 `json:"loss_last,omitempty"`
	LossFinal float64 `json:"loss_final,omitempty"`
	Steps     int     `json:"steps,omitempty"`
	// LossFirstTight is the step-1 loss solved at rtol 1e-12, atol 1e-14
	// (TrainTightRelTol, TrainTightAbsTol) on the same engine (fits): the
	// problem's loss nearly free of the solver's error, which another
	// library's solve of the same problem at those tolerances reproduces
	// to 1e-8, while LossFirst differs from theirs at the level of the
	// local error of rtol 1e-6 (the controllers, hence the meshes, differ).
	LossFirstTight float64 `json:"loss_first_tight,omitempty"`
}

// TrainDump is the JSON document RunTrain writes to TrainConfig.Dump:
// the problems the suite solved and gradsolve's losses, so that the
// anchors solve the same thing. A neural batch of size b is the first b
// rows of Neural.Y0 and Neural.Targets; each Lorenz calibration has its own
// targets.
type TrainDump struct {
	Format  string `json:"format"` // "gradsolve/bench-train"
	Version int    `json:"version"`
	Engine  string `json:"engine"`
	// Steps is the number of optimiser steps of every fit (Reps + 1: a
	// warm-up and Reps timed steps); the anchors run as many.
	Steps int `json:"steps"`
	// TightRelTol and TightAbsTol are the tolerances of the results'
	// LossFirstTight.
	TightRelTol float64          `json:"tight_rtol"`
	TightAbsTol float64          `json:"tight_atol"`
	Neural      *TrainNeuralDump `json:"neural,omitempty"`
	LorenzFit   *TrainLorenzDump `json:"lorenz_fit,omitempty"`
	PKFit       *TrainPKDump     `json:"pk_fit,omitempty"`
}

// TrainPKDump is the PK calibration's problem (the "pk-fit" case) and
// results; each case's targets are the closed-form crossing times.
type TrainPKDump struct {
	Protocol  string        `json:"protocol"`
	C0Lo      float64       `json:"c0_lo"`
	C0Hi      float64       `json:"c0_hi"`
	KStarLo   float64       `json:"k_star_lo"`
	KStarHi   float64       `json:"k_star_hi"`
	Threshold float64       `json:"threshold"`
	T1        float64       `json:"t1"`
	RelTol    float64       `json:"rtol"`
	AbsTol    float64       `json:"atol"`
	LearnRate float64       `json:"lr"`
	K0        float64       `json:"k0"`
	Cases     []TrainPKCase `json:"cases"`
}

// TrainPKCase is one PK calibration: its targets and gradsolve's result.
type TrainPKCase struct {
	TrainDumpResult
	Targets []float64 `json:"targets"` // [n]: t*_i
}

// TrainNeuralDump is the neural fit's problem, with the keys of
// NeuralDump for the problem, the learning rate and the results.
type TrainNeuralDump struct {
	Protocol  string    `json:"protocol"`
	Sizes     []int     `json:"sizes"`
	Hidden    string    `json:"hidden_activation"`
	Output    string    `json:"output_activation"`
	Layout    string    `json:"layout"`
	Seed      uint64    `json:"seed"`
	T0        float64   `json:"t0"`
	T1        float64   `json:"t1"`
	RelTol    float64   `json:"rtol"`
	AbsTol    float64   `json:"atol"`
	LearnRate float64   `json:"lr"`
	Weights   []float64 `json:"weights"` // starting weights
	Y0        []float64 `json:"y0"`      // [B×2], row-major, the largest B
	Targets   []float64 `json:"targets"` // [B×2]

	Results []TrainDumpResult `json:"gradsolve"`
}

// TrainLorenzDump is the Lorenz calibration's problem and results.
type TrainLorenzDump struct {
	Protocol  string            `json:"protocol"`
	Sigma     float64           `json:"sigma"`
	Beta      float64           `json:"beta"`
	Y0        []float64         `json:"y0"`
	T0        float64           `json:"t0"`
	T1        float64           `json:"t1"`
	RelTol    float64           `json:"rtol"`
	AbsTol    float64           `json:"atol"`
	LearnRate float64           `json:"lr"`
	Rho0      float64           `json:"rho0"`
	RhoStarLo float64           `json:"rho_star_lo"`
	RhoStarHi float64           `json:"rho_star_hi"`
	Cases     []TrainLorenzCase `json:"cases"`
}

// TrainLorenzCase is one calibration: its targets and gradsolve's result.
type TrainLorenzCase struct {
	TrainDumpResult
	Targets []float64 `json:"targets"` // [n×3]: y(1) at ρ*_i
}

// TrainDumpResult is gradsolve's result for one fit: the losses of
// TrainRow and the median step time.
type TrainDumpResult struct {
	N              int     `json:"n"`
	LossFirst      float64 `json:"loss_first"`
	LossLast       float64 `json:"loss_last"`
	LossFinal      float64 `json:"loss_final"`
	LossFirstTight float64 `json:"loss_first_tight"`
	StepMs         float64 `json:"step_ms"`
	Steps          int     `json:"steps"`
}

// ReadTrainDump reads a TrainDump.
func ReadTrainDump(r io.Reader) (*TrainDump, error) {
	var d TrainDump
	if err := json.NewDecoder(r).Decode(&d); err != nil {
		return nil, fmt.Errorf("bench: reading the train dump: %w", err)
	}
	if d.Format != trainDumpFormat {
		return nil, fmt.Errorf("bench: train dump: format %q, want %q", d.Format, trainDumpFormat)
	}
	return &d, nil
}

const trainDumpFormat = "gradsolve/bench-train"

// RunTrain runs the training suite (see TrainRow for the cases): the
// neural fits, the Lorenz calibrations and the whole Grad calls of cfg, in
// that order, writing a row to w as each completes (a table, or JSON
// lines with cfg.JSON), and the dump after the fits if cfg.Dump is set. With
// cfg.GPU it first checks that the engine can run, and returns its error
// (for the engine "cuda" without a GPU, one that says "no GPU").
func RunTrain(w io.Writer, cfg TrainConfig) ([]TrainRow, error) {
	for _, c := range cfg.Cases {
		if !slices.Contains(TrainCases, c) {
			return nil, fmt.Errorf("bench: train: unknown case %q (want %s)", c, strings.Join(TrainCases, ", "))
		}
	}
	if cfg.GPU {
		if e := cfg.engine(); e == "cpu" {
			return nil, fmt.Errorf("bench: gpu-train: engine %q is not a GPU engine", e)
		}
		if err := trainEngineCheck(&cfg); err != nil {
			return nil, err
		}
	}
	neuralB := cfg.sizes(cfg.NeuralB, DefaultTrainNeuralB, DefaultGPUTrainNeuralB)
	fitN := cfg.sizes(cfg.FitN, DefaultTrainFitN, DefaultGPUTrainFitN)
	callN := cfg.sizes(cfg.CallN, DefaultTrainCallN, DefaultGPUTrainCallN)
	for _, l := range [][]int{neuralB, fitN, callN} {
		for _, n := range l {
			if n <= 0 {
				return nil, fmt.Errorf("bench: train: size %d must be positive", n)
			}
		}
	}
	workers := 0
	if cfg.engine() == "" || cfg.engine() == "cpu" {
		workers = cfg.Workers
		if workers <= 0 {
			workers = runtime.GOMAXPROCS(0)
		}
	}
	if !cfg.JSON {
		eng := cfg.engine()
		if eng == "" {
			eng = fmt.Sprintf("cpu (%d goroutines)", workers)
		}
		fmt.Fprintf(w, "Training steps and whole Grad calls on engine %s; median and min of %d (ms); "+
			"fits: Adam, a fresh mesh every step; kernel = device time of the kernels\n", eng, cfg.reps())
		fmt.Fprintf(w, "%-11s %8s %6s %7s | %9s %9s %9s %9s | %9s %9s %9s | %8s %8s | %13s %13s %13s\n",
			"case", "n", "rtol", "steps", "median", "min", "first", "new", "kernel", "call", "call-kern",
			"/kernel", "/call", "loss step 1", "loss last", "loss final")
	}
	var dump *TrainDump
	if cfg.Dump != nil {
		dump = &TrainDump{Format: trainDumpFormat, Version: 1, Engine: engineName(cfg.engine()), Steps: cfg.reps() + 1,
			TightRelTol: TrainTightRelTol, TightAbsTol: TrainTightAbsTol}
	}
	var rows []TrainRow
	emit := func(row *TrainRow) error {
		row.Suite, row.Engine, row.Reps, row.Workers = cfg.suite(), engineName(cfg.engine()), cfg.reps(), workers
		row.ratios()
		rows = append(rows, *row)
		return writeTrainRow(w, row, cfg.JSON)
	}
	if cfg.has("neural") && len(neuralB) > 0 {
		full := ProtocolNeural(slices.Max(neuralB), NeuralSeed)
		if dump != nil {
			dump.Neural = &TrainNeuralDump{
				Protocol: "neural ODE y' = MLP(y), t in [t0, t1], Tsit5; loss = mean_i |y_i(t1) - targets_i|^2; " +
					"one fit of the weights, Adam (optax.adam defaults but lr), a fresh adaptive mesh every step",
				Sizes: NeuralSizes, Hidden: nn.Tanh.String(), Output: nn.Identity.String(), Layout: neuralLayout,
				Seed: NeuralSeed, T0: full.T0, T1: full.T1, RelTol: NeuralRelTol, AbsTol: NeuralAbsTol,
				LearnRate: TrainNeuralLearnRate, Weights: full.Weights, Y0: full.Y0, Targets: full.Targets,
			}
		}
		for _, b := range neuralB {
			e := &NeuralEnsemble{MLP: full.MLP, Weights: full.Weights, Y0: full.Y0[:2*b], Targets: full.Targets[:2*b],
				T0: full.T0, T1: full.T1}
			row, err := trainFitRow(&cfg, "neural-fit", trainNeuralProblem(e), NeuralRelTol, NeuralAbsTol, TrainNeuralLearnRate, nil)
			if err != nil {
				return rows, fmt.Errorf("bench: %s neural fit B=%d: %w", cfg.suite(), b, err)
			}
			if dump != nil {
				dump.Neural.Results = append(dump.Neural.Results, row.dumpResult())
			}
			if err := emit(row); err != nil {
				return rows, err
			}
		}
	}
	if cfg.has("lorenz-fit") && len(fitN) > 0 {
		atol := TrainLorenzRelTol * lorenzAbsTolOverRelTol
		if dump != nil {
			dump.LorenzFit = &TrainLorenzDump{
				Protocol: "Lorenz y' = (sigma(y2-y1), y1(rho-y3)-y2, y1y2-beta y3), t in [t0, t1], Tsit5; n independent fits " +
					"of rho (one per trajectory), start rho0, targets y(t1) at rho* = linspace(rho_star_lo, rho_star_hi, n) " +
					"from gradsolve's solver; loss = sum_i |y_i(t1) - targets_i|^2; Adam per fit, a fresh mesh every step",
				Sigma: 10, Beta: 8.0 / 3, Y0: []float64{1, 0, 0}, T0: 0, T1: 1, RelTol: TrainLorenzRelTol, AbsTol: atol,
				LearnRate: TrainLorenzLearnRate, Rho0: TrainLorenzRho0,
				RhoStarLo: TrainLorenzRhoStarLo, RhoStarHi: TrainLorenzRhoStarHi,
			}
		}
		for _, n := range fitN {
			set := cfg.settings(TrainLorenzRelTol, atol)
			targets, err := trainLorenzTargets(n, set)
			if err != nil {
				return rows, fmt.Errorf("bench: %s Lorenz calibration n=%d: targets: %w", cfg.suite(), n, err)
			}
			row, err := trainFitRow(&cfg, "lorenz-fit", trainLorenzProblem(n, targets), TrainLorenzRelTol, atol, TrainLorenzLearnRate, nil)
			if err != nil {
				return rows, fmt.Errorf("bench: %s Lorenz calibration n=%d: %w", cfg.suite(), n, err)
			}
			if dump != nil {
				dump.LorenzFit.Cases = append(dump.LorenzFit.Cases, TrainLorenzCase{TrainDumpResult: row.dumpResult(), Targets: targets})
			}
			if err := emit(row); err != nil {
				return rows, err
			}
		}
	}
	if cfg.has("pk-fit") && len(fitN) > 0 {
		atol := TrainPKRelTol * eventsAbsTolOverRTol
		if dump != nil {
			dump.PKFit = &TrainPKDump{
				Protocol: "one-compartment PK C' = -k C with a clock tau' = 1, y0 = (C0, 0), C0 = linspace(c0_lo, c0_hi, n), " +
					"a terminal event when C falls to threshold (direction -1), T1 = t1, Tsit5; n independent fits of k (one per " +
					"trajectory), start k0, targets the closed-form crossing times ln(C0/threshold)/k* at k* = linspace(k_star_lo, " +
					"k_star_hi, n); loss = sum_i (tau_i(end) - targets_i)^2; Adam per fit, a fresh mesh every step",
				C0Lo: 1, C0Hi: 2, KStarLo: TrainPKKStarLo, KStarHi: TrainPKKStarHi, Threshold: eventsPKThreshold, T1: eventsPKT1,
				RelTol: TrainPKRelTol, AbsTol: atol, LearnRate: TrainPKLearnRate, K0: TrainPKK0,
			}
		}
		for _, n := range fitN {
			prob, ev, targets := trainPKProblem(n)
			row, err := trainFitRow(&cfg, "pk-fit", prob, TrainPKRelTol, atol, TrainPKLearnRate, ev)
			if err != nil {
				return rows, fmt.Errorf("bench: %s PK calibration n=%d: %w", cfg.suite(), n, err)
			}
			if dump != nil {
				dump.PKFit.Cases = append(dump.PKFit.Cases, TrainPKCase{TrainDumpResult: row.dumpResult(), Targets: targets})
			}
			if err := emit(row); err != nil {
				return rows, err
			}
		}
	}
	// The dump holds the fits' problems: written once they are done.
	if dump != nil {
		if err := json.NewEncoder(cfg.Dump).Encode(dump); err != nil {
			return rows, fmt.Errorf("bench: %s: writing the dump: %w", cfg.suite(), err)
		}
	}
	if cfg.has("grad-call") {
		for _, n := range callN {
			calls, err := trainCallRows(&cfg, n)
			if err != nil {
				return rows, fmt.Errorf("bench: %s Lorenz Grad calls n=%d: %w", cfg.suite(), n, err)
			}
			for _, row := range calls {
				if err := emit(row); err != nil {
					return rows, err
				}
			}
		}
	}
	return rows, nil
}

// engineName is the engine's name in rows: "cpu" for "".
func engineName(e string) string {
	if e == "" {
		return "cpu"
	}
	return e
}

// trainEngineCheck returns the error of a tiny Lorenz solve on cfg's
// engine: where it cannot run (no GPU, no driver) the suite stops before
// any work.
func trainEngineCheck(cfg *TrainConfig) error {
	e := ProtocolLorenz(2)
	p := e.Problem()
	sv, err := ode.NewSolver(p.Field, cfg.settings(1e-3, 1e-6))
	if err == nil {
		_, err = sv.Solve(&p)
	}
	if err != nil {
		return fmt.Errorf("bench: gpu-train: engine %q: %w", cfg.engine(), err)
	}
	return nil
}

// trainNeuralProblem is the neural fit: all shared weights of e, its loss.
func trainNeuralProblem(e *NeuralEnsemble) fit.Problem {
	return fit.Problem{ODE: e.Problem(), Loss: e.Loss(), Vars: fit.Vars{Shared: true}}
}

// trainLorenzEnsemble returns the Lorenz ensemble of n trajectories with
// ρ_i = rho[i] (σ = 10, β = 8/3, y0 = (1, 0, 0), t ∈ [0, 1]).
func trainLorenzEnsemble(rho []float64) ode.Problem {
	return (&LorenzEnsemble{Sigma: 10, Beta: 8.0 / 3, Rho: rho, Y0: [3]float64{1, 0, 0}, T0: 0, T1: 1}).Problem()
}

// trainLorenzTargets returns y(1) at ρ* = linspace(5, 20, n), [n×3], from
// a solver with the settings set.
func trainLorenzTargets(n int, set *ode.Settings) ([]float64, error) {
	p := trainLorenzEnsemble(problems.LinSpace(make([]float64, n), TrainLorenzRhoStarLo, TrainLorenzRhoStarHi))
	sv, err := ode.NewSolver(p.Field, set)
	if err != nil {
		return nil, err
	}
	sol, err := sv.Solve(&p)
	if err != nil {
		return nil, err
	}
	return slices.Clone(sol.Y), nil
}

// trainLorenzLoss is Σ_i |y_i(1) − target_i|² with the targets [n×3].
func trainLorenzLoss(targets []float64) ode.Loss {
	return ode.Loss{Name: "lorenz-calibration", Data: targets, DataDim: 3,
		F: func(y, _, d []tape.V) tape.V {
			return y[0].Sub(d[0]).Square().Add(y[1].Sub(d[1]).Square()).Add(y[2].Sub(d[2]).Square())
		}}
}

// trainLorenzProblem is the Lorenz calibration: n fits of ρ (column 1),
// each of one trajectory, starting at ρ = 10.
func trainLorenzProblem(n int, targets []float64) fit.Problem {
	rho := make([]float64, n)
	for i := range rho {
		rho[i] = TrainLorenzRho0
	}
	return fit.Problem{ODE: trainLorenzEnsemble(rho), Loss: trainLorenzLoss(targets), Vars: fit.Vars{P: []int{1}}, Fits: n}
}

// trainPKProblem is the PK calibration of n fits (the "pk-fit" case): the
// events suite's pharmacokinetic ensemble with every k at TrainPKK0, the
// loss Σ_i (τ_i − t*_i)² of the clock at the end (the terminal event's
// time) against the closed-form crossing times at k* (the targets,
// returned), and its terminal event.
func trainPKProblem(n int) (fit.Problem, []ode.Event, []float64) {
	ep := eventsPK(n)
	kstar := problems.LinSpace(make([]float64, n), TrainPKKStarLo, TrainPKKStarHi)
	targets := make([]float64, n)
	for i := range targets {
		targets[i] = math.Log(ep.prob.Y0[2*i]/eventsPKThreshold) / kstar[i]
	}
	p := ep.prob
	p.P = make([]float64, n)
	for i := range p.P {
		p.P[i] = TrainPKK0
	}
	loss := ode.Loss{Name: "pk-calibration", Data: targets, DataDim: 1,
		F: func(y, _, d []tape.V) tape.V { return y[1].Sub(d[0]).Square() }}
	return fit.Problem{ODE: p, Loss: loss, Vars: fit.Vars{P: []int{0}}, Fits: n}, []ode.Event{ep.ev}, targets
}

// traceCounts is what a GPU engine's trace has counted so far.
type traceCounts struct {
	kernel, transfer, compile time.Duration
	up, down                  int64
}

func (a traceCounts) sub(b traceCounts) traceCounts {
	return traceCounts{a.kernel - b.kernel, a.transfer - b.transfer, a.compile - b.compile, a.up - b.up, a.down - b.down}
}

// withTrace returns a context that makes the GPU engine count what it
// does, and a function that reads the counts so far (all zero on the CPU
// engine). It is the suite's one use of package cuda, the trace of
// traced in gpu.go.
func withTrace(ctx context.Context) (context.Context, func() traceCounts) {
	var tr cuda.Trace
	return cuda.WithTrace(ctx, &tr), func() traceCounts {
		s := tr.Stats()
		return traceCounts{s.Kernel, s.Transfer, s.Compile, s.Upload, s.Download}
	}
}

// stepClock is a progress.Reporter that notes the time and the trace's
// counts at every report: fit.Run reports after each update.
type stepClock struct {
	read   func() traceCounts
	at     []time.Time
	counts []traceCounts
}

func (c *stepClock) Report(int, float64) {
	c.at = append(c.at, time.Now())
	c.counts = append(c.counts, c.read())
}

func (c *stepClock) Finish() {}

// trainFitRow runs fit.New and fit.Run with Reps + 1 steps of Adam (lr)
// on prob, timing the steps after the first, then times whole Grad calls
// with the record on the starting problem with the fit's solver.
func trainFitRow(cfg *TrainConfig, name string, prob fit.Problem, rtol, atol, lr float64, events []ode.Event) (*TrainRow, error) {
	reps := cfg.reps()
	set := cfg.settings(rtol, atol)
	set.Events = events
	t := time.Now()
	f, err := fit.New(prob, set)
	if err != nil {
		return nil, err
	}
	newMs := ms(time.Since(t))
	ctx, read := withTrace(context.Background())
	clk := &stepClock{read: read}
	start, c0 := time.Now(), read()
	res, err := f.Run(ctx, &fit.Settings{Steps: reps + 1, Optimizer: &optim.Adam{LearnRate: lr}, Remesh: 1, Progress: clk})
	if err != nil {
		return nil, err
	}
	if res.Steps != reps+1 || len(clk.at) != reps+1 {
		return nil, fmt.Errorf("fit took %d steps (%d reports), want %d (status %v)", res.Steps, len(clk.at), reps+1, res.Status)
	}
	var steps, kern, xfer []float64
	for k := 1; k <= reps; k++ {
		steps = append(steps, ms(clk.at[k].Sub(clk.at[k-1])))
		d := clk.counts[k].sub(clk.counts[k-1])
		kern = append(kern, ms(d.kernel))
		xfer = append(xfer, ms(d.transfer))
	}
	last := clk.counts[reps].sub(clk.counts[reps-1])
	row := &TrainRow{
		Case: name, N: prob.ODE.N, RelTol: rtol, AbsTol: atol, LearnRate: lr,
		Ms: median(steps), MinMs: slices.Min(steps), FirstMs: ms(clk.at[0].Sub(start)), NewMs: newMs,
		KernelMs: median(kern), TransferMs: median(xfer), UploadBytes: last.up, DownloadBytes: last.down,
		CompileMs: ms(clk.counts[reps].sub(c0).compile),
		LossFirst: res.History[0], LossLast: res.History[len(res.History)-1], LossFinal: finiteOr0(res.FinalLoss),
		Steps: res.Steps,
	}
	if prob.Fits > 1 {
		row.N = prob.Fits
	}
	// The same work without the fit: Grad with the record at the start.
	sv := f.Solver()
	p0 := f.Problem(f.Init(nil))
	var g ode.Gradient
	var call, ck []float64
	for k := 0; k <= reps; k++ {
		c1 := read()
		t := time.Now()
		if _, err := sv.GradContext(ctx, &g, &p0, prob.Loss, nil); err != nil {
			return nil, fmt.Errorf("Grad call at the starting values: %w", err)
		}
		if k == 0 {
			row.StepsPerTraj = meanInts(g.Mesh.Stats.Accepted)
			continue
		}
		call = append(call, ms(time.Since(t)))
		ck = append(ck, ms(read().sub(c1).kernel))
	}
	row.GradCallMs, row.GradKernelMs = median(call), median(ck)
	// The step-1 loss solved tightly, for the anchors.
	tset := cfg.settings(TrainTightRelTol, TrainTightAbsTol)
	tset.Events = events
	tight, err := ode.NewSolver(prob.ODE.Field, tset)
	if err != nil {
		return nil, err
	}
	if row.LossFirstTight, _, err = tight.Loss(&p0, prob.Loss, nil); err != nil {
		return nil, fmt.Errorf("the loss at rtol %g: %w", TrainTightRelTol, err)
	}
	return row, nil
}

// trainCallRows times whole Grad calls of the Lorenz protocol at n,
// rtol 1e-6: with the record, and on a mesh recorded before, each as a
// whole result ("grad-record", "grad-mesh") and with the loss and the
// gradients only ("grad-record-omit", "grad-mesh-omit": Gradient.Omit =
// OmitStates|OmitStats, the final states and the rejected and
// field-evaluation counts neither copied back nor scattered), taking
// turns.
func trainCallRows(cfg *TrainConfig, n int) (rows []*TrainRow, err error) {
	reps := cfg.reps()
	rtol := TrainLorenzRelTol
	atol := rtol * lorenzAbsTolOverRelTol
	p := ProtocolLorenz(n).Problem()
	sv, err := ode.NewSolver(p.Field, cfg.settings(rtol, atol))
	if err != nil {
		return nil, err
	}
	ctx, read := withTrace(context.Background())
	c0 := read()
	mesh, _, err := sv.RecordContext(ctx, &p)
	if err != nil {
		return nil, err
	}
	loss := ode.SumSquares()
	only := ode.OmitStates | ode.OmitStats
	gs := []*ode.Gradient{{}, {}, {Omit: only}, {Omit: only}}
	meshes := []*ode.Mesh{nil, mesh, nil, mesh}
	var cases []func() error
	for k := range gs {
		cases = append(cases, func() error { _, err := sv.GradContext(ctx, gs[k], &p, loss, meshes[k]); return err })
	}
	rows = []*TrainRow{{Case: "grad-record"}, {Case: "grad-mesh"}, {Case: "grad-record-omit"}, {Case: "grad-mesh-omit"}}
	wall := make([][]float64, len(rows))
	kern := make([][]float64, len(rows))
	xfer := make([][]float64, len(rows))
	for r := 0; r <= reps; r++ {
		for k, c := range cases {
			c1 := read()
			t := time.Now()
			if err := c(); err != nil {
				return nil, err
			}
			dt := ms(time.Since(t))
			d := read().sub(c1)
			if r == 0 {
				rows[k].FirstMs = dt
				continue
			}
			wall[k] = append(wall[k], dt)
			kern[k] = append(kern[k], ms(d.kernel))
			xfer[k] = append(xfer[k], ms(d.transfer))
			rows[k].UploadBytes, rows[k].DownloadBytes = d.up, d.down
		}
	}
	compile := ms(read().sub(c0).compile)
	for k, row := range rows {
		row.N, row.RelTol, row.AbsTol = n, rtol, atol
		row.StepsPerTraj = meanInts(mesh.Stats.Accepted)
		row.Ms, row.MinMs = median(wall[k]), slices.Min(wall[k])
		row.KernelMs, row.TransferMs = median(kern[k]), median(xfer[k])
		row.CompileMs = compile
	}
	for k, row := range rows {
		row.LossFirst = gs[k].Loss
	}
	return rows, nil
}

// ratios fills StepOverKernel and StepOverCall.
func (r *TrainRow) ratios() {
	if k := r.GradKernelMs; k > 0 {
		r.StepOverKernel = r.Ms / k
	} else if k := r.KernelMs; k > 0 && r.GradCallMs == 0 {
		r.StepOverKernel = r.Ms / k
	}
	if r.GradCallMs > 0 {
		r.StepOverCall = r.Ms / r.GradCallMs
	}
}

func (r *TrainRow) dumpResult() TrainDumpResult {
	return TrainDumpResult{N: r.N, LossFirst: r.LossFirst, LossLast: r.LossLast, LossFinal: r.LossFinal,
		LossFirstTight: r.LossFirstTight, StepMs: r.Ms, Steps: r.Steps}
}

// finiteOr0 returns x, or 0 if it is not finite (JSON has no NaN).
func finiteOr0(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// writeTrainRow writes a row as JSON or as a table line.
func writeTrainRow(w io.Writer, r *TrainRow, asJSON bool) error {
	if asJSON {
		return writeJSON(w, r)
	}
	opt := func(x float64) string {
		if x == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", x)
	}
	optE := func(x float64) string {
		if x == 0 {
			return "-"
		}
		return fmt.Sprintf("%.6e", x)
	}
	rat := func(x float64) string {
		if x == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", x)
	}
	_, err := fmt.Fprintf(w, "%-11s %8d %6.0e %7.1f | %9.3f %9.3f %9.3f %9s | %9s %9s %9s | %8s %8s | %13.6e %13s %13s\n",
		r.Case, r.N, r.RelTol, r.StepsPerTraj, r.Ms, r.MinMs, r.FirstMs, opt(r.NewMs),
		opt(r.KernelMs), opt(r.GradCallMs), opt(r.GradKernelMs), rat(r.StepOverKernel), rat(r.StepOverCall),
		r.LossFirst, optE(r.LossLast), optE(r.LossFinal))
	return err
}

// trainDumpLosses recomputes the step-1 losses of a dump (the loss at the
// starting values on a freshly recorded mesh) with solver settings
// set (its Method and tolerances are replaced by the dump's): those of
// the neural fits, then those of the Lorenz calibrations, in the dump's
// order. A dump's losses must be reproduced exactly by the engine that
// wrote it.
func trainDumpLosses(d *TrainDump, set ode.Settings) (neural, lorenz []float64, err error) {
	if nd := d.Neural; nd != nil {
		mlp := nn.NewMLP(nd.Sizes, nn.Tanh, nn.Identity)
		if nd.Hidden != nn.Tanh.String() || nd.Output != nn.Identity.String() || len(nd.Weights) != mlp.NumParams() {
			return nil, nil, fmt.Errorf("bench: train dump: network %v %s/%s with %d weights not supported", nd.Sizes, nd.Hidden, nd.Output, len(nd.Weights))
		}
		s := set
		s.Method, s.RelTol, s.AbsTol = ode.Tsit5, nd.RelTol, nd.AbsTol
		for _, r := range nd.Results {
			if 2*r.N > len(nd.Y0) || len(nd.Y0) != len(nd.Targets) {
				return nil, nil, fmt.Errorf("bench: train dump: neural B=%d: %d initial states", r.N, len(nd.Y0)/2)
			}
			e := &NeuralEnsemble{MLP: mlp, Weights: nd.Weights, Y0: nd.Y0[:2*r.N], Targets: nd.Targets[:2*r.N], T0: nd.T0, T1: nd.T1}
			p := e.Problem()
			l, err := dumpLoss(&p, e.Loss(), &s)
			if err != nil {
				return nil, nil, err
			}
			neural = append(neural, l)
		}
	}
	if ld := d.LorenzFit; ld != nil {
		s := set
		s.Method, s.RelTol, s.AbsTol = ode.Tsit5, ld.RelTol, ld.AbsTol
		if len(ld.Y0) != 3 {
			return nil, nil, fmt.Errorf("bench: train dump: Lorenz y0 has %d components, want 3", len(ld.Y0))
		}
		for _, c := range ld.Cases {
			if len(c.Targets) != 3*c.N {
				return nil, nil, fmt.Errorf("bench: train dump: Lorenz n=%d: %d targets", c.N, len(c.Targets))
			}
			rho := make([]float64, c.N)
			for i := range rho {
				rho[i] = ld.Rho0
			}
			p := (&LorenzEnsemble{Sigma: ld.Sigma, Beta: ld.Beta, Rho: rho, Y0: [3]float64(ld.Y0), T0: ld.T0, T1: ld.T1}).Problem()
			l, err := dumpLoss(&p, trainLorenzLoss(c.Targets), &s)
			if err != nil {
				return nil, nil, err
			}
			lorenz = append(lorenz, l)
		}
	}
	return neural, lorenz, nil
}

func dumpLoss(p *ode.Problem, loss ode.Loss, set *ode.Settings) (float64, error) {
	sv, err := ode.NewSolver(p.Field, set)
	if err != nil {
		return 0, err
	}
	l, _, err := sv.Loss(p, loss, nil)
	return l, err
}
