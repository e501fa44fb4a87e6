package optim

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
)

// Panic messages for programming errors.
const (
	badLength  = "optim: len(grad) != len(params)"
	badResize  = "optim: the parameter vector changed length between steps"
	badMaxNorm = "optim: ClipNorm: maxNorm must be positive"
)

// HyperparameterError reports an invalid hyperparameter or learning rate:
// which optimiser, which field, its value and what is allowed. Step
// refuses such a step (see Optimizer.Err) and Validate returns it.
type HyperparameterError struct {
	Optimizer string  // "adam", "adamw" or "sgd"
	Field     string  // "LearnRate", "Schedule", "Beta1", "Beta2", "Eps", "WeightDecay" or "Momentum"
	Value     float64 // the value found (for Schedule, its rate at Step)
	Step      int     // the number of steps taken when it was found
	Want      string  // what is allowed, in words

	// Cause, for Field "Schedule", is the error of the schedule's own
	// Validate, where it has one and refused its constants (nil where the
	// rate alone is out of range).
	Cause error
}

func (e *HyperparameterError) Error() string {
	if e.Field == "Schedule" && e.Cause != nil {
		return fmt.Sprintf("optim: %s: Schedule: %v", e.Optimizer, e.Cause)
	}
	if e.Field == "Schedule" {
		return fmt.Sprintf("optim: %s: Schedule gives learning rate %v for step %d; want %s", e.Optimizer, e.Value, e.Step, e.Want)
	}
	return fmt.Sprintf("optim: %s: %s = %v; want %s", e.Optimizer, e.Field, e.Value, e.Want)
}

// Unwrap returns Cause.
func (e *HyperparameterError) Unwrap() error { return e.Cause }

// What the fields allow, in the words of HyperparameterError.Want.
const (
	wantRate  = "a finite value ≥ 0 (0 means the default)"
	wantSched = "a finite rate ≥ 0 (check the schedule's constants)"
	wantBeta  = "a value in [0, 1) (0 means the default)"
	wantEps   = "a finite value > 0 (0 means 1e-8)"
	wantDecay = "a finite value ≥ 0 (0 means 1e-2)"
	wantMom   = "a value in [0, 1)"
)

// finiteNonNeg reports whether x is finite and ≥ 0.
func finiteNonNeg(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }

// unit reports whether x lies in [0, 1).
func unit(x float64) bool { return x >= 0 && x < 1 }

// checkRate validates a constant rate lr (0: the default) or, if sched is
// set, its rate r for step k.
func checkRate(kind string, sched Schedule, lr, r float64, k int) error {
	if sched != nil {
		if v, ok := sched.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return &HyperparameterError{Optimizer: kind, Field: "Schedule", Value: r, Step: k, Want: wantSched, Cause: err}
			}
		}
		if !finiteNonNeg(r) {
			return &HyperparameterError{Optimizer: kind, Field: "Schedule", Value: r, Step: k, Want: wantSched}
		}
		return nil
	}
	if !finiteNonNeg(lr) {
		return &HyperparameterError{Optimizer: kind, Field: "LearnRate", Value: lr, Step: k, Want: wantRate}
	}
	return nil
}

// checkAdam validates the Adam family's hyperparameters.
func checkAdam(kind string, sched Schedule, lr, r, b1, b2, eps, wd float64, k int) error {
	if err := checkRate(kind, sched, lr, r, k); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    float64
		ok   bool
		want string
	}{
		{"Beta1", b1, unit(b1), wantBeta},
		{"Beta2", b2, unit(b2), wantBeta},
		{"Eps", eps, finiteNonNeg(eps), wantEps},
		{"WeightDecay", wd, finiteNonNeg(wd), wantDecay},
	} {
		if !f.ok {
			return &HyperparameterError{Optimizer: kind, Field: f.name, Value: f.v, Step: k, Want: f.want}
		}
	}
	return nil
}

// Optimizer updates a parameter vector in place from its gradient. All the
// optimisers of this package implement it.
type Optimizer interface {
	// Step takes one step: it updates params (len n) in place from grad
	// (len n), and counts the step. It panics if the lengths differ or n
	// changes between steps.
	Step(params, grad []float64)

	// Steps returns the number of steps taken.
	Steps() int

	// Rate returns the learning rate of the next step.
	Rate() float64

	// Reset forgets the state (moments and step count), keeping the
	// hyperparameters.
	Reset()

	// State returns a copy of the optimiser's state; SetState replaces it
	// (also copying). SetState returns an error if s was saved by another
	// kind of optimiser or is inconsistent.
	State() *State
	SetState(s *State) error

	// Validate returns a *HyperparameterError if a hyperparameter, or the
	// learning rate of the next step (the schedule's output), is invalid:
	// Step would refuse it. Callers check it before each step (fit.Run
	// does) to report the problem as an error.
	Validate() error

	// Err returns the error of the last Step: nil after a step taken, the
	// *HyperparameterError of a step refused (Step then left params and
	// the state unchanged).
	Err() error
}

var (
	_ Optimizer = (*Adam)(nil)
	_ Optimizer = (*AdamW)(nil)
	_ Optimizer = (*SGD)(nil)
)

// Defaults of the zero values.
const (
	DefaultAdamRate    = 1e-3  // Adam and AdamW learning rate
	DefaultBeta1       = 0.9   // first-moment decay
	DefaultBeta2       = 0.999 // second-moment decay
	DefaultEps         = 1e-8  // denominator offset
	DefaultWeightDecay = 1e-2  // AdamW decoupled weight decay (as PyTorch's AdamW)
	DefaultSGDRate     = 1e-2  // SGD learning rate
)

// rate returns the learning rate of step k: the schedule's if any, else
// the constant lr, else def.
func rate(sched Schedule, lr, def float64, k int) float64 {
	if sched != nil {
		return sched.Rate(k)
	}
	if lr == 0 {
		return def
	}
	return lr
}

func or(x, def float64) float64 {
	if x == 0 {
		return def
	}
	return x
}

// moments are the state of the Adam family.
type moments struct {
	t    int
	m, v []float64
	err  error // of the last Step
}

func (s *moments) ensure(params, grad []float64) {
	if len(grad) != len(params) {
		panic(badLength)
	}
	if s.m == nil {
		s.m = make([]float64, len(params))
		s.v = make([]float64, len(params))
	}
	if len(s.m) != len(params) {
		panic(badResize)
	}
}

// adamStep is the update shared by Adam and AdamW (Kingma & Ba 2015,
// Algorithm 1; Loshchilov & Hutter 2019, Algorithm 2 with the schedule
// multiplier folded into lr, as PyTorch's AdamW):
//
//	t ← t+1
//	m ← β1·m + (1−β1)·g
//	v ← β2·v + (1−β2)·g²
//	θ ← θ − lr·λ·θ − lr·(m/(1−β1ᵗ)) / (√(v/(1−β2ᵗ)) + ε)
//
// with λ = wd (0 for Adam); the decay uses θ before the step.
//
// A step whose hyperparameters are invalid (see checkAdam) is not taken:
// it leaves params and the state as they are and records the error.
func adamStep(s *moments, kind string, a *Adam, wd float64, params, grad []float64) {
	if len(grad) != len(params) {
		panic(badLength)
	}
	if s.m != nil && len(s.m) != len(params) {
		panic(badResize)
	}
	r, err := adamRule(kind, a, wd, s.t)
	if s.err = err; err != nil {
		return
	}
	s.ensure(params, grad)
	s.t++
	r.Apply(params, grad, [][]float64{s.m, s.v})
}

// Adam is the Adam optimiser with bias correction (Kingma & Ba, "Adam: A
// Method for Stochastic Optimization", ICLR 2015, Algorithm 1):
//
//	m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²
//	θ ← θ − lr·m̂/(√v̂ + ε),  m̂ = m/(1−β1ᵗ), v̂ = v/(1−β2ᵗ)
//
// at step t = 1, 2, …. The zero value is ready to use. Each Step costs
// O(n) and allocates only on the first call (2n floats of state).
type Adam struct {
	// LearnRate is the constant learning rate; 0 means 1e-3. Ignored if
	// Schedule is set.
	LearnRate float64
	// Schedule, if not nil, gives the learning rate of each step.
	Schedule Schedule
	// Beta1 and Beta2 are the moment decays, in [0, 1); 0 means 0.9 and
	// 0.999 (so a decay of exactly 0 cannot be asked for).
	Beta1, Beta2 float64
	// Eps is added to √v̂; 0 means 1e-8.
	Eps float64

	s moments
}

// Step takes one Adam step; see Optimizer. An invalid hyperparameter or
// learning rate makes it leave params unchanged (see Err).
func (a *Adam) Step(params, grad []float64) { adamStep(&a.s, "adam", a, 0, params, grad) }

// Validate returns a *HyperparameterError for an invalid hyperparameter or
// learning rate of the next step, else nil.
func (a *Adam) Validate() error {
	_, err := a.RuleAt(a.s.t)
	return err
}

// Err returns the error of the last Step (nil if it was taken).
func (a *Adam) Err() error { return a.s.err }

// Steps returns the number of steps taken.
func (a *Adam) Steps() int { return a.s.t }

// Rate returns the learning rate of the next step.
func (a *Adam) Rate() float64 { return rate(a.Schedule, a.LearnRate, DefaultAdamRate, a.s.t) }

// Reset forgets the moments and the step count.
func (a *Adam) Reset() { a.s = moments{} }

// State returns a copy of the state: kind "adam", moments "m" and "v".
func (a *Adam) State() *State { return a.s.state("adam") }

// SetState replaces the state with a copy of s.
func (a *Adam) SetState(s *State) error { return a.s.set("adam", s) }

// AdamW is Adam with decoupled weight decay (Loshchilov & Hutter,
// "Decoupled Weight Decay Regularization", ICLR 2019): each step first
// shrinks the parameters by lr·λ·θ, then takes the Adam step, so the
// decay is not scaled by the adaptive denominator as an L2 term in the
// loss would be. The learning rate multiplies the decay, as in PyTorch's
// AdamW and optax.adamw. The zero value is ready to use.
type AdamW struct {
	// LearnRate, Schedule, Beta1, Beta2 and Eps are as in Adam.
	LearnRate    float64
	Schedule     Schedule
	Beta1, Beta2 float64
	Eps          float64
	// WeightDecay is λ ≥ 0; 0 means 1e-2 (PyTorch's default). For no decay
	// use Adam.
	WeightDecay float64

	s moments
}

// Step takes one AdamW step; see Optimizer. An invalid hyperparameter or
// learning rate makes it leave params unchanged (see Err).
func (a *AdamW) Step(params, grad []float64) {
	adamStep(&a.s, "adamw", a.adam(), a.decay(), params, grad)
}

func (a *AdamW) adam() *Adam {
	return &Adam{LearnRate: a.LearnRate, Schedule: a.Schedule, Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps}
}

// decay returns the weight decay, NaN and negative values as they are.
func (a *AdamW) decay() float64 { return or(a.WeightDecay, DefaultWeightDecay) }

// Validate returns a *HyperparameterError for an invalid hyperparameter or
// learning rate of the next step, else nil.
func (a *AdamW) Validate() error {
	_, err := a.RuleAt(a.s.t)
	return err
}

// Err returns the error of the last Step (nil if it was taken).
func (a *AdamW) Err() error { return a.s.err }

// Steps returns the number of steps taken.
func (a *AdamW) Steps() int { return a.s.t }

// Rate returns the learning rate of the next step.
func (a *AdamW) Rate() float64 { return rate(a.Schedule, a.LearnRate, DefaultAdamRate, a.s.t) }

// Reset forgets the moments and the step count.
func (a *AdamW) Reset() { a.s = moments{} }

// State returns a copy of the state: kind "adamw", moments "m" and "v".
func (a *AdamW) State() *State { return a.s.state("adamw") }

// SetState replaces the state with a copy of s.
func (a *AdamW) SetState(s *State) error { return a.s.set("adamw", s) }

// SGD is stochastic gradient descent with optional momentum μ, in
// PyTorch's form (Sutskever et al., ICML 2013):
//
//	b ← μ·b + g
//	θ ← θ − lr·b             (heavy ball)
//	θ ← θ − lr·(g + μ·b)     (Nesterov)
//
// With μ = 0 it is plain gradient descent θ ← θ − lr·g and keeps no
// moment. The zero value is ready to use.
type SGD struct {
	// LearnRate is the constant learning rate; 0 means 1e-2. Ignored if
	// Schedule is set.
	LearnRate float64
	// Schedule, if not nil, gives the learning rate of each step.
	Schedule Schedule
	// Momentum is μ in [0, 1); 0 means none.
	Momentum float64
	// Nesterov selects Nesterov momentum.
	Nesterov bool

	t   int
	b   []float64
	err error // of the last Step
}

// Validate returns a *HyperparameterError for an invalid hyperparameter or
// learning rate of the next step, else nil.
func (o *SGD) Validate() error {
	_, err := o.RuleAt(o.t)
	return err
}

// Err returns the error of the last Step (nil if it was taken).
func (o *SGD) Err() error { return o.err }

// Step takes one SGD step; see Optimizer.
//
// An invalid hyperparameter or learning rate makes it leave params
// unchanged (see Err).
func (o *SGD) Step(params, grad []float64) {
	if len(grad) != len(params) {
		panic(badLength)
	}
	if o.b != nil && len(o.b) != len(params) {
		panic(badResize)
	}
	r, err := o.RuleAt(o.t)
	if o.err = err; err != nil {
		return
	}
	o.t++
	var moments [][]float64
	if r.Momentum != 0 {
		if o.b == nil {
			o.b = make([]float64, len(params))
		}
		moments = [][]float64{o.b}
	}
	r.Apply(params, grad, moments)
}

// Steps returns the number of steps taken.
func (o *SGD) Steps() int { return o.t }

// Rate returns the learning rate of the next step.
func (o *SGD) Rate() float64 { return rate(o.Schedule, o.LearnRate, DefaultSGDRate, o.t) }

// Reset forgets the momentum and the step count.
func (o *SGD) Reset() { o.t, o.b, o.err = 0, nil, nil }

// State returns a copy of the state: kind "sgd", moment "b" (absent
// without momentum or before the first step).
func (o *SGD) State() *State {
	s := &State{Kind: "sgd", Step: o.t, N: len(o.b), Moments: map[string]Floats{}}
	if o.b != nil {
		s.Moments["b"] = append(Floats(nil), o.b...)
	}
	return s
}

// SetState replaces the state with a copy of s.
func (o *SGD) SetState(s *State) error {
	if err := s.check("sgd"); err != nil {
		return err
	}
	b, ok := s.Moments["b"]
	if ok && len(b) != s.N {
		return fmt.Errorf("optim: sgd state: len(b) = %d, want n = %d", len(b), s.N)
	}
	if !ok && s.N > 0 {
		return fmt.Errorf("optim: sgd state: n = %d but no moment b; the file is damaged: save the state again", s.N)
	}
	for name := range s.Moments {
		if name != "b" {
			return fmt.Errorf("optim: sgd state: unknown moment %q (want b)", name)
		}
	}
	if err := checkMoment("sgd", "b", b, false); err != nil {
		return err
	}
	o.t, o.b = s.Step, nil
	if ok {
		o.b = append([]float64(nil), b...)
	}
	return nil
}

// ClipNorm scales g in place so that its Euclidean norm is at most
// maxNorm (clipping by global norm, Pascanu et al. 2013) and returns the
// norm before clipping. A g whose norm is at most maxNorm, or not finite,
// is left unchanged. It panics if maxNorm ≤ 0. To clip several vectors
// together (a global norm over groups), pass their concatenation or use
// Norm and Scale.
func ClipNorm(g []float64, maxNorm float64) float64 {
	if !(maxNorm > 0) {
		panic(badMaxNorm)
	}
	n := floats.Norm(g, 2)
	if n > maxNorm && !math.IsInf(n, 0) {
		floats.Scale(maxNorm/n, g)
	}
	return n
}
