#!/usr/bin/env python3
"""Diffrax + optax training steps: the anchor of `gradsolve bench -suite train` and `-suite gpu-train`.

The problems come from the JSON file that

    gradsolve bench -suite gpu-train -dump train.json

writes (bench.TrainDump): the neural protocol's starting weights, initial
states and targets (a batch of size B is the first B rows), and, for every
Lorenz calibration, its targets y(1) at rho* = linspace(5, 20, n); the
tolerances, learning rates, the number of steps every fit ran and
gradsolve's losses.

Two protocols, each a jitted train step (params, opt_state) -> (params,
opt_state, loss) with block_until_ready and the loss read back every step,
as a training loop does:

* neural: y' = MLP(y) with the dump's 2-32-32-2 tanh network, loss mean_i
  |y_i(t1) - target_i|^2, one optax.adam(lr) over the flat weight vector
  (gradsolve's nn.MLP layout);
* lorenz-fit: n independent calibrations of rho, y0 = (1, 0, 0), t in [0, 1],
  loss sum_i |y_i(1) - target_i|^2 with rho a parameter vector of length n
  (rho_i moves trajectory i alone, and Adam works elementwise, so one Adam
  over the vector is n independent Adams), start rho = 10;
* pk-fit: n independent calibrations of the elimination rate k of the
  one-compartment model C' = -k*C with a clock tau' = 1, y0 = (C0, 0),
  C0 = linspace(1, 2, n), stopped by a terminal event when C falls to 0.25
  (diffrax.Event with optimistix.Newton, which makes the event time
  differentiable; T1 = 100), loss sum_i (tau_i(end) - t*_i)^2 against the
  dump's closed-form crossing times, start k = 0.7.

Diffrax: Tsit5, PIDController(rtol, atol) of the dump (I control), dt0=None,
SaveAt(t1=True), throw=False, vmap over the batch, RecursiveCheckpointAdjoint
with checkpoints = max_steps = attempts + 1 + margin, where attempts
(accepted + rejected steps, the largest over the batch) comes from a probe
solve at the starting values and margin = max(4, attempts // 4) leaves room
for the steps to grow as the parameters move; every step reports how many
trajectories did not finish (must be 0). The fit runs the dump's number of
steps (a warm-up, which compiles and is step 1, then the timed ones), so the
losses at the last step and after it compare with gradsolve's
(loss_first_rel_diff, loss_first_agrees at 1e-8). The two libraries'
controllers differ (see README.md), so at rtol 1e-6 the losses differ at the
level of the local error; the step-1 loss is also solved at the dump's tight
tolerances (rtol 1e-12, atol 1e-14; untimed, max_steps 100000) on both
sides, and those must agree to 1e-8 (loss_tight_rel_diff, same_problem).

    python3 diffrax_train.py --problem train.json --platform gpu
    python3 diffrax_train.py --problem train.json --platform cpu --b 256 --fits 2048
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

SIGMA_DEFAULT, BETA_DEFAULT = 10.0, 8.0 / 3.0


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", required=True, help="JSON file written by gradsolve bench -suite train|gpu-train -dump")
    ap.add_argument("--protocols", default="neural,lorenz-fit,pk-fit",
                    help="comma-separated: neural, lorenz-fit, pk-fit (default all three)")
    ap.add_argument("--b", default="", help="neural batch sizes (default: those gradsolve ran, from the dump)")
    ap.add_argument("--fits", default="", help="Lorenz and PK calibration sizes (default: those of the dump)")
    ap.add_argument("--platform", choices=["cpu", "gpu"], default="gpu")
    ap.add_argument("--cpu-threads", type=int, default=0, help="CPU platform: use only the first N CPUs (0: all)")
    ap.add_argument("--steps", type=int, default=0,
                    help="optimiser steps per fit, the first untimed (default: the dump's, as gradsolve ran)")
    ap.add_argument("--reps", type=int, default=0, help="timed steps (overrides --steps: steps = reps + 1)")
    ap.add_argument("--max-seconds", type=float, default=600.0,
                    help="skip a cell whose predicted wall time exceeds this; 0 disables the check (default %(default)s)")
    ap.add_argument("--no-donate", action="store_true", help="do not donate the parameter buffers to the jitted step")
    ap.add_argument("--out", default="", help="also append the JSON lines to this file")
    return ap.parse_args(argv)


def make_mlp(jnp, sizes, hidden, output):
    """MLP(w, y) in plain jax.numpy; w is the flat weight vector in gradsolve's nn.MLP layout."""
    layers = []
    off = 0
    for k in range(len(sizes) - 1):
        fan_in, fan_out = sizes[k], sizes[k + 1]
        act = hidden if k < len(sizes) - 2 else output
        layers.append((off, fan_in, fan_out, act))
        off += fan_in * fan_out + fan_out

    def mlp(w, y):
        x = y
        for off, fan_in, fan_out, act in layers:
            W = w[off:off + fan_in * fan_out].reshape(fan_out, fan_in)
            b = w[off + fan_in * fan_out:off + fan_in * fan_out + fan_out]
            x = W @ x + b
            if act == "tanh":
                x = jnp.tanh(x)
        return x
    return mlp


class Trainer:
    """The shared machinery of both protocols: probe, sized adjoint, jitted train step."""

    def __init__(self, jax, diffrax, optax, term, t0, t1, rtol, atol, donate, event=None):
        self.jax, self.diffrax, self.optax = jax, diffrax, optax
        self.term, self.t0, self.t1 = term, t0, t1
        self.ctrl = diffrax.PIDController(rtol=rtol, atol=atol)
        self.solver = diffrax.Tsit5()
        self.donate = donate
        self.event = event

    def tight(self, rtol, atol):
        """The same trainer with the tolerances rtol, atol (the tight step-1 loss)."""
        t = Trainer(self.jax, self.diffrax, self.optax, self.term, self.t0, self.t1, rtol, atol, self.donate,
                    self.event)
        return t

    def solve(self, max_steps, adjoint, y0, args):
        d = self.diffrax
        return d.diffeqsolve(self.term, self.solver, self.t0, self.t1, None, y0, args=args,
                             saveat=d.SaveAt(t1=True), stepsize_controller=self.ctrl, adjoint=adjoint,
                             max_steps=max_steps, throw=False, event=self.event)

    def finished(self, sol):
        """Whether each solve reached its end: t1, or a terminal event (diffrax >= 0.6 ends those with
        RESULTS.event_occurred)."""
        d = self.diffrax
        ok = sol.result == d.RESULTS.successful
        occurred = getattr(d.RESULTS, "event_occurred", None)
        if self.event is not None and occurred is not None:
            ok = self.jax.numpy.logical_or(ok, sol.result == occurred)
        return ok

    def probe(self, in_axes, args, y0):
        """attempts (largest accepted + rejected over the batch), mean accepted, probe and compile seconds."""
        jax, d = self.jax, self.diffrax
        import numpy as np

        def stats(a, y):
            sol = self.solve(C.PROBE_MAX_STEPS, d.RecursiveCheckpointAdjoint(), y, a)
            return self.finished(sol), sol.stats["num_accepted_steps"], sol.stats["num_steps"]
        t = time.perf_counter()
        f = jax.jit(jax.vmap(stats, in_axes=in_axes)).lower(args, y0).compile()
        compile_s = time.perf_counter() - t
        t = time.perf_counter()
        ok, acc, att = jax.block_until_ready(f(args, y0))
        ok, acc, att = np.asarray(ok), np.asarray(acc), np.asarray(att)
        if not ok.all():
            raise RuntimeError(f"probe: {int((~ok).sum())} unsuccessful trajectories")
        return int(att.max()), float(acc.mean()), time.perf_counter() - t, compile_s

    def train_step(self, loss_of_params, lr):
        """The jitted step (params, opt_state, *data) -> (params, opt_state, loss, failed) and the optimiser.

        loss_of_params(params, *data) returns (loss, failed trajectories); the
        data (initial states, targets) are arguments, not constants of the
        compiled program.
        """
        jax, optax = self.jax, self.optax
        opt = optax.adam(lr)

        def step(params, opt_state, *data):
            (loss, failed), g = jax.value_and_grad(loss_of_params, has_aux=True)(params, *data)
            updates, opt_state = opt.update(g, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss, failed
        return opt, jax.jit(step, donate_argnums=(0, 1) if self.donate else ())


def run_cell(jax, trainer, cell, params0, data, loss_fn, lr, steps, budget_s):
    """Train steps from params0 on data; returns the row's timing and loss fields."""
    opt, step = trainer.train_step(loss_fn, lr)
    failed = [0]

    def one(state):
        p, s = state
        p, s, loss, nf = step(p, s, *data)
        jax.block_until_ready((p, s, loss, nf))
        failed[0] = max(failed[0], int(nf))
        return (p, s), float(loss)
    # Donation invalidates the buffers it is given: start from copies.
    p0 = jax.numpy.array(params0, copy=True)
    r = C.time_train_steps(one, (p0, opt.init(p0)), steps, budget_s=budget_s)
    pf, _ = r["state"]
    lf, nf = jax.jit(loss_fn)(pf, *data)
    return {
        **cell,
        "steps": r["steps_done"], "reps_done": len(r["times_ms"]),
        "step_ms": r["median_ms"], "step_ms_min": r["best_ms"], "step_times_ms": r["times_ms"],
        "warmup_s": r["warmup_s"],
        "loss_first": r["losses"][0], "loss_last": r["losses"][-1], "loss_final": float(lf),
        "failed_trajectories": max(failed[0], int(nf)),
    }


def main(argv=None):
    args = parse_args(argv)
    dump = C.load_train_dump(args.problem)
    jax, env = C.setup_jax(args.platform, cpu_threads=args.cpu_threads, mem_fraction=0.9)
    import diffrax
    import jax.numpy as jnp
    import numpy as np
    import optax

    env["optax"] = C._version("optax")
    out = open(args.out, "a") if args.out else None
    C.emit({"header": "diffrax_train", "env": env, "args": vars(args), "gradsolve_engine": dump.get("engine"),
            "gradsolve_steps": dump.get("steps")}, out)
    steps = args.reps + 1 if args.reps > 0 else (args.steps or int(dump.get("steps") or 6))
    donate = args.platform == "gpu" and not args.no_donate
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    budget = C.Budget(args.max_seconds)

    def cell_budget(start):
        if not args.max_seconds:
            return None
        return max(1.0, args.max_seconds - (time.perf_counter() - start))

    def run_guarded(key, n, cell, body):
        ok, predicted, reason = budget.check(key, n, steps)
        if not ok:
            C.log(f"{key} n={n}: skipped: {reason}")
            budget.block_key(key, f"skipped: a smaller {key} cell was skipped or failed")
            C.emit({**cell, "skipped": True, "reason": reason, "predicted_s": predicted}, out)
            return
        start = time.perf_counter()
        try:
            row = body(start)
            row["cell_s"] = time.perf_counter() - start
            row["predicted_s"] = predicted
            budget.record(key, n, row["step_ms_min"] / 1e3, row.get("probe_s", 0.0),
                          row.get("probe_compile_s", 0.0) + max(0.0, row["warmup_s"] - row["step_ms_min"] / 1e3))
            C.log(f"{key} n={n}: step {row['step_ms']:.3f} ms (min {row['step_ms_min']:.3f}), "
                  f"loss step 1 {row['loss_first']:.12g} (gradsolve {row.get('gradsolve_loss_first')}, "
                  f"rel diff {row.get('loss_first_rel_diff')}), failed {row['failed_trajectories']}")
            C.emit(row, out)
        except Exception as exc:  # noqa: BLE001 - report the cell and go on
            msg = f"{type(exc).__name__}: {str(exc)[:2000]}"
            C.log(f"{key} n={n}: failed: {msg}")
            budget.block_key(key, f"skipped: a smaller {key} cell failed")
            C.emit({**cell, "error": msg, "cell_s": time.perf_counter() - start}, out)
        finally:
            gc.collect()
            try:
                jax.clear_caches()
            except Exception:  # noqa: BLE001
                pass

    tight_rtol, tight_atol = float(dump.get("tight_rtol") or 1e-12), float(dump.get("tight_atol") or 1e-14)

    def tight_loss(trainer, make_loss, params0, data):
        """The step-1 loss at the dump's tight tolerances (untimed): the same problem's loss to ~1e-11."""
        t = time.perf_counter()
        res = {"tight_rtol": tight_rtol, "tight_atol": tight_atol}
        try:
            tr = trainer.tight(tight_rtol, tight_atol)
            lt, nft = jax.jit(make_loss(tr, C.PROBE_MAX_STEPS, diffrax.RecursiveCheckpointAdjoint()))(params0, *data)
            if int(nft):
                raise RuntimeError(f"{int(nft)} trajectories did not finish")
            res["loss_first_tight"] = float(lt)
        except Exception as exc:  # noqa: BLE001 - the timed steps stand without it
            res["tight_error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
            C.log(f"tight step-1 loss failed: {res['tight_error']}")
        res["tight_s"] = time.perf_counter() - t
        return res

    nd = dump.get("neural")
    if "neural" in protocols and nd is None:
        C.emit({"suite": "train", "anchor": "diffrax", "case": "neural-fit", "error": "the dump has no neural problem"}, out)
    elif "neural" in protocols:
        d = nd["sizes"][0]
        w0 = jnp.asarray(np.asarray(nd["weights"], dtype=np.float64))
        y0_all = np.asarray(nd["y0"], dtype=np.float64).reshape(-1, d)
        tg_all = np.asarray(nd["targets"], dtype=np.float64).reshape(-1, d)
        gs = {int(r["n"]): r for r in nd.get("gradsolve", [])}
        mlp = make_mlp(jnp, nd["sizes"], nd["hidden_activation"], nd["output_activation"])
        trainer = Trainer(jax, diffrax, optax, diffrax.ODETerm(lambda t, y, w: mlp(w, y)),
                          float(nd["t0"]), float(nd["t1"]), float(nd["rtol"]), float(nd["atol"]), donate)
        lr = float(nd["lr"])
        bs = C.int_list(args.b) if args.b else sorted(gs)
        for b in sorted(bs):
            cell = {"suite": "train", "anchor": "diffrax", "case": "neural-fit", "n": b, "platform": args.platform,
                    "rtol": nd["rtol"], "atol": nd["atol"], "lr": lr}
            if b > len(y0_all):
                C.emit({**cell, "error": f"the dump holds {len(y0_all)} trajectories"}, out)
                continue

            def body(start, b=b, cell=cell):
                y0, tg = jnp.asarray(y0_all[:b]), jnp.asarray(tg_all[:b])
                attempts, acc_mean, probe_s, probe_compile_s = trainer.probe((None, 0), w0, y0)
                max_steps = attempts + 1 + max(4, attempts // 4)
                adjoint = diffrax.RecursiveCheckpointAdjoint(checkpoints=max_steps)

                def make_loss(tr, max_steps, adjoint):
                    def loss_fn(w, y0, tg):
                        sol = jax.vmap(lambda y: tr.solve(max_steps, adjoint, y, w))(y0)
                        nf = jnp.sum(jnp.logical_not(sol.result == diffrax.RESULTS.successful))
                        return jnp.mean(jnp.sum((sol.ys[:, -1] - tg) ** 2, axis=1)), nf
                    return loss_fn
                C.log(f"neural B={b}: attempts {attempts}, max_steps = checkpoints = {max_steps}; {steps} steps")
                row = run_cell(jax, trainer, cell, w0, (y0, tg), make_loss(trainer, max_steps, adjoint), lr, steps,
                               cell_budget(start))
                row.update(tight_loss(trainer, make_loss, w0, (y0, tg)))
                row.update(attempts_max=attempts, max_steps=max_steps, checkpoints=max_steps, steps_per_traj=acc_mean,
                           probe_s=probe_s, probe_compile_s=probe_compile_s)
                return C.loss_checks(row, gs.get(b))
            run_guarded("neural", b, cell, body)

    ld = dump.get("lorenz_fit")
    if "lorenz-fit" in protocols and ld is None:
        C.emit({"suite": "train", "anchor": "diffrax", "case": "lorenz-fit", "error": "the dump has no Lorenz calibration"}, out)
    elif "lorenz-fit" in protocols:
        sigma, beta = float(ld.get("sigma", SIGMA_DEFAULT)), float(ld.get("beta", BETA_DEFAULT))
        term = diffrax.ODETerm(lambda t, y, rho: jnp.stack([
            sigma * (y[1] - y[0]),
            y[0] * (rho - y[2]) - y[1],
            y[0] * y[1] - beta * y[2],
        ]))
        trainer = Trainer(jax, diffrax, optax, term, float(ld["t0"]), float(ld["t1"]), float(ld["rtol"]),
                          float(ld["atol"]), donate)
        lr = float(ld["lr"])
        y0 = jnp.asarray(np.asarray(ld["y0"], dtype=np.float64))
        cases = {int(c["n"]): c for c in ld["cases"]}
        ns = C.int_list(args.fits) if args.fits else sorted(cases)
        for n in sorted(ns):
            cell = {"suite": "train", "anchor": "diffrax", "case": "lorenz-fit", "n": n, "platform": args.platform,
                    "rtol": ld["rtol"], "atol": ld["atol"], "lr": lr}
            if n not in cases:
                C.emit({**cell, "error": f"the dump has no calibration of n = {n} (it has {sorted(cases)})"}, out)
                continue

            def body(start, n=n, cell=cell):
                c = cases[n]
                tg = jnp.asarray(np.asarray(c["targets"], dtype=np.float64).reshape(n, 3))
                rho0 = jnp.full((n,), float(ld["rho0"]), dtype=jnp.float64)
                attempts, acc_mean, probe_s, probe_compile_s = trainer.probe((0, None), rho0, y0)
                max_steps = attempts + 1 + max(4, attempts // 4)
                adjoint = diffrax.RecursiveCheckpointAdjoint(checkpoints=max_steps)

                def make_loss(tr, max_steps, adjoint):
                    def loss_fn(rho, tg):
                        sol = jax.vmap(lambda r: tr.solve(max_steps, adjoint, y0, r))(rho)
                        nf = jnp.sum(jnp.logical_not(sol.result == diffrax.RESULTS.successful))
                        return jnp.sum((sol.ys[:, -1] - tg) ** 2), nf
                    return loss_fn
                C.log(f"lorenz-fit n={n}: attempts {attempts}, max_steps = checkpoints = {max_steps}; {steps} steps")
                row = run_cell(jax, trainer, cell, rho0, (tg,), make_loss(trainer, max_steps, adjoint), lr, steps,
                               cell_budget(start))
                row.update(tight_loss(trainer, make_loss, rho0, (tg,)))
                row.update(attempts_max=attempts, max_steps=max_steps, checkpoints=max_steps, steps_per_traj=acc_mean,
                           probe_s=probe_s, probe_compile_s=probe_compile_s)
                return C.loss_checks(row, c)
            run_guarded("lorenz-fit", n, cell, body)
    pd = dump.get("pk_fit")
    if "pk-fit" in protocols and pd is None:
        C.emit({"suite": "train", "anchor": "diffrax", "case": "pk-fit", "error": "the dump has no PK calibration"}, out)
    elif "pk-fit" in protocols:
        import optimistix as optx
        env["optimistix"] = C._version("optimistix")
        thr = float(pd["threshold"])
        term = diffrax.ODETerm(lambda t, y, k: jnp.stack([-k * y[0], jnp.ones_like(y[0])]))
        # diffrax calls an Event's condition with keywords (t=, y=, args=, ...).
        event = diffrax.Event(lambda t, y, args, **kw: y[0] - thr, optx.Newton(rtol=1e-12, atol=1e-12))
        trainer = Trainer(jax, diffrax, optax, term, 0.0, float(pd["t1"]), float(pd["rtol"]), float(pd["atol"]),
                          donate, event)
        lr = float(pd["lr"])
        cases = {int(c["n"]): c for c in pd["cases"]}
        ns = C.int_list(args.fits) if args.fits else sorted(cases)
        for n in sorted(ns):
            cell = {"suite": "train", "anchor": "diffrax", "case": "pk-fit", "n": n, "platform": args.platform,
                    "rtol": pd["rtol"], "atol": pd["atol"], "lr": lr}
            if n not in cases:
                C.emit({**cell, "error": f"the dump has no PK calibration of n = {n} (it has {sorted(cases)})"}, out)
                continue

            def body(start, n=n, cell=cell):
                c = cases[n]
                tg = jnp.asarray(np.asarray(c["targets"], dtype=np.float64))
                c0 = np.linspace(float(pd["c0_lo"]), float(pd["c0_hi"]), n)
                y0 = jnp.asarray(np.stack([c0, np.zeros(n)], axis=1))
                k0 = jnp.full((n,), float(pd["k0"]), dtype=jnp.float64)
                attempts, acc_mean, probe_s, probe_compile_s = trainer.probe((0, 0), k0, y0)
                max_steps = attempts + 1 + max(4, attempts // 4)
                adjoint = diffrax.RecursiveCheckpointAdjoint(checkpoints=max_steps)

                def make_loss(tr, max_steps, adjoint):
                    def loss_fn(k, y0, tg):
                        sol = jax.vmap(lambda kk, y: tr.solve(max_steps, adjoint, y, kk))(k, y0)
                        nf = jnp.sum(jnp.logical_not(tr.finished(sol)))
                        return jnp.sum((sol.ys[:, -1, 1] - tg) ** 2), nf
                    return loss_fn
                C.log(f"pk-fit n={n}: attempts {attempts}, max_steps = checkpoints = {max_steps}; {steps} steps")
                row = run_cell(jax, trainer, cell, k0, (y0, tg), make_loss(trainer, max_steps, adjoint), lr, steps,
                               cell_budget(start))
                row.update(tight_loss(trainer, make_loss, k0, (y0, tg)))
                row.update(attempts_max=attempts, max_steps=max_steps, checkpoints=max_steps, steps_per_traj=acc_mean,
                           probe_s=probe_s, probe_compile_s=probe_compile_s)
                return C.loss_checks(row, c)
            run_guarded("pk-fit", n, cell, body)
    if out is not None:
        out.close()


if __name__ == "__main__":
    main()
