package fit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/progress"
)

// Settings configure Fitter.Run. The zero value means the defaults.
type Settings struct {
	// Steps is the maximum number of optimiser steps; 0 means 100.
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

	// Patience, if positive, stops the fit when the loss has not fallen
	// below (1 − Tol)·best for Patience consecutive steps (Status
	// NoProgress). Tol defaults to 0: any decrease counts.
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
	// step and finished when the fit ends (see package progress).
	Progress progress.Reporter

	// SkipFinal leaves out the evaluation of the loss at the final
	// parameters on a freshly recorded mesh (Result.FinalLoss is then
	// NaN), which saves one solve.
	SkipFinal bool
}

// ErrStop, returned by a Callback, ends a fit early without an error.
var ErrStop = errors.New("fit: stopped by the callback")

// Step describes one step of a fit, for a Callback. Its slices are reused
// by the next step; copy what you keep.
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
	Failed                   // the solver or a callback returned an error
)

var statusNames = [...]string{
	MaxSteps:   "max steps",
	Converged:  "converged",
	NoProgress: "no progress",
	Stopped:    "stopped",
	Cancelled:  "cancelled",
	Failed:     "failed",
}

// String returns the status in words, as "no progress".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Result is the outcome of a fit.
type Result struct {
	// X holds the final fitted values (after the last update), laid out
	// as Fitter.Set; Problem is the ensemble with X written in.
	X       []float64
	Problem ode.Problem

	// FinalLoss is the loss at X on a freshly recorded mesh (NaN with
	// Settings.SkipFinal or if that solve failed).
	FinalLoss float64

	// History holds the loss at the start of each step (before its
	// update), GradNorms the gradient norms; both have length Steps.
	History, GradNorms []float64

	// BestLoss is the smallest loss seen (History and FinalLoss), BestX the
	// values that gave it, BestStep its step (Steps for the final loss).
	BestLoss float64
	BestX    []float64
	BestStep int

	Steps  int    // optimiser steps taken
	Status Status // why the fit ended

	// Records is the number of meshes recorded (the final evaluation
	// included); Time the wall time of Run, RecordTime and GradTime its
	// parts spent recording and in replay + reverse sweep.
	Records                    int
	Time, RecordTime, GradTime time.Duration

	set  *nn.Set
	fits int
}

// FitP returns fit b's fitted P columns in X (a view, len(Vars.P)).
func (r *Result) FitP(b int) []float64 {
	if b < 0 || b >= r.fits {
		panic(fmt.Sprintf("fit: FitP(%d): there are %d fits", b, r.fits))
	}
	return r.set.View(r.X, fmt.Sprintf("fit%d.p", b))
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

// Run fits from the starting values (Init) with the settings s (nil means
// defaults). Each step records a mesh (as Settings.Remesh says) or reuses
// the last one, computes the loss and its gradient (one replay and one
// reverse sweep for all fits), clips it, calls the callback and updates x
// with the optimiser. The context is checked between steps. Run returns
// the result so far with a non-nil error if the solver fails (a
// trajectory fails, a replay diverges), a callback returns an error other
// than ErrStop, or the context is cancelled (its error, Status
// Cancelled).
func (f *Fitter) Run(ctx context.Context, s *Settings) (*Result, error) {
	set := s.withDefaults()
	if set.Steps < 0 {
		return nil, fmt.Errorf("fit: Steps = %d is negative", set.Steps)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	start := time.Now()
	x := f.Init(nil)
	res := &Result{BestLoss: math.Inf(1), BestStep: -1, FinalLoss: math.NaN(), set: f.set, fits: f.b}
	st := &Step{}
	var (
		grad  = make([]float64, f.Len())
		mesh  *ode.Mesh
		stale int
		err   error
	)
	finish := func(status Status, e error) (*Result, error) {
		if set.Progress != nil {
			set.Progress.Finish()
		}
		res.Status = status
		res.X = x
		if !set.SkipFinal && status != Failed {
			l, _, ferr := f.Loss(x, nil)
			res.Records++
			if ferr == nil {
				res.FinalLoss = l
				if l < res.BestLoss {
					res.BestLoss, res.BestX, res.BestStep = l, slices.Clone(x), res.Steps
				}
			}
		}
		res.Problem = f.Problem(x)
		res.Time = time.Since(start)
		return res, e
	}
	for k := 0; k < set.Steps; k++ {
		if cerr := ctx.Err(); cerr != nil {
			return finish(Cancelled, cerr)
		}
		remesh := mesh == nil || set.remesh(k)
		var m *ode.Mesh
		if !remesh {
			m = mesh
		}
		var loss float64
		var g *ode.Gradient
		loss, g, grad, err = f.Grad(grad, x, m)
		if err != nil {
			return finish(Failed, fmt.Errorf("fit: step %d: %w", k, err))
		}
		if remesh {
			res.Records++
			mesh = g.Mesh
		}
		res.RecordTime += g.RecordTime
		res.GradTime += g.GradTime
		st.FitNorms, st.GradNorm = f.blockNorms(st.FitNorms, grad)
		res.History = append(res.History, loss)
		res.GradNorms = append(res.GradNorms, st.GradNorm)
		improved := loss < res.BestLoss*(1-set.Tol) || math.IsInf(res.BestLoss, 1)
		if loss < res.BestLoss {
			res.BestLoss, res.BestStep = loss, k
			res.BestX = append(res.BestX[:0], x...)
		}
		if improved {
			stale = 0
		} else {
			stale++
		}
		if (set.LossTol > 0 && loss <= set.LossTol) || (set.GradTol > 0 && st.GradNorm <= set.GradTol) {
			return finish(Converged, nil)
		}
		if set.Patience > 0 && stale >= set.Patience {
			return finish(NoProgress, nil)
		}
		if set.ClipNorm > 0 {
			f.clip(grad, set.ClipNorm)
		}
		st.Step, st.Loss, st.Rate, st.Remeshed = k, loss, set.Optimizer.Rate(), remesh
		st.Elapsed, st.X, st.Grad, st.Gradient = time.Since(start), x, grad, g
		if set.Callback != nil {
			if cerr := set.Callback(st); cerr != nil {
				if errors.Is(cerr, ErrStop) {
					return finish(Stopped, nil)
				}
				return finish(Failed, fmt.Errorf("fit: callback at step %d: %w", k, cerr))
			}
		}
		set.Optimizer.Step(x, grad)
		res.Steps++
		if set.Progress != nil {
			set.Progress.Report(res.Steps, loss)
		}
	}
	return finish(MaxSteps, nil)
}
