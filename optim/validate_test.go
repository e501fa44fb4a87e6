package optim

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestBadHyperparameters checks that a step with an invalid
// hyperparameter or learning rate leaves the parameters and the state
// unchanged, does not panic, and that Err and Validate name the field.
func TestBadHyperparameters(t *testing.T) {
	t.Parallel()
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name  string
		opt   Optimizer
		field string // named in the error
	}{
		{"adam negative rate", &Adam{LearnRate: -0.1}, "LearnRate"},
		{"adam NaN rate", &Adam{LearnRate: nan}, "LearnRate"},
		{"adam Inf rate", &Adam{LearnRate: inf}, "LearnRate"},
		{"adam schedule negative", &Adam{Schedule: Constant(-1)}, "Schedule"},
		{"adam schedule NaN", &Adam{Schedule: Exponential{Init: nan, Decay: 0.5}}, "Schedule"},
		{"adam beta1 1", &Adam{Beta1: 1}, "Beta1"},
		{"adam beta1 negative", &Adam{Beta1: -0.5}, "Beta1"},
		{"adam beta2 NaN", &Adam{Beta2: nan}, "Beta2"},
		{"adam beta2 above 1", &Adam{Beta2: 1.5}, "Beta2"},
		{"adam eps negative", &Adam{Eps: -1e-8}, "Eps"},
		{"adam eps NaN", &Adam{Eps: nan}, "Eps"},
		{"adamw decay negative", &AdamW{WeightDecay: -0.1}, "WeightDecay"},
		{"adamw decay NaN", &AdamW{WeightDecay: nan}, "WeightDecay"},
		{"adamw rate Inf", &AdamW{LearnRate: -inf}, "LearnRate"},
		{"sgd negative rate", &SGD{LearnRate: -0.1}, "LearnRate"},
		{"sgd NaN rate", &SGD{LearnRate: nan}, "LearnRate"},
		{"sgd momentum 1", &SGD{Momentum: 1}, "Momentum"},
		{"sgd momentum NaN", &SGD{Momentum: nan}, "Momentum"},
		{"sgd schedule Inf", &SGD{Schedule: Constant(inf)}, "Schedule"},
	} {
		x := []float64{1, -2}
		var stepped bool
		if panics(func() { tc.opt.Step(x, []float64{0.5, -1}); stepped = true }) {
			t.Errorf("Case %s: Step panicked", tc.name)
			continue
		}
		if !stepped || x[0] != 1 || x[1] != -2 {
			t.Errorf("Case %s: Step moved the parameters to %v", tc.name, x)
		}
		if tc.opt.Steps() != 0 {
			t.Errorf("Case %s: the refused step was counted", tc.name)
		}
		var herr *HyperparameterError
		for _, err := range []error{tc.opt.Err(), tc.opt.Validate()} {
			if !errors.As(err, &herr) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("Case %s: error %v, want a *HyperparameterError naming %s", tc.name, err, tc.field)
			}
		}
	}
	// Valid settings: a zero-rate schedule is allowed (warm-up from 0).
	for _, o := range []Optimizer{&Adam{}, &AdamW{}, &SGD{Momentum: 0.5}, &Adam{Schedule: WarmupCosine{Peak: 1, Warmup: 2, Steps: 4}}} {
		if err := o.Validate(); err != nil {
			t.Errorf("%T: Validate: %v", o, err)
		}
		x := []float64{1}
		o.Step(x, []float64{1})
		if o.Err() != nil || o.Steps() != 1 {
			t.Errorf("%T: Err %v after a valid step, steps %d", o, o.Err(), o.Steps())
		}
	}
	// WarmupCosine with Steps < Warmup: no panic, an error.
	o := &Adam{Schedule: WarmupCosine{Warmup: 5, Steps: 2}}
	if panics(func() { o.Step([]float64{1}, []float64{1}) }) || o.Validate() == nil {
		t.Errorf("a bad WarmupCosine panicked or validated")
	}
}

// TestLoadStateRefused checks that LoadState refuses damaged or
// mismatched state files with an error naming the problem.
func TestLoadStateRefused(t *testing.T) {
	t.Parallel()
	var good bytes.Buffer
	a := &Adam{}
	a.Step([]float64{1, 2}, []float64{0.5, -1})
	if err := SaveState(&good, a); err != nil {
		t.Fatal(err)
	}
	text := good.String()
	for _, tc := range []struct {
		name, text string
		opt        Optimizer
		want       string // in the error
	}{
		{"two saves", text + text, &Adam{}, "after the first"},
		{"empty", "", &Adam{}, "the input is empty"},
		{"truncated", text[:len(text)/2], &Adam{}, "truncated"},
		{"not JSON", "adam 1 2", &Adam{}, "not a state file"},
		{"trailing junk", text + "x", &Adam{}, "after the first"},
		{"negative v", strings.Replace(text, `"v": [`, `"v": [-1,`, 1), &Adam{}, "v"},
		{"NaN v", strings.Replace(text, `"v": [`, `"v": ["NaN",`, 1), &Adam{}, "v"},
		{"Inf m", strings.Replace(text, `"m": [`, `"m": ["+Inf",`, 1), &Adam{}, "m"},
		{"negative step", strings.Replace(text, `"step": 1`, `"step": -4`, 1), &Adam{}, "step"},
		{"step without moments", `{"format": "gradsolve/optim", "version": 1, "kind": "adam", "step": 3, "n": 0, "moments": {}}`, &Adam{}, "moments"},
		{"other kind", text, &SGD{}, "adam"},
		{"unknown field", strings.Replace(text, `"kind"`, `"kinds": 1, "kind"`, 1), &Adam{}, "kinds"},
		{"NaN b", `{"format": "gradsolve/optim", "version": 1, "kind": "sgd", "step": 1, "n": 1, "moments": {"b": ["NaN"]}}`, &SGD{}, "b"},
	} {
		// The negative-v and NaN-v cases add one entry: fix n so that only
		// the value is wrong.
		s := tc.text
		if strings.Contains(tc.name, " v") || strings.Contains(tc.name, " m") {
			s = strings.Replace(strings.Replace(s, `"n": 2`, `"n": 3`, 1), `"m": [`, `"m": [0,`, 1)
			s = strings.Replace(s, `"v": [`, `"v": [0,`, 1)
			if strings.Contains(tc.name, " m") {
				s = strings.Replace(s, `"m": [0,`, `"m": [`, 1)
			} else {
				s = strings.Replace(s, `"v": [0,`, `"v": [`, 1)
			}
		}
		before := tc.opt.State()
		err := LoadState(strings.NewReader(s), tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Case %s: error %v, want one naming %q", tc.name, err, tc.want)
		}
		if after := tc.opt.State(); after.Step != before.Step || after.N != before.N {
			t.Errorf("Case %s: a refused state changed the optimiser", tc.name)
		}
	}
	// The good one loads, and CheckLen tells its length.
	b := &Adam{}
	if err := LoadState(strings.NewReader(text), b); err != nil {
		t.Fatal(err)
	}
	if err := CheckLen(b, 2); err != nil {
		t.Errorf("CheckLen(2): %v", err)
	}
	if err := CheckLen(b, 3); err == nil || !strings.Contains(err.Error(), "2 parameters") {
		t.Errorf("CheckLen(3) of a state for 2: %v", err)
	}
}

// TestScheduleErrors checks the error of a schedule whose constants its
// Validate refuses: it is the schedule's own (errors.Unwrap), and the
// message does not blame the rate of the step (it read "Schedule gives
// learning rate 0.1 for step 0; want a finite rate ≥ 0", a rate that is
// one). A WarmupCosine without Steps (its rate Final from step 0, Peak
// never reached: a fit that does not move) is refused; one whose rates
// are all equal is a constant and allowed.
func TestScheduleErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		sched Schedule
		want  string // "" for a valid schedule
	}{
		{"Exponential Decay -1", Exponential{Init: 0.1, Decay: -1}, "optim: adam: Schedule: optim: Exponential: Init = 0.1 (want finite, ≥ 0), Decay = -1"},
		{"Exponential Every -2", Exponential{Init: 0.1, Decay: 0.5, Every: -2}, "Every = -2 (want ≥ 0)"},
		{"WarmupCosine Warmup > Steps", WarmupCosine{Peak: 0.1, Warmup: 10, Steps: 5}, "optim: adam: Schedule: optim: WarmupCosine: Warmup = 10, Steps = 5"},
		{"WarmupCosine without Steps", WarmupCosine{Peak: 0.1}, "Steps = 0, so the rate is Final = 0 from the first step on and Peak = 0.1 is never reached"},
		{"WarmupCosine without Steps, Init", WarmupCosine{Init: 0.1, Peak: 0.1, Final: 0.01}, "Peak = 0.1 is never reached"},
		{"WarmupCosine constant", WarmupCosine{Init: 0.1, Peak: 0.1, Final: 0.1}, ""},
		{"WarmupCosine from 0", WarmupCosine{Peak: 0.1, Warmup: 2, Steps: 4}, ""},
		{"Exponential growing", Exponential{Init: 0.1, Decay: 2}, ""},
	} {
		o := &Adam{Schedule: tc.sched}
		err := o.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: Validate: %v", tc.name, err)
			}
			continue
		}
		var herr *HyperparameterError
		v, _ := tc.sched.(interface{ Validate() error })
		if !errors.As(err, &herr) || herr.Field != "Schedule" || !strings.Contains(err.Error(), tc.want) ||
			strings.Contains(err.Error(), "gives learning rate") || v == nil || errors.Unwrap(err).Error() != v.Validate().Error() {
			t.Errorf("%s: error %v; want a *HyperparameterError containing %q that unwraps to the schedule's", tc.name, err, tc.want)
		}
	}
}
