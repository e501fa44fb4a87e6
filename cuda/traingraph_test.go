package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/fit"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
)

// A fit kept in device memory runs the same steps through the trainer's
// graphs as through its batches (Tuning.NoTrainGraph): every step's loss
// and gradient norm, the final and best values bit for bit, with a
// learning rate that changes at every step (the update graph reads it
// from device memory), with clipping, with events, and with record
// buffers too short at first (the evaluation's graph runs again on a new
// arena, captured again).
func TestHostTrainGraph(t *testing.T) {
	needHost(t)
	t.Parallel()
	testTrainGraph(t, "cuda-host")
}

func TestGPUTrainGraph(t *testing.T) {
	needGPUEngine(t)
	testTrainGraph(t, "cuda")
}

func testTrainGraph(t *testing.T, engine string) {
	decay := optim.Exponential{Init: 0.1, Decay: 0.7}
	for _, tc := range []struct {
		name string
		tun  Tuning
		prob fit.Problem
		opt  func() optim.Optimizer
		set  fit.Settings
		ev   []ode.Event
	}{
		{"short-records-adam-decay", Tuning{firstRows: 4}, lorenzFits(6, 3, fit.Vars{P: []int{0}, Y0: []int{2}}),
			func() optim.Optimizer { return &optim.Adam{Schedule: decay} }, fit.Settings{Steps: 5}, nil},
		{"shared-nesterov-clip-decay", Tuning{}, lorenzFits(5, 1, fit.Vars{Shared: true, Y0: []int{1}}),
			func() optim.Optimizer {
				return &optim.SGD{Schedule: optim.Exponential{Init: 2e-3, Decay: 0.8}, Momentum: 0.8, Nesterov: true}
			},
			fit.Settings{Steps: 4, ClipNorm: 5}, nil},
		{"events-pk-adamw", Tuning{}, pkFits(8), func() optim.Optimizer { return &optim.AdamW{LearnRate: 0.05, WeightDecay: 0.01} },
			fit.Settings{Steps: 4}, pkCase(1, ode.Tsit5).set.Events},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var runs [2]*fit.Result
			for k, off := range []bool{false, true} {
				tun := tc.tun
				tun.NoTrainGraph = off
				set := tc.set
				set.Optimizer = tc.opt()
				res, err := fit.Fit(t.Context(), tc.prob, &ode.Settings{Engine: tuned(t, engine, tun), RelTol: 1e-7, AbsTol: 1e-10, Events: tc.ev}, &set)
				if err != nil {
					t.Fatalf("NoTrainGraph %t: %v", off, err)
				}
				if res.DeviceSteps != tc.set.Steps {
					t.Fatalf("NoTrainGraph %t: %d device steps (%s), want %d", off, res.DeviceSteps, res.DeviceNote, tc.set.Steps)
				}
				runs[k] = res
			}
			g, b := runs[0], runs[1]
			for _, c := range []struct {
				what      string
				got, want []float64
			}{{"History", g.History, b.History}, {"GradNorms", g.GradNorms, b.GradNorms}, {"X", g.X, b.X}, {"BestX", g.BestX, b.BestX}} {
				if len(c.got) != len(c.want) {
					t.Fatalf("%s: %d values with the graphs, %d without", c.what, len(c.got), len(c.want))
				}
				if ok, i := bitsEqual(c.got, c.want); !ok {
					t.Errorf("%s[%d]: %v with the graphs, %v without", c.what, i, c.got[i], c.want[i])
				}
			}
			if !(g.FinalLoss < g.History[0]) {
				t.Errorf("the loss did not fall: %v → %v", g.History[0], g.FinalLoss)
			}
		})
	}
	t.Run("trainer", func(t *testing.T) {
		t.Parallel()
		testTrainerGraph(t, engine)
	})
}

// A trainer whose captures fail goes on with the batch path and the same
// steps (trainer.graphErr says why), its graphs' memory given back.
func TestHostTrainGraphFallback(t *testing.T) {
	needHost(t)
	t.Parallel()
	be := newHostBackend(1 << 30)
	be.noCapture = true
	ode.Register(&Engine{name: "cuda-host-nocapture", prec: Float64, be: be})
	prob := lorenzFits(6, 3, fit.Vars{P: []int{0}})
	var runs [2]*fit.Result
	for k, eng := range []string{"cuda-host-nocapture", tuned(t, "cuda-host", Tuning{NoTrainGraph: true})} {
		set := fit.Settings{Steps: 3, Optimizer: &optim.Adam{LearnRate: 0.1}}
		res, err := fit.Fit(t.Context(), prob, &ode.Settings{Engine: eng, RelTol: 1e-7, AbsTol: 1e-10}, &set)
		if err != nil {
			t.Fatalf("%s: %v", eng, err)
		}
		if res.DeviceSteps != set.Steps {
			t.Fatalf("%s: %d device steps (%s), want %d", eng, res.DeviceSteps, res.DeviceNote, set.Steps)
		}
		runs[k] = res
	}
	for _, c := range [][2][]float64{{runs[0].History, runs[1].History}, {runs[0].GradNorms, runs[1].GradNorms}, {runs[0].X, runs[1].X}} {
		if ok, i := bitsEqual(c[0], c[1]); !ok {
			t.Errorf("entry %d: %v after failed captures, %v without graphs", i, c[0][i], c[1][i])
		}
	}
	// The graphs' page-locked buffers (the summary, the rule's scalars)
	// are given back; the executor may keep staging buffers.
	be.mu.Lock()
	for _, n := range be.host {
		if n == 8*swSummary || n == 8*numHyper {
			t.Errorf("a host buffer of %d bytes held after the fit", n)
		}
	}
	be.mu.Unlock()
	if _, _, _, err := be.hostHeld(); err != nil {
		t.Error(err)
	}
	sv, err := ode.NewSolver(prob.ODE.Field, &ode.Settings{Engine: "cuda-host-nocapture"})
	if err != nil {
		t.Fatal(err)
	}
	p := prob.ODE
	tri, err := sv.NewTrainer(&p, prob.Loss, &ode.TrainSpec{Fits: 3, P: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	defer tri.Release()
	if _, err := tri.Eval(t.Context()); err != nil {
		t.Fatal(err)
	}
	if tr := tri.(*trainer); tr.gr != nil || tr.graphErr == nil {
		t.Errorf("after a failed capture: graphs %v, error %v; want none and the capture's", tr.gr != nil, tr.graphErr)
	}
}

// testTrainerGraph runs a trainer's steps with and without graphs, side
// by side, every step's Eval bit for bit, the rule changing its rate and
// kind and the best copy coming and going (each a graph of its own), a
// new arena mid-fit (as an overflow makes: the graphs are captured
// again), and counts the captures and launches.
func testTrainerGraph(t *testing.T, engine string) {
	prob := lorenzFits(8, 4, fit.Vars{P: []int{0}, Y0: []int{0, 1}})
	adam := &optim.Adam{Schedule: optim.Exponential{Init: 0.05, Decay: 0.5}}
	sgd := &optim.SGD{LearnRate: 1e-3, Momentum: 0.5}
	r0, _ := adam.RuleAt(0)
	spec := &ode.TrainSpec{Fits: 4, P: []int{0}, Y0: []int{0, 1}, Moments: len(r0.Moments())}
	var trs [2]*trainer
	for k, off := range []bool{false, true} {
		sv, err := ode.NewSolver(prob.ODE.Field, &ode.Settings{Engine: tuned(t, engine, Tuning{NoTrainGraph: off}), RelTol: 1e-7, AbsTol: 1e-10})
		if err != nil {
			t.Fatal(err)
		}
		p := prob.ODE
		tri, err := sv.NewTrainer(&p, prob.Loss, spec)
		if err != nil {
			t.Fatal(err)
		}
		trs[k] = tri.(*trainer)
		defer tri.Release()
	}
	if trs[0].gr == nil || trs[1].gr != nil {
		t.Fatalf("graphs: %v with the default tuning, %v with NoTrainGraph; want some and none", trs[0].gr != nil, trs[1].gr != nil)
	}
	L := spec.Len(prob.ODE.N, 0)
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float64, L)
	for i := range x {
		x[i] = prob.ODE.P[0] * (1 + 0.01*rng.NormFloat64())
	}
	for k := range x {
		if k%int(spec.Len(prob.ODE.N, 0)/4) != 0 {
			x[k] = prob.ODE.Y0[0]
		}
	}
	for _, tr := range trs {
		if err := tr.Load(x, nil); err != nil {
			t.Fatal(err)
		}
	}
	const steps = 7
	for k := range steps {
		if k == 3 {
			// A new arena, as an evaluation's rerun makes.
			for _, tr := range trs {
				if err := tr.arena(tr.rows+16, false); err != nil {
					t.Fatal(err)
				}
			}
		}
		var evs [2]ode.TrainEval
		for q, tr := range trs {
			ev, err := tr.Eval(t.Context())
			if err != nil {
				t.Fatalf("step %d, graphs %t: %v", k, q == 0, err)
			}
			evs[q] = ev
		}
		if evs[0].Loss != evs[1].Loss || evs[0].GradNorm != evs[1].GradNorm || evs[0].Failed != evs[1].Failed || evs[0].NonFinite != evs[1].NonFinite {
			t.Fatalf("step %d: loss %v, norm %v, failed %d, non-finite %d with the graphs; %v, %v, %d, %d without",
				k, evs[0].Loss, evs[0].GradNorm, evs[0].Failed, evs[0].NonFinite, evs[1].Loss, evs[1].GradNorm, evs[1].Failed, evs[1].NonFinite)
		}
		if math.IsNaN(evs[0].Loss) || evs[0].Failed > 0 {
			t.Fatalf("step %d: loss %v, %d failed", k, evs[0].Loss, evs[0].Failed)
		}
		var o optim.Ruled = adam
		if k == 5 {
			o = sgd
		}
		r, err := o.RuleAt(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range trs {
			if err := tr.Update(&r, k%2 == 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	var sts [2]*ode.TrainState
	for q, tr := range trs {
		st := &ode.TrainState{X: make([]float64, L), Best: make([]float64, L), Prev: make([]float64, L), Moments: [][]float64{make([]float64, L), make([]float64, L)}}
		if err := tr.Read(st); err != nil {
			t.Fatal(err)
		}
		sts[q] = st
	}
	for _, c := range []struct {
		what string
		a, b []float64
	}{{"X", sts[0].X, sts[1].X}, {"Best", sts[0].Best, sts[1].Best}, {"Prev", sts[0].Prev, sts[1].Prev},
		{"m", sts[0].Moments[0], sts[1].Moments[0]}, {"v", sts[0].Moments[1], sts[1].Moments[1]}} {
		if ok, i := bitsEqual(c.a, c.b); !ok {
			t.Errorf("%s[%d]: %v with the graphs, %v without", c.what, i, c.a[i], c.b[i])
		}
	}
	g := trs[0].gr
	// The evaluation's graph twice (two arenas); the update's for Adam
	// with and without the best copy on each arena, SGD's once.
	want := fmt.Sprintf("captures %d, launches %d, error %v", 2+4+1, 2*steps, nil)
	if got := fmt.Sprintf("captures %d, launches %d, error %v", g.captures, g.launches, trs[0].graphErr); got != want {
		t.Errorf("graphs: %s, want %s", got, want)
	}
}

// BenchmarkGPUTrainStep times a device-resident fit's step (Trainer.Eval
// and Trainer.Update with Adam) with the trainer's graphs and without
// (Tuning.NoTrainGraph), alternated in two rounds, at 65,536 fits: the PK
// calibration through a terminal event (pkFits: each fit's elimination
// rate to its event time; bench's "pk-fit" case) and the Lorenz
// calibration (lorenzFits: each fit's ρ to its final state; bench's
// "lorenz-fit"), rtol 1e-6, atol 1e-9. It reports ms/step, the engine
// kernel's share included.
func BenchmarkGPUTrainStep(b *testing.B) {
	needGPUEngine(b)
	const n = 1 << 16
	for _, c := range []struct {
		name string
		prob func() fit.Problem
		ev   []ode.Event
	}{
		{"pk", func() fit.Problem { return pkFits(n) }, pkCase(1, ode.Tsit5).set.Events},
		{"lorenz", func() fit.Problem { return lorenzFits(n, n, fit.Vars{P: []int{0}}) }, nil},
	} {
		prob := c.prob()
		spec := &ode.TrainSpec{Fits: n, P: []int{0}, Moments: 2}
		opt := &optim.Adam{LearnRate: 0.05}
		var trs [2]ode.Trainer
		var steps [2]int
		for k, off := range []bool{false, true} {
			sv, err := ode.NewSolver(prob.ODE.Field, &ode.Settings{Engine: tuned(b, "cuda", Tuning{NoTrainGraph: off}), RelTol: 1e-6, AbsTol: 1e-9, Events: c.ev})
			if err != nil {
				b.Fatal(err)
			}
			p := prob.ODE
			tr, err := sv.NewTrainer(&p, prob.Loss, spec)
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Release()
			x := make([]float64, spec.Len(n, 0))
			for i := range x {
				x[i] = p.P[i]
			}
			if err := tr.Load(x, nil); err != nil {
				b.Fatal(err)
			}
			trs[k] = tr
		}
		best := [2]float64{math.Inf(1), math.Inf(1)}
		step := func(b *testing.B, k int) {
			ev, err := trs[k].Eval(b.Context())
			if err != nil || ev.Failed > 0 || ev.NonFinite > 0 {
				b.Fatalf("step %d: %v (%d failed, %d non-finite)", steps[k], err, ev.Failed, ev.NonFinite)
			}
			r, err := opt.RuleAt(steps[k])
			if err != nil {
				b.Fatal(err)
			}
			if err := trs[k].Update(&r, ev.Loss < best[k]); err != nil {
				b.Fatal(err)
			}
			best[k] = min(best[k], ev.Loss)
			steps[k]++
		}
		// Warm up: the graphs' captures, the first arena's rerun.
		for k := range trs {
			for range 3 {
				step(b, k)
			}
		}
		for round := range 2 {
			for k, name := range []string{"graph", "nograph"} {
				b.Run(fmt.Sprintf("%s/%s/round%d", c.name, name, round), func(b *testing.B) {
					for range b.N {
						step(b, k)
					}
					b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/step")
				})
			}
		}
		if g := trs[0].(*trainer); g.gr == nil || g.graphErr != nil {
			b.Errorf("%s: the graph trainer ran without graphs (%v)", c.name, g.graphErr)
		}
	}
}
