package optim

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// A rule applied outside the optimiser (as an engine applies it where the
// parameters live) takes the optimiser's own steps bit for bit, and
// SetState then continues the optimiser from where the rule left it.
func TestRuleMatchesStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mk   func() Ruled
	}{
		{"adam", func() Ruled { return &Adam{LearnRate: 0.05} }},
		{"adam-schedule", func() Ruled {
			return &Adam{Schedule: WarmupCosine{Peak: 0.1, Warmup: 2, Steps: 9}, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6}
		}},
		{"adamw", func() Ruled { return &AdamW{LearnRate: 0.02, WeightDecay: 0.1} }},
		{"sgd", func() Ruled { return &SGD{LearnRate: 0.03} }},
		{"sgd-momentum", func() Ruled { return &SGD{LearnRate: 0.03, Momentum: 0.9} }},
		{"sgd-nesterov", func() Ruled { return &SGD{Schedule: Exponential{Init: 0.1, Decay: 0.9}, Momentum: 0.5, Nesterov: true} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(1, 7))
			const n, steps = 17, 8
			own, ext := tc.mk(), tc.mk()
			x := make([]float64, n)
			for i := range x {
				x[i] = 4*rng.Float64() - 2
			}
			y := append([]float64(nil), x...)
			var moments [][]float64
			for k := range steps {
				g := make([]float64, n)
				for i := range g {
					g[i] = 3 * rng.NormFloat64()
				}
				own.Step(x, g)
				r, err := ext.RuleAt(k)
				if err != nil {
					t.Fatalf("step %d: RuleAt: %v", k, err)
				}
				if moments == nil {
					for range r.Moments() {
						moments = append(moments, make([]float64, n))
					}
				}
				r.Apply(y, g, moments)
				for i := range x {
					if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
						t.Fatalf("step %d: x[%d]: Step gives %v, the rule %v", k, i, x[i], y[i])
					}
				}
			}
			// The optimiser given the rule's state continues as its twin.
			st := own.State()
			ms := map[string]Floats{}
			r, _ := ext.RuleAt(steps)
			for q, name := range r.Moments() {
				ms[name] = moments[q]
				if got := st.Moments[name]; len(got) != n {
					t.Fatalf("the state has no moment %q of length %d: %v", name, n, st.Moments)
				}
			}
			if err := ext.SetState(&State{Kind: st.Kind, Step: steps, N: len(st.Moments["m"]) + len(st.Moments["b"]), Moments: ms}); err != nil {
				t.Fatalf("SetState: %v", err)
			}
			g := make([]float64, n)
			for i := range g {
				g[i] = rng.NormFloat64()
			}
			own.Step(x, g)
			ext.Step(y, g)
			for i := range x {
				if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
					t.Fatalf("after SetState: x[%d]: %v, want %v", i, y[i], x[i])
				}
			}
		})
	}
}

// RuleAt refuses what Validate refuses, naming the step.
func TestRuleAtInvalid(t *testing.T) {
	t.Parallel()
	for _, o := range []Ruled{&Adam{LearnRate: math.NaN()}, &AdamW{Beta1: 1}, &SGD{Momentum: -0.5}} {
		_, err := o.RuleAt(4)
		var he *HyperparameterError
		if !errors.As(err, &he) || he.Step != 4 {
			t.Errorf("%T: RuleAt(4) = %v, want a *HyperparameterError at step 4", o, err)
		}
		if o.Validate() == nil {
			t.Errorf("%T: Validate accepts what RuleAt refuses", o)
		}
	}
}
