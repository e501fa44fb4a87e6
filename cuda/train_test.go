package cuda

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"gonum.org/v1/gonum/floats"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/fit"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/tape"
)

// A fit held in the engine's memory (ode.Trainer on the host engine) is the
// host loop's fit: the same losses, gradient norms, values, best values
// and optimiser state to rounding (the update is the optimiser's own
// arithmetic; the engine sums in another order), every step run on the
// device. The engine's kernels are the same in both runs.
func TestHostTrainMatchesHost(t *testing.T) {
	needHost(t)
	t.Parallel()
	testTrainMatchesHost(t, "cuda-host")
}

func TestGPUTrainMatchesHost(t *testing.T) {
	needGPUEngine(t)
	testTrainMatchesHost(t, "cuda")
}

func testTrainMatchesHost(t *testing.T, engine string) {
	type rec struct{ x, g, norms []float64 }
	events := map[string][]ode.Event{
		"events-pk-threshold":     pkCase(1, ode.Tsit5).set.Events,
		"events-ball-restitution": ballCase(1, ode.Tsit5).set.Events,
	}
	for _, tc := range []struct {
		name   string
		engine string
		prob   fit.Problem
		opt    func() optim.Optimizer
		set    fit.Settings
	}{
		{"fits-rho-adam", engine, lorenzFits(6, 6, fit.Vars{P: []int{0}}), func() optim.Optimizer { return &optim.Adam{LearnRate: 0.1} },
			fit.Settings{Steps: 5}},
		// Record buffers of 4 rows at first: the first evaluation runs
		// again with room (its inputs copied to a larger arena).
		{"fits-rho-short-records", tuned(t, engine, Tuning{firstRows: 4}), lorenzFits(6, 3, fit.Vars{P: []int{0}, Y0: []int{2}}),
			func() optim.Optimizer { return &optim.Adam{LearnRate: 0.1} }, fit.Settings{Steps: 3}},
		{"groups-y0-nesterov-clip", engine, lorenzFits(6, 2, fit.Vars{P: []int{0}, Y0: []int{0, 2}}),
			func() optim.Optimizer { return &optim.SGD{LearnRate: 0.002, Momentum: 0.8, Nesterov: true} },
			fit.Settings{Steps: 4, ClipNorm: 5}},
		{"shared-adamw-clip", engine, lorenzFits(5, 1, fit.Vars{Shared: true}),
			func() optim.Optimizer { return &optim.AdamW{LearnRate: 0.05, WeightDecay: 0.01} },
			fit.Settings{Steps: 4, ClipNorm: 0.5}},
		{"shared-lanes-global-heavyball", tuned(t, engine, Tuning{Layout: LayoutLanesGlobal}), lorenzFits(4, 1, fit.Vars{Shared: true, Y0: []int{1}}),
			func() optim.Optimizer { return &optim.SGD{LearnRate: 1e-3, Momentum: 0.5} },
			fit.Settings{Steps: 3}},
		// The trajectories of a fit start from different values of the
		// fitted column: the fit's value (its first trajectory's) replaces
		// them on the device as on the host.
		{"fits-uneven-start", engine, unevenStart(lorenzFits(6, 3, fit.Vars{P: []int{0}})),
			func() optim.Optimizer { return &optim.Adam{LearnRate: 0.1} }, fit.Settings{Steps: 3}},
		// Lorenz-96 with d = 64: the engine's gradient kernel in the wide
		// layout, whose inputs and gradients the training kernels read
		// component-major (the trainer's kernel without RowMajor).
		{"wide-fits-f-y0", engine, wideFits(4, 2, fit.Vars{P: []int{0}, Y0: []int{1}}),
			func() optim.Optimizer { return &optim.Adam{LearnRate: 0.05} }, fit.Settings{Steps: 3}},
		// Events: per-trajectory fits of the elimination rate to the
		// times a terminal event fires (the loss reads the event time),
		// and of the restitution to the heights after several bounces
		// (the state updated at every event).
		{"events-pk-threshold", engine, pkFits(8), func() optim.Optimizer { return &optim.Adam{LearnRate: 0.05} },
			fit.Settings{Steps: 4}},
		{"events-ball-restitution", engine, ballFits(6), func() optim.Optimizer { return &optim.Adam{LearnRate: 0.01} },
			fit.Settings{Steps: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var runs [2]*fit.Result
			var recs [2][]rec
			var opts [2]optim.Optimizer
			for k, onHost := range []bool{true, false} {
				set := tc.set
				set.OnHost = onHost
				opts[k] = tc.opt()
				set.Optimizer = opts[k]
				set.Callback = func(st *fit.Step) error {
					recs[k] = append(recs[k], rec{slices.Clone(st.X), slices.Clone(st.Grad), slices.Clone(st.FitNorms)})
					return nil
				}
				res, err := fit.Fit(t.Context(), tc.prob, &ode.Settings{Engine: tc.engine, RelTol: 1e-7, AbsTol: 1e-10, Events: events[tc.name]}, &set)
				if err != nil {
					t.Fatalf("OnHost %t: %v", onHost, err)
				}
				runs[k] = res
			}
			h, d := runs[0], runs[1]
			if h.DeviceSteps != 0 || d.DeviceSteps != tc.set.Steps {
				t.Fatalf("device steps: host run %d, device run %d (%s), want 0 and %d", h.DeviceSteps, d.DeviceSteps, d.DeviceNote, tc.set.Steps)
			}
			const tol = 1e-12
			near(t, "History", d.History, h.History, tol)
			near(t, "GradNorms", d.GradNorms, h.GradNorms, tol)
			near(t, "X", d.X, h.X, tol)
			near(t, "BestX", d.BestX, h.BestX, tol)
			near(t, "FinalLoss", []float64{d.FinalLoss}, []float64{h.FinalLoss}, tol)
			if d.BestStep != h.BestStep || d.Steps != h.Steps || d.Status != h.Status {
				t.Errorf("best step, steps, status: device %d %d %v, host %d %d %v", d.BestStep, d.Steps, d.Status, h.BestStep, h.Steps, h.Status)
			}
			sh, sd := opts[0].State(), opts[1].State()
			if sh.Step != sd.Step || sh.N != sd.N || len(sh.Moments) != len(sd.Moments) {
				t.Fatalf("optimiser state: device step %d n %d %d moments, host %d %d %d", sd.Step, sd.N, len(sd.Moments), sh.Step, sh.N, len(sh.Moments))
			}
			for name, m := range sh.Moments {
				near(t, "moment "+name, sd.Moments[name], m, 1e-11)
			}
			if len(recs[0]) != len(recs[1]) {
				t.Fatalf("callbacks: device %d, host %d", len(recs[1]), len(recs[0]))
			}
			for k := range recs[0] {
				near(t, "callback X", recs[1][k].x, recs[0][k].x, tol)
				near(t, "callback Grad", recs[1][k].g, recs[0][k].g, 1e-10)
				near(t, "callback FitNorms", recs[1][k].norms, recs[0][k].norms, 1e-10)
			}
			if !(d.FinalLoss < d.History[0]) {
				t.Errorf("the loss did not fall: %v → %v", d.History[0], d.FinalLoss)
			}
		})
	}
}

// lorenzFits is a fitting problem on the Lorenz ensemble of
// lorenzSharedCase (n trajectories in fits groups): the data are the final
// states at the true parameters, and the fit starts from others.
func lorenzFits(n, fits int, vars fit.Vars) fit.Problem {
	c := lorenzSharedCase(n)
	truth := c.prob
	truth.SaveAt = nil
	sv, err := ode.NewSolver(truth.Field, &ode.Settings{RelTol: 1e-9, AbsTol: 1e-12})
	if err != nil {
		panic(err)
	}
	sol, err := sv.Solve(&truth)
	if err != nil {
		panic(err)
	}
	p := truth
	p.Shared = []float64{9, 2.5}
	p.P = slices.Clone(p.P)
	p.Y0 = slices.Clone(p.Y0)
	for i := range p.P {
		p.P[i] = 0.9*p.P[i] + 1
		p.Y0[3*i] += 0.05
	}
	// A fit's P value is its first trajectory's: give its trajectories
	// that one.
	per := n / fits
	for i := range p.P {
		p.P[i] = p.P[i/per*per]
	}
	loss := fitMSE(sol.Y)
	return fit.Problem{ODE: p, Loss: loss, Vars: vars, Fits: fits}
}

// wideFits is a fitting problem on wideSharedCase's Lorenz-96 ensemble
// of n trajectories (d = 64) in fits fits, as lorenzFits: the forcing F
// moved, the first components of y0 nudged, the shared parameters
// moved, and a mean squared error against the true final states' first
// three components.
func wideFits(n, fits int, vars fit.Vars) fit.Problem {
	const d = 64
	truth := wideSharedCase(n, d).prob
	truth.SaveAt = nil
	sv, err := ode.NewSolver(truth.Field, &ode.Settings{RelTol: 1e-9, AbsTol: 1e-12})
	if err != nil {
		panic(err)
	}
	sol, err := sv.Solve(&truth)
	if err != nil {
		panic(err)
	}
	data := make([]float64, 3*n)
	for i := range n {
		copy(data[3*i:3*i+3], sol.Y[i*d:])
	}
	p := truth
	p.Shared = []float64{1.1, 0.9}
	p.P = slices.Clone(p.P)
	p.Y0 = slices.Clone(p.Y0)
	per := n / fits
	for i := range p.P {
		p.P[i] = 0.9*p.P[i/per*per] + 0.5 // a fit's value is its first trajectory's
		p.Y0[d*i+1] += 0.05
	}
	return fit.Problem{ODE: p, Loss: fitMSE(data), Vars: vars, Fits: fits}
}

// pkFits is n independent fits of pkCase's elimination rate k to the
// times its terminal event fires at the true rates: the loss is the
// squared distance of the clock at the end (the event's time) from the
// data; each fit starts from 0.7.
func pkFits(n int) fit.Problem {
	c := pkCase(n, ode.Tsit5)
	data := make([]float64, n)
	for i := range data {
		data[i] = math.Log(c.prob.Y0[2*i]/pkThreshold) / c.prob.P[i]
	}
	p := c.prob
	p.P = make([]float64, n)
	for i := range p.P {
		p.P[i] = 0.7
	}
	return componentFits(p, 1, data)
}

// ballFits is n independent fits of ballCase's restitution to the heights
// at T (after two to four bounces) of the true values; each fit starts
// from its true value + 0.03.
func ballFits(n int) fit.Problem {
	c := ballCase(n, ode.Tsit5)
	data := make([]float64, n)
	for i := range data {
		data[i], _, _ = ballClosedForm(c.prob.Y0[2*i], c.prob.P[i], c.prob.T1)
	}
	p := c.prob
	p.P = slices.Clone(p.P)
	for i := range p.P {
		p.P[i] += 0.03
	}
	return componentFits(p, 0, data)
}

// componentFits is p's N independent fits of its parameter 0 (a fit a
// trajectory) to data, one value a trajectory: the loss Σ (y[comp] −
// data)² at the end.
func componentFits(p ode.Problem, comp int, data []float64) fit.Problem {
	loss := ode.Loss{Name: "component-fit", Data: data, DataDim: 1,
		F: func(y, _, data []tape.V) tape.V { return y[comp].Sub(data[0]).Square() }}
	return fit.Problem{ODE: p, Loss: loss, Vars: fit.Vars{P: []int{0}}, Fits: p.N}
}

// unevenStart returns p with the fitted P columns of each fit's
// trajectories after the first moved away from the fit's value (a copy).
func unevenStart(p fit.Problem) fit.Problem {
	np := p.ODE.Field.Params
	p.ODE.P = slices.Clone(p.ODE.P)
	per := len(p.ODE.P) / np / p.Fits
	for i := range len(p.ODE.P) / np {
		for _, c := range p.Vars.P {
			p.ODE.P[i*np+c] += 0.5 * float64(i%per)
		}
	}
	return p
}

// fitMSE is the mean squared distance of the final states (Dim 3) from
// the rows of data.
func fitMSE(data []float64) ode.Loss {
	return ode.Loss{Name: "fit-mse", Data: data, DataDim: 3, Mean: true,
		F: func(y, _, data []tape.V) tape.V {
			l := y[0].Sub(data[0]).Square()
			for k := 1; k < 3; k++ {
				l = l.Add(y[k].Sub(data[k]).Square())
			}
			return l
		}}
}

// near checks got against want entrywise to relative tolerance tol (of
// the larger magnitude; exact for zeros and equal non-finite values).
func near(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: length %d, want %d", what, len(got), len(want))
		return
	}
	for i := range want {
		a, b := got[i], want[i]
		if a == b || (math.IsNaN(a) && math.IsNaN(b)) {
			continue
		}
		// (An infinite value is near nothing but itself: |Inf − b| is not
		// above tol·Inf.)
		if math.Abs(a-b) > tol*max(math.Abs(a), math.Abs(b)) || math.IsInf(a, 0) || math.IsInf(b, 0) {
			t.Errorf("%s[%d] = %v, want %v (rel %.2g)", what, i, a, b, math.Abs(a-b)/max(math.Abs(a), math.Abs(b)))
			return
		}
	}
}

// blowupFits is y' = p·y², y(0) = 1 on [0, 1] (y(1) = 1/(1 − p), which
// blows up for p ≥ 1), four fits of one trajectory each from p = 0.5 with
// targets y(1) = 3, 3, 3 and target: a large gradient takes the last fit
// past p = 1.
func blowupFits(target float64) fit.Problem {
	f := ode.Field{Name: "blowup", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Mul(y[0])}
	}}
	loss := ode.Loss{Name: "blowup-sq", Data: []float64{3, 3, 3, target}, DataDim: 1,
		F: func(y, _, data []tape.V) tape.V { return y[0].Sub(data[0]).Square() }}
	return fit.Problem{ODE: ode.Problem{Field: f, N: 4, Y0: []float64{1}, P: []float64{0.5}, T1: 1},
		Loss: loss, Vars: fit.Vars{P: []int{0}}, Fits: 4}
}

// Where a fit's trajectory fails, or an update makes its values
// non-finite, the host takes over from that step and the run is the host
// loop's: the failed fit stops, the others go on without it.
func TestHostTrainHandsBack(t *testing.T) {
	needHost(t)
	t.Parallel()
	testTrainHandsBack(t, "cuda-host")
}

func TestGPUTrainHandsBack(t *testing.T) {
	needGPUEngine(t)
	testTrainHandsBack(t, "cuda")
}

func testTrainHandsBack(t *testing.T, engine string) {
	for _, tc := range []struct {
		name     string
		prob     fit.Problem
		lr       float64
		steps    int
		failStep int // the step at which fit 3 fails
		allFail  bool
	}{
		// Fit 3's first step takes p to 1.27: its trajectory blows up at
		// step 1.
		{"trajectory-fails", blowupFits(50), 0.002, 4, 1, false},
		// Fit 3's first step overflows p to +Inf (the update is refused
		// for it); the others' p go far past 1 and fail at step 1.
		{"update-overflows", blowupFits(50), 1e306, 3, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var runs [2]*fit.Result
			var errs [2]error
			for k, onHost := range []bool{true, false} {
				set := fit.Settings{Steps: tc.steps, OnHost: onHost, Optimizer: &optim.SGD{LearnRate: tc.lr}}
				runs[k], errs[k] = fit.Fit(t.Context(), tc.prob, &ode.Settings{Engine: engine, RelTol: 1e-8, AbsTol: 1e-10}, &set)
				if (errs[k] != nil) != tc.allFail || runs[k] == nil {
					t.Fatalf("OnHost %t: error %v, want one: %t", onHost, errs[k], tc.allFail)
				}
			}
			h, d := runs[0], runs[1]
			if d.DeviceSteps == 0 || d.DeviceSteps >= tc.steps || d.DeviceNote == "" {
				t.Errorf("device run: %d device steps (%q), want some and fewer than %d", d.DeviceSteps, d.DeviceNote, tc.steps)
			}
			if !slices.Equal(d.FitStatus, h.FitStatus) {
				t.Errorf("fit statuses: device %v, host %v", d.FitStatus, h.FitStatus)
			}
			var fe *fit.FitError
			if !errors.As(d.FitErr[3], &fe) || fe.Step != tc.failStep {
				t.Errorf("fit 3's error on the device run: %v, want a *FitError at step %d", d.FitErr[3], tc.failStep)
			}
			if he := h.FitErr[3]; he == nil || d.FitErr[3] == nil || he.Error() != d.FitErr[3].Error() {
				t.Errorf("fit 3's error: device %v, host %v", d.FitErr[3], he)
			}
			near(t, "History", d.History, h.History, 1e-12)
			near(t, "X", d.X, h.X, 1e-12)
			if d.Steps != h.Steps || d.Status != h.Status {
				t.Errorf("steps, status: device %d %v, host %d %v", d.Steps, d.Status, h.Steps, h.Status)
			}
		})
	}
}

// A device fit stopped and resumed from its checkpoint and optimiser state
// is the uninterrupted device fit, bit for bit.
func TestHostTrainResume(t *testing.T) {
	needHost(t)
	t.Parallel()
	testTrainResume(t, "cuda-host")
}

func TestGPUTrainResume(t *testing.T) {
	needGPUEngine(t)
	testTrainResume(t, "cuda")
}

func testTrainResume(t *testing.T, engine string) {
	// The resumed run starts the engine from the caller's ensemble, whose
	// fitted values are the starting ones, and loads the checkpoint's.
	for _, prob := range []fit.Problem{lorenzFits(4, 2, fit.Vars{P: []int{0}, Y0: []int{1}}), lorenzFits(4, 1, fit.Vars{Shared: true, Y0: []int{2}})} {
		testTrainResumeOf(t, engine, prob)
	}
}

func testTrainResumeOf(t *testing.T, engine string, prob fit.Problem) {
	s := &ode.Settings{Engine: engine, RelTol: 1e-7, AbsTol: 1e-10}
	whole, err := fit.Fit(t.Context(), prob, s, &fit.Settings{Steps: 5, Optimizer: &optim.Adam{LearnRate: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	opt := &optim.Adam{LearnRate: 0.05}
	first, err := fit.Fit(t.Context(), prob, s, &fit.Settings{Steps: 2, Optimizer: opt, SkipFinal: true})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := optim.SaveState(&buf, opt); err != nil {
		t.Fatal(err)
	}
	opt2 := &optim.Adam{LearnRate: 0.05}
	if err := optim.LoadState(&buf, opt2); err != nil {
		t.Fatal(err)
	}
	rest, err := fit.Fit(t.Context(), prob, s, &fit.Settings{Steps: 5, Optimizer: opt2, Resume: first.Checkpoint()})
	if err != nil {
		t.Fatal(err)
	}
	if whole.DeviceSteps != 5 || first.DeviceSteps != 2 || rest.DeviceSteps != 3 {
		t.Fatalf("device steps %d, %d, %d, want 5, 2, 3 (%s)", whole.DeviceSteps, first.DeviceSteps, rest.DeviceSteps, rest.DeviceNote)
	}
	if ok, i := bitsEqual(rest.X, whole.X); !ok {
		t.Errorf("resumed X differs at %d: %v, want %v", i, rest.X, whole.X)
	}
	if ok, i := bitsEqual(append(first.History, rest.History...), whole.History); !ok {
		t.Errorf("resumed history differs at %d: %v + %v, want %v", i, first.History, rest.History, whole.History)
	}
}

// The engine applies an optimiser's rule with the optimiser's own
// arithmetic: on the same gradient, its values and moments are
// optim.Rule.Apply's bit for bit (device code is compiled without fused
// multiply-adds), for every rule, with and without clipping.
func TestHostTrainUpdateBitwise(t *testing.T) {
	needHost(t)
	t.Parallel()
	testTrainUpdateBitwise(t, "cuda-host")
}

func TestGPUTrainUpdateBitwise(t *testing.T) {
	needGPUEngine(t)
	testTrainUpdateBitwise(t, "cuda")
}

func testTrainUpdateBitwise(t *testing.T, engine string) {
	prob := lorenzFits(8, 4, fit.Vars{P: []int{0}, Y0: []int{0, 1}})
	sv, err := ode.NewSolver(prob.ODE.Field, &ode.Settings{Engine: engine})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, o := range []optim.Ruled{
		&optim.Adam{LearnRate: 0.01}, &optim.AdamW{LearnRate: 0.3, WeightDecay: 0.05, Beta1: 0.7, Eps: 1e-3},
		&optim.SGD{LearnRate: 0.1}, &optim.SGD{LearnRate: 0.1, Momentum: 0.9}, &optim.SGD{LearnRate: 0.1, Momentum: 0.6, Nesterov: true},
	} {
		r0, _ := o.RuleAt(0)
		spec := &ode.TrainSpec{Fits: 4, P: []int{0}, Y0: []int{0, 1}, Moments: len(r0.Moments())}
		p := prob.ODE
		tri, err := sv.NewTrainer(&p, prob.Loss, spec)
		if err != nil {
			t.Fatal(err)
		}
		tr := tri.(*trainer)
		L := spec.Len(p.N, 0)
		x := make([]float64, L)
		moments := make([][]float64, spec.Moments)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		for q := range moments {
			moments[q] = make([]float64, L)
			for i := range moments[q] {
				moments[q][i] = rng.Float64() // v ≥ 0
			}
		}
		if err := tr.Load(x, moments); err != nil {
			t.Fatal(err)
		}
		for k, clip := range []float64{0, 0.5, 1e9} {
			g := make([]float64, L)
			for i := range g {
				g[i] = 3 * rng.NormFloat64()
			}
			if err := tr.ex.be.write(tr.g, f64bytes(g)); err != nil {
				t.Fatal(err)
			}
			if clip > 0 {
				// The engine clips by each fit's norm as Eval computes it.
				norms := make([]float64, 4)
				for b := range norms {
					s := 0.0
					for _, v := range g[b*L/4 : (b+1)*L/4] {
						s += v * v
					}
					norms[b] = math.Sqrt(s)
				}
				if err := tr.ex.be.write(tr.norms, f64bytes(norms)); err != nil {
					t.Fatal(err)
				}
				if err := tr.Clip(clip); err != nil {
					t.Fatal(err)
				}
				for b, nb := range norms {
					if nb > clip {
						floats.Scale(clip/nb, g[b*L/4:(b+1)*L/4])
					}
				}
			}
			r, err := o.RuleAt(k)
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.Update(&r, k == 1); err != nil {
				t.Fatal(err)
			}
			r.Apply(x, g, moments)
			st := &ode.TrainState{X: make([]float64, L), Grad: make([]float64, L), Moments: make([][]float64, len(moments))}
			for q := range st.Moments {
				st.Moments[q] = make([]float64, L)
			}
			if err := tr.Read(st); err != nil {
				t.Fatal(err)
			}
			for _, c := range append([][2][]float64{{st.X, x}, {st.Grad, g}}, func() [][2][]float64 {
				var m [][2][]float64
				for q := range moments {
					m = append(m, [2][]float64{st.Moments[q], moments[q]})
				}
				return m
			}()...) {
				if ok, i := bitsEqual(c[0], c[1]); !ok {
					t.Fatalf("%T step %d (clip %v): entry %d is %v on the engine, %v by Rule.Apply", o, k, clip, i, c[0][i], c[1][i])
				}
			}
		}
		tr.Release()
		// A released trainer refuses every use, and a second Release is
		// harmless.
		if _, err := tr.Eval(t.Context()); !errors.Is(err, errReleased) {
			t.Errorf("Eval after Release: %v, want %v", err, errReleased)
		}
		if err := tr.Update(&r0, false); !errors.Is(err, errReleased) {
			t.Errorf("Update after Release: %v, want %v", err, errReleased)
		}
		tr.Release()
	}
}

// NewTrainer leaves the check of Y0 and P of N rows to the engine's copy
// of them (ode.CheckingExecutor): a non-finite value there gets package
// ode's own error, naming the array and the entry, as Grad's does; with
// spec.DataChecked, Data is not read for non-finite values, and a NaN put
// there after the check makes its trajectory's loss fail at the first
// Eval.
func TestHostTrainerChecks(t *testing.T) {
	needHost(t)
	t.Parallel()
	prob := lorenzFits(6, 3, fit.Vars{P: []int{0}})
	sv, err := ode.NewSolver(prob.ODE.Field, &ode.Settings{Engine: "cuda-host", RelTol: 1e-7, AbsTol: 1e-10})
	if err != nil {
		t.Fatal(err)
	}
	spec := &ode.TrainSpec{Fits: 3, P: []int{0}, Moments: 2}
	for _, c := range []struct {
		what string
		at   int
		want string
	}{{"Y0", 7, "Y0[7] = NaN is not finite"}, {"P", 4, "P[4] = +Inf is not finite"}} {
		p := prob.ODE
		p.Y0, p.P = slices.Clone(p.Y0), slices.Clone(p.P)
		if c.what == "Y0" {
			p.Y0[c.at] = math.NaN()
		} else {
			p.P[c.at] = math.Inf(1)
		}
		_, gerr := sv.Grad(nil, &p, prob.Loss, nil)
		tr, err := sv.NewTrainer(&p, prob.Loss, spec)
		if err == nil {
			tr.Release()
			t.Fatalf("%s: NewTrainer accepted a non-finite value", c.what)
		}
		if !strings.Contains(err.Error(), c.want) || gerr == nil || err.Error() != gerr.Error() {
			t.Errorf("%s: NewTrainer's error %q, want Grad's %v (with %q)", c.what, err, gerr, c.want)
		}
	}
	// Data with a NaN in a column the loss reads: refused when read,
	// counted as a failed trajectory when not.
	loss := prob.Loss
	loss.Data = slices.Clone(loss.Data)
	loss.Data[3*4+1] = math.NaN()
	p := prob.ODE
	if tr, err := sv.NewTrainer(&p, loss, spec); err == nil || !strings.Contains(err.Error(), "Data[13] = NaN is not finite") {
		if tr != nil {
			tr.Release()
		}
		t.Errorf("NewTrainer: error %v, want Data[13]'s", err)
	}
	checked := *spec
	checked.DataChecked = true
	tr, err := sv.NewTrainer(&p, loss, &checked)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Release()
	x := make([]float64, checked.Len(p.N, 0))
	for b := range 3 {
		x[b] = p.P[2*b]
	}
	if err := tr.Load(x, nil); err != nil {
		t.Fatal(err)
	}
	ev, err := tr.Eval(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ev.Failed != 1 {
		t.Errorf("Eval with a NaN in Data: %d failed trajectories, want 1", ev.Failed)
	}
}

// A Fitter's fit held in the engine's memory does not read Data again
// (New checked it): a NaN the loss reads, put there after New, fails its
// trajectory at the first step, and the host, taking over, reports it.
func TestHostTrainDataChangedAfterNew(t *testing.T) {
	needHost(t)
	t.Parallel()
	prob := lorenzFits(6, 3, fit.Vars{P: []int{0}})
	prob.Loss.Data = slices.Clone(prob.Loss.Data)
	f, err := fit.New(prob, &ode.Settings{Engine: "cuda-host", RelTol: 1e-7, AbsTol: 1e-10})
	if err != nil {
		t.Fatal(err)
	}
	prob.Loss.Data[3*4+1] = math.NaN()
	res, err := f.Run(t.Context(), &fit.Settings{Steps: 2, Optimizer: &optim.Adam{LearnRate: 0.1}})
	if err == nil || !strings.Contains(err.Error(), "Data[13] = NaN is not finite") {
		t.Fatalf("Run: error %v, want Data[13]'s", err)
	}
	if res == nil || res.DeviceSteps != 0 || !strings.Contains(res.DeviceNote, "host took over at step 0") {
		t.Errorf("result %+v: want the host to take over at step 0", res)
	}
}

// A gradient whose entries are finite but whose sum of squares overflows
// (norm 2e160): the engine's norms, sums of squares, overflow to +Inf, so
// it could neither clip (optim.ClipNorm clips by the norm, 2e160, as the
// host loop does) nor report the norm. The fit is the host loop's: the
// same gradient norms, clipped steps and values.
func TestHostTrainHugeGradient(t *testing.T) {
	needHost(t)
	t.Parallel()
	testTrainHugeGradient(t, "cuda-host")
}

func TestGPUTrainHugeGradient(t *testing.T) {
	needGPUEngine(t)
	testTrainHugeGradient(t, "cuda")
}

func testTrainHugeGradient(t *testing.T, engine string) {
	// y' = p, y(0) = 0 on [0, 1]: y(1) = p, and the loss Σ c·y(1) has
	// gradient c per trajectory with respect to the fit's p.
	f := ode.Field{Name: "ramp", Dim: 1, Params: 1, F: func(_ tape.V, _, p []tape.V) []tape.V {
		return []tape.V{p[0]}
	}}
	loss := ode.Loss{Name: "scaled", Data: []float64{1e160}, DataDim: 1,
		F: func(y, _, data []tape.V) tape.V { return y[0].Mul(data[0]) }}
	for _, tc := range []struct {
		name string
		fits int
		clip float64
		lr   float64
	}{
		{"one-fit-clip", 1, 0.5, 0.1},
		// Unclipped: the norm is only reported (the host's is finite).
		{"one-fit", 1, 0, 1e-165},
		{"two-fits-clip", 2, 3, 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prob := fit.Problem{ODE: ode.Problem{Field: f, N: 4, Y0: []float64{0}, P: []float64{0.5}, T1: 1},
				Loss: loss, Vars: fit.Vars{P: []int{0}}, Fits: tc.fits}
			var runs [2]*fit.Result
			for k, onHost := range []bool{true, false} {
				set := fit.Settings{Steps: 3, OnHost: onHost, ClipNorm: tc.clip, SkipFinal: true, Optimizer: &optim.SGD{LearnRate: tc.lr}}
				res, err := fit.Fit(t.Context(), prob, &ode.Settings{Engine: engine}, &set)
				if err != nil {
					t.Fatalf("OnHost %t: %v", onHost, err)
				}
				runs[k] = res
			}
			h, d := runs[0], runs[1]
			near(t, "GradNorms", d.GradNorms, h.GradNorms, 1e-12)
			near(t, "History", d.History, h.History, 1e-12)
			near(t, "X", d.X, h.X, 1e-12)
			if d.Steps != h.Steps || d.Status != h.Status {
				t.Errorf("steps, status: device %d %v, host %d %v", d.Steps, d.Status, h.Steps, h.Status)
			}
		})
	}
}

// A device fit stopped by its callback at any step (so also before any
// update, where the checkpoint's best loss is +Inf, and where the step
// evaluated last improved the best loss without being applied), its
// checkpoint and optimiser state taken through JSON, resumes to the
// uninterrupted device fit bit for bit, every step on the device.
func TestHostTrainResumeEveryStop(t *testing.T) {
	needHost(t)
	t.Parallel()
	testTrainResumeEveryStop(t, "cuda-host")
}

func TestGPUTrainResumeEveryStop(t *testing.T) {
	needGPUEngine(t)
	testTrainResumeEveryStop(t, "cuda")
}

func testTrainResumeEveryStop(t *testing.T, engine string) {
	prob := lorenzFits(4, 2, fit.Vars{P: []int{0}, Y0: []int{1}})
	s := &ode.Settings{Engine: engine, RelTol: 1e-7, AbsTol: 1e-10}
	const steps = 4
	mk := func() optim.Optimizer { return &optim.AdamW{LearnRate: 0.05, WeightDecay: 0.1} }
	base := fit.Settings{Steps: steps, ClipNorm: 2, Patience: 3}
	whole := base
	whole.Optimizer = mk()
	want, err := fit.Fit(t.Context(), prob, s, &whole)
	if err != nil {
		t.Fatal(err)
	}
	if want.DeviceSteps != steps {
		t.Fatalf("the uninterrupted fit took %d steps on the device (%s), want %d", want.DeviceSteps, want.DeviceNote, steps)
	}
	for stop := range steps {
		t.Run(fmt.Sprint("stop-at-", stop), func(t *testing.T) {
			t.Parallel()
			set := base
			o := mk()
			set.Optimizer, set.SkipFinal = o, true
			set.Callback = func(st *fit.Step) error {
				if st.Step == stop {
					return fit.ErrStop
				}
				return nil
			}
			first, err := fit.Fit(t.Context(), prob, s, &set)
			// (Step stop is evaluated on the device, not applied.)
			if err != nil || first.Status != fit.Stopped || first.DeviceSteps != stop+1 {
				t.Fatalf("first part: %v, status %v, %d device steps", err, first.Status, first.DeviceSteps)
			}
			var cbuf, obuf bytes.Buffer
			if err := json.NewEncoder(&cbuf).Encode(first.Checkpoint()); err != nil {
				t.Fatalf("encoding the checkpoint: %v", err)
			}
			if err := optim.SaveState(&obuf, o); err != nil {
				t.Fatal(err)
			}
			var ck fit.Checkpoint
			if err := json.NewDecoder(&cbuf).Decode(&ck); err != nil {
				t.Fatal(err)
			}
			o2 := mk()
			if err := optim.LoadState(&obuf, o2); err != nil {
				t.Fatal(err)
			}
			rest := base
			rest.Optimizer, rest.Resume = o2, &ck
			got, err := fit.Fit(t.Context(), prob, s, &rest)
			if err != nil {
				t.Fatal(err)
			}
			if got.DeviceSteps != steps-stop {
				t.Errorf("resumed: %d device steps (%s), want %d", got.DeviceSteps, got.DeviceNote, steps-stop)
			}
			history := append(append([]float64(nil), first.History[:first.Steps-first.Start]...), got.History...)
			for _, c := range []struct {
				what      string
				got, want []float64
			}{{"history", history, want.History}, {"X", got.X, want.X}, {"BestX", got.BestX, want.BestX}} {
				if ok, i := bitsEqual(c.got, c.want); !ok {
					t.Errorf("%s differs at %d: %v, uninterrupted %v", c.what, i, c.got, c.want)
				}
			}
			if got.BestStep != want.BestStep || math.Float64bits(got.BestLoss) != math.Float64bits(want.BestLoss) || got.Status != want.Status {
				t.Errorf("best %v at %d, %v; uninterrupted %v at %d, %v", got.BestLoss, got.BestStep, got.Status, want.BestLoss, want.BestStep, want.Status)
			}
		})
	}
}

// Over many steps of random gradients (scales 1e-8 to 1e4, some exact
// zeros), with schedules and random hyperparameters, the engine's updates
// are the optimiser's own Steps bit for bit: values and moments.
// (optim.TestAgainstReference checks Step against the published rules.)
func TestHostTrainUpdateManySteps(t *testing.T) {
	needHost(t)
	t.Parallel()
	testTrainUpdateManySteps(t, "cuda-host")
}

func TestGPUTrainUpdateManySteps(t *testing.T) {
	needGPUEngine(t)
	testTrainUpdateManySteps(t, "cuda")
}

func testTrainUpdateManySteps(t *testing.T, engine string) {
	prob := lorenzFits(8, 4, fit.Vars{P: []int{0}, Y0: []int{0, 1}})
	sv, err := ode.NewSolver(prob.ODE.Field, &ode.Settings{Engine: engine})
	if err != nil {
		t.Fatal(err)
	}
	const steps = 150
	for _, mk := range []func() optim.Ruled{
		func() optim.Ruled {
			return &optim.Adam{Schedule: optim.WarmupCosine{Init: 1e-4, Peak: 0.05, Final: 1e-3, Warmup: 40, Steps: 300}, Beta1: 0.85, Beta2: 0.995}
		},
		func() optim.Ruled { return &optim.AdamW{LearnRate: 0.02, WeightDecay: 0.2, Eps: 1e-12} },
		func() optim.Ruled { return &optim.SGD{Schedule: optim.Exponential{Init: 0.05, Decay: 0.5, Every: 100}} },
		func() optim.Ruled { return &optim.SGD{LearnRate: 0.01, Momentum: 0.95} },
		func() optim.Ruled {
			return &optim.SGD{Schedule: optim.Exponential{Init: 0.03, Decay: 0.9, Every: 50, Staircase: true}, Momentum: 0.5, Nesterov: true}
		},
	} {
		o, dev := mk(), mk()
		name := fmt.Sprintf("%T", o)
		rng := rand.New(rand.NewPCG(5, uint64(len(name))))
		r0, _ := o.RuleAt(0)
		spec := &ode.TrainSpec{Fits: 4, P: []int{0}, Y0: []int{0, 1}, Moments: len(r0.Moments())}
		p := prob.ODE
		tri, err := sv.NewTrainer(&p, prob.Loss, spec)
		if err != nil {
			t.Fatal(err)
		}
		tr := tri.(*trainer)
		L := spec.Len(p.N, 0)
		x := make([]float64, L)
		for i := range x {
			x[i] = 4*rng.Float64() - 2
		}
		if err := tr.Load(x, nil); err != nil {
			t.Fatal(err)
		}
		st := &ode.TrainState{X: make([]float64, L), Moments: make([][]float64, spec.Moments)}
		for q := range st.Moments {
			st.Moments[q] = make([]float64, L)
		}
		for k := range steps {
			g := make([]float64, L)
			for i := range g {
				if rng.IntN(13) != 0 {
					g[i] = rng.NormFloat64() * math.Pow(10, -8+12*rng.Float64())
				}
			}
			if err := tr.ex.be.write(tr.g, f64bytes(g)); err != nil {
				t.Fatal(err)
			}
			r, err := dev.RuleAt(k)
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.Update(&r, false); err != nil {
				t.Fatal(err)
			}
			o.Step(x, g)
			if err := tr.Read(st); err != nil {
				t.Fatal(err)
			}
			if ok, i := bitsEqual(st.X, x); !ok {
				t.Fatalf("%s step %d: x[%d] is %v on the engine, %v by Step", name, k, i, st.X[i], x[i])
			}
			s := o.State()
			for q, m := range r.Moments() {
				if ok, i := bitsEqual(st.Moments[q], s.Moments[m]); !ok {
					t.Fatalf("%s step %d: moment %s[%d] is %v on the engine, %v by Step", name, k, m, i, st.Moments[q][i], s.Moments[m][i])
				}
			}
		}
		tr.Release()
	}
}
