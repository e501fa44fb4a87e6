package ode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gradsolve-go/gradsolve/optim"
)

// ErrNoTrainer is returned (wrapped, with the reason) by Solver.NewTrainer
// when the solver's engine cannot keep a fit in its own memory: the caller
// runs its loop on the host (package fit does).
var ErrNoTrainer = errors.New("the engine keeps no fit in its memory")

// TrainSpec describes what a fit adjusts, in the layout of package fit's
// vector x: the N trajectories form Fits consecutive groups of N/Fits; fit
// b's block of x, at b·Stride (Stride = len(P) + N/Fits·len(Y0)), holds
// its value of each listed parameter column P (one value per fit, tied
// over its trajectories; its gradient is their sum), then its
// trajectories' listed initial-state components Y0 (trajectory by
// trajectory); the shared parameters, if Shared, follow the blocks. The
// gradient's "fit" parts are these blocks (with one fit, all of x).
type TrainSpec struct {
	Fits   int   // 0 means 1; N must be a multiple
	P      []int // fitted parameter columns
	Y0     []int // fitted initial-state components
	Shared bool  // fit all the shared parameters (Fits must be 1)
	// Moments is the number of optimiser state vectors the updates use
	// (len(optim.Rule.Moments())), each of len(x).
	Moments int
	// DataChecked tells NewTrainer that the loss's Data has passed
	// Solver.CheckLoss (or a Grad) for a problem of the same N and has
	// not changed since: NewTrainer then checks its length but does not
	// read it again for non-finite entries (one read of N·DataDim values
	// saved). A non-finite entry the loss reads, put there since, makes
	// that trajectory's loss term non-finite: the first Eval counts it in
	// TrainEval.Failed.
	DataChecked bool
}

// Len returns len(x) for a problem of n trajectories and shared shared
// parameters.
func (s *TrainSpec) Len(n, shared int) int {
	b := max(s.Fits, 1)
	l := b * (len(s.P) + n/b*len(s.Y0))
	if s.Shared {
		l += shared
	}
	return l
}

// Trainer runs the steps of a fit where its engine keeps the data: the
// fitted values x, the gradient, the optimiser's moments, the best values
// and the loss reduction stay in the engine's memory (a GPU's), and a
// step moves only a few scalars. Made by Solver.NewTrainer; not safe for
// concurrent use. Every gradient is that of Solver.Grad on a freshly
// recorded mesh at the problem with x written into it.
type Trainer interface {
	// Load sets x and the optimiser's moments (len(x) each; nil or empty
	// means zeros) and writes x into the problem.
	Load(x []float64, moments [][]float64) error
	// Eval records a mesh at the current values and computes the loss and
	// its gradient with respect to x, and each fit's gradient norm. A
	// result with Failed > 0 is unusable: the caller computes the step
	// through the Solver (which reports the failures).
	Eval(ctx context.Context) (TrainEval, error)
	// Clip scales each fit's part of the gradient to Euclidean norm at
	// most c (as optim.ClipNorm on each part); c must be positive.
	Clip(c float64) error
	// Update copies x to the best values if best is true, and to the
	// previous values, applies r to x and the moments with the gradient
	// (the arithmetic of optim.Rule.Apply), and writes x into the problem.
	// The next Eval reports the entries it made non-finite.
	Update(r *optim.Rule, best bool) error
	// Read copies to the host what dst asks for (nil slices are skipped;
	// each must have its full length).
	Read(dst *TrainState) error
	// Release frees the engine's memory; the Trainer is unusable after.
	Release()
}

// TrainState is what Trainer.Read copies back: x, the gradient (after
// Clip), the values before the last Update, the best values ([len(x)]
// each), each fit's gradient norm ([Fits]) and the moments; Read always
// sets NonFinite, the entries of x that the Updates since the last Eval
// made non-finite.
type TrainState struct {
	X, Grad, Prev, Best []float64
	FitNorms            []float64
	Moments             [][]float64
	NonFinite           int
}

// TrainEval is the result of Trainer.Eval.
type TrainEval struct {
	// Loss is the loss (Σ terms · scale), GradNorm the Euclidean norm of
	// the gradient with respect to x.
	Loss, GradNorm float64
	// Failed counts the trajectories the step cannot use: failed or stiff
	// (an explicit method's stiffness test fired), or with a non-finite
	// loss term or gradient.
	Failed int
	// NonFinite counts the entries of x that the last Update made
	// non-finite (the previous values are kept: TrainState.Prev).
	NonFinite int
	// Time is the wall time of the call.
	Time time.Duration
}

// TrainExecutor is implemented by an Executor that can keep a fit in its
// own memory. NewTrainer takes the OpGrad job of the fit's problem at its
// starting values (validated and expanded, Mesh nil) and the layout of x.
// It returns an error wrapping ErrNoTrainer where it cannot run that job
// so (one launch would not hold it, say). An executor that is also a
// CheckingExecutor gets the job with the checks of Job.Checks left to
// it, and makes them before NewTrainer returns, as Run does (an error
// wrapping ErrInput if one fails).
type TrainExecutor interface {
	NewTrainer(j *Job, spec *TrainSpec) (Trainer, error)
}

// check reports a layout that does not fit problem q: trajectories that
// do not split into the fits, shared parameters with several fits, a
// column or component out of range.
func (s *TrainSpec) check(q *problem) error {
	b := max(s.Fits, 1)
	f := &q.Field
	switch {
	case q.n%b != 0:
		return fmt.Errorf("ode: NewTrainer: %d trajectories do not split into %d fits", q.n, b)
	case s.Shared && b > 1:
		return fmt.Errorf("ode: NewTrainer: shared parameters with %d fits", b)
	}
	for _, c := range s.P {
		if c < 0 || c >= f.Params {
			return fmt.Errorf("ode: NewTrainer: parameter column %d outside [0, %d)", c, f.Params)
		}
	}
	for _, c := range s.Y0 {
		if c < 0 || c >= f.Dim {
			return fmt.Errorf("ode: NewTrainer: state component %d outside [0, %d)", c, f.Dim)
		}
	}
	return nil
}

// NewTrainer returns a Trainer for a fit of problem p (x's starting
// values in it) under loss, with the layout spec, on the solver's engine.
// It returns an error wrapping ErrNoTrainer, saying why, if the engine
// keeps no fit in its memory (the CPU engine computes where x lives
// anyway), for a loss with a Reg term, or where the engine cannot run
// the job so (an engine's limit, not an input error); errors wrapping
// ErrInput for an invalid problem, loss or layout. It checks p
// as Grad does, and where the engine's executor checks Y0 and P as it
// copies them into its memory (CheckingExecutor), leaves that check to
// the copy; it reads Data for non-finite entries unless
// spec.DataChecked.
func (sv *Solver) NewTrainer(p *Problem, loss Loss, spec *TrainSpec) (Trainer, error) {
	te, ok := sv.exec.(TrainExecutor)
	if !ok {
		return nil, fmt.Errorf("ode: engine %s: %w", sv.engine.Name(), ErrNoTrainer)
	}
	if loss.Reg != nil {
		return nil, fmt.Errorf("%s has a Reg term, which is evaluated on the host: %w", loss.what(), ErrNoTrainer)
	}
	if spec == nil {
		return nil, badInput(fmt.Errorf("ode: NewTrainer: the TrainSpec is nil; give the layout of the fitted values"))
	}
	q, err := sv.checkInputs(p, nil, sv.leaveChecks(nil)&CheckFinite)
	if err != nil {
		return nil, err
	}
	if err := spec.check(q); err != nil {
		return nil, badInput(err)
	}
	j := sv.job(OpGrad, q, nil)
	j.StopOnStiff = true
	if spec.DataChecked {
		j.Loss, err = sv.lossPlanChecked(&loss, q)
	} else {
		j.Loss, err = sv.lossPlan(&loss, q)
	}
	if err != nil {
		return nil, err
	}
	tr, err := te.NewTrainer(j, spec)
	if err = sv.inputError(err, p, nil); err != nil {
		return nil, err
	}
	return tr, nil
}
