// gradsolve gradients' check kernel: for a gradient whose per-trajectory
// results stay in device memory (ode.Settings.KeepGrads; cuda/grads.go),
// whether every trajectory of the launch ended well and every gradient
// value is finite, and the most accepted steps, as two words, so that
// the host learns them without copying the results back. After the
// prelude; compiled as host C++ (the tests' host backend) the kernel is a
// loop.
//
// GS_G_OK (ode.OK) is defined before it by package cuda.

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
  int* out;          // [2] zeroed before: bit 1 a trajectory ill, bit 2 a gradient value not finite; the most accepted steps
};

// gs_g_finite reports whether x is finite (x - x is NaN for ±Inf and NaN).
GS_DEVICE bool gs_g_finite(double x) { return x - x == 0.0; }

// gs_g_check: each thread ORs the verdicts of the trajectories and values
// q = its index, + the grid's threads, …; a warp's are combined by
// shuffles and its first lane adds them to out with one atomic each.
GS_GLOBAL void gs_g_check(const gs_gargs a) {
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
#ifdef GS_CUDA
  for (int o = 16; o > 0; o >>= 1) {
    bits |= __shfl_xor_sync(0xffffffffu, bits, o);
    const int m = __shfl_xor_sync(0xffffffffu, most, o);
    most = m > most ? m : most;
  }
  if ((threadIdx.x & 31) == 0) {
    if (bits) atomicOr(&a.out[0], bits);
    if (most) atomicMax(&a.out[1], most);
  }
#else
  a.out[0] |= bits;
  if (most > a.out[1]) a.out[1] = most;
#endif
}
