package kernelgen

import (
	"embed"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"text/template"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// kernelTemplates are the engine's kernel templates, by the name of the
// layout file they end with (Config.layoutFile): kernel.cuh, the root,
// with the forward loops of the kernel kinds (solve.cuh, replay.cuh) and
// the adjoint (adjoint.cuh), and the layout's hooks and entry.
var kernelTemplates = map[string]*template.Template{
	"thread.cuh": parseKernel("thread.cuh"),
	"lanes.cuh":  parseKernel("warp.cuh", "lanes.cuh"),
	"tile.cuh":   parseKernel("warp.cuh", "tile.cuh"),
	"wide.cuh":   parseKernel("wide.cuh"),
}

//go:embed kernel.cuh solve.cuh replay.cuh adjoint.cuh events.cuh thread.cuh warp.cuh lanes.cuh tile.cuh wide.cuh
var templateFiles embed.FS

// parseKernel returns the kernel templates with the layout's files.
func parseKernel(layout ...string) *template.Template {
	files := append([]string{"kernel.cuh", "solve.cuh", "replay.cuh", "adjoint.cuh", "events.cuh"}, layout...)
	return template.Must(template.New("kernel.cuh").ParseFS(templateFiles, files...))
}

// layoutFile returns the template file of the kernel's layout.
func (v Config) layoutFile() string {
	switch {
	case v.Wide:
		return "wide.cuh"
	case v.TileMode:
		return "tile.cuh"
	case v.Lanes:
		return "lanes.cuh"
	}
	return "thread.cuh"
}

// inlineCallees is the size (values) up to which the engine's kernels
// inline a called program (a small field) instead of calling it.
const inlineCallees = 300

// KernelName is the name of the one kernel of an engine module.
const KernelName = "gs_engine"

// Config is one kernel of a plan: which parts of the driver loop it runs,
// in which layout (package cuda's chooseLayout decides). Its Key is the
// executor's kernel cache key.
type Config struct {
	Adaptive bool // run the controller (else replay the given mesh)
	MeshOut  bool // write the mesh
	Store    bool // keep the states before every step (adjoint)
	Loss     bool // loss terms
	Grad     bool // loss, its VJP and the adjoint sweep
	Saves    int  // save times
	DataDim  int  // loss data per trajectory
	lossKey  string
	// TileSums makes a gradient kernel sum shared gradients per sum tile
	// of scan.TileSize trajectories in a fixed order (GS_TILES; not tile
	// mode's tiles of TileWidth trajectories), for results that do not
	// depend on how an ensemble is split (MultiEngine).
	TileSums bool
	// Lanes runs one warp per trajectory (GS_LANEMODE; lanes.go,
	// lanes.cuh), for fields that are mostly vectors (StepPrograms.Lanes);
	// LanesMinBlocks blocks of it fit in a multiprocessor. LanesGlobal
	// keeps the padded shared block and the warps' accumulators in global
	// memory, for networks whose weights do not fit in shared memory
	// (LanesFit); LanesBlockAcc then gives a gradient kernel's blocks one
	// accumulator each, in shared memory (GS_LANES_BLOCKACC), where it
	// fits.
	Lanes         bool
	LanesGlobal   bool
	LanesBlockAcc bool
	// (WideRecordY, WideOutInPlace and WideWindowsCyclic sit here, in the
	// padding before LanesMinBlocks: TestConfigSize.)
	// WideRecordY (with Wide and Grad, without WideShared and
	// WideBlocked) has a gradient's reverse steps read their input y, the
	// state the step starts from, in place from the record's row in
	// global memory (the lanes' reads of one row coalesce; a rotation's
	// neighbours come from the L1 cache), where by default the driver
	// copies it into the reverse step's inputs in the warp's shared
	// memory: d reals less a trajectory's shared memory where the reverse
	// sweep is the larger part (Lorenz-96 d = 256, Tsit5: 20,464 →
	// 18,712 B a warp, 10 → 12 warps a multiprocessor on an H100). The
	// same values read: the same results bit for bit; off until the
	// device measures it (package cuda's Tuning.wideRecY).
	WideRecordY bool
	// WideOutInPlace (with Wide, without WideShared and WideBlocked)
	// places each array that a wide function returns whole (Tsit5's trial:
	// y⁺ and its last stage's derivative, Init's f0) at its outputs in
	// the warp's shared memory instead of the function's scratch, and
	// drops the copy (kernelgen's outputsInPlace): the forward loop's
	// part of Lorenz-96 d = 256 falls from 2,339 to 1,827 reals. The same
	// values: the same results bit for bit; off until the device
	// measures it (package cuda's Tuning.wideOutPlace).
	WideOutInPlace bool
	// WideWindowsCyclic (with WideBlocked) keeps the window loops in the
	// cyclic split, the blocked form of session 48, for the device's A/B
	// of the blocked window loops (session 49; package cuda's
	// Tuning.wideCyclicWindows).
	WideWindowsCyclic bool
	// WideTrajWarps (with Wide), if a power of two from 2 to
	// WideMaxTrajWarps, runs each trajectory on that many warps, a block
	// a trajectory (issue 26: a large state's warp is latency-bound, its
	// multiprocessor holding few trajectories by shared memory): the
	// wide functions' loops over the components strided by 32 ×
	// WideTrajWarps lanes, every __syncwarp() a barrier of the block, the
	// carried sums' butterflies finished across the warps through
	// exchange slots at the start of the block's shared memory
	// (GS_WIDE_WARPS, wide.go's wideWarpsHelper), after which every
	// thread holds the same bits; the controller's scalars replicated in
	// every thread. Explicit methods only, not with WideBlocked
	// (wideCheck). The sums add the lanes' partial sums in another order
	// than a warp's: the results agree with a warp per trajectory to
	// rounding. 0 or 1: a warp per trajectory or less (WideLanes), the
	// source as before; WideLanes is then ignored (package cuda's
	// Tuning.wideWarps). An int8 in the padding before LanesMinBlocks
	// (TestConfigSize).
	WideTrajWarps  int8
	LanesMinBlocks int
	// LanesShuffle takes vectors' elements by shuffles rather than through
	// the warps' staging rows (Source.stage).
	LanesShuffle bool
	// TileMode (with Lanes, LanesGlobal) runs a warp per tile of eight
	// trajectories in lockstep, dense layers on the tensor cores
	// (GS_TILEMODE; tiles.go, tile.cuh; chosen by package cuda's
	// chooseLayout).
	TileMode bool
	// TileSharedAcc (tile mode, a gradient) keeps each warp's accumulator
	// in the block's shared memory instead of global memory, where
	// tileBlocksPerSM blocks' fit (TileSharedFits).
	TileSharedAcc bool
	// TileSharedSh (tile mode) copies the padded shared and controller
	// blocks into the block's shared memory, before the accumulators,
	// where they fit too (TileSharedFits); a gradient kernel only with
	// TileSharedAcc.
	TileSharedSh bool
	// TileDynamic (tile mode on a device) has warps take their tiles in
	// turn from a counter after the work array's accumulators instead of
	// every gridth one.
	TileDynamic bool
	// SeparateSteps keeps a kernel with save times on the continuous
	// extension in the form it had below shareDim: the replay's (or
	// trial's) step and the dense step apart, forward and reverse, where
	// they would be shared (kernelPlan.ShareFwd, ShareRev). For the tests
	// that compare the two forms.
	SeparateSteps bool
	// Probe (an adaptive record with ode.Job.CheckStability, of a plan
	// with a probe) runs ode.Plan.Probe on the trials ode.Plan.ProbeDue
	// names, or on every trial with ProbeAll (ode.Job.Continues: Method
	// Auto's pass), and marks the trajectories where it fires stiff; with
	// StopStiff it rejects the step where it fires, so the trajectory
	// stops before it, as the CPU engine does; in the wide layout too
	// (its own wide function, wideLayout.Probe). (Declared here, in the
	// padding before SplitFrom: TestConfigSize.)
	Probe, ProbeAll bool
	// SplitFrom, if positive, compiles the large step programs of a
	// kernel of the thread layout whose functions of programs total at
	// least SplitFrom bytes (Source.FuncBytes: the generated code, without
	// the prelude and the templates) as functions of their own, called
	// rather than inlined (GS_STEP, split.go): NVRTC's time on the largest
	// kernels falls several-fold; on the host the results are the same
	// bit for bit (on an H100 a split Pollution kernel failed: package
	// cuda leaves it off). Zero or negative never splits. Package cuda sets it from
	// Tuning.SplitFrom. It is not part of Key, which the sources hold: an
	// executor's kernels all have its Tuning's, and a split source
	// differs from the unsplit one in its text.
	SplitFrom int
	// SplitUnits (with SplitFrom) compiles a split kernel in parts:
	// KernelUnits returns its GS_STEP functions each in a translation
	// unit of its own, which package cuda compiles concurrently and links
	// (the driver's linker; Tuning.SplitUnits). The arithmetic and the
	// results are those of the one-unit kernel (KernelSource). With it a
	// kernel of the wide layout splits too (its GS_FUNC functions from
	// splitFuncMin bytes), which SplitFrom alone never splits. Not part
	// of Key, as SplitFrom.
	SplitUnits bool
	// StopStiff (an adaptive record of a gradient, Job.StopOnStiff) ends a
	// trajectory with status Stiff at the step where the stiffness test
	// fires, as the CPU engine does, instead of running it to its end for
	// a gradient that will be refused.
	StopStiff bool
	// Events (a plan with events, Plan.Events) checks the events'
	// conditions after every accepted step of an adaptive kernel and
	// replaces a step where one crosses by the event step, as the CPU
	// engine does (events.cuh), writing the mesh's event marks (evout);
	// a kernel on a given mesh applies the jumps after the steps its
	// marks name (evin, Mesh.Events). Save times inside an event step
	// read its own extension; past a terminal event they are NaN. A
	// gradient then runs the reverse sweep through the event steps and
	// the save times. Thread layout only (chooseLayout), float64.
	Events bool
	// Wide runs one warp per trajectory with the state, the stages and
	// the driver's other d-long arrays in shared memory and the step
	// programs' loops over the components split over the lanes (wide.go,
	// wide.cuh): forward solves of explicit methods on large states
	// (WideAllowed). Off unless package cuda's Tuning asks for it.
	Wide bool
	// RowMajor (with Wide only) keeps the per-trajectory arrays a warp
	// reads and writes whole, y0, p, y, gy0 and gp, row-major on the
	// device: component c of trajectory i at [i*w + c] (w = D or NP), the
	// user's own layout, where the others are component-major ([c*n +
	// i]): a warp's lanes then read and write consecutive addresses, and
	// the host copies whole rows (package cuda sets it with Wide; its
	// training kernels read component-major arrays and clear it). The
	// save times and their cotangents (ys, tb), the data and the record
	// stay as they are.
	RowMajor bool
	// WideShared (with Wide only) keeps every d-long array of the wide
	// functions in the warp's shared memory, as the wide layout did
	// before its lane-private arrays (wideprivate.go): by default an
	// array only ever accessed at the lane's own component (a stage's
	// derivative, its adjoint) is the lane's own, in local memory or
	// registers, and a warp's shared memory holds the others only. The
	// results are the same bit for bit (package cuda's
	// Tuning.NoWidePrivate: the switch of the device's A/B).
	WideShared bool
	// WideRows (with Wide, without WideShared) unrolls the wide
	// functions' loops that touch lane-private arrays over the lane's
	// rows (ceil(n/32) iterations of static index), so that the compiler
	// may keep those arrays in registers rather than local memory; an
	// array that a window loop touches stays in local memory. The same
	// results bit for bit; larger kernels (package cuda's default; its test
	// knob Tuning.wideLoops keeps the loops, for the device's comparison).
	WideRows bool
	// WideTables (with Wide) reads every gather of one array's entries
	// through an index table in global memory, as the wide layout did
	// before session 47; by default a gather whose indices are a rotation
	// of the array, b + (c + k) mod n (Lorenz-96's neighbours), computes
	// its index in the loop instead (GS_WROT: no table, no load to wait
	// for). The same entries read: the same results bit for bit (package
	// cuda's Tuning.wideTables, for the device's A/B).
	WideTables bool
	// WideRolled (with Wide) keeps the inner loop of a window loop (a
	// loop split over the lanes whose lane recomputes the window's earlier
	// repetitions: Lorenz-96's reverse step, ten of them) rolled, as before
	// session 47; by default it is unrolled (at most wideMaxWindow + 1
	// repetitions, in the same order: the same bits), so that the
	// repetitions' loads, which do not wait for the carried values, may
	// issue together (package cuda's Tuning.wideRolled, for the device's
	// A/B).
	WideRolled bool
	// WideBlocked (with Wide, without WideShared) runs the wide
	// functions' loops in the blocked element split where they can
	// (wideblock.go, issue 26): a loop over n components, n a multiple of
	// 32, runs a block of n / lanes consecutive components on each lane,
	// and an array accessed only in such loops, at the loop's component
	// or at a rotation of it (Lorenz-96's stage inputs), is the lane's own
	// (registers), its neighbours' entries across the blocks' ends by
	// shuffles, where by default component c runs on lane c mod 32 and
	// such an array is in shared memory. The same results bit for bit;
	// off until the device measures it (package cuda's Tuning.wideBlocked).
	WideBlocked bool
	// WideDenseLU (with Wide) keeps every LU factor and solve of the
	// wide functions dense (gs_wide_lu_factor and its solves), the form
	// before session 47, where by default a factor of at most
	// WideSparseMaxDim rows whose matrix has structural zeros (the
	// constant 0: a traced Jacobian's) runs only the entries of its
	// factors' pattern while no row interchange is needed (widelu.go:
	// wideSparseLU). The same values (==): at most the signs of zeros
	// differ (package cuda's Tuning.denseLU: the switch of the device's
	// comparison).
	WideDenseLU bool
	// Unrolled keeps every state component's values their own
	// statements in a kernel of the thread layout from rerollDim, where
	// runs of them would be loops (reroll.go), as below it. For the tests
	// that compare the two forms.
	Unrolled bool
	// KeepThetas has a gradient kernel whose sweep reads its save times'
	// cotangents in groups (kernelPlan.CotGroup) read each save time's
	// fraction theta = (tau - t_s) / h of its step as the forward pass
	// computed and kept it (kernelPlan.KeepThetas: a.tb, K values a
	// trajectory) instead of dividing again (a division a save time,
	// the default). The same results bit for bit (package cuda's private
	// Tuning.keepThetas: the switch of the device's comparison,
	// BenchmarkGPUSaveSplit's -thetas rows; on the host backend it was
	// slower, and it holds K·n more reals).
	KeepThetas bool
	// DivideSaves keeps a dense step's save times' quotients theta =
	// (tau - t) / h in the form before session 49: a division each,
	// each save time's interpolant under its own test, and a division in
	// gs_inside, and a division each in the grouped reverse sweep's
	// gs_coef_bar; where by default gs_step_saves and gs_coef_bar compute
	// a group's quotients from the step's reciprocal with two corrections
	// (prelude's gs_rcp and gs_quot: bit for bit the division's, dividing
	// where an input is out of its range), gs_step_saves every slot's
	// interpolant, selecting the state where it is not read, and
	// gs_inside tests tau - t. The same results
	// bit for bit (package cuda's private Tuning.divideSaves: the switch
	// of the device's comparison, BenchmarkGPUSaveSplit's -divsaves rows).
	DivideSaves bool
	// DeferSaves (a forward-only adaptive solve of the thread layout
	// whose save times read the trial's extension: no loss, no record,
	// no events, no lanes, no wide layout; kernelPlan.DeferSaves)
	// moves the interpolation of the save times out of the trajectory's
	// thread: the forward pass writes, for each accepted step s below
	// gs_args.rows that holds a save time, the step's start, size, first
	// save time, state and extension's coefficients to a row of
	// gs_args.store, and a second kernel of the same source
	// (SavesKernelName: a thread a step and trajectory) evaluates them
	// with the same function, gs_step_saves; steps from gs_args.rows on
	// are evaluated in the forward pass as before. In a gradient kernel
	// with its record whose loss is folded in the forward pass
	// (kernelPlan.DeferGrad) the saves kernel also computes each step's
	// coefficient cotangents, and a third kernel (RevKernelName) folds
	// the loss and runs the adjoint. The same results bit for bit
	// (package cuda's private Tuning.deferSaves: the switch of the
	// device's comparison, BenchmarkGPUSaveSplit's -defer rows).
	DeferSaves bool
	// WideScalars (with Wide, without WideShared) is the most replicated
	// float64 values (a wide function's scalars outside its component
	// loops, every lane's alike) kept live in registers at once; the
	// others live in a slot of the warp's scratch from where registers
	// run short (widespill.go): shared memory in place of the spills to
	// local memory, a copy per lane, of functions that keep more live
	// (Pollution's Rodas5P reverse step: 183). Zero means
	// DefaultWideScalars, negative no limit (the source as before). The
	// same results bit for bit (package cuda's Tuning.WideScalars).
	WideScalars int
	// WideMinBlocks (with Wide), if positive, declares the kernel's
	// launch bounds: blocks of WideWarps warps (WideBlockWarps: a
	// trajectory's with WideTrajWarps), at least WideMinBlocks of
	// them per multiprocessor (__launch_bounds__(32·WideWarps,
	// WideMinBlocks)), so that the compiler caps its registers at
	// BoundsRegs(32·WideWarps, WideMinBlocks) per thread (5-6 blocks
	// 168, 7-8 128), spilling past them; a kernel compiled in parts has
	// no bounds, its units that cap (UnitRegs). Zero: no bounds (up to
	// 255). Package cuda's Tuning.WideMinBlocks.
	WideMinBlocks int
	// ThreadMinBlocks (the thread layout: neither Lanes nor Wide), if
	// positive, declares the kernel's launch bounds: blocks of
	// ThreadBoundsBlock threads, at least ThreadMinBlocks of them per
	// multiprocessor (__launch_bounds__(ThreadBoundsBlock,
	// ThreadMinBlocks)), so that the compiler caps its registers at
	// BoundsRegs(ThreadBoundsBlock, ThreadMinBlocks) per thread (4
	// blocks 128), spilling past them: a job whose threads make one
	// round of blocks at that many a multiprocessor runs in one round
	// where more registers would leave a second (the events suite's
	// 65,536 trajectories on an H100's 132 multiprocessors: 512 blocks,
	// 4 a multiprocessor). Zero: no bounds. The same results bit for bit
	// (registers change no arithmetic; package cuda's Tuning.threadRound).
	// An int8 in the padding before the flags that follow: a Config of
	// more than 128 bytes is captured by reference by the closures of
	// package cuda's fill and scatter, which then move it to the heap on
	// every call (TestKeptCallAllocs).
	ThreadMinBlocks int8
	// StoreSaveCots keeps a gradient kernel's save-time cotangents in
	// the form before session 44: the loss VJP stores dL/dys (K·Dim
	// values a trajectory, a.tb) and the reverse sweep reads them, where
	// by default a kernel of the thread layout whose loss is a sum of
	// one save time's terms (savecot.go) computes each save time's in
	// the sweep (kernelPlan.SaveCots). The same results bit for bit
	// (package cuda's Tuning.StoreSaveCots: the switch of the device's
	// comparison).
	StoreSaveCots bool
	// OldSaves keeps the forward pass's saved states in the form before
	// session 46: every kernel with save times writes the step each save
	// time lies on (gs_args.tapstep, [K][n]), where by default only a
	// gradient's kernel, whose reverse sweep reads it, does; and a
	// dense step's save times are stored in a loop of as many passes as
	// lie on the step, where by default the loop has GS_SAVE_GROUP passes
	// each under its own test (its bounds constant: the group's states in
	// registers). The same saved states bit for bit (package cuda's
	// Tuning.oldSaves: the switch of the device's comparison,
	// BenchmarkGPUSaveSplit's -old rows).
	OldSaves bool
	// UngroupedCots keeps a gradient kernel's reverse sweep reading its
	// save times' cotangents one save time at a time, in the form before
	// session 47, where by default a kernel that computes them in the
	// sweep (SaveCots) of a state of at most 16 components reads a group
	// of save times' times and cotangents at once before it computes
	// with them (kernelPlan.CotGroup, adjoint.cuh's gs_save_cots). The
	// same results bit for bit (package cuda's private
	// Tuning.ungroupedCots: the switch of the device's comparison,
	// BenchmarkGPUSaveSplit's -ungrouped rows).
	UngroupedCots bool
	// WidePivots (with Wide, without WideDenseLU) is a predicted pivot
	// sequence of the sparse factors (package cuda's Pollution: "5>6
	// 6>7", ParsePivots): a factor of a matrix of more rows than its
	// indices follows it besides no interchange where partial pivoting
	// takes it (widelu.go: wideSparseLU's hints), sparse to its end and
	// its solves too, where without it the dense steps take over at the
	// first interchange. The same values as without (==): only which
	// code runs changes (package cuda's Tuning.widePivots). 0 (the
	// default): no interchange only.
	WidePivots PivotSeq
	// WideMinSplit (with Wide), if positive, is the fewest repetitions
	// (components) of a wide function's loop: a shorter run of values the
	// reroll plan finds (reroll.go: from rerollMinRun, 4) is emitted as
	// replicated statements, every lane computing each value, instead of
	// a loop split over the lanes with its operands gathered into the
	// scratch by lane 0 and __syncwarp()s around it; a run with a carried
	// operand stays a loop (its split sums' order). An irregular field's
	// code (Pollution's reactions, their reverse) is mostly such short
	// runs. The same operations on the same operands in the same order:
	// the same results bit for bit. Zero: DefaultWideMinSplit in a
	// Rosenbrock method's kernels of a system of WideSplitMinDim
	// components or more, else every run a loop; negative: every run a
	// loop (package cuda's Tuning.WideMinSplit).
	WideMinSplit int
	// WideLanes (with Wide), if a power of two from 1 to 16, runs a
	// trajectory on that many consecutive lanes of a warp instead of the
	// whole warp: 32 / WideLanes trajectories a warp, each group of lanes
	// with its own part of the warp's shared memory (KernelInfo.WideShared
	// is the warp's: the parts together), its loops over the components
	// strided by WideLanes, its sums' butterflies and __syncwarp()s on its
	// own lanes (wide.go's wideHelper: GS_WIDE_LANES). A state of at most
	// WideLanes components runs its loops in one pass as on 32 lanes and
	// its replicated code (an irregular field's, the controller's) is one
	// instruction for 32 / WideLanes trajectories. The sums over the lanes
	// add the same terms in the same order where d ≤ 2·WideLanes (a lane's
	// partial sum of components c and c + WideLanes is the butterfly's
	// step of that offset: the same results bit for bit), in another
	// where d is larger (rounding).
	// Zero or 32: a warp per trajectory (package cuda's Tuning.wideLanes).
	WideLanes int
}

// WideLanesOf returns the lanes a trajectory of kernel v runs on in the
// wide layout (Config.WideLanes): 32 unless v sets a power of two below.
func (v Config) WideLanesOf() int {
	if l := v.WideLanes; l > 0 && l < LaneWidth && l&(l-1) == 0 && v.WideWarpsOf() == 1 {
		return l
	}
	return LaneWidth
}

// WideWarpsOf returns the warps a trajectory of kernel v runs on in the
// wide layout (Config.WideTrajWarps): 1 unless v sets a power of two
// from 2 to WideMaxTrajWarps.
func (v Config) WideWarpsOf() int {
	if w := int(v.WideTrajWarps); w > 1 && w <= WideMaxTrajWarps && w&(w-1) == 0 {
		return w
	}
	return 1
}

// WideBlockWarps returns the warps of a block of kernel v in the wide
// layout (its launch bounds' block): a trajectory's (WideWarpsOf) where
// a trajectory runs on several, else WideWarps.
func (v Config) WideBlockWarps() int {
	if w := v.WideWarpsOf(); w > 1 {
		return w
	}
	return WideWarps
}

// WorkAccs reports whether the warps' accumulators of a lanes-mode
// kernel in global memory are rows of its work array (gs_args.work).
func (v Config) WorkAccs() bool { return v.Grad && !v.LanesBlockAcc && !v.TileSharedAcc }

// ConfigOf returns the kernel that runs job j, before its layout is chosen.
func ConfigOf(j *ode.Job) Config {
	v := Config{Saves: len(j.SaveAt), Adaptive: j.Mesh == nil}
	switch j.Op {
	case ode.OpRecord:
		v.MeshOut, v.Saves = true, 0
	case ode.OpReplay:
		v.Adaptive = false
	case ode.OpLoss:
		v.Loss, v.MeshOut = true, v.Adaptive
	case ode.OpGrad:
		v.Grad, v.Store, v.MeshOut = true, true, v.Adaptive
	}
	if (v.Loss || v.Grad) && j.Loss != nil {
		v.DataDim = j.Loss.DataDim
		v.lossKey = j.Loss.Hash
	}
	v.StopStiff = j.StopOnStiff && v.Adaptive
	v.Probe = j.CheckStability && v.Adaptive && j.Plan != nil && j.Plan.Probe != nil
	v.ProbeAll = v.Probe && j.Continues
	v.Events = j.Plan != nil && j.Plan.Events != nil
	return v
}

// Layout names the kernel's layout (TraceStats.Layout).
func (v Config) Layout() string {
	switch {
	case v.Wide:
		return "wide"
	case !v.Lanes:
		return "thread"
	case v.TileMode:
		return "tile"
	case !v.LanesGlobal:
		return "lanes"
	case v.LanesBlockAcc:
		return "lanes-global-block"
	}
	return "lanes-global"
}

// unrolledKey is Config.Unrolled's part of a Key (none without, so that
// the keys written into the sources of other kernels stay as they were).
var unrolledKey = map[bool]string{true: "unrolled "}

// wideKey is Config.Wide's part of a Key, likewise.
var wideKey = map[bool]string{true: "wide "}

// rowMajorKey is Config.RowMajor's part of a Key, likewise.
var rowMajorKey = map[bool]string{true: "rows "}

// wideSharedKey is Config.WideShared's part of a Key, likewise.
var wideSharedKey = map[bool]string{true: "wideshared "}

// wideRowsKey is Config.WideRows's part of a Key, likewise.
var wideRowsKey = map[bool]string{true: "widerows "}

// storeCotsKey is Config.StoreSaveCots's part of a Key, likewise.
var storeCotsKey = map[bool]string{true: "storecots "}

// oldSavesKey is Config.OldSaves's part of a Key, likewise.
var oldSavesKey = map[bool]string{true: "oldsaves "}

// divideSavesKey is Config.DivideSaves's part of a Key, likewise.
var divideSavesKey = map[bool]string{true: "dividesaves "}

// deferSavesKey is Config.DeferSaves's part of a Key, likewise.
var deferSavesKey = map[bool]string{true: "defersaves "}

// ungroupedKey is Config.UngroupedCots's part of a Key, likewise.
var ungroupedKey = map[bool]string{true: "ungrouped "}

// thetasKey is Config.KeepThetas's part of a Key, likewise.
var thetasKey = map[bool]string{true: "thetas "}

// wideRegsKey is Config.WideScalars's, WideMinBlocks's, WideMinSplit's,
// WideLanes's, WideDenseLU's and WidePivots's part of a Key
// (none at their defaults, so that the keys of other kernels stay as
// they were).
func (v Config) wideRegsKey() string {
	var k string
	if v.Wide && v.WideScalars != 0 {
		k += fmt.Sprintf("widescalars%d ", wideScalarsOf(v.WideScalars))
	}
	if v.Wide && v.WideMinBlocks > 0 {
		k += fmt.Sprintf("wideblocks%d ", v.WideMinBlocks)
	}
	if v.Wide && v.WideMinSplit != 0 {
		k += fmt.Sprintf("widesplit%d ", v.WideMinSplit)
	}
	if l := v.WideLanesOf(); v.Wide && l < LaneWidth {
		k += fmt.Sprintf("widelanes%d ", l)
	}
	if w := v.WideWarpsOf(); v.Wide && w > 1 {
		k += fmt.Sprintf("widewarps%d ", w)
	}
	if v.Wide && v.WideDenseLU {
		k += "widedenselu "
	}
	if v.Wide && !v.WideDenseLU && v.WidePivots != 0 {
		k += "widepivots[" + strings.ReplaceAll(v.WidePivots.String(), " ", ",") + "] "
	}
	if v.Wide && v.WideTables {
		k += "widetables "
	}
	if v.Wide && v.WideRolled {
		k += "widerolled "
	}
	if v.Wide && v.WideBlocked && !v.WideShared {
		k += "wideblocked "
		if v.WideWindowsCyclic {
			k += "widewindowscyclic "
		}
	}
	if v.Wide && v.Grad && v.WideRecordY && !v.WideShared && !v.WideBlocked {
		k += "widerecy "
	}
	if v.Wide && v.WideOutInPlace && !v.WideShared && !v.WideBlocked {
		k += "wideoutplace "
	}
	return k
}

// threadBoundsKey is Config.ThreadMinBlocks's part of a Key (none
// without bounds, so that the keys of other kernels stay as they were).
func (v Config) threadBoundsKey() string {
	if v.ThreadMinBlocks > 0 && !v.Lanes && !v.Wide {
		return fmt.Sprintf("threadblocks%d ", v.ThreadMinBlocks)
	}
	return ""
}

// Key identifies the kernel among those of one plan.
func (v Config) Key() string {
	return fmt.Sprintf("a%t m%t s%t l%t g%t k%d dd%d t%t w%t%d%t%t%t%t sa%t ss%t td%t st%t ev%t sep%t %s%s", v.Adaptive, v.MeshOut, v.Store, v.Loss, v.Grad, v.Saves, v.DataDim,
		v.TileSums, v.Lanes, v.LanesMinBlocks, v.LanesGlobal, v.LanesBlockAcc, v.LanesShuffle, v.TileMode, v.TileSharedAcc, v.TileSharedSh, v.TileDynamic, v.StopStiff, v.Events, v.SeparateSteps, unrolledKey[v.Unrolled]+wideKey[v.Wide]+rowMajorKey[v.RowMajor]+wideSharedKey[v.WideShared]+wideRowsKey[v.WideRows]+v.wideRegsKey()+v.threadBoundsKey()+storeCotsKey[v.StoreSaveCots && v.Grad]+oldSavesKey[v.OldSaves && v.Saves > 0]+divideSavesKey[v.DivideSaves && v.Saves > 0]+deferSavesKey[v.defersSaves() || v.defersGrad()]+ungroupedKey[v.UngroupedCots && v.Grad]+thetasKey[v.KeepThetas && v.Grad]+v.probeKey(), v.lossKey)
}

// probeKey is Config.Probe's part of a Key (none without the probe, so
// that the keys of other kernels stay as they were).
func (v Config) probeKey() string {
	switch {
	case v.ProbeAll:
		return "probeall "
	case v.Probe:
		return "probe "
	}
	return ""
}

// defersSaves reports whether kernel v may defer its save times to the
// saves kernel (Config.DeferSaves; kernelPlan.DeferSaves also needs the
// plan's extension read from the trial).
func (v Config) defersSaves() bool {
	return v.DeferSaves && v.Saves > 0 && v.Adaptive && !v.Grad && !v.Loss && !v.MeshOut && !v.Store && !v.Events &&
		!v.Lanes && !v.Wide && !v.OldSaves
}

// defersGrad reports whether gradient kernel v (with its record) may
// defer its save times (Config.DeferSaves; kernelPlan.DeferGrad also
// needs the plan's extension read from the trial and its save times'
// cotangents computed in the sweep).
func (v Config) defersGrad() bool {
	return v.DeferSaves && v.Saves > 0 && v.Adaptive && v.Grad && v.MeshOut && v.Store && !v.Events && !v.Lanes &&
		!v.Wide && !v.OldSaves && !v.KeepThetas && !v.StoreSaveCots
}

// StepPrograms are the plan's programs a kernel calls.
type StepPrograms struct {
	plan *ode.Plan
	// Rev is Plan.Reverse: its gs outputs are one step's contribution to
	// the shared gradient, which the kernel reduces across the warp
	// instead of accumulating per thread.
	Rev *tape.Program
	// Lanes reports that the plan's kernels run one warp per trajectory
	// (useLanes).
	Lanes bool

	// The wide functions of the plan's kernels, by variant (rows
	// unrolled, Config.WideRows; all shared, Config.WideShared; a
	// gradient's; save times; the budget of Config.WideScalars), emitted
	// once (StepPrograms.wide): the wide layout's measure
	// (WideSharedPerWarp) and the kernel's source (KernelSource) share
	// them.
	wideMu   sync.Mutex
	wideOnce map[wideVariant]*wideOnce
}

// NewStepPrograms derives the reverse step of pl. (A gradient kernel
// with save times also calls Plan.DenseStepReverse, which the plan builds
// on first use.)
func NewStepPrograms(pl *ode.Plan) (*StepPrograms, error) {
	sp := &StepPrograms{plan: pl}
	rev, err := pl.Reverse()
	if err != nil {
		return nil, err
	}
	sp.Rev = rev
	sp.Lanes = useLanes(sp)
	return sp, nil
}

// KernelInfo describes a generated kernel to the executor.
type KernelInfo struct {
	// StoreT reports that the stored rows hold the time (the reverse
	// steps use it, or save times need it).
	StoreT bool
	// StoreEvent reports that the stored rows end with one more entry,
	// the event whose step the row's step is (1 + its index; 0 for none):
	// a gradient through events (Config.Events).
	StoreEvent bool
	// WideShared is the shared memory of a warp of a kernel of the wide
	// layout, in bytes (Config.Wide; WideLaunch); of a block, a
	// trajectory's with its exchange slots, where a trajectory runs on
	// several warps (Config.WideTrajWarps; WideTrajLaunch).
	WideShared int
	// SaveCots reports that the kernel computes its save times'
	// cotangents in the reverse sweep (kernelPlan.SaveCots): it reads and
	// writes no array of them (gs_args.tb), which needs no memory (but
	// K reals a trajectory with KeepThetas).
	SaveCots bool
	// LossFold reports that the kernel folds its loss's value in the
	// forward pass (kernelPlan.LossFold).
	LossFold bool
	// CotGroup is how many save times' cotangents the kernel's reverse
	// sweep reads at once (kernelPlan.CotGroup), 0 where it reads them
	// one save time at a time or stores them.
	CotGroup int
	// KeepThetas reports that the kernel keeps its save times' quotients
	// theta from the forward pass for its reverse sweep
	// (kernelPlan.KeepThetas): gs_args.tb holds K reals a trajectory.
	KeepThetas bool
	// DeferRow, where positive, reports that the kernel defers its save
	// times (kernelPlan.DeferSaves): gs_args.store holds gs_args.rows rows
	// of DeferRow reals a trajectory (a step's t, h, first save time,
	// state and coefficients), and the module's saves kernel
	// (SavesKernelName) runs after it over the same trajectories, a
	// thread a row and trajectory.
	DeferRow int
	// DeferGradRow, where positive, reports that the gradient kernel
	// defers its save times (kernelPlan.DeferGrad): gs_args.work holds
	// gs_args.rows rows of DeferGradRow reals a trajectory, and the
	// module's saves kernel (SavesKernelName) and reverse kernel
	// (RevKernelName) run after it, in that order, over the same
	// trajectories: the saves kernel a thread a row and trajectory, the
	// reverse kernel in the engine kernel's launch shape.
	DeferGradRow int
}

// RevKernelName is the name of the third kernel of an engine module
// whose gradient kernel defers its save times (KernelInfo.DeferGradRow):
// the adjoint.
const RevKernelName = "gs_engine_rev"

// SavesKernelName is the name of the second kernel of an engine module
// whose kernel defers its save times (KernelInfo.DeferRow).
const SavesKernelName = "gs_engine_saves"

// KernelSource returns the translation unit of kernel v of the plan
// (with the loss lp for loss and gradient variants) in precision prec:
// the adapters of the plan's programs (kernelAdapters) and the kernel
// templates of v's layout executed with its kernelPlan.
func KernelSource(sp *StepPrograms, v Config, lp *ode.LossPlan, prec Precision) (string, KernelInfo, error) {
	src, info, err := kernelUnit(sp, v, lp, prec)
	if err != nil {
		return "", info, err
	}
	return src.String(), info, nil
}

// KernelUnits returns the translation units of kernel v as KernelSource
// does its one unit: with v.SplitUnits, a kernel that splits
// (v.SplitFrom) as its kernel's unit (Units[0], KernelUnitName) and one
// unit per GS_STEP function (Source.Units); any other kernel as one unit,
// KernelSource's text.
func KernelUnits(sp *StepPrograms, v Config, lp *ode.LossPlan, prec Precision) ([]Unit, KernelInfo, error) {
	src, info, err := kernelUnit(sp, v, lp, prec)
	if err != nil {
		return nil, info, err
	}
	units, err := src.Units()
	return units, info, err
}

// kernelUnit builds the Source of kernel v (KernelSource).
func kernelUnit(sp *StepPrograms, v Config, lp *ode.LossPlan, prec Precision) (*Source, KernelInfo, error) {
	var info KernelInfo
	pl := sp.plan
	if err := v.checkEvents(pl); err != nil {
		return nil, info, err
	}
	if v.TileMode && (!v.Lanes || !v.LanesGlobal || prec != Float64 || v.TileSums) {
		return nil, info, fmt.Errorf("cuda: tile mode needs lanes mode's global layout, float64 and no tile sums")
	}
	if v.Wide {
		if err := wideCheck(v, pl, prec); err != nil {
			return nil, info, err
		}
	} else if v.RowMajor {
		return nil, info, fmt.Errorf("cuda: row-major per-trajectory arrays need the wide layout")
	}
	src := NewSource(&SourceSettings{Precision: prec, InlineCallees: inlineCallees, Lanes: v.Lanes, TileMode: v.TileMode})
	src.Stage = v.Lanes && !v.LanesShuffle
	src.reroll = !v.Lanes && !v.Unrolled && rerollPlan(pl) || v.Wide
	src.laneRoll = v.Lanes && !v.TileMode && !v.Unrolled && pl.Shared >= LaneRollMinShared
	src.Defines = v.preludeDefines(pl.Shared)
	// A wide kernel splits in parts only (its functions' private
	// outputs, gs_po, would otherwise leave registers for nothing).
	if !v.Lanes && (!v.Wide || v.SplitUnits) {
		src.splitFrom, src.splitUnits = v.SplitFrom, v.SplitUnits
	}
	k := &kernelPlan{Config: v, Name: KernelName, Method: pl.Method, Variant: pl.Variant, Fingerprint: pl.Fingerprint,
		D: pl.Dim, NP: pl.Params, NS: pl.Shared, FSAL: pl.FSAL,
		Dense: v.Saves > 0 && pl.DenseStep != nil, DenseTerms: pl.DenseTerms,
		SharedAcc: v.SharedAcc(pl.Shared, prec), Xpose: v.Xpose(pl.Shared), Stage: src.Stage,
		StiffStatus: int(ode.Stiff), LanesBlock: LanesBlock, LanesAccBlock: LanesAccBlock, TileWidth: TileWidth, WideWarps: WideWarps,
		ThreadBoundsBlock: ThreadBoundsBlock}
	// With events the save times inside an event step read its own
	// extension, not the trial's: the dense step at (t, h*) (gs_saves).
	// The wide layout runs the trial and the dense step apart.
	k.ShareFwd = k.Dense && shareForward(pl, v) && !v.Events && !v.Wide
	k.SwitchTrial = k.Dense && v.Adaptive && !k.ShareFwd && !v.Events && !v.Wide && pl.TrialDense != nil
	// An autonomous field's reverse step ignores t: the stored rows then
	// hold y only (a fifth less traffic for Lorenz).
	k.StoreT = v.Store && (v.Saves > 0 || v.Events || liveInputs(sp.Rev, map[*tape.Program][]bool{})[0])
	if v.Events {
		k.setEvents(pl)
	}
	// The wide layout runs the probe as its own function (wideLayout.Probe,
	// wide.cuh), with ProbeEvery and ProbeStart.
	k.ProbeOn = v.Probe && !v.Wide && pl.Probe != nil
	if v.Probe && pl.Probe != nil {
		k.ProbeEvery = pl.ProbeEvery
		for _, x := range pl.ProbeStart {
			k.ProbeStart = append(k.ProbeStart, strconv.FormatFloat(x, 'x', -1, 64))
		}
	}
	g := &adapters{src: src}
	if v.Wide {
		w, err := src.wideFuncsOf(sp, v)
		if err != nil {
			return nil, info, err
		}
		k.W = w
		info.WideShared = LaneWidth / v.WideLanesOf() * w.Len * prec.Size()
		if tw := v.WideWarpsOf(); tw > 1 {
			// A block's trajectory and its exchange slots.
			info.WideShared = (w.Len + WideExchange(tw)) * prec.Size()
			k.WideWarps = tw
		}
		if err := g.wideLoss(pl, v, lp, k); err != nil {
			return nil, info, err
		}
	} else if err := g.kernelAdapters(sp, v, lp, k); err != nil {
		return nil, info, err
	}
	if k.SaveCots && !v.UngroupedCots {
		k.CotGroup = cotGroup(k.D)
	}
	k.KeepThetas = k.CotGroup > 0 && v.KeepThetas
	k.DeferSaves = v.defersSaves() && (k.ShareFwd || k.SwitchTrial)
	if k.DeferSaves {
		info.DeferRow = 3 + k.D + k.DenseTerms*k.D
	}
	k.DeferGrad = v.defersGrad() && (k.ShareFwd || k.SwitchTrial) && k.SaveCots && k.LossFold && k.StoreT && !k.KeepThetas
	if k.DeferGrad {
		info.DeferGradRow = 3 + 2*k.DenseTerms*k.D
	}
	k.FoldFwd = k.LossFold && !k.DeferGrad
	info.StoreT, info.StoreEvent, info.SaveCots, info.LossFold, info.CotGroup = k.StoreT, k.StoreEv, k.SaveCots, k.LossFold, k.CotGroup
	info.KeepThetas = k.KeepThetas
	var sb strings.Builder
	sb.WriteString(g.sb.String())
	if err := kernelTemplates[v.layoutFile()].Execute(&sb, k); err != nil {
		return nil, info, fmt.Errorf("cuda: kernel template: %w", err)
	}
	src.Add(sb.String())
	return src, info, nil
}

// kernelPlan is what the kernel templates (kernel.cuh) read: the
// kernel's configuration, the plan's shape, and what KernelSource derived
// from them.
type kernelPlan struct {
	Config
	Name, Method, Fingerprint string
	Variant                   string // ode.Plan.Variant: "" for the method's own programs ("auto": Method Auto's Tsit5 trial)
	D, NP, NS                 int    // state, per-trajectory and shared parameters
	FSAL                      bool   // the method's Trial takes k1
	// Dense reports that save times are read from the continuous
	// extension of the steps they lie on (Plan.DenseStep, of DenseTerms
	// terms), else each is a step of its own (ode.SaveStep).
	Dense      bool
	DenseTerms int
	StoreT     bool // a stored row holds the time (KernelInfo.StoreT)
	// RevAcc and LossAcc report that the reverse steps (Reverse and, with
	// Dense, DenseStepReverse) and the loss VJP add their shared-gradient
	// contributions themselves (AccFunc).
	RevAcc, LossAcc bool
	// LossDirect reports that the loss's functions are bound ones
	// (directLoss): the loss VJP stores the loss term and dL/dys itself
	// and returns dL/dy, dL/dp and dL/ds (the wide layout's, always
	// bound: stores dL/dy and dL/dp too and returns dL/ds).
	LossDirect bool
	// SaveCots (with LossDirect and Dense, a gradient of the thread
	// layout without events) reports that the loss VJP leaves dL/dys out
	// and the reverse sweep computes each save time's cotangents where it
	// reaches the save time (gs_save_cot; savecot.go): no a.tb
	// (KernelInfo.SaveCots).
	SaveCots bool
	// LossFold (with SaveCots) reports that the forward pass folds the
	// loss's value where it writes each save time's state (gs_save_state
	// calls gs_fold_save: gs_a_fold_first at save time 0, gs_a_fold_next
	// after it, into a per-thread accumulator) and the adjoint's prologue
	// finishes it (gs_a_fold_end) and stores it; the loss VJP returns
	// dL/dy, dL/dp and dL/ds only (lossfold.go).
	LossFold bool
	// CotGroup (with SaveCots, unless Config.UngroupedCots) is how many
	// save times' times and cotangents the reverse sweep reads at once,
	// before it computes with any (gs_save_cots: GS_COT_GROUP; cotGroup),
	// in gs_coef_bar and where it adds them to lambda; 0: one save time
	// at a time, each one's loads after the previous one's quotient and
	// test (the form before session 47, and that of a.tb).
	CotGroup int
	// KeepThetas (with CotGroup and Config.KeepThetas) reports that
	// the forward pass keeps each save time's quotient theta = (tau -
	// t_s) / h, where it reads the save time from its step's extension
	// (gs_step_saves), in a.tb (theta of save time k at [k*n + i]: the
	// array no SaveCots kernel otherwise has), and the reverse sweep's
	// gs_coef_bar reads it there, with the group's cotangents, instead
	// of dividing again: the quotient the forward pass used, bit for bit,
	// so the interpolant's VJP is the derivative of the map it computed.
	// Step 0's save times, of which those at or before T0 are saved
	// before its size is known (gs_save_states), are divided as before.
	KeepThetas bool
	// DeferSaves (Config.DeferSaves, with ShareFwd or SwitchTrial)
	// defers the interpolation of the save times inside accepted steps
	// below gs_args.rows to the saves kernel (gs_engine_saves): the
	// forward pass writes a row of the step's t, h, first save time
	// (GS_K where none lies on it), state and, where one lies inside it,
	// coefficients (gs_defer_step), and the saves kernel calls
	// gs_step_saves on it (KernelInfo.DeferRow).
	DeferSaves bool
	// DeferGrad (Config.DeferSaves in a gradient kernel with its record,
	// with ShareFwd or SwitchTrial, SaveCots and LossFold, the time in
	// the stored rows, no KeepThetas) splits the gradient into three
	// kernels (kernel.cuh: gs_defer_grad_step, gs_deferred_grad_step,
	// gs_engine_rev): the forward pass, the save times and their
	// coefficients' cotangents a thread a step, the fold and the adjoint
	// (KernelInfo.DeferGradRow).
	DeferGrad bool
	// FoldFwd (LossFold without DeferGrad) folds the loss's value in the
	// forward pass (gs_save_state); with DeferGrad gs_engine_rev folds it.
	FoldFwd bool
	// ShareRev (with Dense) runs DenseStepReverse on every step of the
	// adjoint, with zero coefficient cotangents where no save time lies
	// inside it, and Reverse on none: one reverse step in the source, not
	// two (shareReverse).
	ShareRev bool
	// ShareFwd (with Dense) runs one forward step program where there
	// would be two (shareForward): an adaptive kernel's trial is
	// Plan.TrialDense (gs_a_trial also returns the coefficients, which the
	// save times read), with no dense step; a replay's step is DenseStep,
	// with no Replay.
	ShareFwd bool
	// SwitchTrial (with Dense, an adaptive kernel that does not share its
	// forward step) tries a step with Plan.TrialDense in place of Trial
	// where a save time lies inside it (in any trajectory of the warp, or
	// of the tile), as the CPU engine does: on an accepted step the save
	// times read its coefficients, and no dense step recomputes the step
	// (TrialDense's outputs are Trial's and, on an accepted step,
	// DenseStep's coefficients bit for bit).
	SwitchTrial      bool
	SharedAcc, Xpose bool // thread layout: Config.SharedAcc, Config.Xpose
	Stage            bool // lanes layout: the warps' staging rows (Source.Stage)
	StiffStatus      int  // ode.Stiff (Config.StopStiff)
	// ProbeOn (Config.Probe, not in the wide layout, whose W.Probe names
	// its probe instead): the record runs the plan's stability probe
	// every ProbeEvery trials (and on trial ProbeEvery/4; every trial
	// with Config.ProbeAll) from the start vector ProbeStart (C
	// literals; both set in the wide layout too).
	ProbeOn    bool
	ProbeEvery int
	ProbeStart []string
	// LanesBlock, LanesAccBlock and TileWidth are the package's constants.
	LanesBlock, LanesAccBlock, TileWidth int
	// ThreadBoundsBlock is the package's constant (Config.ThreadMinBlocks).
	ThreadBoundsBlock int
	// The events (Config.Events): their number, and per event its
	// Direction, whether it is terminal and whether it has a jump
	// (Apply); MaxEvents; the statuses of ode a trajectory ends with;
	// StoreEv: the stored rows end with the step's event (KernelInfo).
	NE                            int
	EvDir                         []int
	EvTerminal, EvJump            []bool
	MaxEvents                     int
	EvNonFinite, EvAtStart, EvMax int
	StoreEv                       bool
	// W is the wide layout's shared memory of a warp and its functions
	// (Config.Wide).
	W wideLayout
	// WideWarps is the warps of a wide kernel's block: the package's
	// constant, or a trajectory's warps (Config.WideBlockWarps).
	WideWarps int
}

// cotGroup returns kernelPlan.CotGroup for a state of d components: the
// most save times, up to four, whose d cotangents each are at most 16
// values (in registers beside the 16 sums of Tsit5's coefficients'
// cotangents at d = 4), and at least one up to d = 16; 0 above (the
// cotangents used as they are read, as before).
func cotGroup(d int) int {
	switch {
	case d <= 4:
		return 4
	case d <= 8:
		return 2
	case d <= 16:
		return 1
	}
	return 0
}

// setEvents sets k's event fields from plan pl's events.
func (k *kernelPlan) setEvents(pl *ode.Plan) {
	ep := pl.Events
	k.NE, k.EvDir, k.EvTerminal, k.MaxEvents = len(ep.Names), ep.Direction, ep.Terminal, ep.MaxEvents
	for _, j := range ep.Jump {
		k.EvJump = append(k.EvJump, j != nil)
	}
	k.EvNonFinite, k.EvAtStart, k.EvMax = int(ode.EventNonFinite), int(ode.EventAtStart), int(ode.TooManyEvents)
	k.StoreEv = k.Store
}

// checkEvents refuses a kernel with events that the event templates do
// not cover.
func (v Config) checkEvents(pl *ode.Plan) error {
	switch {
	case !v.Events:
		return nil
	case pl.Events == nil || pl.TrialDense == nil || pl.DenseStep == nil:
		return fmt.Errorf("cuda: events need the plan's events and its continuous extension (Settings.Saves = SaveInterpolate)")
	case v.Lanes:
		return fmt.Errorf("cuda: events run in the thread layout only (one thread per trajectory), not %s", v.Layout())
	}
	return nil
}

// preludeDefines returns the macros that configure the prelude for
// kernel v with ns shared parameters (Source.Defines).
func (v Config) preludeDefines(ns int) []string {
	var defs []string
	if v.TileSums {
		defs = append(defs, "GS_TILES 1", fmt.Sprintf("GS_TILE %d", scan.TileSize))
	}
	if v.Lanes {
		defs = append(defs, "GS_LANEMODE 1")
		if v.LanesBlockAcc {
			defs = append(defs, "GS_LANES_BLOCKACC 1")
		}
	}
	if v.Xpose(ns) {
		defs = append(defs, "GS_XPOSE 1")
	}
	if l := v.WideLanesOf(); v.Wide && l < LaneWidth {
		defs = append(defs, fmt.Sprintf("GS_WIDE_LANES %d", l))
	}
	if w := v.WideWarpsOf(); v.Wide && w > 1 {
		defs = append(defs, fmt.Sprintf("GS_WIDE_WARPS %d", w))
	}
	return defs
}

// liveInputs reports which inputs of p its outputs depend on, following
// calls into their callees (memo holds the callees' answers).
func liveInputs(p *tape.Program, memo map[*tape.Program][]bool) []bool {
	if r, ok := memo[p]; ok {
		return r
	}
	live := make([]bool, len(p.Values))
	for _, o := range p.Outputs {
		live[o.ID] = true
	}
	in := make([]bool, len(p.Inputs))
	for i := len(p.Values) - 1; i >= 0; i-- {
		if !live[i] {
			continue
		}
		v := &p.Values[i]
		switch v.Op {
		case ops.OpInput:
			in[int(v.Aux)] = true
		case ops.OpCall:
			fl := liveInputs(p.Funcs[int(v.Aux)], memo)
			for k, a := range v.Args {
				if fl[k] {
					live[a] = true
				}
			}
		default:
			for _, a := range v.Args {
				live[a] = true
			}
		}
	}
	memo[p] = in
	return in
}

// Size returns the bytes of one value.
func (p Precision) Size() int {
	if p == Float32 {
		return 4
	}
	return 8
}

// B2i returns 1 for true and 0 for false.
func B2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
