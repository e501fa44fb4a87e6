{{- /*
tile.cuh: the tile layout (one warp per tile of TileWidth trajectories in
lockstep, tiles.go) of the engine's kernels: its hooks of the driver
loop ("hooks", "loss-own"; see kernel.cuh and warp.cuh) and the kernel
("entry"). Lane l runs trajectory TileWidth·tile + l/4; the shared block
and the warps' accumulators are lanes mode's in global memory, or in the
block's shared memory where they fit (TileSharedSh, TileSharedAcc);
warps take their tiles in turn from a counter (TileDynamic) or every
gridth one.
*/ -}}
{{define "hooks"}}
{{- template "warp-hooks" .}}
// A warp per tile: the trajectories of a tile run in lockstep while any
// of them runs (GS_ANY), and the first of a trajectory's four lanes
// (GS_TRAJ_LEAD) writes its results, which the others read after a warp
// barrier (GS_WRITTEN). On the host a tile is one trajectory.
#if defined(GS_WARPS)
#define GS_ANY(p) __any_sync(0xffffffffu, (p))
#define GS_TRAJ_LEAD ((GS_LANE & 3) == 0)
#else
#define GS_ANY(p) (p)
#define GS_TRAJ_LEAD GS_LANE0
#endif
#define GS_STEPS(len) gs_warp_max(len)
#define GS_WRITER GS_TRAJ_LEAD
#define GS_WRITTEN() GS_SYNCWARP()
{{- end}}

{{define "entry"}}
// The block has {{.LanesBlock}} threads, and {{.LanesMinBlocks}} blocks run per multiprocessor:
// ptxas keeps the registers of a thread to what lets them all run.
#ifdef GS_CUDA
#define GS_BOUNDS __launch_bounds__({{.LanesBlock}}, {{.LanesMinBlocks}})
#else
#define GS_BOUNDS
#endif

GS_GLOBAL void GS_BOUNDS GS_KERNEL_NAME(const gs_args a) {
  const gs_real* ssh = a.sh;
  const gs_real* csh = a.sh + GS_SSH;
#if defined(GS_CUDA)
{{- if or .TileSharedAcc .TileSharedSh}}
  // The shared and controller blocks (TileSharedSh, copied from a.sh as
  // they are) and each warp's accumulator (TileSharedAcc) in the block's
  // shared memory, in that order.
  extern __shared__ gs_real gs_smem[];
  const int tid = threadIdx.x, nt = blockDim.x;
{{- if .TileSharedSh}}
  for (int j = tid; j < GS_SSH + GS_CSH; j += nt) gs_smem[j] = a.sh[j];
  ssh = gs_smem;
  csh = gs_smem + GS_SSH;
  gs_real* accs = gs_smem + GS_SSH + GS_CSH;
{{- else}}
  gs_real* accs = gs_smem;
{{- end}}
{{- if .TileSharedAcc}}
  gs_real* acc = accs + (threadIdx.x >> 5) * GS_WACC;
  const int nacc = (blockDim.x >> 5) * GS_WACC;
{{- else}}
  gs_real* acc = accs;  // no gradient
  const int nacc = 0;
{{- end}}
{{- else}}
  const int tid = threadIdx.x, nt = blockDim.x;
  gs_real* accs = a.work + (long long)blockIdx.x * (blockDim.x >> 5) * GS_WACC;
  gs_real* acc = accs + (threadIdx.x >> 5) * GS_WACC;
  const int nacc = (blockDim.x >> 5) * GS_WACC;
{{- end}}
#elif defined(GS_WARP_SIM)
  // One simulated warp (tests): its lanes share the work.
  gs_real* accs = a.work;
  gs_real* acc = accs;
  const int tid = GS_LANE, nt = 32, nacc = GS_WACC;
#else
  gs_real* accs = a.work;
  gs_real* acc = accs;
  const int tid = 0, nt = 1, nacc = GS_WACC;
#endif
  (void)tid, (void)nt, (void)nacc, (void)accs;  // unused without a gradient
{{- template "warp-zero" .}}
#if defined(GS_CUDA)
{{- if .TileDynamic}}
  // Tiles taken in turn: a warp's first tile is its index in the grid,
  // each next one the counter's (after the warps' accumulators in a.work,
  // zeroed by the host) plus the grid's warps, so that warps whose tiles
  // ran short take more and the last round is short.
  __syncthreads();
  const long long wpb = blockDim.x >> 5, nw = (long long)gridDim.x * wpb;
  unsigned long long* next = (unsigned long long*)(a.work + {{if .WorkAccs}}((long long)gridDim.x * (blockDim.x >> 5) * GS_WACC){{else}}0{{end}});
  long long tile = blockIdx.x * wpb + (threadIdx.x >> 5);
  while (tile * {{.TileWidth}} < a.n) {
    const long long i = tile * {{.TileWidth}} + ((threadIdx.x & 31) >> 2);
    gs_body(a, i, i < a.n, acc, ssh, csh);
    long long t = 0;
    if ((threadIdx.x & 31) == 0) t = nw + (long long)atomicAdd(next, 1ull);
    tile = __shfl_sync(0xffffffffu, t, 0);
  }
  __syncthreads();
{{- else}}
  __syncthreads();
  const long long wpb = blockDim.x >> 5;
  for (long long tile = blockIdx.x * wpb + (threadIdx.x >> 5); tile * {{.TileWidth}} < a.n; tile += (long long)gridDim.x * wpb) {
    const long long i = tile * {{.TileWidth}} + ((threadIdx.x & 31) >> 2);
    gs_body(a, i, i < a.n, acc, ssh, csh);
  }
  __syncthreads();
{{- end}}
#elif defined(GS_WARP_SIM)
  // One simulated warp (tests) runs every tile.
  __syncwarp();
  for (long long tile = 0; tile * {{.TileWidth}} < a.n; tile++) {
    const long long i = tile * {{.TileWidth}} + (GS_LANE >> 2);
    gs_body(a, i, i < a.n, acc, ssh, csh);
  }
  __syncwarp();
#else
  for (long long i = 0; i < a.n; i++) gs_body(a, i, true, acc, ssh, csh);
#endif
{{- template "warp-sums" .}}
}
{{- end}}
