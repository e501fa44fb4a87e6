package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// The events suite (gradsolve bench -suite gpu-events): problems with
// events (ode.Settings.Events) on an engine, Tsit5, timed as a forward
// solve and as a gradient with its record, with errors against closed
// forms; the protocol of bench/anchors/diffrax_events.py.
//
//   - ball: a ball dropped from rest at height h0 = linspace(0.8, 1.2, n)
//     bouncing on the floor x = 0 (event x = 0, falling; Apply v → −e·v)
//     with restitution e = linspace(0.9, 0.65, n), gravity 9.81, to
//     T = 1.6 (2 or more bounces each); loss Σ x(T), gradient dx(T)/de.
//   - pk: a one-compartment pharmacokinetic model C' = −k·C with a clock
//     τ' = 1, C0 = linspace(1, 2, n), k = linspace(0.2, 1.2, n), stopped
//     by a terminal event when C falls to 0.25 (T1 = 100); loss Σ τ(t*) =
//     Σ t*, gradient dt*/dk = −t*/k.
//
// atol = rtol·1e-2.

// Defaults of the events suite.
var (
	DefaultEventsN      = []int{65536}
	DefaultEventsRelTol = []float64{1e-6, 1e-8}
)

// The events protocol's constants (bench/anchors/diffrax_events.py; g is
// problems.Gravity).
const (
	eventsBallT          = 1.6
	eventsPKThreshold    = 0.25
	eventsPKT1           = 100.0
	eventsAbsTolOverRTol = 1e-2
	eventsSamples        = 5 // trajectories whose values and gradients a row lists
)

// EventsRow is one row of the events suite. Times are medians in
// milliseconds (kernel: device time of the kernels, call: the whole
// ode.Solver call, its copies included) of each kind's calls in a row,
// after one warm-up call of every kind (timeGPUInRow: as the anchor
// times Diffrax's; GradKeepMixedCall apart).
type EventsRow struct {
	Problem string  `json:"problem"` // "ball" or "pk"
	Engine  string  `json:"engine"`
	N       int     `json:"n"`
	RelTol  float64 `json:"rtol"`
	AbsTol  float64 `json:"atol"`
	// Steps, Rejected and Events are the means per trajectory.
	Steps    float64 `json:"steps_per_traj"`
	Rejected float64 `json:"rejected_per_traj"`
	Events   float64 `json:"events_per_traj"`

	Forward        float64 `json:"forward_ms"`
	GradRecord     float64 `json:"grad_record_ms"`
	ForwardCall    float64 `json:"forward_call_ms"`
	GradRecordCall float64 `json:"grad_record_call_ms"`
	// GradOmitCall is the whole gradient call with the record that asks
	// for the loss and the gradients alone (Gradient.Omit =
	// OmitStates|OmitStats: no states, times or counts brought back),
	// GradOmit its kernels' time.
	GradOmit     float64 `json:"grad_omit_ms"`
	GradOmitCall float64 `json:"grad_omit_call_ms"`
	// GradKeepCall is that call on a solver with ode.Settings.KeepGrads:
	// the per-trajectory gradients, statuses, counts and times stay on
	// the device (Gradient.Resident, unread), the loss, the shared
	// gradient and whether all ended well come back (issue 25's
	// comparison with a jitted Diffrax gradient, whose arrays stay on the
	// device); GradKeep its kernels' time, GradKeepCopy, GradKeepStage
	// and GradKeepScatter its split as GradOmitCopy's. The whole calls
	// are timed without a cuda.Trace, as a user calls (and as the anchor
	// times Diffrax's: in a row), since session 46: a kept call under a
	// Trace times its kernel with two event records and a wait for the
	// second, which an untraced one leaves out. The kernel's time and the
	// split come from as many traced calls after them; GradKeepTracedCall
	// is those calls' whole time (the figure up to session 45).
	GradKeep           float64 `json:"grad_keep_ms"`
	GradKeepCall       float64 `json:"grad_keep_call_ms"`
	GradKeepTracedCall float64 `json:"grad_keep_traced_call_ms"`
	// GradKeepMixedCall is GradKeepCall timed with the four calls in
	// turn (forward, gradient, with Omit, kept), each kept call after the
	// other three (the suite's protocol up to session 41), where the
	// other figures time each kind's calls in a row, as the anchor times
	// Diffrax's gradient (bench/anchors/_common.py's time_fn).
	GradKeepMixedCall float64 `json:"grad_keep_mixed_call_ms"`
	GradKeepCopy      float64 `json:"grad_keep_copy_ms"`
	GradKeepStage     float64 `json:"grad_keep_stage_ms"`
	GradKeepScatter   float64 `json:"grad_keep_scatter_ms"`
	// GradKeepBatch is the kept call's host wall time in its launch's
	// batch (the driver's calls and the waits for the device:
	// cuda.TraceStats.Batch), GradKeepAheadWait the time its inputs'
	// compare took past its kernel (TraceStats.AheadWait: in the batch;
	// medians). The call less GradKeepStage, GradKeepBatch and
	// GradKeepScatter is package ode's and the engine's work outside the
	// launch; GradKeepBatch less GradKeep, GradKeepCopy and
	// GradKeepAheadWait the driver's calls and the device's work besides
	// the engine kernel.
	GradKeepBatch     float64 `json:"grad_keep_batch_ms"`
	GradKeepAheadWait float64 `json:"grad_keep_ahead_wait_ms"`
	// GradCopy, GradStage and GradScatter split the whole gradient call
	// with the record (GradRecordCall, everything returned) and
	// GradOmitCopy, GradOmitStage and GradOmitScatter the one with
	// Gradient.Omit: the copies between host and device, and the
	// host's work before and after the device's (cuda.TraceStats'
	// Transfer, Stage and Scatter; medians). The call less the kernels
	// and these is package ode's work, the driver's calls and
	// synchronisation. 0 on an engine without a trace.
	GradCopy        float64 `json:"grad_copy_ms"`
	GradStage       float64 `json:"grad_stage_ms"`
	GradScatter     float64 `json:"grad_scatter_ms"`
	GradOmitCopy    float64 `json:"grad_omit_copy_ms"`
	GradOmitStage   float64 `json:"grad_omit_stage_ms"`
	GradOmitScatter float64 `json:"grad_omit_scatter_ms"`

	// ValueErr is the median error of the values against the closed
	// form (ball: |x(T) − x|, absolute; pk: |t* − t|/t), GradErr that of
	// the gradients (|g − g_cf| / max(1, |g_cf|)), over all trajectories.
	ValueErr float64 `json:"median_value_err"`
	GradErr  float64 `json:"median_grad_err"`
	// Samples are eventsSamples evenly spaced trajectories (the anchor's
	// _common.subsample), their Values (x(T), or t*) and Grads (dx/de,
	// or dt*/dk).
	Samples []int     `json:"samples"`
	Values  []float64 `json:"values"`
	Grads   []float64 `json:"grads"`
	Loss    float64   `json:"loss"`
	Compile float64   `json:"compile_ms"`
	Layout  string    `json:"layout,omitempty"`
}

// eventsProblem is one problem of the events suite.
type eventsProblem struct {
	name string
	prob ode.Problem
	ev   ode.Event
	loss ode.Loss
	// closed returns trajectory i's closed-form value and gradient.
	closed func(i int) (value, grad float64)
	// value returns trajectory i's value from a gradient's solution.
	value func(g *ode.Gradient, i int) float64
	abs   bool // ValueErr is absolute
}

// eventsBall returns the ball problem of n trajectories.
func eventsBall(n int) *eventsProblem {
	f, ev := problems.BouncingBall()
	h0 := problems.LinSpace(make([]float64, n), 0.8, 1.2)
	e := problems.LinSpace(make([]float64, n), 0.9, 0.65)
	y0 := make([]float64, 2*n)
	for i := range h0 {
		y0[2*i] = h0[i]
	}
	return &eventsProblem{
		name: "ball", ev: ev, abs: true,
		prob: ode.Problem{Field: f, N: n, Y0: y0, P: e, T1: eventsBallT},
		loss: ode.Component(0),
		closed: func(i int) (float64, float64) {
			x, dx, _ := problems.BouncingBallClosedForm(h0[i], e[i], eventsBallT)
			return x, dx
		},
		value: func(g *ode.Gradient, i int) float64 { return g.Solution.Y[2*i] },
	}
}

// eventsPK returns the pharmacokinetic problem of n trajectories.
func eventsPK(n int) *eventsProblem {
	f := ode.Field{Name: "pk", Dim: 2, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0]), y[0].Const(1)}
	}}
	ev := ode.Event{Name: "threshold", Direction: -1, Terminal: true,
		G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].Sub(y[0].Const(eventsPKThreshold)) }}
	c0 := problems.LinSpace(make([]float64, n), 1, 2)
	k := problems.LinSpace(make([]float64, n), 0.2, 1.2)
	y0 := make([]float64, 2*n)
	for i := range c0 {
		y0[2*i] = c0[i]
	}
	return &eventsProblem{
		name: "pk", ev: ev,
		prob: ode.Problem{Field: f, N: n, Y0: y0, P: k, T1: eventsPKT1},
		loss: ode.Component(1),
		closed: func(i int) (float64, float64) {
			ts := math.Log(c0[i]/eventsPKThreshold) / k[i]
			return ts, -ts / k[i]
		},
		value: func(g *ode.Gradient, i int) float64 { return g.Solution.Y[2*i+1] },
	}
}

// RunEvents runs the events suite on cfg's engine ("cuda" by default; a
// CPU engine such as "cpu" runs it too, its kernel times then 0): for
// every n and rtol, the ball and the pk problem, writing a row to w as
// each completes.
func RunEvents(w io.Writer, cfg GPUConfig) ([]EventsRow, error) {
	ns, rtols := cfg.N, cfg.RelTol
	if ns == nil {
		ns = DefaultEventsN
	}
	if rtols == nil {
		rtols = DefaultEventsRelTol
	}
	if !cfg.JSON {
		fmt.Fprintf(w, "Events (ball: bounces to T = 1.6, loss Σx(T); pk: terminal threshold, loss Σt*), Tsit5, atol = rtol·1e-2, engine %s, median of %d (ms): kernel = device time, call = whole ode.Solver call, each kind's calls in a row (call-keep without a cuda.Trace, as a user calls; keep-mix: the kept call after the other three)\n",
			cfg.engine(), repsOrDefault(cfg.Reps))
		fmt.Fprintf(w, "%-5s %8s %6s %7s %6s | %9s %9s | %9s %9s %9s %9s %9s | %9s %9s %s\n",
			"prob", "n", "rtol", "steps", "events", "fwd", "grad+rec", "call-fwd", "call-g+r", "call-omit", "call-keep", "keep-mix", "value-err", "grad-err", "layout")
	}
	var rows []EventsRow
	for _, n := range ns {
		if n <= 0 {
			return rows, fmt.Errorf("bench: events: n = %d must be positive", n)
		}
		for _, rtol := range rtols {
			for _, ep := range []*eventsProblem{eventsBall(n), eventsPK(n)} {
				row, err := eventsRow(ep, rtol, &cfg)
				if err != nil {
					return rows, fmt.Errorf("bench: events %s n=%d rtol=%g: %w", ep.name, n, rtol, err)
				}
				rows = append(rows, *row)
				if cfg.JSON {
					err = writeJSON(w, row)
				} else {
					_, err = fmt.Fprintf(w, "%-5s %8d %6.0e %7.1f %6.2f | %9.3f %9.3f | %9.3f %9.3f %9.3f %9.3f %9.3f | %9.2e %9.2e %s\n",
						row.Problem, row.N, row.RelTol, row.Steps, row.Events, row.Forward, row.GradRecord,
						row.ForwardCall, row.GradRecordCall, row.GradOmitCall, row.GradKeepCall, row.GradKeepMixedCall, row.ValueErr, row.GradErr, row.Layout)
				}
				if err != nil {
					return rows, err
				}
			}
		}
	}
	return rows, nil
}

// eventsRow times problem ep at rtol on cfg's engine and measures its
// errors against the closed form.
func eventsRow(ep *eventsProblem, rtol float64, cfg *GPUConfig) (*EventsRow, error) {
	set := ode.Settings{Method: ode.Tsit5, RelTol: rtol, AbsTol: rtol * eventsAbsTolOverRTol, Engine: cfg.engine(),
		Events: []ode.Event{ep.ev}}
	sv, err := ode.NewSolver(ep.prob.Field, &set)
	if err != nil {
		return nil, err
	}
	kset := set
	kset.KeepGrads = true
	kept, err := ode.NewSolver(ep.prob.Field, &kset)
	if err != nil {
		return nil, err
	}
	prob := &ep.prob
	var compile time.Duration
	var last cuda.TraceStats
	var grs, gros, gks []cuda.TraceStats // every call's trace (the untimed first's too)
	var g ode.Gradient
	gomit := ode.Gradient{Omit: ode.OmitStates | ode.OmitStats}
	gkeep := ode.Gradient{Omit: ode.OmitStates | ode.OmitStats}
	keptCall := func(ctx context.Context) error {
		_, err := kept.GradContext(ctx, &gkeep, prob, ep.loss, nil) // unread: written over by the next
		return err
	}
	cases := []func() (time.Duration, error){
		traced(&compile, &last, func(ctx context.Context) error { _, err := sv.SolveContext(ctx, prob); return err }),
		tracedEach(&compile, func(s cuda.TraceStats) { grs = append(grs, s) }, func(ctx context.Context) error {
			_, err := sv.GradContext(ctx, &g, prob, ep.loss, nil)
			return err
		}),
		tracedEach(&compile, func(s cuda.TraceStats) { gros = append(gros, s) }, func(ctx context.Context) error {
			_, err := sv.GradContext(ctx, &gomit, prob, ep.loss, nil)
			return err
		}),
		// Untraced (GradKeepCall); its first call, the warm-up, traced
		// for its compile time.
		func() (time.Duration, error) {
			ctx := context.Background()
			if len(gks) == 0 {
				return tracedEach(&compile, func(s cuda.TraceStats) { gks = append(gks, s) }, keptCall)()
			}
			return 0, keptCall(ctx)
		},
	}
	// Each kind's calls in a row, as the anchor times Diffrax's (time_fn).
	times, err := timeGPUInRow(cfg.Reps, cases...)
	if err != nil {
		return nil, err
	}
	// The kept call's kernel and split, from traced calls of their own
	// (the first, untimed, traced in the warm-up).
	tracedKeep, err := timeGPUInRow(cfg.Reps, tracedEach(&compile, func(s cuda.TraceStats) { gks = append(gks, s) }, keptCall))
	if err != nil {
		return nil, err
	}
	gks = slices.Delete(gks, 1, 2)                // (timeGPUOrder's untimed first call's)
	inRow := [3][]cuda.TraceStats{grs, gros, gks} // (the in-row calls' traces: the next calls' go after them)
	// Then the four in turn, the kept call after the others' (the
	// suite's protocol up to session 41): GradKeepMixedCall.
	mixed, err := timeGPU(cfg.Reps, cases...)
	if err != nil {
		return nil, err
	}
	gr := inRow[0][len(inRow[0])-1]
	// The medians of the timed calls' (the first is untimed).
	hostSplit := func(ts []cuda.TraceStats) (copies, stage, scatter float64) {
		var c, st, sc []float64
		for _, s := range ts[1:] {
			c, st, sc = append(c, ms(s.Transfer)), append(st, ms(s.Stage)), append(sc, ms(s.Scatter))
		}
		return median(c), median(st), median(sc)
	}
	n := prob.N
	verr, gerr := make([]float64, n), make([]float64, n)
	for i := range n {
		v, dv := ep.closed(i)
		verr[i] = math.Abs(ep.value(&g, i) - v)
		if !ep.abs {
			verr[i] /= math.Abs(v)
		}
		gerr[i] = math.Abs(g.P[i]-dv) / math.Max(1, math.Abs(dv))
	}
	row := &EventsRow{
		Problem: ep.name, Engine: cfg.engine(), N: n, RelTol: set.RelTol, AbsTol: set.AbsTol,
		Steps: meanInts(g.Mesh.Stats.Accepted), Rejected: meanInts(g.Mesh.Stats.Rejected), Events: meanInts(g.Solution.Events),
		Forward: times[0].kernel, GradRecord: times[1].kernel, ForwardCall: times[0].call, GradRecordCall: times[1].call,
		GradOmit: times[2].kernel, GradOmitCall: times[2].call,
		GradKeep: tracedKeep[0].kernel, GradKeepCall: times[3].call, GradKeepTracedCall: tracedKeep[0].call, GradKeepMixedCall: mixed[3].call,
		ValueErr: median(verr), GradErr: median(gerr), Samples: subsample(n, eventsSamples),
		Loss: g.Loss, Compile: ms(compile), Layout: gr.Layout,
	}
	row.GradCopy, row.GradStage, row.GradScatter = hostSplit(inRow[0])
	row.GradOmitCopy, row.GradOmitStage, row.GradOmitScatter = hostSplit(inRow[1])
	row.GradKeepCopy, row.GradKeepStage, row.GradKeepScatter = hostSplit(inRow[2])
	var batch, wait []float64
	for _, s := range inRow[2][1:] {
		batch, wait = append(batch, ms(s.Batch)), append(wait, ms(s.AheadWait))
	}
	row.GradKeepBatch, row.GradKeepAheadWait = median(batch), median(wait)
	for _, i := range row.Samples {
		row.Values = append(row.Values, ep.value(&g, i))
		row.Grads = append(row.Grads, g.P[i])
	}
	if slices.ContainsFunc(row.Grads, func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }) {
		return nil, fmt.Errorf("non-finite gradient")
	}
	if d := maxDiffOfLargest(gomit.P, g.P); d != 0 || gomit.Loss != g.Loss {
		return nil, fmt.Errorf("the gradient with Gradient.Omit differs from the full one: loss %v against %v, gradients by %.3g of the largest", gomit.Loss, g.Loss, d)
	}
	if err := gkeep.HostGrads(); err != nil {
		return nil, err
	}
	// With KeepGrads the device sums the loss terms (each problem's loss
	// is value's sum) exactly and rounds once; without it they are added
	// in order: the two agree to that sum's error bound, (n−1)·u·Σ|terms|,
	// plus half an ulp (u = 2^−53).
	abs := 0.0
	for i := range n {
		abs += math.Abs(ep.value(&g, i))
	}
	nu := float64(n-1) * 0x1p-53
	if d := maxDiffOfLargest(gkeep.P, g.P); d != 0 || math.Abs(gkeep.Loss-g.Loss) > nu/(1-nu)*abs+0x1p-53*math.Abs(g.Loss) {
		return nil, fmt.Errorf("the gradient with KeepGrads differs from the full one: loss %v against %v, gradients by %.3g of the largest", gkeep.Loss, g.Loss, d)
	}
	return row, nil
}
