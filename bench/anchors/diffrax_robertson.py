#!/usr/bin/env python3
"""Diffrax's Kvaerno5 on the Robertson ensemble: the stiff anchor of the CUDA engine's benchmark.

Protocol: Robertson's kinetics (REFERENCE.md 5.5, states numbered from 1 as
there)

    y1' = -k1*y1 + k3*y2*y3,  y2' = k1*y1 - k3*y2*y3 - k2*y2^2,  y3' = k2*y2^2

with k = (k1, 3e7, 1e4), k1 = linspace(0.02, 0.06, n) (one per trajectory),
y0 = (1, 0, 0), t in [0, 1e4], float64, atol = rtol*1e-4. Loss sum_i y1_i(T)
(component 0; --loss-component changes it), gradient with respect to every k1.
Diffrax: Kvaerno5 (its default root finder, tolerances from the controller),
PIDController(rtol, atol) (I control unless --pcoeff/--icoeff say otherwise),
dt0=None, SaveAt(t1=True), throw=False, vmap over the trajectories,
RecursiveCheckpointAdjoint with checkpoints = max_steps = attempts + 1 from a
probe solve. jit, one warm-up, best and median of --reps with
block_until_ready; forward solve timed alike. Achieved error: median relative
error ||y - y_ref|| / ||y_ref|| of the final state against scipy's LSODA (or
--ref-method) at rtol 1e-12, atol 1e-20, on an evenly spaced subsample of at
most --ref-sample trajectories, cross-checked on the first and last sampled
trajectories against scipy's Radau with the analytic Jacobian at the same
tolerances (agreement ~5e-12; Radau takes seconds per trajectory at this
tolerance, LSODA tens of milliseconds). Run several tolerances to compare at
matched achieved error.

    python3 diffrax_robertson.py --platform gpu --n 2048 --rtol 1e-4,1e-5,1e-6,1e-7,1e-8
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

K2, K3 = 3e7, 1e4
K1_LO, K1_HI = 0.02, 0.06
Y0 = (1.0, 0.0, 0.0)
T0, T1 = 0.0, 1e4
ATOL_OVER_RTOL = 1e-4
REF_RTOL, REF_ATOL = 1e-12, 1e-20


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="2048", help="comma-separated ensemble sizes (default %(default)s)")
    ap.add_argument("--rtol", default="1e-4,1e-5,1e-6,1e-7,1e-8", help="comma-separated relative tolerances")
    ap.add_argument("--t1", type=float, default=T1, help="end time (default %(default)g)")
    ap.add_argument("--loss-component", type=int, default=0, help="loss sum_i y_i[c](T) (default c = 0, y1)")
    ap.add_argument("--pcoeff", type=float, default=0.0, help="PIDController pcoeff (default 0)")
    ap.add_argument("--icoeff", type=float, default=1.0, help="PIDController icoeff (default 1)")
    ap.add_argument("--platform", choices=["cpu", "gpu"], default="gpu")
    ap.add_argument("--cpu-threads", type=int, default=0, help="CPU platform: use only the first N CPUs (0: all)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=600.0,
                    help="skip a cell whose predicted wall time exceeds this; 0 disables the check")
    ap.add_argument("--ref-sample", type=int, default=64, help="most trajectories of the scipy reference")
    ap.add_argument("--ref-method", default="LSODA", choices=["Radau", "BDF", "LSODA"])
    ap.add_argument("--ref-crosscheck", type=int, default=2,
                    help="trajectories (first and last of the sample, ...) also solved with Radau to check the "
                         "reference; 0 skips (default %(default)s)")
    ap.add_argument("--no-forward", action="store_true", help="time the gradient only")
    ap.add_argument("--out", default="", help="also append the JSON lines to this file")
    ap.add_argument("--save-grad", default="", help="directory for dL/dk1 of every cell as .npy")
    return ap.parse_args(argv)


def rhs_np(y, k1):
    return [-k1 * y[0] + K3 * y[1] * y[2],
            k1 * y[0] - K3 * y[1] * y[2] - K2 * y[1] ** 2,
            K2 * y[1] ** 2]


def jac_np(y, k1):
    return [[-k1, K3 * y[2], K3 * y[1]],
            [k1, -K3 * y[2] - 2 * K2 * y[1], -K3 * y[1]],
            [0.0, 2 * K2 * y[1], 0.0]]


def reference(k1_sample, t1, method):
    """Final states from scipy's method at rtol 1e-12, atol 1e-20 (analytic Jacobian unless LSODA)."""
    import numpy as np
    from scipy.integrate import solve_ivp

    out = np.empty((len(k1_sample), 3))
    for k, k1 in enumerate(k1_sample):
        k1 = float(k1)
        kw = {} if method == "LSODA" else {"jac": lambda t, y, k1=k1: jac_np(y, k1)}
        sol = solve_ivp(lambda t, y: rhs_np(y, k1), (T0, t1), list(Y0), method=method,
                        rtol=REF_RTOL, atol=REF_ATOL, **kw)
        if sol.status != 0:
            raise RuntimeError(f"scipy {method} reference failed at k1={k1}: {sol.message}")
        out[k] = sol.y[:, -1]
    return out


def main(argv=None):
    args = parse_args(argv)
    jax, env = C.setup_jax(args.platform, cpu_threads=args.cpu_threads, mem_fraction=0.9)
    import diffrax
    import jax.numpy as jnp
    import numpy as np

    out = open(args.out, "a") if args.out else None
    C.emit({"header": "diffrax_robertson", "env": env, "args": vars(args)}, out)

    term = diffrax.ODETerm(lambda t, y, k1: jnp.stack([
        -k1 * y[0] + K3 * y[1] * y[2],
        k1 * y[0] - K3 * y[1] * y[2] - K2 * y[1] ** 2,
        K2 * y[1] ** 2,
    ]))
    solver = diffrax.Kvaerno5()
    y0 = jnp.asarray(Y0, dtype=jnp.float64)
    c = args.loss_component

    def make(rtol, max_steps, adjoint):
        ctrl = diffrax.PIDController(rtol=rtol, atol=rtol * ATOL_OVER_RTOL, pcoeff=args.pcoeff, icoeff=args.icoeff)

        def one(k1):
            return diffrax.diffeqsolve(term, solver, T0, args.t1, None, y0, args=k1, saveat=diffrax.SaveAt(t1=True),
                                       stepsize_controller=ctrl, adjoint=adjoint, max_steps=max_steps, throw=False)
        return one

    def probe_fn(rtol):
        one = make(rtol, C.PROBE_MAX_STEPS, diffrax.RecursiveCheckpointAdjoint())

        def stats(k1):
            sol = one(k1)
            return (sol.ys[-1], sol.result == diffrax.RESULTS.successful,
                    sol.stats["num_accepted_steps"], sol.stats["num_steps"])
        return jax.jit(jax.vmap(stats))

    budget = C.Budget(args.max_seconds)
    for n in sorted(C.int_list(args.n)):
        k1_np = np.linspace(K1_LO, K1_HI, n)
        idx = C.subsample(n, args.ref_sample)
        ref, ref_check = None, None
        for rtol in C.float_list(args.rtol):
            cell = {"suite": "robertson", "solver": "Kvaerno5", "n": n, "rtol": rtol, "atol": rtol * ATOL_OVER_RTOL,
                    "t1": args.t1, "pcoeff": args.pcoeff, "icoeff": args.icoeff, "platform": args.platform}
            ok, predicted, reason = budget.check(rtol, n, args.reps + 1)
            if not ok:
                C.log(f"n={n} rtol={rtol:g}: skipped: {reason}")
                budget.block_key(rtol, f"skipped: a smaller n at rtol {rtol:g} was skipped or failed")
                C.emit({**cell, "skipped": True, "reason": reason, "predicted_s": predicted}, out)
                continue
            start = time.perf_counter()
            try:
                if ref is None:
                    t = time.perf_counter()
                    ref = reference(k1_np[idx], args.t1, args.ref_method)
                    C.log(f"n={n}: scipy {args.ref_method} reference for {len(idx)} trajectories in "
                          f"{time.perf_counter() - t:.1f} s")
                    if args.ref_crosscheck > 0 and args.ref_method != "Radau":
                        sel = C.subsample(len(idx), args.ref_crosscheck)
                        t = time.perf_counter()
                        radau = reference(k1_np[[idx[j] for j in sel]], args.t1, "Radau")
                        ref_check = float(np.max([C.median_rel_err(radau[k:k + 1], ref[j:j + 1])
                                                  for k, j in enumerate(sel)]))
                        C.log(f"n={n}: Radau cross-check on {len(sel)} trajectories: max rel diff {ref_check:.2e} "
                              f"({time.perf_counter() - t:.1f} s)")
                k1 = jnp.asarray(k1_np)
                C.log(f"n={n} rtol={rtol:g}: probe")
                t = time.perf_counter()
                probe = probe_fn(rtol).lower(k1).compile()
                probe_compile_s = time.perf_counter() - t
                t = time.perf_counter()
                yf_p, okp, acc, att = jax.block_until_ready(probe(k1))
                probe_s = time.perf_counter() - t
                okp, acc, att = np.asarray(okp), np.asarray(acc), np.asarray(att)
                if not okp.all():
                    raise RuntimeError(f"probe: {int((~okp).sum())} unsuccessful trajectories")
                attempts = int(att.max())
                max_steps, adjoint = C.sized_adjoint(diffrax, attempts)
                one = make(rtol, max_steps, adjoint)
                batch = jax.vmap(lambda k: one(k).ys[-1])
                fwd = jax.jit(batch)
                grad = jax.jit(jax.grad(lambda k: jnp.sum(batch(k)[:, c])))
                res = {}
                if not args.no_forward:
                    C.log(f"n={n} rtol={rtol:g}: forward (max_steps = checkpoints = {max_steps})")
                    res["fwd"] = C.time_fn(jax, fwd, (k1,), args.reps)
                C.log(f"n={n} rtol={rtol:g}: gradient")
                res["grad"] = C.time_fn(jax, grad, (k1,), args.reps)
                yf = np.asarray(res["fwd"]["out"]) if "fwd" in res else np.asarray(yf_p)
                g = np.asarray(res["grad"]["out"])
                if not np.all(np.isfinite(g)):
                    raise RuntimeError("non-finite gradient")
                if args.save_grad:
                    os.makedirs(args.save_grad, exist_ok=True)
                    np.save(os.path.join(args.save_grad, f"robertson_n{n}_rtol{rtol:g}.npy"), g)
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
                    "ref_method": args.ref_method, "ref_crosscheck_max_rel_diff": ref_check,
                    "loss": float(np.sum(yf[:, c])), "grad_max_abs": float(np.max(np.abs(g))),
                    "cell_s": time.perf_counter() - start, "predicted_s": predicted,
                }
                per_call = (res["grad"]["best_ms"] + (res["fwd"]["best_ms"] if "fwd" in res else 0)) / 1e3
                compile_s = probe_compile_s + sum(max(0.0, r["warmup_s"] - r["best_ms"] / 1e3) for r in res.values())
                budget.record(rtol, n, per_call, probe_s, compile_s)
                fwd_ms = row["forward_ms"] if row["forward_ms"] is not None else float("nan")
                C.log(f"n={n} rtol={rtol:g}: grad {row['grad_ms']:.3f} ms, forward {fwd_ms:.3f} ms, "
                      f"err {row['median_rel_err']:.2e}, steps {row['steps_mean']:.1f}")
                C.emit(row, out)
            except Exception as exc:  # noqa: BLE001 - report the cell and go on
                msg = f"{type(exc).__name__}: {str(exc)[:2000]}"
                C.log(f"n={n} rtol={rtol:g}: failed: {msg}")
                budget.block_key(rtol, f"skipped: a smaller n at rtol {rtol:g} failed")
                C.emit({**cell, "error": msg, "cell_s": time.perf_counter() - start}, out)
            finally:
                gc.collect()
    if out is not None:
        out.close()


if __name__ == "__main__":
    main()
