#!/usr/bin/env python3
"""Diffrax on the larger problems of issue 26: Lorenz-96 (d = 64, 256), POLL (d = 20), the Brusselator (d = 64).

Problems (the same equations, constants, initial values, spans and sweeps as
package problems and bench.StiffEnsemble on the Go side; states numbered from
0 unless the literature's 1-based names are quoted):

* lorenz96-64, lorenz96-256 (problems.Lorenz96(d)): y_i' = (y_{i+1} - y_{i-2})
  y_{i-1} - y_i + F, indices mod d; y0 = (F0 + 0.01, F0, ..., F0) with F0 = 8
  (not the swept F); t in [0, 1]; F = linspace(7, 9, n) per trajectory.
  Tsit5, atol = rtol*1e-3; default n = 4096.
* pollution (problems.Pollution, the Bari test set's POLL, pollu.f): 20
  species, 25 reactions with the rate constants k1..k25 of pollu.f; y0 from
  pollu.f's init; t in [0, 60]; k1 = linspace(0.28, 0.42, n) (0.35 +- 20%),
  the other 24 rates at pollu.f's values. Kvaerno5, atol = rtol*1e-4;
  default n = 4096.
* brusselator (problems.Brusselator(32), Hairer & Wanner II, IV.1, BRUSS with
  A = 1, B = 3): 32 cells x_i = i/33, interleaved state (u_1, v_1, u_2, v_2,
  ...), u_i' = 1 + u_i^2 v_i - 4 u_i + c (u_{i-1} - 2 u_i + u_{i+1}),
  v_i' = 3 u_i - u_i^2 v_i + c (v_{i-1} - 2 v_i + v_{i+1}), c = alpha*33^2,
  boundary values u = 1, v = 3, u_i(0) = 1 + sin(2 pi x_i), v_i(0) = 3;
  t in [0, 10]; alpha = linspace(0.01, 0.03, n). Kvaerno5,
  atol = rtol*1e-4; default n = 1024.

Loss sum_i ||y_i(T)||^2 (ode.SumSquares, the loss of the stiff suite and of
the problems benchmarks), gradient with respect to the swept parameter of every
trajectory (F, k1 or alpha). Diffrax as in the other anchors (README.md):
PIDController(rtol, atol) (I control), dt0=None, SaveAt(t1=True), throw=False,
vmap over the trajectories, RecursiveCheckpointAdjoint with checkpoints =
max_steps = attempts + 1 from a probe solve; jit, one warm-up, best and median
of --reps with block_until_ready; forward solve timed alike. Achieved error:
median of ||y - y_ref|| / ||y_ref|| of the final state over an evenly spaced
subsample (package bench's indices) against scipy: DOP853 at rtol 1e-11,
atol 1e-12 for Lorenz-96, Radau with the analytic Jacobian (pollu.f's jeval
for POLL) at rtol 1e-12 and atol 1e-30 (POLL) or 1e-14 (Brusselator).

The Go side of the same cells:

    gradsolve grad -problem lorenz96-64 -n 4096 -vary p0=7:9 -rtol 1e-6 -atol 1e-9
    gradsolve grad -problem pollution -n 4096 -vary p0=0.28:0.42 -rtol 1e-6 -atol 1e-10
    gradsolve grad -problem brusselator -n 1024 -vary p0=0.01:0.03 -rtol 1e-6 -atol 1e-10
    gradsolve bench -suite stiff -problems pollution,brusselator -n 1024,4096 -rtol 1e-6,1e-8

    python3 diffrax_large.py --platform gpu --rtol 1e-6,1e-8
    python3 diffrax_large.py --platform cpu --problems pollution --n 256 --rtol 1e-6
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

# ---- Problem constants (package problems) ----

L96_F0 = 8.0  # the forcing of y0, whatever the swept F
L96_T1 = 1.0
L96_SWEEP = (7.0, 9.0)

# pollu.f's rate constants k1..k25 (problems.PollutionRates) and initial state
# (problems.PollutionY0: y2 = 0.2, y4 = 0.04, y7 = 0.1, y8 = 0.3, y9 = 0.01,
# y17 = 0.007 in 1-based names).
POLL_K = (0.35, 26.6, 1.23e4, 8.6e-4, 8.2e-4,
          1.5e4, 1.3e-4, 2.4e4, 1.65e4, 9e3,
          2.2e-2, 1.2e4, 1.88, 1.63e4, 4.8e6,
          3.5e-4, 1.75e-2, 1e8, 4.44e11, 1.24e3,
          2.1, 5.78, 4.74e-2, 1.78e3, 3.12)
POLL_Y0 = (0, 0.2, 0, 0.04, 0, 0, 0.1, 0.3, 0.01, 0,
           0, 0, 0, 0, 0, 0, 0.007, 0, 0, 0)
POLL_T1 = 60.0
POLL_SWEEP = (0.28, 0.42)  # k1
# pollu.f's solut: y(60) at the default rates (problems.PollutionRef), to check
# the reference integrator.
POLL_REF60 = (0.5646255480022769e-01, 0.1342484130422339e+00, 0.4139734331099427e-08,
              0.5523140207484359e-02, 0.2018977262302196e-06, 0.1464541863493966e-06,
              0.7784249118997964e-01, 0.3245075353396018e+00, 0.7494013383880406e-02,
              0.1622293157301561e-07, 0.1135863833257075e-07, 0.2230505975721359e-02,
              0.2087162882798630e-03, 0.1396921016840158e-04, 0.8964884856898295e-02,
              0.4352846369330103e-17, 0.6899219696263405e-02, 0.1007803037365946e-03,
              0.1772146513969984e-05, 0.5682943292316392e-04)

BRUSS_CELLS = 32
BRUSS_A, BRUSS_B = 1.0, 3.0
BRUSS_T1 = 10.0
BRUSS_SWEEP = (0.01, 0.03)  # alpha

PROBLEMS = {
    # name: (d, solver, atol/rtol, default n, reference method, ref rtol, ref atol, T1, sweep)
    "lorenz96-64": dict(d=64, solver="Tsit5", atol_over_rtol=1e-3, n=4096, ref="DOP853",
                        ref_rtol=1e-11, ref_atol=1e-12, t1=L96_T1, sweep=L96_SWEEP),
    "lorenz96-256": dict(d=256, solver="Tsit5", atol_over_rtol=1e-3, n=4096, ref="DOP853",
                         ref_rtol=1e-11, ref_atol=1e-12, t1=L96_T1, sweep=L96_SWEEP),
    "pollution": dict(d=20, solver="Kvaerno5", atol_over_rtol=1e-4, n=4096, ref="Radau",
                      ref_rtol=1e-12, ref_atol=1e-30, t1=POLL_T1, sweep=POLL_SWEEP),
    "brusselator": dict(d=2 * BRUSS_CELLS, solver="Kvaerno5", atol_over_rtol=1e-4, n=1024, ref="Radau",
                        ref_rtol=1e-12, ref_atol=1e-14, t1=BRUSS_T1, sweep=BRUSS_SWEEP),
}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default=",".join(PROBLEMS),
                    help="comma-separated problems (default %(default)s)")
    ap.add_argument("--n", default="", help="comma-separated ensemble sizes (default: 4096, 1024 for brusselator)")
    ap.add_argument("--rtol", default="1e-6", help="comma-separated relative tolerances (default %(default)s)")
    ap.add_argument("--platform", choices=["cpu", "gpu"], default="gpu")
    ap.add_argument("--cpu-threads", type=int, default=0, help="CPU platform: use only the first N CPUs (0: all)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=600.0,
                    help="skip a cell whose predicted wall time exceeds this; 0 disables the check")
    ap.add_argument("--ref-sample", type=int, default=32, help="most trajectories of the scipy reference")
    ap.add_argument("--no-forward", action="store_true", help="time the gradient only")
    ap.add_argument("--out", default="", help="also append the JSON lines to this file")
    ap.add_argument("--save-grad", default="", help="directory for the gradient of every cell as .npy")
    return ap.parse_args(argv)


# ---- Initial states (numpy) ----

def y0_np(name):
    import numpy as np

    if name.startswith("lorenz96"):
        y = np.full(PROBLEMS[name]["d"], L96_F0)
        y[0] += 0.01
        return y
    if name == "pollution":
        return np.asarray(POLL_Y0, dtype=np.float64)
    n = BRUSS_CELLS
    y = np.empty(2 * n)
    x = np.arange(1, n + 1) / (n + 1)
    y[0::2] = 1 + np.sin(2 * np.pi * x)
    y[1::2] = BRUSS_B / BRUSS_A
    return y


# ---- Right-hand sides, written once over an array module xp (numpy or jax.numpy) ----

def lorenz96(xp, y, F):
    return (xp.roll(y, -1) - xp.roll(y, 2)) * xp.roll(y, 1) - y + F


def pollution_rates(y, k):
    """r1..r25 of pollu.f (index 0 unused), y and k 0-based arrays of the 1-based names."""
    Y = lambda i: y[i - 1]  # noqa: E731
    K = lambda i: k[i - 1]  # noqa: E731
    return [None,
            K(1) * Y(1), K(2) * Y(2) * Y(4), K(3) * Y(5) * Y(2), K(4) * Y(7), K(5) * Y(7),
            K(6) * Y(7) * Y(6), K(7) * Y(9), K(8) * Y(9) * Y(6), K(9) * Y(11) * Y(2), K(10) * Y(11) * Y(1),
            K(11) * Y(13), K(12) * Y(10) * Y(2), K(13) * Y(14), K(14) * Y(1) * Y(6), K(15) * Y(3),
            K(16) * Y(4), K(17) * Y(4), K(18) * Y(16), K(19) * Y(16), K(20) * Y(17) * Y(6),
            K(21) * Y(19), K(22) * Y(19), K(23) * Y(1) * Y(4), K(24) * Y(19) * Y(1), K(25) * Y(20)]


def pollution(y, k):
    """feval of pollu.f: the 20 derivatives as a list."""
    r = pollution_rates(y, k)
    return [
        -r[1] - r[10] - r[14] - r[23] - r[24] + r[2] + r[3] + r[9] + r[11] + r[12] + r[22] + r[25],
        -r[2] - r[3] - r[9] - r[12] + r[1] + r[21],
        -r[15] + r[1] + r[17] + r[19] + r[22],
        -r[2] - r[16] - r[17] - r[23] + r[15],
        -r[3] + r[4] + r[4] + r[6] + r[7] + r[13] + r[20],
        -r[6] - r[8] - r[14] - r[20] + r[3] + r[18] + r[18],
        -r[4] - r[5] - r[6] + r[13],
        r[4] + r[5] + r[6] + r[7],
        -r[7] - r[8],
        -r[12] + r[7] + r[9],
        -r[9] - r[10] + r[8] + r[11],
        r[9],
        -r[11] + r[10],
        -r[13] + r[12],
        r[14],
        -r[18] - r[19] + r[16],
        -r[20],
        r[20],
        -r[21] - r[22] - r[24] + r[23] + r[25],
        -r[25] + r[24],
    ]


def pollution_jac_np(y, k):
    """jeval of pollu.f: the 20x20 Jacobian (numpy)."""
    import numpy as np

    J = np.zeros((20, 20))
    Y = lambda i: y[i - 1]  # noqa: E731
    K = lambda i: k[i - 1]  # noqa: E731

    def s(i, j, v):
        J[i - 1, j - 1] = v

    s(1, 1, -K(1) - K(10) * Y(11) - K(14) * Y(6) - K(23) * Y(4) - K(24) * Y(19))
    s(1, 11, -K(10) * Y(1) + K(9) * Y(2))
    s(1, 6, -K(14) * Y(1))
    s(1, 4, -K(23) * Y(1) + K(2) * Y(2))
    s(1, 19, -K(24) * Y(1) + K(22))
    s(1, 2, K(2) * Y(4) + K(9) * Y(11) + K(3) * Y(5) + K(12) * Y(10))
    s(1, 13, K(11))
    s(1, 20, K(25))
    s(1, 5, K(3) * Y(2))
    s(1, 10, K(12) * Y(2))
    s(2, 4, -K(2) * Y(2))
    s(2, 5, -K(3) * Y(2))
    s(2, 11, -K(9) * Y(2))
    s(2, 10, -K(12) * Y(2))
    s(2, 19, K(21))
    s(2, 1, K(1))
    s(2, 2, -K(2) * Y(4) - K(3) * Y(5) - K(9) * Y(11) - K(12) * Y(10))
    s(3, 1, K(1))
    s(3, 4, K(17))
    s(3, 16, K(19))
    s(3, 19, K(22))
    s(3, 3, -K(15))
    s(4, 4, -K(2) * Y(2) - K(16) - K(17) - K(23) * Y(1))
    s(4, 2, -K(2) * Y(4))
    s(4, 1, -K(23) * Y(4))
    s(4, 3, K(15))
    s(5, 5, -K(3) * Y(2))
    s(5, 2, -K(3) * Y(5))
    s(5, 7, 2 * K(4) + K(6) * Y(6))
    s(5, 6, K(6) * Y(7) + K(20) * Y(17))
    s(5, 9, K(7))
    s(5, 14, K(13))
    s(5, 17, K(20) * Y(6))
    s(6, 6, -K(6) * Y(7) - K(8) * Y(9) - K(14) * Y(1) - K(20) * Y(17))
    s(6, 7, -K(6) * Y(6))
    s(6, 9, -K(8) * Y(6))
    s(6, 1, -K(14) * Y(6))
    s(6, 17, -K(20) * Y(6))
    s(6, 2, K(3) * Y(5))
    s(6, 5, K(3) * Y(2))
    s(6, 16, 2 * K(18))
    s(7, 7, -K(4) - K(5) - K(6) * Y(6))
    s(7, 6, -K(6) * Y(7))
    s(7, 14, K(13))
    s(8, 7, K(4) + K(5) + K(6) * Y(6))
    s(8, 6, K(6) * Y(7))
    s(8, 9, K(7))
    s(9, 9, -K(7) - K(8) * Y(6))
    s(9, 6, -K(8) * Y(9))
    s(10, 10, -K(12) * Y(2))
    s(10, 2, -K(12) * Y(10) + K(9) * Y(11))
    s(10, 9, K(7))
    s(10, 11, K(9) * Y(2))
    s(11, 11, -K(9) * Y(2) - K(10) * Y(1))
    s(11, 2, -K(9) * Y(11))
    s(11, 1, -K(10) * Y(11))
    s(11, 9, K(8) * Y(6))
    s(11, 6, K(8) * Y(9))
    s(11, 13, K(11))
    s(12, 11, K(9) * Y(2))
    s(12, 2, K(9) * Y(11))
    s(13, 13, -K(11))
    s(13, 11, K(10) * Y(1))
    s(13, 1, K(10) * Y(11))
    s(14, 14, -K(13))
    s(14, 10, K(12) * Y(2))
    s(14, 2, K(12) * Y(10))
    s(15, 1, K(14) * Y(6))
    s(15, 6, K(14) * Y(1))
    s(16, 16, -K(18) - K(19))
    s(16, 4, K(16))
    s(17, 17, -K(20) * Y(6))
    s(17, 6, -K(20) * Y(17))
    s(18, 17, K(20) * Y(6))
    s(18, 6, K(20) * Y(17))
    s(19, 19, -K(21) - K(22) - K(24) * Y(1))
    s(19, 1, -K(24) * Y(19) + K(23) * Y(4))
    s(19, 4, K(23) * Y(1))
    s(19, 20, K(25))
    s(20, 20, -K(25))
    s(20, 1, K(24) * Y(19))
    s(20, 19, K(24) * Y(1))
    return J


def brusselator(xp, y, alpha):
    """BRUSS on the interleaved state (u_1, v_1, ...), boundary values u = 1, v = 3."""
    n = y.shape[0] // 2
    u, v = y[0::2], y[1::2]
    c = alpha * (n + 1) ** 2
    one = xp.ones((1,), dtype=y.dtype)
    ub = BRUSS_A * one
    vb = (BRUSS_B / BRUSS_A) * one
    up = xp.concatenate([ub, u, ub])
    vp = xp.concatenate([vb, v, vb])
    r = u * u * v
    du = r - (BRUSS_B + 1) * u + BRUSS_A + c * (up[:-2] - 2 * u + up[2:])
    dv = BRUSS_B * u - r + c * (vp[:-2] - 2 * v + vp[2:])
    return xp.stack([du, dv], axis=1).reshape(-1)


def brusselator_jac_np(y, alpha):
    import numpy as np

    d = y.shape[0]
    n = d // 2
    c = alpha * (n + 1) ** 2
    J = np.zeros((d, d))
    for i in range(n):
        ru, rv = 2 * i, 2 * i + 1
        u, v = y[ru], y[rv]
        J[ru, ru] = 2 * u * v - (BRUSS_B + 1) - 2 * c
        J[ru, rv] = u * u
        J[rv, ru] = BRUSS_B - 2 * u * v
        J[rv, rv] = -u * u - 2 * c
        if i > 0:
            J[ru, ru - 2] = J[rv, rv - 2] = c
        if i < n - 1:
            J[ru, ru + 2] = J[rv, rv + 2] = c
    return J


def rhs_np(name, y, q):
    """The field in numpy for trajectory parameter q (F, k1 or alpha)."""
    import numpy as np

    if name.startswith("lorenz96"):
        return lorenz96(np, y, q)
    if name == "pollution":
        return np.asarray(pollution(y, (q,) + POLL_K[1:]))
    return brusselator(np, y, q)


def jac_np(name, y, q):
    if name == "pollution":
        return pollution_jac_np(y, (q,) + POLL_K[1:])
    return brusselator_jac_np(y, q)


def reference(name, qs):
    """Final states of the sampled trajectories from scipy (see the module doc)."""
    import numpy as np
    from scipy.integrate import solve_ivp

    cfg = PROBLEMS[name]
    y0 = y0_np(name)
    out = np.empty((len(qs), cfg["d"]))
    for j, q in enumerate(qs):
        q = float(q)
        kw = {}
        if cfg["ref"] == "Radau":
            kw["jac"] = lambda t, y, q=q: jac_np(name, y, q)
        sol = solve_ivp(lambda t, y, q=q: rhs_np(name, y, q), (0.0, cfg["t1"]), y0, method=cfg["ref"],
                        rtol=cfg["ref_rtol"], atol=cfg["ref_atol"], **kw)
        if sol.status != 0:
            raise RuntimeError(f"scipy {cfg['ref']} reference of {name} failed at p = {q}: {sol.message}")
        out[j] = sol.y[:, -1]
    return out


def main(argv=None):
    args = parse_args(argv)
    names = [s.strip() for s in args.problems.split(",") if s.strip()]
    for name in names:
        if name not in PROBLEMS:
            raise SystemExit(f"--problems: unknown problem {name!r}; valid names are {', '.join(PROBLEMS)}")
    jax, env = C.setup_jax(args.platform, cpu_threads=args.cpu_threads, mem_fraction=0.9)
    import diffrax
    import jax.numpy as jnp
    import numpy as np

    out = open(args.out, "a") if args.out else None
    C.emit({"header": "diffrax_large", "env": env, "args": vars(args)}, out)

    k_rest = jnp.asarray(POLL_K[1:], dtype=jnp.float64)

    def field(name):
        if name.startswith("lorenz96"):
            return lambda t, y, F: lorenz96(jnp, y, F)
        if name == "pollution":
            return lambda t, y, k1: jnp.stack(pollution(y, jnp.concatenate([jnp.reshape(k1, (1,)), k_rest])))
        return lambda t, y, alpha: brusselator(jnp, y, alpha)

    budget = C.Budget(args.max_seconds)
    for name in names:
        cfg = PROBLEMS[name]
        term = diffrax.ODETerm(field(name))
        solver = getattr(diffrax, cfg["solver"])()
        y0 = jnp.asarray(y0_np(name), dtype=jnp.float64)
        t1 = cfg["t1"]
        ns = sorted(C.int_list(args.n)) if args.n else [cfg["n"]]

        def make(rtol, max_steps, adjoint, cfg=cfg, term=term, solver=solver, y0=y0, t1=t1):
            ctrl = diffrax.PIDController(rtol=rtol, atol=rtol * cfg["atol_over_rtol"])

            def one(q):
                return diffrax.diffeqsolve(term, solver, 0.0, t1, None, y0, args=q, saveat=diffrax.SaveAt(t1=True),
                                           stepsize_controller=ctrl, adjoint=adjoint, max_steps=max_steps,
                                           throw=False)
            return one

        def probe_fn(rtol, make=make):
            one = make(rtol, C.PROBE_MAX_STEPS, diffrax.RecursiveCheckpointAdjoint())

            def stats(q):
                sol = one(q)
                return (sol.ys[-1], sol.result == diffrax.RESULTS.successful,
                        sol.stats["num_accepted_steps"], sol.stats["num_steps"])
            return jax.jit(jax.vmap(stats))

        if name == "pollution":
            # The reference integrator against pollu.f's published y(60).
            t = time.perf_counter()
            chk = reference(name, [POLL_K[0]])[0]
            ref60 = np.asarray(POLL_REF60)
            C.log(f"pollution: scipy Radau at the default rates against pollu.f's solut: max rel diff "
                  f"{float(np.max(np.abs(chk - ref60) / ref60)):.2e} ({time.perf_counter() - t:.1f} s)")

        for n in ns:
            q_np = np.linspace(cfg["sweep"][0], cfg["sweep"][1], n)
            idx = C.subsample(n, args.ref_sample)
            ref = None
            for rtol in C.float_list(args.rtol):
                key = (name, rtol)
                cell = {"suite": "large", "problem": name, "d": cfg["d"], "solver": cfg["solver"], "n": n,
                        "rtol": rtol, "atol": rtol * cfg["atol_over_rtol"], "t1": t1,
                        "sweep": list(cfg["sweep"]), "loss": "sumsq", "platform": args.platform}
                ok, predicted, reason = budget.check(key, n, args.reps + 1)
                if not ok:
                    C.log(f"{name} n={n} rtol={rtol:g}: skipped: {reason}")
                    budget.block_key(key, f"skipped: a smaller n of {name} at rtol {rtol:g} was skipped or failed")
                    C.emit({**cell, "skipped": True, "reason": reason, "predicted_s": predicted}, out)
                    continue
                start = time.perf_counter()
                try:
                    if ref is None:
                        t = time.perf_counter()
                        ref = reference(name, q_np[idx])
                        C.log(f"{name} n={n}: scipy {cfg['ref']} reference for {len(idx)} trajectories in "
                              f"{time.perf_counter() - t:.1f} s")
                    q = jnp.asarray(q_np)
                    C.log(f"{name} n={n} rtol={rtol:g}: probe")
                    t = time.perf_counter()
                    probe = probe_fn(rtol).lower(q).compile()
                    probe_compile_s = time.perf_counter() - t
                    t = time.perf_counter()
                    yf_p, okp, acc, att = jax.block_until_ready(probe(q))
                    probe_s = time.perf_counter() - t
                    okp, acc, att = np.asarray(okp), np.asarray(acc), np.asarray(att)
                    if not okp.all():
                        raise RuntimeError(f"probe: {int((~okp).sum())} unsuccessful trajectories")
                    attempts = int(att.max())
                    max_steps, adjoint = C.sized_adjoint(diffrax, attempts)
                    one = make(rtol, max_steps, adjoint)
                    batch = jax.vmap(lambda x, one=one: one(x).ys[-1])
                    fwd = jax.jit(batch)
                    grad = jax.jit(jax.grad(lambda x, batch=batch: jnp.sum(batch(x) ** 2)))
                    res = {}
                    if not args.no_forward:
                        C.log(f"{name} n={n} rtol={rtol:g}: forward (max_steps = checkpoints = {max_steps})")
                        res["fwd"] = C.time_fn(jax, fwd, (q,), args.reps)
                    C.log(f"{name} n={n} rtol={rtol:g}: gradient")
                    res["grad"] = C.time_fn(jax, grad, (q,), args.reps)
                    yf = np.asarray(res["fwd"]["out"]) if "fwd" in res else np.asarray(yf_p)
                    g = np.asarray(res["grad"]["out"])
                    if not np.all(np.isfinite(g)):
                        raise RuntimeError("non-finite gradient")
                    if args.save_grad:
                        os.makedirs(args.save_grad, exist_ok=True)
                        np.save(os.path.join(args.save_grad, f"{name}_n{n}_rtol{rtol:g}.npy"), g)
                    row = {
                        **cell,
                        "steps_mean": float(acc.mean()), "rejected_mean": float((att - acc).mean()),
                        "attempts_max": attempts, "max_steps": max_steps, "checkpoints": max_steps,
                        "grad_ms": res["grad"]["best_ms"], "grad_ms_median": res["grad"]["median_ms"],
                        "grad_reps": res["grad"]["reps_done"], "grad_warmup_s": res["grad"]["warmup_s"],
                        "forward_ms": res["fwd"]["best_ms"] if "fwd" in res else None,
                        "forward_ms_median": res["fwd"]["median_ms"] if "fwd" in res else None,
                        "forward_warmup_s": res["fwd"]["warmup_s"] if "fwd" in res else None,
                        "probe_s": probe_s, "probe_compile_s": probe_compile_s,
                        "median_rel_err": C.median_rel_err(yf[idx], ref), "ref_sample": len(idx),
                        "ref_method": cfg["ref"],
                        "loss_value": float(np.sum(yf ** 2)), "grad_max_abs": float(np.max(np.abs(g))),
                        "cell_s": time.perf_counter() - start, "predicted_s": predicted,
                    }
                    per_call = (res["grad"]["best_ms"] + (res["fwd"]["best_ms"] if "fwd" in res else 0)) / 1e3
                    compile_s = probe_compile_s + sum(max(0.0, r["warmup_s"] - r["best_ms"] / 1e3)
                                                      for r in res.values())
                    budget.record(key, n, per_call, probe_s, compile_s)
                    fwd_ms = row["forward_ms"] if row["forward_ms"] is not None else math.nan
                    C.log(f"{name} n={n} rtol={rtol:g}: grad {row['grad_ms']:.3f} ms, forward {fwd_ms:.3f} ms, "
                          f"err {row['median_rel_err']:.2e}, steps {row['steps_mean']:.1f}")
                    C.emit(row, out)
                except Exception as exc:  # noqa: BLE001 - report the cell and go on
                    msg = f"{type(exc).__name__}: {str(exc)[:2000]}"
                    C.log(f"{name} n={n} rtol={rtol:g}: failed: {msg}")
                    budget.block_key(key, f"skipped: a smaller n of {name} at rtol {rtol:g} failed")
                    C.emit({**cell, "error": msg, "cell_s": time.perf_counter() - start}, out)
                finally:
                    gc.collect()
    if out is not None:
        out.close()


if __name__ == "__main__":
    main()
