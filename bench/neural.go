package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"

	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Defaults of NeuralConfig.
var DefaultNeuralB = []int{256, 4096}

// The neural protocol's constants: network sizes, seed, time span,
// tolerances and the reference's tolerances (DOP853).
const (
	NeuralSeed   = 1
	NeuralRelTol = 1e-6
	NeuralAbsTol = 1e-8

	neuralRefRelTol = 1e-12
	neuralRefAbsTol = 1e-14
)

// NeuralSizes are the layer sizes of the neural protocol's network:
// 2 → 32 tanh → 32 tanh → 2 (identity), 1,218 parameters.
var NeuralSizes = []int{2, 32, 32, 2}

// NeuralMLP returns the network of the neural protocol,
// nn.NewMLP(NeuralSizes, nn.Tanh, nn.Identity).
func NeuralMLP() nn.MLP { return nn.NewMLP(NeuralSizes, nn.Tanh, nn.Identity) }

// NeuralEnsemble is a batch of B trajectories of the neural field
// y' = MLP(y) (autonomous, d = 2) whose network weights are shared by the
// whole batch, with one target per trajectory.
type NeuralEnsemble struct {
	MLP     nn.MLP
	Weights []float64 // len MLP.NumParams(), layout as documented on nn.MLP
	Y0      []float64 // [B×2]
	Targets []float64 // [B×2]
	T0, T1  float64
}

// ProtocolNeural returns the batch of b trajectories of the neural
// protocol: y' = MLP(y) with NeuralMLP's 1,218 weights from
// MLP.Init(nil, rand.New(rand.NewPCG(seed, seed))) (Glorot uniform, zero
// biases), y0 drawn uniformly from [−1, 1]² by rand.New(rand.NewPCG(seed,
// seed+1)) (x then y, trajectory by trajectory, so a smaller batch is a
// prefix of a larger one), targets y0 rotated by 90° ((x, y) → (−y, x)),
// t ∈ [0, 1]. It panics if b < 1.
func ProtocolNeural(b int, seed uint64) *NeuralEnsemble {
	return protocolNeural(b, seed, NeuralMLP())
}

// protocolNeural is ProtocolNeural with the network mlp (input and output
// of 2), its weights drawn alike.
func protocolNeural(b int, seed uint64, mlp nn.MLP) *NeuralEnsemble {
	if b < 1 {
		panic(fmt.Sprintf("bench: ProtocolNeural: b = %d < 1", b))
	}
	e := &NeuralEnsemble{
		MLP:     mlp,
		Weights: mlp.Init(nil, rand.New(rand.NewPCG(seed, seed))),
		Y0:      make([]float64, 2*b),
		Targets: make([]float64, 2*b),
		T0:      0, T1: 1,
	}
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for i := range e.Y0 {
		e.Y0[i] = 2*rng.Float64() - 1
	}
	for i := range b {
		e.Targets[2*i], e.Targets[2*i+1] = -e.Y0[2*i+1], e.Y0[2*i]
	}
	return e
}

// B returns the number of trajectories.
func (e *NeuralEnsemble) B() int { return len(e.Y0) / 2 }

// Field returns the neural field y' = MLP(y): Dim 2, no per-trajectory
// parameters, the MLP's weights as shared parameters.
func (e *NeuralEnsemble) Field() ode.Field {
	mlp := e.MLP
	return ode.Field{Name: "neural", Dim: 2, Shared: mlp.NumParams(),
		F: func(_ tape.V, y, p []tape.V) []tape.V { return mlp.Apply(p, y) }}
}

// Problem returns the batch as an ode.Problem on Field.
func (e *NeuralEnsemble) Problem() ode.Problem {
	return ode.Problem{Field: e.Field(), N: e.B(), Y0: e.Y0, Shared: e.Weights, T0: e.T0, T1: e.T1}
}

// Loss returns the protocol's loss, the batch mean of |y_i(1) − target_i|².
func (e *NeuralEnsemble) Loss() ode.Loss {
	return ode.Loss{Name: "neural-mse", Data: e.Targets, DataDim: 2, Mean: true,
		F: func(y, _, d []tape.V) tape.V {
			return y[0].Sub(d[0]).Square().Add(y[1].Sub(d[1]).Square())
		}}
}

// eval computes dst = MLP(y) in plain float64 arithmetic (for the
// reference solution); dst and y have length 2.
func (e *NeuralEnsemble) eval(dst, y []float64) {
	x := y
	off := 0
	for _, l := range e.MLP {
		w := e.Weights[off : off+l.NumParams()]
		out := make([]float64, l.Out)
		for i := range out {
			s := w[l.Out*l.In+i]
			for j, xj := range x {
				s += w[i*l.In+j] * xj
			}
			if l.Act == nn.Tanh {
				s = math.Tanh(s)
			}
			out[i] = s
		}
		x = out
		off += l.NumParams()
	}
	copy(dst, x)
}

// Reference returns the final states of the sampled trajectories idx from
// refode's DOP853 at rtol 1e-12, atol 1e-14, with the network evaluated in
// plain float64 arithmetic, independently of package nn's traced form.
func (e *NeuralEnsemble) Reference(idx []int) ([][]float64, error) {
	f := func(_ float64, y, dy []float64) { e.eval(dy, y) }
	ref := make([][]float64, len(idx))
	for k, i := range idx {
		ys, err := refode.DOP853(f, e.T0, e.Y0[2*i:2*i+2], []float64{e.T1}, neuralRefRelTol, neuralRefAbsTol)
		if err != nil {
			return nil, fmt.Errorf("bench: neural reference, trajectory %d: %w", i, err)
		}
		ref[k] = ys[0]
	}
	return ref, nil
}

// NeuralConfig configures RunNeural. The zero value runs the full suite.
type NeuralConfig struct {
	// B lists the batch sizes; nil means DefaultNeuralB.
	B []int
	// Reps is the number of timed repetitions; 0 means DefaultReps.
	Reps int
	// RefSample is the most trajectories the reference is computed for;
	// 0 means DefaultLorenzRefSample.
	RefSample int
	// Workers is the number of goroutines of the parallel runs; 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
	// JSON writes one JSON object per row instead of the table.
	JSON bool
	// Dump, if not nil, receives the problem of the largest batch and
	// gradsolve's loss and gradient for every batch as one JSON document
	// (NeuralDump), for bench/anchors/diffrax_neural.py.
	Dump io.Writer
}

// NeuralRow is one batch size of the neural suite. Times are medians in
// milliseconds; the library runs with Workers goroutines unless the name
// ends in 1 (one goroutine).
type NeuralRow struct {
	B       int     `json:"b"`
	RelTol  float64 `json:"rtol"`
	AbsTol  float64 `json:"atol"`
	Workers int     `json:"workers"`

	// Steps and Rejected are the mean accepted and rejected steps per
	// trajectory.
	Steps    float64 `json:"steps_per_traj"`
	Rejected float64 `json:"rejected_per_traj"`

	// Forward is ode.Solver.Solve, GradRecord ode.Solver.Grad with the
	// record included (the mesh argument nil), each on Workers goroutines
	// and, as Forward1 and GradRecord1, on one.
	Forward     float64 `json:"forward_ms"`
	GradRecord  float64 `json:"grad_record_ms"`
	Forward1    float64 `json:"forward1_ms"`
	GradRecord1 float64 `json:"grad_record1_ms"`

	// GradRecordRatio = GradRecord/Forward; Speedup = GradRecord1/GradRecord,
	// the gradient's gain from Workers goroutines.
	GradRecordRatio float64 `json:"grad_record_over_forward"`
	Speedup         float64 `json:"grad_speedup"`

	// Loss is the loss, GradNorm the largest |∂L/∂w| over the weights.
	Loss     float64 `json:"loss"`
	GradNorm float64 `json:"grad_max_abs"`

	// Err is the median relative error of the final states against the
	// DOP853 reference over RefSample trajectories.
	Err       float64 `json:"median_rel_err"`
	RefSample int     `json:"ref_sample"`
}

// NeuralDump is the JSON document RunNeural writes to NeuralConfig.Dump:
// the neural protocol's problem for the largest batch, and gradsolve's
// results for every batch. The batch of size b is the first b rows of Y0
// and Targets.
type NeuralDump struct {
	Protocol string  `json:"protocol"`
	Sizes    []int   `json:"sizes"`
	Hidden   string  `json:"hidden_activation"`
	Output   string  `json:"output_activation"`
	Layout   string  `json:"layout"`
	Seed     uint64  `json:"seed"`
	T0       float64 `json:"t0"`
	T1       float64 `json:"t1"`
	RelTol   float64 `json:"rtol"`
	AbsTol   float64 `json:"atol"`

	Weights []float64 `json:"weights"`
	Y0      []float64 `json:"y0"`      // [B×2], row-major
	Targets []float64 `json:"targets"` // [B×2], row-major

	Results []NeuralDumpResult `json:"gradsolve"`
}

// NeuralDumpResult is gradsolve's result for one batch size: the loss, its
// gradient with respect to the weights (same layout as the weights) and the
// mean steps per trajectory.
type NeuralDumpResult struct {
	B     int       `json:"b"`
	Loss  float64   `json:"loss"`
	Grad  []float64 `json:"grad"`
	Steps float64   `json:"steps_per_traj"`
}

// neuralLayout documents the weight layout in the dump.
const neuralLayout = "layers in order; each layer W (Out×In, row-major, W[i][j] = w[i*In+j]) then b (Out); " +
	"layer(x) = act(W·x + b); y' = layer3(layer2(layer1(y)))"

// RunNeural runs the neural suite (the protocol of ProtocolNeural with
// Tsit5, rtol 1e-6, atol 1e-8, and the loss of NeuralEnsemble.Loss): for
// every batch size of cfg it times the forward solve and the gradient with
// respect to the shared weights, record included, on Workers goroutines
// and on one, side by side, measures the achieved error, writes a row to w
// as it completes (a table, or JSON lines with cfg.JSON) and returns the
// rows. Only ode's public API is used.
func RunNeural(w io.Writer, cfg NeuralConfig) ([]NeuralRow, error) {
	bs := cfg.B
	if bs == nil {
		bs = DefaultNeuralB
	}
	refSample := cfg.RefSample
	if refSample <= 0 {
		refSample = DefaultLorenzRefSample
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	bmax := 0
	for _, b := range bs {
		if b <= 0 {
			return nil, fmt.Errorf("bench: neural: B = %d must be positive", b)
		}
		bmax = max(bmax, b)
	}
	if !cfg.JSON {
		fmt.Fprintf(w, "Neural ODE y' = MLP(y), MLP 2-32-32-2 tanh (1218 shared weights), Tsit5, rtol %g, atol %g, "+
			"loss mean |y(1) - target|^2, median of %d (ms); %d goroutines (suffix 1: one)\n",
			NeuralRelTol, NeuralAbsTol, repsOrDefault(cfg.Reps), workers)
		fmt.Fprintf(w, "%7s %7s %9s %9s %9s %9s %8s %8s %12s %9s\n",
			"B", "steps", "forward", "grad+rec", "fwd1", "g+r1", "g+r/fw", "g+r x", "loss", "err")
	}
	full := ProtocolNeural(bmax, NeuralSeed)
	var dump *NeuralDump
	if cfg.Dump != nil {
		dump = &NeuralDump{
			Protocol: "neural ODE y' = MLP(y), t in [t0, t1], Tsit5; loss = mean_i |y_i(t1) - targets_i|^2; " +
				"gradient with respect to the weights",
			Sizes: NeuralSizes, Hidden: nn.Tanh.String(), Output: nn.Identity.String(), Layout: neuralLayout,
			Seed: NeuralSeed, T0: full.T0, T1: full.T1, RelTol: NeuralRelTol, AbsTol: NeuralAbsTol,
			Weights: full.Weights, Y0: full.Y0, Targets: full.Targets,
		}
	}
	var rows []NeuralRow
	for _, b := range bs {
		e := &NeuralEnsemble{MLP: full.MLP, Weights: full.Weights, Y0: full.Y0[:2*b], Targets: full.Targets[:2*b],
			T0: full.T0, T1: full.T1}
		row, g, err := neuralRow(e, workers, cfg.Reps, refSample)
		if err != nil {
			return rows, fmt.Errorf("bench: neural B=%d: %w", b, err)
		}
		rows = append(rows, *row)
		if dump != nil {
			dump.Results = append(dump.Results, NeuralDumpResult{B: b, Loss: g.Loss, Grad: g.Shared, Steps: row.Steps})
		}
		if cfg.JSON {
			if err := writeJSON(w, row); err != nil {
				return rows, err
			}
		} else {
			fmt.Fprintf(w, "%7d %7.1f %9.3f %9.3f %9.3f %9.3f %8.2f %8.2f %12.6e %9.2e\n",
				row.B, row.Steps, row.Forward, row.GradRecord, row.Forward1, row.GradRecord1,
				row.GradRecordRatio, row.Speedup, row.Loss, row.Err)
		}
	}
	if dump != nil {
		enc := json.NewEncoder(cfg.Dump)
		if err := enc.Encode(dump); err != nil {
			return rows, fmt.Errorf("bench: neural: writing the dump: %w", err)
		}
	}
	return rows, nil
}

// neuralRow measures one batch size of the neural suite and returns its
// row and a gradient (record included).
func neuralRow(e *NeuralEnsemble, workers, reps, refSample int) (*NeuralRow, *ode.Gradient, error) {
	p := e.Problem()
	loss := e.Loss()
	set := ode.Settings{Method: ode.Tsit5, RelTol: NeuralRelTol, AbsTol: NeuralAbsTol, Exec: tape.ExecSettings{Workers: workers}}
	sv, err := ode.NewSolver(p.Field, &set)
	if err != nil {
		return nil, nil, err
	}
	set1 := set
	set1.Exec.Workers = 1
	sv1, err := ode.NewSolver(p.Field, &set1)
	if err != nil {
		return nil, nil, err
	}
	sol, err := sv.Solve(&p)
	if err != nil {
		return nil, nil, err
	}
	idx := subsample(e.B(), refSample)
	ref, err := e.Reference(idx)
	if err != nil {
		return nil, nil, err
	}
	var g, g1 ode.Gradient
	times, err := timeCases(reps,
		func() error { _, err := sv.Solve(&p); return err },
		func() error { _, err := sv.Grad(&g, &p, loss, nil); return err },
		func() error { _, err := sv1.Solve(&p); return err },
		func() error { _, err := sv1.Grad(&g1, &p, loss, nil); return err },
	)
	if err != nil {
		return nil, nil, err
	}
	gmax := 0.0
	for _, v := range g.Shared {
		gmax = math.Max(gmax, math.Abs(v))
	}
	row := &NeuralRow{
		B: e.B(), RelTol: NeuralRelTol, AbsTol: NeuralAbsTol, Workers: workers,
		Steps:    meanInts(sol.Stats.Accepted),
		Rejected: meanInts(sol.Stats.Rejected),
		Forward:  times[0].wall, GradRecord: times[1].wall, Forward1: times[2].wall, GradRecord1: times[3].wall,
		Loss: g.Loss, GradNorm: gmax,
		Err:       medianRelErr(sol.Y, 2, idx, ref),
		RefSample: len(idx),
	}
	row.GradRecordRatio = row.GradRecord / row.Forward
	row.Speedup = row.GradRecord1 / row.GradRecord
	return row, &g, nil
}
