// Package cuda is the GPU engine's foundation: it loads the CUDA driver
// and NVRTC at run time, compiles generated CUDA C++ for the device at
// hand and runs it, and generates that C++ from tape programs.
//
// Nothing here needs cgo, CUDA headers or a toolkit at build time:
// CGO_ENABLED=0 builds, and a program that never calls into this package
// never loads the driver.
//
// # Loading
//
// The driver (libcuda.so.1, else libcuda.so) is opened through
// github.com/ebitengine/purego on first use, and every entry point is
// resolved through cuGetProcAddress_v2 with an explicit ABI version (the
// version of cudaTypedefs.h's PFN_<name>_v<version> that the Go
// signature follows), so a renamed or re-versioned symbol in a newer
// cuda.h cannot change what is called. The driver must support CUDA 12.0
// or later (MinDriverVersion). Without a usable driver, or without a
// device, Open and DeviceCount return an error wrapping ErrNoGPU; an
// engine treats that as "no GPU" and runs on the CPU.
//
// NVRTC is found by soname (libnvrtc.so.13, .12, .11.2, ...), then in
// $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64 and
// /usr/local/cuda-*/lib64. Compile compiles for the device's own
// architecture: a cubin for sm_XY where that NVRTC supports it, else PTX
// for compute_XY that the driver compiles on load. Floating-point
// contraction is off by default (--fmad=false), so device arithmetic
// rounds exactly as the CPU engine's. GRADSOLVE_CUDA_FMAD=1 turns it on
// for every compilation, to measure what it is worth: the step programs
// already sum their stages as fused Dot ops, so the engine's Lorenz
// kernels gain 5–10% on an H200 (bench/RESULTS.md), and their results
// then no longer match the CPU engine's bit for bit. Compiled images are
// cached on disk (see Compile).
//
// # Devices and threads
//
// A CUDA context is bound to an OS thread. Each Device owns one goroutine,
// locked to its OS thread, with the device's primary context current;
// every driver call for the device runs there, so Device methods may be
// called from any goroutine. There is no global device state besides the
// lazily loaded libraries: several Devices, one per GPU, work side by
// side. Device memory is held in typed buffers (Buffer, Alloc), freed
// explicitly.
//
// Every driver failure is an *Error naming the call, the CUDA error's
// name and number, and its description:
//
//	cuda: cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1): invalid argument
//
// # Code generation
//
// Source turns tape programs into one CUDA C++ translation unit (see
// Source for the calling convention). Each value of a program is a const
// local (registers); the tuple ops (LUFactor, LUSolve, LUSolveT) work on
// small local arrays; every scalar op uses its C form from package ops,
// and the helpers those forms call (gs_powi, gs_min, gs_sigmoid, the LU
// routines, ...) are written once, in the prelude (Prelude), matching
// ops' Eval bit for bit. Qualifiers are macros (GS_DEVICE, GS_GLOBAL,
// GS_FUNC, GS_CALLEE), so the same source is valid host C++: the tests
// compile it with g++ and compare it with tape's Eval, bit for bit where
// the arithmetic is IEEE-exact, on machines without a GPU. Float64 is the
// default; Float32 is available (SourceSettings).
//
// # The engine
//
// Importing the package registers the ode engines "cuda" (float64) and
// "cuda-f32" (float32), on GPU 0 (NewEngine makes one for another GPU),
// and "cuda-multi", on several GPUs (see Several GPUs).
// Each operation of a Job runs as one kernel per chunk of trajectories,
// generated from the plan's programs around a template (engine.cuh): a
// forward solve (final and saved states, statuses, counts), a record (the
// mesh), the loss, a record and its adjoint in one launch (the thread keeps
// the states before its accepted steps in a step-major buffer, runs the
// loss VJP, then Reverse backwards), and the replay of a given mesh with or
// without its adjoint. Shared-parameter gradients are summed across the
// warp as they are computed (AccFunc: the lanes' values transposed through
// the warp's scratch in shared memory, one atomic per entry) and added once
// per block. Ensembles
// that do not fit in device memory (or Settings.MemoryLimit) are run in
// chunks; a record buffer that proves too short is rerun, with the exact
// length, for the trajectories that need it. WithTrace reports the kernels'
// device time, transfers (bytes and time), chunks and reruns.
//
// Copies between host and device go through page-locked host memory
// (cuMemHostAlloc): a launch's inputs and results are staged there
// (transposed to and from the trajectories' order on all cores; a staging
// buffer over 1 GiB, tens of millions of trajectories in one launch, is Go
// memory, as page-locked memory is taken from the whole system), and a
// mesh of more than 32 MiB goes through two page-locked buffers of that
// size, the device copying one while all cores move the other. Copied
// straight from Go's pageable memory they go through the driver's own
// staging at a fraction of the bus's speed: on the H200 host page-locked
// staging alone makes whole calls of 262,144 to 2^20 trajectories 1.1–1.3
// times faster (bench/RESULTS.md).
// GRADSOLVE_CUDA_PINNED=0 stages in Go memory instead, as does an engine
// whose driver gives no page-locked memory. What an executor keeps
// between operations (the largest device arena, two staging buffers, the
// two mesh buffers) goes back to the device and the driver when its
// Solver is no longer reachable.
//
// # One warp per trajectory
//
// A field whose programs are mostly layers (a neural network: thousands of
// values per evaluation, in groups of one op over a layer's rows) runs in
// lanes mode: a whole warp runs each trajectory. The values of such a
// group, a vector, are computed at once, element e by lane e (row e of
// W·x + b, its activation, column e of Wᵀ·ȳ, the cotangents of row e's
// weights); every other value, the solver's own arithmetic included, is
// computed alike by all 32 lanes, and a value one lane holds reaches the
// others through the warp's staging row in shared memory: the vector's
// lanes write it once and every lane reads the elements it needs by
// broadcast loads (one load where a float64 shuffle takes two, and a
// value read where it is used need not stay in a register; four slots of
// 32 reals per warp, reused by vectors one after another, and shuffles
// for a vector that finds none free). Each value is still its own op on the same
// arguments in the same order, so the results are those of one thread per
// trajectory. The weights are read from a padded copy in shared memory
// (entry j at j + j/32, so that lanes reading a row each hit distinct
// banks), and each lane adds its weights' cotangents to its warp's own
// accumulator there, without atomics (the warps' sums are added to the
// result when the block ends). A small ensemble then fills the GPU (4,096
// trajectories are 4,096 warps, not 128), and a thread holds a layer's
// values one per lane instead of all of them. The engine chooses lanes
// mode when the programs the reverse step calls have at least 512 computed
// values, three quarters of them in vectors, except that a small network
// (at most 512 weights) runs one thread per trajectory in jobs of at least
// 256 trajectories per multiprocessor (33,792 on an H200), which fill the
// GPU with threads (2-8-8-2 at B = 65536: 0.92 ms against 2.86 ms in lanes
// mode). On cuda-multi the choice depends on the plan only (the two
// layouts sum a tile in different orders), and a warp runs a tile's
// trajectories in turn, summing the tile's shared gradient in a fixed
// order. GRADSOLVE_CUDA_LANES=0 or 1 overrides the choice. A block has up
// to 4 warps, as many as its shared memory allows (kernels opt in to more
// than 48 KiB where the device has it: some 13,000 float64 weights fit in
// an H200's 227 KiB), and its kernel is bounded to the registers that let
// the blocks that fit in a multiprocessor's shared memory run (128 for the
// neural suite's 1,218 weights). See lanes.go for how vectors are found.
//
// A large job of such a field runs in tile mode (tiles.go): a warp runs a
// tile of eight trajectories in lockstep, lane l on trajectory l/4, the
// four lanes of a trajectory computing its replicated values alike, and
// a vector holds element e of the lane's trajectory in lane 4(l/4) + e%4
// (8 slots per lane). A dense layer, a vector of Dots over a matrix of
// shared weights, is one m8n8k4 float64 tensor-core product per 8 rows
// and 4 inputs with the tile's trajectories as columns (gs_tdot): one
// weight load per 256 multiply-adds instead of one per multiply-add. The
// product adds its terms in k order with fused multiply-adds, as the
// Dot's C form does (the H200 measured bit for bit), so tile mode's
// meshes and states are lanes mode's, bit for bit. The adjoint's layers
// are products too: Wᵀ·ȳ (a chain of vector adds, or of replicated adds
// for a layer with few inputs) as a gs_tdot over W read transposed, and
// the weights' and biases' cotangents ȳ·xᵀ as products over the tile
// (gs_touter; a hidden layer's bias in the call of its weights) added
// once per call to the warp's accumulator; their sums take another order
// than lanes mode's, so gradients agree to rounding. Where four blocks of
// four warps fit in a multiprocessor's shared memory with them (up to
// some 1,700 float64 weights for the accumulators alone, 1,370 with the
// weights; an H200), each warp's accumulator is in shared memory
// (GS_TILE_SACC) and so is the padded block of weights (GS_TILE_SSH);
// otherwise both stay in global memory (GRADSOLVE_CUDA_TILEACC=global and
// GRADSOLVE_CUDA_TILESH=global force that). A warp's first tile is its
// index in the grid, each next one the next from a counter
// (GS_TILE_DYNAMIC; GRADSOLVE_CUDA_TILESCHED=static: every gridth tile),
// so that the warps whose tiles took few steps take more. The trajectories of a tile step together: every
// lane calls the step functions while any of its tile's trajectories
// runs, and one that finished discards its trial; save times are
// computed in rounds after each step (gs_body_tile). The engine runs a
// job in tile mode when it would run it in lanes mode, in float64, with a
// loss that holds no layers, and with at least 16 tiles per
// multiprocessor (16,896 trajectories on an H200, a threshold between
// the sizes measured, 4,096 and 65,536; below it lanes mode's warp per
// trajectory keeps more of the GPU busy);
// GRADSOLVE_CUDA_TILEMODE=1 or 0 overrides the last condition. On an
// H200 (bench RESULTS.md) the neural suite's gradient takes 0.43 ms at
// B = 4096 in lanes mode (0.49 in tile mode, 4.8 ms one thread per
// trajectory) and 2.72 ms at 65536 in tile mode (5.91 in lanes mode),
// 14.5 and 11.0 times faster than Diffrax; the kernels written by hand
// for that network in bench/neural_tsit5.cu, the layout tile mode
// follows, take 2.59 ms there. A vector's libm functions
// (tanh) are called out of line in tile mode, one copy for the kernel
// instead of one per slot: code that fits the instruction caches.
//
// A larger network keeps its padded weights in global memory instead
// (read through the caches), and the warps of a gradient kernel's block
// (16 warps, one block per multiprocessor) share one accumulator in shared
// memory, added to with atomics, up to some 28,000 float64 weights; beyond
// that each warp's accumulator is its own row of global memory.
// GRADSOLVE_CUDA_LANES=global forces this layout. One thread per
// trajectory is no alternative there: its kernels unroll every weight's
// arithmetic (10.5 MB of source for a 2-128-128-2 network against 0.8 MB
// for 2-32-32-2, which NVRTC compiles in 73 s; lanes mode's is 0.85 MB,
// compiled in 69 s). On an H200 a 2-128-128-2 network's gradient (17,154
// weights) takes 16.5 ms at B = 4096 and 163 ms at 32,768, about
// Diffrax's time at 4096 (15.5 ms) and 1.6 times it at 32,768 (99 ms): at
// that width the atomics of the shared accumulator bound the gradient,
// which batched matrix products do better.
//
// Five more environment variables tune the kernels: GRADSOLVE_CUDA_STAGE=0
// makes lanes mode take elements by shuffles instead of staging them,
// GRADSOLVE_CUDA_MAXREG caps the registers of a thread (NVRTC's
// --maxrregcount), GRADSOLVE_CUDA_BLOCK sets the threads per block,
// GRADSOLVE_CUDA_INLINE the size (values) up to which a called program
// (the field, its VJP) is inlined into its callers instead of called
// (300), and GRADSOLVE_CUDA_MINBLOCKS the blocks per multiprocessor a
// lanes-mode kernel's registers must leave room for (its
// __launch_bounds__; by default as many as fit in shared memory, at most
// 4: 128 registers for blocks of 4 warps). By default a block has
// 128 threads, fewer where the grid would leave multiprocessors idle (a
// small ensemble: 4,096 trajectories run as 128 blocks of 32 on an H200's
// 132 multiprocessors) or where a gradient kernel's shared memory would
// exceed 48 KiB.
//
// Results of a Solver.Grad with a Gradient passed back reuse its arrays
// (ode.Job.Reuse): at millions of trajectories a fresh result costs more
// than the kernels (page faults), so training loops should pass theirs.
//
// # Several GPUs
//
// The engine "cuda-multi" (MultiEngine) runs every operation over the GPUs
// of one host: every visible GPU, or those GRADSOLVE_CUDA_DEVICES lists
// (GRADSOLVE_CUDA_DEVICES=0,2; NewMultiEngine takes ordinals instead). It
// is never chosen by "auto": name it in ode.Settings.Engine. Package fit
// then runs its fits over all GPUs unchanged, since it only calls ode.
//
// The ensemble is split into contiguous shards, one per GPU, on multiples
// of scan.TileSize = 8 trajectories: evenly on a plan's first operation,
// then in proportion to each GPU's speed, measured as the time per
// trajectory of its shard in the previous operation. Each GPU runs its
// shard with its own goroutine, Device (OS thread and context) and
// executor, in chunks where the shard does not fit in its memory (or
// Settings.MemoryLimit, per GPU). The per-trajectory results are gathered
// in index order into one ode.Result: states, statuses, counts, dL/dy0 and
// dL/dp copied into place, the recorded meshes merged step-major (rows to
// the longest trajectory), the loss summed over the terms in index order.
// Progress is the sum over the GPUs; a Trace adds up the work of all of
// them (Kernel is then the sum of the GPUs' device times). The first GPU's
// error cancels the others and is returned.
//
// Shared-parameter gradients are summed deterministically. The engine's
// gradient kernels run in tile mode: the lanes of each tile of 8 consecutive
// trajectories sum their contributions with a fixed butterfly of warp
// shuffles, and the tile's sums go to the tile's own accumulator with no
// atomics (see GS_TILES in the prelude). A record buffer that proves too
// short is rerun for whole tiles, so every tile's sums come from one
// launch of its own trajectories. The host adds the tiles in index order,
// as scan.SumTiles does. The bits of every result are therefore the same
// for any number of GPUs, any split and any chunking, on GPUs of one
// architecture. They are not the bits of the one-GPU engine "cuda", which
// reduces a block's shared gradients with atomics in shared memory in no
// fixed order, nor those of the CPU engine (another order within a tile,
// and the device's libm). Tile mode costs ceil(n/8)·2·Shared device values
// per launch of n trajectories, copied back and summed on the host: 2.4 KB
// per trajectory for the 1,218 weights of a 2-32-32-2 MLP in float64.
//
// The tests run it on fake devices: host backends that compile the same
// kernels with g++, three at most (go test ./cuda). Its scaling is
// measured with the GPU suites, on one GPU and on two:
//
//	GRADSOLVE_CUDA_DEVICES=0 gradsolve bench -suite gpu-lorenz -engine cuda-multi -n 1048576,4194304
//	GRADSOLVE_CUDA_DEVICES=0,1 gradsolve bench -suite gpu-lorenz -engine cuda-multi -n 1048576,4194304
//
// Beyond one host, see docs/scale-out.md.
//
// # Layouts
//
// Ensemble arrays on the device are step-major (structure of arrays):
// input k of trajectory i of n is at in[k*n+i], so the threads of a warp,
// one per trajectory, read consecutive addresses.
package cuda
