package fit

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/tape"
)

// decay is y0' = −k·y0, y1' = a·y0 − y1 with p = (k, a), and its exact
// solution y0 = c0·e^(−kt), y1 = (c1 + a·c0·t)e^(−t) if k = 1, else
// c1·e^(−t) + a·c0·(e^(−kt) − e^(−t))/(1 − k). traces counts the traces of
// its F.
func decay(traces *atomic.Int64) ode.Field {
	return ode.Field{Name: "decay", Dim: 2, Params: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
		if traces != nil {
			traces.Add(1)
		}
		return []tape.V{p[0].Mul(y[0]).Neg(), p[1].Mul(y[0]).Sub(y[1])}
	}}
}

func decayExact(c0, c1, k, a, t float64) (float64, float64) {
	return c0 * math.Exp(-k*t), c1*math.Exp(-t) + a*c0*(math.Exp(-k*t)-math.Exp(-t))/(1-k)
}

var saveAt = []float64{0.5, 1, 1.5, 2}

// observed is a squared-error loss against the data: the saved states of
// each trajectory, row-major [len(saveAt)·2] per trajectory.
func observed(data []float64) ode.Loss {
	return ode.Loss{Name: "sse", DataDim: 2 * len(saveAt), Data: data, F: func(_, ys, data []tape.V) tape.V {
		s := ys[0].Sub(data[0]).Square()
		for j := 1; j < len(ys); j++ {
			s = s.Add(ys[j].Sub(data[j]).Square())
		}
		return s
	}}
}

// ensemble returns n trajectories in fits groups: fit b's true parameters
// are k_b = 0.5 + 0.3b (never 1), a_b = 2 − 0.3b; initial states differ per
// trajectory. It returns the problem with the starting guesses (k = a =
// 1.3), and the exact observations at saveAt.
func ensemble(n, fits int, traces *atomic.Int64) (ode.Problem, []float64, []float64) {
	rng := rand.New(rand.NewPCG(1, 1))
	per := n / fits
	y0 := make([]float64, 2*n)
	p := make([]float64, 2*n)
	truth := make([]float64, 2*fits)
	data := make([]float64, 0, n*2*len(saveAt))
	for i := range n {
		b := i / per
		k, a := 0.5+0.3*float64(b), 2-0.3*float64(b)
		truth[2*b], truth[2*b+1] = k, a
		y0[2*i], y0[2*i+1] = 0.5+rng.Float64(), rng.Float64()
		p[2*i], p[2*i+1] = 1.3, 1.3
		for _, t := range saveAt {
			u, v := decayExact(y0[2*i], y0[2*i+1], k, a, t)
			data = append(data, u, v)
		}
	}
	return ode.Problem{Field: decay(traces), Y0: y0, P: p, T1: 2, SaveAt: saveAt}, data, truth
}

var tight = &ode.Settings{RelTol: 1e-10, AbsTol: 1e-12}

func TestGradMatchesFiniteDifferences(t *testing.T) {
	t.Parallel()
	prob, data, _ := ensemble(6, 2, nil)
	for _, tc := range []struct {
		name string
		vars Vars
		fits int
	}{
		{"P tied in 2 fits", Vars{P: []int{0, 1}}, 2},
		{"P column 1, one fit", Vars{P: []int{1}}, 1},
		{"Y0 component 1", Vars{Y0: []int{1}}, 2},
		{"P and Y0", Vars{P: []int{0}, Y0: []int{0, 1}}, 3},
	} {
		f, err := New(Problem{ODE: prob, Loss: observed(data), Vars: tc.vars, Fits: tc.fits}, tight)
		if err != nil {
			t.Fatal(err)
		}
		x := f.Init(nil)
		x[0] += 0.1 // away from any symmetric point
		_, g, grad, err := f.Grad(nil, x, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := g.Mesh
		// Central differences of the loss on the same mesh: the gradient is
		// the exact derivative of this map, so they agree to the FD error,
		// O(h²)·L''' ≈ 1e-10 here, and round-off ≈ 1e-16/h.
		for j := range x {
			h := 1e-6 * math.Max(1, math.Abs(x[j]))
			xp, xm := append([]float64(nil), x...), append([]float64(nil), x...)
			xp[j] += h
			xm[j] -= h
			lp, _, err1 := f.Loss(xp, m)
			lm, _, err2 := f.Loss(xm, m)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			fd := (lp - lm) / (2 * h)
			if math.Abs(grad[j]-fd) > 1e-7+1e-6*math.Abs(fd) {
				t.Errorf("Case %s: ∂L/∂x[%d] (%s): Want (FD): %.10g, Got: %.10g.", tc.name, j, blockName(f, j), fd, grad[j])
			}
		}
	}
}

func blockName(f *Fitter, j int) string {
	for _, p := range f.Set().Params() {
		if j >= p.Off && j < p.Off+p.Size() {
			return p.Name
		}
	}
	return "?"
}

func TestRecoversEachFit(t *testing.T) {
	t.Parallel()
	const fits = 4
	prob, data, truth := ensemble(4*fits, fits, nil)
	f, err := New(Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0, 1}}, Fits: fits}, tight)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Run(context.Background(), &Settings{Steps: 400, Optimizer: &optim.Adam{LearnRate: 0.05}, LossTol: 1e-20})
	if err != nil {
		t.Fatal(err)
	}
	if !(res.FinalLoss < 1e-3*res.History[0]) {
		t.Errorf("loss %g → %g: less than a 1000-fold reduction", res.History[0], res.FinalLoss)
	}
	for b := range fits {
		got := res.FitP(b)
		for j := range 2 {
			// Exact data: each fit converges to its own truth; 400 Adam steps
			// at lr 0.05 get within about 1e-3.
			if math.Abs(got[j]-truth[2*b+j]) > 2e-3 {
				t.Errorf("fit %d parameter %d: Want: %v, Got: %v.", b, j, truth[2*b+j], got[j])
			}
		}
	}
	// The result's problem carries the fitted values into every trajectory.
	if res.Problem.P[2*(4*fits-1)] != res.FitP(fits - 1)[0] {
		t.Errorf("Result.Problem.P was not updated")
	}
}

func TestMeshPolicies(t *testing.T) {
	t.Parallel()
	prob, data, _ := ensemble(4, 1, nil)
	for _, tc := range []struct {
		name    string
		remesh  int
		records int // steps recorded + the final evaluation
	}{
		{"every step", 0, 12 + 1},
		{"every step (1)", 1, 12 + 1},
		{"every 5", 5, 3 + 1}, // steps 0, 5, 10
		{"once", -1, 1 + 1},
	} {
		res, err := Fit(context.Background(), Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0, 1}}}, nil,
			&Settings{Steps: 12, Remesh: tc.remesh, Optimizer: &optim.Adam{LearnRate: 0.02}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Records != tc.records || res.Steps != 12 || len(res.History) != 12 || res.Status != MaxSteps {
			t.Errorf("Case %s: records %d steps %d history %d status %v; want records %d, 12 steps", tc.name, res.Records, res.Steps, len(res.History), res.Status, tc.records)
		}
		if !(res.FinalLoss < res.History[0]) {
			t.Errorf("Case %s: loss did not fall: %g → %g", tc.name, res.History[0], res.FinalLoss)
		}
	}
}

// TestNoRetrace checks that a fit traces its field only when the Fitter
// is built, however many steps it takes.
func TestNoRetrace(t *testing.T) {
	t.Parallel()
	var traces atomic.Int64
	prob, data, _ := ensemble(4, 2, &traces)
	counts := make(map[int]int64)
	for _, steps := range []int{1, 20} {
		traces.Store(0)
		f, err := New(Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0}}, Fits: 2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		built := traces.Load()
		if _, err := f.Run(context.Background(), &Settings{Steps: steps}); err != nil {
			t.Fatal(err)
		}
		if n := traces.Load(); n != built {
			t.Errorf("%d steps traced the field %d times after New, want 0", steps, n-built)
		}
		counts[steps] = traces.Load()
	}
	if counts[1] != counts[20] || counts[1] == 0 {
		t.Errorf("field traces: %d for 1 step, %d for 20; want equal and positive", counts[1], counts[20])
	}
}

func TestStopping(t *testing.T) {
	t.Parallel()
	prob, data, _ := ensemble(2, 1, nil)
	p := Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0, 1}}}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	var calls int
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		set     Settings
		status  Status
		steps   int // optimiser steps taken
		history int
		err     bool
	}{
		// A zero learning rate never improves: the first step sets the best,
		// then Patience steps without progress.
		{"patience", context.Background(), Settings{Steps: 50, Patience: 3, Optimizer: &optim.SGD{Schedule: optim.Constant(0)}}, NoProgress, 3, 4, false},
		{"callback stop", context.Background(), Settings{Steps: 50, Callback: func(s *Step) error {
			if s.Step == 2 {
				return ErrStop
			}
			return nil
		}}, Stopped, 2, 3, false},
		{"callback error", context.Background(), Settings{Steps: 50, Callback: func(s *Step) error { return errors.New("boom") }}, Failed, 0, 1, true},
		{"cancelled", cancelled, Settings{Steps: 50}, Cancelled, 0, 0, true},
		{"loss tol", context.Background(), Settings{Steps: 50, LossTol: 1e30}, Converged, 0, 1, false},
		{"callback sees steps", context.Background(), Settings{Steps: 5, Callback: func(s *Step) error {
			if s.Step != calls || len(s.X) != 2 || s.GradNorm <= 0 || s.Rate != 1e-3 {
				return errors.New("bad step")
			}
			calls++
			return nil
		}}, MaxSteps, 5, 5, false},
	} {
		res, err := Fit(tc.ctx, p, nil, &tc.set)
		if (err != nil) != tc.err {
			t.Errorf("Case %s: error %v, want error %v", tc.name, err, tc.err)
		}
		if res == nil {
			t.Fatalf("Case %s: nil result", tc.name)
		}
		if res.Status != tc.status || res.Steps != tc.steps || len(res.History) != tc.history {
			t.Errorf("Case %s: status %v, %d steps, history %d; want %v, %d, %d", tc.name, res.Status, res.Steps, len(res.History), tc.status, tc.steps, tc.history)
		}
	}
	if _, err := Fit(cancelled, p, nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled fit returned %v, want context.Canceled", err)
	}
}

// TestSharedWithRegularizer fits a shared parameter with a loss whose
// per-trajectory term reads it (FP) and a Reg term, and checks the
// gradient against finite differences.
func TestSharedWithRegularizer(t *testing.T) {
	t.Parallel()
	field := ode.Field{Name: "shared-decay", Dim: 1, Shared: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Neg().Add(p[1])}
	}}
	prob := ode.Problem{Field: field, Y0: []float64{1, 2, 3}, Shared: []float64{0.7, 0.1}, T1: 1}
	loss := ode.Loss{Name: "target",
		FP: func(y, _, _, _, s []tape.V) tape.V { return y[0].AddC(-0.5).Square().Add(s[1].Square().MulC(0.1)) },
		Reg: func(s []tape.V) tape.V {
			return s[0].AddC(-1).Square().MulC(0.01)
		}}
	f, err := New(Problem{ODE: prob, Loss: loss, Vars: Vars{Shared: true}}, tight)
	if err != nil {
		t.Fatal(err)
	}
	x := f.Init(nil)
	_, g, grad, err := f.Grad(nil, x, nil)
	if err != nil {
		t.Fatal(err)
	}
	for j := range x {
		h := 1e-6
		xp, xm := append([]float64(nil), x...), append([]float64(nil), x...)
		xp[j] += h
		xm[j] -= h
		lp, _, _ := f.Loss(xp, g.Mesh)
		lm, _, _ := f.Loss(xm, g.Mesh)
		if fd := (lp - lm) / (2 * h); math.Abs(grad[j]-fd) > 1e-7+1e-6*math.Abs(fd) {
			t.Errorf("∂L/∂s[%d]: Want (FD): %.10g, Got: %.10g.", j, fd, grad[j])
		}
	}
	res, err := f.Run(context.Background(), &Settings{Steps: 60, Optimizer: &optim.Adam{LearnRate: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	if !(res.FinalLoss < 0.5*res.History[0]) {
		t.Errorf("loss %g → %g", res.History[0], res.FinalLoss)
	}
	// The fit does not modify the caller's problem.
	if prob.Shared[0] != 0.7 {
		t.Errorf("the caller's Shared was modified: %v", prob.Shared)
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	prob, data, _ := ensemble(4, 1, nil)
	loss := observed(data)
	nanData := slices.Clone(data)
	nanData[len(nanData)-1] = math.NaN()
	nanY0 := prob
	nanY0.Y0 = slices.Clone(prob.Y0)
	nanY0.Y0[1] = math.Inf(1) // not fitted: Vars.P only
	nanP := prob
	nanP.P = slices.Clone(prob.P)
	nanP.P[2] = math.NaN() // trajectory 1's column 0: fitted with Fits 4
	fitP := Vars{P: []int{0}}
	for _, tc := range []struct {
		name string
		p    Problem
		want string // in the error, when not empty
	}{
		{"nothing", Problem{ODE: prob, Loss: loss}, ""},
		{"P index", Problem{ODE: prob, Loss: loss, Vars: Vars{P: []int{2}}}, ""},
		{"Y0 index", Problem{ODE: prob, Loss: loss, Vars: Vars{Y0: []int{-1}}}, ""},
		{"duplicate", Problem{ODE: prob, Loss: loss, Vars: Vars{P: []int{0, 0}}}, ""},
		{"fits", Problem{ODE: prob, Loss: loss, Vars: fitP, Fits: 3}, ""},
		{"no shared", Problem{ODE: prob, Loss: loss, Vars: Vars{Shared: true}}, ""},
		{"data NaN", Problem{ODE: prob, Loss: observed(nanData), Vars: fitP}, "is not finite"},
		{"data length", Problem{ODE: prob, Loss: observed(data[:len(data)-1]), Vars: fitP}, "len(Data)"},
		{"Y0 Inf", Problem{ODE: nanY0, Loss: loss, Vars: fitP}, "Y0"},
		{"start NaN", Problem{ODE: nanP, Loss: loss, Vars: fitP, Fits: 4}, "fit: the starting value x[1] (fit1.p) is NaN"},
		{"start NaN, bad data", Problem{ODE: nanP, Loss: observed(data[:len(data)-1]), Vars: fitP, Fits: 4}, "starting value x[1]"},
		{"P NaN, not a start", Problem{ODE: nanP, Loss: loss, Vars: fitP, Fits: 1}, "P[2] = NaN"},
	} {
		_, err := New(tc.p, nil)
		if err == nil {
			t.Errorf("Case %s: no error", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Case %s: error %q does not mention %q", tc.name, err, tc.want)
		}
		if !errors.Is(err, ode.ErrInput) {
			t.Errorf("Case %s: error %q does not wrap ode.ErrInput", tc.name, err)
		}
	}
}

func TestResultRender(t *testing.T) {
	t.Parallel()
	prob, data, _ := ensemble(2, 2, nil)
	res, err := Fit(context.Background(), Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0}}, Fits: 2}, nil, &Settings{Steps: 3})
	if err != nil {
		t.Fatal(err)
	}
	if b := res.PNG(); len(b) < 8 || string(b[1:4]) != "PNG" {
		t.Errorf("PNG() does not return a PNG (%d bytes)", len(b))
	}
	h := res.HTML()
	for _, want := range []string{"max steps", "fit 1: P", "<img"} {
		if !strings.Contains(h, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}

// TestNewCopiesNothing checks that New allocates nothing of the size of
// the ensemble: it reads Y0, P and Data, and the host's copy and the
// starting values are built at their first use. It does not run in
// parallel, so that the allocation count is New's alone.
func TestNewCopiesNothing(t *testing.T) {
	const n = 1 << 16
	prob, data, _ := ensemble(n, n, nil)
	p := Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0}, Y0: []int{1}}, Fits: n}
	sv, err := ode.NewSolver(prob.Field, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewWithSolver(sv, p); err != nil { // the loss's trace, cached
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f, err := NewWithSolver(sv, p)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	// One float64 per trajectory would be 512 KiB; the copies of Y0, P
	// and the starting values, 3 MiB.
	if b := after.TotalAlloc - before.TotalAlloc; b > 8*n/16 {
		t.Errorf("New of %d trajectories allocated %d bytes, want at most %d", n, b, 8*n/16)
	}
	if x := f.Init(nil); len(x) != 2*n || x[0] != prob.P[0] || x[1] != prob.Y0[1] {
		t.Errorf("Init: len %d, x[0:2] = %v; want %d, [%v %v]", len(x), x[:2], 2*n, prob.P[0], prob.Y0[1])
	}
}

// newCaller is New of prob with the observations data, Vars and Fits as
// TestCallerArrays's.
func newCaller(t *testing.T, prob ode.Problem, data []float64) *Fitter {
	t.Helper()
	f, err := New(Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0}, Y0: []int{1}}, Fits: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCallerArrays checks the host's copy taken at the first evaluation:
// the caller's Y0 and P (one row, or N) are never written, the starting
// values and Problem are the same before and after it, and Problem has N
// rows with x written in.
func TestCallerArrays(t *testing.T) {
	t.Parallel()
	full, data, _ := ensemble(4, 2, nil)
	oneRow := full
	oneRow.Y0, oneRow.N = []float64{0.8, 0.3}, 4
	for _, tc := range []struct {
		name string
		prob ode.Problem
	}{{"N rows", full}, {"one Y0 row", oneRow}} {
		y0, p := slices.Clone(tc.prob.Y0), slices.Clone(tc.prob.P)
		f, err := New(Problem{ODE: tc.prob, Loss: observed(data), Vars: Vars{P: []int{0}, Y0: []int{1}}, Fits: 2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		x0 := f.Init(nil)
		x := slices.Clone(x0)
		for i := range x {
			x[i] += 0.125 * float64(i+1)
		}
		before := f.Problem(x) // no host copy yet
		if _, _, _, err := f.Grad(nil, x0, nil); err != nil {
			t.Fatal(err)
		}
		after := f.Problem(x)
		if i := sameBits(before.Y0, after.Y0); i >= 0 || sameBits(before.P, after.P) >= 0 || before.N != after.N {
			t.Errorf("Case %s: Problem(x) before the first evaluation %v %v, after %v %v", tc.name, before.Y0, before.P, after.Y0, after.P)
		}
		// Problem(x) is a copy: none of its arrays is the caller's (a
		// caller who reuses its SaveAt or T1s slices leaves it unchanged).
		tc.prob.T1s = []float64{2, 2, 2.5, 2}
		if g := newCaller(t, tc.prob, data).Problem(x); len(g.SaveAt) == 0 || &g.SaveAt[0] == &tc.prob.SaveAt[0] || &g.T1s[0] == &tc.prob.T1s[0] {
			t.Errorf("Case %s: Problem(x) shares the caller's SaveAt or T1s (len %d, %d)", tc.name, len(g.SaveAt), len(g.T1s))
		}
		if len(before.Y0) != 8 || len(before.P) != 8 {
			t.Errorf("Case %s: Problem(x) has len(Y0) = %d, len(P) = %d; want N rows (8, 8)", tc.name, len(before.Y0), len(before.P))
		}
		for i := range 4 {
			k := i / 2 // fit; its block: P column 0, then its 2 trajectories' Y0[1]
			wantP0, wantY1 := x[3*k], x[3*k+1+i%2]
			wantP1, wantY0 := p[2*i+1], y0[(2*i)%len(y0)]
			if g := before.P[2*i : 2*i+2]; g[0] != wantP0 || g[1] != wantP1 {
				t.Errorf("Case %s: trajectory %d: P = %v, want [%v %v]", tc.name, i, g, wantP0, wantP1)
			}
			if g := before.Y0[2*i : 2*i+2]; g[0] != wantY0 || g[1] != wantY1 {
				t.Errorf("Case %s: trajectory %d: Y0 = %v, want [%v %v]", tc.name, i, g, wantY0, wantY1)
			}
		}
		if sameBits(f.Init(nil), x0) >= 0 {
			t.Errorf("Case %s: Init after an evaluation %v, before %v", tc.name, f.Init(nil), x0)
		}
		if _, err := f.Run(context.Background(), &Settings{Steps: 2}); err != nil {
			t.Fatal(err)
		}
		if sameBits(tc.prob.Y0, y0) >= 0 || sameBits(tc.prob.P, p) >= 0 {
			t.Errorf("Case %s: the caller's arrays were written: Y0 %v (was %v), P %v (was %v)", tc.name, tc.prob.Y0, y0, tc.prob.P, p)
		}
	}
}
