package cuda

import (
	"fmt"
	"os"
	"sync"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// Layout is how a kernel maps trajectories to the GPU's threads.
type Layout string

// The layouts. LayoutAuto lets chooseLayout decide from the plan, the job
// and the device; the others force a layout where the job allows it.
const (
	LayoutAuto Layout = ""
	// LayoutThread runs one thread per trajectory.
	LayoutThread Layout = "thread"
	// LayoutLanes runs one warp per trajectory, its field's vectors
	// spread over the 32 lanes, the shared parameters in shared memory
	// where they fit (else as LayoutLanesGlobal).
	LayoutLanes Layout = "lanes"
	// LayoutLanesGlobal is LayoutLanes with the shared parameters and the
	// warps' gradient accumulators in global memory.
	LayoutLanesGlobal Layout = "lanes-global"
	// LayoutTile runs one warp per tile of eight trajectories in
	// lockstep, dense layers as tensor-core products; where a job does
	// not allow it (float32, tile sums, a loss holding vectors, no shared
	// parameters), lanes mode.
	LayoutTile Layout = "tile"
	// LayoutWide runs one warp per trajectory, the state, the stages (and
	// a Rosenbrock method's factor of W) in the warp's shared memory and
	// the loops over the components split over the lanes
	// (docs/wide-layout.md), at any state size: the kernels the layout
	// runs (kernelgen.WideAllowed: solves, records, losses and gradients
	// with the record, without events, save times interpolated, float64)
	// whose warp's shared memory fits the device; the others, and fields
	// whose programs the layout does not emit (network layers' vector
	// ops), in the thread layout. LayoutAuto chooses it from
	// kernelgen.WideMinDim components (explicit methods) or
	// kernelgen.WideMinDimFactor (Rosenbrock methods), or from
	// kernelgen.WideFillMinDim and WideFillMinDimFactor in jobs too small
	// to fill the device with threads.
	LayoutWide Layout = "wide"
)

// layoutEnv names the environment variable that sets Tuning.Layout of the
// registered engines (see the package doc).
const layoutEnv = "GRADSOLVE_CUDA_LAYOUT"

func (l Layout) valid() bool {
	switch l {
	case LayoutAuto, LayoutThread, LayoutLanes, LayoutLanesGlobal, LayoutTile, LayoutWide:
		return true
	}
	return false
}

// Tuning is the configuration of an engine's kernel layouts, beyond what
// the plan, the job and the device decide. The zero value means the
// defaults; an engine without a Tuning of its own (SetTuning) takes the
// registered engines' one, read once from the environment (Layout from
// GRADSOLVE_CUDA_LAYOUT).
//
// The fields other than Layout are switches for tests and benchmarks:
// each turns off one optimisation of the default layout, whose gain is
// measured in bench/RESULTS.md.
type Tuning struct {
	// Layout forces a layout (see Layout); LayoutAuto (the default)
	// chooses one.
	Layout Layout

	// NoBlockAcc keeps a lanes-mode gradient kernel's warps' accumulators
	// in global memory when its shared parameters do, instead of one
	// accumulator per block in shared memory (GS_LANES_BLOCKACC).
	NoBlockAcc bool
	// TileAccGlobal keeps tile mode's warp accumulators in global memory
	// instead of the block's shared memory (GS_TILE_SACC).
	TileAccGlobal bool
	// TileShGlobal has tile mode read the shared and controller blocks
	// from global memory instead of copying them into shared memory
	// (GS_TILE_SSH).
	TileShGlobal bool
	// TileStatic has tile mode's warps run every gridth tile instead of
	// taking tiles in turn from a counter (GS_TILE_DYNAMIC).
	TileStatic bool
	// NoChunkLaunch runs a launch whose results come back in chunks
	// (defaultPipeChunk) as one kernel, the chunks copied back after it,
	// instead of a kernel per chunk (thread layout) whose results are
	// copied back while the next chunks' kernels run.
	NoChunkLaunch bool
	// NoChunkStage stages all the inputs of a launch that runs a kernel
	// per chunk before its first kernel, instead of chunk by chunk, each
	// chunk's inputs staged while the chunk before goes up and runs
	// (stagesByChunk).
	NoChunkStage bool
	// NoInputReuse stages and uploads every input of every launch. By
	// default a launch of all of a job's trajectories at once neither
	// stages nor uploads an input array (Y0, P, T1s, T0s, the loss's
	// data, a given mesh's lengths and event marks) whose values are
	// those the arena holds from the launch before on it: each is
	// compared on all cores with a host copy the engine keeps of what it
	// last sent (so a slice changed in place is seen), and only what
	// changed goes up (a sweep over P sends P alone). The copies cost as
	// much host memory as the inputs; results are the same bit for bit.
	// TraceStats.Reused counts the bytes not sent. An input found
	// changed on 2 launches in a row rests: it is staged as with
	// NoInputReuse, neither compared nor copied, for the next 4 launches,
	// then kept again; found changed once more, it rests twice as long
	// (up to 256 launches), and found the same, it is kept from then on.
	// So an input given anew on every call costs about what it costs
	// with NoInputReuse (after a rest of r launches, a copy on the next
	// and a compare on the one after: two in 6 launches, then in 10, 18,
	// … up to 258), and one that changes now and then is kept.
	NoInputReuse bool

	// FastCompile holds NVRTC options, separated by spaces, with which a
	// kernel of at least FastCompileFrom bytes of source is compiled
	// besides the engine's own (driver.CompileSettings.Options): options
	// that trade some of the kernel's speed for NVRTC's time on a first
	// call, as "-Ofast-compile=mid" or "--ptxas-options=-O1" (cuda's
	// TestGPUColdStart measures both sides). "" means the default,
	// "--ptxas-options=-O1" from 300,000 bytes of source (about 10%
	// slower kernels, a sixth of the compile time on the largest
	// built-in kernels: Rosenbrock kernels of states from d ≈ 8 on),
	// "none" none. The kernel cache's key holds the options.
	FastCompile string
	// FastCompileFrom is the source size, in bytes, from which
	// FastCompile applies; zero means defaultFastCompileFrom.
	FastCompileFrom int
	// Minimal compiles every kernel with NVRTC's -minimal, which leaves
	// out of the program the parts of CUDA's headers that generated code
	// does not use (textures, surfaces, the device runtime, the runtime's
	// types), for a shorter front end; NVRTC before 12.4, which lacks it,
	// compiles without (driver.CompileSettings.Options). Off by default
	// until measured on a device (bench/gpu_pending.sh compile2).
	Minimal bool
	// SplitFrom is the size, in bytes of generated functions (without
	// the prelude and the kernel templates), from which a kernel of the
	// thread layout compiles its large step programs as functions of
	// their own, called rather than inlined (kernelgen.Config.SplitFrom):
	// NVRTC's front end runs several-fold faster on the largest kernels,
	// and the host engines give the same results bit for bit. Zero means
	// the default, never; negative never. On an H100 a split Rodas5P
	// gradient kernel of Pollution gave non-finite states where the
	// unsplit one did not (see defaultSplitFrom): a switch for that
	// investigation. 256 KiB would split the Rosenbrock gradient kernels
	// from d ≈ 8 and the neural Robertson problem's, none of Lorenz's or
	// the three-state problems'.
	SplitFrom int
	// SplitUnits compiles a split kernel (SplitFrom; with SplitUnits a
	// zero SplitFrom means proposedSplitFrom, 256 KiB of generated
	// functions) in parts: its kernel and each of its large step
	// programs a translation unit of its own (kernelgen.KernelUnits, the
	// same functions, names and arithmetic, so the same results bit for
	// bit), compiled concurrently, at most GOMAXPROCS at a time, as
	// relocatable device code and linked by the driver's linker
	// (driver.Device.BuildUnits; each unit and the linked image are cached
	// on disk). A cold first call then waits for the largest unit rather
	// than the whole kernel; the link costs milliseconds and the calls
	// between units are those of the one-unit split kernel. Kernels of
	// the thread and the wide layouts (the wide layout's step functions
	// split in parts only; lanes and tile kernels never split). Every
	// unit is compiled with the kernel's options and the register cap of
	// its launch bounds (Tuning.kernelOptions); where the parts fail to
	// compile or link, the kernel is compiled as one unit instead
	// (TraceStats.PartsFailed). Off by default until a device has
	// measured it (bench/gpu_pending.sh s42split): what a cold call saves
	// against what the calls cost warm.
	SplitUnits bool
	// NoWide keeps in the thread layout the kernels that by default run
	// in the wide layout: the solves, records, losses and gradients with
	// the record (without events; save times interpolated, Settings.Saves
	// = SaveInterpolate) of explicit methods on states of at least
	// kernelgen.WideMinDim components (and of Rosenbrock methods from
	// kernelgen.WideMinDimFactor unless NoWideStiff) (kernelgen.Config.Wide: one warp
	// per trajectory, the d-long arrays in shared memory, the component
	// loops split over the lanes; results agree with the thread layout's
	// to rounding, not bit for bit). On an H100, Lorenz-96's gradient with
	// the record at n = 4096 (Tsit5, rtol 1e-6): kernels 12.5 → 1.11 ms
	// (d = 64) and 141.8 → 8.30 ms (d = 256); docs/wide-layout.md. It
	// also turns off the smaller thresholds of jobs too small to fill the
	// device (kernelgen.WideFillMinDim, WideFillMinDimFactor). A forced
	// Layout overrides it: LayoutWide runs those kernels wide at any d,
	// the others keep them in their own layout.
	NoWide bool
	// NoWideStiff keeps Rosenbrock methods (Rodas5P, Rosenbrock23) in the
	// thread layout. By default they run in the wide layout too, from
	// kernelgen.WideMinDimFactor components: a warp per trajectory with W
	// and its LU factor in the warp's shared memory (docs/wide-layout.md).
	// On an H100 (BenchmarkGPUWide, gradient with the record, kernels)
	// Pollution's (d = 20, n = 4096, Rodas5P) took 65.8 ms in the thread
	// layout and 24.8 ms wide, the Brusselator's (d = 64, n = 1024)
	// 804 ms and 65.1 ms; their kernels' source is 1.1–1.7 MB against
	// 0.3–0.4 MB in the thread layout, so NVRTC takes longer on their
	// first call. LayoutWide overrides it.
	NoWideStiff bool
	// NoWidePrivate keeps every d-long array of a wide-layout kernel in
	// the warp's shared memory (kernelgen.Config.WideShared), as the
	// layout did before its lane-private arrays: by default the arrays
	// that only the lane of their component reads and writes (the stages'
	// derivatives of an explicit method, their adjoints in the reverse
	// step, the reverse step's output λ') are each lane's own (local
	// memory or registers), and a warp's shared memory holds the others
	// only, so that more warps fit on a multiprocessor
	// (kernelgen.WideSharedPerWarp; Lorenz-96 with d = 256, Tsit5: see
	// docs/wide-layout.md). Results are the same bit for bit; it is the
	// switch of the device's comparison.
	NoWidePrivate bool
	// WideScalars is the most replicated float64 values (a function's
	// scalars outside its component loops, every lane's alike) that a
	// wide-layout kernel keeps live in registers at once; the others live
	// in slots of the warp's shared memory from where registers run short
	// (kernelgen.Config.WideScalars, widespill.go). Pollution's Rodas5P
	// reverse step keeps up to 183 live, its gradient kernel 255
	// registers with 37 million local-memory spill requests (H100,
	// session 40). Zero means kernelgen.DefaultWideScalars (64, a
	// proposal: BenchmarkGPUWideRegs measures it), negative no limit
	// (the source as before). Results are the same bit for bit; no effect
	// with NoWidePrivate.
	WideScalars int
	// WideMinBlocks, if positive, declares a wide-layout kernel's launch
	// bounds: at least WideMinBlocks blocks of kernelgen.WideWarps warps
	// per multiprocessor, so that ptxas caps the registers of a thread
	// (6: 168, 7 and 8: 128; kernelgen.BoundsRegs), spilling past the
	// cap, for occupancy
	// (kernelgen.Config.WideMinBlocks). Zero means as many blocks as the
	// device's shared memory lets run at once, at most 7 (wideMinBlocks:
	// HIRES's wide gradient kernel 1.6× faster on an H100); negative, no
	// bounds. The same results bit for bit (BenchmarkGPUWideRegs
	// measures the levers).
	WideMinBlocks int
	// WideMinSplit, if positive, is the fewest components of a loop of a
	// wide-layout kernel's step functions: the shorter runs of values
	// (from 4) that the reroll plan finds, which an irregular field's
	// code is mostly made of (Pollution's 25 reactions and their
	// reverse: 4 to 8 components a run), are emitted as statements every
	// lane runs alike instead of loops split over the lanes, each with its
	// operands gathered into shared memory by lane 0 and __syncwarp()s
	// around it (kernelgen.Config.WideMinSplit; runs with a chained sum
	// stay loops). Zero means kernelgen's default (DefaultWideMinSplit in
	// a Rosenbrock method's kernels from WideSplitMinDim components; other
	// kernels keep every run a loop); negative, every run a loop. The same results bit for bit
	// (BenchmarkGPUWideSplit measures it).
	WideMinSplit int
	// NoTrainGraph runs each step of a fit kept in device memory
	// (ode.Trainer) as a batch of a dozen operations launched from the
	// host, instead of one CUDA graph for the evaluation and one for the
	// update, captured once per trainer (and again for a new arena) on a
	// stream of its own (trainGraphs). Results are the same bit for bit.
	NoTrainGraph bool
	// WaitForCompile has the single-GPU float64 engine ("cuda") wait for
	// a kernel's compile on a call that needs it, as the other engines
	// do, instead of running the calls that arrive while a long compile
	// runs in the background on the CPU engine (the package doc's "First
	// calls"). The zero value, false, runs them on the CPU engine: a
	// first call's results come in the CPU engine's time, not NVRTC's
	// (tens of seconds for the largest built-in kernels), or on the
	// device where the compile ends before the CPU engine's run (which is
	// then stopped). A compile is long where the kernel's source has at
	// least 200,000 bytes (defaultTierFrom) and the disk cache does not
	// hold it. Kernels do not depend on it: engines that differ in it
	// alone share them.
	WaitForCompile bool
	// StoreSaveCots has a gradient kernel's loss VJP store every save
	// time's cotangent (dL/dys: an array of K·Dim values a trajectory in
	// the launch's device memory) for the reverse sweep to read, as
	// before session 44 (kernelgen.Config.StoreSaveCots). By default a
	// kernel of the thread layout with save times on the continuous
	// extension, whose loss is a sum of terms of one save time each (the
	// saved states' sum of squares, their squared distances from data),
	// computes save time k's cotangents where the reverse sweep reaches
	// it, from its saved state, and needs no such array. The same results
	// bit for bit: the switch of the device's comparison
	// (BenchmarkGPUSaveSplit's -tb rows).
	StoreSaveCots bool

	// Sizes the package's tests shrink to exercise reruns and chunked
	// copies (zero: the defaults).
	firstRows  int   // the rows of a first record buffer, instead of rowsGuess's guess
	meshChunk  int   // the bytes of each chunk buffer of copyChunked (defaultMeshChunk)
	maxStaging int64 // the largest staging buffer taken from the backend's host memory (defaultMaxStaging)
	maxSource  int   // the largest kernel source compiled (defaultMaxSource)
	bcastSeed  int   // the seed of a broadcast input (defaultBcastSeed); launches of 16 seeds or more broadcast
	pipeChunk  int   // the trajectories of a chunk of results copied back while the last is scattered (defaultPipeChunk)
	pipeMin    int   // the smallest launch below two chunks whose results come back in halves (defaultPipeMin)
	splitMin   int   // the smallest launch of one copy whose results come back in two parts (defaultSplitMin); negative: none
	tierMin    int   // the smallest source whose compile runs in the background (defaultTierFrom; tier.go)
	saveGroup  int   // the smallest group of saved states' bytes copied back on its own (saveGroupMin)
	// noProbe runs the records of gradients without the stability probe
	// (ode.Job.CheckStability cleared): for the device's measure of its
	// cost (BenchmarkGPUProbeCost). It changes no result but the
	// statuses of the trajectories the probe marks.
	noProbe bool
	// ungroupedCots keeps a gradient kernel's reverse sweep reading its
	// save times' cotangents one save time at a time
	// (kernelgen.Config.UngroupedCots), as before session 47, where by
	// default it reads a group of save times' times and cotangents at
	// once: for the device's comparison (BenchmarkGPUSaveSplit's
	// -ungrouped rows). The same results bit for bit.
	ungroupedCots bool
	// keepThetas has a gradient kernel whose sweep reads its save times'
	// cotangents in groups read each save time's fraction of its step as
	// its forward pass kept it (kernelgen.Config.KeepThetas: K reals a
	// trajectory) instead of dividing again (the default): for the
	// device's comparison (BenchmarkGPUSaveSplit's -thetas rows). The
	// same results bit for bit.
	keepThetas bool
	// divideSaves has the kernels with a dense step's save times divide
	// each save time's quotient theta = (tau - t) / h, one at a time
	// with each interpolant under its own test, as before session 49
	// (kernelgen.Config.DivideSaves), where by default a group's
	// quotients come from the step's reciprocal (gs_quot; in the grouped
	// sweep too) and its
	// interpolants are computed together: for the device's comparison
	// (BenchmarkGPUSaveSplit's -divsaves rows). The same results bit for
	// bit.
	divideSaves bool
	// deferSaves has a forward-only solve, or a gradient with its record
	// whose loss is folded in the forward pass, whose save times read
	// the trial's extension (kernelgen.Config.DeferSaves: no events, the
	// thread layout) keep what each accepted step's save times need in
	// rows on the device, and a second kernel, a thread a step and
	// trajectory, evaluate the save times from them (a gradient's also
	// its steps' coefficient cotangents, its adjoint then in a third
	// kernel; a solve's steps past the rows in the forward pass, as
	// without it), where the inline form has the trajectory's thread
	// evaluate them in turn. The same results bit for bit. By default
	// (deferByDefault) a solve defers from deferSavesFrom save times, a
	// gradient also only where its extension has at least
	// deferGradTerms terms; deferSaves defers wherever the kernel can,
	// inlineSaves nowhere (BenchmarkGPUSaveSplit's -defer and -inline
	// rows).
	deferSaves, inlineSaves bool
	// compareEach compares a launch's inputs run ahead (sameHeld) one
	// input after the other with par.Equal, as before session 47 (an
	// array of up to par.FirstSerial elements on one core: the events
	// suite's P of 65,536 trajectories, 1 MB read on one core, after
	// Y0's pass on all cores), where by default they are compared in one
	// pass on all cores (par.EqualSet); the same verdicts. For the
	// benchmarks that compare the two.
	compareEach bool
	// compareNoHelp leaves the compare of a kept gradient's inputs run
	// ahead (aheadOwn) to its goroutine and the pool alone, as before
	// session 48, where by default the launch's batch, once its kernels
	// are queued, takes the compare's tasks left (aheadCheck.inBatch,
	// par.EqualSet.Help); the same verdicts. For the benchmarks that
	// compare the two.
	compareNoHelp bool
	// checkLaneAtomics compiles the gradients' check kernel (grads.cuh)
	// with GS_G_LANE_ATOMICS: a warp whose loss terms have several first
	// limbs adds its chunks lane by lane with shared-memory atomics, as
	// before session 47 (pk's crossing times in random order, on both
	// sides of 2: most warps), where by default it sums them by shuffles,
	// a round for each first limb; the same words and limbs. For the
	// benchmarks that compare the two.
	checkLaneAtomics bool
	// checkMemset zeroes the gradients' check's words before every kept
	// launch's kernel (a memset in its batch), as before session 48,
	// where by default the check adds into accumulators of its own that
	// its last block moves to the words and zeroes (grads.cuh,
	// gradsAccBytes), so that only new memory, or memory after a batch
	// that failed, is zeroed; the same words and limbs. For the tests
	// and benchmarks that compare the two.
	checkMemset bool
	// uploadShared uploads a kept gradient's shared block (tolerances,
	// MaxSteps, the shared parameters) and save times on every launch,
	// as before session 49, where by default a launch whose staged bytes
	// of them are those its arena holds from the launch before
	// (holdStaged) leaves them there: no copy before the kernel, a driver
	// call and a copy the kernel waits for fewer. The same results. For
	// the tests and benchmarks that compare the two.
	uploadShared bool
	// endsInScatter writes a launch's end times (Job.EndTimes: the
	// Solution's T, the Mesh's T1) in its scatter, after the results'
	// copy, as before session 47, instead of in its batch while the
	// device runs the kernel (endsInBatch), for the tests and benchmarks
	// that compare the two.
	endsInScatter bool
	// hostWorkers is the most goroutines of a launch's staging and
	// result loops (fillBlocks' and scatter's blocks; zero: GOMAXPROCS,
	// the default), and headsWorkers those of the first part's blocks of
	// results that come back in two parts (splitAt; zero: GOMAXPROCS−1,
	// the default, leaving a processor to the copy of the second part),
	// for the benchmarks that ask on a many-core host where a call's host
	// work pays for the pool's wake-ups (BenchmarkGPUCallWorkers).
	hostWorkers, headsWorkers int
	// shortStage runs a launch's staging blocks (fillBlocks) and
	// shortScatter its result blocks (scatter's, the first part's of a
	// split download too) with par.RunShort, which returns once the
	// blocks are done, where par.Run also waits for every pool goroutine
	// it woke to start: on a many-core host whose threads have parked
	// (a call's staging comes after the host's idle wait for the call
	// before, its scatter after the kernel's), they wake one after the
	// other, and a staging of tens of µs of work a core waited for the
	// last. The same blocks and results; for the device's comparison
	// (BenchmarkGPUCallBound's "-short" rows).
	shortStage, shortScatter bool
	// stageParts stages P beside the upload of the inputs before it, in
	// a launch whose inputs all go up at once (none held by the arena:
	// a changed-input call, NoInputReuse) and whose results come back in
	// one copy (stagesParts): the fill stages the others, the launch's
	// batch copies them up as another goroutine stages P's columns, then
	// P and what follows it. Two copies up where there was one; the
	// same results. For the device's comparison (BenchmarkGPUCallBound's
	// "-parts" rows).
	stageParts bool
	// generic keeps the staging and result loops' general forms (each
	// trajectory's row read through the launch's index), for the tests that
	// compare them with the forms for consecutive trajectories.
	generic bool
	// separateSteps keeps the step programs of large kernels apart
	// (kernelgen.Config.SeparateSteps), for the tests that compare the two
	// forms.
	separateSteps bool
	// wideFill, if positive, is the smallest state the wide layout runs
	// by default in a job too small to fill the device, in place of
	// kernelgen.WideFillMinDim and WideFillMinDimFactor (the tests of
	// useWide's rule at a threshold of their own, apart from the
	// measured constants).
	wideFill int
	// wideLoops keeps the wide layout's loops over the lane-private
	// arrays' rows as loops (kernelgen.Config.WideRows false: the arrays
	// in local memory) where the default unrolls them (registers), for
	// the device's comparison of the two forms (BenchmarkGPUWidePrivate);
	// no effect with NoWidePrivate.
	wideLoops bool
	// wideRound raises a wide kernel's launch bounds to as many blocks as
	// one round of the job's warps needs, where shared memory lets them
	// run (wideRoundBlocks), for BenchmarkGPUWideRegs's "s64-round": HIRES
	// at n = 4096 ran 37.2 ms with 16 blocks' bounds against 43.1 on a
	// warp per trajectory on an H100 (sessions 45–46); not a default:
	// fewer lanes a trajectory (defaultWideLanes) ran it in 27.6, and
	// with them these bounds changed nothing (BenchmarkGPUWideLanes).
	wideRound bool
	// threadRound gives a kernel of the thread layout launch bounds of as
	// many blocks a multiprocessor as one round of the job's blocks needs
	// (threadRoundBlocks: the events suite's 65,536 trajectories on an
	// H100, 512 blocks of 128 threads, 4 a multiprocessor, so at most 128
	// registers a thread), where without them a kernel of more registers
	// runs its last blocks in a second round; the same results bit for
	// bit. Not a default until the device has compared the two
	// (BenchmarkGradEventsCall's "-round" modes, issue 25).
	threadRound bool
	// wideLanes, a power of two from 1 to 16, runs a wide kernel's
	// trajectories on that many lanes each, 32 / wideLanes a warp
	// (kernelgen.Config.WideLanes), where the warp's shared memory (its
	// groups' parts together) fits the device's limit: a small state's
	// loops (HIRES, d = 8: every loop one pass on 8 lanes) and its
	// replicated code then take a fraction of a warp's instructions per
	// trajectory. 0: defaultWideLanes; negative: a warp per trajectory.
	// Results are the same bit for bit (the lanes' partial sums kept by
	// lane of a warp, kernelgen's gs_wide_sums; TestHostWideLanesSame).
	wideLanes int
	// wideWarps, a power of two from 2 to kernelgen.WideMaxTrajWarps,
	// runs a wide kernel's trajectories on that many warps each, a block
	// a trajectory (kernelgen.Config.WideTrajWarps, issue 26: a large
	// state's warps latency-bound, few a multiprocessor by shared
	// memory), where the kernel allows it (an explicit method, not the
	// blocked element split) and a trajectory's shared memory and its
	// exchange slots fit the device's limit (wideWarpsFor); then
	// wideLanes and wideRound do not apply (the launch bounds are
	// wideTrajMinBlocks', or WideMinBlocks'). 0: defaultWideWarps (a warp or fewer
	// lanes until the device measures more); 1 or negative: a warp or
	// fewer lanes. Results agree with a warp per trajectory to rounding
	// (the lanes' partial sums added in another order; the same steps:
	// TestHostWideWarps), for the device's A/B (BenchmarkGPUWideLanes'
	// "warps=2", "warps=4" rows).
	wideWarps int
	// denseLU keeps the wide layout's LU factors and solves dense
	// (kernelgen.Config.WideDenseLU), the form before session 47, where
	// by default a factor whose matrix has structural zeros runs only
	// its factors' pattern while no row interchange is needed; for the
	// device's comparison (BenchmarkGPUWideLanes's -dense rows). The same
	// values, at most the signs of zeros differ (TestHostWideSparseLU).
	denseLU bool
	// widePivots is a predicted pivot sequence of the wide layout's
	// sparse LU factors (kernelgen.Config.WidePivots), followed besides
	// no interchange,
	// so that a factor that partial pivoting interchanges as predicted
	// runs sparse to its end, its solves too (Pollution: "5>6 6>7", the
	// interchanges of 90% of its factors on the CPU engine; without it
	// the dense steps take over from step 5 and its solves are dense).
	// The same values (TestHostWidePivots); for the device's comparison
	// (BenchmarkGPUWideLanes's "pivots" rows).
	widePivots kernelgen.PivotSeq

	// wideTables reads a wide kernel's gathers of one array's rotated
	// entries (Lorenz-96's neighbours y[(c ± k) mod d]) through index
	// tables in global memory, as before session 47, where the default
	// computes their indices in the loop (kernelgen.Config.WideTables;
	// the same results bit for bit, TestHostWideTablesSame), for the
	// device's A/B (BenchmarkGPUWideLanes' "tables").
	wideTables bool
	// wideRolled keeps the inner loops of a wide kernel's window loops
	// (Lorenz-96's reverse step: a lane recomputes three components
	// before its own) rolled, as before session 47, where the default
	// unrolls them (kernelgen.Config.WideRolled; the same results bit for
	// bit, TestHostWideTablesSame), for the device's A/B
	// (BenchmarkGPUWideLanes' "rolled").
	wideRolled bool
	// wideBlocked runs an explicit method's wide kernel's loops in the
	// blocked element split where they can (kernelgen.Config.WideBlocked,
	// issue 26: a block of consecutive components a lane, Lorenz-96's
	// stage inputs in registers, their neighbours by shuffles; the same
	// results bit for bit, TestHostWideBlockedSame), for the device's
	// A/B (BenchmarkGPUWideLanes' "blocked").
	wideBlocked bool
	// wideRecY has a gradient's wide reverse steps read their input y
	// from the record's row in global memory instead of a copy in the
	// warp's shared memory (kernelgen.Config.WideRecordY, explicit
	// methods: Lorenz-96 d = 256 20,464 → 18,712 B a warp, 10 → 12 warps
	// a multiprocessor on an H100; the same results bit for bit,
	// TestHostWideRecordY), for the device's A/B (BenchmarkGPUWideLanes'
	// "recy").
	wideRecY bool
	// wideOutPlace places the arrays that a wide kernel's functions
	// return whole at their outputs, not in their scratch
	// (kernelgen.Config.WideOutInPlace: Lorenz-96 d = 256's forward loop
	// 2,339 → 1,827 reals a warp; the same results bit for bit,
	// TestHostWideRecordY), for the device's A/B (BenchmarkGPUWideLanes'
	// "outplace", "recy-outplace").
	wideOutPlace bool
	// wideCyclicWindows keeps, with wideBlocked, the window loops cyclic
	// (kernelgen.Config.WideWindowsCyclic: session 48's blocked form), for
	// the device's A/B of the blocked window loops (session 49).
	wideCyclicWindows bool
	// unrolled keeps every state component's values their own statements
	// (kernelgen.Config.Unrolled), for the tests that compare the forms.
	unrolled bool
	// oldSaves keeps the forward pass's saved states in the form before
	// session 46 (kernelgen.Config.OldSaves: the step of every save time
	// written and allocated in every kernel with save times, not only a
	// gradient's; a dense step's stores in a loop of bounds m), for the
	// device's comparison (BenchmarkGPUSaveSplit's solveto-kept-old).
	oldSaves bool
}

// envTuning returns the Tuning of the environment, read once per process.
var envTuning = sync.OnceValue(func() Tuning { return Tuning{Layout: Layout(os.Getenv(layoutEnv))} })

// check returns an error if t is not valid.
func (t *Tuning) check() error {
	if !t.Layout.valid() {
		return fmt.Errorf("cuda: layout %q (%s): want %q, %q, %q, %q, %q or none", t.Layout, layoutEnv, LayoutThread, LayoutLanes, LayoutLanesGlobal, LayoutTile, LayoutWide)
	}
	return nil
}

// device is what chooseLayout needs of a backend: its multiprocessors (0:
// a host backend, which has none) and the shared memory a block may use.
type device struct{ sms, sharedLimit int }

// layoutJob is what chooseLayout needs of a job beyond its kernel
// configuration: its trajectories and whether its loss holds vectors.
type layoutJob struct {
	n           int
	lossVectors func() bool // called only where it matters
	// widePer returns the shared memory a warp of the plan's wide
	// layout takes, in a gradient's kernel (grad) or another, with save
	// times (saves) or not, with the stability probe (probe:
	// kernelgen.Config.Probe) or not (kernelgen.WideSharedPerWarp, which
	// generates the wide functions: the kernel set keeps it); nil:
	// computed here.
	widePer func(grad, saves, probe bool) (int, error)
}

// chooseLayout returns the kernel configuration of job j (base, from
// kernelgen.ConfigOf) of plan pl, whose step programs are sp (nil if
// they failed to build: then one thread per trajectory, whose build
// reports the error), in precision prec, with tile sums (MultiEngine) or
// not, on device dev, tuned by tun. It is the one place where the
// layout and its launch parameters are decided:
//
//   - Lanes mode (a warp per trajectory) where the plan's field is mostly
//     vectors (StepPrograms.Lanes: at least 512 values, three quarters in
//     vectors), unless a small network (at most LanesSmallNet shared
//     weights) has enough trajectories to fill the device with threads
//     (LanesThreadFill per multiprocessor; ThreadsFill). With tile sums
//     the layout never depends on the job's size, as the layouts sum a
//     tile in different orders.
//   - In lanes mode, the shared block and the accumulators in shared
//     memory where one warp's fit in the device's limit (LanesFit), else
//     in global memory (LanesGlobal) with one accumulator per block in
//     shared memory where it fits (LanesBlockAccFits); the blocks per
//     multiprocessor the kernel's registers leave room for.
//   - Tile mode (a warp per tile of TileWidth trajectories) where the job
//     allows it (TileModeAllowed) and gives every multiprocessor enough
//     tiles (TileModeFills); its shared memory where it fits (TileMemory).
//   - Unless tun.NoWide, the wide layout (a warp per trajectory, the state in
//     shared memory) for a kernel the layout runs (kernelgen.WideAllowed:
//     a solve, record, loss or gradient with the record, without events,
//     its save times interpolated) of a plan whose field is not mostly
//     vectors, from kernelgen.WideMinDim components (an explicit method)
//     or kernelgen.WideMinDimFactor (a Rosenbrock method, its factor of W
//     in the warp's shared memory; unless Tuning.NoWideStiff), where a warp's shared memory fits
//     the device's limit; else the thread layout. In a job too small to
//     fill the device with threads (kernelgen.ThreadsFillDevice false, the
//     device's multiprocessors known, no tile sums) from
//     kernelgen.WideFillMinDim or WideFillMinDimFactor components instead,
//     where those are set (wideMinDim).
//
// tun.Layout overrides the first and last choices (LayoutWide: the wide
// layout at any d where the kernel allows it) and may force the global
// layout.
func chooseLayout(base kernelgen.Config, pl *ode.Plan, sp *kernelgen.StepPrograms, j layoutJob, prec Precision, tileSums bool, dev device, tun Tuning) kernelgen.Config {
	v := base
	v.TileSums = tileSums && v.Grad
	v.SeparateSteps = tun.separateSteps
	v.Unrolled = tun.unrolled
	v.SplitFrom, v.SplitUnits = tun.splitFrom(), tun.SplitUnits
	v.StoreSaveCots = tun.StoreSaveCots && v.Grad
	v.UngroupedCots = tun.ungroupedCots && v.Grad
	v.KeepThetas = tun.keepThetas && v.Grad
	v.OldSaves = tun.oldSaves && v.Saves > 0
	v.DivideSaves = tun.divideSaves && v.Saves > 0
	v.DeferSaves = v.Saves > 0 && (tun.deferSaves || !tun.inlineSaves && deferByDefault(v, pl))
	forced := tun.Layout == LayoutLanes || tun.Layout == LayoutLanesGlobal || tun.Layout == LayoutTile
	switch {
	case sp == nil || tun.Layout == LayoutThread || tun.Layout == LayoutWide || v.Events:
		// Events run in the thread layout only (kernelgen's events.cuh).
		v.Lanes = false
	case forced:
		v.Lanes = true
	default:
		v.Lanes = sp.Lanes && (tileSums || !kernelgen.ThreadsFill(pl, j.n, dev.sms))
	}
	if !v.Lanes {
		var per int
		v.Wide, per = useWide(v, pl, sp, j, prec, tileSums, dev, tun)
		v.RowMajor = v.Wide // its warps read and write whole rows
		v.WideShared = v.Wide && tun.NoWidePrivate
		v.WideRows = v.Wide && !tun.NoWidePrivate && !tun.wideLoops
		v.WideTables = v.Wide && tun.wideTables
		v.WideRolled = v.Wide && tun.wideRolled
		v.WideBlocked = v.Wide && tun.wideBlocked && !kernelgen.WideFactors(pl) // explicit methods only (tested)
		v.WideRecordY = v.Wide && v.Grad && tun.recY(pl)
		v.WideOutInPlace = v.Wide && tun.outPlace(pl)
		v.WideWindowsCyclic = v.WideBlocked && tun.wideCyclicWindows
		if v.Wide && !tun.NoWidePrivate {
			v.WideScalars = tun.WideScalars
		}
		if w := wideWarpsFor(tun.warpsFor(pl), v, pl, per, dev.sharedLimit); w > 1 {
			// A block a trajectory: its part and its exchange slots.
			per += kernelgen.WideExchange(w) * prec.Size()
			v.WideTrajWarps = int8(w)
			v.WideMinBlocks = wideTrajMinBlocks(w, per, dev.sharedLimit, tun.WideMinBlocks)
			v.WideMinSplit = tun.WideMinSplit
			v.WideDenseLU = tun.denseLU
			v.WidePivots = tun.widePivots
		} else if v.Wide {
			warps := j.n // the launch's warps
			if l := wideLanesFor(tun.lanesFor(pl), per, dev.sharedLimit); l < kernelgen.LaneWidth {
				g := kernelgen.LaneWidth / l
				v.WideLanes, per, warps = l, g*per, (j.n+g-1)/g
			}
			v.WideMinBlocks = wideMinBlocks(per, dev.sharedLimit, tun.WideMinBlocks)
			if tun.wideRound && tun.WideMinBlocks == 0 {
				v.WideMinBlocks = wideRoundBlocks(v.WideMinBlocks, per, warps, dev)
			}
			v.WideMinSplit = tun.WideMinSplit
			v.WideDenseLU = tun.denseLU
			v.WidePivots = tun.widePivots
		}
		if !v.Wide && tun.threadRound {
			v.ThreadMinBlocks = int8(threadRoundBlocks(j.n, dev.sms))
		}
		return v
	}
	lim := dev.sharedLimit
	v.LanesGlobal = tun.Layout == LayoutLanesGlobal || !kernelgen.LanesFit(pl, v.Grad, prec, lim)
	if v.LanesGlobal {
		v.LanesMinBlocks = kernelgen.LanesGlobalBlocksPerSM
		// A tile's sum is one warp's: no accumulator shared by a block's
		// warps.
		v.LanesBlockAcc = v.Grad && !v.TileSums && !tun.NoBlockAcc && kernelgen.LanesBlockAccFits(pl.Shared, prec, lim)
	} else {
		v.LanesMinBlocks = kernelgen.LanesMinBlocks(pl.Dim, pl.Shared, v.Grad, prec, lim)
	}
	if useTileMode(v, pl, j, prec, tileSums, dev.sms, tun.Layout) {
		v = v.Tiled().TileMemory(dev.sms > 0, pl.Dim, pl.Shared, lim, tun.TileAccGlobal, tun.TileShGlobal, tun.TileStatic)
	}
	return v
}

// useWide reports whether kernel v (of the thread layout) of plan pl
// runs in the wide layout (chooseLayout): forced (LayoutWide) at any d,
// by default from wideMinDim's d; in both cases where the layout runs the
// kernel (kernelgen.WideAllowed), its programs emit and a warp's shared
// memory fits the device's limit. It returns that shared memory of a
// warp in bytes too (0 where the layout is not used).
func useWide(v kernelgen.Config, pl *ode.Plan, sp *kernelgen.StepPrograms, j layoutJob, prec Precision, tileSums bool, dev device, tun Tuning) (bool, int) {
	if sp == nil || !kernelgen.WideAllowed(v, pl, prec) {
		return false, 0
	}
	switch tun.Layout {
	case LayoutWide:
	case LayoutAuto:
		if from := wideMinDim(pl, j.n, tileSums, dev.sms, tun); from <= 0 || pl.Dim < from {
			return false, 0
		}
	default:
		return false, 0
	}
	widePer := j.widePer
	probe := v.Probe && pl.Probe != nil // the record's stability probe: its function and arrays
	switch {
	case tun.WideMinSplit != 0 || tun.recY(pl) || tun.outPlace(pl) || probe && (tun.NoWidePrivate || tun.WideScalars != 0 || widePer == nil):
		widePer = func(grad, saves, probe bool) (int, error) {
			w := kernelgen.Config{Grad: grad, Saves: kernelgen.B2i(saves), WideShared: tun.NoWidePrivate, WideMinSplit: tun.WideMinSplit, WideRecordY: tun.recY(pl), WideOutInPlace: tun.outPlace(pl), Probe: probe}
			if !tun.NoWidePrivate {
				w.WideScalars = tun.WideScalars
			}
			return sp.WideSharedPerWarpFor(w)
		}
	case tun.NoWidePrivate:
		widePer = func(grad, saves, _ bool) (int, error) { return sp.WideSharedPerWarpOf(grad, saves, true) }
	case tun.WideScalars != 0:
		widePer = func(grad, saves, _ bool) (int, error) {
			return sp.WideSharedPerWarpScalars(grad, saves, false, tun.WideScalars)
		}
	case widePer == nil:
		widePer = func(grad, saves, _ bool) (int, error) { return kernelgen.WideSharedPerWarp(pl, grad, saves) }
	}
	per, err := widePer(v.Grad, v.Saves > 0, probe)
	if err != nil || dev.sharedLimit > 0 && per > dev.sharedLimit {
		return false, 0
	}
	return true, per
}

// recY reports whether t has a wide gradient kernel of plan pl read its
// reverse steps' y from the record's row (Tuning.wideRecY): explicit
// methods only (tested), not with every array shared or the blocked
// element split (kernelgen.Config.WideRecordY).
func (t Tuning) recY(pl *ode.Plan) bool {
	return t.wideRecY && !t.NoWidePrivate && !t.wideBlocked && !kernelgen.WideFactors(pl)
}

// outPlace reports whether t has a wide kernel of plan pl place the
// arrays its functions return whole at their outputs
// (Tuning.wideOutPlace): explicit methods only (tested), not with every
// array shared or the blocked element split
// (kernelgen.Config.WideOutInPlace).
func (t Tuning) outPlace(pl *ode.Plan) bool {
	return t.wideOutPlace && !t.NoWidePrivate && !t.wideBlocked && !kernelgen.WideFactors(pl)
}

// wideMaxMinBlocks is the most blocks per multiprocessor a wide-layout
// kernel's launch bounds ask for by default (wideMinBlocks): 7 blocks of
// kernelgen.WideWarps warps cap a thread's registers at 128
// (kernelgen.BoundsRegs). Measured on an H100 (BenchmarkGPUWideRegs, session 42,
// kernel ms without bounds / 6 / 7 blocks): HIRES 67.8 / 53.1 / 43.1,
// Lorenz-96 d = 64 0.88 / 1.06 / 0.84, d = 256 5.23 / 5.03 / 5.02;
// Pollution (session 41) 23.58 / 20.52 / –.
const wideMaxMinBlocks = 7

// wideMinBlocks returns the launch bounds' blocks per multiprocessor
// (kernelgen.Config.WideMinBlocks, blocks of kernelgen.WideWarps warps;
// 0: no bounds) of a wide-layout kernel whose warps take per bytes of
// shared memory each, on a device whose blocks may take limit bytes (0:
// unknown, a host backend), tuned by tun (Tuning.WideMinBlocks): tun if
// positive, none if negative; by default the warps the device's shared
// memory lets run at once (kernelgen.WideOccupancy, the launch's own
// rule) in blocks of WideWarps, at most wideMaxMinBlocks: bounds past
// that count would cap the registers of warps that cannot run, spilling
// for nothing (the Brusselator's 64-component Rodas5P kernel: 254
// registers, 2-3% slower with 6 or 7 blocks' bounds).
func wideMinBlocks(per, limit, tun int) int {
	switch {
	case tun > 0:
		return tun
	case tun < 0:
		return 0
	}
	_, on := kernelgen.WideOccupancy(per, limit)
	if blocks := on / kernelgen.WideWarps; blocks > 1 {
		return min(blocks, wideMaxMinBlocks)
	}
	return 0
}

// defaultWideLanes returns the lanes a trajectory of a wide kernel of
// state dimension d runs on by default, factors true for a Rosenbrock
// method's kernel (kernelgen.WideFactors): the fewest, at least 8, that
// hold two components each (d ≤ 2·lanes); for an explicit method 16 also
// from d = 33 to wideLanesMaxDim (Lorenz-96, d = 64); a warp
// (kernelgen.LaneWidth) beyond. The results are those of a warp per
// trajectory bit for bit at any d (the lanes' partial sums kept by lane
// of a warp: kernelgen's gs_wide_sums). On an H100 at n = 4,096
// (BenchmarkGPUWideLanes, session 46) HIRES (d = 8) on 8 lanes ran its
// gradient kernel in 27.6 ms against 43.6 on a warp each, Pollution (d =
// 20) on 16 in 34.8 against 39.0, where Pollution on 8 lanes took 44.1
// and HIRES on 4 35.3; Lorenz-96 (d = 64, Tsit5) on 16 in 0.759 against
// 0.833 (its sums then in another order; session 47 made them a warp's).
func defaultWideLanes(d int, factors bool) int {
	for l := 8; l < kernelgen.LaneWidth; l *= 2 {
		if d <= 2*l {
			return l
		}
	}
	if !factors && d <= wideLanesMaxDim {
		return kernelgen.LaneWidth / 2
	}
	return kernelgen.LaneWidth
}

// wideLanesMaxDim is the largest state an explicit method's wide kernel
// runs on fewer lanes than a warp by default (defaultWideLanes): 16
// lanes, four components each, measured at d = 64 only (Lorenz-96's
// gradient kernel 0.759 against 0.833 ms on a warp, H100, session 46).
// Session 47 put it back to 32 where TestHostWideSplitUnits saw other
// dL/dShared bits on 16 lanes than on a warp: the simulated warp's groups
// of lanes added their trajectories' shared sums in the order they
// finished, not the trajectories' (session 48: wide.cuh's gs_sim_turn,
// TestHostWideLanesShared); on the device the warps' atomics come in no
// fixed order on a warp per trajectory too.
const wideLanesMaxDim = 64

// lanesFor returns the lanes a wide kernel of plan pl's trajectories ask
// for under tun (Tuning.wideLanes; 0: defaultWideLanes, negative: a
// warp).
func (tun Tuning) lanesFor(pl *ode.Plan) int {
	switch {
	case tun.wideLanes < 0:
		return kernelgen.LaneWidth
	case tun.wideLanes == 0:
		return defaultWideLanes(pl.Dim, kernelgen.WideFactors(pl))
	}
	return tun.wideLanes
}

// wideLanesFor returns the lanes a trajectory of a wide kernel runs on
// (kernelgen.Config.WideLanesOf) under Tuning.wideLanes lanes, whose
// trajectories take per bytes of shared memory each, on a device whose
// blocks may take limit bytes (0: unknown, a host backend): lanes where
// they are a power of two below 32 and the warp's 32 / lanes parts fit
// the limit without fewer trajectories running on a multiprocessor at
// once than a warp each (kernelgen.WideOccupancy: the Brusselator's 70
// KB trajectories run 3 a multiprocessor a warp each, 2 two a warp);
// else 32.
func wideLanesFor(lanes, per, limit int) int {
	l := (kernelgen.Config{WideLanes: lanes}).WideLanesOf()
	if l == kernelgen.LaneWidth || limit <= 0 {
		return l
	}
	g := kernelgen.LaneWidth / l
	if g*per > limit {
		return kernelgen.LaneWidth
	}
	_, one := kernelgen.WideOccupancy(per, limit)
	if _, on := kernelgen.WideOccupancy(g*per, limit); on*g < one {
		return kernelgen.LaneWidth
	}
	return l
}

// defaultWideWarps returns the warps a trajectory of a wide kernel of
// state dimension d runs on by default, factors true for a Rosenbrock
// method's kernel (kernelgen.WideFactors): 1 (a warp or fewer lanes,
// defaultWideLanes) at every d until the device measures several warps a
// trajectory (Tuning.wideWarps; BenchmarkGPUWideLanes' "warps=2" and
// "warps=4" rows of Lorenz-96 with d = 64 and 256).
func defaultWideWarps(d int, factors bool) int { return 1 }

// warpsFor returns the warps a wide kernel of plan pl's trajectories ask
// for under tun (Tuning.wideWarps; 0: defaultWideWarps, negative: 1).
func (tun Tuning) warpsFor(pl *ode.Plan) int {
	switch {
	case tun.wideWarps < 0:
		return 1
	case tun.wideWarps == 0:
		return defaultWideWarps(pl.Dim, kernelgen.WideFactors(pl))
	}
	return tun.wideWarps
}

// wideWarpsFor returns the warps a trajectory of wide kernel v (its
// layout chosen but for them) of plan pl runs on under warps asked
// (warpsFor), whose trajectory takes per bytes of shared memory, on a
// device whose blocks may take limit bytes (0: unknown, a host
// backend): warps where they are a power of two from 2 to
// kernelgen.WideMaxTrajWarps, the kernel allows them (kernelgen's
// wideCheck: an explicit method, not the blocked element split) and the
// trajectory with its exchange slots fits the limit; else 1.
func wideWarpsFor(warps int, v kernelgen.Config, pl *ode.Plan, per, limit int) int {
	if !v.Wide || warps <= 1 || warps > kernelgen.WideMaxTrajWarps || warps&(warps-1) != 0 {
		return 1
	}
	if kernelgen.WideFactors(pl) || v.WideBlocked && !v.WideShared {
		return 1
	}
	if limit > 0 && per+8*kernelgen.WideExchange(warps) > limit {
		return 1
	}
	return warps
}

// wideTrajMaxWarps is the most warps a multiprocessor runs at once that
// wideTrajMinBlocks' launch bounds ask for by default: 32 warps cap a
// thread's registers at 64 (kernelgen.BoundsRegs). A proposal, not yet
// measured on a device.
const wideTrajMaxWarps = 32

// wideTrajMinBlocks returns the launch bounds' blocks per multiprocessor
// (kernelgen.Config.WideMinBlocks; 0: no bounds) of a wide kernel whose
// trajectories run on warps warps, a block each, of per bytes of shared
// memory (their exchange slots included), on a device whose blocks may
// take limit bytes (0: unknown), tuned by tun (Tuning.WideMinBlocks): tun
// if positive, none if negative; by default as many blocks as the
// device's shared memory lets run at once (kernelgen.WideTrajOccupancy),
// at most wideTrajMaxWarps warps' worth; none where one block runs.
func wideTrajMinBlocks(warps, per, limit, tun int) int {
	switch {
	case tun > 0:
		return tun
	case tun < 0:
		return 0
	}
	if on := min(kernelgen.WideTrajOccupancy(warps, per, limit), wideTrajMaxWarps/warps); on > 1 {
		return on
	}
	return 0
}

// wideRoundMaxBlocks is the most blocks per multiprocessor
// wideRoundBlocks asks for: 16 blocks of kernelgen.WideWarps warps cap a
// thread's registers at 64, the fewest measured (HIRES, session 45).
const wideRoundMaxBlocks = 16

// wideRoundBlocks returns launch bounds of def blocks (wideMinBlocks'
// count; 0: none) raised to as many blocks as one round of n warps (n
// trajectories, a warp each, or the warps of Tuning.wideLanes' groups)
// needs on device dev (ceil(n / (sms · WideWarps))), at most the blocks its warps' per bytes of shared memory
// let run (kernelgen.WideOccupancy) and wideRoundMaxBlocks; def where the
// device is unknown or bounds are off.
func wideRoundBlocks(def, per, n int, dev device) int {
	if def <= 0 || dev.sms <= 0 || dev.sharedLimit <= 0 {
		return def
	}
	_, on := kernelgen.WideOccupancy(per, dev.sharedLimit)
	w := dev.sms * kernelgen.WideWarps
	need := (n + w - 1) / w
	return max(def, min(need, on/kernelgen.WideWarps, wideRoundMaxBlocks))
}

// threadRoundMaxBlocks is the most blocks per multiprocessor
// threadRoundBlocks asks for: 8 blocks of kernelgen.ThreadBoundsBlock
// threads cap a thread's registers at 64.
const threadRoundMaxBlocks = 8

// threadRoundBlocks returns the launch bounds (blocks per multiprocessor;
// 0: none) that run a job of n trajectories, a thread each in blocks of
// kernelgen.ThreadBoundsBlock, in one round on sms multiprocessors:
// ceil(blocks / sms), none where one block a multiprocessor does (no
// bound needed), the device is unknown, or more than
// threadRoundMaxBlocks would be needed (the job takes rounds anyway).
func threadRoundBlocks(n, sms int) int {
	if sms <= 0 || n <= 0 {
		return 0
	}
	blocks := (n + kernelgen.ThreadBoundsBlock - 1) / kernelgen.ThreadBoundsBlock
	need := (blocks + sms - 1) / sms
	if need < 2 || need > threadRoundMaxBlocks {
		return 0
	}
	return need
}

// wideMinDim returns the smallest state of plan pl that runs in the wide
// layout by default (LayoutAuto) in a job of n trajectories on sms
// multiprocessors (0: unknown), with tile sums or not, tuned by tun; 0:
// none (Tuning.NoWide, or NoWideStiff for a Rosenbrock method).
// kernelgen.WideMinDim (an explicit method) or WideMinDimFactor (a
// Rosenbrock method: kernelgen.WideFactors), or where the job's
// trajectories, one thread each, would not fill the device
// (kernelgen.ThreadsFillDevice false; sms known, no tile sums: the layout
// of cuda-multi's shards does not depend on their size)
// kernelgen.WideFillMinDim or WideFillMinDimFactor (tun.wideFill in the
// tests) if smaller and set.
func wideMinDim(pl *ode.Plan, n int, tileSums bool, sms int, tun Tuning) int {
	factors := kernelgen.WideFactors(pl)
	if tun.NoWide || factors && tun.NoWideStiff {
		return 0
	}
	from, fill := kernelgen.WideMinDim, kernelgen.WideFillMinDim
	if factors {
		from, fill = kernelgen.WideMinDimFactor, kernelgen.WideFillMinDimFactor
	}
	if tun.wideFill > 0 {
		fill = tun.wideFill
	}
	if fill > 0 && !tileSums && sms > 0 && !kernelgen.ThreadsFillDevice(n, sms) {
		from = min(from, fill)
	}
	return from
}

// useTileMode reports whether a job j of plan pl (kernel v, in lanes
// mode) runs in tile mode on sms multiprocessors under layout.
func useTileMode(v kernelgen.Config, pl *ode.Plan, j layoutJob, prec Precision, tileSums bool, sms int, layout Layout) bool {
	switch layout {
	case LayoutLanes, LayoutLanesGlobal, LayoutThread:
		return false
	}
	lossVectors := (v.Loss || v.Grad) && j.lossVectors != nil && j.lossVectors()
	if !kernelgen.TileModeAllowed(v, pl, prec, tileSums, lossVectors) {
		return false
	}
	return layout == LayoutTile || kernelgen.TileModeFills(j.n, sms)
}

// deferSavesFrom and deferGradTerms are the defaults of Tuning's deferred
// saves (deferByDefault). Measured on an H100 (session 52,
// BenchmarkGPUSaveSplit, Kepler, n = 4,096, 20 calls, three rounds,
// medians, ms whole / kernel): with 1,000 save times the deferred solve
// (kept saves) took Tsit5 0.568 / 0.410 against the inline 0.622 / 0.447,
// Vern7 0.529 / 0.376 against 0.625 / 0.448; the deferred gradient
// Vern7 1.798 / 1.298 against 1.951 / 1.424 (its inline kernel spills
// 480 B a thread at 255 registers, the deferred ones none), but Tsit5
// 1.630 / 1.109 against 1.603 / 1.059. With one save time the solves'
// second launch costs about 0.01 ms of kernel time and gains nothing.
// Tsit5's extension has 4 terms, Vern7's 7 (six more stages); counts of
// save times between 1 and 1,000 are not measured: 16 is a guess at
// where a step's save times outweigh the second launch.
const (
	deferSavesFrom = 16
	deferGradTerms = 6
)

// deferByDefault reports whether kernel v of plan pl defers its save
// times by default (Tuning's deferSaves): a kernel with at least
// deferSavesFrom save times, and for a gradient an extension of at least
// deferGradTerms terms. kernelgen decides whether the kernel can
// (Config.DeferSaves).
func deferByDefault(v kernelgen.Config, pl *ode.Plan) bool {
	return v.Saves >= deferSavesFrom && (!v.Grad || pl.DenseTerms >= deferGradTerms)
}
