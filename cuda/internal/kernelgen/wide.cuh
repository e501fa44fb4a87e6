{{- /*
wide.cuh: the wide layout (one warp per trajectory, wide.go) of the
engine's kernels: its hooks ("hooks", see kernel.cuh), its driver loop
("wide-body": a forward solve) and the kernel ("entry"). Every d-long
array of a trajectory is in its warp's part of the block's shared memory
(kernelPlan.W); the wide functions of Init, Trial and Control split their
component loops over the lanes; the controller's state and every other
scalar are each lane's own, the same in every lane.
*/ -}}
{{define "hooks"}}
// One warp per trajectory: its lanes run the driver loop alike; lane 0
// writes the trajectory's scalar results, the lanes its components.
#define GS_ANY(p) (p)
#define GS_STEPS(len) (len)
#define GS_WRITER (GS_WLANE == 0)
#define GS_WRITTEN() GS_SYNCWARP()
// A warp's shared memory, in reals (wide.go: wideLayout): the trial's
// inputs (t, h, y[D], p[NP], k1[D] with FSAL), its outputs (y+[D],
// err[D], k_s[D] with FSAL, h*rho), the controller's inputs (state, t1,
// y, y+, err, h*rho) and outputs (state', accept, status), and the
// functions' scratch. Init reads its inputs from GS_W_CI's place and
// writes its outputs to GS_W_TO's.
#define GS_W_TO {{.W.TO}}
#define GS_W_CI {{.W.CI}}
#define GS_W_CO {{.W.CO}}
#define GS_W_SCR {{.W.SCR}}
#define GS_W_LEN {{.W.Len}}
#define GS_W_FSAL {{if .FSAL}}1{{else}}0{{end}}
{{- end}}

{{define "wide-body"}}
// gs_body runs trajectory i on the calling warp, whose shared memory is
// ws (GS_W_LEN reals): Init, then Trial and Control until the controller
// ends it; its final state and outcome.
GS_DEVICE void gs_body(const gs_args& a, const long long i, gs_real* ws, const gs_real* sh, const gs_real* csh) {
  const int lane = GS_WLANE;
  const long long n = a.n;
  const gs_real t0 = (gs_real)a.t0, t1 = a.t1[i];
  gs_real* ti = ws;
  gs_real* to = ws + GS_W_TO;
  gs_real* ci = ws + GS_W_CI;
  gs_real* co = ws + GS_W_CO;
  gs_real* scr = ws + GS_W_SCR;
  gs_real* y = ti + 2;
  gs_real* p = y + GS_D;
  gs_real* k1 = p + GS_NP;
  (void)k1;
  GS_SYNCWARP();  // the warp's last trajectory is done with ws
  for (int c = lane; c < GS_D; c += GS_WSTRIDE) y[c] = a.y0[(long long)c * n + i];
  for (int c = lane; c < GS_NP; c += GS_WSTRIDE) p[c] = a.p[(long long)c * n + i];
  // Init: t0, t1, y, p -> h, last, f0 (in CI's and TO's places).
  if (lane == 0) {
    ci[0] = t0;
    ci[1] = t1;
  }
  for (int c = lane; c < GS_D; c += GS_WSTRIDE) ci[2 + c] = a.y0[(long long)c * n + i];
  for (int c = lane; c < GS_NP; c += GS_WSTRIDE) ci[2 + GS_D + c] = a.p[(long long)c * n + i];
  GS_SYNCWARP();
  {{.W.Init}}(sh, ci, to, scr);
  gs_real st[GS_NSTATE];
  const gs_real h0 = to[0], last = to[1];
#if GS_W_FSAL
  for (int c = lane; c < GS_D; c += GS_WSTRIDE) k1[c] = to[2 + c];
#endif
  gs_start(st, t0, h0, last);
  gs_real lasth = h0;
  int status = GS_RUNNING;
  bool run = true;
  while (run) {
    GS_SYNCWARP();  // the last step's reads of ti and ci are done
    if (lane == 0) {
      ti[0] = st[GS_ST_T];
      ti[1] = st[GS_ST_H];
    }
    GS_SYNCWARP();
    {{.W.Trial}}(sh, ti, to, scr);
    // Control: state, t1, y, y+, err, h*rho.
    for (int q = lane; q < GS_NSTATE; q += GS_WSTRIDE) ci[q] = st[q];
    if (lane == 0) {
      ci[GS_NSTATE] = t1;
      ci[GS_NSTATE + 1 + 3 * GS_D] = to[(2 + GS_W_FSAL) * GS_D];
    }
    for (int c = lane; c < GS_D; c += GS_WSTRIDE) {
      ci[GS_NSTATE + 1 + c] = y[c];
      ci[GS_NSTATE + 1 + GS_D + c] = to[c];
      ci[GS_NSTATE + 1 + 2 * GS_D + c] = to[GS_D + c];
    }
    GS_SYNCWARP();
    {{.W.Control}}(csh, ci, co, scr);
    const gs_real accept = co[GS_NSTATE], stat = co[GS_NSTATE + 1];
    lasth = st[GS_ST_H];
    if (accept != 0) {
      for (int c = lane; c < GS_D; c += GS_WSTRIDE) y[c] = to[c];
#if GS_W_FSAL
      for (int c = lane; c < GS_D; c += GS_WSTRIDE) k1[c] = to[2 * GS_D + c];
#endif
    }
    for (int q = 0; q < GS_NSTATE; q++) st[q] = co[q];
    if (stat != (gs_real)GS_RUNNING) {
      status = (int)stat;
      run = false;
    }
  }
  GS_SYNCWARP();
  const int len = (int)st[GS_ST_ACCEPTED];
  if (lane == 0) gs_finish(a, i, st, lasth, len, status, false);
  for (int c = lane; c < GS_D; c += GS_WSTRIDE) a.y[(long long)c * n + i] = y[c];
}
{{- end}}

{{define "entry"}}
// A block of {{.WideWarps}} warps, each with GS_W_LEN reals of the block's dynamic
// shared memory, each running trajectories warp, warp + warps, ... of
// the launch.
GS_GLOBAL void GS_KERNEL_NAME(const gs_args a) {
#ifdef GS_CUDA
  extern __shared__ gs_real gs_smem[];
  gs_real* ws = gs_smem + (threadIdx.x >> 5) * GS_W_LEN;
  const long long wpb = blockDim.x >> 5;
  for (long long i = blockIdx.x * wpb + (threadIdx.x >> 5); i < a.n; i += (long long)gridDim.x * wpb)
    gs_body(a, i, ws, a.sh, a.sh + GS_NS);
#else
  // On the host one warp (simulated with GS_WARP_SIM, its threads sharing
  // the static array) runs every trajectory.
  static gs_real ws[GS_W_LEN];
  for (long long i = 0; i < a.n; i++) gs_body(a, i, ws, a.sh, a.sh + GS_NS);
#endif
}
{{- end}}
