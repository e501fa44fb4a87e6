// gradsolve CUDA prelude: the types, qualifiers and helper functions that
// generated code uses. It is valid CUDA C++ (NVRTC, -std=c++17) and valid
// host C++ (g++ -std=c++17): the qualifiers are macros, chosen by
// __CUDACC__, so the generated code can be compiled and tested on a
// machine without a GPU. Define GS_FLOAT32 before it for single precision.
//
// Every helper matches the Eval of its op in package ops bit for bit
// (ties, NaN and signed zero included); libm functions (exp, log, sin,
// ...) are the compiler's and round as it does.
#ifndef GS_PRELUDE_CUH
#define GS_PRELUDE_CUH

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GS_CUDA 1
#define GS_DEVICE __device__ __forceinline__
#define GS_GLOBAL extern "C" __global__
// GS_FUNC qualifies the function of a program; GS_CALLEE that of a
// program called by another (kept a call, not inlined, so a field called
// by every stage of a step is compiled once).
#ifndef GS_FUNC
#define GS_FUNC __device__
#endif
#ifndef GS_CALLEE
#define GS_CALLEE __device__ __noinline__
#endif
// GS_CALLEE_INLINE qualifies a small callee (SourceSettings.InlineCallees),
// which is cheaper inlined than called.
#ifndef GS_CALLEE_INLINE
#define GS_CALLEE_INLINE __device__ __forceinline__
#endif
#else
#include <math.h>
#define GS_DEVICE static inline
#define GS_GLOBAL extern "C"
#ifndef GS_FUNC
#define GS_FUNC static
#endif
#ifndef GS_CALLEE
#define GS_CALLEE static
#endif
#ifndef GS_CALLEE_INLINE
#define GS_CALLEE_INLINE static inline
#endif
#endif
#define GS_RESTRICT __restrict__

// GS_PREFETCH(p) asks for the cache line of global address p in the
// multiprocessor's L1 cache, without waiting for it or taking a register:
// a thread issues the loads of work it will do later (the next reverse
// step's save times' cotangents, a loop's operands a stretch of
// repetitions ahead) where a small ensemble (a warp or two a
// multiprocessor) has nothing else to hide memory's latency with. It
// changes no value; on the host it is nothing.
#ifdef GS_CUDA
#define GS_PREFETCH(p) asm volatile("prefetch.global.L1 [%0];" ::"l"(p))
#else
#define GS_PREFETCH(p) ((void)0)
#endif

#ifdef GS_FLOAT32
typedef float gs_real;
#define GS_EPS 0x1p-23f
#define GS_REAL_MAX 0x1.fffffep+127f
#else
typedef double gs_real;
#define GS_EPS 0x1p-52
#define GS_REAL_MAX 0x1.fffffffffffffp+1023
#endif

// gs_rcp returns 1/h rounded to nearest (the device's __drcp_rn: one
// correctly rounded reciprocal, where a division costs a reciprocal's
// refinement and its own test and branch to a slow path), from which
// gs_quot computes quotients by h.
GS_DEVICE gs_real gs_rcp(gs_real h) {
#if defined(GS_CUDA) && defined(GS_FLOAT32)
  return __frcp_rn(h);
#elif defined(GS_CUDA)
  return __drcp_rn(h);
#else
  return (gs_real)1 / h;
#endif
}

// GS_QUOT_LO and GS_QUOT_HI bound the dividends and divisors of which
// gs_quot computes the quotient: quotients and remainders stay normal,
// far from overflow. GS_FMA is the precision's fused multiply-add.
#ifdef GS_FLOAT32
#define GS_QUOT_LO 0x1p-50f
#define GS_QUOT_HI 0x1p50f
#define GS_FMA fmaf
#else
#define GS_QUOT_LO 0x1p-450
#define GS_QUOT_HI 0x1p450
#define GS_FMA fma
#endif

// gs_quot sets *q to x/h, the division's result bit for bit, from
// r = gs_rcp(h), and reports whether it could: |x| and |h| in
// [GS_QUOT_LO, GS_QUOT_HI] (not 0, not NaN or infinite); else *q is
// nothing and the caller divides. Five dependent operations, no branch:
// q0 = x·r is within about an ulp of x/h, one correction (q0 plus the
// remainder x - h·q0 times r, each an fma) makes it faithful (one of the
// two reals bracketing x/h), and a second is then x/h rounded to nearest
// by Markstein's theorem (r within half an ulp of 1/h, the remainder of
// a faithful quotient exact in an fma: Muller et al., Handbook of
// Floating-Point Arithmetic, the theorem on Newton-Raphson division
// after Markstein).
GS_DEVICE bool gs_quot(gs_real x, gs_real h, gs_real r, gs_real* q) {
  gs_real q0 = x * r;
  q0 = GS_FMA(GS_FMA(-h, q0, x), r, q0);
  *q = GS_FMA(GS_FMA(-h, q0, x), r, q0);
  const gs_real ax = fabs(x), ah = fabs(h);
  return ax >= GS_QUOT_LO && ax <= GS_QUOT_HI && ah >= GS_QUOT_LO && ah <= GS_QUOT_HI;
}

// gs_nan returns a quiet NaN.
GS_DEVICE gs_real gs_nan() { return (gs_real)(0.0 / 0.0); }

// gs_powi is x**n by repeated squaring, 1/x**-n for n < 0 (ops.OpPowi).
GS_DEVICE gs_real gs_powi(gs_real x, int n) {
  unsigned int m = n < 0 ? 0u - (unsigned int)n : (unsigned int)n;
  gs_real r = 1;
  while (m > 0) {
    if (m & 1u) r *= x;
    x *= x;
    m >>= 1;
  }
  return n < 0 ? (gs_real)1 / r : r;
}

// gs_min is x if x <= y or x is NaN, else y (ops.OpMin: a tie or a NaN
// x gives x).
GS_DEVICE gs_real gs_min(gs_real x, gs_real y) { return (x <= y || x != x) ? x : y; }

// gs_max is x if x >= y or x is NaN, else y (ops.OpMax).
GS_DEVICE gs_real gs_max(gs_real x, gs_real y) { return (x >= y || x != x) ? x : y; }

// gs_relu is x if x > 0, else +0 (NaN gives 0, as ops.OpRelu).
GS_DEVICE gs_real gs_relu(gs_real x) { return x > 0 ? x : (gs_real)0; }

// gs_sign is 1, -1 or 0 (0 for ±0 and NaN).
GS_DEVICE gs_real gs_sign(gs_real x) { return x > 0 ? (gs_real)1 : (x < 0 ? (gs_real)-1 : (gs_real)0); }

// gs_sigmoid is 1/(1+e^-x), computed as e^x/(1+e^x) for x < 0.
GS_DEVICE gs_real gs_sigmoid(gs_real x) {
  if (x >= 0) return (gs_real)1 / ((gs_real)1 + exp(-x));
  gs_real e = exp(x);
  return e / ((gs_real)1 + e);
}

// gs_softplus is max(x, 0) + log1p(e^-|x|), with Go's math.Max (NaN
// propagates, max(-0, 0) = +0).
GS_DEVICE gs_real gs_softplus(gs_real x) {
  gs_real m = (x > 0 || x != x) ? x : (gs_real)0;
  return m + log1p(exp(-fabs(x)));
}

// GS_LU_ROLLED: a source that factors matrices of d >= kernelgen's
// luLoopsFrom defines it, and the loops of the LU templates (gs_lu_factor,
// gs_lu_solve, gs_lu_solve_t, gs_lu_shift) stay loops ("#pragma unroll
// 1"): unrolled over d they made most of NVRTC's and ptxas's time on such
// kernels, and spilled more.

// gs_lu_factor factors the D×D row-major matrix in f[0:D*D] in place
// with partial pivoting, P W = L U, and stores the pivot rows in
// f[D*D:D*D+D] (ops.OpLUFactor). A matrix with a non-finite entry or a
// pivot of magnitude at most D·ε·max|W| gives a factor of NaNs. The
// arithmetic is ops' luLane, operation for operation.
template <int D>
GS_DEVICE void gs_lu_factor(gs_real* f) {
  gs_real amax = 0;
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
  for (int c = 0; c < D * D; c++) {
    gs_real v = fabs(f[c]);
    if (!(v <= GS_REAL_MAX)) {
      amax = gs_nan();
      break;
    }
    amax = v > amax ? v : amax;
  }
  gs_real tol = (gs_real)D * GS_EPS * amax;
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
  for (int k = 0; k < D; k++) {
    int p = k;
    gs_real pv = fabs(f[k * D + k]);
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
    for (int r = k + 1; r < D; r++) {
      gs_real v = fabs(f[r * D + k]);
      if (v > pv) {
        p = r;
        pv = v;
      }
    }
    if (!(pv > tol) || amax == 0) {
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
      for (int c = 0; c < D * D + D; c++) f[c] = gs_nan();
      return;
    }
    f[D * D + k] = (gs_real)p;
    if (p != k) {
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
      for (int c = 0; c < D; c++) {
        gs_real t = f[k * D + c];
        f[k * D + c] = f[p * D + c];
        f[p * D + c] = t;
      }
    }
    gs_real inv = (gs_real)1 / f[k * D + k];
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
    for (int r = k + 1; r < D; r++) {
      gs_real l = f[r * D + k] * inv;
      f[r * D + k] = l;
      if (l == 0) continue;
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
      for (int c = k + 1; c < D; c++) f[r * D + c] -= l * f[k * D + c];
    }
  }
}

// gs_lu_solve overwrites x (holding b) with the solution of W x = b given
// W's factors f (ops.OpLUSolve; ops' solveLane).
template <int D>
GS_DEVICE void gs_lu_solve(gs_real* x, const gs_real* f) {
  if (f[D * D] != f[D * D]) {
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
    for (int k = 0; k < D; k++) x[k] = gs_nan();
    return;
  }
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
  for (int k = 0; k < D; k++) {
    int p = (int)f[D * D + k];
    if (p != k) {
      gs_real t = x[k];
      x[k] = x[p];
      x[p] = t;
    }
  }
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
  for (int r = 1; r < D; r++) {
    gs_real s = x[r];
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
    for (int c = 0; c < r; c++) s -= f[r * D + c] * x[c];
    x[r] = s;
  }
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
  for (int r = D - 1; r >= 0; r--) {
    gs_real s = x[r];
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
    for (int c = r + 1; c < D; c++) s -= f[r * D + c] * x[c];
    x[r] = s / f[r * D + r];
  }
}

// gs_lu_solve_t overwrites x (holding b) with the solution of Wᵀ x = b
// given W's factors f (ops.OpLUSolveT).
template <int D>
GS_DEVICE void gs_lu_solve_t(gs_real* x, const gs_real* f) {
  if (f[D * D] != f[D * D]) {
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
    for (int k = 0; k < D; k++) x[k] = gs_nan();
    return;
  }
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
  for (int r = 0; r < D; r++) {
    gs_real s = x[r];
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
    for (int c = 0; c < r; c++) s -= f[c * D + r] * x[c];
    x[r] = s / f[r * D + r];
  }
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
  for (int r = D - 2; r >= 0; r--) {
    gs_real s = x[r];
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
    for (int c = r + 1; c < D; c++) s -= f[c * D + r] * x[c];
    x[r] = s;
  }
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
  for (int k = D - 1; k >= 0; k--) {
    int p = (int)f[D * D + k];
    if (p != k) {
      gs_real t = x[k];
      x[k] = x[p];
      x[p] = t;
    }
  }
}

// Warp collectives of the engine's kernels. On the device every lane of
// a warp must call them together; on the host (a loop over trajectories)
// they act on the one thread. GS_WARP_SIM compiles the device versions on
// the host, where a test simulates a warp with threads.
#if defined(GS_CUDA) || defined(GS_WARP_SIM)
#define GS_WARPS 1
#endif

// Tile reductions. Defined before the prelude, GS_TILES makes the two
// reductions below sum per tile of GS_TILE consecutive lanes (a power of
// two, scan.TileSize = 8 trajectories) instead of per warp: each tile has
// its own accumulator (every lane of a tile passes the same acc), and a
// tile's sum is formed by a butterfly over its lanes in a fixed order
// (lane t adds the value of lane t^w, w = GS_TILE/2, ..., 1) and added
// without atomics: a tile lies in one warp, which alone writes its
// accumulator, and entry j (counted from the acc passed) is always added
// by the tile's lane j mod GS_TILE, so every address has one writer, in
// its program order. A tile's sums therefore depend on its own
// lanes only, never on the warps, blocks or launches around it, and a tile
// with no lane on adds nothing. On the host (no warps) every trajectory
// adds its own terms to its tile's accumulator in index order.
#if defined(GS_WARPS) && defined(GS_TILES)
#define GS_TILE_LANES(m, lane) (((m) >> ((lane) & ~(GS_TILE - 1))) & (GS_TILE == 32 ? 0xffffffffu : ((1u << (GS_TILE & 31)) - 1u)))
#endif

#if defined(GS_WARPS) && defined(GS_XPOSE)
// GS_XPOSE: each warp of a block has 32 rows of GS_XPOSE_ROW values of
// scratch at the start of the block's dynamic shared memory, for
// gs_acc32's transposition; the block's shared accumulator (GS_SACC), if
// any, follows them (the kernel in thread.cuh places it).
#define GS_XPOSE_ROW 33
#ifdef GS_CUDA
extern __shared__ gs_real gs_smem[];
#endif
GS_DEVICE gs_real* gs_xpose_rows() { return gs_smem + (threadIdx.x >> 5) * (32 * GS_XPOSE_ROW); }
#endif

// gs_acc32 adds the entries x[0:n] (n <= 32) of the lanes of the warp
// whose on is set, summed over those lanes, to acc[0:n]. On the device it
// transposes the 32 lanes' values with 31 shuffles, so that lane l ends
// with entry l's sum, and adds it with one atomic per entry (acc in
// shared or global memory). With GS_TILES the sums are per tile.
GS_DEVICE void gs_acc32(gs_real* acc, const gs_real* xin, bool on, int n) {
#if defined(GS_WARPS) && defined(GS_TILES)
  // Per tile: the same transposition within each block of GS_TILE
  // entries, over the tile's lanes; lane t of a tile ends with the tile's
  // sum of entry b+t of every block b in x[b].
  const unsigned m = __ballot_sync(0xffffffffu, on);
  if (m == 0) return;
  const int lane = threadIdx.x & 31;
  gs_real x[32];
#pragma unroll
  for (int k = 0; k < 32; k++) x[k] = (on && k < n) ? xin[k] : (gs_real)0;
#pragma unroll
  for (int w = GS_TILE / 2; w >= 1; w >>= 1) {
    const bool upper = (lane & w) != 0;
#pragma unroll
    for (int b = 0; b < 32; b += GS_TILE) {
#pragma unroll
      for (int k = 0; k < w; k++) {
        const gs_real send = upper ? x[b + k] : x[b + k + w];
        const gs_real keep = upper ? x[b + k + w] : x[b + k];
        x[b + k] = keep + __shfl_xor_sync(0xffffffffu, send, w);
      }
    }
  }
  if (GS_TILE_LANES(m, lane) != 0) {
    const int t = lane & (GS_TILE - 1);
#pragma unroll
    for (int b = 0; b < 32; b += GS_TILE)
      if (b + t < n) acc[b + t] += x[b];
  }
#elif defined(GS_WARPS) && defined(GS_XPOSE)
  // Through the warp's scratch rows (gs_xpose_rows): lane l writes its
  // entries to row l, then lane k sums column k over the 32 rows and adds
  // it with one atomic. Fewer instructions than the shuffles below (32
  // stores and 32 loads against 31 shuffles of two words, each with its
  // selects), and no array of 32 values held in registers.
  if (!__any_sync(0xffffffffu, on)) return;
  const int lane = threadIdx.x & 31;
  gs_real* rows = gs_xpose_rows();
  for (int k = 0; k < n; k++) rows[lane * GS_XPOSE_ROW + k] = on ? xin[k] : (gs_real)0;
  __syncwarp();
  if (lane < n) {
    gs_real sum = 0;
    for (int l = 0; l < 32; l++) sum += rows[l * GS_XPOSE_ROW + lane];
    atomicAdd(&acc[lane], sum);
  }
  __syncwarp();
#elif defined(GS_WARPS)
  if (!__any_sync(0xffffffffu, on)) return;
  const int lane = threadIdx.x & 31;
  gs_real x[32];
#pragma unroll
  for (int k = 0; k < 32; k++) x[k] = (on && k < n) ? xin[k] : (gs_real)0;
#pragma unroll
  for (int w = 16; w >= 1; w >>= 1) {
    const bool upper = (lane & w) != 0;
#pragma unroll
    for (int k = 0; k < w; k++) {
      const gs_real send = upper ? x[k] : x[k + w];
      const gs_real keep = upper ? x[k + w] : x[k];
      x[k] = keep + __shfl_xor_sync(0xffffffffu, send, w);
    }
  }
  if (lane < n) atomicAdd(&acc[lane], x[0]);
#else
  if (on)
    for (int k = 0; k < n; k++) acc[k] += xin[k];
#endif
}

// Lanes mode (GS_LANEMODE; the functions of SourceSettings.Lanes): one
// warp per trajectory. A vector u (see lanes.go) holds element e in lane
// e: GS_VEC declares it, GS_LANES(w) ... GS_END computes element gs_l in
// lane gs_l (lanes past w repeat lane w-1's indices and compute what
// nobody reads), GS_EL is the lane's element and GS_BCAST(u, e) element e
// in every lane (GS_STAGE and GS_STAGED below do the same through shared
// memory). GS_ACC_LANES(w, m) ... GS_ACC_END runs for the elements
// in mask m (of a function with gs_on set), GS_ACC_ADD adds to the warp's
// own accumulator (no atomics: within a statement its lanes add to
// distinct entries, and GS_ACC_END and GS_SYNCWARP order the statements;
// atomics where the block's warps share one, GS_LANES_BLOCKACC),
// GS_ACC_ATOMIC adds to one shared with other warps, and GS_PAD is the
// padded position of shared entry j. On the host (no warps) a vector is an
// array and the lanes a loop.
#define GS_PAD(j) ((j) + ((j) >> 5))
#if defined(GS_WARPS) && defined(GS_TILEMODE)
// Tile mode (GS_TILEMODE; SourceSettings.Tiles, tiles.go): a warp runs a
// tile of eight trajectories, lane l on trajectory l/4, the four lanes of
// a trajectory computing its replicated values alike. A vector u holds
// element e of the lane's trajectory in lane 4(l/4) + e%4, slot e/4 (8
// slots): GS_LANES(w) ... GS_END runs over the lane's slots gs_m,
// computing element gs_l = l%4 + 4·gs_m (clamped to w-1 past the end).
#define GS_LANE ((int)(threadIdx.x & 31))
#define GS_LANE0 (GS_LANE == 0)
#define GS_VEC(u) gs_real u[8]
#define GS_LANES(w) _Pragma("unroll") for (int gs_m = 0; gs_m < ((w) + 3) / 4; gs_m++) { \
    const int gs_l = (GS_LANE & 3) + 4 * gs_m < (w) ? (GS_LANE & 3) + 4 * gs_m : (w) - 1; (void)gs_l;
#define GS_END }
#define GS_EL(u) u[gs_m]
#define GS_BCAST(u, e) __shfl_sync(0xffffffffu, u[(e) >> 2], (GS_LANE & ~3) | ((e) & 3))
#define GS_ACC_ATOMIC(p, v) atomicAdd(p, v)
#define GS_SYNCWARP() __syncwarp()
#elif defined(GS_WARPS)
#define GS_LANE ((int)(threadIdx.x & 31))
#define GS_LANE0 (GS_LANE == 0)
#define GS_VEC(u) gs_real u
#define GS_LANES(w) { const int gs_l = GS_LANE < (w) ? GS_LANE : (w) - 1; (void)gs_l;
#define GS_END }
#define GS_EL(u) u
#define GS_BCAST(u, e) __shfl_sync(0xffffffffu, u, e)
#define GS_ACC_LANES(w, m) { const int gs_l = GS_LANE; if (gs_on && gs_l < (w) && (((m) >> gs_l) & 1u)) {
#define GS_ACC_END } __syncwarp(); }
#if defined(GS_LANES_BLOCKACC) && GS_LANES_BLOCKACC
// The warps of a block share one accumulator (GS_LANES_BLOCKACC).
#define GS_ACC_ADD(p, v) atomicAdd(p, v)
#else
#define GS_ACC_ADD(p, v) (*(p) += (v))
#endif
#define GS_ACC_ATOMIC(p, v) atomicAdd(p, v)
#define GS_SYNCWARP() __syncwarp()
#if defined(GS_STAGE_LEN) && GS_STAGE_LEN > 0
// GS_STAGE(s, u) writes each lane's element of vector u to slot s of the
// warp's staging row (GS_STAGE_LEN reals per warp at the start of the
// block's dynamic shared memory, lanes.go's laneStageSlots slots of 32),
// and GS_STAGED(s, u, e) reads element e of it in every lane: one
// broadcast load where GS_BCAST takes two shuffles. The first
// __syncwarp keeps the slot's previous readers before the write.
#ifdef GS_CUDA
extern __shared__ gs_real gs_smem[];
#endif
#define GS_STAGE_ROW (gs_smem + (threadIdx.x >> 5) * GS_STAGE_LEN)
#define GS_STAGE(s, u) { __syncwarp(); GS_STAGE_ROW[32 * (s) + GS_LANE] = (u); __syncwarp(); }
#define GS_STAGED(s, u, e) (GS_STAGE_ROW[32 * (s) + (e)])
#endif
#else
#define GS_LANE0 true
#define GS_VEC(u) gs_real u[32]
#define GS_LANES(w) for (int gs_l = 0; gs_l < (w); gs_l++) {
#define GS_END }
#define GS_EL(u) u[gs_l]
#define GS_BCAST(u, e) u[e]
#define GS_ACC_LANES(w, m) for (int gs_l = 0; gs_l < (w); gs_l++) if (gs_on && (((m) >> gs_l) & 1u)) {
#define GS_ACC_END }
#define GS_ACC_ADD(p, v) (*(p) += (v))
#define GS_ACC_ATOMIC(p, v) (*(p) += (v))
#define GS_SYNCWARP()
#define GS_STAGE(s, u)
#define GS_STAGED(s, u, e) u[e]
#endif

#if defined(GS_TILEMODE)
// Tile mode's matrix products and accumulations (tiles.go). On the host
// (no warps) a tile is one trajectory, vectors are arrays of 32 and the
// products plain loops; on the device (and GS_WARP_SIM) they run on the
// warp's eight trajectories at once.

// GS_OUTLINE qualifies tile mode's out-of-line libm functions (tiles.go:
// outline): a call from each of a vector's eight slots to one copy, so
// that a kernel's code fits the instruction caches.
#if defined(GS_CUDA)
#define GS_OUTLINE __device__ __noinline__
#else
#define GS_OUTLINE static
#endif

// gs_mma884 is D = A·B + D of one m8n8k4 float64 tensor-core product: a is
// the lane's element A[l/4][l%4] of the 8×4 A, b its element B[l%4][l/4]
// of the 4×8 B, d its elements [l/4][2(l%4)] and [l/4][2(l%4)+1] of the
// 8×8 D. The product adds the four terms of a row to D in k order, each a
// fused multiply-add: the rounding of gs_dot's fma chain.
#if defined(GS_WARPS)
GS_DEVICE void gs_mma884(gs_real* d, gs_real a, gs_real b) {
#ifdef GS_WARP_SIM
  gs_sim_mma(d, a, b);
#else
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
      : "+d"(d[0]), "+d"(d[1])
      : "d"(a), "d"(b));
#endif
}
#endif

// gs_tdot sets vector u (W <= 32 elements) to the rows of a dense layer:
// element e = bias + Σ_q W[e][q]·x_q, summed as fma(W[e][q], x_q, ·) in
// q order from the bias, with W[e][q] = sh[pad(wb + wq·q + ws·e)] and the
// bias sh[pad(bb + bs·e)] (0 if bb < 0). The K inputs x_q are element
// q + O of vector x (X) or the replicated values x[0:K] (REP). On the
// device one m8n8k4 product per block of 8 rows and 4 inputs, the tile's
// trajectories as columns; the result is moved to the vector's layout by
// shuffles.
template <int W, int K, int O, bool REP>
GS_DEVICE void gs_tdot(gs_real* u, const gs_real* x, const gs_real* GS_RESTRICT sh, int wb, int wq, int ws, int bb, int bs) {
#if defined(GS_WARPS)
  constexpr int NB = (W + 7) / 8, NK = (K + 3) / 4;
  const int lane = GS_LANE, tl = lane & 3, r = lane >> 2;
  gs_real c[NB][2];
#pragma unroll
  for (int b = 0; b < NB; b++) {
    const int e = 8 * b + r;
    const gs_real bv = (bb >= 0 && e < W) ? sh[GS_PAD(bb + bs * e)] : (gs_real)0;
    c[b][0] = bv;
    c[b][1] = bv;
  }
#pragma unroll
  for (int kc = 0; kc < NK; kc++) {
    const int q = 4 * kc + tl;
    gs_real bx;
    if constexpr (REP) {
      // x_q of the lane's own trajectory, q = 4kc + l%4.
      const gs_real x0 = 4 * kc < K ? x[4 * kc] : (gs_real)0;
      const gs_real x1 = 4 * kc + 1 < K ? x[4 * kc + 1] : (gs_real)0;
      const gs_real x2 = 4 * kc + 2 < K ? x[4 * kc + 2] : (gs_real)0;
      const gs_real x3 = 4 * kc + 3 < K ? x[4 * kc + 3] : (gs_real)0;
      bx = tl == 0 ? x0 : tl == 1 ? x1 : tl == 2 ? x2 : x3;
    } else {
      // Element q + O of the lane's trajectory is its own slot kc + O/4.
      bx = q < K ? x[kc + O / 4] : (gs_real)0;
    }
#pragma unroll
    for (int b = 0; b < NB; b++) {
      const int e = 8 * b + r;
      const gs_real a = (q < K && e < W) ? sh[GS_PAD(wb + wq * q + ws * e)] : (gs_real)0;
      gs_mma884(c[b], a, bx);
    }
  }
  // Element e = l%4 + 4m of trajectory t = l/4 is row e%8 of block e/8 =
  // m/2, column t: lane 4(e%8) + t/2, entry t%2.
#pragma unroll
  for (int m = 0; m < (W + 3) / 4; m++) {
    const int src = 4 * (tl + 4 * (m & 1)) + (r >> 1);
    const gs_real v0 = __shfl_sync(0xffffffffu, c[m >> 1][0], src);
    const gs_real v1 = __shfl_sync(0xffffffffu, c[m >> 1][1], src);
    u[m] = (r & 1) ? v1 : v0;
  }
#else
  for (int e = 0; e < W; e++) {
    gs_real s = bb >= 0 ? sh[GS_PAD(bb + bs * e)] : (gs_real)0;
    for (int q = 0; q < K; q++) s = fma(sh[GS_PAD(wb + wq * q + ws * e)], REP ? x[q] : x[q + O], s);
    u[e] = s;
  }
#endif
}

// gs_tfrag returns, in lane l, element 8·blk + l/4 of trajectory tk of
// the tile (0 past n) of v: a vector (MODE 0), the replicated values
// v[0:n] (1), or ones (2). Every lane must call it.
template <int N, int MODE>
GS_DEVICE gs_real gs_tfrag(const gs_real* v, int blk, int tk) {
#if defined(GS_WARPS)
  const int r = GS_LANE >> 2;
  gs_real x = 0;
  if constexpr (MODE == 0) {
    const gs_real v0 = __shfl_sync(0xffffffffu, v[2 * blk], 4 * tk + (r & 3));
    const gs_real v1 = (8 * blk + 4 < N) ? __shfl_sync(0xffffffffu, v[2 * blk + 1], 4 * tk + (r & 3)) : (gs_real)0;
    x = r < 4 ? v0 : v1;
  } else if constexpr (MODE == 1) {
#pragma unroll
    for (int rr = 0; rr < 8; rr++) {
      if (8 * blk + rr >= N) break;
      const gs_real w = __shfl_sync(0xffffffffu, v[8 * blk + rr], 4 * tk);
      x = r == rr ? w : x;
    }
  } else {
    x = 1;
  }
  return 8 * blk + r < N ? x : (gs_real)0;
#else
  return 0;
#endif
}

// gs_touter adds the outer products g·xᵀ of the tile's trajectories with
// on set to the accumulator: for rows i < R in mask rows and columns j <
// C, acc[pad(b0 + rs·i + j)] += Σ_t g_i(t)·x_j(t) (with SHARED: an
// accumulator shared with other warps, unpadded, atomically). g and x
// are vectors or replicated values (GM, XM: gs_tfrag's modes; x may be
// ones, the sum of g over the tile). On the device one m8n8k4 product per
// 8×8 block of entries and half tile (the trajectories as the inner
// dimension, their operands brought by shuffles), each entry added once
// per call; on the host each trajectory adds its products. With bb >= 0
// it also adds g, summed over the tile, to entries pad(bb + bs·i) (a
// layer's bias beside its weights: the product of g with ones that
// gs_touter<R, 1, GM, 2, SHARED> computes, on the same fragments of g).
template <int R, int C, int GM, int XM, bool SHARED>
GS_DEVICE void gs_touter(gs_real* acc, const gs_real* g, const gs_real* x, bool on, unsigned rows, int b0, int rs, int bb = -1, int bs = 0) {
#if defined(GS_WARPS)
  constexpr int NR = (R + 7) / 8, NC = (C + 7) / 8;
  const int lane = GS_LANE, tl = lane & 3, r = lane >> 2;
  gs_real c[NR][NC][2], cb[NR][2];
#pragma unroll
  for (int bi = 0; bi < NR; bi++) {
    cb[bi][0] = cb[bi][1] = 0;
#pragma unroll
    for (int bj = 0; bj < NC; bj++) c[bi][bj][0] = c[bi][bj][1] = 0;
  }
#pragma unroll
  for (int ks = 0; ks < 2; ks++) {
    // This lane's k is trajectory tk = 4ks + l%4 of the tile.
    const int tk = 4 * ks + tl;
    const bool onk = __shfl_sync(0xffffffffu, on ? 1 : 0, 4 * tk) != 0;
    gs_real a[NR], b[NC];
#pragma unroll
    for (int bi = 0; bi < NR; bi++) {
      // A[r][k] = g_{8bi+r} of trajectory tk.
      const gs_real v = gs_tfrag<R, GM>(g, bi, tk);
      a[bi] = (onk && ((rows >> ((8 * bi + r) & 31)) & 1u)) ? v : (gs_real)0;
    }
#pragma unroll
    for (int bj = 0; bj < NC; bj++) {
      // B[k][n] = x_{8bj+n} of trajectory tk, n = l/4.
      const gs_real v = gs_tfrag<C, XM>(x, bj, tk);
      b[bj] = onk ? v : (gs_real)0;
    }
#pragma unroll
    for (int bi = 0; bi < NR; bi++)
#pragma unroll
      for (int bj = 0; bj < NC; bj++) gs_mma884(c[bi][bj], a[bi], b[bj]);
    if (bb >= 0) {
      // B = ones in column 0 (gs_tfrag's mode 2 for one column).
      const gs_real one = (onk && r == 0) ? (gs_real)1 : (gs_real)0;
#pragma unroll
      for (int bi = 0; bi < NR; bi++) gs_mma884(cb[bi], a[bi], one);
    }
  }
  // C[r][2tl+e] of block (bi, bj): row 8bi + r, column 8bj + 2tl + e.
#pragma unroll
  for (int bi = 0; bi < NR; bi++) {
    const int i = 8 * bi + r;
    if (i >= R || !((rows >> i) & 1u)) continue;
#pragma unroll
    for (int bj = 0; bj < NC; bj++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int j = 8 * bj + 2 * tl + e;
        if (j >= C) continue;
        if (SHARED)
          atomicAdd(&acc[b0 + rs * i + j], c[bi][bj][e]);
        else
          acc[GS_PAD(b0 + rs * i + j)] += c[bi][bj][e];
      }
    if (bb >= 0 && tl == 0) {
      if (SHARED)
        atomicAdd(&acc[bb + bs * i], cb[bi][0]);
      else
        acc[GS_PAD(bb + bs * i)] += cb[bi][0];
    }
  }
  __syncwarp();
#else
  if (!on) return;
  for (int i = 0; i < R; i++) {
    if (!((rows >> i) & 1u)) continue;
    if (bb >= 0) acc[SHARED ? bb + bs * i : GS_PAD(bb + bs * i)] += g[i];
    for (int j = 0; j < C; j++) {
      const int at = SHARED ? b0 + rs * i + j : GS_PAD(b0 + rs * i + j);
      acc[at] += XM == 2 ? g[i] : g[i] * x[j];
    }
  }
#endif
}

// gs_tacc_one adds replicated x, summed over the tile's trajectories with
// on set, to acc[j] from lane 0 (j padded; with SHARED, an accumulator
// shared with other warps, unpadded and atomically).
template <bool SHARED>
GS_DEVICE void gs_tacc_one(gs_real* acc, int j, gs_real x, bool on) {
#if defined(GS_WARPS)
  x = on ? x : (gs_real)0;
  x += __shfl_xor_sync(0xffffffffu, x, 4);
  x += __shfl_xor_sync(0xffffffffu, x, 8);
  x += __shfl_xor_sync(0xffffffffu, x, 16);
  if (GS_LANE == 0) {
    if (SHARED)
      atomicAdd(&acc[j], x);
    else
      acc[j] += x;
  }
  __syncwarp();
#else
  if (on) acc[j] += x;
#endif
}
#endif

// gs_warp_max returns the largest v of the warp's lanes.
GS_DEVICE int gs_warp_max(int v) {
#ifdef GS_WARPS
  for (int o = 16; o > 0; o >>= 1) {
    const int w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
#endif
  return v;
}

// gs_warp_any reports whether p holds in any of the warp's lanes.
GS_DEVICE bool gs_warp_any(bool p) {
#ifdef GS_WARPS
  return __any_sync(0xffffffffu, p);
#else
  return p;
#endif
}

// gs_active_any reports whether p holds in any of the warp's lanes that
// run this code now (on the device; p itself elsewhere): for choices that
// change only the cost, not the results, made alike across the lanes
// where they can be, in code that not every lane reaches.
GS_DEVICE bool gs_active_any(bool p) {
#ifdef GS_CUDA
  return __any_sync(__activemask(), p);
#else
  return p;
#endif
}

// gs_warp_add adds the sum over the warp's lanes of v[0:NS] (0 for lanes
// with on false) to acc[0:NS], one atomic per entry and warp: small NS
// entry by entry, larger NS 32 entries at a time (gs_acc32). With
// GS_TILES the sums are per tile, without atomics.
template <int NS>
GS_DEVICE void gs_warp_add(gs_real* acc, const gs_real* v, bool on) {
#if defined(GS_TILEMODE)
  // A tile per warp: sums over its trajectories.
  for (int j = 0; j < NS; j++) gs_tacc_one<false>(acc, GS_PAD(j), v[j], on);
#elif defined(GS_LANEMODE) && GS_LANEMODE
  // One trajectory per warp: every lane holds the same v.
  if (on && GS_LANE0)
    for (int j = 0; j < NS; j++) GS_ACC_ADD(&acc[GS_PAD(j)], v[j]);
  GS_SYNCWARP();
#elif defined(GS_WARPS) && defined(GS_TILES)
  if constexpr (NS > 0 && NS < 8) {
    // Per tile (see GS_TILES): a butterfly over the tile's lanes, after
    // which every lane of the tile holds the same sum; lane j mod GS_TILE
    // adds entry j, as in gs_acc32.
    const unsigned m = __ballot_sync(0xffffffffu, on);
    if (m == 0) return;
    const int lane = threadIdx.x & 31;
    const bool live = GS_TILE_LANES(m, lane) != 0;
    for (int j = 0; j < NS; j++) {
      gs_real x = on ? v[j] : (gs_real)0;
      for (int w = GS_TILE / 2; w >= 1; w >>= 1) x += __shfl_xor_sync(0xffffffffu, x, w);
      if (live && (lane & (GS_TILE - 1)) == (j & (GS_TILE - 1))) acc[j] += x;
    }
  } else if constexpr (NS >= 8) {
    for (int g = 0; g < NS; g += 32) gs_acc32(acc + g, v + g, on, NS - g < 32 ? NS - g : 32);
  }
#elif defined(GS_WARPS)
  if constexpr (NS > 0 && NS < 8) {
    if (!__any_sync(0xffffffffu, on)) return;
    for (int j = 0; j < NS; j++) {
      gs_real x = on ? v[j] : (gs_real)0;
      for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
      if ((threadIdx.x & 31) == 0) atomicAdd(&acc[j], x);
    }
  } else if constexpr (NS >= 8) {
    for (int g = 0; g < NS; g += 32) gs_acc32(acc + g, v + g, on, NS - g < 32 ? NS - g : 32);
  }
#else
  if (on)
    for (int j = 0; j < NS; j++) acc[j] += v[j];
#endif
}

#endif  // GS_PRELUDE_CUH
