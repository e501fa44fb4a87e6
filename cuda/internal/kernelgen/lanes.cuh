{{- /*
lanes.cuh: the lanes layout (one warp per trajectory, lanes.go) of the
engine's kernels: its hooks of the driver loop ("hooks", "loss-own"; see
kernel.cuh and warp.cuh) and the kernel ("entry"). The shared block and
the controller's, padded, and each warp's accumulator are in the block's
shared memory after the warps' staging rows; with LanesGlobal (networks
too large for shared memory) the host wrote both blocks padded in a.sh,
and each warp's accumulator is its row of a.work, or the block's warps
share one in shared memory (LanesBlockAcc). With TileSums a warp runs
whole tiles of GS_TILE trajectories and writes each tile's sum.
*/ -}}
{{define "hooks"}}
{{- template "warp-hooks" .}}
// One warp per trajectory: its lanes run the trajectory's loops alike,
// each writing its results (and reading its own); GS_TRAJ_LEAD is the one
// lane that adds to a sum for it.
#define GS_ANY(p) (p)
#define GS_STEPS(len) (len)
#define GS_WRITER true
#define GS_WRITTEN()
#define GS_TRAJ_LEAD GS_LANE0
#ifdef GS_CUDA
#define GS_LANES_PER_TRAJ 32
#else
#define GS_LANES_PER_TRAJ 1
#endif
{{- end}}

{{define "entry"}}
// The block has at most {{.LanesBlock}} threads, and {{.LanesMinBlocks}} blocks fit in a
// multiprocessor's shared memory: ptxas keeps the registers of a thread
// to what lets them all run (128 for 4 blocks of 4 warps), rather than
// spending more and leaving shared memory unused. With one accumulator
// per block, one block of {{.LanesAccBlock}} threads runs per multiprocessor.
// Each warp's staging row (GS_STAGE_LEN reals, see the prelude's
// GS_STAGE) comes first in the block's dynamic shared memory; the
// kernel's own arrays follow the block's GS_STAGE_SKIP reals. (The launch
// reserves the rows even where the functions stage nothing.)
#ifdef GS_CUDA
{{- if .LanesBlockAcc}}
#define GS_BOUNDS __launch_bounds__({{.LanesAccBlock}}, 1)
{{- else if gt .LanesMinBlocks 0}}
#define GS_BOUNDS __launch_bounds__({{.LanesBlock}}, {{.LanesMinBlocks}})
{{- else}}
#define GS_BOUNDS
{{- end}}
#define GS_STAGE_SKIP {{if .Stage}}((int)(blockDim.x >> 5) * GS_STAGE_LEN){{else}}0{{end}}
#else
#define GS_BOUNDS
#endif

GS_GLOBAL void GS_BOUNDS GS_KERNEL_NAME(const gs_args a) {
{{- if .LanesGlobal}}
  const gs_real* ssh = a.sh;
  const gs_real* csh = a.sh + GS_SSH;
{{- if .LanesBlockAcc}}
  // One accumulator for the block's warps, in shared memory (atomics).
#ifdef GS_CUDA
  extern __shared__ gs_real gs_smem[];
  gs_real* accs = gs_smem + GS_STAGE_SKIP;
  gs_real* acc = accs;
  const int tid = threadIdx.x, nt = blockDim.x;
  const int nacc = GS_WACC;
#else
  gs_real acc[GS_WACC];
  gs_real* accs = acc;
  const int tid = 0, nt = 1, nacc = GS_WACC;
#endif
{{- else}}
#if defined(GS_CUDA)
  const int tid = threadIdx.x, nt = blockDim.x;
  gs_real* accs = a.work + (long long)blockIdx.x * (blockDim.x >> 5) * GS_WACC;
  gs_real* acc = accs + (threadIdx.x >> 5) * GS_WACC;
  const int nacc = (blockDim.x >> 5) * GS_WACC;
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
{{- end}}
  (void)tid, (void)nt, (void)nacc, (void)accs;  // unused without a gradient
{{- else}}
#ifdef GS_CUDA
  extern __shared__ gs_real gs_smem[];
  gs_real* ssh = gs_smem + GS_STAGE_SKIP;
  gs_real* csh = ssh + GS_SSH;
  gs_real* accs = csh + GS_CSH;
  gs_real* acc = accs + (threadIdx.x >> 5) * GS_WACC;
  const int tid = threadIdx.x, nt = blockDim.x;
  const int nacc = (blockDim.x >> 5) * GS_WACC;
#else
  gs_real ssh[GS_SSH], csh[GS_CSH], acc[GS_WACC];
  gs_real* accs = acc;
  const int tid = 0, nt = 1, nacc = GS_WACC;
#endif
  for (int j = tid; j < GS_NS + GS_D + 2; j += nt) ssh[GS_PAD(j)] = a.sh[j];
  for (int j = tid; j < GS_D + 2; j += nt) csh[GS_PAD(j)] = a.sh[GS_NS + j];
{{- end}}
{{- template "warp-zero" .}}
{{- if and .TileSums .Grad}}
  // Tile sums (MultiEngine): a warp runs whole tiles of GS_TILE
  // trajectories in index order; its accumulator holds one tile's sum,
  // which goes to a.gs[tile][0:NS] (the loss's own to a.gs[tile][NS:2NS],
  // GS_LOSS_ACC_AT), so the sums do not depend on the split.
#ifdef GS_CUDA
  __syncthreads();
  const long long wpb = blockDim.x >> 5;
  const int lane = threadIdx.x & 31;
  for (long long tile = blockIdx.x * wpb + (threadIdx.x >> 5); tile * GS_TILE < a.n; tile += (long long)gridDim.x * wpb) {
#else
  const int lane = 0;
  for (long long tile = 0; tile * GS_TILE < a.n; tile++) {
#endif
    for (int j = lane; j < GS_WACC; j += GS_LANES_PER_TRAJ) acc[j] = 0;
    GS_SYNCWARP();
    const long long end = (tile + 1) * GS_TILE < a.n ? (tile + 1) * GS_TILE : a.n;
    for (long long i = tile * GS_TILE; i < end; i++) gs_body(a, i, true, acc, ssh, csh);
    GS_SYNCWARP();
    for (int j = lane; j < GS_NS; j += GS_LANES_PER_TRAJ) a.gs[tile * (2 * GS_NS) + j] = acc[GS_PAD(j)];
    GS_SYNCWARP();
  }
{{- else}}
#ifdef GS_CUDA
  __syncthreads();
  const long long wpb = blockDim.x >> 5;
  for (long long i = blockIdx.x * wpb + (threadIdx.x >> 5); i < a.n; i += (long long)gridDim.x * wpb)
    gs_body(a, i, true, acc, ssh, csh);
  __syncthreads();
#else
  for (long long i = 0; i < a.n; i++) gs_body(a, i, true, acc, ssh, csh);
#endif
{{- template "warp-sums" .}}
{{- end}}
}
{{- end}}
