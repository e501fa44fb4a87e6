package ode

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Event is a condition g(t, y, p) whose zero crossings a solve locates on
// every trajectory independently (Settings.Events). On an accepted step
// from (t, y) to (t + h, y⁺) where g changes sign (in Direction, if set),
// the root is first located on the step's continuous extension and then
// polished on the method's own step: the recorded mesh ends that step at
// the event time t* (a genuine step of size h* = t* − t, whose end state
// is a root of g to rounding), and the trajectory stops there (Terminal)
// or continues from the event, after Apply if set.
//
// Gradients are exact through event times. The event step's size is a
// function of the state before it and the parameters, defined by
// G(h*) = g(t + h*, Φ(t, h*, y, p), p) = 0 with Φ the method's step, so
// by the implicit function theorem
//
//	dh*/dx = −(∂G/∂x)/(∂G/∂h),  ∂G/∂h = ∂g/∂t + ∂g/∂y·∂Φ/∂h,
//
// the discrete form of dt*/dp = −(∂g/∂p + ∂g/∂y·∂y/∂p)/(∂g/∂t + ∂g/∂y·f).
// Every step after an event starts at a time that moves with t*, and the
// last step ends at T1 (h = T1 − t), so the reverse sweep carries the
// cotangent of time as well as that of the state.
//
// A condition is checked on every accepted step at eight points of its
// continuous extension, θ = 1/8, 2/8, …, 1 (DifferentialEquations.jl's
// ContinuousCallback checks ten; Diffrax the step's end only): a
// crossing means g goes from < 0 to ≥ 0 (rising) or from > 0 to ≤ 0
// (falling) between two of them; g exactly 0 at the start of a step
// (just after the event that put it there) is no crossing, so an event
// does not fire twice at one time (an Apply that moves g off its root,
// as a refill of the level it watches, starts the next step from g's new
// value, so the jump itself is no crossing either); where it would (its events
// accumulating there, as a ball's bounces when it comes to rest: below
// the rounding of its height, the state after a bounce is already under
// the floor) the trajectory ends with TooManyEvents, as past
// Settings.MaxEvents. A crossing and its return within one eighth of a
// step are seen as none, and an odd number of crossings there as one of
// them (not always the first); a step where several events cross ends at
// the earliest.
//
// # Events whose roots coincide
//
// Every event whose condition has crossed by the event time t* (on the
// state there, before any jump: its root coincides with the earliest, as
// two doses at t = 1 or a bounce and a counter on a ball's height, or
// lies before it by less than the samples and the extension tell apart)
// fires at t* too: the non-terminal ones in Settings.Events order, each
// Apply mapping the state the one before it left, then the first
// terminal one if any, which ends the trajectory in the state after
// their jumps (a stop and a dose at one time give the dosed state; a
// second terminal event does not fire). The engines agree (CPU and GPU).
// The mesh records each event after the first as a step of size 0 at t*
// (one mark a step, Mesh.Events; Stats.Accepted counts these steps, and
// each event counts toward Settings.MaxEvents), so a replay and a
// gradient run them as any event step. The gradient is that of the
// branch on which the events come in this order: each one's time is
// differentiated by the implicit function theorem on its own condition,
// from the state the jumps before it left. It is exact where the roots
// coincide identically (conditions of time, or one condition, that the
// jumps before do not move: two doses at one time with their own
// amounts and times, a bounce with a counter or a stop on its
// condition; ode's TestEventCoinciding* check the closed forms); where a
// jump moves a coinciding event's condition off zero (a dose into the
// compartment a threshold reads at that instant) the event times have
// no derivative, and the one returned is that of this order. Diffrax
// reports every event that triggers at the located time (its event
// mask); DifferentialEquations.jl's VectorContinuousCallback (since
// OrdinaryDiffEq.jl pull request 3230) calls affect! with every index
// that triggers at one time, in an order the user's affect! chooses
// (before, only the first fired, as here before).
//
// # Events that go unseen
//
// The steps follow the solution, not the conditions, so a
// condition that changes sign faster than the state changes (sin(ωt) of a
// slow state: with Vern7 at RelTol 1e-8 and ω = 20, 9 of 65 zeros are
// seen) or a near-tangent crossing (a tossed ball reaching a height
// 1e-4 below its apex: two crossings 0.009 apart, inside one eighth of
// Tsit5's steps) can go unseen: put what the condition follows into the
// state (then the steps resolve it) or split the span. A tangent zero
// that is sampled (g reaching exactly 0) fires, and Grad returns an
// error there (the event time has no derivative).
//
// # Save times
//
// Save times (Problem.SaveAt) are read from the step that brackets them
// by the usual rule (t ≤ τ < t + h, see Plan.DenseStep), event steps
// included: a save time inside an event step is read from that step's
// own continuous extension (of size h*), so it too moves with t*. A save
// time exactly at a non-terminal event time t* is the state after the
// event, after Apply (the state the trajectory continues from: the
// start of the next step), the right-hand limit, as DifferentialEquations.jl
// saves after the jump; its gradient is that of this branch, on which
// the event comes first (the save stays at its time while t* moves). An
// event exactly at T1 fires too: the final state is the state after its
// jump, with the gradient of the same branch. A save time exactly at a
// terminal event is the state at the event, with the gradient of the
// branch where the trajectory reaches it (the save stays at its time;
// the final state moves with t*). A save time
// after a terminal event has no state: Solve returns NaN for it (as
// Diffrax returns inf past a terminal event) with the trajectory's
// status OK and Solution.T its event time, while Loss and Grad, whose
// loss would be NaN, return an error naming the trajectory and the save
// time. Gradients through saved states are exact: each save's cotangent
// enters the reverse sweep at its step, with respect to the step's
// start time and size too (θ = (τ − t)/h), so through the event times.
//
// # Meshes
//
// A mesh recorded with events marks its event steps (Mesh.Events) and
// names the events it was recorded with (Mesh.EventHash). Replay, Loss
// and Grad on it re-run the record's steps, event steps and jumps, bit
// for bit, and Grad on it is Grad with m = nil: the event steps' sizes
// are differentiated by the implicit function theorem as in the record
// (so the gradient is that of the recorded solution, not of the fixed
// steps). A mesh recorded without these events (or a problem without
// events given a mesh with them) is refused.
type Event struct {
	// Name names the event in errors ("event <index>" if empty).
	Name string

	// G is the condition: a traced function of the time, the state (len
	// Dim) and the parameters (len Params + Shared, per-trajectory first),
	// as Field.F takes them. It must depend on t or y (one of parameters
	// alone is constant along a trajectory, so it never crosses zero).
	G func(t tape.V, y, p []tape.V) tape.V

	// Direction restricts the crossings: +1 rising only, −1 falling
	// only, 0 both.
	Direction int

	// Terminal ends the trajectory at the event: its final time
	// (Solution.T) and state are those at the event.
	Terminal bool

	// Apply, if not nil, maps the state at a non-terminal event to the
	// state the trajectory continues from (a bounce, a dose): inputs as
	// G's, outputs Dim values. Its derivative enters the gradient.
	Apply func(t tape.V, y, p []tape.V) []tape.V
}

// DefaultMaxEvents is the default of Settings.MaxEvents.
const DefaultMaxEvents = 100

// ErrNoEvents is returned (wrapped) by NewSolver when the settings have
// events and the engine cannot run them (see EventEngine), and by an
// engine's run of events with save times that it does not run
// (CheckEventJob): the CPU engine runs both.
var ErrNoEvents = errors.New("engine does not support events")

// EventEngine is implemented by an Engine that runs problems with events
// (Settings.Events): NewSolver refuses events on any other engine, so an
// engine that predates them never receives a Job whose Plan has
// EventPlan set. The CPU engine supports them.
type EventEngine interface {
	Engine
	SupportsEvents() bool
}

// EventPlan holds the events of a Plan as programs, in the form an engine
// runs them: after each accepted step, Cond at its end; where an event
// crosses, its root located on DenseStep's extension and on Replay (the
// event step), then Jump[e] if set. Common inputs as the Plan's: t, y,
// p, s.
type EventPlan struct {
	// Cond evaluates every condition: inputs t, y, p, s; outputs g[e].
	Cond *tape.Program
	// Jump[e] is event e's Apply (nil if none): inputs t, y, p, s;
	// outputs y'[Dim].
	Jump []*tape.Program
	// Names, Direction and Terminal describe each event.
	Names     []string
	Direction []int
	Terminal  []bool
	// MaxEvents bounds the events of one trajectory (Settings.MaxEvents).
	MaxEvents int
	// Hash identifies the events (their conditions, jumps, directions
	// and terminal flags); a mesh recorded with them carries it
	// (Mesh.EventHash).
	Hash string

	once     sync.Once
	condGrad []*tape.Program // per event: inputs t, y, p, s; outputs g, ∂g/∂t, ∂g/∂y[Dim], ∂g/∂p[Params], ∂g/∂s[Shared]
	jumpRev  []*tape.Program // per event (nil without Jump): inputs t, y, p, s, λ[Dim]; outputs t̄, λ⁻[Dim], p̄[Params], s̄[Shared]
	stepRev  *tape.Program   // Replay's reverse with time: inputs t, h, y, p, s, λ[Dim]; outputs t̄, h̄, ȳ[Dim], p̄[Params], s̄[Shared]
	saveRev  *tape.Program   // Dense's reverse with time: inputs t, h, y, p, s, θ, λ[Dim]; outputs t̄, h̄, ȳ[Dim], p̄[Params], s̄[Shared], θ̄
	err      error
}

// EventReverse holds the programs the reverse sweep of a gradient through
// events runs (see Event and EventPlan.Reverse). Common inputs as the
// Plan's: t, y, p, s (shared); every output is per trajectory (none is
// summed).
type EventReverse struct {
	// CondGrad[e] is event e's condition with its gradient: inputs t, y,
	// p, s; outputs g, ∂g/∂t, ∂g/∂y[Dim], ∂g/∂p[Params], ∂g/∂s[Shared].
	CondGrad []*tape.Program
	// JumpRev[e] is the reverse of event e's Apply (nil without one):
	// inputs t, y, p, s, λ[Dim] (the cotangent of the state after the
	// jump); outputs t̄, λ⁻[Dim] (before it), p̄[Params], s̄[Shared].
	JumpRev []*tape.Program
	// StepRev is Replay's reverse with respect to the time and the step
	// size too: inputs t, h, y, p, s, λ[Dim]; outputs t̄, h̄, ȳ[Dim],
	// p̄[Params], s̄[Shared].
	StepRev *tape.Program
	// SaveRev is the reverse of Dense (a save time's state on a step)
	// with respect to every input: inputs t, h, y, p, s, θ, λ[Dim];
	// outputs t̄, h̄, ȳ[Dim], p̄[Params], s̄[Shared], θ̄. A save time τ on
	// a step reads θ = (τ − t)/h, so its cotangents of the step's t and
	// h are t̄ − θ̄/h and h̄ − θ̄·θ/h.
	SaveRev *tape.Program
}

// Reverse returns the programs of the reverse sweep through the events of
// plan pl (whose Events ep is), built on first use, for engines that run
// event gradients.
func (ep *EventPlan) Reverse(pl *Plan) (*EventReverse, error) {
	if err := ep.derived(pl); err != nil {
		return nil, err
	}
	return &EventReverse{CondGrad: ep.condGrad, JumpRev: ep.jumpRev, StepRev: ep.stepRev, SaveRev: ep.saveRev}, nil
}

// CheckEventJob returns an error if job j has events (Plan.Events) and
// save times, for an EventEngine that does not run those: it calls it
// first. The error wraps ErrNoEvents (the engine's limit, not a bad
// input: the CPU engine runs the job). The CPU engine and the GPU engine
// "cuda" run them (and given meshes with events, Mesh.Events) and do not
// call it.
func CheckEventJob(j *Job) error {
	if j.Plan.Events != nil && len(j.SaveAt) > 0 {
		return &taggedError{errors.New("ode: a problem with events has no save times yet on this engine (Problem.SaveAt): use the \"cpu\" engine (Settings.Engine), read the states from a DenseSolution, or solve to each time"), ErrNoEvents}
	}
	return nil
}

// buildEvents traces the events of the settings for field f.
func buildEvents(f *Field, evs []Event, maxEvents int) (*EventPlan, error) {
	ep := &EventPlan{MaxEvents: maxEvents}
	d := f.Dim
	in := f.inputs()
	gs := make([]*tape.Program, len(evs))
	for e, ev := range evs {
		name := ev.Name
		if name == "" {
			name = fmt.Sprintf("event %d", e)
		}
		ep.Names = append(ep.Names, name)
		switch {
		case ev.G == nil:
			return nil, fmt.Errorf("ode: %s has no condition G", name)
		case ev.Direction < -1 || ev.Direction > 1:
			return nil, fmt.Errorf("ode: %s has Direction %d; use +1 (rising), −1 (falling) or 0 (both)", name, ev.Direction)
		case ev.Terminal && ev.Apply != nil:
			return nil, fmt.Errorf("ode: %s is terminal and has Apply: a terminal event ends the trajectory, so nothing continues from the applied state; drop one of them", name)
		}
		ep.Direction = append(ep.Direction, ev.Direction)
		ep.Terminal = append(ep.Terminal, ev.Terminal)
		g, err := tape.Trace(name, in, func(v []tape.V) []tape.V {
			return []tape.V{ev.G(v[0], v[1:1+d], v[1+d:])}
		})
		if err != nil {
			return nil, fmt.Errorf("ode: %s: condition: %w", name, err)
		}
		if !slices.Contains(inputsRead(g)[:1+d], true) {
			return nil, fmt.Errorf("ode: %s: the condition G depends on neither t nor y, so it is constant along each trajectory and never crosses zero (or is zero from the start); "+
				"write it in terms of the time or the state (parameters may set a threshold, as y[0] − p[0])", name)
		}
		gs[e] = g
		var jump *tape.Program
		if ev.Apply != nil {
			var nout int
			jump, err = tape.Trace(name+".apply", in, func(v []tape.V) []tape.V {
				out := ev.Apply(v[0], v[1:1+d], v[1+d:])
				nout = len(out)
				if nout != d {
					return nil
				}
				return out
			})
			if err != nil {
				return nil, fmt.Errorf("ode: %s: Apply: %w", name, err)
			}
			if nout != d {
				return nil, fmt.Errorf("ode: %s: Apply returned %d values, want Dim = %d", name, nout, d)
			}
		}
		ep.Jump = append(ep.Jump, jump)
	}
	b, vs := tape.NewBuilderFor(f.name()+".events", in)
	var outs []tape.V
	if err := tape.Catch(f.name(), func() {
		for _, g := range gs {
			outs = append(outs, tape.Call(g, vs)...)
		}
	}); err != nil {
		return nil, err
	}
	cond, err := b.Build(outs...)
	if err != nil {
		return nil, err
	}
	for e := range cond.Outputs {
		cond.Outputs[e].Name = "g:" + ep.Names[e]
	}
	ep.Cond = cond
	ep.condGrad = gs
	h := sha256.New()
	for e := range gs {
		jh := "-"
		if ep.Jump[e] != nil {
			jh = ep.Jump[e].Hash()
		}
		fmt.Fprintf(h, "%s %s %d %t\n", gs[e].Hash(), jh, ep.Direction[e], ep.Terminal[e])
	}
	ep.Hash = hex.EncodeToString(h.Sum(nil))[:16]
	return ep, nil
}

// inputsRead reports, for each input of p, whether an output of p
// depends on it.
func inputsRead(p *tape.Program) []bool {
	need := make([]bool, len(p.Values))
	for _, o := range p.Outputs {
		need[o.ID] = true
	}
	read := make([]bool, len(p.Inputs))
	for i := len(p.Values) - 1; i >= 0; i-- {
		if !need[i] {
			continue
		}
		v := p.Values[i]
		if v.Op == ops.OpInput {
			read[int(v.Aux)] = true
		}
		for _, a := range v.Args {
			need[a] = true
		}
	}
	return read
}

// derived builds the programs the gradient needs, once: each
// condition's gradient, each jump's reverse and the replay step's reverse
// with respect to t and h too.
func (ep *EventPlan) derived(pl *Plan) error {
	ep.once.Do(func() {
		d, np, ns := pl.Dim, pl.Params, pl.Shared
		for e, g := range ep.condGrad {
			gg, err := tape.Grad(g, nil)
			if err != nil {
				ep.err = fmt.Errorf("ode: %s: gradient of the condition: %w", ep.Names[e], err)
				return
			}
			for k := range gg.Outputs {
				gg.Outputs[k].Sum = false
			}
			ep.condGrad[e] = gg
			ep.jumpRev = append(ep.jumpRev, nil)
			if j := ep.Jump[e]; j != nil {
				vjp, err := tape.VJP(j, nil) // inputs t, y, p, s, λ; outputs t̄, ȳ, p̄, s̄
				if err != nil {
					ep.err = fmt.Errorf("ode: %s: reverse of Apply: %w", ep.Names[e], err)
					return
				}
				for k := range vjp.Outputs {
					vjp.Outputs[k].Sum = false
				}
				ep.jumpRev[e] = vjp
			}
		}
		wrt := make([]int, 0, 2+d+np+ns)
		for k := 0; k < 2+d+np+ns; k++ {
			wrt = append(wrt, k)
		}
		vjp, err := tape.VJP(pl.Replay, wrt) // outputs t̄, h̄, ȳ[d], p̄[np], s̄[ns]
		if err != nil {
			ep.err = err
			return
		}
		for k := range vjp.Outputs {
			vjp.Outputs[k].Sum = false
		}
		ep.stepRev = vjp
		if pl.Dense != nil {
			wrt = append(wrt, 2+d+np+ns) // and θ
			if vjp, err = tape.VJP(pl.Dense, wrt); err != nil {
				ep.err = err
				return
			}
			for k := range vjp.Outputs {
				vjp.Outputs[k].Sum = false
			}
			ep.saveRev = vjp
		}
	})
	return ep.err
}
