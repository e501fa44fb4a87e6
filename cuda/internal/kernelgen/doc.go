// Package kernelgen writes the GPU engine's CUDA C++ from tape programs:
// the field and its derivatives as device functions (Source) and, from an
// ode.Plan, whole-solve kernels (KernelSource), in the layout a Config
// names.
//
// Each value of a program is a const local (a register); tuple ops (the
// LU factorisation and solves of Rosenbrock stages) work on small local
// arrays; every scalar op uses its C form from package ops, and the
// helpers those forms call are written once, in the prelude (Prelude),
// matching ops' Eval bit for bit. Qualifiers are macros (GS_DEVICE,
// GS_GLOBAL, ...), so the same source is valid host C++: the tests
// compile it with g++ and compare it with tape's evaluation and the CPU
// engine on machines without a GPU.
//
// A kernel is the adapters of the plan's programs (adapters.go) and the
// kernel templates (text/template, kernel.cuh), executed with the
// kernel's plan: the driver loop once, with the forward loop of its kind
// (solve.cuh: a solve or record; replay.cuh: a given mesh), the adjoint
// of a gradient (adjoint.cuh), and one template per layout for the
// layout's hooks into the driver loop and the kernel's entry. Go decides
// which parts a kernel has; the preprocessor only tells the device
// compiler from the host's.
//
// Layouts, each with its emitter file and template: one thread per
// trajectory (thread.go, thread.cuh); lanes mode (lanes.go, lanes.cuh),
// one warp per trajectory with a layer's rows spread over the lanes,
// values a lane holds passed through the warp's staging row in shared
// memory (stage.go) or by shuffles, each value still its own op on the
// same arguments in the same order (so the results are one thread's); and
// tile mode (tiles.go, tile.cuh), one warp per tile of TileWidth
// trajectories with dense layers as m8n8k4 tensor-core products; the two
// warp layouts share warp.cuh. Shared-parameter gradients are accumulated
// without atomics per warp (lanes and tile mode) or summed across the
// warp and added once per block (one thread per trajectory); with
// Config.TileSums, per tile of scan.TileSize trajectories in a fixed
// order (AccFunc, accum.go).
//
// In the thread layout, the kernels of an explicit method from rerollDim
// and of a Rosenbrock method at every d write the runs of values that
// repeat per state component as loops over the components (reroll.go),
// each value still its own op on the same operands in the same order;
// and a loss of many saved values is emitted as bound functions (bind.go),
// which read the saved states in place and store their gradient
// themselves rather than pass one parameter and return one value per
// saved value. In lanes mode (not tile mode) from LaneRollMinShared
// shared parameters, the runs of lanes statements that repeat with
// their integer literals in progressions (a dense layer's reverse, row
// by row: ȳ_i staged, ȳ_i·x and its accumulator add, the running sums
// of Wᵀ·ȳ) are rolled into loops on the emitted lines (laneroll.go), the
// same statements in the same order, so results are the unrolled
// kernels' bit for bit (Config.Unrolled keeps them unrolled).
//
// Save times on the continuous extension (kernel.cuh, solve.cuh,
// adjoint.cuh; the thread, lanes and tile layouts) cost what the CPU
// engine's do: an adaptive kernel tries a step with a save time inside
// with Plan.TrialDense in place of Trial (kernelPlan.SwitchTrial; the
// warp's lanes, or a tile, alike), whose coefficients the save times of
// the accepted step read, with no dense step recomputing it; a step's save
// times are set four at a time (gs_step_saves: their loads, quotients and
// interpolants independent, the quotients from the step's reciprocal with
// two corrections, gs_quot, the division's bits without its branch, so
// that a group's chains interleave in one block; Config.DivideSaves
// divides, as before session 49; Config.DeferSaves, a forward-only solve,
// has the forward pass keep each step's start, size, state and
// coefficients in rows and a second kernel of the module,
// gs_engine_saves, a thread a step and trajectory, call gs_step_saves on
// them, and in a gradient with a folded loss gs_coef_bar too, the fold
// and the adjoint then running in a third, gs_engine_rev); and the
// adjoint finds the save times on a
// step from the save times and the step's stored t (gs_dense_first_save),
// not from a per-trajectory array of their steps. The sweep is
// software-pipelined over the steps: a step's stored t is read two steps
// ahead, its save times found one step ahead, and its stored state, size
// and save times' cotangents asked for then (gs_prefetch_step,
// GS_PREFETCH: an L1 prefetch on the device, nothing on the host), so
// that their latency passes during the step before instead of one wait a
// save time; gs_coef_bar reads each cotangent once, before its theta's
// division and test. A bound loss's loops over the saved states ask for
// their operands loadAhead repetitions ahead the same way (reroll.go).
// Results are the same bit for bit as with a dense step per step and one
// save time at a time.
//
// The wide layout (Config.Wide; wide.go, wide.cuh; package cuda's
// default from WideMinDim, for Rosenbrock methods from WideMinDimFactor
// unless cuda.Tuning.NoWideStiff; from WideFillMinDim and
// WideFillMinDimFactor where threads would not fill the device; at any
// state size with cuda.LayoutWide)
// runs one warp per trajectory for the solves, records and gradients of
// explicit and Rosenbrock methods on large states: Init, Trial and
// Control are inlined and rerolled and emitted warp-cooperatively. The
// state, the stages and every other d-long array (the programs' inputs and outputs, the loops' arrays and
// gathers) live in the warp's part of the block's shared memory, arrays
// whose lifetimes do not overlap sharing space, but for the arrays only
// ever accessed at the lane's own component (a stage's derivative; a
// gradient's reverse step's output λ', which the driver reads at each
// lane's components only: wideLayout.PrivOut), which are the lane's own
// (wideprivate.go; Config.WideShared keeps them shared); a loop over the
// components runs component c on lane c mod 32 between __syncwarp()s;
// the other values (the controller's scalars, an irregular field's
// code) are computed by every lane alike, at most Config.WideScalars of
// them live in registers at once, the others in slots of the warp's
// scratch from where registers run short (widespill.go: Belady's rule,
// the same bits); Config.WideMinBlocks adds launch bounds; Config.WideMinSplit
// makes the reroll plan's runs of fewer components, but chained sums,
// statements every lane computes alike (reroll.go's dropShort: the same
// bits); a chained sum over the components (the error norm, the
// stiffness estimate) is each lane's partial sum and a butterfly of
// shuffles, so results agree with the thread layout's to rounding, not
// bit for bit. A Rosenbrock step's LU factor of W and its solves
// (widelu.go) are arrays in the warp's shared memory: the updates of each
// elimination step split over the lanes (the thread layout's factors bit
// for bit), the triangular solves column by column, a column's rows split
// over the lanes (docs/wide-layout.md). Config.WideTrajWarps runs an
// explicit method's trajectory on 2 to WideMaxTrajWarps warps, a block
// each (the same functions' code: its loops strided by 32 times the
// warps, GS_SYNCWARP the block's barrier, the sums' butterflies finished
// across the warps through exchange slots at the start of the block's
// shared memory: wideWarpsHelper).
//
// A large kernel may compile its large step programs as functions of
// their own (Config.SplitFrom: GS_STEP, __noinline__; split.go), in the
// one unit (thread layout) or, with Config.SplitUnits, each in a
// translation unit of its own (KernelUnits, Source.Units: the kernel's
// unit declares them; each unit holds the prelude and the callees it
// needs, static), for package cuda to compile concurrently and link. The
// functions' text and arithmetic are the same in every form. A kernel in
// parts has no launch bounds (GS_UNITS): its units are all compiled with
// the register cap the bounds would give (Config.UnitRegs, BoundsRegs),
// which the driver's linker needs of a kernel and its callees.
//
// The package is internal: its exported names are the engine's and its
// tests' interface to it, not a public API.
package kernelgen
