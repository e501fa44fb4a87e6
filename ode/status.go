package ode

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Status is the outcome of one trajectory.
type Status uint8

const (
	OK                Status = iota // reached t1
	MaxStepsReached                 // the step budget (accepted + rejected) ran out
	StepSizeUnderflow               // the step size fell below the resolution of t
	NonFinite                       // the state or the error estimate stayed NaN or infinite
	NotRun                          // not integrated (another trajectory failed first)
	Stiff                           // an explicit method ran at its stability limit, or past it for a mode the solution does not excite (a gradient's record): no gradient
	EventNonFinite                  // an event's condition was NaN or infinite
	EventAtStart                    // an event's condition was exactly 0 at T0
	TooManyEvents                   // more events than Settings.MaxEvents, or events accumulating at one time
)

// Sentinel errors, one per failure status; a *TrajectoryError unwraps to one.
var (
	ErrMaxSteps          = errors.New("maximum number of steps reached")
	ErrStepSizeUnderflow = errors.New("step size underflow")
	ErrNonFinite         = errors.New("non-finite state or error estimate")
	ErrStiff             = errors.New("stiff for the explicit method")
	ErrEventNonFinite    = errors.New("non-finite event condition")
	ErrEventAtStart      = errors.New("event condition zero at the start")
	ErrTooManyEvents     = errors.New("too many events")
)

var statusTable = [...]struct {
	name string
	err  error
	hint string
}{
	OK:                {"ok", nil, ""},
	MaxStepsReached:   {"max steps reached", ErrMaxSteps, "increase Settings.MaxSteps, loosen the tolerances, or, if the problem is stiff, use Rodas5P"},
	StepSizeUnderflow: {"step size underflow", ErrStepSizeUnderflow, "the problem may be stiff (try Rodas5P) or the solution may blow up near this time"},
	NonFinite: {"non-finite state", ErrNonFinite, "check the field and parameters for overflow, division by zero or log of a negative number near this state " +
		"(and, if it stopped at an event, the state the event's Apply returns there)"},
	NotRun: {"not run", nil, ""},
	Stiff: {"stiff for the explicit method", ErrStiff, "the explicit method ran at the edge of its stability region, or outside it for a fast mode of ∂f/∂y that the solution does not excite " +
		"(a component that stays 0, as an empty compartment, or a state at rest), where the exact derivative of its replay grows without bound; " +
		"use Rodas5P (Settings.Method), or Auto to switch when the stiffness test fires"},
	EventNonFinite: {"non-finite event condition", ErrEventNonFinite, "an event's condition G returned NaN or an infinity at this state: check it for division by zero, log of a negative number or overflow"},
	EventAtStart:   {"event condition zero at the start", ErrEventAtStart, "an event's condition G is exactly 0 at T0, so whether it fires there is undefined: start the trajectory off the condition (or move T0)"},
	TooManyEvents: {"too many events", ErrTooManyEvents, "the trajectory passed Settings.MaxEvents events, or an event fired again at the time it had fired (its events accumulate there), " +
		"as a bouncing ball coming to rest does (infinitely many bounces in finite time): raise MaxEvents if the events are finite, " +
		"or add a terminal event that stops it (say, when the bounce velocity falls below a threshold)"},
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
// stopped, why, and what to try. Its message names the likely cause from
// what it knows: the time and step size reached, the span, the step
// counts and budget, the method, the stiffness test and the states (the
// fields after Failed are zero where unknown, and the hint then falls
// back to the status's general advice).
type TrajectoryError struct {
	Index  int     // trajectory index
	T      float64 // time reached
	H      float64 // last step size tried
	Status Status
	Method string
	Failed int // number of failed trajectories in the ensemble

	T0, T1             float64   // the trajectory's span (T1 = its end time); equal if unknown
	Accepted, Rejected int       // its steps so far
	MaxSteps           int       // the step budget it ran under (Settings.MaxSteps)
	RelTol             float64   // the relative tolerance (Settings.RelTol)
	AbsTol             []float64 // each component's absolute tolerance [Dim] (Settings.AbsTol or AbsTols)
	Stiff              bool      // the stiffness test of an explicit method fired on it
	Y0                 []float64 // its initial state [Dim]
	Y                  []float64 // its last accepted state [Dim], at T

	// float32 says the engine computed in float32 (a PrecisionEngine
	// with u = 2^-24), whose resolution of t the hints then name.
	float32 bool

	// noTime says T is not known (a mesh's status, without the steps
	// that led to it): the message then names no time.
	noTime bool

	// Cause, if not nil, is what was not finite in a trajectory whose
	// solve ended well (Status NonFinite from Solver.GradPartial): its
	// loss term (a *tape.NonFiniteError naming the operation) or its
	// rows of the gradient. The message then names it, not the state.
	Cause error
}

func (e *TrajectoryError) Error() string {
	// The last step tried and the method, where known (H is 0 where not).
	var how []string
	if e.H != 0 {
		how = append(how, fmt.Sprintf("h=%.3g", e.H))
	}
	if e.Method != "" {
		how = append(how, e.Method)
	}
	at := fmt.Sprintf("stopped at t=%.6g", e.T)
	if e.noTime {
		at = "failed"
	}
	if len(how) > 0 {
		at += " (" + strings.Join(how, ", ") + ")"
	}
	s := fmt.Sprintf("ode: trajectory %d %s: %v", e.Index, at, e.Status)
	if e.Cause != nil {
		s = fmt.Sprintf("ode: trajectory %d reached t=%.6g (%s), but %v", e.Index, e.T, e.Method, e.Cause)
	}
	if e.Status == Stiff {
		s = fmt.Sprintf("ode: trajectory %d reached t=%.6g but is stiff for %s: no gradient", e.Index, e.T, e.Method)
		if e.spanKnown() && e.T < e.T1 {
			s = fmt.Sprintf("ode: trajectory %d stopped at t=%.6g (of T1 = %.6g, after %d steps) where the stiffness test of %s fired: no gradient",
				e.Index, e.T, e.T1, e.Accepted+e.Rejected, e.Method)
		}
	}
	switch {
	case e.Failed > 1 && e.Status == Stiff:
		s += fmt.Sprintf(" (%d trajectories are stiff)", e.Failed)
	case e.Failed > 1:
		s += fmt.Sprintf(" (%d trajectories failed)", e.Failed)
	}
	if hint := e.hint(); hint != "" {
		s += "; " + hint
	}
	return s
}

// Unwrap returns the sentinel error of the status.
func (e *TrajectoryError) Unwrap() error { return e.Status.Err() }

// causeHint is the advice of a TrajectoryError with a Cause: the solve
// ended well, so the loss or a derivative is at fault.
const causeHint = "its solve ended well, so look at the loss (Loss.F or FP) and at the derivatives of the loss and the field near its solution: " +
	"division by zero, log or square root of a negative number (or a square root at 0, whose derivative is infinite), overflow"

// rosenbrockMethod reports whether the method called name is one of the
// built-in stiff (Rosenbrock) methods.
func rosenbrockMethod(name string) bool {
	return name == Rodas5P.Name() || name == Rosenbrock23.Name()
}

// farOrigin is how many times the span |t| must exceed before the
// resolution of t, rather than the solution, is named as the cause of a
// step-size underflow: shifting the origin then makes the smallest step
// at least that much smaller.
const farOrigin = 1e3

// blowUpGrowth is the growth of max|y| over max(1, max|y0|) at which a
// step-size underflow is named a likely blow-up.
const blowUpGrowth = 1e6

// farSpan is the factor by which the steps a span needs at a
// trajectory's pace must exceed its step budget for the span, rather
// than the budget, to be named as the cause of MaxStepsReached.
const farSpan = 1e3

// minPaceSteps is the fewest attempts from which a trajectory that ran out
// of steps has its need of steps estimated from its pace (maxStepsHint).
const minPaceSteps = 20

// hint returns the advice of the error's message: the likely cause, from
// what the error knows, and the fix.
func (e *TrajectoryError) hint() string {
	if e.Cause != nil {
		return causeHint
	}
	switch e.Status {
	case NonFinite:
		return e.nonFiniteHint()
	case StepSizeUnderflow:
		return e.underflowHint()
	case MaxStepsReached:
		return e.maxStepsHint()
	}
	return statusTable[e.Status].hint
}

// spanKnown reports whether the error knows the trajectory's span.
func (e *TrajectoryError) spanKnown() bool { return e.T1 > e.T0 }

// maxAbs returns max |x_i| (0 for an empty x).
func maxAbs(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}

// nonFiniteHint names, beside the status's general advice, a span far
// from the time origin when the step that made the state non-finite was
// the smallest step float64 resolves there: no smaller step could be
// tried, so the field, finite at the state, may have been stepped past
// its time scale.
func (e *TrajectoryError) nonFiniteHint() string {
	tmax := math.Max(math.Abs(e.T0), math.Abs(e.T1))
	span := e.T1 - e.T0
	if arith, floor := e.arithmetic(tmax); e.spanKnown() && tmax > farOrigin*span && e.H > 0 && e.H <= 1.1*floor {
		return fmt.Sprintf("the step that made it non-finite (h=%.3g) was the smallest %s resolves at t=%.6g (4ε·|t|), as the span [%v, %v] lies far from the time origin, "+
			"so the field may be stepped past its time scale: shift the span, solving from 0 to T1 − T0 = %.6g with the field's t replaced by t + T0 (an autonomous field needs no change); "+
			"else %s", e.H, arith, e.T, e.T0, e.T1, span, statusTable[NonFinite].hint)
	}
	if e.belowAbsTol() {
		return e.absTolHint() + "; else " + statusTable[NonFinite].hint
	}
	return statusTable[NonFinite].hint
}

// arithmetic returns the name of the arithmetic the trajectory ran in and
// the smallest step it resolves at |t| (4ε·|t|, ε its machine epsilon).
func (e *TrajectoryError) arithmetic(t float64) (string, float64) {
	if e.float32 {
		return "float32", stepFloor32 * math.Abs(t)
	}
	return "float64", minStep(math.Abs(t))
}

func (e *TrajectoryError) underflowHint() string {
	arith, floor := e.arithmetic(e.T)
	span := e.T1 - e.T0
	switch {
	case e.spanKnown() && math.Max(math.Abs(e.T0), math.Abs(e.T1)) > farOrigin*span:
		return fmt.Sprintf("at t=%.6g %s resolves no step below 4ε·|t| = %.3g, and the solution needs smaller ones; the span [%v, %v] lies far from the time origin: "+
			"shift it, solving from 0 to T1 − T0 = %.6g with the field's t replaced by t + T0 (an autonomous field needs no change)", e.T, arith, floor, e.T0, e.T1, span)
	case e.Accepted+e.Rejected > 0 && math.Abs(e.H) < 0x1p-1022: // H is known when the counts are
		return fmt.Sprintf("the step size shrank to zero: no step, however small, met the tolerance at t=%.6g, so the field's values are out of all proportion to the state there; "+
			"look for an extreme parameter or initial value (as 1e300) or an overflow inside the field", e.T)
	case e.belowAbsTol():
		return e.absTolHint()
	case e.Y != nil && e.Y0 != nil && maxAbs(e.Y) > blowUpGrowth*math.Max(1, maxAbs(e.Y0)):
		return fmt.Sprintf("the solution grew from max|y0| = %.3g to max|y| = %.3g: it seems to blow up near this time (a finite-time singularity near t=%.6g); "+
			"end the span before it, or check the parameters and initial state", maxAbs(e.Y0), maxAbs(e.Y), e.T)
	case e.spanKnown() && e.T == e.T0 && e.Accepted <= 1 && e.H < floor/2:
		// Plan.Init makes the first step at least the floor: an engine
		// whose first step is smaller did not advance t.
		return fmt.Sprintf("the first step (h=%.3g) did not advance t=%.6g in %s, whose smallest step there is 4ε·|t| = %.3g; if Settings.Dt0 is set, make it larger", e.H, e.T, arith, floor)
	case e.Stiff && !rosenbrockMethod(e.Method):
		return fmt.Sprintf("the stiffness test fired on this trajectory: the problem is stiff for %s; use Rodas5P", e.Method)
	case rosenbrockMethod(e.Method):
		return "the solution may blow up near this time, or the tolerances may be too tight for float64"
	}
	return statusTable[StepSizeUnderflow].hint
}

func (e *TrajectoryError) maxStepsHint() string {
	tries := e.Accepted + e.Rejected
	explicit := !rosenbrockMethod(e.Method)
	if e.Stiff && explicit {
		return fmt.Sprintf("the stiffness test fired on this trajectory: %s is held to small steps by its stability, not by the tolerances; use Rodas5P", e.Method)
	}
	// need estimates the attempts the whole span takes: at the pace so
	// far, or, where fewer, the attempts so far and the rest of the span
	// at the last step size (a pace that averages in the controller's
	// ramp from its small first steps reads thousands of steps for a span
	// that a dozen more cover).
	// The first minPaceSteps attempts are mostly the ramp itself (steps
	// growing up to tenfold from the first): no estimate from them.
	need := math.Inf(1)
	if e.spanKnown() && tries >= minPaceSteps && e.T > e.T0 {
		need = float64(tries) * (e.T1 - e.T0) / (e.T - e.T0)
		if h := math.Abs(e.H); h > 0 && !math.IsInf(h, 0) {
			need = math.Min(need, float64(tries)+(e.T1-e.T)/h)
		}
	}
	budget := float64(max(e.MaxSteps, tries))
	ifStiff := ""
	if explicit {
		ifStiff = " (or, if the problem is stiff, use Rodas5P)"
	}
	switch {
	case !math.IsInf(need, 1) && need > farSpan*budget:
		return fmt.Sprintf("at its pace so far (%d steps for t from %.6g to %.6g) the span T1 − T0 = %.3g needs about %.2g steps: it is far beyond the field's time scale; "+
			"shorten the span or rescale time%s", tries, e.T0, e.T, e.T1-e.T0, need, ifStiff)
	case e.Method == Rosenbrock23.Name():
		s := fmt.Sprintf("Rosenbrock23 is a low-order method (order %d, meant for loose tolerances) and needs many small steps", Rosenbrock23.Order())
		if e.RelTol > 0 {
			s += fmt.Sprintf(" at RelTol = %.3g", e.RelTol)
		}
		return s + fmt.Sprintf("; use Rodas5P (order %d), or increase Settings.MaxSteps", Rodas5P.Order()) + e.aboutSteps(need)
	case explicit:
		return "increase Settings.MaxSteps" + e.aboutSteps(need) + ", loosen the tolerances, or, if the problem is stiff, use Rodas5P"
	}
	return "increase Settings.MaxSteps" + e.aboutSteps(need) + " or loosen the tolerances"
}

// aboutSteps returns " (to about K: at its pace so far the trajectory
// needs about N steps)" for an estimate need of the attempts the whole
// trajectory takes, or "" if it is unknown.
func (e *TrajectoryError) aboutSteps(need float64) string {
	if math.IsInf(need, 0) || math.IsNaN(need) || need > 1e15 {
		return ""
	}
	return fmt.Sprintf(" (to about %.0f: at its pace so far the trajectory needs about %.0f steps)", roundUp(1.2*need, 2), roundUp(need, 3))
}

// roundUp rounds x > 0 up to k significant digits.
func roundUp(x float64, k int) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x))+1-float64(k))
	return math.Ceil(x/p) * p
}

// describe fills in the fields the hint reads, for trajectory e.Index
// of problem q run with settings set on engine eng, from its result res.
// (Y, the last accepted state, comes from the engine: Result.Y holds NaN
// for a failed trajectory.)
func (e *TrajectoryError) describe(q *problem, set *Settings, res *Result, eng Engine) {
	i, d := e.Index, q.Field.Dim
	e.float32 = computesFloat32(eng)
	e.T0, e.T1 = q.T0, q.t1[i]
	e.MaxSteps, e.RelTol = set.MaxSteps, set.RelTol
	if st := res.Stats; len(st.Accepted) > i && len(st.Rejected) > i {
		e.Accepted, e.Rejected = st.Accepted[i], st.Rejected[i]
	}
	if len(res.Stiff) > i {
		e.Stiff = res.Stiff[i]
	}
	e.Y0 = append([]float64(nil), q.y0[i*d:(i+1)*d]...)
	e.AbsTol = make([]float64, d)
	for c := range e.AbsTol {
		e.AbsTol[c] = set.absTol(c)
	}
}

// belowAbsTol reports whether the trajectory's initial state is not zero
// but no component of it exceeds its absolute tolerance: the error
// control then asks no relative accuracy of the solution, whose steps
// may follow a numerical solution far from the true one (LotkaVolterra
// scaled to populations of 1e-12 at the default AbsTol 1e-9: Tsit5
// wanders off until its step size underflows, Rodas5P ends with
// populations of −1.5e-10).
func (e *TrajectoryError) belowAbsTol() bool {
	if len(e.AbsTol) != len(e.Y0) || maxAbs(e.Y0) == 0 {
		return false
	}
	for c, y := range e.Y0 {
		if math.Abs(y) > e.AbsTol[c] {
			return false
		}
	}
	return true
}

// absTolHint is the advice of a failure whose initial state lies below
// its absolute tolerances (belowAbsTol).
func (e *TrajectoryError) absTolHint() string {
	return fmt.Sprintf("the initial state is no larger than the absolute tolerance (max|y0| = %.3g, AbsTol %.3g), so the error control asks no relative accuracy of it "+
		"and the steps may have followed a numerical solution far from the true one; set AbsTol (or AbsTols, per component) well below the states' scale, "+
		"as RelTol·max|y0| = %.3g", maxAbs(e.Y0), maxAbs(e.AbsTol), e.RelTol*maxAbs(e.Y0))
}
