// Package cuda is the GPU engine: ode engines that run whole adaptive
// solves, records, replays, losses and gradients on NVIDIA GPUs, in
// kernels generated from a plan's programs.
//
// Importing the package (a blank import is enough) registers the engines
// "cuda" (float64) and "cuda-f32" (float32) on GPU 0, and "cuda-multi"
// (float64, every visible GPU of the host); NewEngine and NewMultiEngine
// make others. Nothing is loaded until an engine is asked whether it is
// available or prepares a plan; without a driver, a device or NVRTC,
// Available returns an error wrapping ErrNoGPU or ErrNoNVRTC and "auto"
// runs on the CPU. Nothing needs cgo: package cuda/driver loads the driver
// and NVRTC at run time, and package cuda/internal/kernelgen writes the
// kernels' CUDA C++.
//
// # Results
//
// Every engine runs the same programs, so a GPU engine takes the CPU
// engine's steps: the same accepted and rejected steps on every
// trajectory (device code is compiled without contraction into fused
// multiply-adds), states and gradients within rounding (the device's libm
// and the order of shared-gradient sums differ in the last bits; a
// step-size decision at the edge of rounding can then, rarely, go the
// other way). cuda-multi's results are the same bits for any number of
// GPUs, any split and any chunking, on GPUs of one architecture (see
// MultiEngine); they are not the one-GPU engine's, which sums a block's
// shared gradients with atomics in no fixed order.
//
// # Kernels and layouts
//
// Each operation of a job runs as one kernel launch per chunk of
// trajectories: a forward solve, a record (the mesh), the loss, a record
// and its adjoint in one launch (the kernel keeps the states before its
// accepted steps and sweeps back), and the replay of a given mesh with or
// without its adjoint. Kernels are compiled by NVRTC on first use per kind
// of operation and cached on disk. Ensembles larger than the device memory
// (or ode.Settings.MemoryLimit) run in chunks; a record whose buffer
// proves too short is rerun for the trajectories that need more room.
//
// A kernel maps trajectories to threads in one of five layouts (Layout),
// chosen per job from the plan, the job's size and the device:
//
//   - thread: one thread per trajectory, for small or scalar fields
//     (Lorenz, Robertson) and for small networks (at most 512 shared
//     weights) in jobs that fill the device with threads;
//   - lanes: one warp per trajectory, for fields made mostly of network
//     layers: a layer's rows are spread over the 32 lanes, the weights and
//     each warp's gradient accumulator sit in shared memory; from 8,192
//     weights (kernelgen.LaneRollMinShared) a layer's reverse is a loop
//     over its rows rather than straight-line code, for a shorter
//     compile (2-128-128-2's gradient kernel: 516 kB of source → 243 kB),
//     with the same results bit for bit;
//   - lanes-global: lanes with the weights and accumulators in global
//     memory, for networks too large for shared memory (some 13,000
//     float64 weights on an H200);
//   - tile: one warp per tile of eight trajectories in lockstep, dense
//     layers as tensor-core products, for large float64 jobs of such
//     fields (at least 3 tiles per multiprocessor: 3,168 trajectories on
//     an H100) whose loss holds no
//     layers. Meshes and states are lanes mode's bit for bit; gradients
//     agree to rounding;
//   - wide: one warp per trajectory for the solves, records and gradients
//     of explicit methods on states of 64 components or more (Lorenz-96)
//     and of Rosenbrock methods from 16 (Pollution, the factor of W too),
//     the state, stages and cotangents in shared memory (those only
//     its own lane reads in its local memory: Tuning.NoWidePrivate keeps
//     them shared; the values every lane computes alike in registers up
//     to Tuning.WideScalars at once, the rest in shared memory) and the
//     component loops split over the lanes
//     (docs/wide-layout.md); results agree
//     with the thread layout's to rounding (its sums over components are
//     shuffles). Its initial states, parameters, final states and
//     gradients are row-major on the device, as in the job (the host
//     copies whole rows; kernelgen.Config.RowMajor). Tuning.NoWide keeps
//     such kernels in the thread layout; LayoutWide runs them wide at any
//     state size (Robertson's d = 3 included). Where a job's trajectories,
//     one thread each, would not fill the device (fewer than 256 per
//     multiprocessor: kernelgen.ThreadsFillDevice), the default may take
//     it from smaller states (kernelgen.WideFillMinDim,
//     WideFillMinDimFactor: an explicit method from d = 16, a Rosenbrock
//     method from d = 8, as BenchmarkGPULayoutFill measured on an H100).
//
// A kernel's source grows with the plan's programs: below d = 16 a
// Rosenbrock method unrolls the Jacobian and the LU of W into
// straight-line code, about 50·d² values; from d = 16 its steps are
// matrix-free and a kernel with save times has one forward and one
// reverse step program (Pollution with Rodas5P, d = 20: a 1.1 MB
// gradient kernel; Lorenz-96 with d = 64: 3.1 MB). From d = 16 an
// explicit method's kernels in the thread layout write the values that
// repeat per component (stage combinations, their cotangents, the error
// norm, the extension's coefficients) as loops over the components, with
// the same results bit for bit: their statements no longer grow with d
// (Lorenz-96's gradient kernel with Tsit5: 1,479 at d = 64 and 256,
// 23,286 unrolled at d = 64). A Rosenbrock method's kernels do so at
// every d (its Jacobian rows, W's assembly, the stage sums and their
// cotangents): HIRES's gradient kernel with Rodas5P 14,190 → 5,182
// statements, Pollution's 15,039 → 4,222, the Brusselator's (d = 64)
// 45,925 → 6,179. A kernel whose CUDA C
// passes 8 MiB is refused before NVRTC, which would take minutes, with a
// *SizeError naming its size and the CPU engine. NVRTC's time grows
// with the source; the kernel cache keeps what it compiled.
// Tuning.SplitUnits (off by default until a device measures it) compiles
// a large kernel in parts: its kernel and each large step function a
// translation unit of its own (kernelgen.KernelUnits), compiled
// concurrently as relocatable device code and linked by the driver
// (driver.Device.BuildUnits), so that a cold first call waits for the
// largest unit instead of the whole kernel; the results are the one-unit
// kernel's bit for bit. Every unit is compiled with the options of the
// kernel as one unit and one register cap, the one its launch bounds
// give it (kernelgen.Config.UnitRegs, --maxrregcount; the kernel's unit
// has no bounds): the driver's linker refuses a kernel whose callees in
// other units may use more registers than it (an H100 refused
// Pollution's wide Rodas5P gradient kernel in session 42). Where a
// kernel's parts fail to compile or link, the engine compiles it as one
// unit and the call goes on (TraceStats.PartsFailed, PartsError).
//
// Tuning (Engine.SetTuning) overrides the choice; chooseLayout documents
// the thresholds. Problems with events (ode.Settings.Events) run in the
// thread layout whatever the tuning asks.
//
// # First calls
//
// A kernel is compiled by NVRTC on the first call that needs it, unless
// the disk cache holds it: seconds to minutes for the largest built-in
// kernels (Rosenbrock gradients of Pollution, HIRES, Lorenz-96 and the
// Brusselator: 11 to 95 s on an H100, bench/RESULTS.md). The "cuda"
// engine runs such first calls on the CPU engine instead, as JIT
// runtimes interpret code while they compile it: where a call needs a
// kernel that is neither compiled in memory nor in the disk cache and
// whose source has at least 200,000 bytes (the Rosenbrock gradient
// kernels; Lorenz's Tsit5 kernels, 155 kB, compile in under a second),
// the call starts the compile in a goroutine of its own and runs on the
// CPU engine's executor of the same plan, at the same settings (Workers,
// block size, tolerances). So do the calls that arrive while the compile
// runs; the first call after it has ended runs on the device. A kernel is
// compiled once however many calls ask for it. Those calls' results are
// the CPU engine's, bit for bit (the device's agree with them to
// rounding, see Results), and say so: Solution.Engine and Mesh.Engine are
// "cpu" (such a mesh is a host mesh, which every engine replays), and the
// trace counts them (TraceStats.OnCPU; they make no launches). The
// compile itself takes as long as before: what changes is that the first
// results come in the CPU engine's time, or the compile's where that is
// shorter. The CPU engine starts at once: the kernel's configuration
// (where it waits for the wide layout's measure) and source are written
// in the background too, and only then is the source's size known and
// the disk cache asked; a kernel that turns out short or cached runs on
// the device, as without tiers (a CPU result that came first is
// dropped), so a first result waits for that answer (a call that
// replays a mesh held in device memory waits for it before the CPU
// engine starts, which would bring the mesh to the host). The CPU run and the
// compile race: where the compile ends well while the CPU engine still
// works on the call, the CPU run is stopped (between chunks of
// trajectories) and the call runs on the device, its results the
// device's (TraceStats.CPUStopped counts them). A CPU run writes arrays
// of its own, not the ones a call passes back (Gradient dst): a stopped
// or cancelled run leaves nothing in the caller's. Settings.Progress may
// count a call's trajectories twice, on the CPU engine and on the
// device. A compile that fails is remembered as failed: the first call
// after it returns its error (the calls during it had their CPU
// results). A compile cannot be stopped once NVRTC has it; its goroutine
// ends with it. A call whose context ends returns ctx.Err(), on the CPU
// engine as while it waits for a compile another call started.
//
// Tuning.WaitForCompile makes the engine wait for its compiles instead,
// as before, and WaitForCompiles waits for those running in the
// background (a benchmark calls it after its warm-up, so that its timed
// calls are the device's; a program that exits after a few calls calls
// it before it exits, so that its kernels reach the disk cache and its
// next run finds them, as the gradsolve command does). To have the
// kernels ready before the calls that matter, make one call like them
// (the same operation, ensemble size and save times: these choose the
// kernel) and then call WaitForCompiles. A very large first call (millions of
// trajectories) may take longer on the CPU engine than the compile: such
// a program should wait for its compiles (Tuning.WaitForCompile). Not
// tiered:
// "cuda-f32" (its results contract is float32's), "cuda-multi", and the
// fits kept on the device (ode.Trainer), which wait for their kernels.
//
// # Events
//
// Every engine of the package ("cuda", "cuda-f32", "cuda-multi", those
// NewEngine and NewMultiEngine make) runs problems with events
// (Engine.SupportsEvents): Solve, Record, Replay, Loss and Grad, with the CPU
// engine's algorithm (ode/cpu_event.go) per thread (kernelgen's
// events.cuh): after each accepted step the conditions are sampled on the
// step's continuous extension (the trial runs ode.Plan.TrialDense), a
// crossing's root is located there and polished on the method's step, the
// step replaced by the event step, the jump applied. A gradient's stored
// rows mark the event steps, and its reverse sweep carries the cotangent
// of time and differentiates each event step's size by the implicit
// function theorem, as the CPU engine's. A record writes the mesh's event
// marks (int32 [rows][n], kernel argument evout) where it writes its
// steps: a mesh kept on the device keeps its marks there too, after its
// steps in the same allocation (ode.ResidentEvents; Mesh.Events stays nil
// until Mesh.Host copies steps and marks, which the CPU engine and the
// other engines' replays call), and a mesh recorded to the host (in
// chunks, with reruns, in float32, on cuda-multi) brings them back to
// Mesh.Events with its steps. A replay, loss or gradient on a given mesh
// with events (this engine's or the CPU's) reads them (evin: in place
// with the steps of a resident mesh, else uploaded from Mesh.Events),
// applies each marked step's jump at its end and keeps the mark in the
// stored rows, so the same sweep runs on it. A gradient with events
// copies back per trajectory its status, accepted and rejected steps,
// flags and event count (int32 each), its end time (a terminal event's),
// its loss term and gradients and, unless Gradient.Omit leaves them out,
// its final state (and rejected count): 76 bytes a trajectory for the
// two-component balls, 56 with OmitStates|OmitStats; the last step sizes
// only where a trajectory failed, nothing of its mesh
// (BenchmarkGradEventsCall reports the bytes, TestHostEventsResident
// checks them). Save times are
// read as the CPU engine reads them (see ode.Event): inside an event step
// on its own extension (the dense step at h*), exactly at a non-terminal
// event after the jump, past a terminal event NaN (Solve, Replay) or the
// CPU's error (Loss, Grad); the sweep reverses each save on its step with
// respect to t and h too. Every method runs them (Tsit5, Vern7, Rodas5P,
// Rosenbrock23); the steps, event marks, counts and times are the CPU's,
// states and gradients within rounding (TestHostEvents*). They run in the
// thread layout only (not lanes or tiles).
//
// MultiEngine shards the trajectories of a problem with events as any
// other's: the event counts, end times, statuses and the recorded mesh's
// event marks are gathered in trajectory order, a given mesh's marks
// split with its steps, and the results are the same bits for any number
// of GPUs and any split (TestMultiEvents), and those of the one-GPU
// engine in everything computed per trajectory.
//
// In float32 the conditions, the roots and the polish run in float, and
// the roots are located to the float32 rounding of the solution: the
// polish stops within two float32 ulps of the event time, as in float64
// within two double ulps. Measured against the float64 CPU engine at the
// same tolerances (RelTol 2e-5 and 1e-4, AbsTol down to 1e-6; Tsit5,
// Vern7, Rodas5P; TestHostEventsFloat32 and docs/more-results.md): the
// same events on every trajectory; a bouncing ball's first bounce, which
// both engines' steps reach exactly, within 2.5 float32 ulps of the span
// (ulp(1.6) = 1.2e-7); a threshold's crossing (span 100) within 1 to 8
// ulps of the span on the host (19 at AbsTol 1e-4; up to 23 on the
// H100), where the float32 controller's steps differ from the CPU's and
// so do their discretisation errors: an event time carries the state's
// error at its crossing, δt = ∂g/∂y·δy / |ġ|, large where the condition
// changes slowly (a concentration decaying near its threshold), and
// TestHostEventsFloat32 bounds it so, per trajectory, by the float32
// state error (against the float64 replay of the engine's own mesh) and
// both meshes' discretisation errors (against the closed form); states
// and gradients through the event times within 1e-4 of the ensemble's
// scale. Saved states read from the continuous extension in float32 carry
// the rounding of its power-form coefficients w_j = h·Σ_i R_ij·k_i
// (large R_ij of alternating sign that cancel: |δy| ≈ u·A·h·|f| with A =
// Σ_j Σ_i |R_ij|, u = 2^-24), and so do their gradients (the reverse
// sums R_ij·θ^j): Tsit5's A = 389 keeps them within 2e-5 of the
// ensemble's scale, Vern7's A = 1.75e4 (its lazy order-7 extension's
// coefficients reach 2,000) leaves saved states 1.4e-4 and gradients
// through them 2.8e-4 from the float64 CPU on the host (3.9e-4 on the
// H100; bouncing balls at RelTol 1e-4; Vern7's interpolant alone, one
// step in float32: 2,200·u·h|f|, Tsit5's 18·u·h|f|, either 7·u·h|f|
// with the coefficients formed in float64), where its mesh states are
// within 3e-5: prefer Tsit5 for saved states in float32. An event tolerance of 1e-10 thus means nothing in
// float32: its event times are good to about 1e-6 of the span, which
// suffices for the tolerances float32 can meet (RelTol ≥ 1.2e-5,
// ode.MinRelTol); use a float64 engine where event times must be tighter.
// Events that accumulate (a ball coming to rest bounces infinitely often
// in finite time) are told apart only while they are more than a few
// ulps of t apart: past that a bounce can leave the ball moving down and
// it falls through the floor, in float32 after 21 or more bounces of
// balls with restitution in [0.5, 0.9] (in float64, on the CPU engine
// too, after 50 or more). Set Settings.MaxEvents below that
// (TestHostEventsAtRest: 12 in float32), so that TooManyEvents ends them.
// Ensemble arrays on the device are step-major: input k of
// trajectory i of n at in[k*n+i], so a warp's threads read consecutive
// addresses.
//
// # Meshes stay on the device
//
// The single-GPU float64 engines ("cuda", NewEngine) keep a mesh
// recorded in one launch where the kernel wrote it: the ode.Mesh of a
// record or of a gradient with the record has Resident set and H nil. A replay, loss or gradient
// on that mesh on the same device reads it in place; a Gradient passed
// back has its mesh's device memory refilled; Mesh.Host copies it to the
// host (and releases the device's copy), which package ode does for any
// other engine; Mesh.Release frees it now, and it is freed anyway once
// the Mesh is unreachable. A record run in chunks, with reruns, in
// float32 or on cuda-multi returns a host mesh as before. A record for a
// gradient stops a trajectory where the stiffness test of an explicit
// method fires (ode.Job.StopOnStiff), as the CPU engine does, keeping its
// state there and its saves before it. The records of gradients run the
// stability probe too (ode.Plan.Probe, ode.Job.CheckStability: a mode of
// ∂f/∂y that the solution does not excite, left outside the method's
// stability region), with the CPU engine's statuses and step counts, in
// every layout (the wide one's gs_body calls it as a warp-distributed
// function, on a warp, on fewer lanes or on several warps a trajectory).
//
// # Method Auto continues stiff trajectories
//
// Both executors run per-trajectory start times (ode.Job.T0s, the
// kernels' t0s array: each trajectory's initial time, gs_t0; a save time
// before it is not the trajectory's), so Method Auto continues a
// trajectory whose stiffness test fired with Rodas5P from the time and
// state where it fired (ode.StartTimesExecutor, ode/auto_continue.go):
// the CPU engine's steps and switch points, in separate launches of the
// stopped trajectories alone. The first pass of a loss or gradient
// completes the trajectories that end well beside the stopped ones
// (their adjoint runs, the stopped ones' lanes idle, whose loss terms
// are 0 in the in-order sum: ode.StopGradsExecutor), so without shared
// parameters package ode keeps that pass's rows of them (their replay,
// bit for bit the same, is not launched: TestHostEngineAutoKeptGrads);
// with shared parameters it replays them, for a sum over them alone.
// The first pass's mesh stays in device
// memory: the columns of the trajectories that a loss or gradient
// replays (those that ended well) and of the stopped ones (their Tsit5
// segments) are gathered there by the mesh columns' kernel (meshcols.cuh,
// gs_m_cols: one thread a step, writes coalesced; residentMesh.Columns,
// ode.ColumnSteps; the columns and their lengths go up into a row after
// the result's, no buffer of their own), a stiff ensemble's used in
// place, and the switch times are the times the pass reached (copied
// back with its other results: run.stopsBack). Both segments' steps then
// stay in device memory (Mesh.Resident) until the mesh is read:
// Mesh.Host, or a replay, merges them on the host. A Gradient passed back
// has its device memory refilled: the Tsit5 pass's mesh, both gathers of
// its columns and the Rodas5P record write into the memory of the mesh
// passed back (ode's autoMem; of a mixed ensemble the merged mesh keeps
// the pass's mesh for that, from a call given a mesh back), so a Grad
// allocates no device memory from call to call
// (TestHostEngineAutoResident, TestHostEngineAutoReuse), and the two jobs
// each find the inputs their arena holds (the executor's two kept
// arenas: see Costs). Its host arrays go round the same way: the
// continuation's jobs write their results into the host arrays of the
// last call's jobs that its result did not hold (ode's autoSpare, kept
// with the mesh), and where every trajectory stopped the Tsit5
// segments' gradient goes into the Gradient's own arrays, not copied
// there after (TestHostEngineAutoSpare): a stiff ensemble's Grad at n =
// 16384 allocated 4–5 MB of host arrays a call, each page zeroed.
//
// # Fits stay on the device
//
// The single-GPU float64 engines implement ode.TrainExecutor: a fit
// (package fit, ode.Solver.NewTrainer) keeps its fitted values, the
// gradient with respect to them, the optimiser's moments, the best values
// and the loss's reduction in device memory, beside the kernel's arena,
// whose inputs the training kernels (train.cuh) update in place. A step is
// two parts: the gradient with its record and the reductions (loss,
// each fit's gradient norm, the checks of every trajectory; sums in a
// fixed order, so a step does not depend on timing; each chunked sum one
// launch, whose last block sums the blocks' partials in index order), then
// the optimiser's rule (optim.Rule, with the optimiser's own arithmetic:
// the values and moments are its Step's bit for bit on the same gradient)
// and the writing of x into the inputs. Each part is a CUDA graph,
// captured once per trainer on a stream of its own (and again when an
// evaluation's rerun with longer record buffers takes a new arena) and
// launched with one call per step, where the dozen operations launched one
// by one cost some 85–100 µs a step beside the kernels on an H100
// (BenchmarkGPUTrainStep compares the two). The rule's scalars that change from
// step to step (a schedule's rate, Adam's bias corrections) are not
// captured: the update graph's first node copies them from page-locked
// memory the host fills before each launch. Tuning.NoTrainGraph launches
// the operations one by one instead (results bit for bit the same,
// TestGPUTrainGraph); a driver that cannot capture falls back to that.
// Only the loss, the gradient norm and a few counts come back. A step whose trajectories fail, or whose update makes
// values non-finite, is handed back to the host (fit.Settings.OnHost
// documents the rules). A job that does not fit one launch, float32 and
// cuda-multi keep the fit on the host.
//
// # Costs
//
// A whole call costs its kernels' time, the transfer of the bytes that
// must move (staged through page-locked host memory, transposed on all
// cores; inputs that did not change are not sent again: a launch of all
// of a job's trajectories compares each input array, Y0, P, the end and
// start times, the loss's data, a given mesh's lengths and event marks,
// with the engine's host copy of what the launch before left in the same
// device memory, on all cores, and stages and uploads only those that
// differ, so a sweep that changes P sends P alone and a repeated call
// sends the shared block and the save times (a few hundred bytes;
// TraceStats.Reused counts the bytes kept, Tuning.NoInputReuse sends
// everything; the copies hold as much host memory as the inputs;
// comparing costs about half of staging, BenchmarkStageReuse, and an
// input found changed on two launches in a row is staged without being
// compared or copied for the next 4, 8, … up to 256 launches, so inputs
// given anew on every call cost about what they cost without the reuse;
// a launch whose inputs were all the same at their last compare runs
// ahead of its compare: it holds them unseen and queues its batch at
// once, the compare runs on the host as the device runs it, before any
// result is written, and where a caller changed a
// slice in place it drops the launch's results and runs it again,
// staged, so the compare is off the call's path and its guarantee the
// same: TraceStats.Ahead and AheadMissed count them, reuse.go;
// the engine keeps two free arenas, each with its record, so that two
// jobs that alternate with their inputs placed differently, Method
// Auto's Tsit5 pass and Rodas5P continuation or a record and a replay
// of its mesh, each find theirs: between calls the device memory of
// both launches' arenas stays held, where one, the larger, would do
// without the reuse, and with Tuning.NoInputReuse one is kept;
// chunks of
// a job too large for one launch, and the reruns of some trajectories,
// send everything, and the launch after them too; a resident mesh does
// not move, its event marks neither; host meshes over 32 MiB in two
// pipelined chunks; Y0, P or T1 given as one row go up as 8,192 copies
// that the device doubles over launches of 2^17 trajectories or more),
// the host's work on the per-trajectory results (from 2^18 trajectories
// a launch in the thread layout runs a kernel per chunk of results, each
// chunk's results copied back while the later chunks run and scattered
// while the next is copied: Tuning.NoChunkLaunch for one kernel; and
// each chunk's inputs staged while the chunk before goes up and runs,
// its columns uploaded and its kernel queued once they are staged, so
// that only the first chunk's staging comes before the device's work:
// Tuning.NoChunkStage to stage them all first; from 16,384 below that,
// a gradient's results come back in two parts, the statuses, counts and
// loss terms written, and the loss summed, while the states and
// gradients are copied; of the order of the kernel's time and more at
// millions of trajectories: the result loop
// copies and transposes every array and checks the gradients finite as
// it copies them, Result.GradFinite, adds the loss terms in trajectory
// order (one core's chain of additions, begun as soon as the first
// block's terms are written, before the block's other arrays), and, for
// a Grad's record, writes
// the Solution's and the Mesh's end times and checks that every
// trajectory ended well in the same blocks, ode.Job.EndTimes, where
// package ode made a pass of its own after the run; with events the
// Mesh's end times alone, the Solution's being the times reached),
// and a fixed latency of launches and synchronisation: a launch's copies,
// kernel and reads are one batch (driver.Device.Batch) run on the
// caller's own thread, with no hand-over to another (a repeated call
// makes no other call of the driver's: TestCallHandOvers); the first call
// of a kind of operation
// adds NVRTC's compile time (seconds, a file read once cached; a long
// one runs in the background while the calls run on the CPU engine: see
// First calls). The
// memory an executor keeps between operations goes back when its Solver
// is no longer reachable. Results of a Solver.Grad with a Gradient passed
// back reuse its arrays (ode.Job.Reuse); at millions of trajectories a
// fresh result costs more than the kernels, so training loops should pass
// theirs; a Gradient whose Omit leaves out the states and the counts
// (ode.OmitStates, ode.OmitStats) has them neither copied back nor
// scattered into row-major arrays (for 2^20 Lorenz trajectories without
// save times, 28 of the 96 bytes a trajectory a call copies back, and
// with K save times 24·K more; the host's work of a call, measured by
// BenchmarkCallHostWork, about a sixth less). A repeated call's set-up
// allocates nothing that it allocated before: the loss's trace reuses the
// Solver's storage and finds the last call's program (tape.Tracer), the
// job shares the Solver's tolerances, and the executor keeps a finished
// call's run with its bookkeeping (staging spans, kernel words, result
// blocks, the chunked copies' lists) for the next; what is left is the
// call's result structs and the closures of the launch and its result
// loop, about 21 allocations a call at any N (TestCallAllocsSteady).
// WithTrace reports device time, transfers, chunks, reruns and
// the layout of the operations run with its context. Figures for the
// benchmark suites are in bench/RESULTS.md.
//
// # Saved states
//
// The kernels write a launch's saved states component-major (value c of
// trajectory q's K·Dim at ys[c·n+q]: a warp's threads write consecutive
// addresses); a Solution's Ys are row-major (trajectory i's K·Dim values
// at Ys[i·K·Dim:]), so the host transposes them. Where they are at least
// two groups of 4 MiB and the launch's results come back in one piece
// (below 2^18 trajectories), they are copied back after the other
// results, in up to 8 groups of whole columns, one copy each, and each
// group is transposed into the rows on all cores while the next is
// copied (saveGroups, readSaves, scatterSaves); the transpose reads each
// source cache line once (blocks of 8 trajectories, scatterSaveCols),
// about twice as fast as a trajectory at a time (BenchmarkSaveTranspose).
// What remains is the copy and the last group's transpose: 1,000 save
// times of 4,096 Kepler orbits are 131 MB, 2.9 ms copied on an H100 host
// (5.2 ms at 25 GB/s): more than half again a call with one save time
// (about a millisecond there), so issue 25's 1.5× is out of reach of a
// call that returns them, unless they stay on the device until read (as
// a resident mesh does) or move fewer bytes. A Gradient with
// ode.OmitStates leaves them there.
//
// With ode.Settings.KeepSaves they stay on the device until read. The
// float64 single-GPU engines ("cuda", and a launch of all the call's
// trajectories at once) then have the launch's kernel write them in place
// into device memory of their own, component-major as in the arena, and
// copy the launch's statuses and flags after them: the Solution's
// Resident (residentSaves, like a resident mesh: freed by Release, by
// HostSaves, or once unreachable). The call copies none of them back,
// rearranges nothing and transposes nothing on the host. Reading them
// (Solution.HostSaves, ResidentSaves.CopyTo) runs a saves kernel
// (saves.cuh, gs_s_rows: tiles of 32×32 values through shared memory,
// reads and writes coalesced; NaN rows for the failed trajectories, as
// the host's scatter writes) that rearranges them into device memory of
// the read's own, row-major as Solution.Ys (about 0.1 ms for 131 MB on an
// H100), then one copy from the device straight into Ys's order, through
// the page-locked chunk buffers where it is large (copyMesh). (Before
// session 46, Tuning.oldSaves, the saves kernel rearranged them from the
// arena into the kept array after every launch.) The arena still has
// room for them (unused when they are kept: the memory a call asks for,
// ode.Settings.MemoryLimit's measure, is as before). A SolveTo or Grad given its earlier result back
// writes into the same kept array. Saves come back in Ys as without
// KeepSaves on cuda-f32 and cuda-multi, in a call split into launches
// (more trajectories than the device's free memory holds), from a
// gradient whose record buffer overflowed (the kept saves are copied to
// the host before the trajectories run again), for a loss or gradient
// with events (pastTerminal reads them), and with Method Auto (package
// ode merges its segments on the host).
//
// With ode.Settings.KeepGrads a gradient's per-trajectory results stay on
// the device until read (issue 25: a jitted Diffrax gradient returns its
// arrays on the device). The same engines, in a launch of all the call's
// trajectories whose recorded mesh stays on the device, have the kernel
// write the launch's download region (dL/dy0, dL/dp, statuses, counts,
// flags, times, event counts, and the states unless Gradient.Omit leaves
// them out) straight into device memory of their own (residentGrads, the
// Gradient's Resident; its ranges 256-byte aligned as the arena's
// arrays, no device-to-device copy), and a check kernel (grads.cuh, gs_g_check: a warp's verdicts combined
// by shuffles, one atomic each) reduces them to two words: whether a
// trajectory is ill (a status other than OK; a stiffness, overflow or
// tangential-crossing flag) or a gradient value not finite, and the most
// accepted steps (the mesh's rows), and sums the loss terms exactly:
// each finite term is an integer times 2^−1074, split into 32-bit chunks
// added into 66 signed 64-bit limbs (a warp's chunks by shuffles where
// its terms share a limb, then shared-memory and global integer atomics,
// whose order does not change the sum; into accumulators the check's
// last block moves to the words and zeroes, so that they need no memset),
// which the host carries into one integer and rounds once (gradsSum, in
// machine words). The loss is then the terms' exact
// sum correctly rounded, the same on every device and launch shape; a
// call without KeepGrads (and the CPU engine) adds the terms in index
// order, rounding each addition, so the two differ by at most that
// sum's error bound, (n−1)·u·Σ|terms| to first order (u = 2^−53), plus
// half an ulp: a few ulps in practice (TestHostKeepGradsLossSum,
// testKeepGrads). The call copies back the check's words and limbs (536
// bytes, whatever n) and the shared gradient's sums: a kept call queues
// one upload of the shared block (not waited for), the kernel (which
// zeroes the recorded mesh's steps and
// event marks past each trajectory's end, in the rows the call before
// wrote: no memset of the mesh) and the check kernel, helps the compare
// of its inputs run ahead (par.EqualSet.Help), then one read, and
// under a Trace two event records around the kernel and a wait for the
// second (TestKeptCallOps), and makes no new run (the run of the results written over
// serves the next call: 17 allocations a call, TestKeptCallAllocs),
// where a call with
// OmitStates|OmitStats copies 56 bytes a trajectory (ball and pk, d = 2,
// one parameter) and scatters them into eight arrays, most of its host
// time. Where the words report a failure the call copies
// everything back at once and scatters it as without KeepGrads, so the
// error is the same. Gradient.HostGrads (ResidentGrads.Fill) copies the
// kept bytes back and runs the same scatter over them. A Grad given its
// earlier Gradient back writes into the same device memory. Results come
// back at once as without KeepGrads on cuda-f32 and cuda-multi, in a call
// split into launches, where the recorded mesh comes to the host, for a
// loss with events and save times, and with Method Auto.
//
// # Environment
//
// Three variables configure the registered engines, read once:
//
//	GRADSOLVE_CUDA_DEVICES  the GPUs of cuda-multi, as ordinals: "0,2" (default: every visible GPU)
//	GRADSOLVE_CUDA_CACHE    the kernel cache's folder; "off" disables it (default: os.UserCacheDir()/gradsolve/cuda)
//	GRADSOLVE_CUDA_LAYOUT   force a layout: thread, lanes, lanes-global, tile or wide (Tuning.Layout; default: chosen per job)
//
// # Several GPUs
//
// cuda-multi is never chosen by "auto": name it in ode.Settings.Engine.
// It splits the ensemble into contiguous shards on multiples of
// scan.TileSize trajectories, sized by each GPU's measured speed, runs
// each shard with its own device, goroutine and executor, and gathers the
// results in index order. Beyond one host, see docs/scale-out.md.
package cuda
