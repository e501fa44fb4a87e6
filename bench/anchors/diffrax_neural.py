#!/usr/bin/env python3
"""Diffrax on the neural suite: the anchor of `gradsolve bench -suite neural`.

The problem comes from the JSON file that

    gradsolve bench -suite neural -n 256,4096,65536 -dump neural.json

writes: the 1,218 weights of the MLP 2 -> 32 tanh -> 32 tanh -> 2, the initial
states y0 in [-1, 1]^2 and targets (y0 rotated by 90 degrees) of the largest
batch (a batch of size B is the first B rows), t in [t0, t1], rtol and atol,
and gradsolve's loss and gradient for every batch it ran. Both sides therefore
solve exactly the same problem.

Diffrax: y' = MLP(y) written in plain jax.numpy with the same weights, Tsit5,
PIDController(rtol, atol) (I control), dt0=None, SaveAt(t1=True), throw=False,
vmap over the batch, RecursiveCheckpointAdjoint with checkpoints = max_steps =
attempts + 1 (attempts: accepted + rejected steps, the largest over the batch,
from a probe solve). Loss: mean over the batch of |y(t1) - target|^2; gradient
with respect to the flat weight vector (the dump's layout). jit, one warm-up,
best and median of --reps with block_until_ready; forward solve timed alike.
For every batch it reports the loss, the gradient's largest difference from
gradsolve's, max|g_diffrax - g_gradsolve| / max|g_gradsolve|, and the times.

On the CPU the default batches are 256 and 4096, on the GPU 4096 and 65536.
XLA runs on every CPU the process may use unless --cpu-threads says otherwise
(the header line reports os.cpu_count() and the XLA flags).

    python3 diffrax_neural.py --problem neural.json --platform cpu
    python3 diffrax_neural.py --problem neural.json --platform gpu --save-grad grads/
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

DEFAULT_B = {"cpu": "256,4096", "gpu": "4096,65536"}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", required=True, help="JSON file written by gradsolve bench -suite neural -dump")
    ap.add_argument("--b", default="", help="comma-separated batch sizes (default: 256,4096 on cpu, 4096,65536 on gpu)")
    ap.add_argument("--platform", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--cpu-threads", type=int, default=0, help="CPU platform: use only the first N CPUs (0: all)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=600.0,
                    help="skip a batch whose predicted wall time exceeds this; 0 disables the check")
    ap.add_argument("--out", default="", help="also append the JSON lines to this file")
    ap.add_argument("--save-grad", default="", help="directory for the gradients as .npy (neural_b<B>.npy)")
    return ap.parse_args(argv)


def load_problem(path):
    with open(path) as fh:
        d = json.load(fh)
    need = ["sizes", "hidden_activation", "output_activation", "weights", "y0", "targets", "t0", "t1", "rtol", "atol"]
    missing = [k for k in need if k not in d]
    if missing:
        raise ValueError(f"{path}: missing keys {missing}")
    sizes = d["sizes"]
    nparams = sum(sizes[k] * sizes[k + 1] + sizes[k + 1] for k in range(len(sizes) - 1))
    if len(d["weights"]) != nparams:
        raise ValueError(f"{path}: {len(d['weights'])} weights, sizes {sizes} need {nparams}")
    if sizes[0] != sizes[-1] or len(d["y0"]) % sizes[0] or len(d["y0"]) != len(d["targets"]):
        raise ValueError(f"{path}: inconsistent sizes, y0 or targets")
    for act in (d["hidden_activation"], d["output_activation"]):
        if act not in ("tanh", "identity"):
            raise ValueError(f"{path}: activation {act!r} not supported here")
    return d


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


def main(argv=None):
    args = parse_args(argv)
    prob = load_problem(args.problem)
    jax, env = C.setup_jax(args.platform, cpu_threads=args.cpu_threads, mem_fraction=0.9)
    import diffrax
    import jax.numpy as jnp
    import numpy as np

    out = open(args.out, "a") if args.out else None
    C.emit({"header": "diffrax_neural", "env": env, "args": vars(args)}, out)

    d = prob["sizes"][0]
    t0, t1 = float(prob["t0"]), float(prob["t1"])
    rtol, atol = float(prob["rtol"]), float(prob["atol"])
    w = jnp.asarray(np.asarray(prob["weights"], dtype=np.float64))
    y0_all = np.asarray(prob["y0"], dtype=np.float64).reshape(-1, d)
    tg_all = np.asarray(prob["targets"], dtype=np.float64).reshape(-1, d)
    gs = {int(r["b"]): r for r in prob.get("gradsolve", [])}
    mlp = make_mlp(jnp, prob["sizes"], prob["hidden_activation"], prob["output_activation"])
    term = diffrax.ODETerm(lambda t, y, w: mlp(w, y))
    solver = diffrax.Tsit5()
    ctrl = diffrax.PIDController(rtol=rtol, atol=atol)

    def make(max_steps, adjoint):
        def one(w, y0):
            return diffrax.diffeqsolve(term, solver, t0, t1, None, y0, args=w, saveat=diffrax.SaveAt(t1=True),
                                       stepsize_controller=ctrl, adjoint=adjoint, max_steps=max_steps, throw=False)
        return one

    probe_one = make(C.PROBE_MAX_STEPS, diffrax.RecursiveCheckpointAdjoint())

    def probe_stats(w, y0):
        sol = probe_one(w, y0)
        return (sol.ys[-1], sol.result == diffrax.RESULTS.successful,
                sol.stats["num_accepted_steps"], sol.stats["num_steps"])
    probe = jax.jit(jax.vmap(probe_stats, in_axes=(None, 0)))

    bs = C.int_list(args.b or DEFAULT_B[args.platform])
    budget = C.Budget(args.max_seconds)
    for b in sorted(bs):
        cell = {"suite": "neural", "b": b, "rtol": rtol, "atol": atol, "platform": args.platform}
        if b > len(y0_all):
            C.emit({**cell, "error": f"the problem file holds {len(y0_all)} trajectories; "
                                     f"write it with gradsolve bench -suite neural -n ...,{b} -dump"}, out)
            continue
        ok, predicted, reason = budget.check("neural", b, args.reps + 1)
        if not ok:
            C.log(f"B={b}: skipped: {reason}")
            budget.block_key("neural", "skipped: a smaller batch was skipped or failed")
            C.emit({**cell, "skipped": True, "reason": reason, "predicted_s": predicted}, out)
            continue
        start = time.perf_counter()
        try:
            y0 = jnp.asarray(y0_all[:b])
            tg = jnp.asarray(tg_all[:b])
            t = time.perf_counter()
            compiled = probe.lower(w, y0).compile()
            probe_compile_s = time.perf_counter() - t
            t = time.perf_counter()
            yf_p, okp, acc, att = jax.block_until_ready(compiled(w, y0))
            probe_s = time.perf_counter() - t
            okp, acc, att = np.asarray(okp), np.asarray(acc), np.asarray(att)
            if not okp.all():
                raise RuntimeError(f"probe: {int((~okp).sum())} unsuccessful trajectories")
            attempts = int(att.max())
            max_steps, adjoint = C.sized_adjoint(diffrax, attempts)
            one = make(max_steps, adjoint)
            batch = jax.vmap(lambda w, y0: one(w, y0).ys[-1], in_axes=(None, 0))

            def loss(w, y0, tg):
                return jnp.mean(jnp.sum((batch(w, y0) - tg) ** 2, axis=1))
            fwd = jax.jit(batch)
            vg = jax.jit(jax.value_and_grad(loss))
            C.log(f"B={b}: forward (max_steps = checkpoints = {max_steps})")
            rf = C.time_fn(jax, fwd, (w, y0), args.reps)
            C.log(f"B={b}: gradient")
            rg = C.time_fn(jax, vg, (w, y0, tg), args.reps)
            lval, g = rg["out"]
            lval, g = float(lval), np.asarray(g)
            yf = np.asarray(rf["out"])
            if not np.allclose(yf, np.asarray(yf_p), rtol=1e-6, atol=1e-12):
                raise RuntimeError("the sized solve's final states differ from the probe's")
            if args.save_grad:
                os.makedirs(args.save_grad, exist_ok=True)
                np.save(os.path.join(args.save_grad, f"neural_b{b}.npy"), g)
            row = {
                **cell,
                "steps_mean": float(acc.mean()), "rejected_mean": float((att - acc).mean()),
                "attempts_max": attempts, "max_steps": max_steps, "checkpoints": max_steps,
                "grad_ms": rg["best_ms"], "grad_ms_median": rg["median_ms"], "grad_reps": rg["reps_done"],
                "grad_warmup_s": rg["warmup_s"],
                "forward_ms": rf["best_ms"], "forward_ms_median": rf["median_ms"], "forward_reps": rf["reps_done"],
                "forward_warmup_s": rf["warmup_s"],
                "probe_s": probe_s, "probe_compile_s": probe_compile_s,
                "loss": lval, "grad_max_abs": float(np.max(np.abs(g))),
            }
            ref = gs.get(b)
            if ref is not None:
                gg = np.asarray(ref["grad"], dtype=np.float64)
                row["gradsolve_loss"] = float(ref["loss"])
                row["loss_rel_diff"] = abs(lval - ref["loss"]) / abs(ref["loss"])
                row["grad_max_rel_diff"] = float(np.max(np.abs(g - gg)) / np.max(np.abs(gg)))
                row["gradsolve_steps_mean"] = ref.get("steps_per_traj")
            else:
                row["grad_max_rel_diff"] = None
            row["cell_s"] = time.perf_counter() - start
            budget.record("neural", b, (rg["best_ms"] + rf["best_ms"]) / 1e3, probe_s,
                          probe_compile_s + max(0.0, rg["warmup_s"] - rg["best_ms"] / 1e3)
                          + max(0.0, rf["warmup_s"] - rf["best_ms"] / 1e3))
            C.log(f"B={b}: grad {rg['best_ms']:.3f} ms, forward {rf['best_ms']:.3f} ms, loss {lval:.9g}, "
                  f"gradient vs gradsolve {row['grad_max_rel_diff']}")
            C.emit(row, out)
        except Exception as exc:  # noqa: BLE001 - report the batch and go on
            msg = f"{type(exc).__name__}: {str(exc)[:2000]}"
            C.log(f"B={b}: failed: {msg}")
            budget.block_key("neural", "skipped: a smaller batch failed")
            C.emit({**cell, "error": msg, "cell_s": time.perf_counter() - start}, out)
        finally:
            gc.collect()
    if out is not None:
        out.close()


if __name__ == "__main__":
    main()
