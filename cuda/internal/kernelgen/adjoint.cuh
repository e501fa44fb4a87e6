{{- /*
adjoint.cuh: the adjoint of a gradient kernel ("adjoint"), gs_backward.
The reverse steps (gs_a_rev, and gs_a_drev on the steps that save times
lie inside; with ShareRev gs_a_drev on every step) and the loss VJP either return their shared-gradient
contributions, which it reduces across the warp, or add them to the
accumulator themselves (RevAcc, LossAcc: AccFunc), every lane calling
them. The loss's own dL/ds without LossAcc goes where the layout's
"loss-own" puts it.
*/ -}}
{{define "cot-args"}}{{if .SaveCots}}sh, y, p, sc, {{end}}{{end}}
{{- define "theta-arg"}}{{if .KeepThetas}}s > 0, {{end}}{{end}}
{{- define "coef-bar"}}{{if .DeferGrad}}gs_wb_row(a, i, s, {{else}}gs_coef_bar(a, {{template "cot-args" .}}i, {{end}}{{end}}

{{define "adjoint"}}
// gs_take sets lambda and gp from the outputs of a reverse step (Reverse's
// or DenseStepReverse's: lambda', then gp') where on is set.
template <class R>
GS_DEVICE void gs_take(const R& r, bool on, gs_real* lam, gs_real* gp) {
  if (!on) return;
  for (int c = 0; c < GS_D; c++) lam[c] = r.v[c];
  for (int c = 0; c < GS_NP; c++) gp[c] = r.v[GS_D + c];
}
{{- if and .Saves (not .Dense)}}

// gs_first_save returns the first of the save times k0 ... kq-1 that lie
// on step s, given that those from kq on lie on later steps: save times
// are sorted, so their steps (a.tapstep) do not decrease with k, and the
// ones on step s are the run of entries equal to s just before kq. Four
// entries are read at once (one memory latency for four save times, not
// one each).
GS_DEVICE int gs_first_save(const gs_args& a, long long i, int kq, int s) {
  const long long n = a.n;
  int k0 = kq;
  while (k0 >= 4) {
    const int t1 = a.tapstep[(long long)(k0 - 1) * n + i], t2 = a.tapstep[(long long)(k0 - 2) * n + i];
    const int t3 = a.tapstep[(long long)(k0 - 3) * n + i], t4 = a.tapstep[(long long)(k0 - 4) * n + i];
    if (t4 == s) {
      k0 -= 4;
      continue;
    }
    return k0 - (t1 == s) - (t2 == s && t1 == s) - (t3 == s && t2 == s && t1 == s);
  }
  while (k0 > 0 && a.tapstep[(long long)(k0 - 1) * n + i] == s) k0--;
  return k0;
}
{{- end}}
{{- if .Dense}}

// gs_dense_first_save returns the first of the save times k0 ... kq-1
// that lie on step s from ts (those from kq on lie on later steps), where
// save times are read from the steps' extension. It finds them from the
// save times themselves, not from the steps they were saved on
// (a.tapstep, as gs_first_save does without the extension): the forward
// loop gives step s from ts (of size h) the save times before ts + h
// that earlier steps did not take, and ts is step s - 1's t + h exactly
// (the controller's and the replay's sum), so the ones on step s >= 1
// are those at or after ts and after the start t0 (those at or before it
// are y0, on step 0, even after a step of size 0); step 0 has the rest.
// The times are the same for every trajectory (one cached line, not a
// line per trajectory), and four are read at once.
GS_DEVICE int gs_dense_first_save(const gs_args& a, int kq, int s, gs_real ts, gs_real t0) {
  if (s == 0) return 0;
  const auto on = [ts, t0](gs_real tau) { return tau >= ts && tau > t0; };
  int k0 = kq;
  while (k0 >= 4) {
    const gs_real t1 = a.saveat[k0 - 1], t2 = a.saveat[k0 - 2], t3 = a.saveat[k0 - 3], t4 = a.saveat[k0 - 4];
    if (on(t4)) {
      k0 -= 4;
      continue;
    }
    // Sorted: the ones on the step are a run ending at kq - 1.
    return k0 - on(t1) - on(t2) - on(t3);
  }
  while (k0 > 0 && on(a.saveat[k0 - 1])) k0--;
  return k0;
}

// GS_PF_SAVES is the most save times whose cotangents gs_prefetch_step
// asks for a step ahead (the first ones the step reads): Vern7's steps of
// Kepler with 1,000 save times hold about 22, Tsit5's about 10; 32 save
// times of four components are 32 kB of a warp's lines in L1, few enough
// to stay there for a step at the few warps a multiprocessor that need
// them (more warps hide the latency themselves).
#define GS_PF_SAVES 32

// gs_prefetch_step asks for what the reverse step s of trajectory i will
// read (GS_PREFETCH), one step before it: its stored state and size and
// the cotangents of its save times k0 ... kq-1 (at most GS_PF_SAVES of
// them, the first), so that their memory latency passes during step
// s + 1's reverse instead of stalling step s's in a chain, save time by
// save time. Nothing where s is not a step of i (on unset).
GS_DEVICE void gs_prefetch_step(const gs_args& a, long long i, bool on, int s, int k0, int kq) {
  if (!on) return;
  const long long n = a.n;
  const gs_real* row = a.store + (long long)s * GS_SW * n + i;
  for (int c = 0; c < GS_D; c++) GS_PREFETCH(&row[(long long)(GS_STORE_T + c) * n]);
  GS_PREFETCH(&GS_HSRC[(long long)s * n + i]);
{{- if .DeferGrad}}
  // The step's coefficient cotangents and their flag (gs_wb_row: none
  // without a save time on the step).
  if (k0 < kq)
    for (int q = 0; q <= GS_DW; q++) GS_PREFETCH(&a.work[((long long)s * GS_GW + 2 + GS_DW + q) * n + i]);
{{- end}}
  const int k1 = kq - k0 > GS_PF_SAVES ? k0 + GS_PF_SAVES : kq;
{{- if .SaveCots}}
  for (int k = k0; k < k1; k++) gs_save_cot_prefetch(a.ys, n, i, a.data, k);
{{- if .KeepThetas}}
  for (int k = k0; k < k1; k++) GS_PREFETCH(&a.tb[(long long)k * n + i]);
{{- end}}
{{- else}}
  for (int k = k0; k < k1; k++)
    for (int c = 0; c < GS_D; c++) GS_PREFETCH(&a.tb[((long long)k * GS_D + c) * n + i]);
{{- end}}
}
{{- if .CotGroup}}

// GS_COT_GROUP is how many save times' cotangents the sweep reads at once
// (kernelPlan.CotGroup: GS_COT_GROUP * GS_D at most 16 values, in
// registers).
#define GS_COT_GROUP {{.CotGroup}}

// gs_save_cots sets tau[j] and yb[j] to save time k + j's time and
// cotangents (gs_save_cot times sc) for the group's j < GS_COT_GROUP,
// where those past kq - 1 read save time kq - 1's (the caller skips
// them): every load of the group issued before any is used, none under
// a test. Save times k ... kq-1 must lie on the step (k < kq).
GS_DEVICE void gs_save_cots(const gs_args& a, const gs_real* sh, const gs_real* y, const gs_real* p, gs_real sc,
                            long long i, int k, int kq, gs_real* tau, gs_real (*yb)[GS_D]) {
  const long long n = a.n;
  for (int j = 0; j < GS_COT_GROUP; j++) {
    const int kj = k + j < kq ? k + j : kq - 1;
    tau[j] = a.saveat[kj];
    for (int c = 0; c < GS_D; c++) yb[j][c] = sc * gs_save_cot(sh, y, a.ys, n, i, a.data, p, kj, c);
  }
}
{{- end}}

// gs_coef_bar sets wb to the cotangents of the coefficients of the step
// from ts of size h (on set, else zeros): over the save times k0 ... kq-1
// on it that lie inside it, in order, wb[(j - 1) * GS_D + c] = the sum of
// theta^j * ybar[c] (the interpolant's VJP, summed as the CPU engine sums
// it), and reports whether there are any.
{{- if .CotGroup}}
// Each save time's cotangents are computed here (gs_save_cot, times the
// loss's scale sc: the loss VJP's stored value bit for bit), the save
// times GS_COT_GROUP at a time (gs_save_cots): the group's times and
// cotangents are read first, at once (one memory latency for the group,
// where a save time's loads waited for the previous save time's
// division and its test of theta, a branch), then the group's quotients
// theta (none past kq - 1: a division is the costliest part of a save
// time's work), then each save time in turn adds its products, under
// its own test (in the step, theta not 0), to the same sums in the same
// order as the stored form's loop: the powers of theta are the same
// products (theta, theta*theta, ...), once a save time, not once a
// component.
{{- if not .DivideSaves}}
// The quotients come from one reciprocal of h a step (gs_rcp, gs_quot:
// the divisions' results bit for bit, without a branch between a
// group's), where each was a division (Config.DivideSaves).
{{- end}}
{{- if .KeepThetas}}
// With kept set (KeepThetas: the steps after step 0) the quotients are
// the forward pass's (a.tb, read with the group's cotangents, asked for a
// step ahead by gs_prefetch_step): no division, and no division's branch
// to its slow path.
{{- end}}
GS_DEVICE bool gs_coef_bar(const gs_args& a, const gs_real* sh, const gs_real* y, const gs_real* p, gs_real sc,
                           long long i, bool on, int k0, int kq, gs_real ts, gs_real h,{{if .KeepThetas}} bool kept,{{end}} gs_real* wb) {
  bool any = false;
  for (int q = 0; q < GS_DW; q++) wb[q] = 0;
{{- if not .DivideSaves}}
  const gs_real rh = on && k0 < kq ? gs_rcp(h) : (gs_real)0;
{{- end}}
  for (int k = k0; on && k < kq; k += GS_COT_GROUP) {
    gs_real tau[GS_COT_GROUP], yb[GS_COT_GROUP][GS_D], theta[GS_COT_GROUP];
    gs_save_cots(a, sh, y, p, sc, i, k, kq, tau, yb);
{{- if .KeepThetas}}
    if (kept)
      for (int j = 0; j < GS_COT_GROUP; j++) theta[j] = a.tb[(long long)(k + j < kq ? k + j : kq - 1) * a.n + i];
    else
{{- end}}
{{- if .DivideSaves}}
    for (int j = 0; j < GS_COT_GROUP; j++) theta[j] = k + j < kq ? (tau[j] - ts) / h : (gs_real)0;
{{- else}}
    {
      // Every slot's quotient (those past kq - 1 repeat kq - 1's and
      // are skipped), the divisions only where gs_quot did not apply.
      bool quot = true;
      for (int j = 0; j < GS_COT_GROUP; j++) quot &= gs_quot(tau[j] - ts, h, rh, &theta[j]);
      if (!quot)
        for (int j = 0; j < GS_COT_GROUP; j++) theta[j] = k + j < kq ? (tau[j] - ts) / h : (gs_real)0;
    }
{{- end}}
    for (int j = 0; j < GS_COT_GROUP; j++) {
      if (k + j >= kq || theta[j] == 0) continue;
      any = true;
      gs_real pw[GS_TERMS];
      pw[0] = theta[j];
      for (int t = 1; t < GS_TERMS; t++) pw[t] = pw[t - 1] * theta[j];
      for (int c = 0; c < GS_D; c++)
        for (int t = 0; t < GS_TERMS; t++) wb[t * GS_D + c] += pw[t] * yb[j][c];
    }
  }
  return any;
}
{{- else if .SaveCots}}
// Each save time's cotangents are computed here (gs_save_cot, times the
// loss's scale sc: the loss VJP's stored value bit for bit), a component
// at a time, each one's powers of theta in turn (the same products and
// the same sums, in the same order, as the stored form's loop).
GS_DEVICE bool gs_coef_bar(const gs_args& a, const gs_real* sh, const gs_real* y, const gs_real* p, gs_real sc,
                           long long i, bool on, int k0, int kq, gs_real ts, gs_real h, gs_real* wb) {
  const long long n = a.n;
  bool any = false;
  for (int q = 0; q < GS_DW; q++) wb[q] = 0;
#pragma unroll 4
  for (int k = k0; on && k < kq; k++) {
    const gs_real theta = (a.saveat[k] - ts) / h;
    if (theta == 0) continue;
    any = true;
    for (int c = 0; c < GS_D; c++) {
      const gs_real yb = sc * gs_save_cot(sh, y, a.ys, n, i, a.data, p, k, c);
      gs_real pw = theta;
      for (int j = 0; j < GS_TERMS; j++) {
        wb[j * GS_D + c] += pw * yb;
        pw *= theta;
      }
    }
  }
  return any;
}
{{- else}}
GS_DEVICE bool gs_coef_bar(const gs_args& a, long long i, bool on, int k0, int kq, gs_real ts, gs_real h,
                           gs_real* wb) {
  const long long n = a.n;
  bool any = false;
  for (int q = 0; q < GS_DW; q++) wb[q] = 0;
  // Unrolled on the device: a few save times' loads in flight at once
  // (a small ensemble has nothing else to hide their latency with). The
  // cotangents are read where they are used: session 41's form, which
  // read each save time's GS_D of them into a local array first, was
  // followed on the device (session 42, TestGPUThreadSaves) by wrong
  // saved states and gradients of Lorenz-96 d = 64 in the thread layout,
  // and is undone here as the first suspect (the steps' cotangents are
  // prefetched a step ahead: gs_prefetch_step).
#pragma unroll 4
  for (int k = k0; on && k < kq; k++) {
    const gs_real theta = (a.saveat[k] - ts) / h;
    if (theta == 0) continue;
    any = true;
    gs_real pw = theta;
    for (int j = 0; j < GS_TERMS; j++) {
      for (int c = 0; c < GS_D; c++) wb[j * GS_D + c] += pw * a.tb[((long long)k * GS_D + c) * n + i];
      pw *= theta;
    }
  }
  return any;
}
{{- end}}
{{- end}}
{{- if .DeferGrad}}

// gs_wb_row sets wb to the cotangents of step s's coefficients the
// saves kernel computed (gs_deferred_grad_step: gs_coef_bar's, with the
// sweep's arguments) and returns their flag: zeros and false where on is
// not set, no save time lies on the step (k0 = kq: nothing read) or
// none inside it (the flag false), as gs_coef_bar returns. Its other
// arguments are gs_coef_bar's, unused.
GS_DEVICE bool gs_wb_row(const gs_args& a, long long i, int s, bool on, int k0, int kq, gs_real ts, gs_real h,
                         gs_real* wb) {
  (void)ts, (void)h;
  const long long n = a.n;
  const gs_real* row = a.work + (long long)s * GS_GW * n + i;
  const bool any = on && k0 < kq && row[(long long)(2 + GS_DW) * n] != 0;
  for (int q = 0; q < GS_DW; q++) wb[q] = any ? row[(long long)(3 + GS_DW + q) * n] : (gs_real)0;
  return any;
}
{{- end}}

// gs_backward is the adjoint of trajectory i (act false: a lane that only
// takes part in the warp's reductions): the loss VJP, then the reverse
// steps from the last to the first, with the save times' VJPs (in their
// steps' reverse with Dense, else before the sweep). It writes
// the loss term and dL/dy0, dL/dp, and adds dL/ds to acc. Every lane of
// the warp must call it. With LossFold, lacc is the loss's value folded
// over the save times in the forward pass (gs_fold), which gs_a_fold_end
// finishes.
GS_DEVICE void gs_backward(const gs_args& a, const gs_real* sh, long long i, bool act, int len, const gs_real* y,
                           const gs_real* p, gs_real* acc{{if .LossFold}}, gs_real lacc{{end}}) {
  const long long n = a.n;
  const gs_real sc = (gs_real)a.scale;
  gs_real lam[GS_D], gp[GS_NPX];
  for (int c = 0; c < GS_D; c++) lam[c] = 0;
  for (int c = 0; c < GS_NPX; c++) gp[c] = 0;
  {
    // The loss's own dL/ds goes to the second half of the accumulator,
    // unscaled (the host scales it).
{{- if .LossFold}}
    // The loss term from the forward pass's fold; the loss VJP returns
    // dL/dy, dL/dp, dL/ds and reads no saved state for the value.
    if (act) a.loss[i] = gs_a_fold_end(sh, lacc, y, n, i, a.data, p);
{{- else if .LossDirect}}
    // The loss VJP stores the loss term and dL/dys (times sc) itself and
    // returns dL/dy, dL/dp, dL/ds.
{{- end}}
{{- if .LossAcc}}
    const gs_lgrad_out r = gs_a_loss_grad(sh, GS_LOSS_ACC_AT, act, y, a.ys, n, act ? i : 0, a.data, p{{if .LossDirect}}, sc, a.loss, a.tb{{end}});
    if (act) {
{{- else}}
    gs_lgrad_out r;
    if (act) {
      r = gs_a_loss_grad(sh, y, a.ys, n, i, a.data, p{{if .LossDirect}}, sc, a.loss, a.tb{{end}});
{{- end}}
{{- if .LossDirect}}
      for (int c = 0; c < GS_D; c++) lam[c] = sc * r.v[c];
      for (int c = 0; c < GS_NP; c++) gp[c] = sc * r.v[GS_D + c];
{{- else}}
      a.loss[i] = r.v[0];
      for (int c = 0; c < GS_D; c++) lam[c] = sc * r.v[1 + c];
      for (int q = 0; q < GS_K * GS_D; q++) a.tb[(long long)q * n + i] = sc * r.v[1 + GS_D + q];
      for (int c = 0; c < GS_NP; c++) gp[c] = sc * r.v[1 + GS_D + GS_K * GS_D + c];
{{- end}}
    }
{{- if not .LossAcc}}
{{template "loss-own" .}}
{{- end}}
  }
{{- if .Events}}
{{template "event-sweep" .}}
{{- else}}
{{- if .Saves}}
{{- if .Dense}}
  // The save times' VJPs are part of their steps' (below): gs_a_drev
  // with the coefficients' cotangents (gs_coef_bar), then their cotangents
  // added to lambda (dy(theta)/dy_s = I).
{{- else}}
  // The save times' VJPs, in order (each one a Replay step of size
  // tau - t_s, ode.SaveStep); each one's cotangent of its starting state
  // replaces its entry of a.tb. Save times at or before t0 and past the
  // last step are identities.
  for (int k = 0; k < GS_K; k++) {
    const int s = act ? a.tapstep[(long long)k * n + i] : 0;
    const bool on = act && s < len && a.saveat[k] > gs_t0(a, i, act);
{{- if .RevAcc}}
    // Every lane calls the step (the field's VJP reduces across the warp);
    // a lane that is off passes zeros.
{{- end}}
    gs_real ts = 0, ys[GS_D], lt[GS_D];
    for (int c = 0; c < GS_D; c++) ys[c] = lt[c] = 0;
    if (on) {
      const gs_real* row = a.store + (long long)s * GS_SW * n + i;
      ts = GS_STORE_T ? row[0] : (gs_real)0;
      for (int c = 0; c < GS_D; c++) {
        ys[c] = row[(long long)(GS_STORE_T + c) * n];
        lt[c] = a.tb[((long long)k * GS_D + c) * n + i];
      }
    }
    const gs_real tau = a.saveat[k];
{{- if .RevAcc}}
    {
      const gs_rev_out r = gs_a_rev(sh, acc, on, ts, on ? tau - ts : (gs_real)0, ys, p, lt, gp);
{{- else}}
    gs_rev_out r;
    if (on) {
      r = gs_a_rev(sh, ts, tau - ts, ys, p, lt, gp);
{{- end}}
      if (on) {
        for (int c = 0; c < GS_D; c++) a.tb[((long long)k * GS_D + c) * n + i] = r.v[c];
        for (int c = 0; c < GS_NP; c++) gp[c] = r.v[GS_D + c];
      }
    }
{{- if not .RevAcc}}
    gs_warp_add<GS_NS>(acc, &r.v[GS_D + GS_NP], on);
{{- end}}
  }
{{- end}}
  // Save times past the last step add to the final state's cotangent.
  int kq = GS_K;
  if (act) {
    while (kq > 0 && a.tapstep[(long long)(kq - 1) * n + i] >= len) kq--;
    for (int k = kq; k < GS_K; k++)
{{- if .SaveCots}}
      for (int c = 0; c < GS_D; c++) lam[c] += sc * gs_save_cot(sh, y, a.ys, n, i, a.data, p, k, c);
{{- else}}
      for (int c = 0; c < GS_D; c++) lam[c] += a.tb[((long long)k * GS_D + c) * n + i];
{{- end}}
  }
{{- end}}
  const int smax = gs_warp_max(act ? len : 0);
{{- if .Dense}}
  const gs_real t0 = gs_t0(a, i, act);
  // The sweep is software-pipelined over the steps, so that a step's
  // loads wait for nothing it computes and are in flight during the step
  // before it (a small ensemble has no other warps to hide their latency
  // with): step s's stored t is read two steps ahead (tnext), its save
  // times k0 ... kq-1 found one step ahead (gs_dense_first_save, from
  // step s + 1's k0, which is kq when step s runs) and its state, size
  // and save times' cotangents asked for then (gs_prefetch_step). Only
  // when loads issue changes: the results are the same bit for bit.
  const auto row_t = [&a, i, n, len, act](int s) {
    return (GS_STORE_T && act && s >= 0 && s < len) ? a.store[(long long)s * GS_SW * n + i] : (gs_real)0;
  };
  const auto first_save = [&a, act, len, t0](int kq, int s, gs_real ts) {
    return (act && s >= 0 && s < len) ? gs_dense_first_save(a, kq, s, ts, t0) : kq;
  };
  gs_real tnow = row_t(smax - 1), tnext = row_t(smax - 2);
  int knext = first_save(kq, smax - 1, tnow);
  gs_prefetch_step(a, i, act && smax - 1 < len, smax - 1, knext, kq);
{{- end}}
  for (int s = smax - 1; s >= 0; s--) {
    const bool on = act && s < len;
{{- if .Dense}}
    // Step s's t and save times k0 ... kq-1 (found a step ago); then step
    // s - 1's, and its loads asked for.
    const gs_real tstep = tnow;
    const int k0 = knext;
    tnow = tnext;
    tnext = row_t(s - 2);
    knext = first_save(k0, s - 1, tnow);
    gs_prefetch_step(a, i, act && s - 1 >= 0 && s - 1 < len, s - 1, knext, k0);
{{- else if .Saves}}
    // The save times on step s: k0 ... kq-1.
    const int k0 = on ? gs_first_save(a, i, kq, s) : kq;
{{- end}}
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
        ts = {{if .Dense}}tstep{{else}}GS_STORE_T ? row[0] : (gs_real)0{{end}};
        for (int c = 0; c < GS_D; c++) ys[c] = row[(long long)(GS_STORE_T + c) * n];
      }
      const bool live = on && h != 0;
{{- if .ShareRev}}
      // One reverse step for all: the dense step's, with wb zero where no
      // save time lies inside the step (Reverse's results, bit for bit).
      gs_real wb[GS_DW];
      {{template "coef-bar" .}}live, k0, kq, ts, h, {{template "theta-arg" .}}wb);
      gs_take(gs_a_drev(sh, acc, live, ts, live ? h : (gs_real)0, ys, p, lam, wb, gp), live, lam, gp);
{{- else}}
{{- if .Dense}}
      // The warp's lanes call one of the two steps alike.
      gs_real wb[GS_DW];
      if (gs_warp_any({{template "coef-bar" .}}live, k0, kq, ts, h, {{template "theta-arg" .}}wb)))
        gs_take(gs_a_drev(sh, acc, live, ts, live ? h : (gs_real)0, ys, p, lam, wb, gp), live, lam, gp);
      else
{{- end}}
      gs_take(gs_a_rev(sh, acc, live, ts, live ? h : (gs_real)0, ys, p, lam, gp), live, lam, gp);
{{- end}}
    }
    if (on) {
{{- else}}
{{- if .ShareRev}}
    gs_drev_out r;
{{- else}}
    gs_rev_out r;
{{- end}}
{{- if and .Dense (not .ShareRev)}}
    gs_drev_out rd;
    bool dense = false;
{{- end}}
    if (on) {
      h = GS_HSRC[(long long)s * n + i];
      if (h != 0) {
        const gs_real* row = a.store + (long long)s * GS_SW * n + i;
        const gs_real ts = {{if .Dense}}tstep{{else}}GS_STORE_T ? row[0] : (gs_real)0{{end}};
        gs_real ys[GS_D];
        for (int c = 0; c < GS_D; c++) ys[c] = row[(long long)(GS_STORE_T + c) * n];
{{- if .ShareRev}}
        // One reverse step for all (as above).
        gs_real wb[GS_DW];
        {{template "coef-bar" .}}true, k0, kq, ts, h, {{template "theta-arg" .}}wb);
        r = gs_a_drev(sh, ts, h, ys, p, lam, wb, gp);
        gs_take(r, true, lam, gp);
{{- else if .Dense}}
        gs_real wb[GS_DW];
        dense = {{template "coef-bar" .}}true, k0, kq, ts, h, {{template "theta-arg" .}}wb);
        if (dense) {
          rd = gs_a_drev(sh, ts, h, ys, p, lam, wb, gp);
          gs_take(rd, true, lam, gp);
        } else {
          r = gs_a_rev(sh, ts, h, ys, p, lam, gp);
          gs_take(r, true, lam, gp);
        }
{{- else}}
        r = gs_a_rev(sh, ts, h, ys, p, lam, gp);
        gs_take(r, true, lam, gp);
{{- end}}
      }
{{- end}}
{{- if .Saves}}
{{- if .CotGroup}}
      // A group's cotangents read at once (gs_save_cots), then added in
      // order.
      for (int k = k0; k < kq; k += GS_COT_GROUP) {
        gs_real tau[GS_COT_GROUP], yb[GS_COT_GROUP][GS_D];
        gs_save_cots(a, sh, y, p, sc, i, k, kq, tau, yb);
        for (int j = 0; j < GS_COT_GROUP; j++)
          if (k + j < kq)
            for (int c = 0; c < GS_D; c++) lam[c] += yb[j][c];
      }
{{- else}}
#pragma unroll 4
      for (int k = k0; k < kq; k++)
{{- if .SaveCots}}
        for (int c = 0; c < GS_D; c++) lam[c] += sc * gs_save_cot(sh, y, a.ys, n, i, a.data, p, k, c);
{{- else}}
        for (int c = 0; c < GS_D; c++) lam[c] += a.tb[((long long)k * GS_D + c) * n + i];
{{- end}}
{{- end}}
      kq = k0;
{{- end}}
    }
{{- if not .RevAcc}}
    gs_warp_add<GS_NS>(acc, {{if and .Dense (not .ShareRev)}}dense ? &rd.v[GS_D + GS_NP] : {{end}}&r.v[GS_D + GS_NP], on && h != 0);
{{- end}}
  }
  if (act) {
    for (int c = 0; c < GS_D; c++) a.gy0[(long long)c * n + i] = lam[c];
    for (int c = 0; c < GS_NP; c++) a.gp[(long long)c * n + i] = gp[c];
  }
{{- end}}
}
{{- end}}
