// Package ode solves ensembles of small ordinary differential equations
// and returns exact reverse-mode gradients of losses of their solutions.
//
// A Field is the right-hand side y' = F(t, y, p) written as a Go function
// over traced values (package tape): a Solver traces it once into a
// program that its engine runs (the package functions Solve, Record, Grad
// and Replay make a Solver, and so trace F, on each call). A Problem
// pairs a field with N initial states, per-trajectory parameters, shared
// parameters and a time span.
//
// The method is record and replay. Record integrates every trajectory
// adaptively (Tsit5, Vern7, Rodas5P or Rosenbrock23; WRMS error norm,
// I or PI step-size control, Hairer's initial step) and keeps the accepted
// step sizes: the Mesh. Grad replays the mesh with the step sizes held
// fixed and runs the reverse sweep (package scan): the gradient is the
// exact derivative of the replayed solution, the discrete adjoint Diffrax
// returns by default, at a small multiple of the cost of the solve. The
// recorder and the replay use the same step program, so they agree bit for
// bit. Grad can record a fresh mesh on every call or reuse one.
//
// # Plans and engines
//
// Everything an adaptive solve computes is a traced program of its Plan:
// the trial step with its error estimate and stiffness estimate, the
// controller (error norm, accept/reject, step-size control, failure tests,
// last-step clamp), the initial step, the replay step, the dense output and
// their reverse programs. An Engine runs whole operations from a Plan with
// a small driver loop; every engine runs the same programs, so every
// engine takes the same steps. The CPU engine ("cpu") is built in: each
// worker runs the complete adaptive loop on a chunk of trajectories, then
// that chunk's reverse sweep from the states it kept, with no barrier
// across the ensemble; its results are bitwise identical for any number
// of workers and any chunk size. Other engines register themselves
// (package cuda registers "cuda"), and Settings.Engine chooses one. An
// engine may serve a call on the CPU engine (CPU) — package cuda's does
// while a kernel compiles — and the Solution and the recorded Mesh then
// name "cpu" (Result.Engine).
//
// # Shapes
//
// User-facing arrays are row-major: the initial state of trajectory i is
// Y0[i*Dim:(i+1)*Dim], its parameters P[i*Params:(i+1)*Params], its saved
// state at save time k Ys[(i*K+k)*Dim:]. A Mesh is step-major: step s of
// trajectory i is H[s*N+i].
//
// # Repeated calls
//
// At millions of trajectories a whole call's results cost more than
// little: a Gradient passed back to Grad as dst is filled in place (its
// arrays, its Solution's and its Mesh's reused), and its Omit leaves out
// what the caller does not read. A training loop or a sensitivity study
// that needs only Loss and the gradients sets Omit = OmitStates|OmitStats
// once on its dst: the final and saved states (N×Dim and N×K×Dim values)
// and the rejected-step and field-evaluation counts are then nil, and a
// GPU engine neither copies them back nor rearranges them on the host;
// everything else is the same bit for bit (ExampleSolver_Grad_omit).
//
// Saved states that are read now and then, not after every call, stay
// where the engine computed them with Settings.KeepSaves: a GPU engine
// leaves them in device memory (Solution.Resident, an engine's
// ResidentSaves; Ys nil) until Solution.HostSaves copies them into Ys
// (one copy, in Ys's order) or Solution.Release frees them, as a
// recorded mesh stays there until Mesh.Host or Mesh.Release. Code that
// reads Ys calls HostSaves first: it does nothing where the saves are on
// the host, as on the CPU engine (ExampleSettings_keepSaves).
//
// A Grad's per-trajectory results stay there too with
// Settings.KeepGrads: a GPU engine leaves ∂L/∂Y0, ∂L/∂P and the
// Solution's and the recorded Mesh's statuses, counts, times and event
// counts in device memory (Gradient.Resident, an engine's ResidentGrads;
// Y0, P, Solution and Mesh nil) and returns the loss (its terms'
// exact sum, rounded once: within the in-order sum's rounding of the
// loss without KeepGrads), the shared gradient and whether every
// trajectory ended well with finite gradients, found on the device. Gradient.HostGrads fills the rest,
// bit for bit as without KeepGrads; Gradient.Release frees it unread; a
// Grad given the Gradient back writes over it (HostGrads of a copy then
// fails with ErrReleased). A failure is reported by the call itself,
// with the error it has without KeepGrads: the engine then returns
// everything at once. On the CPU engine Resident stays nil and HostGrads
// does nothing (ExampleSettings_keepGrads).
//
// # Failures
//
// Every trajectory ends with a Status (OK, MaxStepsReached,
// StepSizeUnderflow, NonFinite). Unless Settings.AllowFailures is set, a
// failure is returned as a *TrajectoryError that names the trajectory, the
// time and what to try; it unwraps to ErrMaxSteps, ErrStepSizeUnderflow or
// ErrNonFinite. A mesh with a failed trajectory is never replayed, nor one
// recorded for another problem or field. Bad input (shapes, non-finite
// values, T1 ≤ T0, unsorted save times, tolerances ≤ 0) is reported before
// any work is done.
//
// Every error about a call's inputs wraps ErrInput, whatever its message
// (which names the input): the Settings (values out of range, an unknown
// engine name, a tolerance the engine's arithmetic cannot meet, Saves =
// SaveStep for SolveDense, which also wraps ErrNoDense), the Field and the
// events (a definition that does not trace, a wrong output count), the
// Problem (lengths, non-finite values, end and save times, an ensemble
// beyond the machine's memory, which also wraps ErrTooLarge), a Mesh
// passed back (of another problem, method, field or events, inconsistent,
// or with a failed trajectory, which also unwraps to its
// *TrajectoryError), the Loss (no term, a trace that fails, Data's length
// or a non-finite entry it reads, its Reg), GradPartial's skip,
// NewTrainer's TrainSpec and the time given to DenseSolution.Evaluate;
// also those a call finds only as it runs: a save time past the terminal
// event that ended a trajectory (Grad, Loss), and work beyond
// Settings.MemoryLimit (SolveDense's dense output, the stored states of a
// gradient with events; these also wrap ErrTooLarge).
// errors.Is(err, ErrInput) thus tells a call that cannot run as given from
// a run-time failure, which does not wrap it: a *TrajectoryError, a
// non-finite loss or gradient, a cancelled context, an engine's failure or
// limit (an engine that is unavailable, ErrNoEvents, ErrNoTrainer, a GPU
// engine's ErrTooLarge for its device's memory), and ErrReleased, the error of a result's
// engine memory used after its Release.
//
// An explicit method on a stiff problem stays accurate (its controller
// keeps the steps at the edge of its stability region) but the exact
// derivative of its replay grows without bound there. Tsit5 and Vern7
// therefore run Hairer's stiffness test on every accepted step
// (Solution.Stiff), and Grad refuses such trajectories with Status Stiff,
// stopping a trajectory at the step where the test fires
// (Job.StopOnStiff), so the refusal costs about what the Rodas5P solve
// does (Robertson: 42 Tsit5 steps, to t = 0.048, against 42 Rodas5P steps
// for the whole span), and the error names the time where it stopped.
// The test reads the stages, so it sees only the modes the solution
// excites: a fast mode that it does not excite (a component that stays
// exactly 0, as an empty gut compartment of a pharmacokinetic model, or a
// chemical system at rest) leaves the error estimate alone, the steps
// follow the slow modes far outside the stability region of the fast
// one, and the replay's derivative amplifies that mode by |R(hμ)| a step
// (Tsit5 on such a model: ∂c(T)/∂a0 = −1.2e116, the closed form 0.549).
// The records of gradients (Grad, Loss and Record, not Solve) therefore
// also run a stability probe (Plan.Probe): every 16 trials (and on the
// fifth; on every trial with Method Auto), two Jacobian-vector products
// of the field continue a power iteration for the dominant mode of
// ∂f/∂y (its size the geometric mean of the two ratios, which a far from
// normal Jacobian, as of an orbit passing close to a mass, does not
// inflate), and a trajectory whose probed steps amplify that mode more
// than 1000 times over some run of them counts as stiff too
// (Solution.Stiff, Status Stiff), with the same refusal, or Method Auto's
// switch before that step. It costs about 3% of a gradient with its
// record (Lorenz) and changes nothing else: the steps and the results of
// the trajectories it does not mark are those without it, bit for bit.
// (Method Auto's gradient may thus switch a stiff trajectory sooner than
// its Solve, which runs no probe: their states then agree to the
// tolerance, not bit for bit.) The probe samples the steps: a run so
// short that its steps grow past the stability limit between two probes
// (an exact equilibrium of a stiff field, whose error estimate is 0 and
// whose steps grow tenfold a step) is not caught.
// Method Auto switches such a trajectory to Rodas5P there instead (its
// Tsit5 runs its own test, on scale-invariant estimates and a lower
// boundary, which fires early where the stiff modes live in small
// components: see Auto), and
// goes on from where it is (Mesh.Switch), on every engine: the CPU's in
// place, the GPU engines in a job of the stopped trajectories that starts
// each at its own time (see Auto). There the steps of the mesh, the
// Tsit5 pass's and the Rodas5P ones, stay on the device (Mesh.Resident;
// the parts' columns of the Tsit5 pass's mesh are gathered there where
// the engine does it, ColumnSteps) until the mesh is read: Mesh.Host
// merges them on the host. A Gradient passed back gives that memory to
// the next call's pass, gathers and record to write into (the merged
// mesh of a mixed ensemble keeps the pass's mesh for it): a loop that
// passes its Gradient back allocates none from call to call.
//
// The test estimates the stiffness along the solution's own increments,
// so it does not see a stiff mode the solution does not move in: at an
// exact equilibrium of a stiff field (y' = −1000·(y − 1) from y0 = 1,
// where the steps grow to the span), or from an initial state in a slow
// invariant subspace (the heat equation from its lowest eigenvector), the
// steps pass the stability limit in that mode, the solution stays right,
// and Grad returns the unstable replay's derivative without an error
// (∂y(1)/∂y0 = 1.3e38 with Tsit5 where the true value is e^−1000;
// docs/more-results.md, sessions 52 and 53). Use Rodas5P (or
// Rosenbrock23) for the gradient of a field known to be stiff, wherever
// its solution starts.
//
// # Time and accuracy
//
// Every step the controller tries is an exact advance of t: h is
// (t + h) − t in float64, so t + h is exact, the state integrates exactly
// the time t advances, the steps of a mesh sum exactly to T1 − T0 and a
// replay's t += h reproduces the record's times. Spans far from the time
// origin ([1e12, 1e12 + 1], where float64 resolves 1.2e-4) therefore meet
// the tolerance as spans at 0 do; where float64 resolves no step as small
// as the tolerance needs (the step floor 4ε·|t|), the trajectory ends with
// StepSizeUnderflow and the error says so, never with a silently wrong
// state. The first step (Hairer's algorithm, or Settings.Dt0) is positive,
// at least the floor and at most the span for any representable span
// (1e-300 to 1e300 long, at 0 or far from it). A mesh given to Replay or
// Grad must reach each trajectory's T1: steps that, summed as the replay
// sums them, miss T1 by more than rounding (about Len/2 + 2 ulps of
// max(|T0|, |T1|), in the arithmetic of the engine that recorded it:
// a float32 engine's mesh reaches T1 rounded to float32) are refused,
// naming the trajectory.
//
// # Dense output
//
// Every method has a continuous extension (Tsit5's free order-4
// interpolant, Vern7's lazy order-7 one with six extra stages, Rodas5P's
// order-4 and Rosenbrock23's order-2 ones), written in one form,
// y(t_k + θh_k) = y_k + Σ_j θ^j·w_j, whose coefficients the step computes
// from its stages (Plan.DenseStep). Saved states (Problem.SaveAt) are
// read from the step that brackets each save time, with no extra steps;
// their gradient is the interpolant's VJP, added to that step's reverse
// (Plan.DenseStepReverse). The CPU engine reads them as it records
// (Plan.TrialDense on the iterations where a save time is inside a
// step; each trajectory keeps a cursor into the sorted save times), so a
// Solve takes no replay, and its reverse sweep keeps one cursor per
// trajectory too (scan.Saves): bookkeeping costs O(1) per trajectory and
// step, and each save time Terms·Dim multiply-adds and its Dim values.
// Measured (BenchmarkSaveAtKeplerRatio, 4,096 Kepler orbits at RelTol
// 1e-8, one core of a shared 2-core machine, CPU-time ratios, medians of
// alternated runs; docs/more-results.md, sessions 48–51), 1 → 1,000 save
// times: Solve 1.4× with Tsit5, 2.1× with Vern7; Grad (a loss of the
// saves' squares) 1.6× with Tsit5 and 2.4× with Vern7 (74 → 182 ms
// of CPU a call). Writing the 131 MB of output alone would take the 1-save
// Solve to 1.14× (Tsit5) and 1.27× (Vern7); the rest is the extension's
// coefficients (Vern7's six extra stages: 60% more field evaluations),
// the interpolation and, in Grad, the reverse of the interpolant and of
// the six stages: Tsit5 meets the targets (1.5× and 2×), Vern7
// does not. Their accuracy against closed forms is
// within a small multiple of the mesh states' (≤ 2.9× for Tsit5, Vern7 and
// Rosenbrock23), up to 40× for Rodas5P's coarser extension (Problem.SaveAt
// has the table's summary); in an engine of unit roundoff u the power
// form's coefficients, large and cancelling, add about u·A·h|f| of
// rounding, A = Σ_j Σ_i |R_ij| (Tsit5 389, Vern7 1.75e4): nothing in
// float64, 1e-4 of the states' scale for Vern7 in float32 (cuda's doc); Settings.Saves = SaveStep re-steps instead,
// as accurate as the mesh states at one step per save time. Every engine
// computes the same values: the CPU and GPU engines run the dense step
// (Plan.DenseStep) on the steps that bracket save times and read each
// save time from its coefficients, with no field evaluations per save
// time.
// Solver.SolveDense keeps the dense output of a whole ensemble, within
// Settings.MemoryLimit, for DenseSolution.Evaluate at any time
// afterwards.
//
// # Events
//
// Settings.Events lists conditions g(t, y, p) (traced, like the field)
// whose zero crossings every trajectory's solve locates independently:
// each accepted step's continuous extension is sampled for a sign change
// (Event.Direction), the root is found on the extension and polished on
// the method's own step, and the mesh records the step that ends at the
// event. A terminal event ends the trajectory there (Solution.T); another
// applies its jump (Event.Apply: a bounce, a dose) and goes on. Events
// whose roots coincide (two doses at one time) all fire there, in
// Settings.Events order, a terminal one last (see Event). Gradients
// are exact through event times (implicit function theorem on the event
// step, and the cotangent of time carried through the steps after it).
// Measured (TestEventThreshold, TestEventBouncingBall): event times within
// 1e-11 relative of the closed form at RelTol 1e-10, and their gradients
// within 5.4e-11; a bouncing ball's height after several bounces within
// 4e-14 and its gradient within 4.2e-13. Non-finite conditions, a
// condition zero at T0, more than Settings.MaxEvents events and events
// accumulating at one time (a ball coming to rest) end the trajectory
// with a status (EventNonFinite, EventAtStart, TooManyEvents);
// a condition of nothing is refused by NewSolver. On the CPU engine, save
// times (Problem.SaveAt) are read from the step that brackets them, event
// steps included: a save time exactly at an event is the state after its
// Apply, one after a terminal event is NaN (Solve) or an error (Loss,
// Grad); and a mesh recorded with events (Mesh.Events marks its event
// steps) replays bit for bit, with Grad on it equal to Grad with m = nil
// (TestEventSaveAtBall, TestEventSaveAtGrad, TestEventGivenMesh; see
// Event); package cuda's engines run both too. Events run on engines
// that implement EventEngine: the CPU engine, and package cuda's engines
// ("cuda", "cuda-multi" and, to float32's precision, "cuda-f32"; in the
// thread layout), which run the same algorithm per thread and take the
// same steps; the Plan holds them as programs (Plan.Events) for others to
// follow.
//
// RelTol must be at least 10ε = 2.2e-15 on float64 engines; an engine
// whose arithmetic is coarser (a float32 GPU engine) reports its unit
// roundoff u (PrecisionEngine), and NewSolver refuses RelTol below
// MinRelTol(u) (1.2e-5 for float32).
//
// # Stiff problems
//
// Rodas5P and Rosenbrock23 take J = ∂F/∂y and ∂F/∂t from the traced field
// by forward mode (or J from Field.Jac); W = I − hγJ is factored once per
// step. Their reverse sweep differentiates through the linear solves and
// the Jacobian, i.e. uses second derivatives of F, with no extra code.
// A field marked Stiff is routed to Rodas5P when no method is given.
//
// The gradient is the derivative of the discrete solution on its mesh;
// the tolerance controls the states, not how well that derivative
// approaches the derivative of the exact solution. Across fast
// transitions of a stiff problem it approaches it much more slowly than
// the states approach theirs. Measured against central differences of
// solves at RelTol 1e-12 (problems/published_test.go), on the test set's
// VDPOL (μ = 1e6, y0 = (2, 0), t ∈ [0, 2], two transitions), ∂‖y(2)‖²/∂x(0)
// errs by 1.5 (relative) with Rodas5P at RelTol 1e-6, 3.4e-3 at 1e-8 and
// 5e-6 at 1e-11, where y(2) errs by 4e-7 and 7e-9; with Rosenbrock23 by
// 385× at 1e-6, 3.2 at 1e-8 and 0.10 at 1e-10. At μ = 1e3 (vdp-stiff):
// 1.5e-3 and 1.1e-5 (Rodas5P, 1e-6 and 1e-8), 0.04, 2.2e-3 and 1.1e-4
// (Rosenbrock23, 1e-6, 1e-8, 1e-10). On HIRES, POLL, ROBER (to t = 1e11),
// Pleiades and the Arenstorf orbit the gradient errs by about as much as
// the states, or less (2e-6 at most at the tolerances of those tests).
// Differentiate such problems at tight tolerances, with Rodas5P.
package ode
