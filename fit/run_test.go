package fit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/tape"
)

// sameBits reports the first index at which a and b differ bit for bit,
// or -1.
func sameBits(a, b []float64) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestFitViews checks FitP and FitY0, also of a fit without fitted
// parameters of that kind.
func TestFitViews(t *testing.T) {
	t.Parallel()
	prob, data, _ := ensemble(4, 2, nil)
	for _, tc := range []struct {
		name         string
		vars         Vars
		wantP, wantY int
	}{
		{"Y0 only", Vars{Y0: []int{1}}, 0, 2},
		{"P only", Vars{P: []int{0}}, 1, 0},
		{"both", Vars{P: []int{0, 1}, Y0: []int{0, 1}}, 2, 4},
	} {
		res, err := Fit(context.Background(), Problem{ODE: prob, Loss: observed(data), Vars: tc.vars, Fits: 2}, nil, &Settings{Steps: 2})
		if err != nil {
			t.Fatal(err)
		}
		for b := range 2 {
			var p, y []float64
			if panics(func() { p, y = res.FitP(b), res.FitY0(b) }) {
				t.Fatalf("Case %s: FitP or FitY0 panicked", tc.name)
			}
			if len(p) != tc.wantP || len(y) != tc.wantY || (tc.wantP == 0) != (p == nil) {
				t.Errorf("Case %s: fit %d: FitP %v, FitY0 %v; want lengths %d, %d", tc.name, b, p, y, tc.wantP, tc.wantY)
			}
			if tc.wantY > 0 && y[0] != res.Problem.Y0[2*(2*b)+tc.vars.Y0[0]] {
				t.Errorf("Case %s: FitY0(%d) = %v does not match Result.Problem", tc.name, b, y)
			}
		}
	}
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}

// TestPatienceNegativeLoss checks that Patience fires whatever the sign of
// the loss, with and without Tol.
func TestPatienceNegativeLoss(t *testing.T) {
	t.Parallel()
	prob, data, _ := ensemble(2, 1, nil)
	for _, tc := range []struct {
		name   string
		offset float64
		tol    float64
	}{
		{"negative, tol", -100, 0.01},
		{"negative, no tol", -100, 0},
		{"positive, tol", 100, 0.01},
	} {
		loss := observed(data)
		f := loss.F
		loss.F = func(y, ys, d []tape.V) tape.V { return f(y, ys, d).AddC(tc.offset) }
		// A learning rate of zero: the loss never changes.
		res, err := Fit(context.Background(), Problem{ODE: prob, Loss: loss, Vars: Vars{P: []int{0}}}, nil,
			&Settings{Steps: 30, Patience: 3, Tol: tc.tol, Optimizer: &optim.SGD{Schedule: optim.Constant(0)}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != NoProgress || res.Steps != 3 {
			t.Errorf("Case %s: status %v after %d steps (loss %v), want no progress after 3", tc.name, res.Status, res.Steps, res.History[0])
		}
	}
	// A loss that keeps falling by more than Tol relative does not stop.
	if !improves(-2, -1, 0.5) || improves(-1.4, -1, 0.5) || !improves(0.4, 1, 0.5) || improves(0.6, 1, 0.5) {
		t.Error("improves does not measure a relative improvement of either sign")
	}
}

// TestRunRefusesBadSettings checks that invalid settings and optimisers
// are errors before any step, not panics or moves uphill, and that they
// wrap ode.ErrInput (an optimiser's bad hyperparameter too, which the
// run finds at a step: it did not).
func TestRunRefusesBadSettings(t *testing.T) {
	t.Parallel()
	prob, data, _ := ensemble(2, 1, nil)
	p := Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0, 1}}}
	other := &optim.Adam{}
	other.Step(make([]float64, 3), make([]float64, 3)) // a state for 3 parameters
	for _, tc := range []struct {
		name string
		set  Settings
		want string
	}{
		{"NaN rate", Settings{Optimizer: &optim.Adam{LearnRate: math.NaN()}}, "LearnRate"},
		{"negative rate", Settings{Optimizer: &optim.SGD{LearnRate: -1}}, "LearnRate"},
		{"bad beta", Settings{Optimizer: &optim.Adam{Beta1: 1}}, "Beta1"},
		{"schedule turns negative", Settings{Steps: 10, Optimizer: &optim.SGD{Schedule: optim.Exponential{Init: 0.01, Decay: -1}}}, "Schedule"},
		{"state for 3", Settings{Optimizer: other}, "3 parameters"},
		{"steps", Settings{Steps: -3}, "Steps"},
		{"clip NaN", Settings{ClipNorm: math.NaN()}, "ClipNorm"},
		{"tol", Settings{Tol: -1}, "Tol"},
		{"patience", Settings{Patience: -1}, "Patience"},
		{"damaged checkpoint", Settings{Resume: &Checkpoint{X: []float64{1}}}, "checkpoint"},
	} {
		var res *Result
		var err error
		// The reporter is finished whether the run is refused before its
		// first step or at it.
		rep := &finishCount{}
		tc.set.Progress = rep
		if panics(func() { res, err = Fit(context.Background(), p, nil, &tc.set) }) {
			t.Errorf("Case %s: panicked", tc.name)
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Case %s: error %v, want one naming %s", tc.name, err, tc.want)
		}
		if !errors.Is(err, ode.ErrInput) {
			t.Errorf("Case %s: error %v does not wrap ode.ErrInput", tc.name, err)
		}
		if rep.n != 1 {
			t.Errorf("Case %s: the reporter was finished %d times, want once", tc.name, rep.n)
		}
		if res != nil && res.Steps > 1 {
			t.Errorf("Case %s: %d steps taken", tc.name, res.Steps)
		}
	}
}

// TestCancelDuringStep cancels the context while a step's gradient is
// computed: the step must not be applied.
func TestCancelDuringStep(t *testing.T) {
	t.Parallel()
	for _, chunk := range []int{0, 8} { // one chunk (the gradient completes), several (it stops)
		prob, data, _ := ensemble(64, 1, nil)
		ctx, cancel := context.WithCancel(context.Background())
		set := &ode.Settings{Progress: func(done, total int) { cancel() }, Exec: tape.ExecSettings{BlockSize: chunk, Workers: 1}}
		f, err := New(Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0}}}, set)
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.Run(ctx, &Settings{Steps: 5, Optimizer: &optim.Adam{LearnRate: 0.1}})
		if !errors.Is(err, context.Canceled) || res.Status != Cancelled {
			t.Errorf("chunk %d: error %v, status %v; want cancelled", chunk, err, res.Status)
		}
		if res.Steps != 0 || res.X[0] != f.Init(nil)[0] {
			t.Errorf("chunk %d: the cancelled step was applied: %d steps, x = %v", chunk, res.Steps, res.X)
		}
	}
}

// TestResume runs a fit under Remesh K in two parts, saving and reloading
// the checkpoint and the optimiser state through their files, and checks
// it against the uninterrupted fit bit for bit.
func TestResume(t *testing.T) {
	t.Parallel()
	prob, data, _ := ensemble(6, 3, nil)
	p := Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0, 1}}, Fits: 3}
	for _, tc := range []struct {
		name       string
		remesh     int
		split      int
		patience   int
		optimizer  func() optim.Optimizer
		wantStatus Status
	}{
		{"remesh 5, split 7", 5, 7, 0, func() optim.Optimizer { return &optim.Adam{LearnRate: 0.05} }, MaxSteps},
		{"remesh 5, split 5", 5, 5, 0, func() optim.Optimizer { return &optim.Adam{LearnRate: 0.05} }, MaxSteps},
		{"remesh once, split 4", -1, 4, 0, func() optim.Optimizer { return &optim.AdamW{LearnRate: 0.05} }, MaxSteps},
		{"every step, schedule", 0, 6, 0, func() optim.Optimizer {
			return &optim.SGD{Momentum: 0.5, Schedule: optim.WarmupCosine{Init: 0, Peak: 0.01, Final: 0.001, Warmup: 3, Steps: 12}}
		}, MaxSteps},
		{"patience, split before the stop", 3, 1, 2, func() optim.Optimizer { return &optim.SGD{Schedule: optim.Constant(0)} }, NoProgress},
		{"patience, split at the stop", 3, 5, 2, func() optim.Optimizer { return &optim.SGD{Schedule: optim.Constant(0)} }, NoProgress},
	} {
		const steps = 12
		var want []bool
		record := func(s *Step) error { want = append(want, s.Remeshed); return nil }
		whole, err := Fit(context.Background(), p, nil, &Settings{Steps: steps, Remesh: tc.remesh, Patience: tc.patience, Optimizer: tc.optimizer(), Callback: record})
		if err != nil {
			t.Fatal(err)
		}
		wantRemesh := want
		want = nil
		o1 := tc.optimizer()
		first, err := Fit(context.Background(), p, nil, &Settings{Steps: tc.split, Remesh: tc.remesh, Patience: tc.patience, Optimizer: o1, Callback: record, SkipFinal: true})
		if err != nil {
			t.Fatal(err)
		}
		// Through the files: the checkpoint as JSON, the optimiser state.
		var cbuf, obuf bytes.Buffer
		if err := json.NewEncoder(&cbuf).Encode(first.Checkpoint()); err != nil {
			t.Fatal(err)
		}
		if err := optim.SaveState(&obuf, o1); err != nil {
			t.Fatal(err)
		}
		var ck Checkpoint
		if err := json.NewDecoder(&cbuf).Decode(&ck); err != nil {
			t.Fatal(err)
		}
		o2 := tc.optimizer()
		if err := optim.LoadState(&obuf, o2); err != nil {
			t.Fatal(err)
		}
		second, err := Fit(context.Background(), p, nil, &Settings{Steps: steps, Remesh: tc.remesh, Patience: tc.patience, Optimizer: o2, Callback: record, Resume: &ck})
		if err != nil {
			t.Fatal(err)
		}
		// A run that stopped before applying its last evaluated step
		// evaluates it again when resumed.
		history := append(append([]float64(nil), first.History[:first.Steps-first.Start]...), second.History...)
		if i := sameBits(whole.History, history); i >= 0 {
			t.Errorf("Case %s: history differs from step %d: %v vs %v", tc.name, i, history, whole.History)
		}
		if i := sameBits(whole.X, second.X); i >= 0 {
			t.Errorf("Case %s: x[%d] = %v resumed, %v uninterrupted", tc.name, i, second.X[i], whole.X[i])
		}
		if whole.Steps != second.Steps || whole.Status != tc.wantStatus || second.Status != whole.Status || second.Start != first.Steps {
			t.Errorf("Case %s: steps %d/%d, status %v/%v, start %d", tc.name, second.Steps, whole.Steps, second.Status, whole.Status, second.Start)
		}
		if len(want) != len(wantRemesh) {
			t.Errorf("Case %s: %d steps with callbacks, want %d", tc.name, len(want), len(wantRemesh))
		}
		for k := range min(len(want), len(wantRemesh)) {
			if want[k] != wantRemesh[k] {
				t.Errorf("Case %s: step %d remeshed %v, uninterrupted %v", tc.name, k, want[k], wantRemesh[k])
			}
		}
		if math.Float64bits(whole.FinalLoss) != math.Float64bits(second.FinalLoss) || whole.BestStep != second.BestStep {
			t.Errorf("Case %s: final loss %v (best step %d), uninterrupted %v (%d)", tc.name, second.FinalLoss, second.BestStep, whole.FinalLoss, whole.BestStep)
		}
	}
	// A checkpoint that does not match the optimiser or the fit is refused.
	res, err := Fit(context.Background(), p, nil, &Settings{Steps: 3, Optimizer: &optim.Adam{}})
	if err != nil {
		t.Fatal(err)
	}
	ck := res.Checkpoint()
	if _, err := Fit(context.Background(), p, nil, &Settings{Steps: 6, Optimizer: &optim.Adam{}, Resume: ck}); err == nil || !strings.Contains(err.Error(), "optimiser state") {
		t.Errorf("a checkpoint at step 3 with a fresh optimiser: %v", err)
	}
	ck.X = ck.X[:2]
	if _, err := Fit(context.Background(), p, nil, &Settings{Steps: 6, Resume: ck}); err == nil {
		t.Error("a checkpoint of another length was accepted")
	}
	// A checkpoint of another fit with as many values (the columns
	// swapped; another field of the same shape) is refused, unless its
	// Fit is cleared.
	other := p
	other.Vars = Vars{P: []int{1, 0}}
	lin := p
	lin.ODE.Field = ode.Field{Name: "decay2", Dim: 2, Params: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Neg(), p[1].Mul(y[0]).Sub(y[1].Mul(y[1].Const(2)))}
	}}
	for name, q := range map[string]Problem{"columns swapped": other, "another field": lin} {
		o := &optim.Adam{}
		res, err := Fit(context.Background(), q, nil, &Settings{Steps: 2, Optimizer: o, SkipFinal: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ck := res.Checkpoint()
		if len(ck.X) != 6 || ck.Fit == "" {
			t.Fatalf("%s: checkpoint of %d values, id %q", name, len(ck.X), ck.Fit)
		}
		o2 := &optim.Adam{}
		if err := o2.SetState(o.State()); err != nil {
			t.Fatal(err)
		}
		_, err = Fit(context.Background(), p, nil, &Settings{Steps: 3, Optimizer: o2, Resume: ck})
		if err == nil || !strings.Contains(err.Error(), "another fit") {
			t.Errorf("%s: resumed from another fit's checkpoint: %v", name, err)
		}
		ck.Fit = ""
		if _, err := Fit(context.Background(), p, nil, &Settings{Steps: 3, Optimizer: o2, Resume: ck}); err != nil {
			t.Errorf("%s: a cleared Fit was refused: %v", name, err)
		}
	}
}

// TestNewLinear checks that New's cost grows linearly with the number of
// fits (it was quadratic): 8 times the fits may take at most 32 times as
// long (best of three; quadratic would be 64).
func TestNewLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	best := func(n int) time.Duration {
		prob, data, _ := ensemble(n, n, nil)
		p := Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0}, Y0: []int{1}}, Fits: n}
		sv, err := ode.NewSolver(prob.Field, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := time.Duration(math.MaxInt64)
		for range 3 {
			start := time.Now()
			if _, err := NewWithSolver(sv, p); err != nil {
				t.Fatal(err)
			}
			d = min(d, time.Since(start))
		}
		return d
	}
	small, large := best(4096), best(32768)
	if large > 32*small+50*time.Millisecond {
		t.Errorf("New: %v for 4096 fits, %v for 32768: not linear", small, large)
	}
}

// A fit stopped by its callback at any step, its checkpoint and optimiser
// state taken through JSON, resumes to the uninterrupted fit bit for bit:
// also at step 0, before any step was applied, where the checkpoint's
// best loss is +Inf (which encoding/json refuses as a number), and after
// a cancellation before the first step.
func TestResumeFromEveryStop(t *testing.T) {
	t.Parallel()
	prob, data, _ := ensemble(6, 3, nil)
	p := Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0, 1}}, Fits: 3}
	const steps = 7
	mk := func() optim.Optimizer {
		return &optim.SGD{Momentum: 0.7, Nesterov: true, Schedule: optim.Exponential{Init: 0.02, Decay: 0.8}}
	}
	base := Settings{Steps: steps, Remesh: 2, ClipNorm: 0.5, Patience: 4, Tol: 1e-3}
	whole := base
	whole.Optimizer = mk()
	want, err := Fit(context.Background(), p, nil, &whole)
	if err != nil {
		t.Fatal(err)
	}
	resume := func(t *testing.T, first *Result, o optim.Optimizer) {
		t.Helper()
		var cbuf, obuf bytes.Buffer
		if err := json.NewEncoder(&cbuf).Encode(first.Checkpoint()); err != nil {
			t.Fatalf("encoding the checkpoint: %v", err)
		}
		if err := optim.SaveState(&obuf, o); err != nil {
			t.Fatal(err)
		}
		var ck Checkpoint
		if err := json.NewDecoder(&cbuf).Decode(&ck); err != nil {
			t.Fatalf("decoding the checkpoint: %v", err)
		}
		o2 := mk()
		if err := optim.LoadState(&obuf, o2); err != nil {
			t.Fatal(err)
		}
		rest := base
		rest.Optimizer, rest.Resume = o2, &ck
		got, err := Fit(context.Background(), p, nil, &rest)
		if err != nil {
			t.Fatal(err)
		}
		history := append(append([]float64(nil), first.History[:first.Steps-first.Start]...), got.History...)
		if i := sameBits(want.History, history); i >= 0 {
			t.Errorf("history differs from step %d: %v, uninterrupted %v", i, history, want.History)
		}
		if i := sameBits(want.X, got.X); i >= 0 {
			t.Errorf("x[%d] = %v, uninterrupted %v", i, got.X[i], want.X[i])
		}
		if got.Status != want.Status || got.Steps != want.Steps || got.BestStep != want.BestStep ||
			math.Float64bits(got.BestLoss) != math.Float64bits(want.BestLoss) {
			t.Errorf("status %v, steps %d, best %v at %d; uninterrupted %v, %d, %v at %d",
				got.Status, got.Steps, got.BestLoss, got.BestStep, want.Status, want.Steps, want.BestLoss, want.BestStep)
		}
	}
	for stop := range steps {
		t.Run(fmt.Sprintf("stop-at-%d", stop), func(t *testing.T) {
			t.Parallel()
			set := base
			o := mk()
			set.Optimizer, set.SkipFinal = o, true
			set.Callback = func(s *Step) error {
				if s.Step == stop {
					return ErrStop
				}
				return nil
			}
			first, err := Fit(context.Background(), p, nil, &set)
			if err != nil || first.Status != Stopped {
				t.Fatalf("first part: %v, status %v", err, first.Status)
			}
			resume(t, first, o)
		})
	}
	t.Run("cancelled-before-step-0", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		set := base
		o := mk()
		set.Optimizer = o
		first, err := Fit(ctx, p, nil, &set)
		if !errors.Is(err, context.Canceled) || first.Status != Cancelled {
			t.Fatalf("first part: %v, status %v", err, first.Status)
		}
		resume(t, first, o)
	})
}

// A damaged checkpoint is refused with an error naming the field, before
// any step: a best loss of NaN or −Inf (which no loss improves on, so the
// fit would stop for no progress and never keep its best values), or a
// best step outside [−1, Step].
func TestResumeRefusesDamagedBest(t *testing.T) {
	t.Parallel()
	prob, data, _ := ensemble(4, 2, nil)
	p := Problem{ODE: prob, Loss: observed(data), Vars: Vars{P: []int{0}}, Fits: 2}
	o := &optim.Adam{LearnRate: 0.05}
	res, err := Fit(context.Background(), p, nil, &Settings{Steps: 3, Optimizer: o, SkipFinal: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		damage string // replaces the best loss's entry in the JSON
		want   string
	}{
		{"NaN loss", `"best_loss":"NaN"`, "best loss"},
		{"-Inf loss", `"best_loss":"-Inf"`, "best loss"},
		{"best step after the checkpoint", `"best_step":9`, "best step"},
		{"best step below -1", `"best_step":-2`, "best step"},
		// Returned as Result.BestX where no later loss is lower.
		{"best values infinite", `"best_x":["+Inf",1]`, "best values BestX[0] (fit0.p) is +Inf"},
		{"best values NaN", `"best_x":[1,"NaN"]`, "best values BestX[1] (fit1.p) is NaN"},
	} {
		b, err := json.Marshal(res.Checkpoint())
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		key := tc.damage[:strings.Index(tc.damage, ":")+1]
		i := strings.Index(s, key)
		j := i + strings.IndexAny(s[i:], ",}")
		if strings.HasSuffix(key, "[") || s[i+len(key)] == '[' {
			j = i + strings.Index(s[i:], "]") + 1
		}
		s = s[:i] + tc.damage + s[j:]
		var ck Checkpoint
		if err := json.Unmarshal([]byte(s), &ck); err != nil {
			t.Fatalf("Case %s: %v", tc.name, err)
		}
		o2 := &optim.Adam{LearnRate: 0.05}
		if err := o2.SetState(o.State()); err != nil {
			t.Fatal(err)
		}
		_, err = Fit(context.Background(), p, nil, &Settings{Steps: 6, Optimizer: o2, Resume: &ck})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Case %s: error %v, want one naming the %s", tc.name, err, tc.want)
		}
	}
}

// finishCount is a progress.Reporter that counts its Finish calls.
type finishCount struct{ n int }

func (*finishCount) Report(int, float64) {}
func (f *finishCount) Finish()           { f.n++ }
