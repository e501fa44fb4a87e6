{{- /*
thread.cuh: the thread layout (one thread per trajectory) of the
engine's kernels: its hooks of the driver loop ("hooks", "loss-own"; see
kernel.cuh) and the kernel ("entry"). On the device thread t runs
trajectory first + t (a launch's chunk of its n trajectories, the
arrays' stride n); the block reduces its shared gradients in shared memory
(SharedAcc; after the warps' transposition rows with Xpose), or each
tile of TileSize trajectories into its own sum (TileSums); on the host
the kernel is a loop over the trajectories, and on a simulated warp
(GS_WARP_SIM, the tests') lane l runs trajectories l, l + 32, ...
*/ -}}
{{define "hooks"}}
// One thread per trajectory: a trajectory's loops are its thread's own,
// and it writes its results; the loss's own dL/ds goes to the second half
// of the accumulator.
#define GS_ANY(p) (p)
#define GS_STEPS(len) (len)
#define GS_WRITER true
#define GS_WRITTEN()
#define GS_LOSS_ACC_AT (acc + GS_NS)
{{- end}}

{{define "loss-own" -}}
    gs_warp_add<GS_NS>(acc + GS_NS, &r.v[{{if .LossDirect}}GS_D + GS_NP{{else}}1 + GS_D + GS_K * GS_D + GS_NP{{end}}], act);
{{- end}}

{{define "entry"}}
{{- if gt .ThreadMinBlocks 0}}
// Config.ThreadMinBlocks: at least {{.ThreadMinBlocks}} blocks of {{.ThreadBoundsBlock}} threads per
// multiprocessor, so that ptxas caps a thread's registers to let them run
// (one round of the job's blocks); none in a kernel compiled in parts
// (GS_UNITS), whose units are compiled with that cap instead
// (Config.UnitRegs).
#if defined(GS_CUDA) && !defined(GS_UNITS)
#define GS_BOUNDS __launch_bounds__({{.ThreadBoundsBlock}}, {{.ThreadMinBlocks}})
#else
#define GS_BOUNDS
#endif
GS_GLOBAL void GS_BOUNDS GS_KERNEL_NAME(const gs_args a) {
{{- else}}
GS_GLOBAL void GS_KERNEL_NAME(const gs_args a) {
{{- end}}
#ifdef GS_CUDA
{{- if .SharedAcc}}
  extern __shared__ gs_real gs_smem[];
{{- if .Xpose}}
  gs_real* acc = gs_smem + (blockDim.x >> 5) * (32 * GS_XPOSE_ROW);  // after the warps' scratch
{{- else}}
  gs_real* acc = gs_smem;
{{- end}}
  for (int j = threadIdx.x; j < 2 * GS_NS; j += blockDim.x) acc[j] = 0;
  __syncthreads();
{{- else if and .TileSums .Grad}}
  // Each tile of GS_TILE trajectories has its own accumulator, a.gs[tile][2][NS].
  gs_real* acc = a.gs + ((a.first + (long long)blockIdx.x * blockDim.x + threadIdx.x) / GS_TILE) * (2 * GS_NS);
{{- else}}
  gs_real* acc = a.gs;
{{- end}}
  // Thread t runs trajectory first + t (first is a multiple of 32: the
  // warps and tiles are those of a launch of all n).
  const long long i = a.first + (long long)blockIdx.x * blockDim.x + threadIdx.x;
  gs_body(a, i, i < a.end, acc, a.sh, a.sh + GS_NS);
{{- if .SharedAcc}}
  __syncthreads();
  for (int j = threadIdx.x; j < 2 * GS_NS; j += blockDim.x) atomicAdd(&a.gs[j], acc[j]);
{{- end}}
#elif defined(GS_WARP_SIM)
  // One simulated warp (tests): lane l runs trajectories l, l + 32, ...,
  // the lanes in rounds as a device warp's threads (valid false past the
  // end).
  for (long long i0 = a.first; i0 < a.end; i0 += 32) {
    const long long i = i0 + (threadIdx.x & 31);
{{- if and .TileSums .Grad}}
    gs_body(a, i, i < a.end, a.gs + (i / GS_TILE) * (2 * GS_NS), a.sh, a.sh + GS_NS);
{{- else}}
    gs_body(a, i, i < a.end, a.gs, a.sh, a.sh + GS_NS);
{{- end}}
  }
#else
{{- if and .TileSums .Grad}}
  for (long long i = a.first; i < a.end; i++) gs_body(a, i, true, a.gs + (i / GS_TILE) * (2 * GS_NS), a.sh, a.sh + GS_NS);
{{- else}}
  for (long long i = a.first; i < a.end; i++) gs_body(a, i, true, a.gs, a.sh, a.sh + GS_NS);
{{- end}}
#endif
}
{{- end}}
