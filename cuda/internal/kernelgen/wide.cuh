{{- /*
wide.cuh: the wide layout (one warp per trajectory, wide.go) of the
engine's kernels: its hooks ("hooks", see kernel.cuh), its driver loop
("wide-body": a solve, a record, a loss, a gradient with the record and
its reverse sweep) and the kernel ("entry"). Every d-long array of a
trajectory is in its warp's part of the block's shared memory
(kernelPlan.W); the wide functions of Init, Trial, Control and a
gradient's reverse step split their component loops over the lanes; the
controller's state and every other scalar are each lane's own, the same
in every lane. A stored state's components are consecutive (row s of
trajectory i at a.store + (s*n + i)*GS_SW), so that the lanes' writes and
reads of one state coalesce; with Config.RowMajor so are the
per-trajectory inputs and results y0, p, y, gy0 and gp (GS_WAT).
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
// err[D], k_s[D] with FSAL, h*rho), the controller's own inputs (state,
// t1: its y, y+, err and h*rho are the trial's) and outputs (state',
// accept, status), and the functions' scratch. Init reads t0 and t1 from
// GS_W_CI's place, y and p from the trial's, and writes its outputs to
// GS_W_TO's.
#define GS_W_TO {{.W.TO}}
#define GS_W_CI {{.W.CI}}
#define GS_W_CO {{.W.CO}}
#define GS_W_SCR {{.W.SCR}}
#define GS_W_LEN {{.W.Len}}
{{- if .Saves}}
// The dense step's outputs (y+, w), with save times.
#define GS_W_DO {{.W.DO}}
{{- end}}
{{- if .W.Probe}}
// The stability probe's vector v[D] (kept between the probed trials; its
// rprev, u and accept in CI's place) and its outputs (v'[D], rprev', u',
// stiff; in SCR, after the probe's scratch).
#define GS_W_PV {{.W.PV}}
#define GS_W_PO {{.W.PO}}
{{- end}}
{{- if .Grad}}
// The reverse sweep: the step's inputs from the start (t, h, y, p, lambda,
// then gp, or with save times wbar and gp for the dense step's reverse),
// its outputs (lambda', gp', gs), the trajectory's gp and sum of gs, and
// the steps' scratch.
#define GS_W_RO {{.W.RO}}
#define GS_W_GP {{.W.GP}}
#define GS_W_GA {{.W.GA}}
#define GS_W_RSCR {{.W.RSCR}}
{{- if .W.PrivOut}}
// The reverse steps write lambda' to the lanes' own rows (a gs_real array
// of GS_WPRIV * GS_W_LROWS per lane, component c at row c / GS_WSTRIDE of
// lane c mod 32: wide.go's wideLayout.PrivOut), RO holds gp' and gs.
#define GS_W_LROWS ((GS_D + 31) / 32)
#define GS_W_ROD 0
{{- else}}
#define GS_W_ROD GS_D
{{- end}}
{{- end}}
#define GS_W_FSAL {{if .FSAL}}1{{else}}0{{end}}
{{- if .RowMajor}}
// The per-trajectory arrays y0, p, y, gy0, gp are row-major
// (Config.RowMajor): component c of trajectory i (rows of w) at
// [i*w + c], so that the lanes' accesses to one row coalesce.
#define GS_WAT(c, w, i, n) ((long long)(i) * (w) + (c))
{{- else}}
// The per-trajectory arrays y0, p, y, gy0, gp: component c of
// trajectory i of n at [c*n + i].
#define GS_WAT(c, w, i, n) ((long long)(c) * (n) + (i))
{{- end}}
{{- end}}

{{define "wide-body"}}
{{- if .Saves}}

// gs_wide_save sets save time k of trajectory i, on step s, to the state
// y, or at theta != 0 to the continuous extension with coefficients w
// from it (gs_interp's rule): every lane its components, lane 0 the step
// (for a gradient's reverse sweep; Config.OldSaves: in every kernel).
GS_DEVICE void gs_wide_save(const gs_args& a, int k, long long i, int s, const gs_real* y, const gs_real* w,
                            gs_real theta) {
  const int lane = GS_WLANE;
  const long long n = a.n;
  for (int c = lane; c < GS_D; c += GS_WSTRIDE) {
    gs_real out = y[c];
    if (theta != 0) {
      gs_real acc = w[(GS_TERMS - 1) * GS_D + c];
      for (int j = GS_TERMS - 2; j >= 0; j--) acc = w[j * GS_D + c] + theta * acc;
      out = y[c] + theta * acc;
    }
    a.ys[((long long)k * GS_D + c) * n + i] = out;
  }
{{- if or .Grad .OldSaves}}
  if (lane == 0) a.tapstep[(long long)k * n + i] = s;
{{- else}}
  (void)s;
{{- end}}
}
{{- end}}
{{- if .Grad}}

// gs_wide_backward is the adjoint of trajectory i, which took len steps
// and ended with its final state and parameters at ws + 2 (the loss VJP,
// on lane 0, then the reverse steps from the last to the first{{if .Saves}}, with
// the save times' cotangents: a step with save times inside it runs the
// dense step's reverse with the coefficients' cotangents (gs_coef_bar's
// sums), and the save times on it add to lambda after it{{end}}); it writes
// the loss term, dL/dy0 and dL/dp, and adds dL/ds to acc (the loss's own
// to acc + GS_NS, unscaled). Every lane of the warp calls it.
GS_DEVICE void gs_wide_backward(const gs_args& a, const gs_real* sh, const long long i, const int len, gs_real* ws,
                                gs_real* acc) {
  const int lane = GS_WLANE;
  const long long n = a.n;
  const gs_real sc = (gs_real)a.scale;
  gs_real* ri = ws;
  gs_real* ro = ws + GS_W_RO;
  gs_real* gp = ws + GS_W_GP;
  gs_real* ga = ws + GS_W_GA;
  gs_real* scr = ws + GS_W_RSCR;
  gs_real* y = ri + 2;
{{- if .W.RecY}}
  // The reverse steps read y from the record's row (wideLayout.RecY):
  // p in RI right after t and h; the loss VJP reads the final state y
  // and pf, p where the forward loop left them.
  gs_real* p = ri + 2;
  const gs_real* pf = y + GS_D;
{{- else}}
  gs_real* p = y + GS_D;
{{- end}}
  gs_real* lam = p + GS_NP;
  gs_real* gpr = lam + GS_D;  // Reverse's gp
{{- if .Saves}}
  gs_real* wb = lam + GS_D;  // DenseStepReverse's wbar, then gp
  gs_real* gpd = wb + GS_DW;
{{- end}}
  (void)ga;
  (void)gpr;
{{- if .W.PrivOut}}
  gs_real lamo[GS_WPRIV * GS_W_LROWS];  // the reverse step's lambda', the lane's rows
{{- end}}
  for (int q = lane; q < GS_NS; q += GS_WSTRIDE) ga[q] = 0;
  if (lane == 0) {
    // The bound loss VJP (adapters.go: wideLoss) reads y and p where they
    // are, stores the loss term and dL/dys (times sc) to the ensemble's
    // arrays and dL/dy, dL/dp (times sc) to lam and gp, and returns dL/ds.
{{- if .W.RecY}}
    // Here lam overlaps the final state (p moves to ri + 2): dL/dy and
    // dL/dp go to the reverse steps' scratch first, then to lam and gp
    // once p has moved.
    const gs_lgrad_out r = gs_a_loss_grad(sh, y, a.ys, n, i, a.data, pf, sc, a.loss, a.tb, scr, scr + GS_D);
    for (int c = 0; c < GS_NP; c++) p[c] = pf[c];  // before lam, over pf
    for (int c = 0; c < GS_D; c++) lam[c] = scr[c];
    for (int c = 0; c < GS_NP; c++) gp[c] = scr[GS_D + c];
{{- else}}
    const gs_lgrad_out r = gs_a_loss_grad(sh, y, a.ys, n, i, a.data, p, sc, a.loss, a.tb, lam, gp);
{{- end}}
    for (int q = 0; q < GS_NS; q++) GS_ACC_ATOMIC(&acc[GS_NS + q], r.v[q]);
    (void)r;
  }
  GS_SYNCWARP();
{{- if .Saves}}
  // Save times past the last step add to the final state's cotangent.
  int kq = GS_K;
  while (kq > 0 && a.tapstep[(long long)(kq - 1) * n + i] >= len) kq--;
  for (int c = lane; c < GS_D; c += GS_WSTRIDE)
    for (int k = kq; k < GS_K; k++) lam[c] += a.tb[((long long)k * GS_D + c) * n + i];
{{- end}}
  for (int s = len - 1; s >= 0; s--) {
{{- if .Saves}}
    // The save times on step s: k0 ... kq-1.
    int k0 = kq;
    while (k0 > 0 && a.tapstep[(long long)(k0 - 1) * n + i] == s) k0--;
{{- end}}
    const gs_real h = GS_HSRC[(long long)s * n + i];
    if (h != 0) {
      const gs_real* row = a.store + ((long long)s * n + i) * GS_SW;
      const gs_real ts = GS_STORE_T ? row[0] : (gs_real)0;
      GS_SYNCWARP();  // the last step's reads of ri are done
      if (lane == 0) {
        ri[0] = ts;
        ri[1] = h;
      }
{{- if not .W.RecY}}
      for (int c = lane; c < GS_D; c += GS_WSTRIDE) y[c] = row[GS_STORE_T + c];
{{- end}}
{{- if .Saves}}
      bool dense = false;
      for (int k = k0; k < kq; k++)
        if ((a.saveat[k] - ts) / h != 0) dense = true;
      if (dense) {
        // The coefficients' cotangents: over the save times inside the
        // step, in order, wbar[j * GS_D + c] += theta^(j+1) * ybar[c].
        for (int c = lane; c < GS_D; c += GS_WSTRIDE) {
          for (int j = 0; j < GS_TERMS; j++) wb[j * GS_D + c] = 0;
          for (int k = k0; k < kq; k++) {
            const gs_real theta = (a.saveat[k] - ts) / h;
            if (theta == 0) continue;
            gs_real pw = theta;
            for (int j = 0; j < GS_TERMS; j++) {
              wb[j * GS_D + c] += pw * a.tb[((long long)k * GS_D + c) * n + i];
              pw *= theta;
            }
          }
        }
        for (int c = lane; c < GS_NP; c += GS_WSTRIDE) gpd[c] = gp[c];
        GS_SYNCWARP();
        {{.W.DRev}}(sh, ri, ro, scr{{if .W.PrivOut}}, lamo{{end}}{{if .W.RecY}}, row + GS_STORE_T{{end}});
      } else
{{- end}}
      {
        for (int c = lane; c < GS_NP; c += GS_WSTRIDE) gpr[c] = gp[c];
        GS_SYNCWARP();
        {{.W.Rev}}(sh, ri, ro, scr{{if .W.PrivOut}}, lamo{{end}}{{if .W.RecY}}, row + GS_STORE_T{{end}});
      }
      for (int c = lane; c < GS_D; c += GS_WSTRIDE) lam[c] = {{if .W.PrivOut}}lamo[c / GS_WSTRIDE]{{else}}ro[c]{{end}};
      for (int c = lane; c < GS_NP; c += GS_WSTRIDE) gp[c] = ro[GS_W_ROD + c];
      for (int q = lane; q < GS_NS; q += GS_WSTRIDE) ga[q] += ro[GS_W_ROD + GS_NP + q];
    }
{{- if .Saves}}
    for (int c = lane; c < GS_D; c += GS_WSTRIDE)
      for (int k = k0; k < kq; k++) lam[c] += a.tb[((long long)k * GS_D + c) * n + i];
    kq = k0;
{{- end}}
  }
  GS_SYNCWARP();
  for (int c = lane; c < GS_D; c += GS_WSTRIDE) a.gy0[GS_WAT(c, GS_D, i, n)] = lam[c];
  for (int c = lane; c < GS_NP; c += GS_WSTRIDE) a.gp[GS_WAT(c, GS_NP, i, n)] = gp[c];
  for (int q = lane; q < GS_NS; q += GS_WSTRIDE) GS_ACC_ATOMIC(&acc[q], ga[q]);
}
{{- end}}

{{- if .W.Probe}}

// The stability probe's start vector (ode.Plan.ProbeStart).
#ifdef GS_CUDA
__device__ const gs_real gs_w_pstart[] = { {{- range $c, $x := .ProbeStart}}{{if $c}}, {{end}}(gs_real){{$x}}{{end -}} };
#else
static const gs_real gs_w_pstart[] = { {{- range $c, $x := .ProbeStart}}{{if $c}}, {{end}}(gs_real){{$x}}{{end -}} };
#endif
{{- end}}

// gs_body runs trajectory i on the calling warp, whose shared memory is
// ws (GS_W_LEN reals): Init, then Trial and Control until the controller
// ends it{{if or .MeshOut .Store}}, recording its accepted steps{{end}}; its final state and outcome{{if .Grad}},
// then its adjoint{{else if .Loss}} and loss term{{end}}.
GS_DEVICE void gs_body(const gs_args& a, const long long i, gs_real* ws, const gs_real* sh, const gs_real* csh,
                       gs_real* acc) {
  const int lane = GS_WLANE;
  const long long n = a.n;
  const gs_real t0 = gs_t0(a, i, i < a.n), t1 = a.t1[i];
  gs_real* ti = ws;
  gs_real* to = ws + GS_W_TO;
  gs_real* ci = ws + GS_W_CI;
  gs_real* co = ws + GS_W_CO;
  gs_real* scr = ws + GS_W_SCR;
  gs_real* y = ti + 2;
  gs_real* p = y + GS_D;
  gs_real* k1 = p + GS_NP;
  (void)k1;
  (void)acc;
  GS_SYNCWARP();  // the warp's last trajectory is done with ws
  for (int c = lane; c < GS_D; c += GS_WSTRIDE) y[c] = a.y0[GS_WAT(c, GS_D, i, n)];
  for (int c = lane; c < GS_NP; c += GS_WSTRIDE) p[c] = a.p[GS_WAT(c, GS_NP, i, n)];
{{- if .W.Copies}}
  // Init: t0, t1, y, p -> h, last, f0 (in CI's and TO's places).
  if (lane == 0) {
    ci[0] = t0;
    ci[1] = t1;
  }
  for (int c = lane; c < GS_D; c += GS_WSTRIDE) ci[2 + c] = a.y0[GS_WAT(c, GS_D, i, n)];
  for (int c = lane; c < GS_NP; c += GS_WSTRIDE) ci[2 + GS_D + c] = a.p[GS_WAT(c, GS_NP, i, n)];
  GS_SYNCWARP();
  {{.W.Init}}(sh, ci, to, scr);
{{- else}}
  // Init: t0, t1 (in CI's place), y, p (the trial's) -> h, last, f0 (in
  // TO's place); it reads its inputs where they are (wide.go:
  // wideLayout.inputs), from ws.
  if (lane == 0) {
    ci[0] = t0;
    ci[1] = t1;
  }
  GS_SYNCWARP();
  {{.W.Init}}(sh, ws, to, scr);
{{- end}}
  gs_real st[GS_NSTATE];
  const gs_real h0 = to[0], last = to[1];
#if GS_W_FSAL
  for (int c = lane; c < GS_D; c += GS_WSTRIDE) k1[c] = to[2 + c];
#endif
  gs_start(st, t0, h0, last);
  gs_real lasth = h0;
  int status = GS_RUNNING;
  bool overflow = false;
  bool run = true;
{{- if .Saves}}
  // The save times at or before t0: the initial state.
  int k = 0;
  for (; k < GS_K && a.saveat[k] <= t0; k++) gs_wide_save(a, k, i, 0, y, y, 0);
  gs_real* dout = ws + GS_W_DO;
{{- end}}
{{- if .W.Probe}}
  // The stability probe's state (ode.Plan.Probe): the vector v (in ws,
  // every lane its components), the last ratio and the growth (every
  // lane's own, the same in every lane), and the trials tried so far.
  gs_real* pv = ws + GS_W_PV;
  const gs_real* po = ws + GS_W_PO;
  for (int c = lane; c < GS_D; c += GS_WSTRIDE) pv[c] = gs_w_pstart[c];
  gs_real prv = 0, pu = 1;
  long long ntrial = 0;
{{- end}}
  while (run) {
    GS_SYNCWARP();  // the last step's reads of ti and ci are done
    if (lane == 0) {
      ti[0] = st[GS_ST_T];
      ti[1] = st[GS_ST_H];
    }
    GS_SYNCWARP();
    {{.W.Trial}}(sh, ti, to, scr);
{{- if .W.Copies}}
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
{{- else}}
    // Control: state, t1 (in CI's place), y (the trial's input), y+, err,
    // h*rho (its outputs), read where they are (wideLayout.inputs).
    for (int q = lane; q < GS_NSTATE; q += GS_WSTRIDE) ci[q] = st[q];
    if (lane == 0) ci[GS_NSTATE] = t1;
    GS_SYNCWARP();
    {{.W.Control}}(csh, ws, co, scr);
{{- end}}
{{- if .W.Probe}}
    gs_real accept = co[GS_NSTATE];
    gs_real stat = co[GS_NSTATE + 1];
    // The stability probe on its trials (ode.Plan.ProbeDue{{if .ProbeAll}}; Method
    // Auto's pass: every trial{{end}}), at the state the trial started from
    // (t, h, y and p where the trial read them), between the controller
    // and the commit: pmark marks the trajectory stiff{{if .StopStiff}}, pveto rejects
    // the accepted step where it fires (the trajectory stops before it){{end}}.
    bool pmark = false, pveto = false;
    if ({{if .ProbeAll}}true{{else}}ntrial % {{.ProbeEvery}} == 0 || ntrial == {{.ProbeEvery}} / 4{{end}}) {
      if (lane == 0) {
        ci[0] = prv;
        ci[1] = pu;
        ci[2] = accept;
      }
      GS_SYNCWARP();
      {{.W.Probe}}(sh, ws, ws + GS_W_PO, scr);
      for (int c = lane; c < GS_D; c += GS_WSTRIDE) pv[c] = po[c];
      prv = po[GS_D];
      pu = po[GS_D + 1];
      const bool pst = po[GS_D + 2] != 0;
      GS_SYNCWARP();  // the outputs (in SCR) are read
      if (pst) {
        pmark = true;
{{- if .StopStiff}}
        if (accept != 0) {
          pveto = true;
          accept = 0;
          if (stat == (gs_real)GS_OK) stat = (gs_real)GS_RUNNING;
        }
{{- end}}
      }
    }
    ntrial++;
{{- else}}
    const gs_real accept = co[GS_NSTATE];
    gs_real stat = co[GS_NSTATE + 1];
{{- end}}
    lasth = st[GS_ST_H];
    if (accept != 0) {
{{- if or .MeshOut .Store .Saves}}
      const long long s = (long long)st[GS_ST_ACCEPTED];
{{- end}}
{{- if .Saves}}
      // The save times on the step (from ts of size hs), from its dense
      // step's coefficients where one lies inside it; the dense step's
      // inputs t, h, y, p are the trial's.
      const gs_real ts = st[GS_ST_T], hs = st[GS_ST_H];
      if (k < GS_K && a.saveat[k] < ts + hs) {
        if (gs_inside(a, k, ts, hs)) {{.W.Dense}}(sh, ti, dout, scr);
        for (; k < GS_K && a.saveat[k] < ts + hs; k++) gs_wide_save(a, k, i, (int)s, y, dout + GS_D, (a.saveat[k] - ts) / hs);
      }
{{- end}}
{{- if or .MeshOut .Store}}
      // The step's record: its size and the state it starts from (every
      // lane its components).
      if (s >= a.rows) {
        overflow = true;
      } else {
{{- if .MeshOut}}
        if (lane == 0) a.hout[s * n + i] = st[GS_ST_H];
{{- end}}
{{- if .Store}}
        gs_real* row = a.store + (s * n + i) * GS_SW;
        if (GS_STORE_T && lane == 0) row[0] = st[GS_ST_T];
        for (int c = lane; c < GS_D; c += GS_WSTRIDE) row[GS_STORE_T + c] = y[c];
{{- end}}
      }
{{- end}}
      for (int c = lane; c < GS_D; c += GS_WSTRIDE) y[c] = to[c];
#if GS_W_FSAL
      for (int c = lane; c < GS_D; c += GS_WSTRIDE) k1[c] = to[2 * GS_D + c];
#endif
    }
{{- if .W.Probe}}
    if (pveto) {
      // The step the probe found outside the stability region counts as
      // rejected (solve.cuh's veto): the state but for that.
      st[GS_ST_REJECTED] += 1;
    } else {
      for (int q = 0; q < GS_NSTATE; q++) st[q] = co[q];
    }
    if (pmark) st[GS_ST_STIFF] = 1;
{{- else}}
    for (int q = 0; q < GS_NSTATE; q++) st[q] = co[q];
{{- end}}
{{- if .StopStiff}}
    // The stiffness test fired: the gradient will be refused, so the
    // trajectory ends here with status Stiff.
    if (stat == (gs_real)GS_RUNNING && st[GS_ST_STIFF] != 0) stat = (gs_real){{.StiffStatus}};
{{- end}}
    if (stat != (gs_real)GS_RUNNING) {
      status = (int)stat;
      run = false;
    }
  }
  GS_SYNCWARP();
  const int len = (int)st[GS_ST_ACCEPTED];
  if (lane == 0) gs_finish(a, i, st, lasth, len, status, overflow);
  for (int c = lane; c < GS_D; c += GS_WSTRIDE) a.y[GS_WAT(c, GS_D, i, n)] = y[c];
{{- if .Saves}}
  // The save times at or after the end: the final state.
  if (status == GS_OK)
    for (; k < GS_K; k++) gs_wide_save(a, k, i, len, y, y, 0);
  GS_SYNCWARP();  // lane 0's loss reads the saved states
{{- end}}
{{- if and .Loss (not .Grad)}}
  if (lane == 0 && status == GS_OK && !overflow) a.loss[i] = gs_a_loss(sh, y, a.ys, n, i, a.data, p);
{{- end}}
{{- if .Grad}}
#if defined(GS_WARP_SIM) && defined(GS_WIDE_LANES)
  // The simulated warp's groups of lanes run their trajectories at once:
  // trajectory i adds to the shared gradient's sums (acc) on its turn, so
  // that the adds come in trajectory order, as on one simulated warp a
  // trajectory (on the device the warps' atomics come in no fixed order).
  gs_sim_turn_wait(i);
#endif
  if (status == GS_OK && !overflow) gs_wide_backward(a, sh, i, len, ws, acc);
#if defined(GS_WARP_SIM) && defined(GS_WIDE_LANES)
  GS_SYNCWARP();
  if (lane == 0) gs_sim_turn_pass(i);
#endif
{{- end}}
}
{{- end}}

{{define "entry"}}{{if gt .WideWarpsOf 1}}{{template "entry-warps" .}}{{else}}
// A block of {{.WideWarps}} warps, each with GS_W_LEN reals of the block's dynamic
// shared memory, each running trajectories warp, warp + warps, ... of
// the launch.
{{- template "wide-signature" .}}
#ifdef GS_CUDA
  // A trajectory's GS_WSTRIDE lanes (a warp, or with GS_WIDE_LANES part
  // of one) share its GS_W_LEN reals.
  extern __shared__ gs_real gs_smem[];
  gs_real* ws = gs_smem + (threadIdx.x / GS_WSTRIDE) * GS_W_LEN;
  const long long wpb = blockDim.x / GS_WSTRIDE;
  for (long long i = blockIdx.x * wpb + (threadIdx.x / GS_WSTRIDE); i < a.n; i += (long long)gridDim.x * wpb)
    gs_body(a, i, ws, a.sh, a.sh + GS_NS, a.gs);
#elif defined(GS_WARP_SIM)
  // On the host one simulated warp (GS_WARP_SIM, its threads sharing the
  // static array) runs every trajectory: with GS_WIDE_LANES its groups
  // of lanes take trajectories in turn, each group its own part.
  static gs_real ws[32 / GS_WSTRIDE * GS_W_LEN];
  const int g = threadIdx.x / GS_WSTRIDE;
{{- if .Grad}}
#ifdef GS_WIDE_LANES
  // The launch's turns (gs_body) start at trajectory 0.
  __syncwarp();
  if (threadIdx.x == 0) gs_sim_turn_start();
  __syncwarp();
#endif
{{- end}}
  for (long long i = g; i < a.n; i += 32 / GS_WSTRIDE) gs_body(a, i, ws + g * GS_W_LEN, a.sh, a.sh + GS_NS, a.gs);
#else
  // On the host one thread runs every trajectory.
  static gs_real ws[GS_W_LEN];
  for (long long i = 0; i < a.n; i++) gs_body(a, i, ws, a.sh, a.sh + GS_NS, a.gs);
#endif
}
{{- end}}{{end}}

{{define "entry-warps"}}
// A block of {{.WideWarps}} warps a trajectory (Config.WideTrajWarps), its
// dynamic shared memory the exchange slots (GS_WIDE_WARPS reals, GS_WX)
// and the trajectory's GS_W_LEN reals, running trajectories block, block
// + blocks, ... of the launch.
{{- template "wide-signature" .}}
#ifdef GS_CUDA
  extern __shared__ gs_real gs_smem[];
  gs_real* ws = gs_smem + GS_WIDE_WARPS;
  for (long long i = blockIdx.x; i < a.n; i += gridDim.x) gs_body(a, i, ws, a.sh, a.sh + GS_NS, a.gs);
#elif defined(GS_WARP_SIM)
  // On the host one simulated block (GS_WARP_SIM: 32 * GS_WIDE_WARPS
  // threads sharing the static array) runs every trajectory.
  static gs_real ws[GS_W_LEN];
  for (long long i = 0; i < a.n; i++) gs_body(a, i, ws, a.sh, a.sh + GS_NS, a.gs);
#else
  // On the host one thread runs every trajectory.
  static gs_real ws[GS_W_LEN];
  for (long long i = 0; i < a.n; i++) gs_body(a, i, ws, a.sh, a.sh + GS_NS, a.gs);
#endif
}
{{- end}}

{{define "wide-signature"}}
{{- if gt .WideMinBlocks 0}}
// Config.WideMinBlocks: at least {{.WideMinBlocks}} blocks of {{.WideWarps}} warps per
// multiprocessor, so that ptxas caps a thread's registers to let them run;
// none in a kernel compiled in parts (GS_UNITS), whose units are compiled
// with that cap instead (Config.UnitRegs).
#if defined(GS_CUDA) && !defined(GS_UNITS)
#define GS_BOUNDS __launch_bounds__({{.WideWarps}} * 32, {{.WideMinBlocks}})
#else
#define GS_BOUNDS
#endif
GS_GLOBAL void GS_BOUNDS GS_KERNEL_NAME(const gs_args a) {
{{- else}}
GS_GLOBAL void GS_KERNEL_NAME(const gs_args a) {
{{- end}}{{end}}
