package ode

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gradsolve-go/gradsolve/internal/buf"
	"github.com/gradsolve-go/gradsolve/internal/finite"
	"github.com/gradsolve-go/gradsolve/internal/par"
	"github.com/gradsolve-go/gradsolve/internal/sysmem"
	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Problem is an ensemble of N initial-value problems sharing one field.
//
// Arrays are row-major: trajectory i's initial state is Y0[i*Dim:(i+1)*Dim]
// and its parameters P[i*Params:(i+1)*Params]. A single row (len Dim, or
// len Params) is used for every trajectory.
type Problem struct {
	Field Field

	// N is the number of trajectories; 0 means len(Y0)/Dim. An ensemble
	// whose inputs and results alone would not fit in the machine's
	// memory (MemTotal, or GOMEMLIMIT if smaller) is refused with an
	// error wrapping ErrTooLarge before anything is allocated.
	N int

	Y0     []float64 // [N×Dim] or [Dim]
	P      []float64 // [N×Params] or [Params]; may be nil if Params is 0
	Shared []float64 // [Shared]

	// T0 and T1 bound the time span; T1 > T0 (the solvers integrate
	// forward only: for backward integration solve z(s) = y(−s), z' =
	// −F(−s, z, p) from −T0 to −T1, an event's condition as G(−s, z, p)
	// with its Direction flipped), both finite, with T1 − T0
	// finite and at least 4ε·max(|T0|, |T1|), the smallest step the
	// solver takes at those times (a span far from the origin, as
	// [1e20, 1e20 + 1e5], resolves only steps of 4ε·|t|: shift the
	// origin to 0). T1s, if not nil, gives each trajectory its own end
	// time ([N], each > T0) instead of T1.
	T0, T1 float64
	T1s    []float64

	// SaveAt lists times (non-decreasing, within [T0, min end time],
	// else an error naming the time) at which the states are returned,
	// read by default from the method's continuous extension of the step
	// that brackets each time (Settings.Saves): no extra steps, so 1,000
	// save times cost little more than one, and the gradient through them
	// is exact (the interpolant's VJP within the bracketing step's
	// reverse). A time on a mesh point is that point's state, T0 is y0
	// and the end time the final state, bit for bit.
	//
	// Accuracy, measured against closed forms (decay, a damped
	// oscillator, a stiff system with eigenvalues −1 and −1000, the Kepler
	// orbit) at RelTol 1e-4, 1e-6 and 1e-8: the largest error of 97 saved
	// states is, against the largest error of the mesh states (the end
	// state's included), 0.88–2.9× for Tsit5, 0.99–2.6× for Vern7,
	// 0.99–1.01× for Rosenbrock23, and 0.98–40× for Rodas5P, whose order-4
	// extension is coarser than its order-5 steps (20–40× on the decay,
	// where the steps are 200× more accurate than the tolerance; the
	// saved states then still err by less than 0.25 tolerances; 59× at
	// RelTol 1e-10, and against the end state's error on the decay, which
	// shrinks with y, 620×: use SaveStep where that matters). Against
	// the end state's error at RelTol 1e-8 (the Kepler orbit): 0.98×
	// (Tsit5) and 0.99× (Vern7); see TestDenseAccuracy for the table.
	// The error test checks the steps, not the extension: on a stiff
	// problem whose solution follows a slow forcing, Rodas5P's steps are
	// accurate far beyond the tolerance and long, and its extension is
	// not. Prothero–Robinson's y' = λ·(y − sin 2t) + 2·cos 2t from y(0)
	// = 0 over [0, 3] (8 steps at λ = −1e6, RelTol = AbsTol = 1e-6): 97
	// saved states err by up to 5.5e-3, 5,500 tolerances (74 at λ =
	// −1e4; 7,400 at RelTol 1e-8); Kaps' problem at ε = 1e-9 by 2e-6 at
	// RelTol 1e-8 (docs/more-results.md, session 53). SaveStep's saves
	// are within 0.35 tolerances there, at the same steps.
	// Settings.Saves = SaveStep computes each as a genuine step from the
	// mesh point before it instead, as accurate as the mesh states
	// (0.73–1.17×) at one step per save time. Save times are constants:
	// there is no derivative with respect to them. Nil saves only the end
	// state.
	SaveAt []float64
}

// Settings configure a solve. The zero value means the defaults.
type Settings struct {
	// Method is the integration method; nil lets the router choose: Tsit5,
	// or Rodas5P for a field marked Stiff. Auto runs Tsit5 and switches a
	// trajectory to Rodas5P, from where it is, when its stiffness test
	// fires (see Auto).
	Method Method

	// Engine names the engine that runs the work: "" or "cpu" for the
	// built-in CPU engine, the name of a registered engine (package cuda
	// registers "cuda"), or "auto" for the first registered engine that is
	// available here, else the CPU. Results record the engine that ran.
	Engine string

	// RelTol and AbsTol are the tolerances of the error norm
	// sqrt(mean((e_i/(AbsTol + RelTol·max(|y_i|, |y⁺_i|)))²)) ≤ 1.
	// 0 means 1e-6 and 1e-9. RelTol must lie in [10ε, 1) (10ε ≈ 2.2e-15,
	// the smallest relative tolerance float64 can meet, as in Hairer's
	// codes); AbsTol must be positive and finite: a tiny AbsTol (1e-30)
	// makes the tolerance purely relative, and a state no larger than
	// AbsTol is solved to no relative accuracy at all (the default asks
	// none of states of 1e-12), so set it well below the states' scale.
	RelTol, AbsTol float64

	// AbsTols, if not nil, gives each state component its own absolute
	// tolerance ([Dim], each positive and finite) in place of AbsTol, for
	// systems whose components differ in scale by orders of magnitude.
	AbsTols []float64

	// MaxSteps caps the attempted (accepted + rejected) steps of each
	// trajectory; 0 means 100000, a negative value is an error.
	MaxSteps int

	// Dt0 is the first step size (positive and finite); 0 picks it per
	// trajectory with Hairer's algorithm (one extra field evaluation).
	// Either way the first step is at least 4ε·|T0|, the smallest step
	// float64 resolves there, and at most T1 − T0.
	Dt0 float64

	// Saves says how saved states (Problem.SaveAt) are computed: the
	// zero value, SaveInterpolate, reads them from the method's
	// continuous extension of the step that brackets each save time (no
	// extra steps); SaveStep makes each one a genuine step from the mesh
	// point before it (one step per save time, as accurate as the mesh
	// states). See Problem.SaveAt for their accuracy. Every engine
	// computes the same values in either mode: the CPU and GPU engines
	// read interpolated save times from the bracketing step's DenseStep
	// (Plan), with no field evaluations per save time.
	Saves SaveMode

	// Controller sets the step-size controller; the zero value is the
	// integral controller with the method's exponent. Its constants must
	// be finite (see Controller for their ranges).
	Controller Controller

	// AllowFailures returns per-trajectory statuses instead of an error
	// when trajectories fail (as diffrax's throw=False). Grad never
	// differentiates a failed mesh: it reports the failure regardless;
	// Solver.GradPartial returns the gradient of the trajectories that
	// finish and a status for each that does not.
	AllowFailures bool

	// KeepSaves asks the engine to keep the saved states (Problem.SaveAt)
	// where it computed them until the caller reads them: a GPU engine
	// then leaves them in device memory, in Solution.Resident, and
	// Solution.Ys is nil until Solution.HostSaves copies them to the
	// host (one device-to-host copy of N·K·Dim float64s, already in Ys's
	// row-major order); Solution.Release frees them unread. A call whose
	// saves nobody reads (a sweep that reads the final states, a loop
	// that reads the saves of one call in ten) then does not pay for
	// their copy: 131 MB at 1,000 save times of 4,096 four-component
	// trajectories, several times the kernels' time. It applies to Solve,
	// SolveTo, Record and Grad (the saves of Gradient.Solution; with
	// Gradient.Omit's OmitStates they are dropped all the same).
	//
	// The zero value returns the saves in Ys, as does every engine that
	// does not keep them: the CPU engine (its saves are on the host
	// already), the float32 and multi-GPU engines, a launch split into
	// chunks of trajectories (larger than the device's free memory),
	// Method Auto, and a loss or gradient with events (which reads the
	// saves on the host). Code that reads Ys calls HostSaves first (it
	// does nothing where Ys holds them); plot does.
	KeepSaves bool

	// KeepGrads asks the engine of a Grad to keep the per-trajectory
	// results where it computed them until the caller reads them: a GPU
	// engine then leaves ∂L/∂Y0, ∂L/∂P and the Solution's and recorded
	// Mesh's statuses, counts, times and event counts (and the states,
	// unless Gradient.Omit leaves them out) in device memory
	// (Gradient.Resident), and returns only the loss, the shared
	// gradient (a reduction: Shared values) and whether every
	// trajectory ended well with finite gradients (a reduction on the
	// device). The loss is then summed on the device too: the GPU
	// engines sum the per-trajectory terms exactly and round once,
	// where without KeepGrads they are added in index order, so the two
	// losses agree to the in-order sum's rounding, (N−1)·2^−53·Σ|terms|
	// at most (a few ulps in practice); everything else is the same. Gradient.Y0, P, Solution and Mesh are then nil until
	// Gradient.HostGrads copies the arrays to the host and fills them,
	// bit for bit as without KeepGrads; Gradient.Release frees them
	// unread. A call whose per-trajectory results nobody reads (a fit of
	// shared parameters, a loop that reads the loss) then does not pay
	// for their copy and their scatter into row-major arrays, most of a
	// whole GPU call's host time at 65,536 trajectories.
	//
	// Failures are reported as without it: where a trajectory failed or
	// was stiff, or a gradient value is not finite, the engine returns
	// the arrays at once and Grad returns its error, the one without
	// KeepGrads. It applies to Grad and GradContext (not GradPartial,
	// which reads the statuses, nor Method Auto, which merges its parts
	// on the host). The zero value returns everything at once, as does
	// every engine that does not keep them: the CPU engine (its results
	// are on the host already), the float32 and multi-GPU engines, a
	// launch split into chunks of trajectories, and a loss or gradient
	// with events and save times. Code that reads the arrays calls
	// HostGrads first (it does nothing where they are on the host).
	KeepGrads bool

	// Checkpoint and MemoryLimit configure the gradient's storage of
	// states; see scan.Settings. Both must be non-negative (0: automatic,
	// and 4 GiB); a Checkpoint interval longer than a trajectory stores
	// its initial state only.
	Checkpoint  int
	MemoryLimit int64

	// Exec configures the executors; see tape.ExecSettings. Workers and
	// BlockSize must be non-negative (0: automatic); a BlockSize above N
	// is N.
	Exec tape.ExecSettings

	// Events are conditions whose zero crossings each trajectory's solve
	// locates, ending a step there and stopping (terminal) or continuing
	// (after a jump); gradients are exact through them (see Event). Only
	// engines that implement EventEngine run them: the CPU engine and
	// package cuda's GPU engines ("cuda", "cuda-multi", "cuda-f32"; one
	// thread per trajectory).
	// Save times with events and a given mesh with events (Grad, Loss,
	// Replay with m != nil) run on all of them (see Event: which side of
	// an event a save time takes, NaN past a terminal event; a mesh marks
	// its event steps, Mesh.Events, and each engine replays the others'
	// meshes).
	Events []Event

	// MaxEvents bounds the events of one trajectory; a trajectory that
	// would pass it ends with status TooManyEvents (as a ball coming to
	// rest bounces infinitely often in finite time), as does one whose
	// events accumulate at one time before that (an event firing again
	// at the time it fired; see Event). 0 means DefaultMaxEvents.
	MaxEvents int

	// Progress, if not nil, is called as work on the ensemble completes,
	// with the number of trajectories done so far and the total. It may be
	// called from several goroutines at once and must return quickly.
	Progress func(done, total int)
}

// absTol returns the absolute tolerance of state component c.
func (s *Settings) absTol(c int) float64 {
	if s.AbsTols != nil {
		return s.AbsTols[c]
	}
	return s.AbsTol
}

// Controller is a PI step-size controller. After a step with error norm
// err the next step is h·clip(Safety·err^(−Beta1)·errPrev^(Beta2),
// FactorMin, FactorMax), where errPrev is the previous accepted error norm
// (floored at 1e-4); a rejected step uses the same formula without the
// errPrev factor. The zero value is the integral controller used by
// gradsolve: Beta1 = 1/(ErrOrder+1), Beta2 = 0, Safety 0.9, clip [0.2, 5].
// Valid constants are finite with Beta1 > 0, 0 < Safety ≤ 1 and
// 0 < FactorMin < 1 < FactorMax; anything else is an error.
type Controller struct {
	Beta1, Beta2         float64 // 0: 1/(ErrOrder+1) and 0
	Safety               float64 // 0: 0.9
	FactorMin, FactorMax float64 // 0: 0.2 and 5
}

// PIController returns OrdinaryDiffEq.jl's default PI controller for m:
// Beta1 = 7/(10q), Beta2 = 2/(5q) with q = ErrOrder+1, clip [0.2, 10].
func PIController(m Method) Controller {
	q := float64(m.ErrOrder() + 1)
	return Controller{Beta1: 0.7 / q, Beta2: 0.4 / q, FactorMax: 10}
}

func (c Controller) withDefaults(m Method) Controller {
	if c.Beta1 == 0 {
		c.Beta1 = 1 / float64(m.ErrOrder()+1)
	}
	if c.Safety == 0 {
		c.Safety = 0.9
	}
	if c.FactorMin == 0 {
		c.FactorMin = 0.2
	}
	if c.FactorMax == 0 {
		c.FactorMax = 5
	}
	return c
}

// Defaults of Settings.
const (
	DefaultRelTol   = 1e-6
	DefaultAbsTol   = 1e-9
	DefaultMaxSteps = 100000
)

func (s *Settings) withDefaults(f *Field) Settings {
	var set Settings
	if s != nil {
		set = *s
	}
	if set.Method == nil {
		set.Method = Route(f)
	}
	if set.RelTol == 0 {
		set.RelTol = DefaultRelTol
	}
	if set.AbsTol == 0 {
		set.AbsTol = DefaultAbsTol
	}
	if set.MaxSteps == 0 {
		set.MaxSteps = DefaultMaxSteps
	}
	if set.MaxEvents == 0 {
		set.MaxEvents = DefaultMaxEvents
	}
	set.Controller = set.Controller.withDefaults(set.Method)
	if set.AbsTols != nil {
		set.AbsTols = slices.Clone(set.AbsTols) // (non-nil when empty: checkSettings refuses that)
	}
	return set
}

// Auto, as Settings.Method, integrates every trajectory with Tsit5 and
// switches it to Rodas5P, during the solve, at the accepted step where its
// stiffness test fires (Hairer's test: 15 steps at Tsit5's stability
// boundary without 6 calm steps between them).
//
// The test is Auto's own (its Tsit5 plan's trial and control programs,
// Plan.Variant "auto"). Its estimate of the step's dominant eigenvalue is
// ρ = max(ρ_2, ρ_r, ρ_e). ρ_2 = ‖k7 − k6‖/‖g7 − g6‖ is Hairer's (Tsit5's
// last two stages, both at t + h, and their inputs, in Euclidean norms);
// ρ_r and ρ_e are scale-invariant, each component divided by s_c =
// max(|g6_c|, |g7_c|, 2^-1000), the weighting of a relative tolerance's
// error norm (without the tolerance: one trial program serves every
// tolerance): ρ_r is ρ_2's ratio in that norm, and ρ_e = ‖Σ e_j k_j/s‖ /
// ‖Σ e_j g_j/s‖ (e = b − b̂, the error weights) the same quotient along
// the error estimate's direction, exact for an affine field, where the
// stiff modes are at the stability limit (they are what the controller
// rejects) though they stay too small in g7 − g6 for ρ_r. ρ_2 is ruled by
// the large, slow components: at rtol 1e-8 and a purely relative
// tolerance POLL switched after 73,880 Tsit5 steps and ROBER (to t =
// 1e11) after 10,675; with ρ_r after 643 and 2,031; with ρ_e and the
// boundary below after 96 and 106 (Rodas5P alone: 472 and 761 steps;
// Rodas5P reaches the switch times in 50 and 98). The damped rotation y'
// = [[−a, ω], [−ω, −a]]·y with ω = 10a, whose eigenvalues lie where
// Tsit5's stability boundary is below the test's threshold, switches,
// where ρ_2 never fires; a fast mode in a large component near its
// equilibrium beside one decaying to 0, which the relative norms weigh
// by its own rate however small it is, switches by ρ_2
// (TestAutoSwitchPoint).
//
// A step counts where h·ρ exceeds 0.9 times Tsit5's stability size 3.5068
// (DifferentialEquations.jl's AutoSwitch margin; plain Tsit5's flag keeps
// DOPRI5's 3.25/3.3: at the stability limit the controller settles a few
// per cent below the stability size, ROBER's steps at h·ρ = 3.35–3.45 for
// 1,900 steps) and its error norm is at least 0.01, so that the steps of
// Hairer's initial ramp, whose size the controller's growth limit chose
// and whose relative estimates read how fast components grow from 0,
// never count. No trajectory of the non-stiff test problems (Pleiades,
// Lorenz, Kepler, Van der Pol at μ = 1, Lotka–Volterra, Arenstorf,
// Lorenz-96, a chain whose products grow from 0) switches at rtol 1e-3 to
// 1e-12, nor at a purely relative tolerance. The estimates cost about
// eighteen traced values a component in every trial step, so only Auto's
// Tsit5 computes them (on every engine: the CPU's and the GPU kernels run
// that plan's trial and control programs); plain Tsit5 and Vern7 keep
// Hairer's ρ_2 and DOPRI5's boundary for their Stiff flags, and their
// cost.
//
// A trajectory whose test fired goes on with Rodas5P from the time and
// state reached there, with a first step of its own (Settings.Dt0, or
// Hairer's estimate there) and its step counts going on (MaxSteps bounds both methods' attempts together); the others
// go on with Tsit5. The mesh records where each switched (Mesh.Switch,
// Solution.Switch), and Replay, Grad, save times and SolveDense follow
// the recorded methods: the gradient of a switched trajectory is the
// exact discrete adjoint of that composition, the Rodas5P steps' adjoint
// chained into the Tsit5 steps' through the state at the switch, whose
// time the mesh fixes. Results name the method "Auto" when a trajectory
// switched, "Tsit5" when none did. No trajectory is left Stiff, so Grad
// never returns the gradient of an explicit method at its stability limit.
//
// Cost: a switched trajectory pays its Tsit5 steps up to the switch
// (Robertson: 26 Tsit5 steps, to t = 0.030), then Rodas5P's, so an
// ensemble costs about what the better of Tsit5 and Rodas5P alone costs
// on it, within 1.1× at 256 trajectories (bench/RESULTS.md, "Method
// Auto"). Auto does not run events.
//
// The switch in place is the CPU engine's. Other engines (the GPU ones)
// switch per trajectory by continuing (ode.StartTimesExecutor): the Tsit5
// pass stops a trajectory where its test fires (Job.StopOnStiff), at t_s
// with state y_s, and finishes the others, whose results are final; the
// stopped trajectories alone then go on with Rodas5P from (t_s, y_s), in
// a job of their rows whose trajectories start at their own times
// (Job.T0s), and the two parts are merged into one result of all N
// trajectories, in their order: the same steps, switch points and counts
// as the CPU engine's switch (Switch[i] is the Tsit5 steps' count, Len[i]
// for a trajectory that did not switch), the states and gradients within
// rounding of its. (One difference: MaxSteps bounds the attempts of each
// method's segment there, not of both together.) A Loss or Grad of the switched trajectories chains
// the two segments: the loss's term and cotangents from the states of
// both (computed on the host: a few values a trajectory), the Rodas5P
// segment's gradient from those cotangents (a gradient job on its steps,
// the cotangents as a linear loss), which gives the cotangent of y_s, and
// the Tsit5 segment's from that and the cotangents of the saves before
// t_s. The merged loss is the Tsit5 part's sum plus the switched part's,
// and the shared gradient likewise, component by component: the same
// from run to run, and within rounding of the index-order sum (engines
// report sums, not terms). A Loss or Grad whose Tsit5 pass stopped
// trajectories runs the others again for sums without the stopped ones:
// a replay of the pass's own mesh (the same map), or, on an engine that
// left them unrun, Tsit5 again. Cost, with S of N trajectories stiff: a
// Solve or Record costs the Tsit5 pass (the stiff ones up to their test)
// plus Rodas5P on S from their switch times; a Grad or Loss that much
// plus a replay and its gradient on the N − S others, and on the S a
// gradient job of each method on its segment's steps (no trial steps;
// with save times, a Rodas5P replay more on an engine whose record
// returns no saves; without save times, the Rodas5P record and gradient
// are one job with the loss itself). An ensemble without a stiff trajectory costs one
// Tsit5 pass, as Tsit5 does. A merged mesh is on the host, and replays
// on any engine: its Tsit5 and Rodas5P trajectories as sub-meshes each
// by its own method, its switched ones as the two segments chained. An
// engine whose executor does not run per-trajectory start times, and a
// plan with events, run the stopped trajectories again from T0 with
// Rodas5P instead (Switch[i] = 0: all their steps Rodas5P's), and such
// an engine refuses a mesh switched partway (0 < Switch < Len) with an
// error saying so.
var Auto Method = autoMethod{}

type autoMethod struct{}

func (autoMethod) Name() string  { return "Auto" }
func (autoMethod) Order() int    { return Tsit5.Order() }
func (autoMethod) ErrOrder() int { return Tsit5.ErrOrder() }
func (autoMethod) steps(f *Field, fp *tape.Program) (*stepPrograms, error) {
	return autoTsit5.steps(f, fp)
}

// methodByName returns the built-in method called name, or nil.
func methodByName(name string) Method {
	for _, m := range []Method{Tsit5, Vern7, Rodas5P, Rosenbrock23} {
		if m.Name() == name {
			return m
		}
	}
	return nil
}

// Route returns the method the router picks for f: Tsit5, or Rodas5P if f
// is marked Stiff and Rodas5P is available.
func Route(f *Field) Method {
	if f.Stiff && stiffDefault != nil {
		return stiffDefault
	}
	return Tsit5
}

// stiffDefault is the router's stiff method (nil until one is built in).
var stiffDefault Method

// Stats counts the work of each trajectory.
type Stats struct {
	Accepted, Rejected, FieldEvals []int // per trajectory
	Wall                           time.Duration
}

// TotalAccepted returns the accepted steps of all trajectories.
func (s *Stats) TotalAccepted() int { return sum(s.Accepted) }

// TotalRejected returns the rejected steps of all trajectories.
func (s *Stats) TotalRejected() int { return sum(s.Rejected) }

func sum(x []int) int {
	t := 0
	for _, v := range x {
		t += v
	}
	return t
}

// Mesh is a recorded mesh: the accepted step sizes of every trajectory,
// step-major (step s of trajectory i is H[s*N+i], for s < Len[i]), with
// what produced it. Grad replays it with the step sizes held fixed.
//
// An engine that runs elsewhere than the host (a GPU engine) may keep the
// steps where it recorded them: Resident is then set and H is nil until
// Host copies them over. A replay or gradient on the same engine uses the
// resident steps where they are; any other use (another engine, a check
// of the steps, a caller reading H) needs Host first, which this package
// calls where it needs the steps. Len, Status and Stats are always on the
// host. A mesh recorded with events may keep its event marks with the
// resident steps (ResidentEvents): Events is then nil until Host, and a
// replay on that engine reads them where they are, unchecked (its own
// record wrote them). A replay on the engine of a resident mesh that a Grad recorded
// with every trajectory OK reads none of them again but Len (which the
// engine checks as it sends it to the device): its steps, out of the
// caller's reach, are that record's until a later record reuses their
// memory (a Gradient passed back to Grad), so that the replay costs no
// pass over the host arrays.
type Mesh struct {
	N, Rows int
	H       []float64 // [Rows×N]; nil while Resident holds the steps

	// Resident, if not nil, holds the [Rows×N] steps on the engine that
	// recorded them (see Host and Release), and with events maybe their
	// marks (ResidentEvents).
	Resident ResidentSteps

	Len    []int    // [N]
	Status []Status // [N]
	Stats  Stats

	// What the mesh was recorded for; a replay checks them against its
	// problem and plan. The arrays are the mesh's own copies (changing
	// the problem's SaveAt or the settings' AbsTols later leaves them).
	T0          float64
	T1          []float64 // end time of each trajectory [N]
	SaveAt      []float64 // the save times of the record
	Method      Method
	RelTol      float64
	AbsTol      float64
	AbsTols     []float64
	Fingerprint string // Plan.Fingerprint of the field and method that recorded it ("" skips the check)
	Engine      string // the engine that recorded it (Result.Engine: "cpu" where the solver's engine served the record there)
	Stiff       []bool // [N] the stiffness test fired (explicit methods; see Solution.Stiff)

	// Switch, if not nil, says which method took each step of a mesh that
	// Method Auto recorded with a switch (Method is then Auto): trajectory
	// i's steps s < Switch[i] are Tsit5 steps and its steps Switch[i] ≤ s
	// < Len[i] are Rodas5P steps, the first of them from the state and
	// time where Tsit5's last step ended; Switch[i] = Len[i] for a
	// trajectory that did not switch. [N], on the host, as Len.
	// Fingerprint is then that of the Tsit5 plan. Nil for a mesh of one
	// method. The GPU engines continue a stiff trajectory from its
	// switch as the CPU engine does (see Auto), and replay such a mesh;
	// an engine that restarts it from T0 instead writes Switch[i] = 0
	// (all Rodas5P steps) and replays only meshes of Switch 0 or Len.
	Switch []int

	// t1, if t1Set, is the one end time every trajectory was recorded to
	// (a problem with T1 and no T1s): checkMesh compares it with such a
	// problem's T1 instead of reading T1 whole.
	t1    float64
	t1Set bool

	// Events, for a mesh recorded with Settings.Events, marks its event
	// steps: [Rows×N], step-major as H, on the host; Events[s*N+i] is
	// e+1 if step s of trajectory i ends at event e (a step of size h*
	// that the record located, followed by e's Apply or, if e is
	// terminal, the trajectory's end), 0 for an ordinary step; events
	// whose roots coincide mark a step each, the first the event step, the
	// others the steps of size 0 after it, in the order they fire (see
	// Event). EventHash
	// is the recording plan's EventPlan.Hash. Both are nil/"" for a mesh
	// recorded without events; a replay checks them against its events
	// (see Event). An engine that keeps the steps (Resident) may keep
	// the marks with them (ResidentEvents): Events is then nil, as H is,
	// until Host copies both. The CPU engine and the GPU engine "cuda"
	// record the marks and replay meshes with events, each the other's
	// too.
	Events    []int32
	EventHash string

	// ok, if valid, vouches for the resident steps (stepsOK).
	ok *stepsOK
}

// Failed returns the first failed trajectory as a *TrajectoryError, or nil.
func (m *Mesh) failed(t []float64, h []float64) error {
	method := ""
	if m.Method != nil {
		method = m.Method.Name()
	}
	err := firstFailure(m.Status, t, h, method)
	if e, ok := err.(*TrajectoryError); ok && (t == nil || e.Index >= len(m.Len) || m.Len[e.Index] == 0) {
		// Where it stopped is not known: no times, or no steps kept
		// (GradPartial's mesh keeps none of a failed trajectory).
		e.noTime = true
	}
	return err
}

// firstFailure returns the first trajectory whose status is not OK as a
// *TrajectoryError (with its time and last step if t and h are given), or
// nil.
func firstFailure(status []Status, t, h []float64, method string) error {
	// The first failure that is not NotRun (trajectories an engine left
	// when another failed), else the first NotRun.
	// All OK, the common case, is one read on all cores.
	if par.First(len(status), func(lo, hi int) int {
		for i := lo; i < hi; i++ {
			if status[i] != OK {
				return i
			}
		}
		return -1
	}) < 0 {
		return nil
	}
	first, count := -1, 0
	for i, s := range status {
		if s != OK {
			count++
			if first < 0 || status[first] == NotRun && s != NotRun {
				first = i
			}
		}
	}
	if first < 0 {
		return nil
	}
	e := &TrajectoryError{Index: first, Status: status[first], Method: method, Failed: count}
	if t != nil {
		e.T = t[first]
	}
	if h != nil {
		e.H = h[first]
	}
	return e
}

// problem is a validated Problem with its arrays expanded to N rows.
type problem struct {
	*Problem
	n     int
	y0, p []float64 // [N×Dim], [N×Params]
	t1    []float64 // [N]
	tmin  float64   // smallest end time

	// checks are the checks of the inputs left to the executor
	// (Job.Checks; see CheckingExecutor); leaveMesh those of a mesh
	// that checkMesh may add to them.
	checks, leaveMesh Checks

	// t0s are the trajectories' own start times (Job.T0s; nil: T0), of
	// Method Auto's Rodas5P segments (see continueAuto).
	t0s []float64

	// omit is the Gradient.Omit of a Grad (Job.Omit; 0 for any other
	// operation), kept by its sub-problems (GradPartial, Method Auto).
	omit Omit

	// ends asks the executor for the end times of a Grad's record
	// (Job.EndTimes).
	ends bool

	// keep asks the executor of a Grad to keep its per-trajectory
	// results (Job.KeepGrads).
	keep bool

	// recordAll asks the executor of GradPartial's record to record every
	// trajectory though one fails (Job.RecordAll).
	recordAll bool
}

// saveTimes returns a copy of the save times (nil for none), the record
// a Solution or Mesh keeps of them, in old's storage where it is large
// enough and is not the problem's own: a caller may reuse or change its
// SaveAt slice after the call.
func (q *problem) saveTimes(old []float64) []float64 {
	if len(q.SaveAt) == 0 {
		return nil
	}
	if cap(old) < len(q.SaveAt) || buf.Overlap(old, q.SaveAt) {
		old = nil
	}
	return append(old[:0], q.SaveAt...)
}

// endTimes returns the end times ([N]) in dst's storage where it is large
// enough: one end time repeated (no array read), or T1s copied.
func (q *problem) endTimes(dst []float64) []float64 {
	if q.T1s == nil {
		return par.Repeat(dst, q.n, q.T1)
	}
	return par.Append(dst, q.t1)
}

func finiteAll(x []float64) int {
	if len(x) <= par.FirstSerial {
		return finite.First(x) // (par.First's own serial case, without its closure)
	}
	// An ensemble's inputs and gradients are tens of megabytes: the
	// blocks are read on all cores and the first bad one wins.
	return par.First(len(x), func(lo, hi int) int {
		if i := finite.First(x[lo:hi]); i >= 0 {
			return lo + i
		}
		return -1
	})
}

// stepFloor is the smallest step the controller takes relative to |t|:
// 4ε (see buildControl).
const stepFloor = 4 * 0x1p-52

// stepFloor32 is stepFloor in float32's ε: the smallest step, relative
// to |t|, of an engine that computes in float32 (computesFloat32).
const stepFloor32 = 4 * 0x1p-23

// computesFloat32 reports whether eng computes in float32: a
// PrecisionEngine whose unit roundoff is 2^-24.
func computesFloat32(eng Engine) bool {
	pe, ok := eng.(PrecisionEngine)
	return ok && pe.UnitRoundoff() == 0x1p-24
}

// minStep returns the smallest step size the controller takes at times
// up to |t| = tmax.
func minStep(tmax float64) float64 { return stepFloor * tmax }

// checkEndTime reports an end time t1 of trajectory i that is not finite
// and greater than t0, or whose span fails checkSpan.
func checkEndTime(f *Field, i int, t0, t1 float64) error {
	switch {
	case t1 < t0 && !math.IsInf(t1, 0):
		return fmt.Errorf("ode: %s: end time %v of trajectory %d must be greater than T0 = %v: the solvers integrate forward in time only; "+
			"to integrate backward, solve z' = −F(−s, z, p) (z(s) = y(−s)) from s = −T0 to −T1, whose end state is y(T1) "+
			"(with events, write each condition of s, G(−s, z, p), and flip its Direction: a crossing that rises in t falls in s)", f.name(), t1, i, t0)
	case t1 == t0:
		return fmt.Errorf("ode: %s: end time %v of trajectory %d must be greater than T0 = %v: the span is empty (y(T0) is Y0)", f.name(), t1, i, t0)
	case !(t1 > t0) || math.IsInf(t1, 0):
		return fmt.Errorf("ode: %s: end time %v of trajectory %d must be finite and greater than T0 = %v", f.name(), t1, i, t0)
	}
	return checkSpan(f, i, t0, t1)
}

// checkSpan reports a span [t0, t1] (t1 > t0, both finite) of trajectory
// i whose length overflows float64 or is shorter than the smallest step
// the controller takes at those times, so that no step of the solve could
// be resolved.
func checkSpan(f *Field, i int, t0, t1 float64) error {
	span := t1 - t0
	tmax := math.Max(math.Abs(t0), math.Abs(t1))
	switch {
	case math.IsInf(span, 0):
		return fmt.Errorf("ode: %s: the span T1 − T0 = %v − (%v) of trajectory %d overflows float64; use a shorter span, or rescale time (solve in units in which the span is moderate)", f.name(), t1, t0, i)
	case span < minStep(tmax):
		return fmt.Errorf("ode: %s: the span [T0, T1] = [%v, %v] of trajectory %d is %.3g long, shorter than the smallest step float64 resolves at those times (4ε·max(|T0|, |T1|) = %.3g); "+
			"shift the time origin: solve from 0 to T1 − T0 with the field's t replaced by t + T0 (an autonomous field needs no change)", f.name(), t0, t1, i, span, minStep(tmax))
	}
	return nil
}

// perTrajectoryBytes is a lower bound of the memory any operation needs
// per trajectory of a field with d state components and np per-trajectory
// parameters, saving k states: the inputs expanded to N rows (y0, p, end
// time) and the results (final state, saved states, time reached, status,
// step counts, last step).
func perTrajectoryBytes(d, np, k int) float64 { return 8 * float64(2*d+np+6+k*d) }

// ErrTooLarge is returned (wrapped) when an ensemble would not fit in
// memory: the error gives the estimate, the limit and the fix.
var ErrTooLarge = errors.New("too large")

// maxProblemBytes bounds a problem's memory where the machine's is
// unknown: the largest allocation the Go runtime can make on 64-bit
// systems.
const maxProblemBytes = 1 << 48

// checkEnsembleSize refuses, before anything is allocated, an ensemble of
// n trajectories whose inputs and results alone would not fit in the
// machine's memory (or, where that is unknown, in maxProblemBytes).
func checkEnsembleSize(f *Field, n, nsave int) error {
	per := perTrajectoryBytes(f.Dim, f.Params, nsave)
	need := float64(n) * per
	lim := sysmem.Machine()
	limit, source := float64(lim.Bytes), lim.Source
	if lim.Bytes == 0 {
		limit, source = maxProblemBytes, "largest allocation of the Go runtime"
	}
	if need <= limit {
		return nil
	}
	return fmt.Errorf("ode: %s: N = %d trajectories need at least %s (%.0f bytes each for the expanded inputs and the results), more than the %s of %s: %w; "+
		"solve at most %d trajectories per call and split the ensemble over several calls",
		f.name(), n, sysmem.Format(need), per, sysmem.Format(limit), source, ErrTooLarge, int64(limit/per))
}

// check validates the problem and expands its arrays. The error names the
// field and what to fix.
func (pr *Problem) check() (*problem, error) { return pr.checkWith(nil, 0) }

// checkWith is check with the expanded single rows kept in c (nil: none
// kept). The checks read the arrays on all cores. Of the checks in
// leave (see CheckingExecutor), those that apply are left to the
// executor: the problem returned lists them (problem.checks), and an
// error is that of the checks made (callers check again with leave 0 to
// get the error of all checks in order).
func (pr *Problem) checkWith(c *expansions, leave Checks) (*problem, error) {
	return pr.checkInto(new(problem), c, leave)
}

// checkInto is checkWith into q's storage (q is returned).
func (pr *Problem) checkInto(q *problem, c *expansions, leave Checks) (*problem, error) {
	q, err := pr.validateInto(q, leave)
	if err != nil {
		return nil, err
	}
	d, np, n := pr.Field.Dim, pr.Field.Params, q.n
	q.y0, q.p = c.expand(pr.Y0, d, n), c.expand(pr.P, np, n)
	if pr.T1s != nil {
		q.t1 = slices.Clone(pr.T1s)
	} else {
		q.t1 = c.expandOne(pr.T1, n)
	}
	return q, nil
}

// validate makes the checks of checkWith and returns the problem without
// its expanded arrays (y0, p and t1 nil): it reads the arrays, on all
// cores, and allocates nothing of size N.
func (pr *Problem) validate(leave Checks) (*problem, error) {
	return pr.validateInto(new(problem), leave)
}

// validateInto is validate into q's storage (q is returned).
func (pr *Problem) validateInto(q *problem, leave Checks) (*problem, error) {
	f := &pr.Field
	if err := f.check(); err != nil {
		return nil, err
	}
	d, np := f.Dim, f.Params
	n := pr.N
	if n == 0 {
		switch {
		case len(pr.Y0) == 0:
			return nil, fmt.Errorf("ode: %s: the ensemble is empty (N = 0 and len(Y0) = 0): give Y0 at least one initial state of Dim = %d values", f.name(), d)
		case len(pr.Y0)%d != 0:
			return nil, fmt.Errorf("ode: %s: len(Y0) = %d is not a multiple of Dim = %d: Y0 holds N initial states of Dim values each, row-major "+
				"(or one state for all trajectories, with N set)", f.name(), len(pr.Y0), d)
		}
		n = len(pr.Y0) / d
	}
	if n < 0 {
		return nil, fmt.Errorf("ode: %s: N = %d is negative", f.name(), n)
	}
	if err := checkEnsembleSize(f, n, len(pr.SaveAt)); err != nil {
		return nil, err
	}
	if len(pr.Y0) != d && len(pr.Y0) != n*d {
		return nil, fmt.Errorf("ode: %s: len(Y0) = %d, want Dim = %d or N*Dim = %d", f.name(), len(pr.Y0), d, n*d)
	}
	if np > 0 && len(pr.P) != np && len(pr.P) != n*np {
		hint := ""
		if pr.N == 0 && len(pr.P)%np == 0 {
			hint = fmt.Sprintf(" (N = %d from len(Y0) = %d; for %d trajectories sharing one initial state, set N = %d)",
				n, len(pr.Y0), len(pr.P)/np, len(pr.P)/np)
		}
		return nil, fmt.Errorf("ode: %s: len(P) = %d, want Params = %d or N*Params = %d%s", f.name(), len(pr.P), np, n*np, hint)
	}
	if np == 0 && len(pr.P) != 0 {
		return nil, fmt.Errorf("ode: %s: len(P) = %d but the field has no per-trajectory parameters", f.name(), len(pr.P))
	}
	if len(pr.Shared) != f.Shared {
		return nil, fmt.Errorf("ode: %s: len(Shared) = %d, want %d", f.name(), len(pr.Shared), f.Shared)
	}
	// Arrays of a row per trajectory may be left to the executor, which
	// reads them anyway (CheckFinite); single rows are checked here.
	var left Checks
	if leave&CheckFinite == 0 || len(pr.Y0) == d {
		if i := finiteAll(pr.Y0); i >= 0 {
			return nil, fmt.Errorf("ode: %s: Y0[%d] = %v is not finite (trajectory %d, component %d)", f.name(), i, pr.Y0[i], i/d, i%d)
		}
	} else {
		left = CheckFinite
	}
	if leave&CheckFinite == 0 || len(pr.P) == np {
		if i := finiteAll(pr.P); i >= 0 {
			return nil, fmt.Errorf("ode: %s: P[%d] = %v is not finite (trajectory %d, parameter %d)", f.name(), i, pr.P[i], i/np, i%np)
		}
	} else {
		left = CheckFinite
	}
	if i := finiteAll(pr.Shared); i >= 0 {
		return nil, fmt.Errorf("ode: %s: Shared[%d] = %v is not finite", f.name(), i, pr.Shared[i])
	}
	if math.IsNaN(pr.T0) || math.IsInf(pr.T0, 0) {
		return nil, fmt.Errorf("ode: %s: T0 = %v is not finite", f.name(), pr.T0)
	}
	*q = problem{Problem: pr, n: n, checks: left}
	if pr.T1s != nil && len(pr.T1s) != n {
		return nil, fmt.Errorf("ode: %s: len(T1s) = %d, want N = %d", f.name(), len(pr.T1s), n)
	}
	q.tmin = math.Inf(1)
	if pr.T1s == nil && n > 0 { // one end time: one check
		if err := checkEndTime(f, 0, pr.T0, pr.T1); err != nil {
			return nil, err
		}
		q.tmin = pr.T1
	} else {
		nb := (n + par.Block - 1) / par.Block
		errs, mins := make([]error, nb), make([]float64, nb)
		par.Run(nb, 0, func(_, b int) {
			mins[b] = math.Inf(1)
			for i := b * par.Block; i < min(n, (b+1)*par.Block); i++ {
				if err := checkEndTime(f, i, pr.T0, pr.T1s[i]); err != nil {
					errs[b] = err
					return
				}
				mins[b] = math.Min(mins[b], pr.T1s[i])
			}
		})
		for b := range nb {
			if errs[b] != nil {
				return nil, errs[b]
			}
			q.tmin = math.Min(q.tmin, mins[b])
		}
	}
	for k, tau := range pr.SaveAt {
		switch {
		case math.IsNaN(tau) || math.IsInf(tau, 0):
			return nil, fmt.Errorf("ode: %s: SaveAt[%d] = %v is not finite", f.name(), k, tau)
		case tau < pr.T0 || tau > q.tmin:
			if pr.T1s != nil {
				return nil, fmt.Errorf("ode: %s: SaveAt[%d] = %v is outside [T0, min(T1s)] = [%v, %v]: every trajectory saves at every save time, so each must reach it (trajectory %d ends at %v)",
					f.name(), k, tau, pr.T0, q.tmin, slices.Index(pr.T1s, q.tmin), q.tmin)
			}
			return nil, fmt.Errorf("ode: %s: SaveAt[%d] = %v is outside [T0, T1] = [%v, %v]", f.name(), k, tau, pr.T0, q.tmin)
		case k > 0 && tau < pr.SaveAt[k-1]:
			return nil, fmt.Errorf("ode: %s: SaveAt is not sorted: SaveAt[%d] = %v < SaveAt[%d] = %v", f.name(), k, tau, k-1, pr.SaveAt[k-1])
		}
	}
	return q, nil
}

// minRelTol is the smallest relative tolerance float64 can meet: ten
// units of its rounding error ε, the bound of Hairer's DOPRI5 and DOP853.
const minRelTol = 10 * 0x1p-52

// checkSettings validates the settings (with their defaults filled in).
// Each error names the setting, its value and the fix.
func checkSettings(f *Field, s *Settings) error {
	name := f.name()
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case !(s.RelTol > 0) || !finite(s.RelTol):
		return fmt.Errorf("ode: %s: RelTol = %v must be positive and finite (0 means %g)", name, s.RelTol, DefaultRelTol)
	case s.RelTol >= 1:
		return fmt.Errorf("ode: %s: RelTol = %v must be below 1: a relative error of 100%% or more accepts any step; typical values are 1e-3 to 1e-10", name, s.RelTol)
	case s.RelTol < minRelTol:
		return fmt.Errorf("ode: %s: RelTol = %v is below 10ε = %.2g, the smallest relative tolerance float64 can meet (each operation rounds by up to ε = %.2g); use RelTol ≥ %.2g",
			name, s.RelTol, minRelTol, 0x1p-52, minRelTol)
	case !(s.AbsTol > 0) || !finite(s.AbsTol):
		return fmt.Errorf("ode: %s: AbsTol = %v must be positive and finite (0 means %g; use a tiny value such as 1e-30 for a pure relative tolerance)", name, s.AbsTol, DefaultAbsTol)
	case s.MaxSteps < 0:
		return fmt.Errorf("ode: %s: MaxSteps = %d is negative; use 0 for the default %d", name, s.MaxSteps, DefaultMaxSteps)
	case s.MaxEvents < 0:
		return fmt.Errorf("ode: %s: MaxEvents = %d is negative; use 0 for the default %d", name, s.MaxEvents, DefaultMaxEvents)
	case !(s.Dt0 >= 0) || !finite(s.Dt0):
		return fmt.Errorf("ode: %s: Dt0 = %v must be positive (or 0 for automatic) and finite", name, s.Dt0)
	case s.AbsTols != nil && len(s.AbsTols) != f.Dim:
		return fmt.Errorf("ode: %s: len(AbsTols) = %d, want Dim = %d (one absolute tolerance per state component)", name, len(s.AbsTols), f.Dim)
	case s.Saves != SaveInterpolate && s.Saves != SaveStep:
		return fmt.Errorf("ode: %s: Saves = %v is not a save mode; use SaveInterpolate (the zero value) or SaveStep", name, s.Saves)
	case s.Checkpoint < 0:
		return fmt.Errorf("ode: %s: Checkpoint = %d is negative; use 0 to choose the interval from MemoryLimit, or k ≥ 1 to store every k-th state", name, s.Checkpoint)
	case s.MemoryLimit < 0:
		return fmt.Errorf("ode: %s: MemoryLimit = %d is negative; use 0 for the default of %d bytes, or a positive number of bytes", name, s.MemoryLimit, scan.DefaultMemoryLimit)
	case s.Exec.Workers < 0:
		return fmt.Errorf("ode: %s: Exec.Workers = %d is negative; use 0 for runtime.GOMAXPROCS(0) goroutines, or a positive count", name, s.Exec.Workers)
	case s.Exec.BlockSize < 0:
		return fmt.Errorf("ode: %s: Exec.BlockSize = %d is negative; use 0 to size blocks automatically, or a positive number of trajectories", name, s.Exec.BlockSize)
	}
	for c, a := range s.AbsTols {
		if !(a > 0) || !finite(a) {
			return fmt.Errorf("ode: %s: AbsTols[%d] = %v must be positive and finite (use a tiny value such as 1e-30 for a pure relative tolerance)", name, c, a)
		}
	}
	c := s.Controller
	var bad string
	switch {
	case !(c.Beta1 > 0) || !finite(c.Beta1):
		bad = fmt.Sprintf("Beta1 = %v must be positive and finite (0 means 1/(ErrOrder+1))", c.Beta1)
	case !finite(c.Beta2):
		bad = fmt.Sprintf("Beta2 = %v must be finite (0 means the integral controller)", c.Beta2)
	case !(c.Safety > 0 && c.Safety <= 1):
		bad = fmt.Sprintf("Safety = %v must be in (0, 1] (0 means 0.9)", c.Safety)
	case !(c.FactorMin > 0 && c.FactorMin < 1):
		bad = fmt.Sprintf("FactorMin = %v must be in (0, 1) (0 means 0.2)", c.FactorMin)
	case !(c.FactorMax > 1) || !finite(c.FactorMax):
		bad = fmt.Sprintf("FactorMax = %v must be finite and greater than 1 (0 means 5)", c.FactorMax)
	}
	if bad != "" {
		return fmt.Errorf("ode: %s: controller %+v: %s; need 0 < FactorMin < 1 < FactorMax < ∞, 0 < Safety ≤ 1, Beta1 > 0, Beta2 finite", name, c, bad)
	}
	return nil
}

// kept returns a copy of q for Gradient.HostGrads, which reads its end
// times and save times after the call has returned (Settings.KeepGrads):
// its Problem copied, with the save times (the caller may change the
// Problem's); the end times are the call's own already (checkWith).
func (q *problem) kept() *problem {
	k := *q
	p := *q.Problem
	p.SaveAt = slices.Clone(q.SaveAt)
	k.Problem = &p
	return &k
}
