#!/usr/bin/env python3
"""Diffrax on gradsolve's events protocol: the anchor of `gradsolve bench -suite gpu-events`.

Protocol (bench/events.go), float64, Tsit5, PIDController(rtol, atol) with
atol = rtol*1e-2, dt0=None, vmap over the trajectories:

  ball  a ball dropped from rest at h0 = linspace(0.8, 1.2, n), gravity 9.81,
        bouncing on the floor x = 0 (v -> -e*v) with e = linspace(0.9, 0.65, n),
        to T = 1.6; loss sum x(T), gradient dx(T)/de.
  pk    C' = -k*C with a clock tau' = 1, C0 = linspace(1, 2, n),
        k = linspace(0.2, 1.2, n), stopped when C falls to 0.25 (T1 = 100);
        loss sum t*, gradient dt*/dk.

Diffrax's events are terminal (diffrax.Event with optimistix.Newton as the
root finder, which makes the event time differentiable). The pk problem is
one solve. The bouncing ball is a fixed number of segments (lax.scan; the
most bounces of the ensemble by the closed form, plus one): each segment
solves from the last bounce to T and stops at the next one, where the bounce
is applied; a trajectory whose segment reached T runs the remaining
segments as discarded dummy solves of 1e-3 s (vmap runs every trajectory's
segments in lockstep anyway). The floor condition is x + max(v, 0)^2/(2g):
the apex height while rising, x while falling (C^1, positive just after a
bounce, zero only at the falling crossing), where gradsolve's is x with
Direction -1, so the restart at x = 0 does not fire at once. gradsolve
locates each event on its continuous extension and polishes it on the
step; Diffrax root-finds on its dense output: the event times agree to the
tolerances, not bit for bit.

Gradients: jax.grad with RecursiveCheckpointAdjoint, checkpoints =
max_steps = the largest attempts of one solve (a probe with max_steps =
100000) + 1, as bench/anchors/diffrax_lorenz.py. jit, one untimed warm-up,
then best and median of --reps calls with block_until_ready, the forward
(values only) and the gradient. Errors against the closed forms over all
trajectories: ball |x(T) - x| (absolute), pk |t* - t|/t; gradients
|g - g_cf| / max(1, |g_cf|); the medians are reported, with the values and
gradients of 5 evenly spaced trajectories (the rows of the Go suite list the
same ones).

Output: JSON lines on stdout (a header, then one line per problem and
rtol) and progress on stderr.

    python3 diffrax_events.py --platform gpu
    python3 diffrax_events.py --platform cpu --n 1024 --rtol 1e-6 --reps 3
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

G = 9.81
BALL_T = 1.6
PK_C, PK_T1 = 0.25, 100.0
ATOL_OVER_RTOL = 1e-2
SAMPLES = 5
DUMMY_SPAN = 1e-3
DEFAULT_N = "65536"
DEFAULT_RTOL = "1e-6,1e-8"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default=DEFAULT_N, help="comma-separated ensemble sizes (default %(default)s)")
    ap.add_argument("--rtol", default=DEFAULT_RTOL, help="comma-separated relative tolerances (default %(default)s)")
    ap.add_argument("--problems", default="ball,pk", help="comma-separated problems: ball, pk (default %(default)s)")
    ap.add_argument("--platform", choices=["cpu", "gpu"], default="gpu")
    ap.add_argument("--cpu-threads", type=int, default=0, help="CPU platform: use only the first N CPUs (0: all)")
    ap.add_argument("--reps", type=int, default=5, help="timed calls after the warm-up (best and median reported)")
    ap.add_argument("--newton-tol", type=float, default=1e-12, help="rtol = atol of optimistix.Newton (default %(default)g)")
    ap.add_argument("--out", default="", help="also append the JSON lines to this file")
    return ap.parse_args(argv)


def ball_closed(h0, e, T=BALL_T):
    """Height at T of a ball dropped from h0 at rest with restitution e, d/de of it, bounces before T."""
    U = math.sqrt(2 * G * h0)
    tn = math.sqrt(2 * h0 / G)
    if T < tn:
        return h0 - G * T * T / 2, 0.0, 0
    dtn, u, du, n = 0.0, 0.0, 0.0, 0
    for k in range(1, 1000):
        u, du = e**k * U, k * e ** (k - 1) * U
        nxt = tn + 2 * u / G
        if nxt > T:
            n = k
            break
        tn, dtn = nxt, dtn + 2 * du / G
    tau = T - tn
    return u * tau - G * tau * tau / 2, du * tau + (u - G * tau) * (-dtn), n


def main(argv=None):
    args = parse_args(argv)
    jax, env = C.setup_jax(args.platform, cpu_threads=args.cpu_threads, mem_fraction=0.9)
    import diffrax
    import jax.numpy as jnp
    import numpy as np
    import optimistix as optx

    env["optimistix"] = C._version("optimistix")
    out = open(args.out, "a") if args.out else None
    C.emit({"header": "diffrax_events", "env": env, "args": vars(args)}, out)

    solver = diffrax.Tsit5()
    newton = optx.Newton(rtol=args.newton_tol, atol=args.newton_tol)
    saveat = diffrax.SaveAt(t1=True)

    # --- the bouncing ball ---------------------------------------------------
    ball_term = diffrax.ODETerm(lambda t, y, e: jnp.stack([y[1], jnp.full_like(y[1], -G)]))
    # diffrax calls an Event's condition with keywords (t=, y=, args=, ...).
    ball_event = diffrax.Event(lambda t, y, args, **kw: y[0] + jnp.maximum(y[1], 0.0) ** 2 / (2 * G), newton)

    def ball_fns(rtol, segments, max_steps, adjoint):
        ctrl = diffrax.PIDController(rtol=rtol, atol=rtol * ATOL_OVER_RTOL)

        def one(h0, e):
            def seg(carry, _):
                t, y, done, bounces, steps, attempts = carry
                t1 = jnp.where(done, t + DUMMY_SPAN, BALL_T)
                sol = diffrax.diffeqsolve(ball_term, solver, t, t1, None, y, args=e, saveat=saveat,
                                          stepsize_controller=ctrl, event=ball_event, adjoint=adjoint,
                                          max_steps=max_steps, throw=False)
                te, ye = sol.ts[-1], sol.ys[-1]
                hit = te < t1
                bounced = jnp.stack([ye[0], -e * ye[1]])
                ynew = jnp.where(done, y, jnp.where(hit, bounced, ye))
                tnew = jnp.where(done, t, te)
                live = jnp.logical_not(done)
                bounces = bounces + jnp.where(live & hit, 1, 0)
                steps = steps + jnp.where(live, sol.stats["num_accepted_steps"], 0)
                attempts = jnp.maximum(attempts, sol.stats["num_steps"])
                done = done | jnp.logical_not(hit)
                return (tnew, ynew, done, bounces, steps, attempts), None

            init = (jnp.asarray(0.0), jnp.stack([h0, jnp.zeros_like(h0)]), jnp.asarray(False),
                    jnp.asarray(0), jnp.asarray(0), jnp.asarray(0))
            (t, y, done, bounces, steps, attempts), _ = jax.lax.scan(seg, init, None, length=segments)
            return y[0], t, bounces, steps, attempts

        batch = jax.vmap(one)
        stats = jax.jit(batch)
        fwd = jax.jit(lambda h0, e: batch(h0, e)[0])
        grad = jax.jit(jax.grad(lambda e, h0: jnp.sum(batch(h0, e)[0])))
        return stats, fwd, lambda h0, e: grad(e, h0)

    # --- the pharmacokinetic threshold ---------------------------------------
    pk_term = diffrax.ODETerm(lambda t, y, k: jnp.stack([-k * y[0], jnp.ones_like(y[0])]))
    pk_event = diffrax.Event(lambda t, y, args, **kw: y[0] - PK_C, newton)

    def pk_fns(rtol, max_steps, adjoint):
        ctrl = diffrax.PIDController(rtol=rtol, atol=rtol * ATOL_OVER_RTOL)

        def one(c0, k):
            sol = diffrax.diffeqsolve(pk_term, solver, 0.0, PK_T1, None, jnp.stack([c0, jnp.zeros_like(c0)]), args=k,
                                      saveat=saveat, stepsize_controller=ctrl, event=pk_event, adjoint=adjoint,
                                      max_steps=max_steps, throw=False)
            hit = sol.ts[-1] < PK_T1
            return sol.ts[-1], hit, sol.stats["num_accepted_steps"], sol.stats["num_steps"]

        batch = jax.vmap(one)
        stats = jax.jit(lambda c0, k: batch(c0, k))
        fwd = jax.jit(lambda c0, k: batch(c0, k)[0])
        grad = jax.jit(jax.grad(lambda k, c0: jnp.sum(batch(c0, k)[0])))
        return stats, fwd, lambda c0, k: grad(k, c0)

    problems = [p.strip() for p in args.problems.split(",") if p.strip()]
    for n in sorted(C.int_list(args.n)):
        idx = C.subsample(n, SAMPLES)
        for rtol in C.float_list(args.rtol):
            for prob in problems:
                cell = {"problem": prob, "n": n, "rtol": rtol, "atol": rtol * ATOL_OVER_RTOL, "platform": args.platform}
                start = time.perf_counter()
                try:
                    if prob == "ball":
                        a_np, b_np = np.linspace(0.8, 1.2, n), np.linspace(0.9, 0.65, n)
                        closed = [ball_closed(h, e) for h, e in zip(a_np, b_np)]
                        segments = max(c[2] for c in closed) + 1
                        cell["segments"] = segments
                        make = lambda ms, adj: ball_fns(rtol, segments, ms, adj)  # noqa: E731
                    elif prob == "pk":
                        a_np, b_np = np.linspace(1.0, 2.0, n), np.linspace(0.2, 1.2, n)
                        ts = np.log(a_np / PK_C) / b_np
                        closed = [(t, -t / k, 1) for t, k in zip(ts, b_np)]
                        make = lambda ms, adj: pk_fns(rtol, ms, adj)  # noqa: E731
                    else:
                        raise ValueError(f"unknown problem {prob!r}: want ball or pk")
                    a, b = jnp.asarray(a_np), jnp.asarray(b_np)
                    # Probe: the largest attempts of one solve sizes the adjoint.
                    C.log(f"{prob} n={n} rtol={rtol:g}: probe (max_steps {C.PROBE_MAX_STEPS})")
                    stats, _, _ = make(C.PROBE_MAX_STEPS, diffrax.RecursiveCheckpointAdjoint())
                    st = [np.asarray(x) for x in jax.block_until_ready(stats(a, b))]
                    if prob == "ball":
                        events, steps, attempts = st[2], st[3], int(st[4].max())
                    else:
                        events, steps, attempts = st[1].astype(int), st[2], int(st[3].max())
                    max_steps, adjoint = C.sized_adjoint(diffrax, attempts)
                    _, fwd, grad = make(max_steps, adjoint)
                    C.log(f"{prob} n={n} rtol={rtol:g}: forward and gradient (max_steps = checkpoints = {max_steps})")
                    rf = C.time_fn(jax, fwd, (a, b), args.reps)
                    rg = C.time_fn(jax, grad, (a, b), args.reps)
                    vals, grads = np.asarray(rf["out"]), np.asarray(rg["out"])
                    cf_v = np.array([c[0] for c in closed])
                    cf_g = np.array([c[1] for c in closed])
                    verr = np.abs(vals - cf_v) if prob == "ball" else np.abs(vals - cf_v) / np.abs(cf_v)
                    gerr = np.abs(grads - cf_g) / np.maximum(1.0, np.abs(cf_g))
                    want_events = np.array([c[2] for c in closed])
                    row = {
                        **cell,
                        "steps_per_traj": float(steps.mean()), "events_per_traj": float(events.mean()),
                        "events_differ": int(np.sum(events != want_events)),
                        "attempts_max": attempts, "max_steps": max_steps, "checkpoints": max_steps,
                        "forward_ms": rf["best_ms"], "forward_ms_median": rf["median_ms"],
                        "grad_ms": rg["best_ms"], "grad_ms_median": rg["median_ms"],
                        "forward_warmup_s": rf["warmup_s"], "grad_warmup_s": rg["warmup_s"],
                        "median_value_err": float(np.median(verr)), "median_grad_err": float(np.median(gerr)),
                        "max_value_err": float(np.max(verr)), "max_grad_err": float(np.max(gerr)),
                        "samples": idx, "values": vals[idx], "grads": grads[idx],
                        "loss": float(np.sum(vals)), "finite": bool(np.all(np.isfinite(grads))),
                        "cell_s": time.perf_counter() - start,
                    }
                    C.log(f"{prob} n={n} rtol={rtol:g}: grad {row['grad_ms']:.3f} ms, forward {row['forward_ms']:.3f} ms, "
                          f"value err {row['median_value_err']:.2e}, grad err {row['median_grad_err']:.2e}")
                    C.emit(row, out)
                except Exception as exc:  # noqa: BLE001 - report the cell and go on
                    C.log(f"{prob} n={n} rtol={rtol:g}: failed: {type(exc).__name__}: {exc}")
                    C.emit({**cell, "error": f"{type(exc).__name__}: {exc}"[:2000]}, out)


if __name__ == "__main__":
    main()
