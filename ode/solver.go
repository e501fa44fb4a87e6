package ode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gradsolve-go/gradsolve/internal/buf"
	"github.com/gradsolve-go/gradsolve/internal/par"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Solver solves, records and differentiates ensembles of one field with
// fixed settings. It traces the field once, builds the Plan of its method
// (every program an adaptive solve needs) and prepares it on the engine
// the settings choose, so repeated calls (a training loop) pay for that
// once; losses are traced on each call and their derived programs cached
// by their hash. A Solver is safe for concurrent use: every call works in
// its own workspace.
type Solver struct {
	field Field
	set   Settings
	fkey  uintptr // code pointer of field.F

	fprog  *tape.Program
	plan   *Plan
	engine Engine
	exec   Executor

	losses   sync.Map                   // hash of a loss term → *LossPlan; "reg." + hash of a Reg → its gradient program
	lastLoss atomic.Pointer[LossPlan]   // the loss plan of the last call, matched to a fresh trace without hashing it (lossPlan)
	lastPlan atomic.Pointer[LossPlan]   // the plan lossPlan last returned (lastLoss scaled, its data expanded), returned again where it is the same
	tracer   atomic.Pointer[lossTracer] // the losses' trace storage (lossTracer)
	expanded expansions                 // inputs expanded from single rows, kept for the next calls
	absTol   []float64                  // each component's absolute tolerance: every Job's AbsTol (read-only)
	mu       sync.Mutex
	alt      *Solver // the stiff solver of Settings.Method = Auto, built on first need
}

// NewSolver traces f, builds the plan of the method in s (nil means
// default settings) and prepares it on the engine s names. It returns an
// error wrapping ErrInput if f cannot be traced, the settings or events
// are invalid, or the engine is unknown; an error wrapping ErrNoEvents
// if the engine cannot run the events; another if the engine is
// unavailable or fails to prepare the plan.
//
// Plans are cached per process (the 32 most recent): a Solver made again
// for a field whose trace is the same program (same name, ops, constants
// and Jacobian where the method reads one) and the same method, Saves,
// Dt0 and Controller reuses the earlier plan and the CPU engine's
// preparation of it, so that it costs the field's trace and little more
// (9 µs against 1.2 ms for Lorenz with Tsit5: fit.New per run, a Solver
// per sweep). Plans with Settings.Events are built afresh every time.
func NewSolver(f Field, s *Settings) (*Solver, error) {
	set := s.withDefaults(&f)
	if err := checkSettings(&f, &set); err != nil {
		return nil, badInput(err)
	}
	fp, err := f.Program()
	if err != nil {
		return nil, badInput(err)
	}
	method := set.Method
	if method == Auto {
		set.Method = autoTsit5 // Tsit5 with Auto's own stiffness test
	}
	pl, err := planFor(&f, fp, &set)
	if err != nil {
		return nil, badInput(err) // the field's derivatives, the controller, the events
	}
	eng, err := lookupEngine(set.Engine)
	if err != nil {
		return nil, err
	}
	if len(set.Events) > 0 {
		if ee, ok := eng.(EventEngine); !ok || !ee.SupportsEvents() {
			return nil, fmt.Errorf("ode: %s: engine %s cannot run events (%w): use the \"cpu\" engine (Settings.Engine) for problems with Settings.Events", f.name(), eng.Name(), ErrNoEvents)
		}
		if method == Auto {
			return nil, badInput(fmt.Errorf("ode: %s: Method Auto does not run events yet: choose Tsit5, Vern7, Rodas5P or Rosenbrock23", f.name()))
		}
	}
	if err := checkPrecision(&f, eng, &set); err != nil {
		return nil, badInput(err)
	}
	ex, err := eng.Prepare(pl)
	if err != nil {
		return nil, fmt.Errorf("ode: %s: preparing the %s engine: %w", f.name(), eng.Name(), err)
	}
	set.Method = method
	sv := &Solver{field: f, set: set, fkey: funcKey(f.F), fprog: fp, plan: pl, engine: eng, exec: ex}
	sv.absTol = make([]float64, f.Dim)
	for c := range sv.absTol {
		sv.absTol[c] = sv.set.absTol(c)
	}
	return sv, nil
}

// checkPrecision refuses a relative tolerance below what the engine's
// arithmetic can meet (see PrecisionEngine) and, on an engine that
// computes in float32 (u = 2^-24), an absolute tolerance below float32's
// smallest normal number, 2^-126 (float32 would make it 0, or nearly:
// the error of a component at 0 would then be divided by 0).
func checkPrecision(f *Field, eng Engine, set *Settings) error {
	pe, ok := eng.(PrecisionEngine)
	if !ok {
		return nil
	}
	u, rtol := pe.UnitRoundoff(), set.RelTol
	if floor := MinRelTol(u); !(rtol >= floor) {
		return fmt.Errorf("ode: %s: RelTol = %v is below %.2g, the smallest relative tolerance engine %s can meet (its arithmetic rounds by up to u = %.2g; RelTol must be at least MinRelTol(u)); "+
			"use RelTol ≥ %.2g, or a float64 engine (\"cpu\", \"cuda\") for tighter tolerances", f.name(), rtol, floor, eng.Name(), u, floor)
	}
	if !computesFloat32(eng) {
		return nil
	}
	for c := range f.Dim {
		if a := set.absTol(c); a < 0x1p-126 {
			what := "AbsTol"
			if set.AbsTols != nil {
				what = fmt.Sprintf("AbsTols[%d]", c)
			}
			return fmt.Errorf("ode: %s: %s = %v is below 2^-126 = %.3g, the smallest normal float32, in which engine %s computes (it would be 0 there, or nearly, and a component at 0 would divide its error by 0); "+
				"use %s ≥ 1e-30 (1e-30 is as purely relative), or a float64 engine (\"cpu\", \"cuda\")", f.name(), what, a, 0x1p-126, eng.Name(), what)
		}
	}
	return nil
}

// sameField reports, as an error saying why, whether the problem's field
// g (with F set, of the solver's shape) computes what the solver's field
// does. The same closure (the same F value, and the same Jac where a
// Rosenbrock method uses it) is the solver's field; any other F, such as
// a second call of the constructor that made the solver's, is traced and
// its program compared with the solver's by hash (tape.Program.Hash: the
// ops, constants and their order, not the names), and so is its Jac. A
// field's Name does not enter: it names the field in errors only.
func (sv *Solver) sameField(g *Field) error {
	f := &sv.field
	usesJac := (f.Jac != nil || g.Jac != nil) && (rosenbrockMethod(sv.plan.Method) || sv.set.Method == Auto)
	sameF := closureOf(g.F) == closureOf(f.F)
	sameJac := !usesJac || closureOf(g.Jac) == closureOf(f.Jac)
	if sameF && sameJac {
		return nil
	}
	if !sameF {
		gp, err := g.Program()
		if err != nil {
			return fmt.Errorf("ode: problem field %s: %w", g.name(), err)
		}
		if gh, fh := gp.Hash(), sv.fprog.Hash(); gh != fh {
			return fmt.Errorf("ode: problem field %s does not compute what the solver's field %s does: their traced programs differ (hash %s against %s: %s); "+
				"a Solver runs the field it was made with: make a Solver for this field (or leave Problem.Field.F nil to use the solver's)",
				g.name(), f.name(), gh[:16], fh[:16], programDiff(gp, sv.fprog))
		}
	}
	if !sameJac {
		switch {
		case g.Jac == nil || f.Jac == nil:
			have := func(x *Field) string {
				if x.Jac == nil {
					return "derives J by forward mode"
				}
				return "has an analytic Jac"
			}
			return fmt.Errorf("ode: problem field %s %s but the solver's field %s %s; make a Solver for this field (or leave Problem.Field.F nil to use the solver's)",
				g.name(), have(g), f.name(), have(f))
		}
		gp, err := g.Program()
		if err != nil {
			return fmt.Errorf("ode: problem field %s: %w", g.name(), err)
		}
		gj, err := jacobianProgram(g, gp)
		if err != nil {
			return fmt.Errorf("ode: problem field %s: Jacobian: %w", g.name(), err)
		}
		fj, err := jacobianProgram(f, sv.fprog)
		if err != nil {
			return fmt.Errorf("ode: field %s: Jacobian: %w", f.name(), err)
		}
		if gh, fh := gj.Hash(), fj.Hash(); gh != fh {
			return fmt.Errorf("ode: problem field %s has another Jacobian than the solver's field %s: their traced Jac programs differ (hash %s against %s: %s); make a Solver for this field",
				g.name(), f.name(), gh[:16], fh[:16], programDiff(gj, fj))
		}
	}
	return nil
}

// closureOf returns the address of a function value's closure (its code
// and captured variables; nil for a nil function): two function values
// with the same closure compute the same thing.
func closureOf(f func(t tape.V, y, p []tape.V) []tape.V) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&f))
}

// programDiff says where programs a and b first differ.
func programDiff(a, b *tape.Program) string {
	if len(a.Values) != len(b.Values) {
		return fmt.Sprintf("%d operations against %d", len(a.Values), len(b.Values))
	}
	for i := range a.Values {
		x, y := &a.Values[i], &b.Values[i]
		if x.Op != y.Op || x.Aux != y.Aux && !(x.Aux != x.Aux && y.Aux != y.Aux) || !slices.Equal(x.Args, y.Args) {
			what := func(v *tape.Value) string {
				if v.Op == ops.OpConst {
					return fmt.Sprintf("the constant %v", v.Aux)
				}
				return fmt.Sprintf("%s(aux %v, args %v)", ops.Lookup(v.Op).Name, v.Aux, v.Args)
			}
			return fmt.Sprintf("operation %d is %s against %s", i, what(x), what(y))
		}
	}
	if len(a.Outputs) != len(b.Outputs) {
		return fmt.Sprintf("%d outputs against %d", len(a.Outputs), len(b.Outputs))
	}
	for i := range a.Outputs {
		if a.Outputs[i].ID != b.Outputs[i].ID {
			return fmt.Sprintf("output %d is operation %d against %d", i, a.Outputs[i].ID, b.Outputs[i].ID)
		}
	}
	return "their inputs or called programs differ"
}

// funcKey returns the code pointer of a function (0 for nil).
func funcKey(f any) uintptr {
	v := reflect.ValueOf(f)
	if !v.IsValid() || v.IsNil() {
		return 0
	}
	return v.Pointer()
}

// Settings returns the solver's settings with defaults filled in, in
// storage of their own (AbsTols is a copy).
func (sv *Solver) Settings() Settings {
	s := sv.set
	s.AbsTols = slices.Clone(s.AbsTols)
	return s
}

// Method returns the solver's method (Auto if the settings ask for it).
func (sv *Solver) Method() Method { return sv.set.Method }

// Plan returns the plan the solver's engine runs.
func (sv *Solver) Plan() *Plan { return sv.plan }

// Engine returns the name of the engine that runs the solver's work.
func (sv *Solver) Engine() string { return sv.engine.Name() }

// FieldProgram returns the traced field.
func (sv *Solver) FieldProgram() *tape.Program { return sv.fprog }

// StepPrograms returns the recorder's trial step and the replay step.
func (sv *Solver) StepPrograms() (trial, replay *tape.Program) { return sv.plan.Trial, sv.plan.Replay }

// checkProblem validates p for the solver: its field must be the solver's
// (same shape and, if F is set, the same computation: a Solver traced its
// own field once and runs that trace; see sameField).
func (sv *Solver) checkProblem(p *Problem) (*problem, error) { return sv.checkProblemLeaving(p, 0) }

// checkProblemLeaving is checkProblem with the checks of leave that apply
// left to the executor (Problem.checkWith).
func (sv *Solver) checkProblemLeaving(p *Problem, leave Checks) (*problem, error) {
	q, err := sv.withField(p)
	if err != nil {
		return nil, badInput(err)
	}
	if q, err = q.Problem.checkInto(q, &sv.expanded, leave); err != nil {
		return nil, badInput(err)
	}
	return q, badInput(sv.checkRange(q))
}

// validateProblem makes the checks of checkProblem without expanding the
// arrays (Problem.validate): the problem it returns has no y0, p or t1.
func (sv *Solver) validateProblem(p *Problem) (*problem, error) {
	q, err := sv.withField(p)
	if err != nil {
		return nil, badInput(err)
	}
	if q, err = q.Problem.validateInto(q, 0); err != nil {
		return nil, badInput(err)
	}
	return q, badInput(sv.checkRange(q))
}

// checkRange refuses, on an engine that computes in float32 (a
// PrecisionEngine with u = 2^-24), a validated problem that float32
// cannot hold although float64 can: a value of Y0, P, Shared, T0, the
// end times or SaveAt beyond ±MaxFloat32 (float32 turns it into an
// infinity), or a span shorter than the smallest step float32 resolves
// at its times, 4·2^-23·max(|T0|, |T1|) (its end time rounds onto its
// start, or nearly: no step could be taken). On other engines it does
// nothing.
func (sv *Solver) checkRange(q *problem) error {
	if !computesFloat32(sv.engine) {
		return nil
	}
	name, eng := sv.field.name(), sv.engine.Name()
	for _, a := range []struct {
		name string
		x    []float64
	}{{"Y0", q.Y0}, {"P", q.P}, {"Shared", q.Shared}, {"T0", []float64{q.T0}}, {"T1", []float64{q.T1}}, {"T1s", q.T1s}, {"SaveAt", q.SaveAt}} {
		if a.name == "T1" && q.T1s != nil {
			continue
		}
		// (on all cores, as finiteAll reads them: an ensemble's inputs
		// are tens of megabytes)
		if i := par.First(len(a.x), func(lo, hi int) int {
			for i, x := range a.x[lo:hi] {
				if math.Abs(x) > math.MaxFloat32 {
					return lo + i
				}
			}
			return -1
		}); i >= 0 {
			return fmt.Errorf("ode: %s: %s[%d] = %v is beyond the range of float32 (±%.4g), in which engine %s computes: it would be an infinity there; "+
				"rescale the problem, or use a float64 engine (\"cpu\", \"cuda\")", name, a.name, i, a.x[i], math.MaxFloat32, eng)
		}
	}
	for i := range q.n {
		t1 := q.T1
		if q.T1s != nil {
			t1 = q.T1s[i]
		} else if i > 0 {
			break
		}
		if tmax := math.Max(math.Abs(q.T0), math.Abs(t1)); t1-q.T0 < stepFloor32*tmax {
			return fmt.Errorf("ode: %s: the span [T0, T1] = [%v, %v] of trajectory %d is %.3g long, shorter than the smallest step float32, in which engine %s computes, resolves at those times (4·2^-23·max(|T0|, |T1|) = %.3g); "+
				"shift the time origin (solve from 0 to T1 − T0 with the field's t replaced by t + T0), or use a float64 engine (\"cpu\", \"cuda\")", name, q.T0, t1, i, t1-q.T0, eng, stepFloor32*tmax)
		}
	}
	return nil
}

// withField returns a problem (not yet checked: see Problem.checkInto)
// whose Problem is a copy of p with the solver's field, both in one
// allocation, or an error if p's field is not the solver's.
func (sv *Solver) withField(p *Problem) (*problem, error) {
	if p == nil {
		return nil, fmt.Errorf("ode: the problem is nil; pass a *Problem of field %s", sv.field.name())
	}
	f, g := &sv.field, &p.Field
	if f.Dim != g.Dim || f.Params != g.Params || f.Shared != g.Shared {
		return nil, fmt.Errorf("ode: problem field %s (Dim %d, Params %d, Shared %d) does not match the solver's %s (Dim %d, Params %d, Shared %d)",
			g.name(), g.Dim, g.Params, g.Shared, f.name(), f.Dim, f.Params, f.Shared)
	}
	if g.F != nil {
		if err := sv.sameField(g); err != nil {
			return nil, err
		}
	}
	b := &fielded{pf: *p}
	b.pf.Field = *f
	b.q.Problem = &b.pf
	return &b.q, nil
}

// fielded is withField's problem and the copy of the caller's Problem
// it checks.
type fielded struct {
	pf Problem
	q  problem
}

// checkInputs validates p and, if m is not nil, the mesh m for the
// solver (checkProblem, checkMesh), leaving to the executor the checks of
// leave that apply (problem.checks lists them). Its error is the one the
// checks of all inputs, in order, find first: where some were left, a
// failure checks everything again, as a failure of the executor's checks
// (ErrInput) must too.
func (sv *Solver) checkInputs(p *Problem, m *Mesh, leave Checks) (*problem, error) {
	q, err := sv.checkProblemLeaving(p, leave)
	if err == nil && m != nil {
		q.leaveMesh = leave & CheckMeshLen
		err = sv.checkMesh(q, m)
	}
	if err != nil && leave != 0 {
		return sv.checkInputs(p, m, 0)
	}
	return q, err
}

// inputError returns err, or, where err is an executor's failed check of
// the inputs it was left (ErrInput), package ode's own error naming the
// input, from the checks of p and m made again, all of them in package
// ode (they wrap ErrInput too); err itself where those find nothing (an
// input error the run found, such as a loss's).
func (sv *Solver) inputError(err error, p *Problem, m *Mesh) error {
	if errors.Is(err, ErrInput) {
		if _, cerr := sv.checkInputs(p, m, 0); cerr != nil {
			return cerr
		}
	}
	return err
}

// leaveChecks returns the checks of a Grad on mesh m (nil: recorded)
// that the solver's executor makes itself (CheckingExecutor): none with
// Method Auto, whose trajectories may run in parts, nor for a mesh that
// switched methods.
func (sv *Solver) leaveChecks(m *Mesh) Checks {
	ce, ok := sv.exec.(CheckingExecutor)
	if !ok || sv.set.Method == Auto || m != nil && m.Switch != nil {
		return 0
	}
	return ce.Checks()
}

// Solution is the result of a solve: final states, saved states, and the
// status and statistics of every trajectory.
type Solution struct {
	N, Dim int
	T      []float64 // time reached by each trajectory [N]
	Y      []float64 // final states [N×Dim]
	SaveAt []float64 // the save times: a copy of Problem.SaveAt, the Solution's own
	Ys     []float64 // saved states [N×len(SaveAt)×Dim]: trajectory i, time k at Ys[(i*K+k)*Dim:]; nil while Resident holds them
	Status []Status  // [N]
	Stats  Stats
	Method string // the method that produced it
	Engine string // the engine that ran it: the solver's, or the one its executor served the call on (Result.Engine)

	// Events counts the events each trajectory went through ([N], nil
	// without Settings.Events); a terminal event, if one fired, is the
	// last, at time T[i].
	Events []int

	// Stiff marks the trajectories on which the stiffness test of an
	// explicit method fired ([N] wherever the call recorded a mesh, false
	// throughout for the Rosenbrock methods, which run no test; nil from
	// Replay, which records none): their
	// solution is accurate, but the method ran at its stability limit, so
	// it was slow and a gradient of its replay would be meaningless (Grad
	// refuses it). Rodas5P, or Method Auto, suits them. Method Auto
	// switches such trajectories instead (Switch). In the records of
	// gradients (Grad, Loss, Record) it also marks the trajectories whose
	// steps lie outside the method's stability region for a mode of ∂f/∂y
	// that the solution does not excite (the stability probe, Plan.Probe;
	// see the package documentation): Solve does not run the probe, so
	// its Stiff may be false where a gradient's is true.
	Stiff []bool

	// Resident, if not nil, holds the saved states on the engine that
	// computed them, in its memory, and Ys is nil: a GPU engine leaves
	// them in device memory where Settings.KeepSaves asks it to.
	// HostSaves copies them into Ys (and releases the engine's copy);
	// Release frees them unread; the engine frees them once the Solution
	// is no longer reachable. Copies of the Solution share the handle.
	// Nil on the CPU engine, and wherever the saves came back to the host
	// (see Settings.KeepSaves).
	Resident ResidentSaves

	// ysSpare is the storage of an earlier call's Ys (SolveTo's dst,
	// Grad's dst) while Resident holds the saves, for HostSaves to fill.
	ysSpare []float64

	// meshArrays is set where Status, Stiff and the Stats arrays are a
	// Mesh's (Record's, or the mesh a Grad, Replay or Loss recorded or
	// was given): a call that reuses the Solution as dst (SolveTo) gives
	// it arrays of its own for them, leaving the mesh as it was.
	meshArrays bool

	// Switch, if not nil, says where Method Auto switched trajectories
	// from Tsit5 to Rodas5P (Method is then "Auto"): trajectory i took
	// Switch[i] Tsit5 steps, then Rodas5P steps to its end (Switch[i] is
	// its accepted count if it did not switch; 0 for a trajectory that an
	// engine other than the CPU's ran again from T0); see Mesh.Switch.
	Switch []int
}

// Err returns the first failure as a *TrajectoryError, or nil.
func (s *Solution) Err() error { return firstFailure(s.Status, s.T, nil, s.Method) }

// Solve integrates the ensemble and returns the final (and saved) states.
// Unless Settings.AllowFailures is set, a failed trajectory makes it
// return a *TrajectoryError (with the partial solution). An error about
// p or s wraps ErrInput (see Failures in the package documentation).
func Solve(p Problem, s *Settings) (*Solution, error) {
	sv, err := NewSolver(p.Field, s)
	if err != nil {
		return nil, err
	}
	return sv.Solve(&p)
}

// Record integrates the ensemble adaptively and returns its mesh.
// Unless Settings.AllowFailures is set, a failed trajectory makes it
// return a *TrajectoryError (with the mesh, whose Status tells which).
func Record(p Problem, s *Settings) (*Mesh, error) {
	sv, err := NewSolver(p.Field, s)
	if err != nil {
		return nil, err
	}
	m, _, err := sv.Record(&p)
	return m, err
}

// Solve is the Solver form of the package function Solve; p.Field must
// be the solver's field (or have F nil). An error about p wraps ErrInput;
// a failed trajectory's is a *TrajectoryError (see Failures in the
// package documentation), as for every Solver method.
func (sv *Solver) Solve(p *Problem) (*Solution, error) {
	return sv.SolveContext(context.Background(), p)
}

// SolveContext is Solve with a context: cancelling it stops the work and
// returns ctx.Err().
func (sv *Solver) SolveContext(ctx context.Context, p *Problem) (*Solution, error) {
	return sv.solveTo(ctx, nil, p)
}

// SolveTo is Solve with the arrays of dst (a Solution of an earlier call,
// or nil) reused where they are large enough, and dst set to the
// solution and returned (a new Solution if dst is nil). A loop that
// solves repeatedly with many save times (N×K×Dim saved values: 131 MB
// for 4,096 trajectories of 4 components at 1,000 save times) then
// allocates nothing large and does not fault fresh memory in on every
// call, as Grad reuses its dst. Saves an engine kept (dst.Resident,
// Settings.KeepSaves) are written over where the engine can (its own
// memory, large enough) and released otherwise: read them (HostSaves)
// before passing dst again. An array of dst that shares storage with an
// input of p (a chained solve's p.Y0 = dst.Y) is not reused: the result
// goes to new storage and the input is not changed. Nor are the statuses
// and step counts of a dst that shares them with a Mesh (a Solution of
// Record, Replay, Loss or a Gradient): that mesh is left as it was.
func (sv *Solver) SolveTo(dst *Solution, p *Problem) (*Solution, error) {
	return sv.solveTo(context.Background(), dst, p)
}

// SolveToContext is SolveTo with a context: cancelling it stops the work
// and returns ctx.Err(); engines read what they report from it (a GPU
// engine's trace).
func (sv *Solver) SolveToContext(ctx context.Context, dst *Solution, p *Problem) (*Solution, error) {
	return sv.solveTo(ctx, dst, p)
}

func (sv *Solver) solveTo(ctx context.Context, dst *Solution, p *Problem) (*Solution, error) {
	q, err := sv.checkProblem(p)
	if err != nil {
		return nil, err
	}
	var reuse *Result
	if dst != nil {
		dst.unalias(q.inputs(nil, nil))
		reuse = &Result{Y: dst.Y, Ys: dst.Ys, T: dst.T, Status: dst.Status, Stats: dst.Stats, Stiff: dst.Stiff, Saves: dst.Resident}
		if dst.meshArrays {
			// (They are a mesh's, which the caller may hold.)
			reuse.Status, reuse.Stats, reuse.Stiff = nil, Stats{}, nil
		}
	}
	res, used, err := sv.run(ctx, OpSolve, q, nil, nil, reuse)
	if err != nil {
		return nil, err
	}
	if reuse != nil {
		releaseOld(reuse.Saves, res.Saves)
	}
	var old []float64
	if dst != nil {
		old = dst.SaveAt
	}
	sol := used.solution(q, res, res.Status, old)
	if dst != nil {
		if sol.Resident != nil {
			sol.ysSpare = or(dst.Ys, dst.ysSpare) // for HostSaves
		}
		*dst = *sol
		sol = dst
	}
	if err := used.failure(q, res, res.Status, sol.Method); err != nil && !sv.set.AllowFailures {
		return sol, err
	}
	return sol, nil
}

// Record is the Solver form of the package function Record. It also
// returns the solution the recording computed.
func (sv *Solver) Record(p *Problem) (*Mesh, *Solution, error) {
	return sv.RecordContext(context.Background(), p)
}

// RecordContext is Record with a context.
func (sv *Solver) RecordContext(ctx context.Context, p *Problem) (*Mesh, *Solution, error) {
	q, err := sv.checkProblem(p)
	if err != nil {
		return nil, nil, err
	}
	res, used, err := sv.run(ctx, OpRecord, q, nil, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	sol := used.solution(q, res, res.Status, nil)
	sol.meshArrays = true
	m := used.mesh(q, res, nil)
	if err := used.failure(q, res, res.Status, sol.Method); err != nil && !sv.set.AllowFailures {
		return m, sol, err
	}
	return m, sol, nil
}

// run runs op on the solver's engine; with Method Auto, the CPU engine
// switches trajectories to the stiff method in place (switchExec), and
// other engines run the trajectories whose stiffness test fired on with
// the stiff method from where it fired (or again from T0, on an engine
// without per-trajectory start times), and replay a mesh of both methods
// in parts (runAutoSplit, runSwitchedMesh, continueAuto). It returns the
// result and the solver that produced it (or, with an error, that ran or
// was to run it): a result of both methods is the Auto solver's (its
// Switch is set).
func (sv *Solver) run(ctx context.Context, op Op, q *problem, loss *Loss, m *Mesh, reuse *Result) (*Result, *Solver, error) {
	return sv.runScaled(ctx, op, q, loss, m, reuse, 0)
}

// runScaled is run with the loss's terms scaled by scale instead of the
// loss's own (1, or 1/N for a mean) where scale is not 0.
func (sv *Solver) runScaled(ctx context.Context, op Op, q *problem, loss *Loss, m *Mesh, reuse *Result, scale float64) (*Result, *Solver, error) {
	if stiff := sv.switchExec(m); stiff != nil {
		// Method Auto on the CPU engine switches each trajectory in place.
		res, err := sv.runPlan(ctx, op, q, loss, m, reuse, scale, stiff)
		return res, sv, err
	}
	if m != nil && m.Switch != nil {
		if sv.set.Method != Auto {
			return nil, sv, badInput(fmt.Errorf("ode: mesh switched methods within trajectories (Method Auto): replay it with Method Auto, not %s", sv.set.Method.Name()))
		}
		return sv.runSwitchedMesh(ctx, op, q, loss, m, reuse, scale)
	}
	used := sv
	if m != nil && sv.set.Method == Auto && m.Method != nil && m.Method.Name() != sv.plan.Method {
		alt, err := sv.stiffSolver()
		if err != nil {
			return nil, sv, err
		}
		used = alt
	}
	if m == nil && sv.set.Method == Auto {
		return sv.runAutoSplit(ctx, op, q, loss, reuse, scale)
	}
	res, err := used.runPlan(ctx, op, q, loss, m, reuse, scale, nil)
	return res, used, err
}

// switchExec returns the CPU executor of the stiff plan when Method Auto
// switches trajectories in place (the CPU engine, and no mesh or a mesh
// of Tsit5 or of both methods), or nil: other engines run the stiff
// trajectories again with Rodas5P (runAutoSplit), and a mesh that
// Rodas5P recorded is replayed with it.
func (sv *Solver) switchExec(m *Mesh) *cpuExec {
	if sv.set.Method != Auto {
		return nil
	}
	if !sv.switchesInPlace() {
		return nil
	}
	if m != nil && m.Switch == nil && m.Method != nil && m.Method.Name() != sv.plan.Method {
		return nil
	}
	alt, err := sv.stiffSolver()
	if err != nil {
		return nil
	}
	stiff, _ := alt.exec.(*cpuExec)
	return stiff
}

// releaseOld releases the resident saves old of a result passed back
// (Job.Reuse) unless they are the new result's, now.
func releaseOld(old, now ResidentSaves) {
	if old != nil && old != now {
		old.Release()
	}
}

func anyTrue(x []bool) bool {
	for _, v := range x {
		if v {
			return true
		}
	}
	return false
}

// stiffSolver returns the Rodas5P solver Method Auto switches to.
func (sv *Solver) stiffSolver() (*Solver, error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.alt == nil {
		set := sv.set
		set.Method = Rodas5P
		set.Controller = Controller{}
		set.KeepSaves = false // Method Auto merges the saves on the host
		alt, err := NewSolver(sv.field, &set)
		if err != nil {
			return nil, err
		}
		sv.alt = alt
	}
	return sv.alt, nil
}

// runPlan builds the job of op and runs it on the solver's engine.
// stiff, if not nil, is the executor of the plan Method Auto switches
// trajectories to (Job.stiff).
func (sv *Solver) runPlan(ctx context.Context, op Op, q *problem, loss *Loss, m *Mesh, reuse *Result, scale float64, stiff *cpuExec) (*Result, error) {
	j := sv.job(op, q, m)
	j.Reuse = reuse
	j.stiff = stiff
	// A gradient refuses a stiff trajectory, and Auto without the switch
	// runs that trajectory again with Rodas5P: neither uses the rest of
	// it.
	j.StopOnStiff = (op == OpGrad || sv.set.Method == Auto) && stiff == nil
	j.Continues = j.StopOnStiff && sv.set.Method == Auto
	if loss != nil {
		lp, err := sv.lossPlan(loss, q)
		if err != nil {
			return nil, err
		}
		if scale != 0 && scale != lp.Scale {
			// (A copy: the solver hands lp out again, lossPlan.)
			c := *lp
			c.Scale = scale
			lp = &c
		}
		j.Loss = lp
	}
	res, err := sv.exec.Run(ctx, j)
	if err != nil {
		return nil, err
	}
	if j.StopOnStiff && sv.set.Method != Auto && !res.EndsWell {
		// (EndsWell: the engine found no trajectory stiff as it wrote
		// the statuses; no pass over them here.)
		// A gradient's stiff trajectory failed: its states are NaN, as a
		// failure's (the engine kept them for Method Auto's continuation).
		// Resident saves come to the host first (a call that ends in a
		// stiff trajectory's error).
		// The first, read on all cores: a gradient's trajectories
		// seldom are.
		first := par.First(len(res.Status), func(lo, hi int) int {
			if i := slices.Index(res.Status[lo:hi], Stiff); i >= 0 {
				return lo + i
			}
			return -1
		})
		if first >= 0 && res.Saves != nil {
			if err := res.hostSaves(q.n * len(q.SaveAt) * q.Field.Dim); err != nil {
				return nil, err
			}
		}
		if first >= 0 {
			blankStiff(res, first, q.Field.Dim, len(q.SaveAt))
		}
	}
	return res, nil
}

// hostSaves copies the saved states res.Saves holds into res.Ys (size
// values) and releases them.
func (res *Result) hostSaves(size int) error {
	ys, err := hostSaves(res.Saves, res.Ys, size)
	if err != nil {
		return err
	}
	res.Ys, res.Saves = ys, nil
	return nil
}

// blankStiff sets the final and saved states of res's trajectories of
// status Stiff, the first of which is first, to NaN.
func blankStiff(res *Result, first, d, K int) {
	for i := first; i < len(res.Status); i++ {
		if res.Status[i] != Stiff {
			continue
		}
		if res.Y != nil {
			nanFill(res.Y[i*d : (i+1)*d])
		}
		if len(res.Ys) > 0 {
			nanFill(res.Ys[i*K*d : (i+1)*K*d])
		}
	}
}

// job returns the Job of op for problem q (on mesh m, if not nil).
func (sv *Solver) job(op Op, q *problem, m *Mesh) *Job {
	set := &sv.set
	j := &Job{Op: op, Plan: sv.plan, N: q.n, T0: q.T0, T1: q.t1, Y0: q.y0, P: q.p, Shared: q.Shared, SaveAt: q.SaveAt,
		Mesh: m, RelTol: set.RelTol, MaxSteps: set.MaxSteps, Checkpoint: set.Checkpoint, MemoryLimit: set.MemoryLimit,
		Workers: set.Exec.Workers, ChunkSize: set.Exec.BlockSize, Progress: set.Progress}
	j.Checks = q.checks
	j.T0s = q.t0s
	// The records whose meshes a gradient differentiates check the steps'
	// stability for every mode of ∂f/∂y (Plan.Probe).
	j.CheckStability = !probeOff.Load() && m == nil && sv.plan.Probe != nil && (op == OpGrad || op == OpLoss || op == OpRecord)
	if op == OpGrad {
		j.Omit, j.EndTimes = q.omit, q.ends && m == nil
		j.KeepGrads = q.keep
		j.RecordAll = q.recordAll && m == nil
	}
	// Method Auto merges its segments' saves on the host; omitted states
	// are dropped.
	j.KeepSaves = set.KeepSaves && set.Method != Auto && len(q.SaveAt) > 0 && j.Omit&OmitStates == 0
	j.AbsTol = sv.absTol
	if len(j.AbsTol) != q.Field.Dim { // (a Solver not made by NewSolver)
		j.AbsTol = make([]float64, q.Field.Dim)
		for c := range j.AbsTol {
			j.AbsTol[c] = set.absTol(c)
		}
	}
	if q.n > 1 {
		if d := q.Field.Dim; len(q.Y0) == d {
			j.Y0Row = q.Y0
		}
		if np := q.Field.Params; np > 0 && len(q.P) == np {
			j.PRow = q.P
		}
		j.T1Same = q.T1s == nil
	}
	if j.Shared == nil {
		j.Shared = []float64{}
	}
	return j
}

// solution returns the Solution of a result; its SaveAt in old's storage
// where large enough (old: an earlier call's Solution.SaveAt, or nil).
func (sv *Solver) solution(q *problem, res *Result, status []Status, old []float64) *Solution {
	t := res.T
	if t == nil {
		t = append([]float64(nil), q.t1...)
	}
	return sv.solutionT(q, res, status, t, old)
}

// solutionTimes returns in dst (reused) the solution's times, as Grad
// gives them: with events, the times the record reached (res.T: a
// terminal event's where one fired), else each trajectory's end time.
func (sv *Solver) solutionTimes(dst []float64, q *problem, res *Result) []float64 {
	if sv.plan.Events != nil && res.T != nil {
		return append(dst[:0], res.T...)
	}
	return append(dst[:0], q.t1...)
}

// solutionT is solution with the solution's times t ([N]).
func (sv *Solver) solutionT(q *problem, res *Result, status []Status, t, old []float64) *Solution {
	sol := &Solution{N: q.n, Dim: q.Field.Dim, T: t, Y: res.Y, SaveAt: q.saveTimes(old), Ys: res.Ys, Resident: res.Saves, Status: status,
		Stats: res.Stats, Method: sv.plan.Method, Engine: sv.ranOn(res), Stiff: res.Stiff, Events: res.Events, Switch: res.Switch}
	if res.Switch != nil {
		sol.Method = Auto.Name()
	}
	return sol
}

// ranOn returns the name of the engine that ran res: the solver's, or
// the one its executor served it on (Result.Engine).
func (sv *Solver) ranOn(res *Result) string {
	if res.Engine != "" {
		return res.Engine
	}
	return sv.engine.Name()
}

// mesh returns the mesh a result recorded, with what it was recorded
// for; its end times in the storage of old's where large enough.
func (sv *Solver) mesh(q *problem, res *Result, old *Mesh) *Mesh {
	if res.Mesh == nil {
		return nil
	}
	var t1 []float64
	if old != nil {
		t1 = old.T1
	}
	return sv.meshEnds(q, res, q.endTimes(t1))
}

// meshEnds is mesh with the end times t1 ([N], q's), written by the
// caller.
func (sv *Solver) meshEnds(q *problem, res *Result, t1 []float64) *Mesh {
	m := res.Mesh
	if m == nil {
		return nil
	}
	m.T0, m.T1 = q.T0, t1
	m.t1, m.t1Set = q.T1, q.T1s == nil
	m.Method = methodByName(sv.plan.Method)
	m.RelTol, m.AbsTol = sv.set.RelTol, sv.set.AbsTol
	m.AbsTols = slices.Clone(sv.set.AbsTols) // (the mesh's own: not the solver's)
	m.SaveAt = q.saveTimes(nil)
	m.Fingerprint = sv.plan.Fingerprint
	if ep := sv.plan.Events; ep != nil {
		m.EventHash = ep.Hash
	}
	m.Engine = sv.ranOn(res)
	m.Stiff = res.Stiff
	m.Switch = res.Switch
	if m.Switch != nil {
		m.Method = Auto
	}
	return m
}

// failure returns the first failed trajectory as a *TrajectoryError, or
// nil, with what its hint needs from the problem, the settings and the
// result.
func (sv *Solver) failure(q *problem, res *Result, status []Status, method string) error {
	err := firstFailure(status, res.T, res.LastH, method)
	if te, ok := err.(*TrajectoryError); ok {
		te.Method = sv.methodAt(res, te.Index, method)
	}
	if te, ok := err.(*TrajectoryError); ok && res.T != nil {
		te.describe(q, &sv.set, res, sv.engine)
		te.Y = res.LastY[te.Index]
	}
	return err
}

// stepTaps brackets every save time on every trajectory's mesh for
// SaveStep, the time points accumulated t_{k+1} = t_k + h_k exactly as
// the recorder and the replay do: tap i*K+k, save time k of trajectory i,
// is one genuine step of size τ − t_k from the mesh point t_k < τ ≤
// t_k + h_k; τ at or before T0 is y0 (a tap of size 0 on step 0), τ at or
// after the trajectory's final time its final state (a tap on step Len).
// (Interpolated saves need no list: scan.Saves.) t0s, if not nil, gives
// each trajectory its own start time in place of t0. dst, if not nil, is
// reused.
func stepTaps(dst *scan.Taps, m scan.Mesh, t0 float64, t0s, ts []float64) *scan.Taps {
	n, K := m.N, len(ts)
	if dst == nil {
		dst = &scan.Taps{}
	}
	// Every entry is written below: the storage need not be cleared.
	tp := dst
	tp.Traj, _ = buf.Extend(tp.Traj[:0], n*K)
	tp.Step, _ = buf.Extend(tp.Step[:0], n*K)
	tp.H, _ = buf.Extend(tp.H[:0], n*K)
	for i := 0; i < n; i++ {
		if t0s != nil {
			t0 = t0s[i]
		}
		t, s := t0, 0
		for k, tau := range ts {
			// Past the steps that end before τ.
			for s < m.Len[i] {
				next := t + m.H[s*n+i]
				if next >= tau {
					break
				}
				t = next
				s++
			}
			idx := i*K + k
			tp.Traj[idx], tp.Step[idx], tp.H[idx] = i, s, 0
			switch {
			case tau <= t0:
				tp.Step[idx] = 0
			case s == m.Len[i]:
			default:
				tp.H[idx] = tau - t
			}
		}
	}
	return tp
}

// toSoA transposes row-major [n×w] into structure-of-arrays [w][n].
func toSoA(dst, x []float64, n, w int) []float64 {
	dst = resizeFloats(dst, n*w)
	transpose(dst, x[:n*w], n, w)
	return dst
}

// fromSoA is the inverse of toSoA.
func fromSoA(dst, x []float64, n, w int) []float64 {
	dst = resizeFloats(dst, n*w)
	transpose(dst, x[:n*w], w, n)
	return dst
}

func resizeFloats(x []float64, n int) []float64 {
	if cap(x) < n {
		return make([]float64, n)
	}
	return x[:n]
}

// transposeScaled is transpose with every value multiplied by scale
// (skipped if scale is 1).
func transposeScaled(dst, src []float64, r, c int, scale float64) {
	const b = 8
	for i0 := 0; i0 < r; i0 += b {
		i1 := min(i0+b, r)
		for j0 := 0; j0 < c; j0 += b {
			j1 := min(j0+b, c)
			for i := i0; i < i1; i++ {
				row := src[i*c+j0 : i*c+j1]
				for j, v := range row {
					if scale != 1 {
						v *= scale
					}
					dst[(j0+j)*r+i] = v
				}
			}
		}
	}
}

// transpose sets dst [c×r] to the transpose of src [r×c], in tiles of
// 8×8 values (a cache line of each of 8 rows), so that reads and writes
// both use whole cache lines.
func transpose(dst, src []float64, r, c int) { transposeScaled(dst, src, r, c, 1) }

// methodAt returns the name of the method of trajectory i's last step in
// res, of an operation of method: with Method Auto's switch, Rodas5P for a
// trajectory that switched and Tsit5 for one that did not.
func (sv *Solver) methodAt(res *Result, i int, method string) string {
	if res.switched != nil && res.switched[i] {
		if alt, err := sv.stiffSolver(); err == nil {
			return alt.plan.Method
		}
	}
	switch {
	case method == Auto.Name():
		return sv.plan.Method
	}
	return method
}
