package ode

import (
	"fmt"
	"sync"

	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Plan holds every program an engine needs to run adaptive solves, replays
// and gradients of one field with one method and one controller: the
// complete definition of the computation, in a form a code generator can
// walk (plain tape programs with documented inputs and outputs) without
// any of package ode's internals. An engine is then a small driver loop
// around these programs:
//
//	state = (t0, h, 1, last, 0…) and k1 from Init
//	repeat: y⁺, err[, k_s], hρ = Trial(t, h, y, p, s[, k1])
//	        state', accept, status = Control(state, t1, y, y⁺, err, hρ; rtol, atol, maxsteps)
//	        on accept: store h in the mesh, y = y⁺ (and k1 = k_s if FSAL)
//	until status != StatusRunning
//
// A replay runs Replay over a mesh; a gradient runs Reverse backwards over
// it (Dense and DenseReverse interpolate save times of Rosenbrock
// methods). A Plan is immutable once built and safe for concurrent use.
//
// Common inputs: t (time), h (step size), y[Dim] (state), p[Params]
// (per-trajectory parameters), s[Shared] (shared parameters, marked
// Shared in the programs). Every input and output is named in its program.
type Plan struct {
	// Method is the method's name ("Tsit5").
	Method string
	// Order and ErrOrder are the orders of the solution and of the
	// controller (exponent 1/(ErrOrder+1)).
	Order, ErrOrder int
	// Dim, Params and Shared are the field's state dimension and numbers of
	// per-trajectory and shared parameters.
	Dim, Params, Shared int
	// FSAL reports that Trial takes the first stage k1[Dim] as its last
	// input and returns the last stage k_s[Dim] after err.
	FSAL bool
	// TrialEvals and InitEvals are the field evaluations of one trial step
	// and of the initial step, for statistics.
	TrialEvals, InitEvals int
	// Fingerprint identifies the traced field and the method (a hash of
	// the trial program): a mesh records it, and a mesh is replayed only by
	// a plan with the same fingerprint.
	Fingerprint string

	// Field is the traced right-hand side: inputs t, y, p, s; outputs
	// f[Dim].
	Field *tape.Program

	// Init is the initial step: inputs t0, t1, y, p, s, then shared rtol,
	// atol[Dim]; outputs h, last (1 if h reaches t1) and f0[Dim].
	Init *tape.Program

	// Trial is one trial step: inputs t, h, y, p, s (and k1[Dim] if FSAL);
	// outputs y⁺[Dim], err[Dim] (the local error estimate, h included),
	// k_s[Dim] if FSAL, and hρ (the stiffness estimate; 0 if none).
	Trial *tape.Program

	// Control decides a trial step: see buildControl for its inputs and
	// outputs, and the State constants for the controller state.
	Control *tape.Program

	// Replay is the replay step: inputs t, h, y, p, s; outputs y⁺[Dim], bit
	// for bit Trial's y⁺.
	Replay *tape.Program

	// Dense, if not nil, is the method's continuous extension: inputs t,
	// h, y, p, s, θ; outputs y(t + θ·h)[Dim]. Save times are then read
	// from it; when nil, each save time is a genuine step from the mesh
	// point before it (Replay with h = τ − t_k). It is set only with
	// Settings.DenseOutput, for a method that has one (Rodas5P).
	Dense *tape.Program

	once     sync.Once
	rev      *tape.Program
	denseRev *tape.Program
	revErr   error
}

// Reverse returns the reverse (VJP) program of Replay: inputs t, h, y, p,
// s (shared), λ[Dim], gp[Params]; outputs λ' = (∂y⁺/∂y)ᵀλ [Dim],
// gp + (∂y⁺/∂p)ᵀλ [Params] and gs = (∂y⁺/∂s)ᵀλ [Shared], all per
// trajectory: gs is the step's own contribution to the shared gradient,
// which engines sum over steps and trajectories (see scan.Reverse). It is
// built on first use.
func (pl *Plan) Reverse() (*tape.Program, error) {
	pl.buildReverse()
	return pl.rev, pl.revErr
}

// DenseReverse returns the reverse program of Dense (nil if there is
// none): inputs t, h, y, p, s, θ, λ, gp; outputs as Reverse.
func (pl *Plan) DenseReverse() (*tape.Program, error) {
	pl.buildReverse()
	return pl.denseRev, pl.revErr
}

func (pl *Plan) buildReverse() {
	pl.once.Do(func() {
		pl.rev, pl.revErr = scan.Reverse(pl.Replay, pl.Dim, pl.Params, pl.Shared)
		if pl.revErr == nil && pl.Dense != nil {
			pl.denseRev, pl.revErr = scan.Reverse(pl.Dense, pl.Dim, pl.Params, pl.Shared)
		}
	})
}

// newPlan builds the plan of field f (traced as fp) for the settings s
// (with defaults filled in).
func newPlan(f *Field, fp *tape.Program, s *Settings) (*Plan, error) {
	m := s.Method
	sp, err := m.steps(f, fp)
	if err != nil {
		return nil, fmt.Errorf("ode: %s: building the %s step: %w", f.name(), m.Name(), err)
	}
	pl := &Plan{
		Method: m.Name(), Order: m.Order(), ErrOrder: m.ErrOrder(),
		Dim: f.Dim, Params: f.Params, Shared: f.Shared,
		FSAL: sp.fsal, TrialEvals: sp.fevals, InitEvals: 2,
		Field: fp, Trial: sp.trial, Replay: sp.replay,
		Fingerprint: sp.trial.Hash()[:16],
	}
	if s.DenseOutput {
		pl.Dense = sp.dense // nil for a method without a continuous extension
	}
	if s.Dt0 > 0 {
		pl.InitEvals = 1
	}
	if pl.Init, err = buildInit(f, fp, m.Order(), s.Dt0); err != nil {
		return nil, err
	}
	if pl.Control, err = buildControl(s.Controller, f.Dim, stabilitySize(m.Name())); err != nil {
		return nil, fmt.Errorf("ode: %s: building the controller: %w", f.name(), err)
	}
	return pl, nil
}
