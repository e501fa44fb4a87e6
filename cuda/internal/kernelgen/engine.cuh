// gradsolve CUDA engine: the kernel template. Generated code defines the
// configuration macros and the adapter functions below, then includes this
// text; the result is one kernel, GS_KERNEL_NAME, that runs one trajectory
// per thread (in lanes mode, GS_LANEMODE: per warp, its lanes computing
// the elements of the functions' vectors and alike everything else)
// through the driver loop of ode.Plan:
//
//   Init; repeat { Trial; Control; on accept: store, save, y = y+ } until done
//   [loss] [adjoint: loss VJP, save-time VJPs, Reverse backwards over the steps]
//
// Configuration (0 or 1 unless noted):
//   GS_D, GS_NP, GS_NS, GS_DD, GS_K   state, per-trajectory and shared
//                                     parameters, data per trajectory, save times
//   GS_FSAL, GS_DENSE                 the method's Trial takes k1; save times
//                                     use Dense (Rosenbrock methods)
//   GS_ADAPTIVE                       run the controller (else replay a.hin)
//   GS_MESH_OUT                       write accepted step sizes to a.hout
//   GS_STORE                          keep (t, y) before every step in a.store
//   GS_STORE_T                        store t too (the reverse steps use it)
//   GS_LOSS, GS_GRAD                  loss terms; loss and adjoint
//   GS_SACC                           reduce shared gradients in shared memory
//   GS_LANEMODE                       (defined before the prelude, if at all)
//                                     one warp per trajectory (lanes.go)
//   GS_LANES_GLOBAL                   lanes mode with the padded shared block
//                                     (a.sh) and the warps' accumulators
//                                     (a.work) in global memory
//   GS_TILEMODE                       (with GS_LANEMODE, GS_LANES_GLOBAL;
//                                     defined before the prelude) a warp
//                                     per tile of 8 trajectories, lane l on
//                                     trajectory 8·tile + l/4 (tiles.go),
//                                     in lockstep (gs_body_tile)
//   GS_LANES_BLOCKACC, GS_LANES_BLOCK (with GS_LANES_GLOBAL) one accumulator
//                                     per block of GS_LANES_BLOCK threads, in
//                                     shared memory (atomics)
//   GS_TILES, GS_TILE                 (defined before the prelude, if at all)
//                                     reduce shared gradients per tile of
//                                     GS_TILE trajectories into a.gs[tile][2][NS]
//                                     in a fixed order (see the prelude)
//   GS_REV_ACC, GS_TAP_ACC, GS_LOSS_ACC
//                                     the reverse steps (of the mesh, of the
//                                     save times) and the loss VJP add their
//                                     shared-gradient contributions
//                                     themselves (AccFunc)
//
// Adapters (generated; they call the programs' functions):
//   gs_a_init, gs_a_trial, gs_a_control, gs_a_replay, gs_a_dense,
//   gs_a_rev (-> gs_rev_out), gs_a_tap_rev (-> gs_tap_rev_out),
//   gs_a_loss, gs_a_loss_grad (-> gs_lgrad_out)
//
// Layouts are step-major: component c of trajectory i of n at [c*n + i],
// step s at [s*n + i], stored state s at [(s*GS_SW + c)*n + i] (c = 0 the
// time, if stored), save time k at [(k*D + c)*n + i].
//
// The same text is host C++: without GS_CUDA the kernel is a loop over
// the trajectories and the warp reductions are plain sums.

#ifndef GS_LANES_GLOBAL
#define GS_LANES_GLOBAL 0
#endif
#ifndef GS_LANES_BLOCKACC
#define GS_LANES_BLOCKACC 0
#endif
#ifndef GS_LANEMODE
#define GS_LANEMODE 0
#endif
// In lanes mode each warp has its own accumulator of the steps' dL/ds,
// padded (entry j at GS_PAD(j)), GS_WACC entries long, added to without
// atomics; the loss's own dL/ds goes to the result (a.gs + GS_NS, or
// with GS_TILES the second half of the trajectory's tile), atomically and
// unpadded (GS_LOSS_ACC_AT; otherwise the second half of acc). GS_CSH is
// the padded length of the controller's shared block (rtol, atol[D],
// maxsteps) and GS_SSH that of the whole shared block (the shared
// parameters, then the controller's); lanes.go's lanesBlockLen and
// lanesAccLen size them alike.
#if GS_LANEMODE
#define GS_WACC (GS_NS > 0 ? 33 * ((GS_NS + 31) / 32) : 1)
#define GS_CSH (33 * ((GS_D + 2 + 31) / 32))
#define GS_SSH (33 * ((GS_NS + GS_D + 2 + 31) / 32))
#if defined(GS_TILES)
#define GS_LOSS_ACC_AT (a.gs + (i / GS_TILE) * (2 * GS_NS) + GS_NS)
#else
#define GS_LOSS_ACC_AT (a.gs + GS_NS)
#endif
#ifdef GS_CUDA
#define GS_LANES_PER_TRAJ 32
#else
#define GS_LANES_PER_TRAJ 1
#endif
// GS_TRAJ_LEAD is the one lane of a trajectory that writes for it.
#if defined(GS_TILEMODE) && defined(GS_WARPS)
#define GS_TRAJ_LEAD ((GS_LANE & 3) == 0)
#else
#define GS_TRAJ_LEAD GS_LANE0
#endif
#else
#define GS_LOSS_ACC_AT (acc + GS_NS)
#endif
#ifndef GS_NPX
#define GS_NPX (GS_NP > 0 ? GS_NP : 1)
#endif
#define GS_KX (GS_K > 0 ? GS_K : 1)
// A stored row holds t (if GS_STORE_T) and y.
#define GS_SW (GS_STORE_T + GS_D)

// The controller state (ode.StateT, ...), its length and the statuses.
enum {
  GS_ST_T = 0, GS_ST_H, GS_ST_ERRPREV, GS_ST_LAST, GS_ST_ACCEPTED, GS_ST_REJECTED,
  GS_ST_NONFINITE, GS_ST_STIFFRUN, GS_ST_CALMRUN, GS_ST_STIFF, GS_NSTATE
};
#define GS_RUNNING (-1)
#define GS_OK 0
#define GS_FLAG_STIFF 1
#define GS_FLAG_OVERFLOW 2

// gs_args is the kernel's one parameter; every field is 8 bytes, in the
// order of the Go side's argument words (exec.go).
struct gs_args {
  long long n;     // trajectories of this launch
  long long rows;  // rows of a.hout/a.store (record) or of a.hin (replay)
  double t0;       // start time
  double scale;    // the loss's scale
  const gs_real* sh;      // shared block: s[NS], rtol, atol[D], maxsteps
  const gs_real* saveat;  // [K]
  const gs_real* t1;      // [n]
  const gs_real* y0;      // [D][n]
  const gs_real* p;       // [NP][n]
  const gs_real* data;    // [DD][n]
  const gs_real* hin;     // [rows][n] the mesh to replay
  const int* len;         // [n] its lengths
  gs_real* gs;            // [2][NS] dL/ds, summed (atomics): steps, then the loss's own (unscaled);
                          // with GS_TILES [ceil(n/GS_TILE)][2][NS], one sum per tile
  gs_real* y;             // [D][n] final states
  gs_real* t;             // [n] time reached
  gs_real* lasth;         // [n] the last step size tried
  int* status;            // [n]
  int* acc;               // [n] accepted steps
  int* rej;               // [n] rejected steps
  int* flags;             // [n] GS_FLAG_*
  gs_real* ys;            // [K][D][n] saved states
  gs_real* loss;          // [n] loss terms
  gs_real* gy0;           // [D][n] dL/dy0
  gs_real* gp;            // [NP][n] dL/dp
  int* tapstep;           // [K][n] the step each save time lies on
  gs_real* tb;            // [K][D][n] cotangents of the saved states
  gs_real* hout;          // [rows][n] the recorded mesh
  gs_real* store;         // [rows][GS_SW][n] states before each step
  gs_real* work;          // GS_LANES_GLOBAL: [warps][GS_WACC] the warps' accumulators
};

#if GS_ADAPTIVE
#define GS_HSRC a.hout
#else
#define GS_HSRC a.hin
#endif

#if GS_K > 0
// gs_save computes save time k of trajectory i, on step s from (t, y) of
// size h: the Replay step of size tau - t (or Dense at theta).
// gs_save_state sets save time k of trajectory i to the state y, on step s.
GS_DEVICE void gs_save_state(const gs_args& a, int k, long long i, int s, const gs_real* y) {
  const long long n = a.n;
  for (int c = 0; c < GS_D; c++) a.ys[((long long)k * GS_D + c) * n + i] = y[c];
  a.tapstep[(long long)k * n + i] = s;
}

GS_DEVICE void gs_save(const gs_args& a, const gs_real* sh, int k, long long i, long long s, gs_real t, gs_real h,
                       const gs_real* y, const gs_real* p) {
  const gs_real tau = a.saveat[k];
  gs_real out[GS_D];
#if GS_DENSE
  gs_a_dense(sh, t, h, y, p, (tau - t) / h, out);
#else
  gs_a_replay(sh, t, tau - t, y, p, out);
#endif
  gs_save_state(a, k, i, (int)s, out);
}
#endif

#if GS_STORE
// gs_store_row keeps (t, y), the state before step s of trajectory i.
GS_DEVICE void gs_store_row(const gs_args& a, long long i, long long s, gs_real t, const gs_real* y) {
  const long long n = a.n;
  gs_real* row = a.store + s * GS_SW * n + i;
  if (GS_STORE_T) row[0] = t;
  for (int c = 0; c < GS_D; c++) row[(long long)(GS_STORE_T + c) * n] = y[c];
}
#endif

#if GS_MESH_OUT || GS_STORE
// gs_record writes accepted step s of trajectory i (of size st[H], from
// (st[T], y)) to the mesh and the stored states if it fits in their rows
// (from the lane lead only) and reports whether it did not.
GS_DEVICE bool gs_record(const gs_args& a, long long i, long long s, const gs_real* st, const gs_real* y, bool lead) {
  if (s >= a.rows) return true;
  if (lead) {
#if GS_MESH_OUT
    a.hout[s * a.n + i] = st[GS_ST_H];
#endif
#if GS_STORE
    gs_store_row(a, i, s, st[GS_ST_T], y);
#endif
  }
  return false;
}
#endif

#if GS_ADAPTIVE
// gs_start sets the controller state st of a solve from t0 with the
// first step h0 (last: whether it is the last).
GS_DEVICE void gs_start(gs_real* st, gs_real t0, gs_real h0, gs_real last) {
  for (int q = 0; q < GS_NSTATE; q++) st[q] = 0;
  st[GS_ST_T] = t0;
  st[GS_ST_H] = h0;
  st[GS_ST_ERRPREV] = 1;
  st[GS_ST_LAST] = last;
}

// gs_finish writes the outcome of trajectory i's adaptive solve: time
// reached, last step tried, accepted steps (len) and rejected ones, status
// and flags.
GS_DEVICE void gs_finish(const gs_args& a, long long i, const gs_real* st, gs_real lasth, int len, int status,
                         bool overflow) {
  a.t[i] = st[GS_ST_T];
  a.lasth[i] = lasth;
  a.acc[i] = len;
  a.rej[i] = (int)st[GS_ST_REJECTED];
  a.status[i] = status;
  a.flags[i] = (st[GS_ST_STIFF] != 0 ? GS_FLAG_STIFF : 0) | (overflow ? GS_FLAG_OVERFLOW : 0);
}
#endif

#if GS_GRAD
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
#if GS_LOSS_ACC
    const gs_lgrad_out r = gs_a_loss_grad(sh, GS_LOSS_ACC_AT, act, y, a.ys, n, act ? i : 0, a.data, p);
    if (act) {
#else
    gs_lgrad_out r;
    if (act) {
      r = gs_a_loss_grad(sh, y, a.ys, n, i, a.data, p);
#endif
      a.loss[i] = r.v[0];
      for (int c = 0; c < GS_D; c++) lam[c] = sc * r.v[1 + c];
      for (int q = 0; q < GS_K * GS_D; q++) a.tb[(long long)q * n + i] = sc * r.v[1 + GS_D + q];
      for (int c = 0; c < GS_NP; c++) gp[c] = sc * r.v[1 + GS_D + GS_K * GS_D + c];
    }
#if !GS_LOSS_ACC
#if GS_LANEMODE
    if (act && GS_TRAJ_LEAD)
      for (int j = 0; j < GS_NS; j++) GS_ACC_ATOMIC(GS_LOSS_ACC_AT + j, r.v[1 + GS_D + GS_K * GS_D + GS_NP + j]);
#else
    gs_warp_add<GS_NS>(acc + GS_NS, &r.v[1 + GS_D + GS_K * GS_D + GS_NP], act);
#endif
#endif
  }
#if GS_K > 0
  // The save times' VJPs, in order; each one's cotangent of its starting
  // state replaces its entry of a.tb. Save times at or before t0 and past
  // the last step are identities.
  for (int k = 0; k < GS_K; k++) {
    const int s = act ? a.tapstep[(long long)k * n + i] : 0;
    const bool on = act && s < len && a.saveat[k] > (gs_real)a.t0;
    // With GS_TAP_ACC every lane calls the step (the field's VJP reduces
    // across the warp); a lane that is off passes zeros.
    // (The step's size hs only for Dense, which interpolates on it.)
    gs_real ts = 0, ys[GS_D], lt[GS_D];
#if GS_DENSE
    gs_real hs = 0;
#endif
    for (int c = 0; c < GS_D; c++) ys[c] = lt[c] = 0;
    if (on) {
      const gs_real* row = a.store + (long long)s * GS_SW * n + i;
      ts = GS_STORE_T ? row[0] : (gs_real)0;
      for (int c = 0; c < GS_D; c++) {
        ys[c] = row[(long long)(GS_STORE_T + c) * n];
        lt[c] = a.tb[((long long)k * GS_D + c) * n + i];
      }
#if GS_DENSE
      hs = GS_HSRC[(long long)s * n + i];
#endif
    }
    const gs_real tau = a.saveat[k];
#if GS_TAP_ACC
    {
#else
    gs_tap_rev_out r;
    if (on) {
#endif
#if GS_DENSE && GS_TAP_ACC
      const gs_tap_rev_out r = gs_a_tap_rev(sh, acc, on, ts, hs, ys, p, on ? (tau - ts) / hs : (gs_real)0, lt, gp);
#elif GS_DENSE
      r = gs_a_tap_rev(sh, ts, hs, ys, p, (tau - ts) / hs, lt, gp);
#elif GS_TAP_ACC
      const gs_tap_rev_out r = gs_a_tap_rev(sh, acc, on, ts, on ? tau - ts : (gs_real)0, ys, p, lt, gp);
#else
      r = gs_a_tap_rev(sh, ts, tau - ts, ys, p, lt, gp);
#endif
      if (on) {
        for (int c = 0; c < GS_D; c++) a.tb[((long long)k * GS_D + c) * n + i] = r.v[c];
        for (int c = 0; c < GS_NP; c++) gp[c] = r.v[GS_D + c];
      }
#if !GS_TAP_ACC
    }
    gs_warp_add<GS_NS>(acc, &r.v[GS_D + GS_NP], on);
#else
    }
#endif
  }
  // Save times past the last step add to the final state's cotangent.
  int kq = GS_K;
  if (act) {
    while (kq > 0 && a.tapstep[(long long)(kq - 1) * n + i] >= len) kq--;
    for (int k = kq; k < GS_K; k++)
      for (int c = 0; c < GS_D; c++) lam[c] += a.tb[((long long)k * GS_D + c) * n + i];
  }
#endif
  const int smax = gs_warp_max(act ? len : 0);
  for (int s = smax - 1; s >= 0; s--) {
    const bool on = act && s < len;
    gs_real h = 0;
#if GS_REV_ACC
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
#else
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
#endif
#if GS_K > 0
      int k0 = kq;
      while (k0 > 0 && a.tapstep[(long long)(k0 - 1) * n + i] == s) k0--;
      for (int k = k0; k < kq; k++)
        for (int c = 0; c < GS_D; c++) lam[c] += a.tb[((long long)k * GS_D + c) * n + i];
      kq = k0;
#endif
    }
#if !GS_REV_ACC
    gs_warp_add<GS_NS>(acc, &r.v[GS_D + GS_NP], on && h != 0);
#endif
  }
  if (act) {
    for (int c = 0; c < GS_D; c++) a.gy0[(long long)c * n + i] = lam[c];
    for (int c = 0; c < GS_NP; c++) a.gp[(long long)c * n + i] = gp[c];
  }
}
#endif

// gs_body runs trajectory i (valid false: a lane past the end that only
// takes part in the warp's reductions).
GS_DEVICE void gs_body(const gs_args& a, const long long i, const bool valid, gs_real* acc,
                       const gs_real* sh, const gs_real* csh) {
  const long long n = a.n;
  const gs_real t0 = (gs_real)a.t0;
  gs_real y[GS_D], p[GS_NPX];
  for (int c = 0; c < GS_D; c++) y[c] = 0;
  for (int c = 0; c < GS_NPX; c++) p[c] = 0;
  int status = GS_RUNNING, len = 0;
  bool overflow = false;
  if (valid) {
    for (int c = 0; c < GS_D; c++) y[c] = a.y0[(long long)c * n + i];
    for (int c = 0; c < GS_NPX; c++) p[c] = c < GS_NP ? a.p[(long long)c * n + i] : (gs_real)0;
#if GS_K > 0
    int k = 0;
    while (k < GS_K && a.saveat[k] <= t0) gs_save_state(a, k++, i, 0, y);
#endif
#if GS_ADAPTIVE
    const gs_real t1 = a.t1[i];
    gs_real st[GS_NSTATE], st2[GS_NSTATE], k1[GS_D];
    gs_real h0, last;
    gs_a_init(sh, t0, t1, y, p, &h0, &last, k1);
    gs_start(st, t0, h0, last);
    gs_real lasth = h0;
    for (;;) {
      gs_real yn[GS_D], e[GS_D], ks[GS_D], hrho, accept, stat;
      gs_a_trial(sh, st[GS_ST_T], st[GS_ST_H], y, p, k1, yn, e, ks, &hrho);
      gs_a_control(csh, st, t1, y, yn, e, hrho, st2, &accept, &stat);
      lasth = st[GS_ST_H];
      if (accept != 0) {
#if GS_MESH_OUT || GS_STORE || GS_K > 0
        const long long s = (long long)st[GS_ST_ACCEPTED];
#endif
#if GS_MESH_OUT || GS_STORE
        overflow |= gs_record(a, i, s, st, y, true);
#endif
#if GS_K > 0
        while (k < GS_K && a.saveat[k] <= st2[GS_ST_T]) gs_save(a, sh, k++, i, s, st[GS_ST_T], st[GS_ST_H], y, p);
#endif
        for (int c = 0; c < GS_D; c++) y[c] = yn[c];
#if GS_FSAL
        for (int c = 0; c < GS_D; c++) k1[c] = ks[c];
#endif
      }
      for (int q = 0; q < GS_NSTATE; q++) st[q] = st2[q];
#ifdef GS_STOP_STIFF
      // The stiffness test fired: the gradient will be refused, so the
      // trajectory ends here with status Stiff (GS_STOP_STIFF's value).
      if (stat == (gs_real)GS_RUNNING && st[GS_ST_STIFF] != 0) stat = (gs_real)GS_STOP_STIFF;
#endif
      if (stat != (gs_real)GS_RUNNING) {
        status = (int)stat;
        break;
      }
    }
    len = (int)st[GS_ST_ACCEPTED];
    gs_finish(a, i, st, lasth, len, status, overflow);
#else
    len = a.len[i];
    gs_real t = t0;
    for (int s = 0; s < len; s++) {
      const gs_real h = a.hin[(long long)s * n + i];
#if GS_STORE
      gs_store_row(a, i, s, t, y);
#endif
#if GS_K > 0
      while (k < GS_K && a.saveat[k] <= t + h) gs_save(a, sh, k++, i, s, t, h, y, p);
#endif
      if (h != 0) {
        gs_real yn[GS_D];
        gs_a_replay(sh, t, h, y, p, yn);
        for (int c = 0; c < GS_D; c++) y[c] = yn[c];
      }
      t = t + h;
    }
    status = GS_OK;
#endif
#if GS_K > 0
    if (status == GS_OK)
      while (k < GS_K) gs_save_state(a, k++, i, len, y);
#endif
    for (int c = 0; c < GS_D; c++) a.y[(long long)c * n + i] = y[c];
#if GS_LOSS && !GS_GRAD
    if (status == GS_OK && !overflow) a.loss[i] = gs_a_loss(sh, y, a.ys, n, i, a.data, p);
#endif
  }
#if GS_GRAD
  gs_backward(a, sh, i, valid && status == GS_OK && !overflow, len, y, p, acc);
#else
  (void)acc;
#endif
}

#if defined(GS_TILEMODE)
#if defined(GS_WARPS)
#define GS_ANY(p) __any_sync(0xffffffffu, (p))
#else
#define GS_ANY(p) (p)
#endif
// gs_body_tile is gs_body in tile mode: the lane runs trajectory i (valid
// false: past the end, computing on zeros and writing nothing) with the
// tile's other seven in lockstep, since the functions that evaluate the
// field compute the tile's layers together. Every lane calls the step
// functions on every round while any trajectory of the tile runs; a lane
// whose trajectory is done (or invalid) computes a trial it discards.
// Save times lying on a step are computed in rounds too (gs_saves_tile),
// after the round's step; one lane per trajectory (GS_TRAJ_LEAD) writes
// the results.
#if GS_K > 0
// gs_saves_tile computes, in lockstep, the save times k, k+1, ... up to
// time t2 of the lanes with want set, on step s from (t, y) of size h;
// every lane calls it, and k advances past the times computed.
GS_DEVICE void gs_saves_tile(const gs_args& a, const gs_real* sh, int& k, long long i, long long s, gs_real t,
                             gs_real h, gs_real t2, const gs_real* y, const gs_real* p, bool want) {
  bool more = want && k < GS_K && a.saveat[k] <= t2;
  while (GS_ANY(more)) {
    const gs_real tau = more ? a.saveat[k] : t;
    gs_real out[GS_D];
#if GS_DENSE
    gs_a_dense(sh, t, h, y, p, more ? (tau - t) / h : (gs_real)0, out);
#else
    gs_a_replay(sh, t, tau - t, y, p, out);
#endif
    if (more) {
      if (GS_TRAJ_LEAD) gs_save_state(a, k, i, (int)s, out);
      k++;
      more = k < GS_K && a.saveat[k] <= t2;
    }
  }
}

// gs_states_tile sets the save times k, k+1, ... up to time t2 (all of
// them with all set) of trajectory i to the state y, on step s.
GS_DEVICE void gs_states_tile(const gs_args& a, int& k, long long i, int s, const gs_real* y, bool all, gs_real t2) {
  while (k < GS_K && (all || a.saveat[k] <= t2)) {
    if (GS_TRAJ_LEAD) gs_save_state(a, k, i, s, y);
    k++;
  }
}
#endif

GS_DEVICE void gs_body_tile(const gs_args& a, const long long i, const bool valid, gs_real* acc,
                            const gs_real* sh, const gs_real* csh) {
  const long long n = a.n;
  const gs_real t0 = (gs_real)a.t0;
  gs_real y[GS_D], p[GS_NPX];
  for (int c = 0; c < GS_D; c++) y[c] = valid ? a.y0[(long long)c * n + i] : (gs_real)0;
  for (int c = 0; c < GS_NPX; c++) p[c] = (valid && c < GS_NP) ? a.p[(long long)c * n + i] : (gs_real)0;
  int status = GS_RUNNING, len = 0;
  bool overflow = false;
#if GS_K > 0
  int k = 0;
  if (valid) gs_states_tile(a, k, i, 0, y, false, t0);
#endif
#if GS_ADAPTIVE
  const gs_real t1 = valid ? a.t1[i] : t0 + 1;
  gs_real st[GS_NSTATE], st2[GS_NSTATE], k1[GS_D];
  gs_real h0, last;
  gs_a_init(sh, t0, t1, y, p, &h0, &last, k1);
  gs_start(st, t0, h0, last);
  gs_real lasth = h0;
  bool run = valid;
  while (GS_ANY(run)) {
    gs_real yn[GS_D], e[GS_D], ks[GS_D], hrho, accept, stat;
    gs_a_trial(sh, st[GS_ST_T], st[GS_ST_H], y, p, k1, yn, e, ks, &hrho);
#if GS_K > 0
    // The step's save times, after the round: its start, size, end and
    // the state it starts from.
    bool saving = false;
    long long sv_s = 0;
    gs_real sv_t = 0, sv_h = 0, sv_t2 = 0, sv_y[GS_D];
    for (int c = 0; c < GS_D; c++) sv_y[c] = y[c];
#endif
    if (run) {
      gs_a_control(csh, st, t1, y, yn, e, hrho, st2, &accept, &stat);
      lasth = st[GS_ST_H];
      if (accept != 0) {
#if GS_MESH_OUT || GS_STORE || GS_K > 0
        const long long s = (long long)st[GS_ST_ACCEPTED];
#endif
#if GS_MESH_OUT || GS_STORE
        overflow |= gs_record(a, i, s, st, y, GS_TRAJ_LEAD);
#endif
#if GS_K > 0
        saving = true;
        sv_s = s;
        sv_t = st[GS_ST_T];
        sv_h = st[GS_ST_H];
        sv_t2 = st2[GS_ST_T];
#endif
        for (int c = 0; c < GS_D; c++) y[c] = yn[c];
#if GS_FSAL
        for (int c = 0; c < GS_D; c++) k1[c] = ks[c];
#endif
      }
      for (int q = 0; q < GS_NSTATE; q++) st[q] = st2[q];
#ifdef GS_STOP_STIFF
      // The stiffness test fired: the gradient will be refused, so the
      // trajectory ends here with status Stiff (GS_STOP_STIFF's value).
      if (stat == (gs_real)GS_RUNNING && st[GS_ST_STIFF] != 0) stat = (gs_real)GS_STOP_STIFF;
#endif
      if (stat != (gs_real)GS_RUNNING) {
        status = (int)stat;
        run = false;
      }
    }
#if GS_K > 0
    gs_saves_tile(a, sh, k, i, sv_s, sv_t, sv_h, sv_t2, sv_y, p, saving);
#endif
  }
  len = (int)st[GS_ST_ACCEPTED];
  if (valid && GS_TRAJ_LEAD) gs_finish(a, i, st, lasth, len, status, overflow);
#else
  len = valid ? a.len[i] : 0;
  gs_real t = t0;
  const int smax = gs_warp_max(len);
  for (int s = 0; s < smax; s++) {
    const bool on = s < len;
    const gs_real h = on ? a.hin[(long long)s * n + i] : (gs_real)0;
#if GS_STORE
    if (on && GS_TRAJ_LEAD) gs_store_row(a, i, s, t, y);
#endif
#if GS_K > 0
    gs_saves_tile(a, sh, k, i, s, t, h, t + h, y, p, on);
#endif
    gs_real yn[GS_D];
    gs_a_replay(sh, t, h, y, p, yn);
    if (on && h != 0)
      for (int c = 0; c < GS_D; c++) y[c] = yn[c];
    if (on) t = t + h;
  }
  status = GS_OK;
#endif
#if GS_K > 0
  if (valid && status == GS_OK) gs_states_tile(a, k, i, len, y, true, 0);
#endif
  if (valid && GS_TRAJ_LEAD) {
    for (int c = 0; c < GS_D; c++) a.y[(long long)c * n + i] = y[c];
#if GS_LOSS && !GS_GRAD
    if (status == GS_OK && !overflow) a.loss[i] = gs_a_loss(sh, y, a.ys, n, i, a.data, p);
#endif
  }
#if GS_GRAD
  gs_backward(a, sh, i, valid && status == GS_OK && !overflow, len, y, p, acc);
#else
  (void)acc;
#endif
}
#endif

// In lanes mode the block has at most 128 threads, and GS_LANES_MINB
// blocks fit in a multiprocessor's shared memory: ptxas keeps the
// registers of a thread to what lets them all run (128 for 4 blocks of 4
// warps), rather than spending more and leaving shared memory unused.
// With one accumulator per block (GS_LANES_BLOCKACC), one block of
// GS_LANES_BLOCK threads runs per multiprocessor.
#if GS_LANEMODE && defined(GS_CUDA) && GS_LANES_BLOCKACC
#define GS_BOUNDS __launch_bounds__(GS_LANES_BLOCK, 1)
#elif GS_LANEMODE && defined(GS_CUDA) && defined(GS_LANES_MINB)
#define GS_BOUNDS __launch_bounds__(128, GS_LANES_MINB)
#else
#define GS_BOUNDS
#endif

// In lanes mode each warp's staging row (GS_STAGE_LEN reals, see the
// prelude's GS_STAGE) comes first in the block's dynamic shared memory;
// the kernel's own arrays follow the block's GS_STAGE_SKIP reals. (The
// launch reserves the rows even where the functions stage nothing.)
#if GS_LANEMODE && defined(GS_CUDA) && defined(GS_STAGE_LEN)
#define GS_STAGE_SKIP ((int)(blockDim.x >> 5) * GS_STAGE_LEN)
#else
#define GS_STAGE_SKIP 0
#endif

GS_GLOBAL void GS_BOUNDS GS_KERNEL_NAME(const gs_args a) {
#if GS_LANEMODE
  // One warp per trajectory (lanes.go): the shared block and the
  // controller's padded in shared memory, as the functions read them, then
  // each warp's accumulator (GS_WACC entries, padded). With
  // GS_LANES_GLOBAL (networks too large for shared memory) the host wrote
  // both blocks padded in a.sh, and each warp's accumulator is its row of
  // a.work, or the block's warps share one in shared memory
  // (GS_LANES_BLOCKACC).
#if GS_LANES_GLOBAL
  const gs_real* ssh = a.sh;
  const gs_real* csh = a.sh + GS_SSH;
#if defined(GS_CUDA) && GS_LANES_BLOCKACC
  // One accumulator for the block's warps, in shared memory (atomics).
  extern __shared__ gs_real gs_smem[];
  gs_real* accs = gs_smem + GS_STAGE_SKIP;
  gs_real* acc = accs;
  const int tid = threadIdx.x, nt = blockDim.x;
  const int nacc = GS_WACC;
#elif defined(GS_CUDA) && (defined(GS_TILE_SACC) || defined(GS_TILE_SSH))
  // Tile mode: the shared and controller blocks (GS_TILE_SSH, copied from
  // a.sh as they are) and each warp's accumulator (GS_TILE_SACC) in the
  // block's shared memory, in that order.
  extern __shared__ gs_real gs_smem[];
  const int tid = threadIdx.x, nt = blockDim.x;
#if defined(GS_TILE_SSH)
  for (int j = tid; j < GS_SSH + GS_CSH; j += nt) gs_smem[j] = a.sh[j];
  ssh = gs_smem;
  csh = gs_smem + GS_SSH;
  gs_real* accs = gs_smem + GS_SSH + GS_CSH;
#else
  gs_real* accs = gs_smem;
#endif
#if defined(GS_TILE_SACC)
  gs_real* acc = accs + (threadIdx.x >> 5) * GS_WACC;
  const int nacc = (blockDim.x >> 5) * GS_WACC;
#else
  gs_real* acc = accs;  // no gradient
  const int nacc = 0;
#endif
#elif defined(GS_CUDA)
  const int tid = threadIdx.x, nt = blockDim.x;
  gs_real* accs = a.work + (long long)blockIdx.x * (blockDim.x >> 5) * GS_WACC;
  gs_real* acc = accs + (threadIdx.x >> 5) * GS_WACC;
  const int nacc = (blockDim.x >> 5) * GS_WACC;
#elif GS_LANES_BLOCKACC
  gs_real acc[GS_WACC];
  gs_real* accs = acc;
  const int tid = 0, nt = 1, nacc = GS_WACC;
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
  (void)tid, (void)nt, (void)nacc, (void)accs;  // unused without GS_GRAD
#else
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
#endif
#if GS_GRAD
  for (int j = tid; j < nacc; j += nt) accs[j] = 0;
#endif
#if defined(GS_TILES) && GS_GRAD
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
#else
#if defined(GS_CUDA) && defined(GS_TILEMODE) && defined(GS_TILE_DYNAMIC)
  // Tiles taken in turn (GS_TILE_DYNAMIC): a warp's first tile is its
  // index in the grid, each next one the counter's (a.work[GS_TILE_NEXT],
  // zeroed by the host) plus the grid's warps, so that warps whose tiles
  // ran short take more and the last round is short.
  __syncthreads();
  const long long wpb = blockDim.x >> 5, nw = (long long)gridDim.x * wpb;
  unsigned long long* next = (unsigned long long*)(a.work + GS_TILE_NEXT);
  long long tile = blockIdx.x * wpb + (threadIdx.x >> 5);
  while (tile * 8 < a.n) {
    const long long i = tile * 8 + ((threadIdx.x & 31) >> 2);
    gs_body_tile(a, i, i < a.n, acc, ssh, csh);
    long long t = 0;
    if ((threadIdx.x & 31) == 0) t = nw + (long long)atomicAdd(next, 1ull);
    tile = __shfl_sync(0xffffffffu, t, 0);
  }
  __syncthreads();
#elif defined(GS_CUDA) && defined(GS_TILEMODE)
  __syncthreads();
  const long long wpb = blockDim.x >> 5;
  for (long long tile = blockIdx.x * wpb + (threadIdx.x >> 5); tile * 8 < a.n; tile += (long long)gridDim.x * wpb) {
    const long long i = tile * 8 + ((threadIdx.x & 31) >> 2);
    gs_body_tile(a, i, i < a.n, acc, ssh, csh);
  }
  __syncthreads();
#elif defined(GS_CUDA)
  __syncthreads();
  const long long wpb = blockDim.x >> 5;
  for (long long i = blockIdx.x * wpb + (threadIdx.x >> 5); i < a.n; i += (long long)gridDim.x * wpb)
    gs_body(a, i, true, acc, ssh, csh);
  __syncthreads();
#elif defined(GS_WARP_SIM) && defined(GS_TILEMODE)
  // One simulated warp (tests) runs every tile.
  __syncwarp();
  for (long long tile = 0; tile * 8 < a.n; tile++) {
    const long long i = tile * 8 + (GS_LANE >> 2);
    gs_body_tile(a, i, i < a.n, acc, ssh, csh);
  }
  __syncwarp();
#elif defined(GS_TILEMODE)
  for (long long i = 0; i < a.n; i++) gs_body_tile(a, i, true, acc, ssh, csh);
#else
  for (long long i = 0; i < a.n; i++) gs_body(a, i, true, acc, ssh, csh);
#endif
#if GS_GRAD
  for (int j = tid; j < GS_NS; j += nt) {
    gs_real sum = 0;
    for (int w = 0; w < nacc; w += GS_WACC) sum += accs[w + GS_PAD(j)];
    GS_ACC_ATOMIC(&a.gs[j], sum);
  }
#endif
#endif
#elif defined(GS_CUDA)
#if GS_GRAD && GS_NS > 0 && GS_SACC
  extern __shared__ gs_real gs_smem[];
#ifdef GS_XPOSE
  gs_real* acc = gs_smem + (blockDim.x >> 5) * (32 * GS_XPOSE_ROW);  // after the warps' scratch
#else
  gs_real* acc = gs_smem;
#endif
  for (int j = threadIdx.x; j < 2 * GS_NS; j += blockDim.x) acc[j] = 0;
  __syncthreads();
#elif defined(GS_TILES) && GS_GRAD
  // Each tile of GS_TILE trajectories has its own accumulator, a.gs[tile][2][NS].
  gs_real* acc = a.gs + (((long long)blockIdx.x * blockDim.x + threadIdx.x) / GS_TILE) * (2 * GS_NS);
#else
  gs_real* acc = a.gs;
#endif
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  gs_body(a, i, i < a.n, acc, a.sh, a.sh + GS_NS);
#if GS_GRAD && GS_NS > 0 && GS_SACC
  __syncthreads();
  for (int j = threadIdx.x; j < 2 * GS_NS; j += blockDim.x) atomicAdd(&a.gs[j], acc[j]);
#endif
#elif defined(GS_TILES) && GS_GRAD
  for (long long i = 0; i < a.n; i++) gs_body(a, i, true, a.gs + (i / GS_TILE) * (2 * GS_NS), a.sh, a.sh + GS_NS);
#else
  for (long long i = 0; i < a.n; i++) gs_body(a, i, true, a.gs, a.sh, a.sh + GS_NS);
#endif
}
