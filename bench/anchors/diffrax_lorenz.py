#!/usr/bin/env python3
"""Diffrax on gradsolve's Lorenz protocol: the anchor of `gradsolve bench -suite lorenz`.

Protocol (REFERENCE.md 5.1, the GPU grid of the CUDA engine's benchmark):
Lorenz with sigma = 10, beta = 8/3, rho = linspace(0, 21, n) (one per
trajectory), y0 = (1, 0, 0), t in [0, 1], float64. Loss sum(y_final**2),
gradient with respect to every rho. Diffrax: Tsit5, PIDController(rtol, atol)
with atol = rtol*1e-3 (its defaults otherwise: I control), dt0=None,
SaveAt(t1=True), throw=False, vmap over the trajectories (each trajectory its
own steps), RecursiveCheckpointAdjoint with checkpoints = max_steps =
attempts + 1, where attempts (accepted + rejected steps, the largest over the
trajectories) comes from a probe solve with max_steps = 100000. jit, one
untimed warm-up, then the best (and median) of --reps calls with
block_until_ready; the forward solve (same settings, no gradient) is timed the
same way. The achieved error is the median relative error ||y - y_ref|| /
||y_ref|| of y_final against scipy's DOP853 at rtol 1e-11, atol 1e-12 on an
evenly spaced subsample of at most --ref-sample trajectories.

Output: JSON lines on stdout (a header with the environment, then one line
per (n, rtol) cell; cells predicted to exceed --max-seconds are reported as
skipped, failures as errors) and progress on stderr.

    python3 diffrax_lorenz.py --platform gpu
    python3 diffrax_lorenz.py --platform cpu --n 128,2048 --rtol 1e-6 --reps 5
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

SIGMA, BETA = 10.0, 8.0 / 3.0
T0, T1 = 0.0, 1.0
Y0 = (1.0, 0.0, 0.0)
ATOL_OVER_RTOL = 1e-3
REF_RTOL, REF_ATOL = 1e-11, 1e-12
DEFAULT_N = "128,2048,32768,262144,1048576"
DEFAULT_RTOL = "1e-4,1e-6,1e-8"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default=DEFAULT_N, help="comma-separated ensemble sizes (default %(default)s)")
    ap.add_argument("--rtol", default=DEFAULT_RTOL, help="comma-separated relative tolerances (default %(default)s)")
    ap.add_argument("--platform", choices=["cpu", "gpu"], default="gpu")
    ap.add_argument("--cpu-threads", type=int, default=0, help="CPU platform: use only the first N CPUs (0: all)")
    ap.add_argument("--reps", type=int, default=5, help="timed calls after the warm-up (best and median reported)")
    ap.add_argument("--max-seconds", type=float, default=600.0,
                    help="skip a cell whose predicted wall time (probe, compiles, warm-ups, reps of forward and "
                         "gradient) exceeds this; 0 disables the check (default %(default)s)")
    ap.add_argument("--ref-sample", type=int, default=512, help="most trajectories of the scipy reference")
    ap.add_argument("--no-forward", action="store_true", help="time the gradient only")
    ap.add_argument("--out", default="", help="also append the JSON lines to this file")
    ap.add_argument("--save-grad", default="", help="directory for dL/drho of every cell as .npy")
    return ap.parse_args(argv)


def reference(rho_sample):
    """Final states from scipy DOP853 (rtol 1e-11, atol 1e-12), one trajectory at a time."""
    import numpy as np
    from scipy.integrate import solve_ivp

    def f(t, y, rho):
        return [SIGMA * (y[1] - y[0]), y[0] * (rho - y[2]) - y[1], y[0] * y[1] - BETA * y[2]]

    out = np.empty((len(rho_sample), 3))
    for k, rho in enumerate(rho_sample):
        sol = solve_ivp(f, (T0, T1), list(Y0), method="DOP853", rtol=REF_RTOL, atol=REF_ATOL, args=(float(rho),))
        if sol.status != 0:
            raise RuntimeError(f"scipy reference failed at rho={rho}: {sol.message}")
        out[k] = sol.y[:, -1]
    return out


def main(argv=None):
    args = parse_args(argv)
    jax, env = C.setup_jax(args.platform, cpu_threads=args.cpu_threads, mem_fraction=0.9)
    import diffrax
    import jax.numpy as jnp
    import numpy as np

    out = open(args.out, "a") if args.out else None
    C.emit({"header": "diffrax_lorenz", "env": env, "args": vars(args)}, out)

    term = diffrax.ODETerm(lambda t, y, rho: jnp.stack([
        SIGMA * (y[1] - y[0]),
        y[0] * (rho - y[2]) - y[1],
        y[0] * y[1] - BETA * y[2],
    ]))
    solver = diffrax.Tsit5()
    y0 = jnp.asarray(Y0, dtype=jnp.float64)

    def make(rtol, max_steps, adjoint):
        ctrl = diffrax.PIDController(rtol=rtol, atol=rtol * ATOL_OVER_RTOL)

        def one(rho):
            return diffrax.diffeqsolve(term, solver, T0, T1, None, y0, args=rho, saveat=diffrax.SaveAt(t1=True),
                                       stepsize_controller=ctrl, adjoint=adjoint, max_steps=max_steps, throw=False)
        return one

    def probe_fn(rtol):
        one = make(rtol, C.PROBE_MAX_STEPS, diffrax.RecursiveCheckpointAdjoint())

        def stats(rho):
            sol = one(rho)
            return (sol.ys[-1], sol.result == diffrax.RESULTS.successful,
                    sol.stats["num_accepted_steps"], sol.stats["num_steps"])
        return jax.jit(jax.vmap(stats))

    ns = C.int_list(args.n)
    rtols = C.float_list(args.rtol)
    budget = C.Budget(args.max_seconds)

    def left(start):
        """Seconds of the cell budget left (None: no budget), at least 1."""
        if not args.max_seconds:
            return None
        return max(1.0, args.max_seconds - (time.perf_counter() - start))
    calls_per_fn = args.reps + 1
    for n in sorted(ns):
        rho_np = np.linspace(0.0, 21.0, n)
        idx = C.subsample(n, args.ref_sample)
        ref = None
        for rtol in rtols:
            cell = {"suite": "lorenz", "n": n, "rtol": rtol, "atol": rtol * ATOL_OVER_RTOL, "platform": args.platform}
            ok, predicted, reason = budget.check(rtol, n, calls_per_fn)
            if not ok:
                C.log(f"n={n} rtol={rtol:g}: skipped: {reason}")
                budget.block_key(rtol, f"skipped: a smaller n at rtol {rtol:g} was skipped or failed")
                C.emit({**cell, "skipped": True, "reason": reason, "predicted_s": predicted}, out)
                continue
            cell_start = time.perf_counter()
            try:
                if ref is None:
                    t = time.perf_counter()
                    ref = reference(rho_np[idx])
                    C.log(f"n={n}: scipy DOP853 reference for {len(idx)} trajectories "
                          f"in {time.perf_counter() - t:.1f} s")
                rho = jnp.asarray(rho_np)
                C.log(f"n={n} rtol={rtol:g}: probe (max_steps {C.PROBE_MAX_STEPS})")
                t = time.perf_counter()
                probe = probe_fn(rtol).lower(rho).compile()
                probe_compile_s = time.perf_counter() - t
                t = time.perf_counter()
                yf_p, okp, acc, att = jax.block_until_ready(probe(rho))
                probe_s = time.perf_counter() - t
                okp, acc, att = np.asarray(okp), np.asarray(acc), np.asarray(att)
                if not okp.all():
                    raise RuntimeError(f"probe: {int((~okp).sum())} unsuccessful trajectories")
                attempts = int(att.max())
                max_steps, adjoint = C.sized_adjoint(diffrax, attempts)
                one = make(rtol, max_steps, adjoint)
                batch = jax.vmap(lambda r: one(r).ys[-1])
                fwd = jax.jit(batch)
                grad = jax.jit(jax.grad(lambda r: jnp.sum(batch(r) ** 2)))
                remaining = left(cell_start)
                res = {}
                if not args.no_forward:
                    C.log(f"n={n} rtol={rtol:g}: forward (max_steps = checkpoints = {max_steps})")
                    res["fwd"] = C.time_fn(jax, fwd, (rho,), args.reps, budget_s=remaining and remaining / 3)
                C.log(f"n={n} rtol={rtol:g}: gradient")
                remaining = left(cell_start)
                res["grad"] = C.time_fn(jax, grad, (rho,), args.reps, budget_s=remaining)
                yf = np.asarray(res["fwd"]["out"]) if "fwd" in res else np.asarray(yf_p)
                if not np.allclose(yf, np.asarray(yf_p), rtol=1e-6, atol=1e-12):
                    raise RuntimeError("the sized solve's final states differ from the probe's")
                g = np.asarray(res["grad"]["out"])
                if not np.all(np.isfinite(g)):
                    raise RuntimeError("non-finite gradient")
                if args.save_grad:
                    os.makedirs(args.save_grad, exist_ok=True)
                    np.save(os.path.join(args.save_grad, f"lorenz_n{n}_rtol{rtol:g}.npy"), g)
                row = {
                    **cell,
                    "steps_mean": float(acc.mean()), "rejected_mean": float((att - acc).mean()),
                    "attempts_max": attempts, "max_steps": max_steps, "checkpoints": max_steps,
                    "grad_ms": res["grad"]["best_ms"], "grad_ms_median": res["grad"]["median_ms"],
                    "grad_reps": res["grad"]["reps_done"], "grad_warmup_s": res["grad"]["warmup_s"],
                    "forward_ms": res["fwd"]["best_ms"] if "fwd" in res else None,
                    "forward_ms_median": res["fwd"]["median_ms"] if "fwd" in res else None,
                    "forward_reps": res["fwd"]["reps_done"] if "fwd" in res else None,
                    "forward_warmup_s": res["fwd"]["warmup_s"] if "fwd" in res else None,
                    "probe_s": probe_s, "probe_compile_s": probe_compile_s,
                    "median_rel_err": C.median_rel_err(yf[idx], ref), "ref_sample": len(idx),
                    "loss": float(np.sum(yf**2)), "grad_max_abs": float(np.max(np.abs(g))),
                    "cell_s": time.perf_counter() - cell_start, "predicted_s": predicted,
                }
                per_call = (res["grad"]["best_ms"] + (res["fwd"]["best_ms"] if "fwd" in res else 0)) / 1e3
                compile_s = probe_compile_s + max(0.0, res["grad"]["warmup_s"] - res["grad"]["best_ms"] / 1e3) + (
                    max(0.0, res["fwd"]["warmup_s"] - res["fwd"]["best_ms"] / 1e3) if "fwd" in res else 0.0)
                budget.record(rtol, n, per_call, probe_s, compile_s)
                fwd_ms = row["forward_ms"] if row["forward_ms"] is not None else float("nan")
                C.log(f"n={n} rtol={rtol:g}: grad {row['grad_ms']:.3f} ms, forward {fwd_ms:.3f} ms, "
                      f"err {row['median_rel_err']:.2e}, steps {row['steps_mean']:.1f}, cell {row['cell_s']:.1f} s")
                C.emit(row, out)
            except Exception as exc:  # noqa: BLE001 - report the cell and go on
                msg = f"{type(exc).__name__}: {str(exc)[:2000]}"
                C.log(f"n={n} rtol={rtol:g}: failed: {msg}")
                budget.block_key(rtol, f"skipped: a smaller n at rtol {rtol:g} failed")
                C.emit({**cell, "error": msg, "cell_s": time.perf_counter() - cell_start}, out)
            finally:
                gc.collect()
                try:
                    jax.clear_caches()
                except Exception:  # noqa: BLE001
                    pass
    if out is not None:
        out.close()


if __name__ == "__main__":
    main()
