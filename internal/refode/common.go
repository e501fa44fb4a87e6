package refode

import (
	"errors"
	"fmt"
	"math"
)

// Func evaluates the right-hand side dy = f(t, y) of y' = f(t, y). It must
// not retain y or dy.
type Func func(t float64, y, dy []float64)

// JacFunc evaluates the Jacobian ∂f/∂y at (t, y) into J, row-major d×d:
// J[i*d+j] = ∂f_i/∂y_j. J is zeroed before each call.
type JacFunc func(t float64, y []float64, J []float64)

// Options tunes the integrators. The zero value (or a nil *Options) selects
// Hairer's defaults.
type Options struct {
	// MaxSteps bounds the number of attempted steps over the whole
	// integration (default 10 000 000 for DOP853, 1 000 000 for Radau5).
	MaxSteps int
	// InitialStep is the first trial step size; 0 selects Hairer's HINIT
	// (DOP853) or 1e-6 (Radau5).
	InitialStep float64
	// MaxStep bounds |h|; 0 means the whole integration span.
	MaxStep float64
	// Atol, when non-nil, gives per-component absolute tolerances and
	// overrides the scalar atol argument. For SolveSens it has length d and
	// row i of the sensitivity matrix uses Atol[i].
	Atol []float64
}

// Stats counts the work an integration did.
type Stats struct {
	Steps    int // attempted steps
	Accepted int
	Rejected int // error-test rejections after the first accepted step
	FEvals   int
	JEvals   int // Radau5 only
	LUs      int // Radau5 only: decompositions of both Newton matrices
}

var (
	// ErrMaxSteps is returned when Options.MaxSteps is exceeded.
	ErrMaxSteps = errors.New("refode: maximum number of steps exceeded")
	// ErrStepTooSmall is returned when the step size underflows relative to t.
	ErrStepTooSmall = errors.New("refode: step size too small")
	// ErrSingular is returned when the Newton matrix is repeatedly singular.
	ErrSingular = errors.New("refode: Newton matrix repeatedly singular")

	errTolTooSmall = errors.New("refode: rtol too small for Radau5 (must exceed 1e-15)")
)

// stepper is a one-output-time-at-a-time integrator: integrate advances the
// internal state exactly to tend.
type stepper interface {
	integrate(tend float64) error
	state() []float64
}

// checkArgs validates common arguments and returns the per-component
// absolute tolerances.
func checkArgs(n int, t0 float64, ts []float64, rtol, atol float64, o *Options) ([]float64, error) {
	if n == 0 {
		return nil, errors.New("refode: empty initial state")
	}
	if !(rtol > 0) || math.IsInf(rtol, 0) {
		return nil, fmt.Errorf("refode: rtol must be positive, got %v", rtol)
	}
	a := make([]float64, n)
	if o != nil && o.Atol != nil {
		if len(o.Atol) != n {
			return nil, fmt.Errorf("refode: len(Options.Atol) = %d, want %d", len(o.Atol), n)
		}
		copy(a, o.Atol)
	} else {
		for i := range a {
			a[i] = atol
		}
	}
	for _, v := range a {
		if !(v > 0) {
			return nil, fmt.Errorf("refode: atol must be positive, got %v", v)
		}
	}
	dir := 0.0
	prev := t0
	for i, t := range ts {
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return nil, fmt.Errorf("refode: output time ts[%d] = %v", i, t)
		}
		if t == prev {
			continue
		}
		s := math.Copysign(1, t-prev)
		if dir == 0 {
			dir = s
		} else if s != dir {
			return nil, fmt.Errorf("refode: output times must be monotone from t0 (ts[%d] = %v)", i, t)
		}
		prev = t
	}
	return a, nil
}

// span returns max |ts[i] - t0|.
func span(t0 float64, ts []float64) float64 {
	s := 0.0
	for _, t := range ts {
		s = math.Max(s, math.Abs(t-t0))
	}
	return s
}

// drive integrates s through ts and collects copies of the state.
func drive(s stepper, ts []float64) ([][]float64, error) {
	out := make([][]float64, len(ts))
	for i, t := range ts {
		if err := s.integrate(t); err != nil {
			return out[:i], fmt.Errorf("%w (at output time %v)", err, t)
		}
		out[i] = append([]float64(nil), s.state()...)
	}
	return out, nil
}

func sign(x float64) float64 {
	if x < 0 {
		return -1
	}
	return 1
}
