{{- /*
kernel.cuh is the root template of the engine's kernels (KernelSource),
executed with a kernelPlan after the adapter functions it calls. Its
parts are chosen in Go, by the plan, not by the preprocessor: the
forward loop of the kernel's kind (solve.cuh: "adaptive", a solve or a
record; replay.cuh: "replay", a given mesh), the adjoint of a gradient
(adjoint.cuh), and the layout's hooks and entry ("hooks", "loss-own",
"entry": thread.cuh, lanes.cuh, tile.cuh, the last two with warp.cuh).
The only conditionals left to the preprocessor are the compiler's: the
same text is CUDA C++ (GS_CUDA), host C++, or host C++ on a simulated
warp (GS_WARP_SIM, the tests').

The generated code defines before it the adapters gs_a_init, gs_a_trial,
gs_a_control, gs_a_replay, gs_a_dense_step, gs_a_rev (-> gs_rev_out),
gs_a_drev (-> gs_drev_out), gs_a_loss, gs_a_loss_grad (-> gs_lgrad_out):
those its kind calls. A loss of many saved values, and every loss of the
wide layout, is bound (LossDirect, adapters.go's directLoss):
gs_a_loss_grad then also takes sc, a.loss and a.tb, stores the loss term
and dL/dys itself and returns dL/dy, dL/dp, dL/ds (the wide layout's also
takes lam and gp, stores dL/dy and dL/dp there and returns dL/ds). Where its dL/dys is a function of one save time at a time
(SaveCots, savecot.go) it neither computes nor stores them: the reverse
sweep calls gs_save_cot (save time k's cotangent of component c,
unscaled) where it reaches save time k, and gs_save_cot_prefetch a step
ahead, and a.tb is null, or (KeepThetas, adjoint.cuh) holds the save
times' quotients theta the forward pass computed, K reals a trajectory.

The layout's hooks define what the driver loop (gs_body) needs of it:
  GS_ANY(p)        whether p holds in any trajectory run in lockstep with
                   this one (tile mode), else p
  GS_STEPS(len)    the steps a replay of len steps runs: the largest len
                   of the trajectories in lockstep, else len
  GS_WRITER        whether this thread writes its trajectory's results
  GS_WRITTEN()     makes what the writers wrote (saved states, stored
                   rows) visible to the other threads of their
                   trajectories, which read them in the adjoint
  GS_LOSS_ACC_AT   where the loss's own dL/ds goes (a pointer)
*/ -}}
{{define "fold-param"}}{{if .FoldFwd}}, gs_fold& lf{{end}}{{end}}
{{- define "fold-arg"}}{{if .FoldFwd}}, lf{{end}}{{end -}}
// gradsolve CUDA engine: one kernel, GS_KERNEL_NAME, running the driver
// loop of ode.Plan for the trajectories of a launch:
//
//   Init; repeat { Trial; Control; on accept: store, save, y = y+ } until done
//   [loss] [adjoint: loss VJP, save-time VJPs, Reverse backwards over the steps]
//
// Layouts are step-major: component c of trajectory i of n at [c*n + i],
// step s at [s*n + i], stored state s at [(s*GS_SW + c)*n + i] (c = 0 the
// time, if stored), save time k at [(k*D + c)*n + i].
//
// The same text is host C++: without GS_CUDA the kernel is a loop over
// the trajectories and the warp reductions are plain sums.
//
// Kernel {{.Name}} of method {{.Method}}{{if .Variant}} (plan variant {{.Variant}}){{end}} (fingerprint {{.Fingerprint}}), layout {{.Layout}}: {{.Key}}
#define GS_KERNEL_NAME {{.Name}}
// The state, per-trajectory and shared parameters, save times.
#define GS_D {{.D}}
#define GS_NP {{.NP}}
#define GS_NS {{.NS}}
#define GS_K {{.Saves}}
// A stored row holds the time (the reverse steps use it, or save times
// need it), then y, then (a gradient through events) 1 + the event whose
// step it is, 0 for none.
#define GS_STORE_T {{if .StoreT}}1{{else}}0{{end}}
#define GS_STORE_EV {{if .StoreEv}}1{{else}}0{{end}}
#define GS_SW (GS_STORE_T + GS_D + GS_STORE_EV)
{{template "hooks" .}}
#define GS_NPX (GS_NP > 0 ? GS_NP : 1)

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
  long long first; // the launch's trajectories are first ... end-1 of the n its arrays hold
  long long end;   // (the thread layout's chunks of a launch; the warp layouts run 0 ... n-1)
  long long zrows; // a record of the thread layout zeroes the mesh's rows len ... zrows-1 of each trajectory (solve.cuh)
  const gs_real* sh;      // shared block: s[NS], rtol, atol[D], maxsteps
  const gs_real* saveat;  // [K]
  const gs_real* t1;      // [n]
  const gs_real* t0s;     // [n] per-trajectory start times (ode.Job.T0s), or null: t0 for every one
  const gs_real* y0;      // [D][n]
  const gs_real* p;       // [NP][n]
  const gs_real* data;    // [DD][n]
  const gs_real* hin;     // [rows][n] the mesh to replay
  const int* len;         // [n] its lengths
  const int* evin;        // [rows][n] its event marks (Config.Events): e+1 for a step ending at event e, else 0
  gs_real* gs;            // [2][NS] dL/ds, summed (atomics): steps, then the loss's own (unscaled);
                          // with tile sums (GS_TILES) [ceil(n/GS_TILE)][2][NS], one sum per tile
  gs_real* y;             // [D][n] final states
  gs_real* t;             // [n] time reached
  gs_real* lasth;         // [n] the last step size tried
  int* status;            // [n]
  int* acc;               // [n] accepted steps
  int* rej;               // [n] rejected steps
  int* flags;             // [n] GS_FLAG_*
  int* events;            // [n] events each trajectory went through (Config.Events)
  gs_real* ys;            // [K][D][n] saved states
  gs_real* loss;          // [n] loss terms
  gs_real* gy0;           // [D][n] dL/dy0
  gs_real* gp;            // [NP][n] dL/dp
  int* tapstep;           // [K][n] the step each save time lies on
  gs_real* tb;            // [K][D][n] cotangents of the saved states (KeepThetas: [K][n] their quotients theta)
  gs_real* hout;          // [rows][n] the recorded mesh
  int* evout;             // [rows][n] its event marks (Config.Events), as evin
  gs_real* store;         // [rows][GS_SW][n] states before each step
  gs_real* work;          // lanes mode in global memory: [warps][GS_WACC] the warps' accumulators
};

// gs_t0 returns trajectory i's start time: its own (a.t0s) where the
// job has them, else a.t0.
GS_DEVICE gs_real gs_t0(const gs_args& a, const long long i, const bool valid) {
  return (a.t0s && valid) ? a.t0s[i] : (gs_real)a.t0;
}

// GS_HSRC is the mesh: the one the kernel records, or the one it replays.
#define GS_HSRC {{if .Adaptive}}a.hout{{else}}a.hin{{end}}
{{- if .Saves}}
{{- if .LossFold}}

// gs_fold is the loss's value folded in the forward pass (LossFold): acc
// is save time k's accumulator once save time k is written, the loss
// program's left fold over the save times in its order, from save time
// 0's term; sh and p are the shared block and the parameters the fold's
// functions read.
struct gs_fold {
  gs_real acc;
  const gs_real* sh;
  const gs_real* p;
};

// gs_fold_save adds save time k's state y to the fold f (at save time 0,
// sets it).
GS_DEVICE void gs_fold_save(gs_fold& f, const gs_args& a, int k, long long i, const gs_real* y) {
  f.acc = k == 0 ? gs_a_fold_first(f.sh, y, a.n, i, a.data, f.p) : gs_a_fold_next(f.sh, f.acc, y, a.n, i, a.data, f.p, k);
}
{{- end}}

// gs_save_state sets save time k of trajectory i to the state y, on step s
// (the step kept for a gradient's reverse sweep only: Config.OldSaves
// keeps it in every kernel; and adds it to the loss's fold lf, with
// LossFold: save times are set once each, in order, where the trajectory
// ends well).
GS_DEVICE void gs_save_state(const gs_args& a, int k, long long i, int s, const gs_real* y{{template "fold-param" .}}) {
  const long long n = a.n;
  for (int c = 0; c < GS_D; c++) a.ys[((long long)k * GS_D + c) * n + i] = y[c];
{{- if or .Grad .OldSaves}}
  a.tapstep[(long long)k * n + i] = s;
{{- else}}
  (void)s;
{{- end}}
{{- if .FoldFwd}}
  gs_fold_save(lf, a, k, i, y);
{{- end}}
}

{{- if .Dense}}

// Save times read from the method's continuous extension (ode.Plan's
// DenseStep and Interp) of the step they lie on, by the CPU engine's rule:
// save time tau lies on the step from t of size h where t <= tau < t + h,
// at theta = (tau - t) / h; at theta = 0 (tau on the mesh point) it is the
// state itself, and it lies inside the step otherwise. A step has GS_TERMS
// coefficients w_j[GS_D], w_j[c] at (j - 1) * GS_D + c. Every save time
// from k on is at or after t: those before were taken by earlier steps.
#define GS_TERMS {{.DenseTerms}}
#define GS_DW (GS_TERMS * GS_D)

// gs_inside reports whether a save time from k on lies inside the step
// from t of size h: then its coefficients are needed.
{{- if not .DivideSaves}} Without dividing:
// (tau - t) / h is 0 only where tau - t is 0 (and h neither 0 nor NaN,
// which make every quotient NaN) or where it underflows, so the test is
// true wherever the quotient's is (and where it underflows, computing
// coefficients that no save time reads: the same results).
{{- end}}
GS_DEVICE bool gs_inside(const gs_args& a, int k, gs_real t, gs_real h) {
{{- if .DivideSaves}}
  for (; k < GS_K && a.saveat[k] < t + h; k++)
    if ((a.saveat[k] - t) / h != 0) return true;
{{- else}}
  const bool nan = !(h != 0);
  for (; k < GS_K && a.saveat[k] < t + h; k++)
    if (a.saveat[k] - t != 0 || nan) return true;
{{- end}}
  return false;
}

// gs_interp sets out to the extension with coefficients w from y at theta:
// y + theta*(w_1 + theta*(w_2 + ... + theta*w_m)), Plan.Interp's Horner
// rule in its order.
GS_DEVICE void gs_interp(const gs_real* y, const gs_real* w, gs_real theta, gs_real* out) {
  for (int c = 0; c < GS_D; c++) {
    gs_real acc = w[(GS_TERMS - 1) * GS_D + c];
    for (int j = GS_TERMS - 2; j >= 0; j--) acc = w[j * GS_D + c] + theta * acc;
    out[c] = y[c] + theta * acc;
  }
}

// gs_step_saves sets the save times k, k+1, ... that lie on step s from
// (t, y) of size h, whose coefficients are w (read only where one lies
// inside it), and advances k past them. It takes them GS_SAVE_GROUP at a
// time: their times' loads, quotients and interpolants are independent,
// and the save times are sorted, so those on the step are the group's
// first m.
{{- if .DivideSaves}} Each quotient is a division of its own and each
// interpolant under its own test (Config.DivideSaves, the form before
// session 49).
{{- else}} A group's quotients are one straight run of multiplications
// and fused multiply-adds from the step's reciprocal (gs_quot, no
// division's branch between them), and so are its interpolants (every
// slot's, those not read replaced by selects): where a device thread's
// dependent instructions wait in turn, the group's chains then
// interleave.
{{- end}}
{{- if .KeepThetas}} Their quotients
// theta go to a.tb as well, where a gradient's reverse sweep reads them
// (kernelPlan.KeepThetas).
{{- end}}
#define GS_SAVE_GROUP 4
GS_DEVICE void gs_step_saves(const gs_args& a, int& k, long long i, int s, gs_real t, gs_real h, const gs_real* y,
                             const gs_real* w{{template "fold-param" .}}) {
  const gs_real end = t + h;
{{- if not .DivideSaves}}
  // None on the step: no reciprocal (one division a step that has some).
  if (k >= GS_K || !(a.saveat[k] < end)) return;
  const gs_real rh = gs_rcp(h);
{{- end}}
  while (k < GS_K) {
    gs_real tau[GS_SAVE_GROUP];
    int m = 0;
    for (int j = 0; j < GS_SAVE_GROUP; j++) {
      tau[j] = a.saveat[k + j < GS_K ? k + j : GS_K - 1];
      m += k + j < GS_K && tau[j] < end;
    }
    if (m == 0) return;
    gs_real out[GS_SAVE_GROUP][GS_D];
{{- if .DivideSaves}}
{{- if .KeepThetas}}
    gs_real th[GS_SAVE_GROUP];
{{- end}}
    for (int j = 0; j < GS_SAVE_GROUP; j++) {
      const gs_real theta = (tau[j] - t) / h;
{{- if .KeepThetas}}
      th[j] = theta;
{{- end}}
      if (j < m && theta != 0)
        gs_interp(y, w, theta, out[j]);
      else
        for (int c = 0; c < GS_D; c++) out[j][c] = y[c];
    }
{{- else}}
    // The group's quotients from the reciprocal, each the division's
    // (gs_quot: every slot's, those past m unused), divided only where
    // gs_quot did not apply to one of them.
    gs_real th[GS_SAVE_GROUP];
    bool quot = true;
    for (int j = 0; j < GS_SAVE_GROUP; j++) quot &= gs_quot(tau[j] - t, h, rh, &th[j]);
    if (!quot)
      for (int j = 0; j < GS_SAVE_GROUP; j++) th[j] = (tau[j] - t) / h;
    // The save times inside the step read the extension, those at theta
    // = 0 are the state: every slot's interpolant computed and the state
    // selected where it is not read (the coefficients w are read only
    // where one of the group lies inside, as gs_inside found).
    bool inside = false;
    for (int j = 0; j < GS_SAVE_GROUP; j++) inside = inside || (j < m && th[j] != 0);
    if (inside) {
      for (int j = 0; j < GS_SAVE_GROUP; j++) {
        gs_interp(y, w, th[j], out[j]);
        const bool on = j < m && th[j] != 0;
        for (int c = 0; c < GS_D; c++) out[j][c] = on ? out[j][c] : y[c];
      }
    } else {
      for (int j = 0; j < GS_SAVE_GROUP; j++)
        for (int c = 0; c < GS_D; c++) out[j][c] = y[c];
    }
{{- end}}
    if (GS_WRITER)
{{- if .OldSaves}}
      for (int j = 0; j < m; j++) gs_save_state(a, k + j, i, s, out[j]{{template "fold-arg" .}});
{{- else}}
      // (Constant bounds: the loop unrolled, out indexed by constants,
      // in registers; with bounds m the compiler may keep it in local
      // memory.)
      for (int j = 0; j < GS_SAVE_GROUP; j++)
        if (j < m) gs_save_state(a, k + j, i, s, out[j]{{template "fold-arg" .}});
{{- end}}
{{- if .KeepThetas}}
    // The group's quotients, for the reverse sweep (KeepThetas: a.tb).
    if (GS_WRITER)
      for (int j = 0; j < GS_SAVE_GROUP; j++)
        if (j < m) a.tb[(long long)(k + j) * a.n + i] = th[j];
{{- end}}
    k += m;
    if (m < GS_SAVE_GROUP) return;
  }
}
{{- if .DeferSaves}}

// Deferred save times (Config.DeferSaves): the forward pass keeps what
// an accepted step's save times need in a row of a.store, and the saves
// kernel (gs_engine_saves, after this kernel) evaluates them, a thread a
// step, with gs_step_saves: the same function on the same values, so
// the same saved states bit for bit. A row of step s of trajectory i
// holds, at a.store[(s * GS_DSW + q) * n + i], q = 0 the step's start t,
// 1 its size h, 2 its first save time k (GS_K where none lies on it),
// then the state y it starts from and, where one of its save times lies
// inside it (gs_inside), the extension's coefficients w (else w is not
// written, and gs_step_saves does not read it). Steps from a.rows on
// are evaluated here, as without deferring.
#define GS_DSW (3 + GS_D + GS_DW)
#define GS_DEFER_COUNT 8

// gs_defer_step keeps accepted step s's save times (from k on, those
// before t + h) for the saves kernel, or evaluates them (s >= a.rows),
// and advances k past them, as gs_step_saves does.
GS_DEVICE void gs_defer_step(const gs_args& a, int& k, long long i, int s, gs_real t, gs_real h, const gs_real* y,
                             const gs_real* w) {
  if (s >= a.rows) {
    gs_step_saves(a, k, i, s, t, h, y, w);
    return;
  }
  const long long n = a.n;
  gs_real* row = a.store + (long long)s * GS_DSW * n + i;
  const gs_real end = t + h;
  if (k >= GS_K || !(a.saveat[k] < end)) {
    if (GS_WRITER) row[2 * n] = (gs_real)GS_K;
    return;
  }
  if (GS_WRITER) {
    row[0] = t;
    row[n] = h;
    row[2 * n] = (gs_real)k;
    for (int c = 0; c < GS_D; c++) row[(long long)(3 + c) * n] = y[c];
    if (gs_inside(a, k, t, h))
      for (int q = 0; q < GS_DW; q++) row[(long long)(3 + GS_D + q) * n] = w[q];
  }
  // The save times are sorted: those on the step are a run from k,
  // counted GS_DEFER_COUNT at a time (their loads independent: one
  // latency for the lot, where a save time at a time waited for each).
  while (k < GS_K) {
    int m = 0;
    for (int j = 0; j < GS_DEFER_COUNT; j++) m += k + j < GS_K && a.saveat[k + j < GS_K ? k + j : GS_K - 1] < end;
    k += m;
    if (m < GS_DEFER_COUNT) return;
  }
}

// gs_deferred_step sets the save times of step s of trajectory i kept
// by gs_defer_step (none past the trajectory's accepted steps, a.acc).
GS_DEVICE void gs_deferred_step(const gs_args& a, long long i, long long s) {
  if (s >= a.acc[i]) return;
  const long long n = a.n;
  const gs_real* row = a.store + s * GS_DSW * n + i;
  int k = (int)row[2 * n];
  if (k >= GS_K) return;
  const gs_real t = row[0], h = row[n];
  gs_real y[GS_D], w[GS_DW];
  for (int c = 0; c < GS_D; c++) y[c] = row[(long long)(3 + c) * n];
  if (gs_inside(a, k, t, h))
    for (int q = 0; q < GS_DW; q++) w[q] = row[(long long)(3 + GS_D + q) * n];
  gs_step_saves(a, k, i, (int)s, t, h, y, w);
}
{{- end}}
{{- if .DeferGrad}}

// Deferred save times of a gradient (kernelPlan.DeferGrad): three
// kernels. The engine kernel (the forward pass, no adjoint) keeps, for
// each accepted step s below a.rows, its first save time k and their
// count m, and the extension's coefficients w where one lies inside
// it, in a row of a.work (GS_GW reals a step: [(s * GS_GW + q) * n +
// i], q = 0 k, 1 m, then w, then the saves kernel's "any" flag and
// the coefficients' cotangents wb); the step's t and y are the record's
// (a.store), h the mesh's (a.hout). The saves kernel (gs_engine_saves)
// sets the step's save times with gs_step_saves and computes the
// cotangents of its coefficients with gs_coef_bar on the arguments the
// reverse sweep passes it (step 0 from save time 0: those at or before
// T0, whose theta is 0, add nothing), and gs_engine_rev runs the loss's
// fold over the saved states in order and the adjoint (gs_backward,
// which reads wb from the row: gs_wb_row). The same functions on the
// same values in the same orders: the same results bit for bit.
#define GS_GW (3 + 2 * GS_DW)

// gs_defer_grad_step keeps accepted step s's save times (from k on,
// those before t + h) for the saves kernel, or sets them (s >= a.rows:
// a trajectory whose record overflows, which runs again), and advances
// k past them.
GS_DEVICE void gs_defer_grad_step(const gs_args& a, int& k, long long i, int s, gs_real t, gs_real h, const gs_real* y,
                                  const gs_real* w) {
  if (s >= a.rows) {
    gs_step_saves(a, k, i, s, t, h, y, w);
    return;
  }
  const long long n = a.n;
  gs_real* row = a.work + (long long)s * GS_GW * n + i;
  const gs_real end = t + h;
  const int k0 = k;
  while (k < GS_K) {
    int m = 0;
    for (int j = 0; j < 8; j++) m += k + j < GS_K && a.saveat[k + j < GS_K ? k + j : GS_K - 1] < end;
    k += m;
    if (m < 8) break;
  }
  if (GS_WRITER) {
    row[0] = (gs_real)k0;
    row[n] = (gs_real)(k - k0);
    if (k > k0 && gs_inside(a, k0, t, h))
      for (int q = 0; q < GS_DW; q++) row[(long long)(2 + q) * n] = w[q];
  }
}
{{- end}}
{{- if and .Adaptive (not .ShareFwd) (not .SwitchTrial) (not .Wide)}}

// gs_saves sets the save times on accepted step s from (t, y) of size h of
// the trajectories with want set, from the coefficients of the dense step
// where one lies inside it. Every thread calls it, in lockstep with those
// it runs with (GS_ANY).
GS_DEVICE void gs_saves(const gs_args& a, const gs_real* sh, int& k, long long i, long long s, gs_real t,
                        gs_real h, const gs_real* y, const gs_real* p, bool want{{template "fold-param" .}}) {
  gs_real w[GS_DW];
  if (GS_ANY(want && gs_inside(a, k, t, h))) {
    gs_real yn[GS_D];
    gs_a_dense_step(sh, t, h, y, p, yn, w);
  }
  if (want) gs_step_saves(a, k, i, (int)s, t, h, y, w{{template "fold-arg" .}});
}
{{- end}}
{{- else}}

// gs_saves computes the save times k, k+1, ... up to time t2 of the
// trajectories with want set, on step s from (t, y): each one the Replay
// step of size tau - t (ode.SaveStep). Every thread calls it, in lockstep
// with those it runs with (GS_ANY), and k advances past the times
// computed.
GS_DEVICE void gs_saves(const gs_args& a, const gs_real* sh, int& k, long long i, long long s, gs_real t,
                        gs_real t2, const gs_real* y, const gs_real* p, bool want{{template "fold-param" .}}) {
  bool more = want && k < GS_K && a.saveat[k] <= t2;
  while (GS_ANY(more)) {
    const gs_real tau = more ? a.saveat[k] : t;
    gs_real out[GS_D];
    gs_a_replay(sh, t, tau - t, y, p, out);
    if (more) {
      if (GS_WRITER) gs_save_state(a, k, i, (int)s, out{{template "fold-arg" .}});
      k++;
      more = k < GS_K && a.saveat[k] <= t2;
    }
  }
}
{{- end}}

// gs_save_states sets the save times k, k+1, ... up to time t2 (all of
// them with all set) of trajectory i to the state y, on step s.
GS_DEVICE void gs_save_states(const gs_args& a, int& k, long long i, int s, const gs_real* y, bool all,
                              gs_real t2{{template "fold-param" .}}) {
  while (k < GS_K && (all || a.saveat[k] <= t2)) {
    if (GS_WRITER) gs_save_state(a, k, i, s, y{{template "fold-arg" .}});
    k++;
  }
}
{{- end}}
{{- if .Store}}

// gs_store_row keeps (t, y), the state before step s of trajectory i.
GS_DEVICE void gs_store_row(const gs_args& a, long long i, long long s, gs_real t, const gs_real* y) {
  const long long n = a.n;
  gs_real* row = a.store + s * GS_SW * n + i;
  if (GS_STORE_T) row[0] = t;
  for (int c = 0; c < GS_D; c++) row[(long long)(GS_STORE_T + c) * n] = y[c];
}
{{- end}}
{{- if or .MeshOut .Store}}

// gs_record writes accepted step s of trajectory i (of size st[H], from
// (st[T], y)) to the mesh and the stored states if it fits in their rows
// (from a writer only) and reports whether it did not.
GS_DEVICE bool gs_record(const gs_args& a, long long i, long long s, const gs_real* st, const gs_real* y, bool writer) {
  if (s >= a.rows) return true;
  if (writer) {
{{- if .MeshOut}}
    a.hout[s * a.n + i] = st[GS_ST_H];
{{- end}}
{{- if .Store}}
    gs_store_row(a, i, s, st[GS_ST_T], y);
{{- end}}
  }
  return false;
}
{{- end}}
{{- if .Adaptive}}

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
{{- end}}
{{- if .Events}}
{{template "events" .}}
{{- end}}
{{- if and .Grad (not .Wide)}}
{{template "adjoint" .}}
{{- end}}
{{- if .Wide}}
{{template "wide-body" .}}
{{- else}}

// gs_body runs trajectory i (valid false: past the end, computing on
// zeros and writing nothing, so that it takes part in the collectives of
// the trajectories it runs with): the forward loop of the kernel's kind,
// its final and saved states, and its loss term or its adjoint. In tile
// mode the trajectories of a tile run in lockstep (GS_ANY): the
// functions that evaluate the field compute the tile's layers together,
// so every thread calls them on every round while any trajectory of the
// tile runs, a thread whose trajectory is done computing what it
// discards; save times are computed in rounds too (gs_saves), after the
// round's step.
GS_DEVICE void gs_body(const gs_args& a, const long long i, const bool valid, gs_real* acc,
                       const gs_real* sh, const gs_real* csh) {
  const long long n = a.n;
  const gs_real t0 = gs_t0(a, i, valid);
  gs_real y[GS_D], p[GS_NPX];
  for (int c = 0; c < GS_D; c++) y[c] = valid ? a.y0[(long long)c * n + i] : (gs_real)0;
  for (int c = 0; c < GS_NPX; c++) p[c] = (valid && c < GS_NP) ? a.p[(long long)c * n + i] : (gs_real)0;
  int status = GS_RUNNING, len = 0;
  bool overflow = false;
{{- if .Saves}}
  int k = 0;
{{- if .FoldFwd}}
  gs_fold lf = {0, sh, p};
{{- end}}
  if (valid) gs_save_states(a, k, i, 0, y, false, t0{{template "fold-arg" .}});
{{- end}}
{{if .Adaptive}}{{template "adaptive" .}}{{else}}{{template "replay" .}}{{end}}
{{- if and .Saves .Events}}
  // The save times at or after the end: the final state; past a terminal
  // event none (NaN: ode.Event, "Save times").
  if (valid && status == GS_OK) {
    gs_save_states(a, k, i, len, y, !ev_term, ev_tend{{template "fold-arg" .}});
    gs_real none[GS_D];
    for (int c = 0; c < GS_D; c++) none[c] = gs_nan();
    for (; k < GS_K; k++)
      if (GS_WRITER) gs_save_state(a, k, i, len, none{{template "fold-arg" .}});
  }
{{- else if .Saves}}
  if (valid && status == GS_OK) gs_save_states(a, k, i, len, y, true, 0{{template "fold-arg" .}});
{{- end}}
  if (valid && GS_WRITER) {
    for (int c = 0; c < GS_D; c++) a.y[(long long)c * n + i] = y[c];
{{- if and .Loss (not .Grad)}}
    if (status == GS_OK && !overflow) a.loss[i] = gs_a_loss(sh, y, a.ys, n, i, a.data, p);
{{- end}}
  }
{{- if .DeferGrad}}
  // The adjoint runs in gs_engine_rev, after the saves kernel
  // (DeferGrad).
  (void)acc;
{{- else if .Grad}}
  GS_WRITTEN();
  gs_backward(a, sh, i, valid && status == GS_OK && !overflow, len, y, p, acc{{if .LossFold}}, lf.acc{{end}});
{{- else}}
  (void)acc;
{{- end}}
}
{{- end}}
{{template "entry" .}}
{{- if .DeferGrad}}

// gs_deferred_grad_step sets the save times of step s of trajectory i
// kept by gs_defer_grad_step and, where the trajectory's gradient is
// computed and the sweep's range of save times for the step, [kb, ke),
// is not empty, the cotangents of the step's coefficients (gs_coef_bar)
// and their flag (none where it is empty: gs_wb_row does not read them
// there, and the sweep's gs_coef_bar would give zeros and false).
GS_DEVICE void gs_deferred_grad_step(const gs_args& a, long long i, long long s) {
  const long long n = a.n;
  if (s >= a.acc[i] || s >= a.rows) return;
  gs_real* row = a.work + s * GS_GW * n + i;
  const int k0 = (int)row[0], m = (int)row[n];
  const int kb = s == 0 ? 0 : k0, ke = k0 + m;
  const bool grad = kb < ke && a.status[i] == GS_OK && (a.flags[i] & GS_FLAG_OVERFLOW) == 0;
  if (m == 0 && !grad) return;
  const gs_real* srow = a.store + s * GS_SW * n + i;
  const gs_real t = srow[0], h = a.hout[s * n + i];
  if (m > 0) {
    gs_real y[GS_D], w[GS_DW];
    for (int c = 0; c < GS_D; c++) y[c] = srow[(long long)(GS_STORE_T + c) * n];
    if (gs_inside(a, k0, t, h))
      for (int q = 0; q < GS_DW; q++) w[q] = row[(long long)(2 + q) * n];
    int k = k0;
    gs_step_saves(a, k, i, (int)s, t, h, y, w);
  }
  if (!grad) return;
  const gs_real* sh = a.sh;
  gs_real yf[GS_D], p[GS_NPX], wb[GS_DW];
  for (int c = 0; c < GS_D; c++) yf[c] = a.y[(long long)c * n + i];
  for (int c = 0; c < GS_NPX; c++) p[c] = c < GS_NP ? a.p[(long long)c * n + i] : (gs_real)0;
  const bool any = gs_coef_bar(a, sh, yf, p, (gs_real)a.scale, i, true, kb, ke, t, h, wb);
  row[(long long)(2 + GS_DW) * n] = any ? 1 : 0;
  if (any)
    for (int q = 0; q < GS_DW; q++) row[(long long)(3 + GS_DW + q) * n] = wb[q];
}

#define GS_FOLD_GROUP 8
#define GS_FOLD_AHEAD 4

// gs_rev_body is the adjoint of trajectory i after the saves kernel
// (DeferGrad): gs_body's end state read back (the final state, the
// parameters, the steps, the status), the loss's fold over the saved
// states in order (gs_fold_save's, which the forward pass did not run),
// then gs_backward.
GS_DEVICE void gs_rev_body(const gs_args& a, const long long i, const bool valid, gs_real* acc, const gs_real* sh,
                           const gs_real* csh) {
  (void)csh;
  const long long n = a.n;
  gs_real y[GS_D], p[GS_NPX];
  for (int c = 0; c < GS_D; c++) y[c] = valid ? a.y[(long long)c * n + i] : (gs_real)0;
  for (int c = 0; c < GS_NPX; c++) p[c] = (valid && c < GS_NP) ? a.p[(long long)c * n + i] : (gs_real)0;
  const int len = valid ? a.acc[i] : 0;
  const bool act = valid && a.status[i] == GS_OK && (a.flags[i] & GS_FLAG_OVERFLOW) == 0;
  gs_fold lf = {0, sh, p};
  if (act)
    // GS_FOLD_GROUP save times' states loaded at once, then folded in
    // order; those GS_FOLD_AHEAD groups on asked for (GS_PREFETCH), so
    // that the fold's chain does not wait a memory latency a group.
    for (int k0 = 0; k0 < GS_K; k0 += GS_FOLD_GROUP) {
      for (int k = k0 + GS_FOLD_AHEAD * GS_FOLD_GROUP; k < k0 + (GS_FOLD_AHEAD + 1) * GS_FOLD_GROUP && k < GS_K; k++)
        for (int c = 0; c < GS_D; c++) GS_PREFETCH(&a.ys[((long long)k * GS_D + c) * n + i]);
      gs_real x[GS_FOLD_GROUP][GS_D];
      for (int j = 0; j < GS_FOLD_GROUP; j++) {
        const int k = k0 + j < GS_K ? k0 + j : GS_K - 1;
        for (int c = 0; c < GS_D; c++) x[j][c] = a.ys[((long long)k * GS_D + c) * n + i];
      }
      for (int j = 0; j < GS_FOLD_GROUP; j++)
        if (k0 + j < GS_K) gs_fold_save(lf, a, k0 + j, i, x[j]);
    }
  gs_backward(a, sh, i, act, len, y, p, acc, lf.acc);
}

// gs_engine_rev: the entry of the layout around gs_rev_body.
#undef GS_KERNEL_NAME
#define GS_KERNEL_NAME gs_engine_rev
#define gs_body gs_rev_body
{{template "entry" .}}
#undef gs_body
{{- end}}
{{- if or .DeferSaves .DeferGrad}}

// gs_engine_saves (kernelgen.SavesKernelName) runs after the engine
// kernel, over the same trajectories first ... end-1: thread id runs the
// kept row of step id / m of trajectory first + id % m (m = end - first:
// a warp's threads are consecutive trajectories of one step, its stores
// of a save time one run), a.rows rows. On the host it is a loop.
GS_GLOBAL void gs_engine_saves(const gs_args a) {
  const long long m = a.end - a.first;
#ifdef GS_CUDA
  const long long id = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (m <= 0 || id >= m * a.rows) return;
  {{if .DeferGrad}}gs_deferred_grad_step{{else}}gs_deferred_step{{end}}(a, a.first + id % m, id / m);
#else
  for (long long s = 0; s < a.rows; s++)
    for (long long q = 0; q < m; q++) {{if .DeferGrad}}gs_deferred_grad_step{{else}}gs_deferred_step{{end}}(a, a.first + q, s);
#endif
}
{{- end}}
