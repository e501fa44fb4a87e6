// Package fit fits parameters of an ODE ensemble to data: it minimises a
// loss of the solutions (ode.Loss) over chosen per-trajectory parameters,
// initial states and shared parameters with a first-order optimiser
// (package optim), taking exact gradients from ode.Solver.Grad.
//
// A Fitter traces the field and builds its programs once (one ode.Solver
// for the whole fit) and only calls ode's public API (NewSolver, Grad,
// Loss), so it runs on whatever engine the solver settings choose: with
// package cuda imported, Engine "cuda-multi" runs each step's replay and
// reverse sweep over all the GPUs of the host (or those
// GRADSOLVE_CUDA_DEVICES lists), its B concurrent fits or its one large
// ensemble alike, with the shared-gradient sum formed in the same order,
// hence the same fit, for any number of GPUs.
//
//	f, err := fit.New(fit.Problem{ODE: prob, Loss: loss, Vars: fit.Vars{P: []int{1}}}, nil)
//	res, err := f.Run(ctx, &fit.Settings{Steps: 200, Optimizer: &optim.Adam{LearnRate: 0.05}})
//
// # What is fitted
//
// Vars selects per-trajectory parameter columns (P), initial-state
// components (Y0) and the shared parameters. The ensemble's N trajectories
// form Fits independent fits of N/Fits consecutive trajectories each
// (Fits = 1 by default): a fitted parameter column has one value per fit,
// tied across its trajectories, and its gradient is the sum over them;
// fitted initial states belong to each trajectory. One replay and one
// reverse sweep per step serve all fits. The fitted values form a flat
// vector x whose blocks are named in Fitter.Set: "fit<b>.p" (len(Vars.P)
// values of fit b), "fit<b>.y0" ([N/Fits, len(Vars.Y0)], its
// trajectories' fitted initial states) and "shared" (all shared
// parameters).
//
// # Meshes
//
// The gradient is exact for the mesh it replays (ode.Grad). Settings.Remesh
// chooses how often the fit records a new adaptive mesh: every step (the
// default; the gradient is that of the adaptive solution at the current
// parameters up to the frozen step sizes), every K steps, or once (the
// first mesh is replayed throughout: cheapest, but the mesh stops
// matching the tolerances as the parameters move). The final loss is
// always evaluated on a freshly recorded mesh, so the policies compare
// fairly.
//
// # On a GPU engine the fit stays on the device
//
// On an engine that can hold a fit in its memory (ode.Trainer: package
// cuda's float64 single-GPU engines), Run keeps x, the gradient, the
// optimiser's moments, the best values and the loss's reduction there by
// default: a step is the gradient with a fresh record, the reductions and
// the optimiser's rule (optim.Ruled: Adam, AdamW, SGD) applied on the
// device, and only the loss and the gradient norm come back (X, Grad and
// FitNorms too when a Callback is set; Step.Gradient is then nil). A
// problem with events (ode.Settings.Events) is fitted there too: the
// engine's kernel locates and applies the events, and a trajectory whose
// event has no time derivative (a tangential crossing) counts as failed.
// The losses, values and optimiser state are those of the host loop to
// rounding, and a resumed device fit is the uninterrupted one bit for
// bit. The host takes over from the step at which a trajectory fails, an
// update makes values non-finite or the gradient's norm reaches 2^511
// (the engine's sums of squares would overflow where the host's norm,
// which clipping uses, does not), with the state the engine reached,
// and a run with Remesh other than every step, a Reg term, an optimiser
// outside package optim or failed fits runs on the host throughout;
// Settings.OnHost asks for the host loop, and Result.DeviceSteps and
// DeviceNote say what ran where.
//
// # Independent fits are isolated
//
// With Fits > 1 the fits share one solver call per step but not their
// fates. A fit whose trajectory fails (the solver refuses it: step-size
// underflow, max steps, a non-finite state, an explicit method's
// stiffness test, a non-finite loss term or gradient) or whose values an
// update makes non-finite stops on its own: Result.FitStatus[b] is
// Failed and Result.FitErr[b] a *FitError naming the fit, the step and
// the cause (an *ode.TrajectoryError, or ErrNonFinite). Its values stay
// those before the failing step. The others go on as if it had never
// been part of the ensemble: from the failing step on, their losses, and
// throughout their values, are those of the fit without it, bit for bit
// on the CPU engine (with Loss.Mean the mean still divides by all N
// trajectories). Only when every fit has stopped does Run end Failed.
// This works on every engine: the Fitter goes through ode.Solver's
// GradPartial, which leaves failed and stopped trajectories out of the
// gradient. With one fit, a failure ends the run with the solver's error,
// and an update that makes values non-finite with a *FitError wrapping
// ErrNonFinite (the step, the value; the values kept those before it).
//
// # Checks, cancellation and resuming
//
// Run checks its settings and the optimiser before the first step (and
// the optimiser's Validate before every step, so a schedule whose rate
// turns invalid fails the fit with a clear error, never an update uphill
// or to NaN); an optimiser state of another length is refused
// (optim.CheckLen). These errors, and those of New (the problem, the
// loss's data) and of a Resume's checkpoint, wrap ode.ErrInput, as the
// solver's errors about its inputs do: errors.Is(err, ode.ErrInput)
// tells a fit that cannot run as given from one that failed as it ran.
// The context reaches the solver: a step during which it is cancelled is
// not applied.
//
// Result.Checkpoint is where a fit stands at the end of a run; with the
// optimiser's state (optim.SaveState), Settings.Resume continues it
// exactly as if it had not stopped, bit for bit on the CPU engine: the
// same steps record meshes under Remesh K (the mesh in use is recorded
// again from the values it was recorded at), patience counts on, and the
// failed fits stay stopped. Both encode to JSON exactly. A checkpoint
// records which fit it belongs to (Checkpoint.Fit, Fitter.ID: the field's
// program, N, Fits and Vars), and Resume refuses another fit's, even one
// with as many values.
//
// New's cost is one read of Y0, P and Data on all cores (the checks of
// ode.Solver.CheckLoss), with nothing of size N or Fits allocated: the
// layout of x is arithmetic (Result.FitP and FitY0 are O(1) views), the
// starting values are gathered by the first Init, the host's copy of the
// ensemble is taken at the first evaluation on the host (a fit held in
// the engine's memory starts from the caller's arrays), and the named
// blocks of Fitter.Set are built on first use only.
package fit
