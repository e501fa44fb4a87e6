{{- /*
replay.cuh: the forward loop of a kernel on a given mesh ("replay"): a
replay, or the forward sweep of a loss or a gradient on a mesh. It runs
the Replay step over the mesh's steps, keeping the states before them
(Store) and computing the save times they pass, and with events the
jumps after the steps the mesh marks (Mesh.Events); see kernel.cuh for the
hooks (GS_STEPS, GS_ANY, GS_WRITER).
*/ -}}
{{define "replay" -}}
  len = valid ? a.len[i] : 0;
  gs_real t = t0;
  const int smax = GS_STEPS(len);
{{- if .Events}}
  int nev = 0;
{{- if .Saves}}
  bool ev_term = false;  // the mesh ends at a terminal event (the save times past it have no state)
{{- end}}
{{- end}}
  for (int s = 0; s < smax; s++) {
    const bool on = s < len;
    const gs_real h = on ? a.hin[(long long)s * n + i] : (gs_real)0;
{{- if .Store}}
    if (on && GS_WRITER) gs_store_row(a, i, s, t, y);
{{- end}}
{{- if and .Saves (not .Dense)}}
    gs_saves(a, sh, k, i, s, t, t + h, y, p, on{{template "fold-arg" .}});
{{- end}}
    // A step of size 0 is the identity.
    const bool live = on && h != 0;
    gs_real yn[GS_D];
{{- if .Dense}}
    // Where a save time lies inside the step, the dense step (the same
    // y+) replaces the replay step and gives the coefficients the save
    // times are read from.
    gs_real w[GS_DW];
{{- if not .ShareFwd}}
    const bool dense = live && gs_inside(a, k, t, h);
{{- end}}
{{- end}}
    if (GS_ANY(live)) {
{{- if .ShareFwd}}
      // One step program for all: the dense step (Replay's y+ bit for bit).
      gs_a_dense_step(sh, t, h, y, p, yn, w);
{{- else if .Dense}}
      if (GS_ANY(dense))
        gs_a_dense_step(sh, t, h, y, p, yn, w);
      else
        gs_a_replay(sh, t, h, y, p, yn);
{{- else}}
      gs_a_replay(sh, t, h, y, p, yn);
{{- end}}
    }
{{- if .Dense}}
    if (on) gs_step_saves(a, k, i, s, t, h, y, w{{template "fold-arg" .}});
{{- end}}
    if (live)
      for (int c = 0; c < GS_D; c++) y[c] = yn[c];
    if (on) t = t + h;
{{- if .Events}}
    // A step the mesh marks as event e's (Mesh.Events: e + 1) is followed
    // by e's jump at its end, as the record applied it (ode's
    // eventReplay); a gradient's stored row keeps the mark.
    if (on) {
      const int em = a.evin[(long long)s * n + i];
{{- if .StoreEv}}
      if (GS_WRITER) a.store[((long long)s * GS_SW + GS_STORE_T + GS_D) * n + i] = (gs_real)em;
{{- end}}
      if (em > 0) {
        nev++;
        gs_ev_jump(em - 1, sh, t, y, p);
      }
{{- if .Saves}}
      ev_term = em > 0 && gs_ev_terminal(em - 1);
{{- end}}
    }
{{- end}}
  }
  status = GS_OK;
{{- if and .Events .Saves}}
  const gs_real ev_tend = t;
{{- end}}
{{- if .Events}}
  // The end time (a terminal event's, where the mesh ends at one) and the
  // events, as the CPU engine's replay gives them.
  if (valid && GS_WRITER) {
    a.t[i] = t;
    a.events[i] = nev;
{{- if .Grad}}
    a.flags[i] = 0;
{{- end}}
  }
{{- end}}
{{- end}}
