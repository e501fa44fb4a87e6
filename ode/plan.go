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
// it. Save times are read from the method's continuous extension (unless
// Settings.Saves is SaveStep): an engine either runs DenseStep on each step
// that brackets a save time and Interp for each save time in it (the CPU
// and GPU engines: no extra steps), or Dense for each save time (one step
// each); both compute the same values, to rounding. A Plan is immutable once
// built and safe for concurrent use.
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
	// the method's own trial program, also in a variant's plan, whose
	// meshes are the method's): a mesh records it, and a mesh is replayed
	// only by a plan with the same fingerprint.
	Fingerprint string

	// Variant names the plan's variant of the method's programs: "" for
	// the method's own, "auto" for Method Auto's Tsit5 plan, whose Trial
	// and TrialDense return as hρ the stiffness estimate h·max(ρ_2, ρ_r,
	// ρ_e) (see Auto) where Tsit5's own return Hairer's h·ρ_2, and whose
	// Control runs Auto's stiffness test (a lower boundary, and an error
	// floor; see stiffTestOf); its other programs, Method and Fingerprint
	// are Tsit5's. Engines run the programs as they are; the variant is for
	// reports and kernel names.
	Variant string

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

	// Probe is the stability probe of an explicit method (nil for the
	// Rosenbrock methods), which a record with Job.CheckStability runs
	// beside the loop above to find modes of J = ∂f/∂y that the steps
	// leave outside the method's stability region although the solution
	// does not excite them (the controller's stiffness test reads the
	// stages, so it cannot see those; the discrete adjoint of such a mesh
	// amplifies them, and the gradient is meaningless). It is two steps of
	// power iteration on J with the growth of the probed mode over the
	// step: inputs t, h, y, p, s, v[Dim], rprev, u, accept; outputs
	// v'[Dim], rprev', u', stiff (see buildProbe for the arithmetic).
	// Per trajectory an engine keeps v (ProbeStart at T0), rprev (0) and
	// u (1), and on every trial whose index n (the trials it tried
	// before: accepted + rejected, as the trials of a solve from T0
	// without events count) is due (ProbeDue(n): the multiples of
	// ProbeEvery and ProbeEvery/4; every trial where the
	// trajectory switches to Method Auto's stiff plan where it stops:
	// Job.Continues, or the CPU engine's switch in place), after Control,
	// runs
	//
	//	v, rprev, u, stiff = Probe(t, h, y, p, s, v, rprev, u, accept)
	//	if stiff == 1: state'[StateStiff] = 1
	//
	// with t, h and y the trial's step and the state it started from,
	// accept Control's. The trajectory then counts as stiff (Result.Stiff;
	// with Job.StopOnStiff it stops there with status Stiff) once the
	// probed steps amplify the dominant mode of J, taken as −ρ on the
	// real axis, more than ProbeGrowth times over some run of them. Where
	// the trajectory stops or switches there (Job.StopOnStiff, or Method
	// Auto's switch in place), an accepted trial on which stiff is 1 is
	// rejected instead, so that no mesh holds it (Method Auto's stiff plan
	// takes that step): accept becomes 0, state' is state but for
	// rejected + 1 and StateStiff = 1, and a status OK becomes
	// StatusRunning; the trajectory stops at the state the step started
	// from.
	Probe       *tape.Program
	ProbeEvery  int       // trials between probes (see Probe and ProbeDue)
	ProbeStart  []float64 // the start vector v [Dim]
	ProbeGrowth float64   // the growth at which the probe marks a trajectory stiff (the output stiff)

	// Replay is the replay step: inputs t, h, y, p, s; outputs y⁺[Dim], bit
	// for bit Trial's y⁺.
	Replay *tape.Program

	// DenseStep, Interp and Dense are the method's continuous extension
	// (dense output), set unless Settings.Saves is SaveStep; when nil,
	// each save time is a genuine step from the mesh point before it
	// (Replay with h = τ − t_k). On a step from (t, y) of size h the
	// extension is
	//
	//	y(t + θh) = y + Σ_{j=1…DenseTerms} θ^j·w_j,   θ ∈ [0, 1],
	//
	// DenseStep is the replay step that also returns the coefficients:
	// inputs t, h, y, p, s; outputs y⁺[Dim] (bit for bit Replay's), then
	// w[DenseTerms·Dim] (w_j[c] at (j−1)·Dim + c). Its cost is a replay
	// step's plus, for Vern7, six extra stages (Tsit5 7 field
	// evaluations, Vern7 15, Rodas5P and Rosenbrock23 as their steps).
	// Interp evaluates the polynomial: inputs y[Dim], w[DenseTerms·Dim],
	// θ (all per trajectory); outputs y(t + θh)[Dim], by Horner's rule
	// (y + θ·(w_1 + θ·(w_2 + …))), DenseTerms·Dim multiply-adds. Dense
	// is the two composed, for engines that evaluate each save time with
	// one program: inputs t, h, y, p, s, θ; outputs y(t + θh)[Dim].
	//
	// A save time τ on a trajectory is read from the step k with
	// t_k ≤ τ < t_k + h_k at θ = (τ − t_k)/h_k (the CPU engine; τ on a
	// mesh point is then that point's state exactly), or from the step
	// with t_k < τ ≤ t_k + h_k (θ = 1 at a mesh point: the same state to
	// rounding, since each extension ends at its step's y⁺); τ ≤ T0 is
	// y0 and τ at or after the trajectory's end its final state.
	DenseStep  *tape.Program
	Interp     *tape.Program
	Dense      *tape.Program
	DenseTerms int

	// TrialDense is Trial with the continuous extension's coefficients:
	// inputs Trial's; outputs Trial's, then w[DenseTerms·Dim], on an
	// accepted step bit for bit DenseStep's (set with DenseStep). An
	// engine that reads save times as it records (the CPU engine's Solve,
	// and its gradient's record) runs it in place of Trial on the
	// iterations where a save time falls inside a trajectory's step, and
	// evaluates those save times from the accepted steps with Interp's
	// rule (scan.Interp), without a replay. It costs Trial's field
	// evaluations plus, for Vern7, six extra stages.
	TrialDense *tape.Program

	// Events holds the events of Settings.Events as programs (nil
	// without events); only an engine that implements EventEngine gets
	// a plan with events.
	Events *EventPlan

	once         sync.Once
	rev          *tape.Program
	denseRev     *tape.Program
	denseStepRev *tape.Program
	revErr       error
	denseOnce    sync.Once
	denseErr     error
	stepOnce     sync.Once
	stepErr      error
	cpu          cpuPrepared // the CPU engine's preparation (Plan.cpuMasters)
}

// ProbeDue reports whether the stability probe (Probe) runs on the trial
// whose count before it (accepted + rejected steps) is n: n a multiple of
// ProbeEvery (n = 0 included), or n = ProbeEvery/4. The extra early probe
// is there because a trajectory's steps grow fastest from Init's step,
// which is small (up to Controller.FactorMax a step), and a short
// trajectory may have no sixteenth trial: a mode its first steps leave
// outside the stability region is then found by its fifth. False
// without a probe.
func (pl *Plan) ProbeDue(n int) bool {
	if pl.ProbeEvery <= 0 {
		return false
	}
	return n%pl.ProbeEvery == 0 || n == pl.ProbeEvery/4
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
// none): inputs t, h, y, p, s, θ, λ, gp; outputs as Reverse. It is built
// on first use.
func (pl *Plan) DenseReverse() (*tape.Program, error) {
	pl.buildReverse()
	if pl.revErr != nil {
		return nil, pl.revErr
	}
	pl.denseOnce.Do(func() {
		if pl.Dense != nil {
			pl.denseRev, pl.denseErr = scan.Reverse(pl.Dense, pl.Dim, pl.Params, pl.Shared)
		}
	})
	return pl.denseRev, pl.denseErr
}

// DenseStepReverse returns the reverse program of DenseStep (nil if there
// is none): inputs t, h, y, p, s, λ[Dim] (the cotangent of y⁺),
// w̄[DenseTerms·Dim] (the cotangents of the coefficients), gp[Params];
// outputs as Reverse. A gradient runs it, in place of Reverse, on the
// steps that bracket save times, with w̄ = Σ over the save times in the
// step of θ^j·ȳ(τ) for w_j (the interpolant's VJP). It is built on first
// use.
func (pl *Plan) DenseStepReverse() (*tape.Program, error) {
	pl.stepOnce.Do(func() {
		if pl.DenseStep != nil {
			pl.denseStepRev, pl.stepErr = scan.Reverse(pl.DenseStep, pl.Dim, pl.Params, pl.Shared)
		}
	})
	return pl.denseStepRev, pl.stepErr
}

func (pl *Plan) buildReverse() {
	pl.once.Do(func() {
		pl.rev, pl.revErr = scan.Reverse(pl.Replay, pl.Dim, pl.Params, pl.Shared)
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
		Variant: sp.variant,
	}
	own := sp.trial
	if sp.own != nil {
		own = sp.own
	}
	pl.Fingerprint = own.Hash()[:16]
	if s.Saves == SaveInterpolate {
		if err := pl.setDense(f, sp); err != nil {
			return nil, fmt.Errorf("ode: %s: building the %s dense output: %w", f.name(), m.Name(), err)
		}
	}
	if len(s.Events) > 0 {
		if pl.DenseStep == nil {
			return nil, fmt.Errorf("ode: %s: events are located on the continuous extension: use Settings.Saves = SaveInterpolate (the default)", f.name())
		}
		if pl.Events, err = buildEvents(f, s.Events, s.MaxEvents); err != nil {
			return nil, err
		}
	}
	if s.Dt0 > 0 {
		pl.InitEvals = 1
	}
	if pl.Init, err = buildInit(f, fp, m.Order(), s.Dt0); err != nil {
		return nil, err
	}
	if pl.Control, err = buildControl(s.Controller, f.Dim, stabilitySize(m.Name()), stiffTestOf(sp.variant)); err != nil {
		return nil, fmt.Errorf("ode: %s: building the controller: %w", f.name(), err)
	}
	if e, ok := m.(*erk); ok && stabilitySize(m.Name()) > 0 {
		if pl.Probe, err = buildProbe(f, fp, stabilityPoly(e.tab), probeGrowth); err != nil {
			return nil, err
		}
		pl.ProbeEvery, pl.ProbeGrowth, pl.ProbeStart = probeEvery, probeGrowth, probeStart(f.Dim)
	}
	return pl, nil
}

// setDense sets the plan's continuous extension from the method's dense
// step.
func (pl *Plan) setDense(f *Field, sp *stepPrograms) error {
	pl.DenseStep, pl.DenseTerms, pl.TrialDense = sp.denseStep, sp.terms, sp.trialDense
	var err error
	if pl.Interp, err = buildInterp(sp.denseStep.Name, f.Dim, sp.terms); err != nil {
		return err
	}
	pl.Dense, err = buildDense(f, pl.DenseStep, pl.Interp)
	return err
}
