package ode

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/tape"
)

// Field is the right-hand side y' = F(t, y, p) of an ODE system of
// dimension Dim, written as an ordinary Go function over traced values
// (package tape). A Solver traces F once, when it is made, and its trace is
// the program every engine runs: keep F deterministic (the same Go code
// path on every call), since meshes are checked against the trace's
// fingerprint.
//
// p holds the field's parameters: the first Params are per trajectory
// (one value per trajectory, gradient per trajectory), the next Shared are
// shared by the whole ensemble (neural-network weights, for example;
// gradient summed over trajectories). F must return exactly Dim values.
type Field struct {
	// Name names the field in programs and errors.
	Name string

	// Dim is the state dimension d (at least 1).
	Dim int

	// Params is the number of per-trajectory parameters, Shared the number
	// of shared ones.
	Params, Shared int

	// F computes y'(t) from t, y (len Dim) and p (len Params+Shared).
	F func(t tape.V, y, p []tape.V) []tape.V

	// Jac optionally gives the Jacobian ∂F/∂y analytically as Dim×Dim
	// traced values in row-major order; nil means it is derived from F by
	// forward mode. Only the Rosenbrock methods use it.
	Jac func(t tape.V, y, p []tape.V) []tape.V

	// Stiff marks a field as stiff, so the router picks a stiff method
	// when Settings.Method is nil.
	Stiff bool
}

// Inputs of the traced field program, in this order: t, y[0..d), then the
// parameters (per-trajectory ones, then shared ones).
func (f *Field) inputs() []tape.Input {
	in := make([]tape.Input, 0, 1+f.Dim+f.Params+f.Shared)
	in = append(in, tape.Input{Name: "t"})
	for i := 0; i < f.Dim; i++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("y[%d]", i)})
	}
	for i := 0; i < f.Params; i++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("p[%d]", i)})
	}
	for i := 0; i < f.Shared; i++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("s[%d]", i), Shared: true})
	}
	return in
}

// Program traces F and returns its program: inputs t, y, per-trajectory
// parameters, shared parameters; outputs y'. It returns an error naming
// the field if F misuses traced values or returns the wrong number of
// values.
func (f *Field) Program() (*tape.Program, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	name := f.name()
	var nout int
	p, err := tape.Trace(name, f.inputs(), func(in []tape.V) []tape.V {
		d := f.Dim
		out := f.F(in[0], in[1:1+d], in[1+d:])
		nout = len(out)
		if nout != d {
			return nil
		}
		return out
	})
	if err != nil {
		return nil, fmt.Errorf("ode: field %s: %w", name, err)
	}
	if nout != f.Dim {
		return nil, fmt.Errorf("ode: field %s returned %d values, want Dim = %d", name, nout, f.Dim)
	}
	return p, nil
}

func (f *Field) name() string {
	if f.Name == "" {
		return "field"
	}
	return f.Name
}

func (f *Field) check() error {
	switch {
	case f.F == nil:
		return fmt.Errorf("ode: field %s has no F", f.name())
	case f.Dim < 1:
		return fmt.Errorf("ode: field %s has Dim = %d; it must be at least 1", f.name(), f.Dim)
	case f.Params < 0 || f.Shared < 0:
		return fmt.Errorf("ode: field %s has negative parameter counts (Params %d, Shared %d)", f.name(), f.Params, f.Shared)
	case f.Dim > maxFieldInputs || f.Params > maxFieldInputs || f.Shared > maxFieldInputs || f.Dim+f.Params+f.Shared > maxFieldInputs:
		return fmt.Errorf("ode: field %s has Dim + Params + Shared = %d + %d + %d inputs, more than the %d a field's traced program may have: %w; "+
			"check the sizes (the solvers are made for small systems: a state of thousands of components, networks of up to millions of shared weights)",
			f.name(), f.Dim, f.Params, f.Shared, maxFieldInputs, ErrTooLarge)
	}
	return nil
}

// maxFieldInputs bounds Dim + Params + Shared: the trace of a field with
// more inputs would take gigabytes before its first operation (a traced
// value per input, and the programs built from the trace several times
// that), and its value IDs are int32 (tape.ID).
const maxFieldInputs = 1 << 24
