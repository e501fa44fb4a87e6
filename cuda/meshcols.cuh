// gradsolve mesh columns' kernel: columns of a resident mesh gathered
// into another in device memory (ode.ColumnSteps; cuda/meshcols.go), so
// that Method Auto's parts of a first pass's mesh (the trajectories it
// replays, the stopped ones it continues) do not go through the host.
// Column x of dst is the first lens[x] steps of column cols[x] of src,
// zeros past them. After the prelude; compiled as host C++ (the tests'
// host backend) the kernel is a loop.

struct gs_margs {
  long long k;        // columns of dst
  long long rows;     // rows of dst
  long long sn;       // columns of src (a row's length)
  long long pad;
  const int* cols;    // [k] the source columns
  const int* lens;    // [k] the steps of each (at most rows)
  const double* src;  // [>= rows][sn] step-major
  double* dst;        // [rows][k] step-major
};

// gs_m_cols: thread e writes step e / k of column e % k (consecutive
// threads write consecutive addresses of dst); ceil(k·rows / 256) blocks
// of 256 threads.
GS_GLOBAL void gs_m_cols(const gs_margs a) {
#ifdef GS_CUDA
  const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= a.k * a.rows) return;
  const long long r = e / a.k, x = e % a.k;
  a.dst[e] = r < a.lens[x] ? a.src[r * a.sn + a.cols[x]] : 0.0;
#else
  for (long long r = 0; r < a.rows; r++)
    for (long long x = 0; x < a.k; x++)
      a.dst[r * a.k + x] = r < a.lens[x] ? a.src[r * a.sn + a.cols[x]] : 0.0;
#endif
}
