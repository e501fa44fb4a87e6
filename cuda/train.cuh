// gradsolve training kernels: what a fit does between two gradients of
// the engine's kernel, in device memory (cuda/train.go). They read the
// engine kernel's outputs in its arena and the trainer's arrays: the
// fitted values x, the gradient g with respect to x, the optimiser's
// moments, and write x back into the arena's inputs. Float64 only. After
// the prelude; every kernel takes the one argument struct gs_targs (8-byte
// words, set per launch by the host) and runs blocks of GS_TB threads;
// compiled as host C++ (the tests' host backend) each kernel is a loop.
//
// Sums are formed in a fixed order (a block's tree, then the blocks in
// index order), so a step's loss and gradient do not depend on timing;
// only counts use atomics.

#ifndef GS_TB         // (the tests' simulated blocks take smaller ones)
#define GS_TB 256    // threads per block
#define GS_TCH 2048  // elements per block of a chunked sum's first pass
#endif
#define GS_TSEG 64   // longest segment one thread sums alone

// Counters after the two sums of gs_targs.sum (the summary an evaluation
// reads back), and again from GS_T_ACC on, where the kernels add them up
// (gs_t_sum moves them into the summary).
#define GS_T_FAILED 0  // trajectories a step cannot use
#define GS_T_OVER 1    // trajectories whose record buffer was too short
#define GS_T_MAXACC 2  // most accepted steps of a trajectory
#define GS_T_NONFIN 3  // entries of x the last update made non-finite
#define GS_T_ACC 6     // the counters' accumulators: sum[6..10)
#define GS_T_TICKET 10 // gs_t_sum's count of its blocks done
#define GS_T_HYPER 11  // the update's rule, where gs_targs.hyper is set (sum[11..20))

// The engine kernel's flags (kernel.cuh's and events.cuh's, package
// cuda's flagStiff, flagOverflow, flagTangent), which this source is
// compiled without.
#ifndef GS_FLAG_STIFF
#define GS_FLAG_STIFF 1
#define GS_FLAG_OVERFLOW 2
#endif
#ifndef GS_FLAG_TANGENT
#define GS_FLAG_TANGENT 4
#endif

struct gs_targs {
  long long n;       // trajectories
  long long d, np;   // state and parameter dimensions
  long long nsh;     // the field's shared parameters (the engine's gs is [2][nsh])
  long long len;     // len(x)
  long long fits, per, stride;
  long long np1, ny1, ns1;  // fitted P columns, Y0 components, shared parameters
  long long count;   // elements of this launch's work (see each kernel)
  long long seg;     // segment length (gs_t_seg)
  long long ncol;    // segments per row of segments (gs_t_seg)
  long long ostride; // output stride of a row of segments (gs_t_seg)
  long long mode;    // kernel-specific
  double scale;      // the loss's scale
  double lr, b1, b2, eps, wd, c1, c2, mu, clip;
  const int* status;  // [n] the engine's outputs
  const int* flags;
  const int* acc;
  const double* terms;
  const double* gp;   // [np][n]
  const double* gy0;  // [d][n]
  const double* gs;   // [2][nsh]
  double* pin;        // [np][n] the engine's inputs
  double* y0in;       // [d][n]
  double* sh;         // the shared block
  const long long* pcols;  // [np1]
  const long long* ycols;  // [ny1]
  const long long* shpos;  // [ns1] places of the shared parameters in sh
  const double* src;  // a sum's input
  double* dst;        // a sum's output
  double* x;
  double* g;
  double* m0;         // the moments (Adam m, v; SGD b)
  double* m1;
  double* prev;
  double* norms;      // [fits]
  double* partial;    // chunk sums
  double* sum;        // [2] loss, Σg², then the counters (unsigned long long)
  const double* hyper; // null, or lr, b1, b2, eps, wd, c1, c2, mu, clip in device
                       // memory (a step's graph reads them there; gs_t_update)
};

GS_DEVICE bool gs_t_finite(double x) { return x - x == 0; }

// gs_t_bad reports whether trajectory i's results are unusable for a
// step: failed, stiff (flag 1), an event crossed tangentially (flag 4:
// its time has no derivative), or a non-finite term or gradient.
GS_DEVICE bool gs_t_bad(const gs_targs& a, long long i) {
  if (a.status[i] != 0 || (a.flags[i] & (GS_FLAG_STIFF | GS_FLAG_TANGENT)) || !gs_t_finite(a.terms[i])) return true;
  for (long long c = 0; c < a.d; c++)
    if (!gs_t_finite(a.gy0[c * a.n + i])) return true;
  for (long long c = 0; c < a.np; c++)
    if (!gs_t_finite(a.gp[c * a.n + i])) return true;
  return false;
}

// gs_t_elem is element k of a chunked sum: loss term k with its
// trajectory's checks (mode 0), or src[k]² (mode 1).
GS_DEVICE double gs_t_elem(const gs_targs& a, long long k, unsigned long long* cnt) {
  if (a.mode == 0) {
    if (a.flags[k] & GS_FLAG_OVERFLOW) {
      cnt[GS_T_OVER]++;
    } else if (gs_t_bad(a, k)) {
      cnt[GS_T_FAILED]++;
    }
    if ((unsigned long long)a.acc[k] > cnt[GS_T_MAXACC]) cnt[GS_T_MAXACC] = (unsigned long long)a.acc[k];
    return a.terms[k];
  }
  return a.src[k] * a.src[k];
}

#ifdef GS_CUDA
// gs_t_block sums v over the block in a fixed tree; thread 0 gets it.
__device__ double gs_t_block(double v) {
  __shared__ double red[GS_TB];
  const int t = threadIdx.x;
  red[t] = v;
  __syncthreads();
  for (int w = GS_TB / 2; w > 0; w >>= 1) {
    if (t < w) red[t] += red[t + w];
    __syncthreads();
  }
  const double r = red[0];
  __syncthreads();
  return r;
}
#endif

// gs_t_sum is a chunked sum over count elements in one launch (mode 0:
// the loss terms and their checks, mode 1: the squares of src): block c
// sums chunk c of GS_TCH elements into partial[c]; the last block to
// finish (a ticket, taken after a fence, on the counter GS_T_TICKET, which
// that block resets) sums the partials in index order, each thread a
// contiguous run of them, then the block's tree, and writes *dst = Σ ·
// scale. Two passes, the second a launch of its own, gave the same sums
// bit for bit: the same chunks, the same order. In mode 0 the last block
// also moves the counters the steps add up (GS_T_ACC) into the summary
// (sum[2..]) and zeroes them, so no launch clears them.
GS_DEVICE void gs_t_move(const gs_targs& a) {
  unsigned long long* cnt = (unsigned long long*)(a.sum + 2);
  unsigned long long* acc = (unsigned long long*)(a.sum + GS_T_ACC);
  for (int i = 0; i < 4; i++) {
#ifdef GS_CUDA
    cnt[i] = atomicExch(&acc[i], 0ULL);
#else
    cnt[i] = acc[i];
    acc[i] = 0;
#endif
  }
}

GS_GLOBAL void gs_t_sum(const gs_targs a) {
  unsigned long long* acc = (unsigned long long*)(a.sum + GS_T_ACC);
#ifdef GS_CUDA
  __shared__ bool last;
  const long long c = blockIdx.x;
  const long long lo = c * GS_TCH, hi = lo + GS_TCH < a.count ? lo + GS_TCH : a.count;
  unsigned long long mine[4] = {0, 0, 0, 0};
  double s = 0;
  for (long long k = lo + threadIdx.x; k < hi; k += GS_TB) s += gs_t_elem(a, k, mine);
  s = gs_t_block(s);
  if (a.mode == 0) {
    if (mine[GS_T_FAILED]) atomicAdd(&acc[GS_T_FAILED], mine[GS_T_FAILED]);
    if (mine[GS_T_OVER]) atomicAdd(&acc[GS_T_OVER], mine[GS_T_OVER]);
    if (mine[GS_T_MAXACC]) atomicMax(&acc[GS_T_MAXACC], mine[GS_T_MAXACC]);
    __threadfence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    a.partial[c] = s;
    __threadfence();
    unsigned long long* ticket = (unsigned long long*)(a.sum + GS_T_TICKET);
    last = atomicAdd(ticket, 1ULL) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // gs_t_total's pass over the gridDim.x partials.
  const long long nc = gridDim.x, per = (nc + GS_TB - 1) / GS_TB;
  const volatile double* part = a.partial;
  s = 0;
  const long long plo = threadIdx.x * per;
  for (long long q = plo; q < plo + per && q < nc; q++) s += part[q];
  s = gs_t_block(s);
  if (threadIdx.x == 0) {
    *a.dst = s * a.scale;
    *(unsigned long long*)(a.sum + GS_T_TICKET) = 0;
    if (a.mode == 0) gs_t_move(a);
  }
#else
  long long nc = 0;
  for (long long c = 0; c * GS_TCH < a.count; c++, nc++) {
    const long long lo = c * GS_TCH, hi = lo + GS_TCH < a.count ? lo + GS_TCH : a.count;
    double s = 0;
    for (long long k = lo; k < hi; k++) s += gs_t_elem(a, k, acc);
    a.partial[c] = s;
  }
  double s = 0;
  for (long long c = 0; c < (nc > 0 ? nc : 1); c++) s += a.partial[c];
  *a.dst = s * a.scale;
  if (a.mode == 0) gs_t_move(a);
#endif
}

// gs_t_segsum is segment q of gs_t_seg: row b = q / ncol, column j =
// q % ncol, elements src[col(j) + b·seg + k] for k < seg, squared if
// mode is 1, where col(j) = pcols[j]·n with pcols, else 0.
GS_DEVICE const double* gs_t_segbase(const gs_targs& a, long long q) {
  const long long b = q / a.ncol, j = q % a.ncol;
  return a.src + (a.pcols ? a.pcols[j] * a.n : 0) + b * a.seg;
}

GS_DEVICE void gs_t_segput(const gs_targs& a, long long q, double s) {
  const long long b = q / a.ncol, j = q % a.ncol;
  a.dst[b * a.ostride + j] = a.mode == 1 ? sqrt(s) : s;
}

// gs_t_seg: count segments of seg elements each, summed (mode 0: the P
// part of the gradient, Σ over a fit's trajectories) or summed in squares
// and rooted (mode 1: each fit's gradient norm). Segments of at most
// GS_TSEG elements take a thread each, in order; longer ones a block each.
GS_GLOBAL void gs_t_seg(const gs_targs a) {
#ifdef GS_CUDA
  if (a.seg <= GS_TSEG) {
    const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= a.count) return;
    const double* s0 = gs_t_segbase(a, q);
    double s = 0;
    for (long long k = 0; k < a.seg; k++) s += a.mode == 1 ? s0[k] * s0[k] : s0[k];
    gs_t_segput(a, q, s);
    return;
  }
  const long long q = blockIdx.x;
  const double* s0 = gs_t_segbase(a, q);
  double s = 0;
  const long long per = (a.seg + GS_TB - 1) / GS_TB, lo = threadIdx.x * per;
  for (long long k = lo; k < lo + per && k < a.seg; k++) s += a.mode == 1 ? s0[k] * s0[k] : s0[k];
  s = gs_t_block(s);
  if (threadIdx.x == 0) gs_t_segput(a, q, s);
#else
  for (long long q = 0; q < a.count; q++) {
    const double* s0 = gs_t_segbase(a, q);
    double s = 0;
    for (long long k = 0; k < a.seg; k++) s += a.mode == 1 ? s0[k] * s0[k] : s0[k];
    gs_t_segput(a, q, s);
  }
#endif
}

// gs_t_gyk is element k of gs_t_gy's work: the Y0 part of the gradient
// (k < ny1·n: component k / n of trajectory k % n), then the shared part
// (j = k − ny1·n < ns1); in mode 1 element j also zeroes the engine's
// shared gradient gs[j] and gs[nsh + j] once read (j < nsh), which the
// engine kernel of the next evaluation adds to.
GS_DEVICE void gs_t_gyk(const gs_targs& a, long long k) {
  const long long ny = a.ny1 * a.n;
  if (k < ny) {
    const long long jj = k / a.n, i = k % a.n, b = i / a.per;
    a.g[b * a.stride + a.np1 + (i - b * a.per) * a.ny1 + jj] = a.gy0[a.ycols[jj] * a.n + i];
    return;
  }
  const long long j = k - ny;
  // As the engine's result: the steps' sum plus the loss's own, scaled.
  if (j < a.ns1) a.g[a.fits * a.stride + j] = a.gs[j] + a.scale * a.gs[a.nsh + j];
  if (a.mode == 1 && j < a.nsh) {
    double* gs = (double*)a.gs;
    gs[j] = 0;
    gs[a.nsh + j] = 0;
  }
}

// gs_t_gy: the Y0 and shared parts of the gradient (count = ny1·n + ns1,
// or ny1·n + max(ns1, nsh) in mode 1).
GS_GLOBAL void gs_t_gy(const gs_targs a) {
#ifdef GS_CUDA
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (k < a.count) gs_t_gyk(a, k);
#else
  for (long long k = 0; k < a.count; k++) gs_t_gyk(a, k);
#endif
}

// gs_t_fit is the fit whose part of x holds entry k.
GS_DEVICE long long gs_t_fit(const gs_targs& a, long long k) { return a.fits == 1 ? 0 : k / a.stride; }

// gs_t_clipk scales entry k of the gradient as optim.ClipNorm scales its
// fit's part: by clip/norm where the norm exceeds clip and is finite.
GS_DEVICE void gs_t_clipk(const gs_targs& a, long long k) {
  const double nb = a.norms[gs_t_fit(a, k)];
  if (nb > a.clip && nb - nb == 0) a.g[k] *= a.clip / nb;
}

GS_GLOBAL void gs_t_clip(const gs_targs a) {
#ifdef GS_CUDA
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (k < a.len) gs_t_clipk(a, k);
#else
  for (long long k = 0; k < a.len; k++) gs_t_clipk(a, k);
#endif
}

// gs_t_updk updates entry k of x with the rule (optim.Rule.Apply's
// arithmetic, term by term): mode 1 Adam/AdamW (m0 = m, m1 = v), 2 SGD
// without momentum, 3 heavy ball (m0 = b), 4 Nesterov.
GS_DEVICE void gs_t_updk(const gs_targs& a, long long k, unsigned long long* nonfin) {
  const double g = a.g[k], p = a.x[k];
  a.prev[k] = p;
  double q;
  switch (a.mode) {
  case 1: {
    const double m = a.b1 * a.m0[k] + (1 - a.b1) * g;
    const double v = a.b2 * a.m1[k] + (1 - a.b2) * g * g;
    a.m0[k] = m;
    a.m1[k] = v;
    q = p - a.lr * a.wd * p - a.lr * (m / a.c1) / (sqrt(v / a.c2) + a.eps);
    break;
  }
  case 2:
    q = p - a.lr * g;
    break;
  default: {
    const double b = a.mu * a.m0[k] + g;
    a.m0[k] = b;
    q = a.mode == 4 ? p - a.lr * (g + a.mu * b) : p - a.lr * b;
  }
  }
  a.x[k] = q;
  if (!gs_t_finite(q)) (*nonfin)++;
}

GS_GLOBAL void gs_t_update(const gs_targs a0) {
  // The rule's scalars from the struct, or from device memory where a
  // graph's launch, whose struct is fixed, reads them (hyper).
  gs_targs a = a0;
  if (a0.hyper) {
    a.lr = a0.hyper[0], a.b1 = a0.hyper[1], a.b2 = a0.hyper[2], a.eps = a0.hyper[3], a.wd = a0.hyper[4];
    a.c1 = a0.hyper[5], a.c2 = a0.hyper[6], a.mu = a0.hyper[7], a.clip = a0.hyper[8];
  }
  unsigned long long* cnt = (unsigned long long*)(a.sum + GS_T_ACC);
#ifdef GS_CUDA
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long nf = 0;
  if (k < a.len) gs_t_updk(a, k, &nf);
  if (nf) atomicAdd(&cnt[GS_T_NONFIN], nf);
#else
  for (long long k = 0; k < a.len; k++) gs_t_updk(a, k, &cnt[GS_T_NONFIN]);
#endif
}

// gs_t_putk writes element k of x's image in the engine's inputs: the P
// columns (k < np1·n: column k / n of trajectory k % n, its fit's value),
// the Y0 components, then the shared parameters.
GS_DEVICE void gs_t_putk(const gs_targs& a, long long k) {
  const long long np = a.np1 * a.n, ny = a.ny1 * a.n;
  if (k < np) {
    const long long j = k / a.n, i = k % a.n;
    a.pin[a.pcols[j] * a.n + i] = a.x[(i / a.per) * a.stride + j];
    return;
  }
  k -= np;
  if (k < ny) {
    const long long jj = k / a.n, i = k % a.n, b = i / a.per;
    a.y0in[a.ycols[jj] * a.n + i] = a.x[b * a.stride + a.np1 + (i - b * a.per) * a.ny1 + jj];
    return;
  }
  k -= ny;
  a.sh[a.shpos[k]] = a.x[a.fits * a.stride + k];
}

// gs_t_put: x into the engine's inputs (count = np1·n + ny1·n + ns1).
GS_GLOBAL void gs_t_put(const gs_targs a) {
#ifdef GS_CUDA
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (k < a.count) gs_t_putk(a, k);
#else
  for (long long k = 0; k < a.count; k++) gs_t_putk(a, k);
#endif
}
