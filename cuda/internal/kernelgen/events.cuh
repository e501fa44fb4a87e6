{{- /*
events.cuh: events (Config.Events; ode.Event), the CPU engine's algorithm
(ode/cpu_event.go) for one trajectory per thread, step for step, so that
both engines take the same steps and locate the same event times:
"events" defines the helpers the adaptive loop calls (gs_ev_start at T0,
gs_ev_step after every accepted step), "event-sweep" the reverse sweep of
a gradient through the event steps (in gs_backward). The plan's event
programs come as adapters (adapters.go, eventAdapters). Thread layout
only: one thread runs its trajectory's root finding alone.
*/ -}}
{{define "events"}}
// Events (ode.Event; the CPU engine's ode/cpu_event.go, for one
// trajectory): the conditions are checked on every accepted step at
// GS_EV_SAMPLES points of its continuous extension; where one crosses, its
// root is located on the extension (Illinois), the earliest polished on
// the method's own step (Replay steps of trial sizes), and the step
// replaced by the event step, after which the event's jump (Apply) is
// applied and the trajectory stops (terminal) or goes on.
#define GS_NE {{.NE}}
#define GS_MAXEV {{.MaxEvents}}
#define GS_EV_SAMPLES 8
#define GS_ETERMS {{.DenseTerms}}
#define GS_EDW (GS_ETERMS * GS_D)
#define GS_EV_NONFINITE {{.EvNonFinite}}
#define GS_EV_ATSTART {{.EvAtStart}}
#define GS_EV_TOOMANY {{.EvMax}}
#define GS_FLAG_TANGENT 4
#define GS_NSX (GS_NS > 0 ? GS_NS : 1)
// GS_EV_XTOL is the width at which a root on the extension (theta in
// [0, 1]) is located (ode's 1e-15 in float64; 4 ulps of 1 in float32);
// GS_EV_TINY the value of a fired condition, of the sign it leaves with:
// the smallest positive double, as ode's; in float32 the smallest normal
// float, which a device that flushes subnormals to zero keeps (any
// positive value tells the same crossings).
#ifdef GS_FLOAT32
#define GS_EV_XTOL (4 * GS_EPS)
#define GS_EV_TINY 0x1p-126f
#else
#define GS_EV_XTOL 1e-15
#define GS_EV_TINY 4.9406564584124654e-324
#endif
// A condition's gradient: g, g_t, g_y[D], g_p[NP], g_s[NS] (also the
// outputs of the step's reverse with time: t̄, h̄, ȳ, p̄, s̄).
#define GS_EV_CG (2 + GS_D + GS_NP + GS_NS)

// gs_ev_dir is event e's Direction; gs_ev_terminal whether it is terminal.
GS_DEVICE int gs_ev_dir(int e) {
  switch (e) {
{{- range $e, $d := .EvDir}}
  case {{$e}}: return {{$d}};
{{- end}}
  }
  return 0;
}

GS_DEVICE bool gs_ev_terminal(int e) {
  switch (e) {
{{- range $e, $x := .EvTerminal}}
  case {{$e}}: return {{$x}};
{{- end}}
  }
  return false;
}

// gs_ev_jump applies event e's jump (Apply) to y at time t, in place, if
// it has one.
GS_DEVICE void gs_ev_jump(int e, const gs_real* sh, gs_real t, gs_real* y, const gs_real* p) {
  gs_real yo[GS_D];
  switch (e) {
{{- range $e, $j := .EvJump}}{{if $j}}
  case {{$e}}: gs_a_jump{{$e}}(sh, t, y, p, yo); break;
{{- end}}{{end}}
  default: return;
  }
  for (int c = 0; c < GS_D; c++) y[c] = yo[c];
}

// gs_ev_condgrad sets o[GS_EV_CG] to event e's condition and its gradient
// at (t, y).
GS_DEVICE void gs_ev_condgrad(int e, const gs_real* sh, gs_real t, const gs_real* y, const gs_real* p, gs_real* o) {
  switch (e) {
{{- range $e, $d := .EvDir}}
  case {{$e}}: gs_a_condgrad{{$e}}(sh, t, y, p, o); break;
{{- end}}
  }
}

// gs_ev_finite reports whether x is finite (neither NaN nor infinite).
GS_DEVICE bool gs_ev_finite(gs_real x) { return x - x == (gs_real)0; }

// gs_ev_crossed reports whether a condition of direction dir crosses from
// g0 to g1: from < 0 to >= 0 (rising) or from > 0 to <= 0 (falling).
GS_DEVICE bool gs_ev_crossed(int dir, gs_real g0, gs_real g1) {
  const bool rise = g0 < 0 && g1 >= 0, fall = g0 > 0 && g1 <= 0;
  return (dir >= 0 && rise) || (dir <= 0 && fall);
}

GS_DEVICE gs_real gs_ev_min(gs_real a, gs_real b) { return a < b ? a : b; }
GS_DEVICE gs_real gs_ev_max(gs_real a, gs_real b) { return a > b ? a : b; }

// gs_ev_ulp is the spacing of the reals above |x|.
GS_DEVICE gs_real gs_ev_ulp(gs_real x) {
  x = fabs(x);
  return nextafter(x, (gs_real)GS_REAL_MAX) - x;  // (0 at the largest real, never reached)
}

// gs_ev_interp sets out to the step's extension with coefficients w from y
// at theta (Plan.Interp's Horner rule, as scan.Interp).
GS_DEVICE void gs_ev_interp(const gs_real* y, const gs_real* w, gs_real theta, gs_real* out) {
  for (int c = 0; c < GS_D; c++) {
    gs_real acc = w[(GS_ETERMS - 1) * GS_D + c];
    for (int j = GS_ETERMS - 2; j >= 0; j--) acc = w[j * GS_D + c] + theta * acc;
    out[c] = y[c] + theta * acc;
  }
}

// gs_ev_illinois narrows the bracket [lo, hi] (values g0 at lo and g1 at
// hi, between which the condition crosses) by the Illinois method, f(x)
// evaluating the condition at x, until it is narrow enough (polish: within
// two ulps of t + hi as times t + lo, t + hi; else hi - lo <= GS_EV_XTOL; at
// most 100 iterations) and returns hi, the end where the condition has
// crossed (ode's illinois, for one trajectory).
template <class F>
GS_DEVICE gs_real gs_ev_illinois(gs_real lo, gs_real hi, gs_real g0, gs_real g1, bool polish, gs_real t, F f) {
  int side = 0;
  for (int it = 0; it < 100; it++) {
    const bool done = polish ? (t + hi) - (t + lo) <= 2 * gs_ev_ulp(t + hi) : hi - lo <= (gs_real)GS_EV_XTOL;
    if (done || g1 == 0) break;
    // Regula falsi within the bracket; bisection if it stalls, or if g0 is
    // the value a fired condition leaves with (GS_EV_TINY; or that halved),
    // no value of the condition (ode's illinois).
    // The secant from the end nearer the root (the smaller |g|), which
    // does not cancel where the root lies within rounding of one end.
    gs_real s = hi - g1 * (hi - lo) / (g1 - g0);
    if (fabs(g0) < fabs(g1)) s = lo - g0 * (hi - lo) / (g1 - g0);
    if (!(s > lo && s < hi) || fabs(g0) <= (gs_real)GS_EV_TINY) s = lo + (hi - lo) / 2;
    const gs_real gx = f(s);
    if (gx != gx) break;
    if (gx == 0 || (gx < 0) == (g1 < 0)) {
      hi = s;
      g1 = gx;
      if (side == 1) g0 /= 2;
      side = 1;
    } else {
      lo = s;
      g0 = gx;
      if (side == -1) g1 /= 2;
      side = -1;
    }
  }
  return hi;
}

// gs_ev_start sets eg to the conditions at the start (t0, y) and returns
// the trajectory's status: GS_RUNNING, or GS_EV_NONFINITE where one is
// not finite, GS_EV_ATSTART where one is exactly 0.
GS_DEVICE int gs_ev_start(const gs_real* sh, gs_real t0, const gs_real* y, const gs_real* p, gs_real* eg) {
  gs_a_cond(sh, t0, y, p, eg);
  int st = GS_RUNNING;
  for (int e = 0; e < GS_NE; e++) {
    if (!gs_ev_finite(eg[e]))
      st = GS_EV_NONFINITE;
    else if (eg[e] == 0 && st == GS_RUNNING)
      st = GS_EV_ATSTART;
  }
  return st;
}

// gs_ev_step handles the events of an accepted step from (st[T], y) of
// size st[H] to yn (coefficients w; the controller's next state st2 and
// status stat; eg the conditions at y, nev the events so far): where a
// condition crosses, the step becomes the event step (st[H] = h*, yn the
// state after the events' jumps, ks the field there, st2 and stat the
// state and status from there on) and it returns the event that step
// marks; else -1 (and eg becomes the conditions at yn). Every event whose
// condition has crossed by t* too (its root coincides with the located
// one's) fires there as well (ode's coinciding and fireGroup): the
// non-terminal ones in index order, then the first terminal one; the
// first marks the event step, each further one a step of size 0 from the
// state the jumps before it left, which row(x, e, t*, y) records as the
// step x after the event step (st2's accepted count includes them).
// elast is the last event fired.
template <class R>
GS_DEVICE int gs_ev_step(const gs_real* sh, gs_real* st, gs_real* st2, gs_real t1, const gs_real* y, const gs_real* p,
                         gs_real* yn, gs_real* ks, const gs_real* w, gs_real* eg, int& nev, gs_real& stat, int& elast, R row) {
  const gs_real t = st[GS_ST_T], h = st[GS_ST_H];
  gs_real gn[GS_NE], ga[GS_NE], gb[GS_NE], gj[GS_NE], yy[GS_D];
  gs_a_cond(sh, st2[GS_ST_T], yn, p, gn);
  // The conditions at theta = j/GS_EV_SAMPLES on the extension, j = 1, 2,
  // ...: the first sample interval where one crosses (ja).
  int ja = 0;
  for (int e = 0; e < GS_NE; e++) ga[e] = eg[e];
  for (int j = 1; j <= GS_EV_SAMPLES && (stat == (gs_real)GS_RUNNING || stat == (gs_real)GS_OK); j++) {
    if (j == GS_EV_SAMPLES) {
      for (int e = 0; e < GS_NE; e++) gj[e] = gn[e];
    } else {
      const gs_real th = (gs_real)j / GS_EV_SAMPLES;
      gs_ev_interp(y, w, th, yy);
      gs_a_cond(sh, t + th * h, yy, p, gj);
    }
    for (int e = 0; e < GS_NE; e++) {
      const gs_real x = gj[e];
      if (!gs_ev_finite(x)) {
        stat = (gs_real)GS_EV_NONFINITE;
        break;
      }
      if (gs_ev_crossed(gs_ev_dir(e), ga[e], x)) ja = j;
    }
    if (ja != 0) {
      for (int e = 0; e < GS_NE; e++) gb[e] = gj[e];
      break;
    }
    for (int e = 0; e < GS_NE; e++) ga[e] = gj[e];
  }
  if (ja == 0) {
    for (int e = 0; e < GS_NE; e++) eg[e] = gn[e];
    return -1;
  }
  // The root of each crossing condition in the sample interval on the
  // extension; the earliest (the first event of equal ones) fires.
  gs_real gg[GS_NE], best = (gs_real)GS_REAL_MAX;  // a root is a theta in [0, 1]
  int fe = -1;
  for (int e = 0; e < GS_NE; e++) {
    if (!gs_ev_crossed(gs_ev_dir(e), ga[e], gb[e])) continue;
    const gs_real th = gs_ev_illinois((gs_real)(ja - 1) / GS_EV_SAMPLES, (gs_real)ja / GS_EV_SAMPLES, ga[e], gb[e], false, t,
                                      [&](gs_real x) -> gs_real {
                                        gs_ev_interp(y, w, x, yy);
                                        gs_a_cond(sh, t + x * h, yy, p, gg);
                                        return gg[e];
                                      });
    if (th < best) {
      best = th;
      fe = e;
    }
  }
  const int e = fe;
  // Polish on the step: G(h') = g_e(t + h', Phi(t, h', y)), h' an exact
  // advance of t, from the extension's root, within the sample interval.
  gs_real lo = (gs_real)(ja - 1) / GS_EV_SAMPLES * h, hi = (gs_real)ja / GS_EV_SAMPLES * h;
  if (ja == GS_EV_SAMPLES) hi = h;
  gs_real g0 = ga[e], g1 = gb[e], hs = 0, tt = t;
  auto step = [&](gs_real x) -> gs_real {
    hs = (t + x) - t;
    gs_a_replay(sh, t, hs, y, p, yy);
    tt = t + hs;
    gs_a_cond(sh, tt, yy, p, gg);
    return gg[e];
  };
  // A bracket around the extension's root: h'(1 +- 1e-7).
  gs_real guess = gs_ev_min(gs_ev_max(best * h, lo), hi);
  for (int pass = 0; pass < 2; pass++) {
    const gs_real gx = step(guess);
    if (hs > lo && hs < hi) {
      if (gs_ev_crossed(gs_ev_dir(e), g0, gx) || gx == 0) {
        hi = hs;
        g1 = gx;
      } else {
        lo = hs;
        g0 = gx;
      }
    }
    guess = hi == hs ? hs * (gs_real)0.9999999 : hs * (gs_real)1.0000001;
    guess = gs_ev_min(gs_ev_max(guess, lo), hi);
  }
  hi = gs_ev_illinois(lo, hi, g0, g1, true, t, step);
  // The event step: the end of the bracket where the event has crossed.
  step(hi);
  // Fire: the jumps, then the conditions and the field from the new state.
  // The events whose conditions have crossed by t* too (gg, before any
  // jump) fire with e: the non-terminal ones in index order, then the
  // first terminal one. A fired condition counts as the smallest number
  // of the sign it leaves with (the sign of g_t + g_y.f at the new state),
  // so that it does not fire again at once but does when it comes back,
  // however soon; unless a jump moved it off its root (a value other
  // than its value before the jumps, gg, and 0: ode's offRoot), where it
  // is that value.
  const gs_real tiny = (gs_real)GS_EV_TINY;
  bool fires[GS_NE];
  for (int x = 0; x < GS_NE; x++) fires[x] = x == e || gs_ev_crossed(gs_ev_dir(x), ga[x], gg[x]);
  int first = -1, nf = 0;
  bool again = false;  // one fired again at the time it fired (ode's refires)
  for (int pass = 0; pass < 2; pass++) {
    for (int x = 0; x < GS_NE; x++) {
      if (!fires[x] || gs_ev_terminal(x) != (pass == 1)) continue;
      if (nf == 0)
        first = x;
      else
        row(nf, x, tt, (const gs_real*)yy);
      nf++;
      elast = x;
      again = again || ((ga[x] == tiny || ga[x] == -tiny) && hs <= 4 * GS_EPS * fabs(t));
      gs_ev_jump(x, sh, tt, yy, p);
      if (pass == 1) break;  // a terminal event ends the trajectory
    }
  }
  gs_real gnew[GS_NE], k1n[GS_D], cg[GS_EV_CG];
  gs_a_cond(sh, tt, yy, p, gnew);
  gs_a_field(sh, tt, yy, p, k1n);
  for (int x = 0; x < GS_NE; x++) eg[x] = gnew[x];
  for (int x = 0; x < GS_NE; x++) {
    if (!fires[x] || (gs_ev_terminal(x) && x != elast)) continue;
    if (gnew[x] != gg[x] && gnew[x] != 0) continue;  // off its root
    gs_ev_condgrad(x, sh, tt, yy, p, cg);
    gs_real gdot = cg[1];
    for (int c = 0; c < GS_D; c++) gdot += cg[2 + c] * k1n[c];
    eg[x] = gdot > 0 ? tiny : gdot < 0 ? -tiny : (gs_real)0;
  }
  nev += nf;
  st2[GS_ST_ACCEPTED] += nf - 1;
  const gs_real htrial = st[GS_ST_H];
  st[GS_ST_H] = hs;
  for (int c = 0; c < GS_D; c++) yn[c] = yy[c];
{{- if .FSAL}}
  for (int c = 0; c < GS_D; c++) ks[c] = k1n[c];
{{- else}}
  (void)ks;
{{- end}}
  // The controller's verdict on the step the event cut short.
  const bool ended = stat != (gs_real)GS_RUNNING;
  st2[GS_ST_T] = tt;
  if (gs_ev_terminal(elast)) {
    stat = (gs_real)GS_OK;
  } else if (nev > GS_MAXEV || again) {
    // Past MaxEvents, or the event fired again at the time it fired (its
    // condition stood at the fired marker, and h* is below the resolution
    // of t): its events accumulate there (ode's refires).
    stat = (gs_real)GS_EV_TOOMANY;
  } else {
    stat = (gs_real)GS_RUNNING;
    // The next step from the event, clamped to the end as the controller
    // clamps; the size the controller tried if it had ended.
    const gs_real span = t1 - tt;
    gs_real hn = st2[GS_ST_H];
    if (ended || !(hn > 0)) hn = htrial;
    gs_real last = 0;
    if (hn >= span || tt + hn >= t1) {
      hn = span;
      last = 1;
    }
    st2[GS_ST_H] = (tt + hn) - tt;
    st2[GS_ST_LAST] = last;
    if (span <= 0) stat = (gs_real)GS_OK;  // the event is at the end
  }
  return first;
}
{{- if .Grad}}

// gs_ev_jumprev sets o[1 + D + NP + NS] to the reverse of event e's jump
// at (t, y) (the state before it) with cotangent lam: t̄, λ⁻, p̄, s̄; it
// reports whether the event has a jump.
GS_DEVICE bool gs_ev_jumprev(int e, const gs_real* sh, gs_real t, const gs_real* y, const gs_real* p, const gs_real* lam,
                             gs_real* o) {
  switch (e) {
{{- range $e, $j := .EvJump}}{{if $j}}
  case {{$e}}: gs_a_jumprev{{$e}}(sh, t, y, p, lam, o); return true;
{{- end}}{{end}}
  }
  (void)sh; (void)t; (void)y; (void)p; (void)lam; (void)o;
  return false;
}
{{- end}}
{{- end}}

{{define "event-sweep"}}
  // The reverse sweep through the event steps (ode's eventGrad): the
  // cotangents of the state (lam), of the time at the end of the step
  // being reversed (tau), of the parameters (gp) and of the shared ones
  // (gsum, added to acc at the end). Every step is reversed with respect
  // to its time and size too (gs_a_steprev); an event step's size moves
  // with the state, the time and the parameters by the implicit function
  // theorem, dh*/dx = -(dG/dx)/(dG/dh), and the last step, if not an
  // event's, ends at T1 (h = T1 - t).
  gs_real gsum[GS_NSX], tau = 0;
  for (int c = 0; c < GS_NSX; c++) gsum[c] = 0;
  // A last step that is an event step ends at t*, which moves, while
  // what is read there at a fixed time does not (ode's endAtEvent): the
  // final state at a non-terminal event at T1, save times at a terminal
  // one. Their cotangent xb enters as tau = -xb.f(t*, y*).
  const int elast = act && len > 0 ? (int)a.store[((long long)(len - 1) * GS_SW + 1 + GS_D) * n + i] - 1 : -1;
  gs_real xb[GS_D];
  for (int c = 0; c < GS_D; c++) xb[c] = elast >= 0 && !gs_ev_terminal(elast) ? lam[c] : (gs_real)0;
{{- if .Saves}}
  // The save times at or after the end add to the final state's
  // cotangent; those on a step enter its reverse (below). kq: the first
  // save time past the steps reversed so far.
  int kq = GS_K;
  if (act) {
    while (kq > 0 && a.tapstep[(long long)(kq - 1) * n + i] >= len) {
      kq--;
      for (int c = 0; c < GS_D; c++) lam[c] += a.tb[((long long)kq * GS_D + c) * n + i];
      for (int c = 0; c < GS_D; c++) xb[c] += a.tb[((long long)kq * GS_D + c) * n + i];
    }
  }
{{- end}}
  if (elast >= 0) {
    bool any = false;
    for (int c = 0; c < GS_D; c++) any = any || xb[c] != 0;
    if (any) {
      gs_real fe[GS_D];
      gs_a_field(sh, a.store[(long long)(len - 1) * GS_SW * n + i] + GS_HSRC[(long long)(len - 1) * n + i], y, p, fe);
      for (int c = 0; c < GS_D; c++) tau -= xb[c] * fe[c];
    }
  }
  for (int s = act ? len - 1 : -1; s >= 0; s--) {
    const gs_real h = GS_HSRC[(long long)s * n + i];
    const gs_real* row = a.store + (long long)s * GS_SW * n + i;
    const gs_real ts = row[0];
    const int e = (int)row[(long long)(1 + GS_D) * n] - 1;
    gs_real ys[GS_D], ym[GS_D], rb[GS_EV_CG];
    for (int c = 0; c < GS_D; c++) ys[c] = row[(long long)(1 + c) * n];
    if (e >= 0) {
      // The state at the event, before its jump, and the jump's reverse.
      gs_a_replay(sh, ts, h, ys, p, ym);
      gs_real jr[1 + GS_D + GS_NP + GS_NS];
      if (gs_ev_jumprev(e, sh, ts + h, ym, p, lam, jr)) {
        tau += jr[0];
        for (int c = 0; c < GS_D; c++) lam[c] = jr[1 + c];
        for (int c = 0; c < GS_NP; c++) gp[c] += jr[1 + GS_D + c];
        for (int c = 0; c < GS_NS; c++) gsum[c] += jr[1 + GS_D + GS_NP + c];
      }
    }
    gs_a_steprev(sh, ts, h, ys, p, lam, rb);
{{- if .Saves}}
    // The save times on the step, from the last (ode's eventGrad): its
    // extension at theta = (tau - t)/h, which moves with t and h (the
    // step's own size: h* on an event step); at theta = 0 (tau = t: a
    // save time at an event time) the state itself, whose t still moves
    // with the events before it while tau stays (t̄ gets -bar.w_1/h).
    while (kq > 0 && a.tapstep[(long long)(kq - 1) * n + i] == s) {
      kq--;
      gs_real bar[GS_D];
      for (int c = 0; c < GS_D; c++) bar[c] = a.tb[((long long)kq * GS_D + c) * n + i];
      const gs_real theta = a.saveat[kq] > ts ? (a.saveat[kq] - ts) / h : (gs_real)0;
      gs_real sv[GS_EV_CG + 1];
      gs_a_saverev(sh, ts, h, ys, p, theta, bar, sv);
      const gs_real thb = sv[GS_EV_CG];
      rb[0] += sv[0] - thb / h;
      rb[1] += sv[1] - thb * theta / h;
      for (int c = 2; c < GS_EV_CG; c++) rb[c] += sv[c];
    }
{{- end}}
    for (int c = 0; c < GS_D; c++) lam[c] = rb[2 + c];
    for (int c = 0; c < GS_NP; c++) gp[c] += rb[2 + GS_D + c];
    for (int c = 0; c < GS_NS; c++) gsum[c] += rb[2 + GS_D + GS_NP + c];
    if (e < 0) {
      tau = s == len - 1 ? rb[0] - rb[1] : tau + rb[0];
      continue;
    }
    // dG/dh = g_t + g_y . dPhi/dh, and the step's reverse with g_y.
    gs_real cg[GS_EV_CG], r2[GS_EV_CG];
    gs_ev_condgrad(e, sh, ts + h, ym, p, cg);
    gs_a_steprev(sh, ts, h, ys, p, cg + 2, r2);
    const gs_real gh = cg[1] + r2[1];
    if (gh == 0 || !gs_ev_finite(gh)) a.flags[i] |= GS_FLAG_TANGENT;  // the host refuses the gradient
    const gs_real mu = -(tau + rb[1]) / gh;
    for (int c = 0; c < GS_D; c++) lam[c] += mu * r2[2 + c];
    for (int c = 0; c < GS_NP; c++) gp[c] += mu * (r2[2 + GS_D + c] + cg[2 + GS_D + c]);
    for (int c = 0; c < GS_NS; c++) gsum[c] += mu * (r2[2 + GS_D + GS_NP + c] + cg[2 + GS_D + GS_NP + c]);
    tau += rb[0] + mu * (r2[0] + cg[1]);
  }
{{- if .Saves}}
  // Save times at or before T0 (step 0's at its start, above, where
  // there are steps): the initial state.
  while (act && kq > 0) {
    kq--;
    for (int c = 0; c < GS_D; c++) lam[c] += a.tb[((long long)kq * GS_D + c) * n + i];
  }
{{- end}}
  if (act) {
    for (int c = 0; c < GS_D; c++) a.gy0[(long long)c * n + i] = lam[c];
    for (int c = 0; c < GS_NP; c++) a.gp[(long long)c * n + i] = gp[c];
  }
  gs_warp_add<GS_NS>(acc, gsum, act);
{{- end}}
