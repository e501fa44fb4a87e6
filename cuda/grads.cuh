// gradsolve gradients' check kernel: for a gradient whose per-trajectory
// results stay in device memory (ode.Settings.KeepGrads; cuda/grads.go),
// whether every trajectory of the launch ended well and every gradient
// value is finite, and the most accepted steps, as two words, and the
// exact sum of the loss terms as GS_G_LIMBS fixed-point limbs, so that
// the host learns them without copying the results back. After the
// prelude; compiled as host C++ (the tests' host backend) the kernel is a
// loop.
//
// GS_G_OK (ode.OK) is defined before it by package cuda.

// The loss terms' sum is exact: a finite double is m·2^(E−1074) with an
// integer mantissa m < 2^53 and 0 ≤ E ≤ 2045 (E = 0 for subnormals), so
// Σ terms = 2^−1074 · Σ ±m·2^E, an integer sum. Limb k holds the sum of
// the 32-bit chunks at bits [32k, 32k+32) of each |m|·2^E, signed, in a
// 64-bit two's-complement accumulator: a chunk is below 2^32, so up to
// 2^31 terms add without overflow, and integer addition does not depend
// on the order (atomics, blocks, threads). The host carries the limbs
// into one integer and rounds it once (grads.go, gradsSum).
#define GS_G_LIMBS 66 // (2045 + 53 + 31) / 32 + 1: |m|·2^E < 2^2098

struct gs_gargs {
  long long n;       // trajectories of the launch
  long long ny;      // values of gy0: n*Dim
  long long np;      // values of gp: n*Params
  long long mask;    // the flags that make a trajectory ill (stiff, overflow, tangent)
  const int* status; // [n] the engine kernel's statuses, or null (a given mesh)
  const int* flags;  // [n] its flags, or null
  const int* acc;    // [n] its accepted steps, or null
  const double* gy0; // [ny] dL/dy0, in the engine kernel's order
  const double* gp;  // [np] dL/dp, or null
  const double* loss; // [n] the loss terms, or null
  int* out;          // [2 + 2·GS_G_LIMBS] bit 1 a trajectory ill, bit 2 a gradient value not finite, bit 4 a
                     // loss term not finite; the most accepted steps; then the loss terms' limbs (long long):
                     // zeroed before where sums is null, else written by the launch's last block
  int* sums;         // [GS_G_SUMS] or null: the accumulators of out's words and limbs, then a count of the
                     // blocks done, 0 before the launch and again after it (see gs_g_check)
};

// GS_G_SUMS is the ints of gs_gargs.sums: out's words and limbs, and the
// count of blocks done.
#define GS_G_SUMS (2 + 2 * GS_G_LIMBS + 2)

// gs_g_finite reports whether x is finite (x - x is NaN for ±Inf and NaN).
GS_DEVICE bool gs_g_finite(double x) { return x - x == 0.0; }

// gs_g_chunks splits the finite double x into its limb k (the first of
// its three) and the signed 32-bit chunks c[0..2] of |m|·2^E at limbs k,
// k+1, k+2 (see GS_G_LIMBS). It reports false for ±Inf and NaN.
GS_DEVICE bool gs_g_chunks(double x, int* k, long long c[3]) {
#ifdef GS_CUDA
  const unsigned long long b = (unsigned long long)__double_as_longlong(x);
#else
  unsigned long long b;
  __builtin_memcpy(&b, &x, 8);
#endif
  const int ef = (int)((b >> 52) & 0x7ff);
  if (ef == 0x7ff) return false;
  unsigned long long m = b & 0xfffffffffffffULL;
  int e = 0;
  if (ef != 0) m |= 1ULL << 52, e = ef - 1;
  const int o = e & 31;
  const unsigned long long lo = m << o, hi = o ? m >> (64 - o) : 0;
  const long long s = (long long)(b >> 63) ? -1 : 1;
  *k = e >> 5;
  c[0] = s * (long long)(lo & 0xffffffffULL);
  c[1] = s * (long long)(lo >> 32);
  c[2] = s * (long long)hi;
  return true;
}

// gs_g_check: each thread ORs the verdicts of the trajectories and values
// q = its index, + the grid's threads, …; a warp's are combined by
// shuffles and its first lane adds them to out with one atomic each.
// With sums (package cuda's default since session 48; null with
// Tuning.checkMemset) the blocks add into sums instead, which every
// launch leaves as it found it, 0: the last block to finish (the count
// of blocks done, after each block's fence) moves them to out and
// zeroes them, so that no memset of out is queued before the launches.
GS_GLOBAL void gs_g_check(const gs_gargs a) {
  int* const dst = a.sums ? a.sums : a.out;
#ifdef GS_CUDA
  const long long q0 = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long step = (long long)gridDim.x * blockDim.x;
#else
  const long long q0 = 0, step = 1;
#endif
  int bits = 0, most = 0;
  for (long long q = q0; q < a.n; q += step) {
    if (a.status && a.status[q] != GS_G_OK) bits |= 1;
    if (a.flags && (a.flags[q] & (int)a.mask) != 0) bits |= 1;
    if (a.acc && a.acc[q] > most) most = a.acc[q];
  }
  for (long long c = q0; c < a.ny; c += step) {
    if (!gs_g_finite(a.gy0[c])) bits |= 2;
  }
  for (long long c = q0; a.gp && c < a.np; c += step) {
    if (!gs_g_finite(a.gp[c])) bits |= 2;
  }
  long long* limbs = (long long*)(dst + 2);
#ifdef GS_CUDA
  // The loss terms: a warp's chunks summed by shuffles where its terms
  // share their first limb (terms of one size, the common case), else by
  // shuffles group by group of the lanes that share one (a round for
  // each first limb the warp's terms have: two where its terms lie on
  // both sides of a power of 2^32's boundary, as pk's crossing times on
  // either side of 2), or, with GS_G_LANE_ATOMICS (package cuda's
  // Tuning.checkLaneAtomics, the way before session 47), lane by lane,
  // into the block's limbs in shared memory; then one atomic a nonzero
  // limb a block. The sums are of integers: the same limbs either way.
  // The loop is the warp's: every lane runs it as often.
  __shared__ unsigned long long lim[GS_G_LIMBS];
  for (int k = threadIdx.x; k < GS_G_LIMBS; k += blockDim.x) lim[k] = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  for (long long base = q0 - lane; a.loss && base < a.n; base += step) {
    const long long q = base + lane;
    int k = 0;
    long long c[3] = {0, 0, 0};
    if (q < a.n && !gs_g_chunks(a.loss[q], &k, c)) bits |= 4, c[0] = c[1] = c[2] = 0;
    const bool some = (c[0] | c[1] | c[2]) != 0;
    const unsigned mask = __ballot_sync(0xffffffffu, some);
    if (mask == 0) continue;
    const int k0 = __shfl_sync(0xffffffffu, k, __ffs(mask) - 1);
    if (__all_sync(0xffffffffu, !some || k == k0)) {
      for (int o = 16; o > 0; o >>= 1) {
        for (int i = 0; i < 3; i++) c[i] += __shfl_xor_sync(0xffffffffu, c[i], o);
      }
      if (lane == 0) {
        for (int i = 0; i < 3; i++) {
          if (c[i]) atomicAdd(&lim[k0 + i], (unsigned long long)c[i]);
        }
      }
    } else {
#ifdef GS_G_LANE_ATOMICS
      if (some) {
        for (int i = 0; i < 3; i++) {
          if (c[i]) atomicAdd(&lim[k + i], (unsigned long long)c[i]);
        }
      }
#else
      // Each round sums the chunks of the lanes whose first limb is that
      // of the first lane left (the others add 0) and takes them out.
      bool left = some;
      for (unsigned m = mask; m != 0; m = __ballot_sync(0xffffffffu, left)) {
        const int kg = __shfl_sync(0xffffffffu, k, __ffs(m) - 1);
        const bool in = left && k == kg;
        long long g[3] = {in ? c[0] : 0, in ? c[1] : 0, in ? c[2] : 0};
        for (int o = 16; o > 0; o >>= 1) {
          for (int i = 0; i < 3; i++) g[i] += __shfl_xor_sync(0xffffffffu, g[i], o);
        }
        if (lane == 0) {
          for (int i = 0; i < 3; i++) {
            if (g[i]) atomicAdd(&lim[kg + i], (unsigned long long)g[i]);
          }
        }
        left = left && !in;
      }
#endif
    }
  }
  __syncthreads();
  for (int k = threadIdx.x; k < GS_G_LIMBS; k += blockDim.x) {
    if (lim[k]) atomicAdd((unsigned long long*)&limbs[k], lim[k]);
  }
  for (int o = 16; o > 0; o >>= 1) {
    bits |= __shfl_xor_sync(0xffffffffu, bits, o);
    const int m = __shfl_xor_sync(0xffffffffu, most, o);
    most = m > most ? m : most;
  }
  if ((threadIdx.x & 31) == 0) {
    if (bits) atomicOr(&dst[0], bits);
    if (most) atomicMax(&dst[1], most);
  }
  if (a.sums) {
    // Each thread's atomics before the block's count; the last block's
    // exchanges (at the device's L2, as the atomics) read every block's
    // sums and leave 0.
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd((unsigned*)&a.sums[GS_G_SUMS - 2], 1u) == gridDim.x - 1;
    __syncthreads();
    if (last) {
      for (int k = threadIdx.x; k < 2 + 2 * GS_G_LIMBS; k += blockDim.x) a.out[k] = atomicExch(&a.sums[k], 0);
      if (threadIdx.x == 0) atomicExch(&a.sums[GS_G_SUMS - 2], 0);
    }
  }
#else
  for (long long q = 0; a.loss && q < a.n; q++) {
    int k = 0;
    long long c[3];
    if (!gs_g_chunks(a.loss[q], &k, c)) {
      bits |= 4;
      continue;
    }
    // (unsigned: the wrap-around of two's complement, as the atomics')
    for (int i = 0; i < 3; i++) limbs[k + i] = (long long)((unsigned long long)limbs[k + i] + (unsigned long long)c[i]);
  }
  dst[0] |= bits;
  if (most > dst[1]) dst[1] = most;
  if (a.sums) {
    // (one call: the last block)
    for (int k = 0; k < 2 + 2 * GS_G_LIMBS; k++) a.out[k] = a.sums[k], a.sums[k] = 0;
  }
#endif
}
