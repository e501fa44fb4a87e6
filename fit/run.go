package fit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gradsolve-go/gradsolve/internal/exactjson"
	"github.com/gradsolve-go/gradsolve/internal/finite"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/progress"
)

// Settings configure Fitter.Run. The zero value means the defaults.
type Settings struct {
	// Steps is the maximum number of optimiser steps of the fit, those
	// before a Resume included; 0 means 100, a negative value is an error.
	Steps int

	// Optimizer updates x; nil means a fresh optim.Adam (learning rate
	// 1e-3). It is used as given: its state carries over between runs
	// (call Reset for a fresh start).
	Optimizer optim.Optimizer

	// Remesh chooses when a new adaptive mesh is recorded: 0 or 1 every
	// step, K > 1 every K steps (steps 0, K, 2K, …), and a negative value
	// once, at step 0 (the mesh is then replayed throughout).
	Remesh int

	// ClipNorm, if positive, clips each fit's part of the gradient to this
	// Euclidean norm before the optimiser sees it.
	ClipNorm float64

	// Patience, if positive, stops the fit when the loss has not improved
	// on the best loss so far for Patience consecutive steps (Status
	// NoProgress). A loss improves on best if it is below
	// best − Tol·|best|: a relative improvement of Tol, whatever the sign
	// of the loss. Tol, in [0, 1), defaults to 0: any decrease counts.
	Patience int
	Tol      float64

	// LossTol and GradTol, if positive, stop the fit (Status Converged)
	// when the loss, or the norm of the gradient, falls to or below them.
	LossTol, GradTol float64

	// Callback, if not nil, is called after each step's gradient and
	// before its update. Returning ErrStop ends the fit (Status Stopped)
	// without an error; any other error ends it and is returned, wrapped.
	Callback func(*Step) error

	// Progress, if not nil, is told the step count and loss after each
	// step and finished when the fit ends (see package progress). The
	// count is Result.Steps, those before a Resume included, so a
	// reporter's total is Steps (progress.New(Steps, …)) for a resumed
	// fit too.
	Progress progress.Reporter

	// SkipFinal leaves out the evaluation of the loss at the final
	// parameters on a freshly recorded mesh (Result.FinalLoss is then
	// NaN), which saves one solve.
	SkipFinal bool

	// OnHost keeps the fit on the host where the engine could hold it in
	// its own memory. By default, on an engine that can (package cuda's
	// float64 single-GPU engines, ode.Trainer), a run with an optimiser of
	// package optim (optim.Ruled), a new mesh every step (Remesh 0 or 1),
	// no Reg term in the loss and no failed fits keeps the fitted values,
	// the gradient, the optimiser's moments, the best values and the
	// loss's reduction there: a step moves a few scalars (and X, Grad and
	// FitNorms when a Callback asks; Step.Gradient is then nil). Losses,
	// values and the optimiser's state are those of the host loop to
	// rounding (the update is the optimiser's own arithmetic, bit for bit;
	// sums are formed in another order). Where a trajectory fails,
	// values turn non-finite or the gradient's norm reaches 2^511 (see
	// the package doc), the host takes over from that step, with the
	// state the engine reached. Result.DeviceSteps and DeviceNote say
	// what ran where.
	OnHost bool

	// Resume, if not nil, continues a fit from where an earlier Run left
	// it (Result.Checkpoint), with the Optimizer holding the state it had
	// then (optim.SaveState and LoadState): the fit goes on exactly as if
	// it had not stopped, bit for bit on the CPU engine, with the same
	// steps recording meshes, the same patience count and the same failed
	// fits.
	Resume *Checkpoint
}

// Checkpoint is where a fit stands after its last step: with the
// optimiser's state, what Settings.Resume needs to continue it exactly.
// It encodes to JSON (encoding/json) exactly: its values are written in
// their shortest round-trip form, and a non-finite BestLoss (+Inf before
// any loss was kept) as a string, as optim's state files write them.
type Checkpoint struct {
	Step int          `json:"step"` // optimiser steps taken
	X    optim.Floats `json:"x"`    // the fitted values after them (len Fitter.Len())

	// MeshStep is the step that recorded the mesh the next steps replay
	// (under Settings.Remesh), MeshX the values it recorded it at; nil if
	// the next step records a mesh anyway. The mesh is recorded again from
	// them on Resume, the same mesh.
	MeshStep int          `json:"mesh_step"`
	MeshX    optim.Floats `json:"mesh_x,omitempty"`

	// The patience state: the best loss so far, its step and values, and
	// the steps since the loss last improved.
	BestLoss float64      `json:"best_loss"`
	BestStep int          `json:"best_step"`
	BestX    optim.Floats `json:"best_x,omitempty"`
	Stale    int          `json:"stale"`

	// Failed lists the independent fits that had stopped, in order.
	Failed []StoppedFit `json:"failed,omitempty"`

	// Fit identifies the fit the checkpoint belongs to (Fitter.ID: its
	// field's program, N, Fits and Vars). Resume refuses a checkpoint of
	// another fit; an empty Fit (a checkpoint written before it existed,
	// or cleared by a caller who means to carry values over to a changed
	// fit of the same layout) is not checked.
	Fit string `json:"fit,omitempty"`
}

// checkpointJSON is Checkpoint as JSON: BestLoss in exactjson's form, so
// that the +Inf of a run that applied no step (stopped, converged,
// cancelled or failed at its first step) encodes, as "+Inf".
type checkpointJSON struct {
	plainCheckpoint
	BestLoss exactjson.Float `json:"best_loss"`
}

// plainCheckpoint is Checkpoint without its JSON methods.
type plainCheckpoint Checkpoint

// MarshalJSON encodes c, its values exactly (non-finite ones as the
// strings "NaN", "+Inf" and "-Inf").
func (c Checkpoint) MarshalJSON() ([]byte, error) {
	return json.Marshal(checkpointJSON{plainCheckpoint(c), exactjson.Float(c.BestLoss)})
}

// UnmarshalJSON decodes what MarshalJSON writes.
func (c *Checkpoint) UnmarshalJSON(b []byte) error {
	var j checkpointJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = Checkpoint(j.plainCheckpoint)
	c.BestLoss = float64(j.BestLoss)
	return nil
}

// StoppedFit records a failed fit in a Checkpoint: on Resume its FitErr
// is a *FitError with this step and reason.
type StoppedFit struct {
	Fit    int    `json:"fit"`
	Step   int    `json:"step"`
	Reason string `json:"reason"`
}

// ErrStop, returned by a Callback, ends a fit early without an error.
var ErrStop = errors.New("fit: stopped by the callback")

// Step describes one step of a fit, for a Callback. Its slices are reused
// by the next step; copy what you keep. They are for reading: on the host
// X and Grad are the run's own values and gradient, on a fit held in the
// engine's memory copies of them, so a callback that changed them would
// change the one fit and not the other.
type Step struct {
	Step     int           // 0-based
	Loss     float64       // the loss at X (before this step's update)
	GradNorm float64       // the Euclidean norm of the gradient before clipping
	FitNorms []float64     // each fit's gradient norm (one entry if Fits is 1)
	Rate     float64       // the optimiser's learning rate for this step
	Remeshed bool          // whether this step recorded a new mesh
	Elapsed  time.Duration // since the start of Run
	X        []float64     // the fitted values (len Fitter.Len())
	Grad     []float64     // the gradient with respect to X (after clipping)
	Gradient *ode.Gradient // the solver's result: solution, mesh, timings
}

// Status says why a fit ended.
type Status uint8

const (
	MaxSteps   Status = iota // ran Settings.Steps steps
	Converged                // the loss or gradient norm reached LossTol or GradTol
	NoProgress               // Patience steps without improvement
	Stopped                  // the callback returned ErrStop
	Cancelled                // the context was cancelled
	Failed                   // the solver or a callback returned an error; for one of several fits: that fit failed
	Running                  // (Result.FitStatus) the fit was still going when the run ended for another reason
)

var statusNames = [...]string{
	MaxSteps:   "max steps",
	Converged:  "converged",
	NoProgress: "no progress",
	Stopped:    "stopped",
	Cancelled:  "cancelled",
	Failed:     "failed",
	Running:    "running",
}

// String returns the status in words, as "no progress".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// FitError is why one of several independent fits stopped: the step at
// which it failed and the cause (an *ode.TrajectoryError naming the
// trajectory, or parameters that turned non-finite).
type FitError struct {
	Fit  int   // the fit
	Step int   // the step whose gradient or update failed
	Err  error // the cause
}

func (e *FitError) Error() string {
	return fmt.Sprintf("fit: fit %d stopped at step %d: %v", e.Fit, e.Step, e.Err)
}

// Unwrap returns the cause.
func (e *FitError) Unwrap() error { return e.Err }

// ErrNonFinite is the cause of a FitError for parameters that an
// optimiser step made non-finite (the step is not applied to that fit;
// with one fit, the run ends with that error).
var ErrNonFinite = errors.New("the optimiser step made the fitted values non-finite")

// Result is the outcome of a fit.
type Result struct {
	// X holds the final fitted values (after the last update), laid out
	// as Fitter.Set; Problem is the ensemble with X written in.
	X       []float64
	Problem ode.Problem

	// FinalLoss is the loss at X on a freshly recorded mesh (NaN with
	// Settings.SkipFinal or if that solve failed); with failed fits, the
	// loss of the others.
	FinalLoss float64

	// History holds the loss at the start of each step this run evaluated
	// (before its update), GradNorms the gradient norms: Steps − Start
	// entries, one more if the run stopped after evaluating a step
	// without applying it (Converged, NoProgress, Stopped; a resume
	// evaluates that step again). With several fits, a failed fit's terms
	// are left out from the step at which it failed on.
	History, GradNorms []float64

	// BestLoss is the smallest loss seen (History and FinalLoss), BestX the
	// values that gave it, BestStep its step (Steps for the final loss).
	BestLoss float64
	BestX    []float64
	BestStep int

	Start  int    // the steps taken before this run (Settings.Resume)
	Steps  int    // optimiser steps taken, Start included
	Status Status // why the fit ended

	// FitStatus holds each independent fit's status (len Fits): Failed
	// for a fit that stopped on its own, with FitErr[b] (a *FitError) the
	// reason; the others have the run's Status (Running if the run ended
	// Failed for another reason). A failed fit's values in X are those
	// before the step at which it failed; the other fits went on without
	// it, as if it had not been part of the ensemble.
	FitStatus []Status
	FitErr    []error

	// Records is the number of meshes recorded (the final evaluation
	// included); Time the wall time of Run, RecordTime and GradTime its
	// parts spent recording and in replay + reverse sweep.
	Records                    int
	Time, RecordTime, GradTime time.Duration

	// DeviceSteps is the number of steps this run took with the fit held
	// in the engine's memory (see Settings.OnHost); DeviceNote says why
	// the others ran on the host ("" if none did).
	DeviceSteps int
	DeviceNote  string

	lay  layout
	ckpt *Checkpoint
}

// FitP returns fit b's fitted P columns in X (a view, len(Vars.P)), or
// nil if no P column is fitted. It panics if b is not in [0, Fits).
func (r *Result) FitP(b int) []float64 {
	r.checkFit("FitP", b)
	return r.lay.pView(r.X, b)
}

// FitY0 returns fit b's fitted initial states in X (a view,
// [N/Fits × len(Vars.Y0)], its trajectories in order), or nil if no
// initial state is fitted. It panics if b is not in [0, Fits).
func (r *Result) FitY0(b int) []float64 {
	r.checkFit("FitY0", b)
	return r.lay.y0View(r.X, b)
}

func (r *Result) checkFit(fn string, b int) {
	if b < 0 || b >= r.lay.fits {
		panic(fmt.Sprintf("fit: %s(%d): there are %d fits", fn, b, r.lay.fits))
	}
}

// Checkpoint returns where the fit stands at the end of the run, for
// Settings.Resume (a copy). Save the optimiser's state with it.
func (r *Result) Checkpoint() *Checkpoint {
	if r.ckpt == nil {
		return nil
	}
	c := *r.ckpt
	c.X, c.MeshX, c.BestX = slices.Clone(c.X), slices.Clone(c.MeshX), slices.Clone(c.BestX)
	c.Failed = slices.Clone(c.Failed)
	return &c
}

// stepError is the error of the optimiser at step k: an invalid
// hyperparameter (optim.HyperparameterError, a learning rate a schedule
// turns negative) is the caller's input, found as the run reaches it,
// and wraps ode.ErrInput.
func stepError(k int, err error) error {
	err = fmt.Errorf("fit: step %d: %w", k, err)
	var he *optim.HyperparameterError
	if errors.As(err, &he) {
		return badInput(err)
	}
	return err
}

// check validates the settings.
func (s *Settings) check() error {
	switch {
	case s.Steps < 0:
		return fmt.Errorf("fit: Steps = %d is negative", s.Steps)
	case !(s.ClipNorm >= 0) || math.IsInf(s.ClipNorm, 1):
		return fmt.Errorf("fit: ClipNorm = %v; want a finite value ≥ 0 (0: no clipping)", s.ClipNorm)
	case s.Patience < 0:
		return fmt.Errorf("fit: Patience = %d is negative", s.Patience)
	case !(s.Tol >= 0 && s.Tol < 1):
		return fmt.Errorf("fit: Tol = %v; want a value in [0, 1)", s.Tol)
	case !(s.LossTol >= 0 || s.LossTol < 0) || !(s.GradTol >= 0):
		return fmt.Errorf("fit: LossTol = %v, GradTol = %v; want numbers (GradTol ≥ 0; 0: unused)", s.LossTol, s.GradTol)
	}
	return nil
}

func (s *Settings) withDefaults() Settings {
	var set Settings
	if s != nil {
		set = *s
	}
	if set.Steps == 0 {
		set.Steps = 100
	}
	if set.Optimizer == nil {
		set.Optimizer = &optim.Adam{}
	}
	return set
}

// remesh reports whether step k records a new mesh.
func (s *Settings) remesh(k int) bool {
	switch {
	case s.Remesh < 0:
		return k == 0
	case s.Remesh <= 1:
		return true
	}
	return k%s.Remesh == 0
}

// improves reports whether loss improves on best by the relative margin
// tol (any sign of best).
func improves(loss, best, tol float64) bool {
	if math.IsInf(best, 1) {
		return !math.IsNaN(loss)
	}
	return loss < best-float64(tol*math.Abs(best)) // rounded on every host (Go fuses it on arm64)
}

// Run fits from the starting values (Init, or Settings.Resume's) with the
// settings s (nil means defaults). Each step records a mesh (as
// Settings.Remesh says) or reuses the last one, computes the loss and its
// gradient (one replay and one reverse sweep for all fits), clips it,
// calls the callback and updates x with the optimiser.
//
// The settings and the optimiser (Validate, before every step; its state's
// length, optim.CheckLen) are checked first: an invalid one is an error
// before any step. The context is passed to the solver: a step during
// which it is cancelled is not applied (Status Cancelled, its error).
//
// With several fits (Problem.Fits > 1) the fits are isolated: a fit whose
// trajectory fails (the solver refuses it, or its loss or gradient is not
// finite), or whose values an update makes non-finite, stops (FitStatus
// Failed, FitErr its *FitError) and the others go on without it, their
// losses and values those of a fit of the ensemble without it (bit for
// bit on the CPU engine; with Loss.Mean the mean still divides by all N).
// Only when every fit has stopped does the run end Failed, with an error.
// With one fit, a failure ends the run (Status Failed) with the solver's
// error, and an update that makes values non-finite with a *FitError
// wrapping ErrNonFinite (X keeps the values before it). Run also returns the result so far with a non-nil error if a
// callback returns an error other than ErrStop, or the context is
// cancelled (its error, Status Cancelled).
func (f *Fitter) Run(ctx context.Context, s *Settings) (*Result, error) {
	set := s.withDefaults()
	// A run refused before its first step ends too: its reporter is
	// finished, as at every other end.
	refuse := func(err error) (*Result, error) {
		if set.Progress != nil {
			set.Progress.Finish()
		}
		return nil, err
	}
	if err := set.check(); err != nil {
		return refuse(badInput(err))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	opt := set.Optimizer
	if err := optim.CheckLen(opt, f.Len()); err != nil {
		return refuse(badInput(fmt.Errorf("fit: %w", err)))
	}
	r := &runner{f: f, set: &set, opt: opt, ctx: ctx, start: time.Now()}
	if err := r.init(); err != nil {
		return refuse(err)
	}
	if d := r.trainer(); d != nil {
		if res, done, err := r.runDevice(d); done {
			return res, err
		}
	}
	return r.run()
}

// runner is the state of one Run.
type runner struct {
	f     *Fitter
	set   *Settings
	opt   optim.Optimizer
	ctx   context.Context
	start time.Time
	res   *Result

	x, prev, grad []float64
	mesh          *ode.Mesh
	meshStep      int
	meshX         []float64 // the values the mesh was recorded at
	stale         int
	k0            int

	pre      patience  // before the last evaluated step's loss
	preBestX []float64 // BestX before it, if that step improved it

	isolate bool
	skip    []bool // [N] trajectories of failed fits (nil until one fails)
	failed  int    // fits failed
	st      Step
}

func (r *runner) init() error {
	f, set := r.f, r.set
	r.isolate = f.b > 1
	r.res = &Result{BestLoss: math.Inf(1), BestStep: -1, FinalLoss: math.NaN(), lay: f.lay,
		FitStatus: make([]Status, f.b), FitErr: make([]error, f.b)}
	r.x = f.Init(nil)
	r.grad = make([]float64, f.Len())
	r.prev = make([]float64, f.Len())
	c := set.Resume
	if c == nil {
		return nil
	}
	if err := f.checkResume(c, r.opt.Steps()); err != nil {
		return badInput(err)
	}
	copy(r.x, c.X)
	r.k0 = c.Step
	r.res.Start, r.res.Steps = c.Step, c.Step
	r.res.BestLoss, r.res.BestStep, r.res.BestX, r.stale = c.BestLoss, c.BestStep, slices.Clone([]float64(c.BestX)), c.Stale
	for _, s := range c.Failed {
		r.fail(s.Fit, s.Step, errors.New(s.Reason))
	}
	if c.MeshX != nil && !set.remesh(c.Step) {
		// Record the mesh the uninterrupted run replays, from the values it
		// was recorded at.
		g, err := r.gradient(c.MeshX, nil)
		if err != nil {
			return fmt.Errorf("fit: Resume: recording the mesh of step %d again: %w", c.MeshStep, err)
		}
		r.mesh, r.meshStep, r.meshX = g.Mesh, c.MeshStep, slices.Clone([]float64(c.MeshX))
		r.res.Records++
		r.res.RecordTime += g.RecordTime
		r.res.GradTime += g.GradTime
		f.g = nil // the mesh is kept: the next record must not write into it
	}
	return nil
}

// checkResume checks checkpoint c against fit f and the optimiser's
// steps taken (steps) before a Run resumes from it: its errors are about
// the caller's checkpoint (Run wraps them in ode.ErrInput).
func (f *Fitter) checkResume(c *Checkpoint, steps int) error {
	switch {
	case c.Fit != "" && c.Fit != f.ID():
		return fmt.Errorf("fit: Resume: the checkpoint is of another fit (id %.12s…, this fit's %.12s…: a different field, N, Fits or Vars): resume with the checkpoint of this fit, or clear Checkpoint.Fit to carry its values over", c.Fit, f.ID())
	case len(c.X) != f.Len():
		return fmt.Errorf("fit: Resume: the checkpoint has %d values, the fit %d: resume with the checkpoint of this fit", len(c.X), f.Len())
	case c.Step < 0 || c.Step != steps:
		return fmt.Errorf("fit: Resume: the checkpoint is at step %d but the optimiser has taken %d steps: load the optimiser state saved with the checkpoint", c.Step, steps)
	case c.MeshX != nil && (len(c.MeshX) != f.Len() || c.MeshStep < 0 || c.MeshStep > c.Step):
		return fmt.Errorf("fit: Resume: the checkpoint's mesh values (%d, at step %d) do not fit a fit of %d values at step %d", len(c.MeshX), c.MeshStep, f.Len(), c.Step)
	case c.BestX != nil && len(c.BestX) != f.Len():
		return fmt.Errorf("fit: Resume: the checkpoint's best values have length %d, want %d", len(c.BestX), f.Len())
	case c.Stale < 0:
		return fmt.Errorf("fit: Resume: the checkpoint's patience count %d is negative", c.Stale)
	case math.IsNaN(c.BestLoss) || math.IsInf(c.BestLoss, -1):
		// No loss improves on it: the fit would keep no best values and
		// stop for no progress.
		return fmt.Errorf("fit: Resume: the checkpoint's best loss is %v; want a number or +Inf (none yet): the checkpoint is damaged", c.BestLoss)
	case c.BestStep < -1 || c.BestStep > c.Step:
		return fmt.Errorf("fit: Resume: the checkpoint's best step %d is outside [-1, %d]: the checkpoint is damaged", c.BestStep, c.Step)
	}
	// The values it resumes from, returns as the best, and records the
	// mesh at: each a fit's values, finite.
	for _, v := range []struct {
		what string
		x    []float64
	}{{"x", c.X}, {"best values BestX", c.BestX}, {"mesh values MeshX", c.MeshX}} {
		if i := finite.First(v.x); i >= 0 {
			return fmt.Errorf("fit: Resume: the checkpoint's %s[%d] (%s) is %v: the checkpoint is damaged", v.what, i, f.blockOf(i), v.x[i])
		}
	}
	for _, s := range c.Failed {
		if s.Fit < 0 || s.Fit >= f.b || s.Step < 0 || s.Step > c.Step {
			return fmt.Errorf("fit: Resume: the checkpoint names failed fit %d (at step %d) of %d fits at step %d", s.Fit, s.Step, f.b, c.Step)
		}
	}
	return nil
}

// patience is the patience state before a step's loss: the best loss, its
// step and the stale count; pending while the step is not applied, swapped
// if it improved on the best (whose values are then runner.preBestX).
type patience struct {
	best     float64
	bestStep int
	stale    int
	pending  bool
	swapped  bool
}

// fail stops fit b at step k with cause err (if it has not stopped yet).
func (r *runner) fail(b, k int, err error) {
	res, f := r.res, r.f
	if res.FitStatus[b] == Failed {
		return
	}
	res.FitStatus[b], res.FitErr[b] = Failed, &FitError{Fit: b, Step: k, Err: err}
	r.failed++
	if r.skip == nil {
		r.skip = make([]bool, f.n)
	}
	for i := b * f.per; i < (b+1)*f.per; i++ {
		r.skip[i] = true
	}
}

// gradient returns the gradient at x on mesh m (recorded if nil) into
// r.grad: through GradPartial with several fits, failing the fits whose
// trajectories fail (at step r.st.Step).
func (r *runner) gradient(x []float64, m *ode.Mesh) (*ode.Gradient, error) {
	f := r.f
	if !r.isolate {
		_, g, _, err := f.GradContext(r.ctx, r.grad, x, m)
		return g, err
	}
	f.scatter(x)
	g, fails, err := f.sv.GradPartial(r.ctx, f.g, &f.prob, f.loss, m, r.skip)
	if err != nil {
		return nil, err
	}
	for _, e := range fails {
		r.fail(e.Index/f.per, r.st.Step, e)
	}
	if len(fails) > 0 && f.per > 1 && r.failed < f.b {
		// The failed fits' other trajectories are still in this loss: take
		// it again without them, as a fit without those fits would.
		if g, _, err = f.sv.GradPartial(r.ctx, g, &f.prob, f.loss, m, r.skip); err != nil {
			return nil, err
		}
	}
	f.g = g
	f.reduce(r.grad, g)
	return g, nil
}

// allFailed returns the error of a run whose fits have all stopped.
func (r *runner) allFailed() error {
	return fmt.Errorf("fit: all %d fits failed; fit 0: %w", r.f.b, r.res.FitErr[0])
}

func (r *runner) run() (*Result, error) {
	f, set, res, opt := r.f, r.set, r.res, r.opt
	if r.isolate && r.failed == f.b {
		return r.finish(Failed, r.allFailed())
	}
	for k := r.k0; k < set.Steps; k++ {
		if err := r.ctx.Err(); err != nil {
			return r.finish(Cancelled, err)
		}
		if err := opt.Validate(); err != nil {
			return r.finish(Failed, stepError(k, err))
		}
		r.st.Step = k
		remesh := r.mesh == nil || set.remesh(k)
		var m *ode.Mesh
		if !remesh {
			m = r.mesh
		}
		g, err := r.gradient(r.x, m)
		if cerr := r.ctx.Err(); cerr != nil {
			// Cancelled during the step: the step is not applied.
			return r.finish(Cancelled, cerr)
		}
		if err != nil {
			return r.finish(Failed, fmt.Errorf("fit: step %d: %w", k, err))
		}
		if r.isolate && r.failed == f.b {
			return r.finish(Failed, r.allFailed())
		}
		loss := g.Loss
		if remesh {
			res.Records++
			r.mesh, r.meshStep = g.Mesh, k
			r.meshX = append(r.meshX[:0], r.x...)
		}
		res.RecordTime += g.RecordTime
		res.GradTime += g.GradTime
		st := &r.st
		st.FitNorms, st.GradNorm = f.blockNorms(st.FitNorms, r.grad)
		if loss < res.BestLoss {
			r.preBestX, res.BestX = res.BestX, r.preBestX
			res.BestX = append(res.BestX[:0], r.x...)
		}
		if status, end := r.account(k, loss, st.GradNorm); end {
			return r.finish(status, nil)
		}
		if set.ClipNorm > 0 {
			f.clip(r.grad, set.ClipNorm)
		}
		st.Loss, st.Rate, st.Remeshed = loss, opt.Rate(), remesh
		st.Elapsed, st.X, st.Grad, st.Gradient = time.Since(r.start), r.x, r.grad, g
		if set.Callback != nil {
			if cerr := set.Callback(st); cerr != nil {
				if errors.Is(cerr, ErrStop) {
					return r.finish(Stopped, nil)
				}
				return r.finish(Failed, fmt.Errorf("fit: callback at step %d: %w", k, cerr))
			}
		}
		copy(r.prev, r.x)
		opt.Step(r.x, r.grad)
		if err := opt.Err(); err != nil {
			return r.finish(Failed, stepError(k, err))
		}
		res.Steps++
		r.pre.pending = false
		if r.isolate {
			r.guard(k)
			if r.failed == f.b {
				return r.finish(Failed, r.allFailed())
			}
		} else if err := r.guardOne(k); err != nil {
			return r.finish(Failed, err)
		}
		if set.Progress != nil {
			set.Progress.Report(res.Steps, loss)
		}
	}
	return r.finish(MaxSteps, nil)
}

// account enters the loss and gradient norm of step k (evaluated, not yet
// applied) in the history, the best loss (its values the caller keeps)
// and the patience count, and reports whether the fit ends there, and
// with which status.
func (r *runner) account(k int, loss, gradNorm float64) (Status, bool) {
	res, set := r.res, r.set
	// The patience state before this step's loss, for a checkpoint of a
	// run that ends before the step is applied.
	r.pre = patience{best: res.BestLoss, bestStep: res.BestStep, stale: r.stale, pending: true}
	res.History = append(res.History, loss)
	res.GradNorms = append(res.GradNorms, gradNorm)
	improved := improves(loss, res.BestLoss, set.Tol)
	if loss < res.BestLoss {
		res.BestLoss, res.BestStep = loss, k
		r.pre.swapped = true
	}
	if improved {
		r.stale = 0
	} else {
		r.stale++
	}
	if (set.LossTol > 0 && loss <= set.LossTol) || (set.GradTol > 0 && gradNorm <= set.GradTol) {
		return Converged, true
	}
	if set.Patience > 0 && r.stale >= set.Patience {
		return NoProgress, true
	}
	return 0, false
}

// guard undoes step k's update of the failed fits and fails the fits it
// made non-finite.
func (r *runner) guard(k int) {
	l := r.f.lay
	for b := 0; b < l.fits; b++ {
		blk := r.x[b*l.stride : (b+1)*l.stride]
		if r.res.FitStatus[b] != Failed {
			i := finite.First(blk)
			if i < 0 {
				continue
			}
			r.fail(b, k, r.nonFinite(b*l.stride+i))
		}
		copy(blk, r.prev[b*l.stride:(b+1)*l.stride])
	}
}

// guardOne undoes step k's update of a single fit (Fits = 1) if it made
// values non-finite, and returns the *FitError that ends the run then.
func (r *runner) guardOne(k int) error {
	i := finite.First(r.x)
	if i < 0 {
		return nil
	}
	err := &FitError{Fit: 0, Step: k, Err: r.nonFinite(i)}
	copy(r.x, r.prev)
	return err
}

// nonFinite is the cause of a fit's failure where an update made x[i]
// non-finite.
func (r *runner) nonFinite(i int) error {
	return fmt.Errorf("%w: x[%d] (%s) = %v; lower the learning rate or clip the gradient (Settings.ClipNorm)", ErrNonFinite, i, r.f.blockOf(i), r.x[i])
}

func (r *runner) finish(status Status, e error) (*Result, error) {
	f, set, res, x := r.f, r.set, r.res, r.x
	if set.Progress != nil {
		set.Progress.Finish()
	}
	res.Status = status
	res.X = x
	for b := range res.FitStatus {
		if res.FitStatus[b] == Failed {
			continue
		}
		res.FitStatus[b] = status
		if status == Failed && r.isolate && r.failed < f.b {
			res.FitStatus[b] = Running
		}
	}
	c := &Checkpoint{Step: res.Steps, X: slices.Clone(x), BestLoss: res.BestLoss, BestStep: res.BestStep,
		BestX: slices.Clone(res.BestX), Stale: r.stale, Fit: f.ID()}
	if r.pre.pending {
		// The run ended after evaluating step Steps without applying it:
		// a resume evaluates it again, from the state before it.
		c.BestLoss, c.BestStep, c.Stale = r.pre.best, r.pre.bestStep, r.pre.stale
		if r.pre.swapped {
			c.BestX = slices.Clone(r.preBestX)
		}
	}
	if r.mesh != nil && !set.remesh(res.Steps) {
		c.MeshStep, c.MeshX = r.meshStep, slices.Clone(r.meshX)
	}
	for b, s := range res.FitStatus {
		if fe, ok := res.FitErr[b].(*FitError); ok && s == Failed {
			c.Failed = append(c.Failed, StoppedFit{Fit: b, Step: fe.Step, Reason: fe.Err.Error()})
		}
	}
	res.ckpt = c
	if !set.SkipFinal && status != Failed {
		var l float64
		var ferr error
		if r.skip == nil {
			l, _, ferr = f.Loss(x, nil)
		}
		if r.isolate && (r.skip != nil || ferr != nil) {
			// Leave the failed fits out (and any that fail now: the final
			// evaluation does not stop them).
			var g *ode.Gradient
			f.scatter(x)
			g, _, ferr = f.sv.GradPartial(r.ctx, nil, &f.prob, f.loss, nil, r.skip)
			if ferr == nil {
				l = g.Loss
			}
		}
		res.Records++
		if ferr == nil {
			res.FinalLoss = l
			if l < res.BestLoss {
				res.BestLoss, res.BestX, res.BestStep = l, slices.Clone(x), res.Steps
			}
		}
	}
	res.Problem = f.Problem(x)
	res.Time = time.Since(r.start)
	return res, e
}
