// gradsolve saved-states kernel: the saved states of a launch that stay
// in device memory (ode.Settings.KeepSaves; cuda/saves.go) rearranged
// from the engine kernel's component-major array (value c of launch
// trajectory q at ys[c*n + q]; the kept saves themselves, when they are
// read, or with Tuning.oldSaves the arena's after every launch) into a
// row-major array (trajectory q's w = K*Dim values at rows[q*w:]), so that
// reading them is one device-to-host copy in ode.Solution.Ys's order.
// A failed trajectory's row is NaN, as the host's scatter writes it
// (scatterSaves). Float64 only. After the prelude; compiled as host C++
// (the tests' host backend) the kernel is a loop.
//
// GS_S_OK and GS_S_STIFF (ode.OK, ode.Stiff) and GS_FLAG_OVERFLOW are
// defined before it by package cuda (savesSource).

struct gs_sargs {
  long long n;           // trajectories of the launch (a column's length)
  long long w;           // values a trajectory: K*Dim
  long long pad;
  double nan;            // the NaN of a failed row (Go's math.NaN(), bit for bit)
  const int* status;     // [n] the engine kernel's statuses, or null (a given mesh: none fails)
  const int* flags;      // [n] its flags
  const double* ys;      // [w][n] the engine kernel's saved states
  double* rows;          // [n][w] the resident saves
};

// gs_s_failed reports whether launch trajectory q failed (its row is
// NaN): a status neither OK nor Stiff (Job.StopOnStiff keeps a stiff
// trajectory's saves), and no overflowed record (it is run again).
GS_DEVICE bool gs_s_failed(const gs_sargs& a, long long q) {
  if (!a.status) return false;
  const int st = a.status[q];
  return (a.flags[q] & GS_FLAG_OVERFLOW) == 0 && st != GS_S_OK && st != GS_S_STIFF;
}

#define GS_S_TILE 32 // a block's tile: GS_S_TILE trajectories by GS_S_TILE values
#define GS_S_ROWS 8  // its threads: GS_S_TILE by GS_S_ROWS

// gs_s_rows: block b transposes the tile of values [c0, c0+32) of
// trajectories [q0, q0+32) through shared memory, reading a column's 32
// consecutive trajectories and writing a row's 32 consecutive values
// (both coalesced); blocks ceil(w/32)·ceil(n/32) of 256 threads.
GS_GLOBAL void gs_s_rows(const gs_sargs a) {
#ifdef GS_CUDA
  __shared__ double tile[GS_S_TILE][GS_S_TILE + 1];
  const long long tw = (a.w + GS_S_TILE - 1) / GS_S_TILE;
  const long long b = blockIdx.x;
  const long long c0 = (b % tw) * GS_S_TILE, q0 = (b / tw) * GS_S_TILE;
  const int tx = threadIdx.x % GS_S_TILE, ty = threadIdx.x / GS_S_TILE;
  for (int j = ty; j < GS_S_TILE; j += GS_S_ROWS) {
    const long long c = c0 + j, q = q0 + tx;
    if (c < a.w && q < a.n) tile[j][tx] = a.ys[c * a.n + q];
  }
  __syncthreads();
  for (int j = ty; j < GS_S_TILE; j += GS_S_ROWS) {
    const long long q = q0 + j, c = c0 + tx;
    if (q < a.n && c < a.w) a.rows[q * a.w + c] = gs_s_failed(a, q) ? a.nan : tile[tx][j];
  }
#else
  for (long long q = 0; q < a.n; q++) {
    const bool bad = gs_s_failed(a, q);
    for (long long c = 0; c < a.w; c++) a.rows[q * a.w + c] = bad ? a.nan : a.ys[c * a.n + q];
  }
#endif
}
