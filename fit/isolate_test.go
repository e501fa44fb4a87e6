package fit

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/tape"
)

// blowUp is y' = p·y², whose solution y0/(1 − p·y0·t) blows up at
// t = 1/(p·y0): a fit that drives p·y0 past 1/T1 = 1 makes its solve fail.
var blowUp = ode.Field{Name: "blowup", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
	return []tape.V{p[0].Mul(y[0].Square())}
}}

// isolated returns fits fits of 2 trajectories each (y0 = 1 and 0.8) of
// y' = p·y² on [0, 1], starting at p = 0.1, with data from p* = 0.2 +
// 0.05·b; the fits in bad get the target y(1) = 1000 (p* ≈ 0.999 for
// y0 = 1), which Adam overshoots past p = 1 within a few steps, where the
// solve fails. It also returns the problem without the fits in drop.
func isolated(fits int, bad, drop []int) Problem {
	isBad, isOut := map[int]bool{}, map[int]bool{}
	for _, b := range bad {
		isBad[b] = true
	}
	for _, b := range drop {
		isOut[b] = true
	}
	var y0, p, data []float64
	kept := 0
	for b := range fits {
		if isOut[b] {
			continue
		}
		kept++
		for _, c := range []float64{1, 0.8} {
			ps := 0.2 + 0.05*float64(b)
			y0 = append(y0, c)
			p = append(p, 0.1)
			target := c / (1 - ps*c)
			if isBad[b] {
				target = 1000
			}
			data = append(data, target)
		}
	}
	loss := ode.Loss{Name: "sq", DataDim: 1, Data: data, F: func(y, _, d []tape.V) tape.V { return y[0].Sub(d[0]).Square() }}
	return Problem{ODE: ode.Problem{Field: blowUp, Y0: y0, P: p, T1: 1}, Loss: loss, Vars: Vars{P: []int{0}}, Fits: kept}
}

// nanAt is Adam that writes NaN into x[at] at step step.
type nanAt struct {
	optim.Adam
	at, step int
}

func (o *nanAt) Step(x, g []float64) {
	k := o.Steps()
	o.Adam.Step(x, g)
	if k == o.step {
		x[o.at] = math.NaN()
	}
}

// TestIsolatedFits checks that a fit that fails stops alone, with its
// status and reason, and that the others go on exactly as a fit of the
// ensemble without it would: their losses and values bit for bit.
func TestIsolatedFits(t *testing.T) {
	t.Parallel()
	const fits, steps = 6, 25
	for _, tc := range []struct {
		name   string
		bad    []int // fail in the solver
		nan    int   // the fit whose update turns NaN at step 4, or -1
		remesh int
	}{
		{"one fails", []int{2}, -1, 0},
		{"two fail, remesh 2", []int{0, 5}, -1, 2},
		{"one fails, remesh 5", []int{3}, -1, 5},
		{"NaN update", nil, 1, 0},
		{"fails and NaN", []int{4}, 1, 3},
	} {
		out := append([]int(nil), tc.bad...)
		if tc.nan >= 0 {
			out = append(out, tc.nan)
		}
		mk := func(fits int, at int) optim.Optimizer {
			if at < 0 {
				return &optim.Adam{LearnRate: 0.1}
			}
			return &nanAt{Adam: optim.Adam{LearnRate: 0.1}, at: at, step: 4}
		}
		set := &Settings{Steps: steps, Remesh: tc.remesh, Optimizer: mk(fits, tc.nan)}
		res, err := Fit(context.Background(), isolated(fits, tc.bad, nil), nil, set)
		if err != nil {
			t.Fatalf("Case %s: %v", tc.name, err)
		}
		ref, err := Fit(context.Background(), isolated(fits, tc.bad, out), nil, &Settings{Steps: steps, Remesh: tc.remesh, Optimizer: mk(fits, -1)})
		if err != nil {
			t.Fatalf("Case %s: reference: %v", tc.name, err)
		}
		failedAt := 0
		for _, b := range out {
			var fe *FitError
			if res.FitStatus[b] != Failed || !errors.As(res.FitErr[b], &fe) || fe.Fit != b {
				t.Errorf("Case %s: fit %d: status %v, error %v; want failed with a *FitError", tc.name, b, res.FitStatus[b], res.FitErr[b])
				continue
			}
			failedAt = max(failedAt, fe.Step)
			var te *ode.TrajectoryError
			switch {
			case b == tc.nan:
				if !errors.Is(fe, ErrNonFinite) || fe.Step != 4 {
					t.Errorf("Case %s: fit %d: %v; want non-finite values at step 4", tc.name, b, fe)
				}
			case !errors.As(fe, &te) || te.Index/2 != b || fe.Step == 0:
				t.Errorf("Case %s: fit %d: %v; want a trajectory error of its own trajectories after step 0", tc.name, b, fe)
			}
			if x := res.FitP(b)[0]; math.IsNaN(x) || math.IsInf(x, 0) {
				t.Errorf("Case %s: failed fit %d kept the value %v", tc.name, b, x)
			}
		}
		if res.Status != MaxSteps || res.Steps != steps {
			t.Errorf("Case %s: status %v after %d steps, want max steps after %d", tc.name, res.Status, res.Steps, steps)
		}
		// The others: values and, from the last failure on, losses, bit for
		// bit those of the fit without the failed fits.
		j := 0
		for b := range fits {
			if res.FitStatus[b] == Failed {
				continue
			}
			if res.FitStatus[b] != MaxSteps || res.FitErr[b] != nil {
				t.Errorf("Case %s: healthy fit %d: status %v, error %v", tc.name, b, res.FitStatus[b], res.FitErr[b])
			}
			if got, want := res.FitP(b)[0], ref.FitP(j)[0]; math.Float64bits(got) != math.Float64bits(want) {
				t.Errorf("Case %s: fit %d: p = %v, without the failed fits %v", tc.name, b, got, want)
			}
			j++
		}
		from := failedAt
		if tc.nan >= 0 {
			from = max(from, 5) // step 4's update failed: step 5 is the first without it
		}
		if i := sameBits(res.History[from:], ref.History[from:]); i >= 0 {
			t.Errorf("Case %s: loss of step %d: %v, without the failed fits %v", tc.name, from+i, res.History[from+i], ref.History[from+i])
		}
		if math.Float64bits(res.FinalLoss) != math.Float64bits(ref.FinalLoss) {
			t.Errorf("Case %s: final loss %v, without the failed fits %v", tc.name, res.FinalLoss, ref.FinalLoss)
		}
		if from == 0 || from >= steps {
			t.Errorf("Case %s: the failure came at step %d, want in (0, %d)", tc.name, from, steps)
		}
	}
}

// TestAllFitsFail checks that a run whose fits all fail ends Failed with
// an error, and that a single fit's failure is the solver's error.
func TestAllFitsFail(t *testing.T) {
	t.Parallel()
	res, err := Fit(context.Background(), isolated(3, []int{0, 1, 2}, nil), nil, &Settings{Steps: 40, Optimizer: &optim.Adam{LearnRate: 0.1}})
	var fe *FitError
	if err == nil || res.Status != Failed || !errors.As(err, &fe) {
		t.Errorf("all fail: status %v, error %v", res.Status, err)
	}
	for b, s := range res.FitStatus {
		if s != Failed {
			t.Errorf("all fail: fit %d status %v", b, s)
		}
	}
	res, err = Fit(context.Background(), isolated(1, []int{0}, nil), nil, &Settings{Steps: 40, Optimizer: &optim.Adam{LearnRate: 0.1}})
	var te *ode.TrajectoryError
	if !errors.As(err, &te) || res.Status != Failed || res.Steps == 0 {
		t.Errorf("one fit: status %v after %d steps, error %v", res.Status, res.Steps, err)
	}
}

// TestResumeIsolated resumes fits among which one fails, before and after
// its failure, and checks the result against the uninterrupted run.
func TestResumeIsolated(t *testing.T) {
	t.Parallel()
	p := isolated(6, []int{2, 4}, nil)
	const steps = 20
	for _, tc := range []struct {
		name   string
		remesh int
		split  int
	}{
		{"before the failure", 0, 5},
		{"after the failure", 0, 13},
		{"after, remesh 3", 3, 13},
		{"at the failure, remesh 5", 5, 10},
	} {
		whole, err := Fit(context.Background(), p, nil, &Settings{Steps: steps, Remesh: tc.remesh, Optimizer: &optim.Adam{LearnRate: 0.1}})
		if err != nil {
			t.Fatal(err)
		}
		o := &optim.Adam{LearnRate: 0.1}
		first, err := Fit(context.Background(), p, nil, &Settings{Steps: tc.split, Remesh: tc.remesh, Optimizer: o, SkipFinal: true})
		if err != nil {
			t.Fatal(err)
		}
		second, err := Fit(context.Background(), p, nil, &Settings{Steps: steps, Remesh: tc.remesh, Optimizer: o, Resume: first.Checkpoint()})
		if err != nil {
			t.Fatal(err)
		}
		if i := sameBits(whole.X, second.X); i >= 0 {
			t.Errorf("Case %s: x[%d] = %v resumed, %v uninterrupted", tc.name, i, second.X[i], whole.X[i])
		}
		if i := sameBits(whole.History, append(append([]float64(nil), first.History...), second.History...)); i >= 0 {
			t.Errorf("Case %s: the loss of step %d differs", tc.name, i)
		}
		for b := range 6 {
			if e, f := whole.FitErr[b], second.FitErr[b]; (e == nil) != (f == nil) || e != nil && e.Error() != f.Error() {
				t.Errorf("Case %s: fit %d: error %v resumed, %v uninterrupted", tc.name, b, f, e)
			}
			if whole.FitStatus[b] != second.FitStatus[b] {
				t.Errorf("Case %s: fit %d: status %v resumed, %v uninterrupted", tc.name, b, second.FitStatus[b], whole.FitStatus[b])
			}
		}
		if whole.FitStatus[2] != Failed || math.Float64bits(whole.FinalLoss) != math.Float64bits(second.FinalLoss) {
			t.Errorf("Case %s: fit 2 %v; final loss %v resumed, %v uninterrupted", tc.name, whole.FitStatus[2], second.FinalLoss, whole.FinalLoss)
		}
	}
}

// TestUpdateNonFinite checks an update that makes the values non-finite
// (a learning rate far too large), with one fit and with several: the
// run ends Failed with a *FitError wrapping ErrNonFinite that names the
// fit, the step and the value, and X keeps the values before it.
func TestUpdateNonFinite(t *testing.T) {
	t.Parallel()
	for _, fits := range []int{1, 2} {
		prob, data, _ := ensemble(4, fits, nil)
		p := Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0, 1}}, Fits: fits}
		f, err := New(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		x0 := f.Init(nil)
		res, err := f.Run(context.Background(), &Settings{Steps: 5, Optimizer: &optim.SGD{LearnRate: math.MaxFloat64}})
		var fe *FitError
		if !errors.As(err, &fe) || !errors.Is(err, ErrNonFinite) || fe.Fit != 0 || fe.Step != 0 || !strings.Contains(err.Error(), "x[0] (fit0.p) = ") {
			t.Errorf("Fits %d: error %v; want a *FitError of fit 0 at step 0 wrapping ErrNonFinite and naming x[0]", fits, err)
		}
		if res == nil || res.Status != Failed || sameBits(res.X, x0) >= 0 {
			t.Errorf("Fits %d: result %+v; want status Failed with the starting values %v", fits, res, x0)
		}
	}
}
