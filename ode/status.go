package ode

import (
	"errors"
	"fmt"
)

// Status is the outcome of one trajectory.
type Status uint8

const (
	OK                Status = iota // reached t1
	MaxStepsReached                 // the step budget (accepted + rejected) ran out
	StepSizeUnderflow               // the step size fell below the resolution of t
	NonFinite                       // the state or the error estimate stayed NaN or infinite
	NotRun                          // not integrated (another trajectory failed first)
	Stiff                           // an explicit method ran at its stability limit: no gradient
)

// Sentinel errors, one per failure status; a *TrajectoryError unwraps to one.
var (
	ErrMaxSteps          = errors.New("maximum number of steps reached")
	ErrStepSizeUnderflow = errors.New("step size underflow")
	ErrNonFinite         = errors.New("non-finite state or error estimate")
	ErrStiff             = errors.New("stiff for the explicit method")
)

var statusTable = [...]struct {
	name string
	err  error
	hint string
}{
	OK:                {"ok", nil, ""},
	MaxStepsReached:   {"max steps reached", ErrMaxSteps, "increase Settings.MaxSteps, loosen the tolerances, or, if the problem is stiff, use Rodas5P"},
	StepSizeUnderflow: {"step size underflow", ErrStepSizeUnderflow, "the problem may be stiff (try Rodas5P) or the solution may blow up near this time"},
	NonFinite:         {"non-finite state", ErrNonFinite, "check the field and parameters for overflow, division by zero or log of a negative number near this state"},
	NotRun:            {"not run", nil, ""},
	Stiff: {"stiff for the explicit method", ErrStiff, "the explicit method ran at the edge of its stability region, where the exact derivative of its replay grows without bound; " +
		"use Rodas5P (Settings.Method), or Auto to switch when the stiffness test fires"},
}

// String returns the status in words, as "step size underflow".
func (s Status) String() string {
	if int(s) < len(statusTable) {
		return statusTable[s].name
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Err returns the sentinel error of a failure status, nil for OK.
func (s Status) Err() error {
	if int(s) < len(statusTable) {
		return statusTable[s].err
	}
	return nil
}

// TrajectoryError reports a failed trajectory: which one, where it
// stopped, why, and what to try.
type TrajectoryError struct {
	Index  int     // trajectory index
	T      float64 // time reached
	H      float64 // last step size tried
	Status Status
	Method string
	Failed int // number of failed trajectories in the ensemble
}

func (e *TrajectoryError) Error() string {
	s := fmt.Sprintf("ode: trajectory %d stopped at t=%.6g (h=%.3g, %s): %v", e.Index, e.T, e.H, e.Method, e.Status)
	if e.Status == Stiff {
		s = fmt.Sprintf("ode: trajectory %d reached t=%.6g but is stiff for %s: no gradient", e.Index, e.T, e.Method)
	}
	switch {
	case e.Failed > 1 && e.Status == Stiff:
		s += fmt.Sprintf(" (%d trajectories are stiff)", e.Failed)
	case e.Failed > 1:
		s += fmt.Sprintf(" (%d trajectories failed)", e.Failed)
	}
	hint := statusTable[e.Status].hint
	if e.Method == Rodas5P.Name() || e.Method == Rosenbrock23.Name() {
		switch e.Status {
		case MaxStepsReached:
			hint = "increase Settings.MaxSteps or loosen the tolerances"
		case StepSizeUnderflow:
			hint = "the solution may blow up near this time, or the tolerances may be too tight for float64"
		}
	}
	if hint != "" {
		s += "; " + hint
	}
	return s
}

// Unwrap returns the sentinel error of the status.
func (e *TrajectoryError) Unwrap() error { return e.Status.Err() }
