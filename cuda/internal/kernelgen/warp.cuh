{{- /*
warp.cuh: what the layouts of a warp per trajectory (lanes.cuh) and of
a warp per tile of trajectories (tile.cuh) share: the padded shared
blocks and accumulators, where the loss's own dL/ds goes ("warp-hooks",
"loss-own"), and the zeroing and the sum of the warps' accumulators
("warp-zero", "warp-sums": accs, nacc of them, by the block's threads
tid of nt).
*/ -}}
{{define "warp-hooks"}}
// Each warp has its own accumulator of the steps' dL/ds, padded (entry j
// at GS_PAD(j)), GS_WACC entries long, added to without atomics; the
// loss's own dL/ds goes to the result (a.gs + GS_NS, or with tile sums the
// second half of the trajectory's tile), atomically and unpadded
// (GS_LOSS_ACC_AT). GS_CSH is the padded length of the controller's
// shared block (rtol, atol[D], maxsteps) and GS_SSH that of the whole
// shared block (the shared parameters, then the controller's); lanes.go's
// lanesBlockLen and lanesAccLen size them alike.
#define GS_WACC (GS_NS > 0 ? 33 * ((GS_NS + 31) / 32) : 1)
#define GS_CSH (33 * ((GS_D + 2 + 31) / 32))
#define GS_SSH (33 * ((GS_NS + GS_D + 2 + 31) / 32))
#define GS_LOSS_ACC_AT {{if .TileSums}}(a.gs + (i / GS_TILE) * (2 * GS_NS) + GS_NS){{else}}(a.gs + GS_NS){{end}}
{{- end}}

{{define "loss-own" -}}
    if (act && GS_TRAJ_LEAD)
      for (int j = 0; j < GS_NS; j++) GS_ACC_ATOMIC(GS_LOSS_ACC_AT + j, r.v[1 + GS_D + GS_K * GS_D + GS_NP + j]);
{{- end}}

{{define "warp-zero"}}
{{- if .Grad}}
  for (int j = tid; j < nacc; j += nt) accs[j] = 0;
{{- end}}
{{- end}}

{{define "warp-sums"}}
{{- if .Grad}}
  for (int j = tid; j < GS_NS; j += nt) {
    gs_real sum = 0;
    for (int w = 0; w < nacc; w += GS_WACC) sum += accs[w + GS_PAD(j)];
    GS_ACC_ATOMIC(&a.gs[j], sum);
  }
{{- end}}
{{- end}}
