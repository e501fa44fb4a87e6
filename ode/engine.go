package ode

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/gradsolve-go/gradsolve/internal/par"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Engine runs whole operations on ensembles — adaptive solves, records,
// replays, gradients with or without the record — from a Plan. The CPU
// engine (name "cpu") is built in and always present; other engines (the
// GPU one in package cuda) register themselves with Register, as
// database/sql drivers do, so package ode never imports them and a program
// that does not import them never loads them.
type Engine interface {
	// Name returns the engine's registered name, as "cpu".
	Name() string

	// Available returns nil if the engine can run here, or an error saying
	// why not (no GPU, no driver).
	Available() error

	// Prepare readies the engine for the plan (compiling kernels, building
	// executors) and returns an Executor for it. Prepare may be slow; the
	// Executor is reused for every operation of the plan.
	Prepare(p *Plan) (Executor, error)
}

// PrecisionEngine is implemented by an Engine whose arithmetic is not
// float64's (a float32 GPU engine): UnitRoundoff returns the unit
// roundoff u of the arithmetic its states, stages and controller use
// (2^-53 for float64, 2^-24 for float32). NewSolver refuses a RelTol
// below MinRelTol(u), the smallest relative tolerance that arithmetic
// can meet, with an error naming the engine, the tolerance and that
// minimum. On an engine with u = 2^-24 (float32) NewSolver also refuses
// an absolute tolerance below 2^-126, and each call a problem with a
// value beyond ±MaxFloat32 (Y0, P, Shared, the times) or a span shorter
// than 4·2^-23·max(|T0|, |T1|), which float32 would make infinite or
// empty. An Engine without the method computes in float64.
type PrecisionEngine interface {
	Engine
	UnitRoundoff() float64
}

// MinRelTol returns the smallest relative tolerance an engine whose
// arithmetic has unit roundoff u can meet: 20u (10ε, Hairer's bound in
// DOPRI5 and DOP853, 2.2e-15) for float64, and 200u (100ε) for any
// coarser arithmetic, whose rounding of the state at every step
// accumulates over a solve's hundreds of steps to about 100ε: 1.2e-5
// for float32.
func MinRelTol(u float64) float64 {
	if u <= 0x1p-53 {
		return 20 * u
	}
	return 200 * u
}

// Executor runs operations of one plan. It must be safe for concurrent
// use: a Solver shared by goroutines calls Run concurrently.
type Executor interface {
	// Run performs job and returns its result. ctx cancels a long run: Run
	// then returns ctx.Err() (or an error wrapping it) and no result.
	Run(ctx context.Context, job *Job) (*Result, error)
}

// Checks is a set of checks of a job's inputs that an Executor can make
// as it reads the inputs, in place of package ode's own pass over them
// before the job (see CheckingExecutor).
type Checks uint8

const (
	// CheckFinite: every value of Job.Y0 and Job.P is finite. It covers
	// the arrays a problem gave with one row per trajectory; a single row
	// (Job.Y0Row, Job.PRow) package ode checks itself.
	CheckFinite Checks = 1 << iota
	// CheckMeshLen: every Job.Mesh.Len[i] is in [0, Job.Mesh.Rows]. Package
	// ode leaves it only for a mesh whose steps are resident on the
	// executor's engine (Mesh.Resident), whose steps it does not read.
	CheckMeshLen
)

// CheckingExecutor is implemented by an Executor that makes some checks
// of a job's inputs as it copies them: a GPU engine stages every input
// for the device anyway, and a check that rides on that copy saves a pass
// over tens of megabytes per call at millions of trajectories.
//
// Checks returns the checks Run can make. Package ode leaves a job those
// of them it can (Job.Checks: for Grad, not with Method Auto), and Run
// must make every check in Job.Checks before it returns a result; if one
// fails, Run returns an error wrapping ErrInput and no result, and package
// ode then checks the inputs itself and returns its own error, the one an
// engine without the method gets (it names the array, the trajectory and
// the component). A job with errors in several inputs gets the error the
// checks of package ode find first, as on such an engine. The CPU engine
// does not implement CheckingExecutor: package ode checks its inputs
// before the job.
type CheckingExecutor interface {
	Executor
	Checks() Checks
}

// StartTimesExecutor is implemented by an Executor that can run a job
// whose trajectories start at their own times (Job.T0s). StartTimes
// reports whether it can (true for the CPU executor and the GPU engines'
// executors). Method Auto on an engine that does not switch in place
// then continues a trajectory whose stiffness test fired with Rodas5P
// from the time and state where it fired (see Auto); on an executor
// without the method it runs that trajectory again from T0.
type StartTimesExecutor interface {
	Executor
	StartTimes() bool
}

// StopGradsExecutor is implemented by an Executor whose records of a
// loss or a gradient with Job.StopOnStiff complete the trajectories that
// end OK beside the ones they stop: those trajectories' rows of GradY0
// and GradP are their gradient, bit for bit what a replay of their steps
// alone gives, and Loss is the sum of their terms alone in index order
// (the others' terms 0), times Scale. StopGrads reports whether it does
// (true for the GPU engine's executor; the CPU engine's leaves a chunk
// with a stopped trajectory without a gradient). Method Auto then keeps
// its Tsit5 pass's rows of the trajectories that did not stop instead of
// replaying them (runAutoSplit, keptPart).
type StopGradsExecutor interface {
	Executor
	StopGrads() bool
}

// ErrInput is wrapped by every error about a call's inputs (the
// Settings, the Field, the events, the Problem, a Mesh passed back, the
// Loss, a TrainSpec, a time given to DenseSolution.Evaluate; see
// Failures in the package documentation), whose message is the check's
// own, naming the input: errors.Is(err, ErrInput) tells it from a
// run-time failure (a *TrajectoryError, a non-finite gradient, an
// engine's failure, a cancelled context, ErrReleased). An Executor's Run
// whose checks of the job's inputs (Job.Checks, see CheckingExecutor)
// failed returns an error wrapping it too.
var ErrInput = errors.New("invalid input")

// badInput returns err, an error of the checks of a call's inputs, as
// one: an error with err's message that wraps both err and ErrInput. It
// returns err itself where err is nil or wraps ErrInput already.
func badInput(err error) error {
	if err == nil || errors.Is(err, ErrInput) {
		return err
	}
	return &taggedError{err, ErrInput}
}

// InputError returns err, with its message unchanged, wrapping ErrInput
// too (err itself where err is nil or wraps ErrInput already): for an
// engine that finds, as it runs a job, an error of the job's inputs that
// the checks before it could not see, such as a save time past the
// terminal event that ends a trajectory, or a job beyond the
// Settings.MemoryLimit the caller set. (An engine's own limits, as its
// device's memory, are not input errors.)
func InputError(err error) error { return badInput(err) }

// taggedError is err with its message that also wraps a sentinel, tag
// (ErrInput for badInput, ErrNoEvents for CheckEventJob).
type taggedError struct{ err, tag error }

func (e *taggedError) Error() string   { return e.err.Error() }
func (e *taggedError) Unwrap() []error { return []error{e.err, e.tag} }

// Op is the operation of a Job.
type Op int

const (
	// OpSolve integrates adaptively and returns final (and saved) states.
	OpSolve Op = iota
	// OpRecord integrates adaptively and returns the mesh with the states.
	OpRecord
	// OpReplay runs Job.Mesh forward (no gradient).
	OpReplay
	// OpLoss replays Job.Mesh (recording it first if nil) and evaluates the
	// loss without its gradient.
	OpLoss
	// OpGrad computes the loss and its gradient: on Job.Mesh, or recording
	// the mesh first (in the same pass where the engine can) if it is nil.
	OpGrad
)

func (o Op) String() string {
	switch o {
	case OpSolve:
		return "solve"
	case OpRecord:
		return "record"
	case OpReplay:
		return "replay"
	case OpLoss:
		return "loss"
	case OpGrad:
		return "grad"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Job is one operation on an ensemble of N trajectories: validated,
// expanded inputs (every array has all N rows) and the settings an engine
// needs. Arrays are row-major: trajectory i's state is Y0[i*Dim:(i+1)*Dim].
type Job struct {
	Op   Op
	Plan *Plan

	N      int
	T0     float64
	T1     []float64 // [N] end times
	Y0     []float64 // [N×Dim]
	P      []float64 // [N×Params]
	Shared []float64 // [Shared]
	SaveAt []float64 // save times, sorted, within [T0, min T1]

	// Mesh is the mesh to replay (OpReplay, and OpLoss and OpGrad when not
	// nil); it has been checked against the plan and the problem.
	Mesh *Mesh

	// Loss is the loss of OpLoss and OpGrad.
	Loss *LossPlan

	// Tolerances and limits of the controller: RelTol, AbsTol per state
	// component [Dim], MaxSteps (attempts per trajectory). AbsTol is the
	// Solver's, shared by its jobs: an executor must not change it.
	RelTol   float64
	AbsTol   []float64
	MaxSteps int

	// Checkpoint and MemoryLimit bound the states a gradient stores (see
	// Settings); Workers and ChunkSize the CPU work division (0: automatic).
	Checkpoint  int
	MemoryLimit int64
	Workers     int
	ChunkSize   int

	// Progress, if not nil, receives (done, N) as trajectories complete.
	Progress func(done, total int)

	// Y0Row and PRow, if not nil, are the one row ([Dim], [Params]) that
	// Y0 or P repeats N times (the problem gave a single row), and
	// T1Same reports that every T1 is T1[0]: an engine may send the row
	// once instead of its N copies.
	Y0Row, PRow []float64
	T1Same      bool

	// Checks are the checks of the inputs that package ode left to the
	// executor (a CheckingExecutor's; 0 for any other executor).
	Checks Checks

	// Omit names arrays of the Result the caller does not want back
	// (Gradient.Omit): OmitStates Y and Ys, OmitStats Stats.Rejected and
	// Stats.FieldEvals (nil in the recorded Mesh's Stats too). An engine
	// may leave them nil, and saves their copying (a GPU engine's
	// transfer from the device and scatter into row-major arrays); one
	// that fills them anyway (because it uses them itself) gives the
	// same API result: package ode drops them after the run. Where a
	// trajectory failed (its Status is not OK), Stats.Rejected must hold
	// at least the failed trajectories' counts, which a failure's message
	// reads. What else the engine reads of them itself (a loss's states,
	// a check of the saves past a terminal event) it computes as without
	// Omit. Only OpGrad sets it.
	Omit Omit

	// EndTimes asks a record (OpGrad with Mesh nil, set by Grad, not
	// with Method Auto) for what Grad makes of it when every trajectory
	// ends well: the end times T1 in two arrays of N, Result.T (in
	// Reuse.T's storage where large enough) for the Solution and
	// Result.MeshT1 (in Reuse.Mesh.T1's) for the recorded Mesh, and
	// Result.EndsWell. With events Result.T stays the times reached (a
	// terminal event's where one fired), as without EndTimes: MeshT1 and
	// EndsWell are what it asks for. An
	// engine that writes its results in parallel blocks writes them in
	// the same pass (a GPU engine's scatter), where package ode would
	// make a pass of its own over the trajectories after the run. An
	// engine may ignore it (EndsWell false): package ode then writes the
	// end times and checks the statuses itself.
	EndTimes bool

	// Reuse, if not nil, holds arrays of an earlier result (and its Mesh)
	// that the engine may fill instead of allocating new ones: a training
	// loop's results then reuse their storage from call to call. Their
	// lengths do not matter (only their capacity), their contents are
	// overwritten, and the Result returned may alias them.
	Reuse *Result

	// StopOnStiff asks a record to stop a trajectory, with status Stiff,
	// at the accepted step where its stiffness test fires
	// (state'[StateStiff] becomes 1 while Control's status is still
	// StatusRunning), as on a failed trajectory: its Result.T is the
	// time reached there and Result.Stiff is set, but its Result.Y row
	// is the state reached there and its saves before that time are
	// written (not NaN). Its mesh rows (OpRecord, and OpGrad and OpLoss
	// without a mesh) are the accepted steps up to there. The caller
	// (Grad, which refuses that trajectory, and Method Auto on an engine
	// that cannot switch methods in place, which runs it on with Rodas5P
	// from there) does not use the rest of the trajectory, at the
	// method's stability limit, which would be wasted work.
	StopOnStiff bool

	// RecordAll asks an OpGrad that records (Mesh nil) to record every
	// trajectory even after one fails: GradPartial sets it, which runs
	// again on the trajectories that did not fail, so a run that reports
	// every failure at once saves it a run per batch of failures. An
	// engine that stops early where a trajectory fails (the CPU engine
	// leaves the chunks after a failed one NotRun) records them instead;
	// the gradient of such a run is not used, so it may skip the loss and
	// the reverse sweep of every chunk after the failure. An engine may
	// ignore it (GradPartial then runs again on those it left NotRun).
	RecordAll bool

	// CheckStability asks a record of an explicit method (Plan.Probe not
	// nil) to run the stability probe as Plan.Probe describes: a
	// trajectory whose recorded steps amplify a mode of ∂f/∂y, excited by
	// the solution or not, more than Plan.ProbeGrowth times then counts
	// as stiff (Result.Stiff, and with StopOnStiff it stops there with
	// status Stiff), as if the controller's stiffness test had fired.
	// Package ode sets it on the records whose mesh a gradient
	// differentiates: OpGrad and OpLoss without a mesh, and OpRecord
	// (not OpSolve, which then costs nothing more). An engine that
	// ignores it leaves such trajectories unmarked, and their gradients
	// are the unstable discrete map's.
	CheckStability bool

	// Continues, with StopOnStiff, says that the caller runs the stopped
	// trajectories on from where they stopped (Method Auto's pass): an
	// engine may then copy their times and last steps back with its other
	// results rather than read them apart. False for a gradient, which
	// only refuses them.
	Continues bool

	// KeepSaves asks the engine to leave the saved states where it
	// computed them (Settings.KeepSaves): it may return them as
	// Result.Saves instead of Result.Ys (which it then leaves nil), in
	// Solution.Ys's row-major order with NaN rows for failed trajectories
	// (ResidentSaves.CopyTo), as it would have written Ys. An engine may
	// ignore it and fill Ys. Where Reuse.Saves is the engine's own it may
	// write the saves into that memory (and return it); package ode
	// releases an old handle the result does not return. Package ode sets
	// it only where nothing in the call reads Ys on the host: not with
	// Method Auto, nor with Omit's OmitStates.
	KeepSaves bool

	// KeepGrads asks an OpGrad (set by Grad with Settings.KeepGrads, not
	// with Method Auto) to leave in the engine's memory the
	// per-trajectory arrays of its Result: GradY0, GradP, Y, Ys, T,
	// Status, Stiff, Stats's counts, Events, the recorded Mesh's Len
	// (and its Status and Stats, the Result's), and with EndTimes
	// MeshT1 and EndsWell. An engine may do so only where every
	// trajectory ended well (Status OK, no Stiff flag, no event error)
	// and every value of GradY0 and GradP is finite, which it finds
	// without copying the arrays (a reduction on the device): it then
	// returns Result.Grads, with those arrays allocated but not written
	// (their contents are not to be read), and Loss, GradS, the recorded
	// Mesh's steps and the times as usual; Grads.Fill writes them, as
	// the engine would have without KeepGrads. Otherwise (a failure,
	// whose error reads them) it returns them at once. An engine may
	// ignore it. Where Reuse.Grads is the engine's own it may keep the
	// arrays in that memory (and return it); package ode releases an
	// old handle the result does not return.
	KeepGrads bool

	// T0s, if not nil, are the trajectories' own start times [N], in place
	// of T0 (which stays the problem's, at or before each): Method Auto's
	// continuation (see StartTimesExecutor) runs a trajectory on with
	// Rodas5P from the time where its stiffness test fired. A save time
	// before a trajectory's start time is not its: an engine writes what
	// it likes there (package ode reads only the saves at or after the
	// start, the one at it being the initial state), and its cotangent in
	// a gradient is 0. Set only for an executor whose StartTimes reports
	// true, and only for plans without events.
	T0s []float64

	// stiff, if not nil, is the CPU executor of the stiff plan that Method
	// Auto switches a trajectory to, in place, when its stiffness test
	// fires (a record), or that took the steps of a mesh's trajectories
	// from Mesh.Switch on (a replay). Only the CPU engine reads it.
	stiff *cpuExec
}

// startTime returns trajectory i's start time: T0s[i], or T0.
func (j *Job) startTime(i int) float64 {
	if j.T0s != nil {
		return j.T0s[i]
	}
	return j.T0
}

// LossPlan is a traced loss: per-trajectory programs and how to combine
// their values.
type LossPlan struct {
	// Term computes one trajectory's term: inputs y[Dim] (final state),
	// ys[K·Dim] (saved states, time k at k·Dim), data[DataDim],
	// p[Params], s[Shared] (shared); one output ℓ.
	Term *tape.Program
	// Grad has Term's inputs and outputs ℓ, then ∂ℓ/∂y [Dim], ∂ℓ/∂ys
	// [K·Dim], ∂ℓ/∂p [Params] and ∂ℓ/∂s [Shared], all per trajectory.
	Grad *tape.Program
	// Data is the data, [N×DataDim] row-major.
	Data    []float64
	DataDim int
	// Scale multiplies the sum of the terms (1, or 1/N for a mean).
	Scale float64
	// Hash identifies Term, so engines can cache what they derive from it.
	Hash string
}

// Label names the loss in messages: "loss NAME", or "the loss" where it
// was given no Name (a loss named "loss" reads the same).
func (lp *LossPlan) Label() string { return lossLabel(lp.Term.Name) }

// Result is what an Executor returns. Per-trajectory arrays are
// row-major with N rows; fields an operation does not produce are nil.
type Result struct {
	T      []float64         // [N] time reached; an engine may leave it nil for OpGrad and OpLoss without events when every trajectory ended well (each then reached its T1)
	Y      []float64         // [N×Dim] final states (NaN rows for failed trajectories)
	Ys     []float64         // [N×K×Dim] saved states
	Saves  ResidentSaves     // the saved states kept by the engine (Job.KeepSaves), with Ys nil
	Grads  ResidentGrads     // the per-trajectory results kept by the engine (Job.KeepGrads), not yet written
	Status []Status          // [N]
	Stats  Stats             // per-trajectory counts (records only)
	Stiff  []bool            // [N] the stiffness test fired (records of explicit methods)
	Switch []int             // [N] steps taken before switching to the stiff plan (records with Job.stiff; see Mesh.Switch)
	Events []int             // [N] events each trajectory went through (records of plans with events)
	Mesh   *Mesh             // the mesh recorded (OpRecord, OpGrad and OpLoss without a mesh)
	LastH  []float64         // [N] the step size each failed trajectory last tried (records), for error messages; nil where none failed, 0 (or any value) for the others
	LastY  map[int][]float64 // the last accepted state [Dim] of each failed trajectory (records), for error messages

	Loss   float64   // Σ terms · Scale (OpLoss, OpGrad); Reg is added by package ode
	GradY0 []float64 // [N×Dim] ∂L/∂Y0
	GradP  []float64 // [N×Params]
	GradS  []float64 // [Shared], summed over trajectories in index order

	// StoredBytes is the memory the gradient's stored states took at their
	// peak; RecordTime and GradTime split the work of OpGrad.
	StoredBytes          int64
	RecordTime, GradTime time.Duration

	// GradFinite reports that the engine found every value of GradY0 and
	// GradP finite as it wrote them (false: not known); Grad then skips
	// reading them again for its own check.
	GradFinite bool

	// EndsWell reports, for a Job with EndTimes, that every trajectory's
	// Status is OK and none's Stiff flag is set (the engine checked them
	// as it wrote them), and that T and MeshT1 hold every trajectory's
	// end time Job.T1[i] (T is then not the time reached of a record
	// that failed, but the time each reached ending well: the same;
	// with events T is the time reached, a terminal event's where one
	// fired, and MeshT1 the end times).
	// False: not known, T and MeshT1 as without EndTimes.
	EndsWell bool
	MeshT1   []float64 // [N] with EndsWell: the recorded Mesh's T1, in its own storage (not T's)

	// Engine names the engine that ran the job where it is not the
	// executor's own: an executor may serve a job on another engine
	// (package cuda's engine runs on the CPU engine the calls that
	// arrive while their kernel compiles). "" means the executor's
	// engine. The Solution's and the recorded Mesh's Engine are this
	// one (Mesh.Engine "cpu": a host mesh, which every engine reads); a
	// call of several jobs (Method Auto) names it where any of its jobs
	// set it.
	Engine string

	// switched marks the trajectories that Method Auto switched to the
	// stiff plan (Job.stiff), for error messages: [N], nil without it.
	switched []bool
}

// CPU returns the CPU engine ("cpu"), for an engine that serves some jobs
// on it (see Result.Engine): its Prepare returns the CPU executor of a
// plan, the one a Solver on "cpu" runs (cheap after the first, the
// plan's CPU preparation being kept with the plan).
func CPU() Engine { return cpuEngine{} }

// servedBy returns the first non-empty Engine of the results rs (see
// Result.Engine), or "".
func servedBy(rs ...*Result) string {
	for _, r := range rs {
		if r != nil && r.Engine != "" {
			return r.Engine
		}
	}
	return ""
}

var (
	enginesMu sync.RWMutex
	engines   = map[string]Engine{}
	order     []string // registration order, for "auto"
)

// Register makes an engine available by name to Settings.Engine. It
// panics if the name is empty, "auto", or already registered. Engines
// call it from an init function or a Register function of their package.
func Register(e Engine) {
	name := e.Name()
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if name == "" || name == "auto" {
		panic(fmt.Sprintf("ode: Register: invalid engine name %q", name))
	}
	if _, dup := engines[name]; dup {
		panic(fmt.Sprintf("ode: Register: engine %q registered twice", name))
	}
	engines[name] = e
	order = append(order, name)
}

// Engines returns the names of the registered engines, sorted.
func Engines() []string {
	enginesMu.RLock()
	defer enginesMu.RUnlock()
	names := make([]string, 0, len(engines))
	for n := range engines {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ErrNoEngine is returned (wrapped) when Settings.Engine names an engine
// that is not registered.
var ErrNoEngine = errors.New("no such engine")

// ErrUnavailable is wrapped, beside the engine's own reason (such as
// package cuda's driver.ErrNoGPU), by the error of NewSolver when
// Settings.Engine names a registered engine that cannot run here: no
// GPU, no driver. "auto" never returns it; it falls back to the CPU.
var ErrUnavailable = errors.New("not available")

// lookupEngine returns the engine for Settings.Engine: "" and "cpu" the CPU
// engine; "auto" the first registered engine other than the CPU that is
// available, else the CPU; any other name that engine, which must be
// available.
func lookupEngine(name string) (Engine, error) {
	enginesMu.RLock()
	defer enginesMu.RUnlock()
	switch name {
	case "", "cpu":
		return engines["cpu"], nil
	case "auto":
		for _, n := range order {
			if n == "cpu" {
				continue
			}
			if e := engines[n]; e.Available() == nil {
				return e, nil
			}
		}
		return engines["cpu"], nil
	}
	e, ok := engines[name]
	if !ok {
		names := make([]string, 0, len(engines))
		for n := range engines {
			names = append(names, n)
		}
		sort.Strings(names)
		hint := ""
		if name == "cuda" {
			hint = " (import github.com/gradsolve-go/gradsolve/cuda to register it)"
		}
		return nil, badInput(fmt.Errorf("ode: engine %q: %w%s; registered: %v, or \"auto\"", name, ErrNoEngine, hint, names))
	}
	if err := e.Available(); err != nil {
		return nil, fmt.Errorf("ode: engine %q is %w: %w", name, ErrUnavailable, err)
	}
	return e, nil
}

// RecordedMesh returns the mesh of a record of job j whose result is res,
// for an engine to complete with its steps (H, or Resident): N and the
// span of j, each trajectory's length its accepted steps (in the storage
// of lens where it is large enough), Rows the longest, and res's statuses
// and counts. Every engine builds its meshes with it (or with
// RecordedMeshLen).
func RecordedMesh(j *Job, res *Result, lens []int) *Mesh {
	n := j.N
	lens = par.Append(lens, res.Stats.Accepted[:n])
	// The longest, on all cores (a mesh of 2^20 trajectories).
	nb := (n + par.Block - 1) / par.Block
	longest := make([]int, nb)
	par.Run(nb, 0, func(_, b int) {
		mx := 0 // in a register: the blocks' slots share cache lines
		for _, l := range lens[b*par.Block : min(n, (b+1)*par.Block)] {
			mx = max(mx, l)
		}
		longest[b] = mx
	})
	rows := 0
	for _, l := range longest {
		rows = max(rows, l)
	}
	return RecordedMeshLen(j, res, lens, rows)
}

// RecordedMeshLen is RecordedMesh for an engine that has written the
// lengths itself, into lens ([N]: each trajectory's accepted steps, as
// res.Stats.Accepted), as it wrote the counts, and knows the longest,
// rows: it saves RecordedMesh's copy of the counts and its pass over
// them. The mesh's Len is lens.
func RecordedMeshLen(j *Job, res *Result, lens []int, rows int) *Mesh {
	return &Mesh{N: j.N, Rows: rows, Len: lens[:j.N], Status: res.Status, Stats: res.Stats, T0: j.T0, T1: j.T1}
}
