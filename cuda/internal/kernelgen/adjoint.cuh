{{- /*
adjoint.cuh: the adjoint of a gradient kernel ("adjoint"), gs_backward.
The reverse steps (of the mesh: gs_a_rev; of the save times:
gs_a_tap_rev) and the loss VJP either return their shared-gradient
contributions, which it reduces across the warp, or add them to the
accumulator themselves (RevAcc, TapAcc, LossAcc: AccFunc), every lane
calling them. The loss's own dL/ds without LossAcc goes where the
layout's "loss-own" puts it.
*/ -}}
{{define "adjoint"}}
// gs_backward is the adjoint of trajectory i (act false: a lane that only
// takes part in the warp's reductions): the loss VJP, the VJPs of the save
// times, then Reverse over the steps from the last to the first. It writes
// the loss term and dL/dy0, dL/dp, and adds dL/ds to acc. Every lane of
// the warp must call it.
GS_DEVICE void gs_backward(const gs_args& a, const gs_real* sh, long long i, bool act, int len, const gs_real* y,
                           const gs_real* p, gs_real* acc) {
  const long long n = a.n;
  const gs_real sc = (gs_real)a.scale;
  gs_real lam[GS_D], gp[GS_NPX];
  for (int c = 0; c < GS_D; c++) lam[c] = 0;
  for (int c = 0; c < GS_NPX; c++) gp[c] = 0;
  {
    // The loss's own dL/ds goes to the second half of the accumulator,
    // unscaled (the host scales it).
{{- if .LossAcc}}
    const gs_lgrad_out r = gs_a_loss_grad(sh, GS_LOSS_ACC_AT, act, y, a.ys, n, act ? i : 0, a.data, p);
    if (act) {
{{- else}}
    gs_lgrad_out r;
    if (act) {
      r = gs_a_loss_grad(sh, y, a.ys, n, i, a.data, p);
{{- end}}
      a.loss[i] = r.v[0];
      for (int c = 0; c < GS_D; c++) lam[c] = sc * r.v[1 + c];
      for (int q = 0; q < GS_K * GS_D; q++) a.tb[(long long)q * n + i] = sc * r.v[1 + GS_D + q];
      for (int c = 0; c < GS_NP; c++) gp[c] = sc * r.v[1 + GS_D + GS_K * GS_D + c];
    }
{{- if not .LossAcc}}
{{template "loss-own" .}}
{{- end}}
  }
{{- if .Saves}}
  // The save times' VJPs, in order; each one's cotangent of its starting
  // state replaces its entry of a.tb. Save times at or before t0 and past
  // the last step are identities.
  for (int k = 0; k < GS_K; k++) {
    const int s = act ? a.tapstep[(long long)k * n + i] : 0;
    const bool on = act && s < len && a.saveat[k] > (gs_real)a.t0;
{{- if .TapAcc}}
    // Every lane calls the step (the field's VJP reduces across the warp);
    // a lane that is off passes zeros.
{{- end}}
    gs_real ts = 0, ys[GS_D], lt[GS_D];
{{- if .Dense}}
    // The step's size, on which Dense interpolates.
    gs_real hs = 0;
{{- end}}
    for (int c = 0; c < GS_D; c++) ys[c] = lt[c] = 0;
    if (on) {
      const gs_real* row = a.store + (long long)s * GS_SW * n + i;
      ts = GS_STORE_T ? row[0] : (gs_real)0;
      for (int c = 0; c < GS_D; c++) {
        ys[c] = row[(long long)(GS_STORE_T + c) * n];
        lt[c] = a.tb[((long long)k * GS_D + c) * n + i];
      }
{{- if .Dense}}
      hs = GS_HSRC[(long long)s * n + i];
{{- end}}
    }
    const gs_real tau = a.saveat[k];
{{- if .TapAcc}}
    {
{{- if .Dense}}
      const gs_tap_rev_out r = gs_a_tap_rev(sh, acc, on, ts, hs, ys, p, on ? (tau - ts) / hs : (gs_real)0, lt, gp);
{{- else}}
      const gs_tap_rev_out r = gs_a_tap_rev(sh, acc, on, ts, on ? tau - ts : (gs_real)0, ys, p, lt, gp);
{{- end}}
{{- else}}
    gs_tap_rev_out r;
    if (on) {
{{- if .Dense}}
      r = gs_a_tap_rev(sh, ts, hs, ys, p, (tau - ts) / hs, lt, gp);
{{- else}}
      r = gs_a_tap_rev(sh, ts, tau - ts, ys, p, lt, gp);
{{- end}}
{{- end}}
      if (on) {
        for (int c = 0; c < GS_D; c++) a.tb[((long long)k * GS_D + c) * n + i] = r.v[c];
        for (int c = 0; c < GS_NP; c++) gp[c] = r.v[GS_D + c];
      }
    }
{{- if not .TapAcc}}
    gs_warp_add<GS_NS>(acc, &r.v[GS_D + GS_NP], on);
{{- end}}
  }
  // Save times past the last step add to the final state's cotangent.
  int kq = GS_K;
  if (act) {
    while (kq > 0 && a.tapstep[(long long)(kq - 1) * n + i] >= len) kq--;
    for (int k = kq; k < GS_K; k++)
      for (int c = 0; c < GS_D; c++) lam[c] += a.tb[((long long)k * GS_D + c) * n + i];
  }
{{- end}}
  const int smax = gs_warp_max(act ? len : 0);
  for (int s = smax - 1; s >= 0; s--) {
    const bool on = act && s < len;
    gs_real h = 0;
{{- if .RevAcc}}
    // Every lane calls the step (the field's VJP reduces across the warp);
    // a lane that is off, or on a step of size 0, passes zeros.
    {
      gs_real ts = 0, ys[GS_D];
      for (int c = 0; c < GS_D; c++) ys[c] = 0;
      if (on) {
        h = GS_HSRC[(long long)s * n + i];
        const gs_real* row = a.store + (long long)s * GS_SW * n + i;
        ts = GS_STORE_T ? row[0] : (gs_real)0;
        for (int c = 0; c < GS_D; c++) ys[c] = row[(long long)(GS_STORE_T + c) * n];
      }
      const bool live = on && h != 0;
      const gs_rev_out r = gs_a_rev(sh, acc, live, ts, live ? h : (gs_real)0, ys, p, lam, gp);
      if (live) {
        for (int c = 0; c < GS_D; c++) lam[c] = r.v[c];
        for (int c = 0; c < GS_NP; c++) gp[c] = r.v[GS_D + c];
      }
    }
    if (on) {
{{- else}}
    gs_rev_out r;
    if (on) {
      h = GS_HSRC[(long long)s * n + i];
      if (h != 0) {
        const gs_real* row = a.store + (long long)s * GS_SW * n + i;
        gs_real ys[GS_D];
        for (int c = 0; c < GS_D; c++) ys[c] = row[(long long)(GS_STORE_T + c) * n];
        r = gs_a_rev(sh, GS_STORE_T ? row[0] : (gs_real)0, h, ys, p, lam, gp);
        for (int c = 0; c < GS_D; c++) lam[c] = r.v[c];
        for (int c = 0; c < GS_NP; c++) gp[c] = r.v[GS_D + c];
      }
{{- end}}
{{- if .Saves}}
      int k0 = kq;
      while (k0 > 0 && a.tapstep[(long long)(k0 - 1) * n + i] == s) k0--;
      for (int k = k0; k < kq; k++)
        for (int c = 0; c < GS_D; c++) lam[c] += a.tb[((long long)k * GS_D + c) * n + i];
      kq = k0;
{{- end}}
    }
{{- if not .RevAcc}}
    gs_warp_add<GS_NS>(acc, &r.v[GS_D + GS_NP], on && h != 0);
{{- end}}
  }
  if (act) {
    for (int c = 0; c < GS_D; c++) a.gy0[(long long)c * n + i] = lam[c];
    for (int c = 0; c < GS_NP; c++) a.gp[(long long)c * n + i] = gp[c];
  }
}
{{- end}}
