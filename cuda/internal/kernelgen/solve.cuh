{{- /*
solve.cuh: the forward loop of an adaptive kernel ("adaptive"): a solve,
a record, or the record of a loss or a gradient. It runs the controller
from Init until the trajectory's status is set, writing the mesh
(MeshOut), the states before its steps (Store) and the save times it
passes; see kernel.cuh for the hooks (GS_ANY, GS_WRITER).
*/ -}}
{{define "adaptive" -}}
  const gs_real t1 = valid ? a.t1[i] : t0 + 1;
  gs_real st[GS_NSTATE], st2[GS_NSTATE], k1[GS_D];
  gs_real h0, last;
  gs_a_init(sh, t0, t1, y, p, &h0, &last, k1);
  gs_start(st, t0, h0, last);
  gs_real lasth = h0;
  bool run = valid;
{{- if .ProbeOn}}
  // The stability probe's state (ode.Plan.Probe): the vector v, the
  // last ratio, the growth, and the trials tried so far.
  gs_real pv[GS_D] = { {{- range $c, $x := .ProbeStart}}{{if $c}}, {{end}}(gs_real){{$x}}{{end -}} };
  gs_real prv = 0, pu = 1;
  long long ntrial = 0;
{{- end}}
{{- if .Events}}
  // The events' conditions at the state (a trajectory where one is not
  // finite or exactly 0 at T0 ends here) and the events so far.
  gs_real eg[GS_NE];
  int nev = 0;
{{- if .Saves}}
  // Whether the trajectory ended at a terminal event (the save times past
  // it have no state), and where it ended.
  bool ev_term = false;
  gs_real ev_tend = t0;
{{- end}}
  if (valid) {
    status = gs_ev_start(sh, t0, y, p, eg);
    run = status == GS_RUNNING;
  }
{{- end}}
  while (GS_ANY(run)) {
    gs_real yn[GS_D], e[GS_D], ks[GS_D], hrho, accept, stat;
{{- if .Events}}
    // The trial with its extension's coefficients, where events are
    // located.
    gs_real w[GS_EDW];
    gs_a_trial_dense(sh, st[GS_ST_T], st[GS_ST_H], y, p, k1, yn, e, ks, &hrho, w);
{{- else if .ShareFwd}}
    // The trial returns its continuous extension's coefficients too
    // (TrialDense): those of the accepted step are its save times'.
    gs_real w[GS_DW];
    gs_a_trial(sh, st[GS_ST_T], st[GS_ST_H], y, p, k1, yn, e, ks, &hrho, w);
{{- else if .SwitchTrial}}
    // Where a save time lies inside the step tried (in any trajectory
    // run with this one), the trial returns its continuous extension's
    // coefficients too (TrialDense, Trial's outputs bit for bit): those
    // of the accepted step are its save times', and w is read only there.
    gs_real w[GS_DW];
    if (GS_ANY(gs_active_any(run && gs_inside(a, k, st[GS_ST_T], st[GS_ST_H]))))
      gs_a_trial_dense(sh, st[GS_ST_T], st[GS_ST_H], y, p, k1, yn, e, ks, &hrho, w);
    else
      gs_a_trial(sh, st[GS_ST_T], st[GS_ST_H], y, p, k1, yn, e, ks, &hrho);
{{- else}}
    gs_a_trial(sh, st[GS_ST_T], st[GS_ST_H], y, p, k1, yn, e, ks, &hrho);
{{- end}}
{{- if .Saves}}
    // The step's save times, after the round: its start, its size (with
    // Dense, else its end) and the state it starts from.
    bool saving = false;
    long long sv_s = 0;
    gs_real sv_t = 0, {{if .Dense}}sv_h{{else}}sv_t2{{end}} = 0, sv_y[GS_D];
    for (int c = 0; c < GS_D; c++) sv_y[c] = y[c];
{{- end}}
    if (run) {
      gs_a_control(csh, st, t1, y, yn, e, hrho, st2, &accept, &stat);
{{- if .ProbeOn}}
    }
    // The stability probe on its trials (ode.Plan.ProbeDue{{if .ProbeAll}}; Method
    // Auto's pass: every trial{{end}}), at the state the trial started from,
    // between the controller and the commit. It is called by the
    // trajectories run in lockstep together (GS_ANY: a tile's field may
    // be a warp's collective), and kept by those due.
    {
      const bool pdue = run && ({{if .ProbeAll}}true{{else}}ntrial % {{.ProbeEvery}} == 0 || ntrial == {{.ProbeEvery}} / 4{{end}});
      if (GS_ANY(pdue)) {
        gs_real pv2[GS_D], prv2, pu2, pst;
        gs_a_probe(sh, st[GS_ST_T], st[GS_ST_H], y, p, pv, prv, pu, run ? accept : 0, pv2, &prv2, &pu2, &pst);
        if (pdue) {
          for (int c = 0; c < GS_D; c++) pv[c] = pv2[c];
          prv = prv2;
          pu = pu2;
          if (pst != 0) {
            st2[GS_ST_STIFF] = 1;
{{- if .StopStiff}}
            // The trajectory stops here: before the step the probe found
            // outside the stability region, which counts as rejected.
            if (accept != 0) {
              for (int q = 0; q < GS_NSTATE; q++) st2[q] = st[q];
              st2[GS_ST_REJECTED] = st[GS_ST_REJECTED] + 1;
              st2[GS_ST_STIFF] = 1;
              accept = 0;
              if (stat == (gs_real)GS_OK) stat = (gs_real)GS_RUNNING;
            }
{{- end}}
          }
        }
      }
      if (run) ntrial++;
    }
    if (run) {
{{- end}}
{{- if .Events}}
      // An accepted step where a condition crosses becomes the event step;
      // an event whose root coincides with its event's is a step of size 0
      // after it (ev_row: the x-th after the event step, from (te, ye)).
      int fired = -1, elast = -1;
      auto ev_row = [&](int x, int ev, gs_real te, const gs_real* ye) {
{{- if or .MeshOut .Store .StoreEv}}
        const long long s0 = (long long)st[GS_ST_ACCEPTED] + x;
{{- end}}
{{- if or .MeshOut .Store}}
        gs_real sz[GS_NSTATE];
        sz[GS_ST_T] = te;
        sz[GS_ST_H] = 0;
        overflow |= gs_record(a, i, s0, sz, ye, GS_WRITER);
{{- end}}
{{- if .StoreEv}}
        if (s0 < a.rows && GS_WRITER) a.store[(s0 * GS_SW + GS_STORE_T + GS_D) * n + i] = (gs_real)(ev + 1);
{{- end}}
{{- if .MeshOut}}
        if (s0 < a.rows && GS_WRITER) a.evout[s0 * n + i] = ev + 1;
{{- end}}
        (void)x; (void)ev; (void)te; (void)ye;
      };
      if (accept != 0) fired = gs_ev_step(sh, st, st2, t1, y, p, yn, ks, w, eg, nev, stat, elast, ev_row);
      (void)fired;
      (void)elast;
{{- end}}
      lasth = st[GS_ST_H];
      if (accept != 0) {
{{- if or .MeshOut .Store .Saves}}
        const long long s = (long long)st[GS_ST_ACCEPTED];
{{- end}}
{{- if or .MeshOut .Store}}
        overflow |= gs_record(a, i, s, st, y, GS_WRITER);
{{- end}}
{{- if .StoreEv}}
        if (s < a.rows && GS_WRITER) a.store[(s * GS_SW + GS_STORE_T + GS_D) * n + i] = (gs_real)(fired + 1);
{{- end}}
{{- if and .MeshOut .Events}}
        if (s < a.rows && GS_WRITER) a.evout[s * n + i] = fired + 1;  // the mesh's event marks (ode.Mesh.Events)
{{- end}}
{{- if and .Events .Saves}}
        ev_term = elast >= 0 && gs_ev_terminal(elast);
{{- end}}
{{- if .Saves}}
        saving = true;
        sv_s = s;
        sv_t = st[GS_ST_T];
{{- if .Dense}}
        sv_h = st[GS_ST_H];
{{- else}}
        sv_t2 = st2[GS_ST_T];
{{- end}}
{{- end}}
        for (int c = 0; c < GS_D; c++) y[c] = yn[c];
{{- if .FSAL}}
        for (int c = 0; c < GS_D; c++) k1[c] = ks[c];
{{- end}}
      }
      for (int q = 0; q < GS_NSTATE; q++) st[q] = st2[q];
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
{{- if .Saves}}
{{- if or .ShareFwd .SwitchTrial}}
{{- if .DeferSaves}}
    if (saving) gs_defer_step(a, k, i, (int)sv_s, sv_t, sv_h, sv_y, w);
{{- else if .DeferGrad}}
    if (saving) gs_defer_grad_step(a, k, i, (int)sv_s, sv_t, sv_h, sv_y, w);
{{- else}}
    if (saving) gs_step_saves(a, k, i, (int)sv_s, sv_t, sv_h, sv_y, w{{template "fold-arg" .}});
{{- end}}
{{- else}}
    gs_saves(a, sh, k, i, sv_s, sv_t, {{if .Dense}}sv_h{{else}}sv_t2{{end}}, sv_y, p, saving{{template "fold-arg" .}});
{{- end}}
{{- end}}
  }
  len = (int)st[GS_ST_ACCEPTED];
{{- if and .Events .Saves}}
  ev_tend = st[GS_ST_T];
{{- end}}
  if (valid && GS_WRITER) gs_finish(a, i, st, lasth, len, status, overflow);
{{- if .Events}}
  if (valid && GS_WRITER) a.events[i] = nev;
{{- end}}
{{- if and .MeshOut (not .Lanes)}}
  // The recorded mesh's rows past the trajectory's last step, up to
  // a.zrows, read 0 (steps and event marks): where the launch does not
  // zero them before the kernel (package cuda's meshZero), rows a launch
  // before may have written; rows from a.zrows on are 0 already. Row by
  // row, so that a warp's stores of one row are one.
  for (long long s = 0; s < a.zrows; s++) {
    if (valid && s >= len) {
      a.hout[s * n + i] = 0;
{{- if .Events}}
      a.evout[s * n + i] = 0;
{{- end}}
    }
  }
{{- end}}
{{- end}}
