package optim

import "math"

// RuleKind names the element-wise formula of a Rule.
type RuleKind uint8

const (
	// RuleAdam is the update of Adam and AdamW (adamStep's formula), with
	// moments m and v; Adam is AdamW with Decay 0.
	RuleAdam RuleKind = iota + 1
	// RuleSGD is SGD's update: plain descent without momentum (no
	// moment), heavy ball or Nesterov with moment b.
	RuleSGD
)

// Rule is one step of an optimiser as data: its element-wise formula, the
// resolved hyperparameters and the scalars of that step. An engine that
// keeps the parameters in its own memory (package fit on a GPU engine)
// applies it there, element by element, with exactly the arithmetic of
// Apply (every operation rounded, in Apply's order, no fused
// multiply-add on any host: Apply rounds each product explicitly, where
// Go would fuse it on arm64), so its parameters and moments are those of the
// optimiser's own Step on the same gradient, bit for bit.
type Rule struct {
	Kind RuleKind
	// Rate is the learning rate of the step.
	Rate float64
	// Beta1, Beta2, Eps and Decay are the Adam family's β1, β2, ε and
	// decoupled weight decay λ (0 for Adam); C1 and C2 the bias
	// corrections 1 − β1ᵗ and 1 − β2ᵗ of the step (t = 1 for the first).
	Beta1, Beta2, Eps, Decay float64
	C1, C2                   float64
	// Momentum is SGD's μ (0: none), Nesterov its variant.
	Momentum float64
	Nesterov bool
}

// Moments returns the names of the state vectors the rule reads and
// writes, in the order Apply takes them: "m", "v" for Adam and AdamW, "b"
// for SGD with momentum, none for plain SGD. They are the moments of the
// optimiser's State.
func (r *Rule) Moments() []string {
	switch {
	case r.Kind == RuleAdam:
		return []string{"m", "v"}
	case r.Kind == RuleSGD && r.Momentum != 0:
		return []string{"b"}
	}
	return nil
}

// Apply updates params in place from grad with the rule, and the moments
// (as Moments names them, each of len(params)). It is the formula the
// optimisers' Step runs; it neither validates nor counts the step. It
// panics if a length differs from len(params).
func (r *Rule) Apply(params, grad []float64, moments [][]float64) {
	if len(grad) != len(params) || len(moments) != len(r.Moments()) {
		panic(badLength)
	}
	for _, m := range moments {
		if len(m) != len(params) {
			panic(badLength)
		}
	}
	switch r.Kind {
	case RuleAdam:
		lr, b1, b2, eps, wd, c1, c2 := r.Rate, r.Beta1, r.Beta2, r.Eps, r.Decay, r.C1, r.C2
		ms, vs := moments[0], moments[1]
		// The conversions round each product before its sum, as Go would
		// not on arm64 (it fuses x*y + z there); they change nothing
		// where Go does not fuse (amd64). See TestNoFusedMultiplyAdd.
		for i, g := range grad {
			m := float64(b1*ms[i]) + float64((1-b1)*g)
			v := float64(b2*vs[i]) + float64((1-b2)*g*g)
			ms[i], vs[i] = m, v
			p := params[i]
			params[i] = p - float64(lr*wd*p) - lr*(m/c1)/(math.Sqrt(v/c2)+eps)
		}
	case RuleSGD:
		lr, mu := r.Rate, r.Momentum
		if mu == 0 {
			for i, g := range grad {
				params[i] -= float64(lr * g)
			}
			return
		}
		bs := moments[0]
		for i, g := range grad {
			b := float64(mu*bs[i]) + g
			bs[i] = b
			if r.Nesterov {
				params[i] -= float64(lr * (g + float64(mu*b)))
			} else {
				params[i] -= float64(lr * b)
			}
		}
	default:
		panic("optim: Rule.Apply: unknown rule kind")
	}
}

// Ruled is implemented by the optimisers whose step is a Rule: Adam, AdamW
// and SGD. An engine that holds the parameters applies the rule itself;
// the caller then hands the optimiser the state it reached (SetState), so
// that Steps, State, SaveState and later Steps continue from it.
type Ruled interface {
	Optimizer
	// RuleAt returns the rule of the step taken after k steps (k = Steps()
	// for the next one), or the *HyperparameterError Validate would return
	// for it. It does not change the optimiser.
	RuleAt(k int) (Rule, error)
}

var (
	_ Ruled = (*Adam)(nil)
	_ Ruled = (*AdamW)(nil)
	_ Ruled = (*SGD)(nil)
)

// adamRule returns the rule of the Adam family's step after k steps.
func adamRule(kind string, a *Adam, wd float64, k int) (Rule, error) {
	lr := rate(a.Schedule, a.LearnRate, DefaultAdamRate, k)
	b1, b2, eps := or(a.Beta1, DefaultBeta1), or(a.Beta2, DefaultBeta2), or(a.Eps, DefaultEps)
	if err := checkAdam(kind, a.Schedule, a.LearnRate, lr, a.Beta1, a.Beta2, a.Eps, wd, k); err != nil {
		return Rule{}, err
	}
	t := float64(k + 1)
	return Rule{Kind: RuleAdam, Rate: lr, Beta1: b1, Beta2: b2, Eps: eps, Decay: wd,
		C1: 1 - math.Pow(b1, t), C2: 1 - math.Pow(b2, t)}, nil
}

// RuleAt returns the rule of Adam's step after k steps.
func (a *Adam) RuleAt(k int) (Rule, error) { return adamRule("adam", a, 0, k) }

// RuleAt returns the rule of AdamW's step after k steps.
func (a *AdamW) RuleAt(k int) (Rule, error) { return adamRule("adamw", a.adam(), a.decay(), k) }

// RuleAt returns the rule of SGD's step after k steps.
func (o *SGD) RuleAt(k int) (Rule, error) {
	lr := rate(o.Schedule, o.LearnRate, DefaultSGDRate, k)
	if err := checkRate("sgd", o.Schedule, o.LearnRate, lr, k); err != nil {
		return Rule{}, err
	}
	if !unit(o.Momentum) {
		return Rule{}, &HyperparameterError{Optimizer: "sgd", Field: "Momentum", Value: o.Momentum, Step: k, Want: wantMom}
	}
	return Rule{Kind: RuleSGD, Rate: lr, Momentum: o.Momentum, Nesterov: o.Nesterov}, nil
}
