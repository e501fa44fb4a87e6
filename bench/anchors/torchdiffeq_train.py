#!/usr/bin/env python3
"""torchdiffeq training steps on the neural protocol: a second anchor of `gradsolve bench -suite gpu-train`.

The problem comes from the JSON file that

    gradsolve bench -suite gpu-train -dump train.json

writes (bench.TrainDump): the starting weights of the MLP 2 -> 32 tanh -> 32
tanh -> 2, the initial states and targets (a batch of size B is the first B
rows), t in [t0, t1], rtol and atol, the learning rate, the number of steps
gradsolve's fit ran and its losses.

torchdiffeq: y' = MLP(y) as a torch.nn.Module with the dump's weights
(nn.Linear's weight is Out x In, the dump's row-major layout), float64,
odeint(method="dopri5", rtol, atol) over the whole batch as one tensor [B, 2]
(torchdiffeq takes one adaptive step for the whole batch, its error norm the
RMS over all of it, so its mesh differs from gradsolve's and Diffrax's
per-trajectory meshes), loss mean_i |y_i(t1) - target_i|^2,
torch.optim.Adam(lr) (the same update as optax.adam and gradsolve's Adam).
Two gradients: "backprop" (autograd through the solver's operations) and
"adjoint" (odeint_adjoint, the continuous adjoint with the same tolerances).
A step is zero_grad, solve, loss, backward, Adam and the loss read back
(loss.item(), which synchronises the device). The fit runs the dump's number
of steps, the first untimed (the warm-up: step 1, its loss the step-1 loss),
on cuda if there is a GPU. The step-1 loss is also solved at the dump's tight
tolerances (rtol 1e-12, atol 1e-14, untimed), to be checked against
gradsolve's to 1e-8 (loss_tight_rel_diff, same_problem). Output: JSON lines (a header, then one line per
(mode, B)); progress on stderr.

    python3 torchdiffeq_train.py --problem train.json
    python3 torchdiffeq_train.py --problem train.json --device cpu --b 256 --modes backprop
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

DEFAULT_B = "4096,65536"
MODES = ("backprop", "adjoint")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", required=True, help="JSON file written by gradsolve bench -suite train|gpu-train -dump")
    ap.add_argument("--b", default=DEFAULT_B, help="comma-separated batch sizes (default %(default)s; larger ones only "
                                                   "while --max-seconds allows)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated: backprop, adjoint (default both)")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    ap.add_argument("--cpu-threads", type=int, default=0, help="use only the first N CPUs (0: all)")
    ap.add_argument("--steps", type=int, default=0,
                    help="optimiser steps per fit, the first untimed (default: the dump's, as gradsolve ran)")
    ap.add_argument("--reps", type=int, default=0, help="timed steps (overrides --steps: steps = reps + 1)")
    ap.add_argument("--max-seconds", type=float, default=600.0,
                    help="skip a cell whose predicted wall time exceeds this (from the same mode at the next "
                         "smaller B, scaled linearly); 0 disables the check (default %(default)s)")
    ap.add_argument("--out", default="", help="also append the JSON lines to this file")
    return ap.parse_args(argv)


def make_model(torch, sizes, hidden, output, weights, dev):
    """The MLP as a torch.nn.Module with the dump's flat weights (gradsolve's nn.MLP layout)."""
    import numpy as np

    w = np.asarray(weights, dtype=np.float64)
    layers = []
    off = 0
    for k in range(len(sizes) - 1):
        fan_in, fan_out = sizes[k], sizes[k + 1]
        lin = torch.nn.Linear(fan_in, fan_out, dtype=torch.float64, device=dev)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w[off:off + fan_in * fan_out].reshape(fan_out, fan_in).copy()))
            lin.bias.copy_(torch.from_numpy(w[off + fan_in * fan_out:off + fan_in * fan_out + fan_out].copy()))
        off += fan_in * fan_out + fan_out
        layers.append(lin)
        act = hidden if k < len(sizes) - 2 else output
        if act == "tanh":
            layers.append(torch.nn.Tanh())
    net = torch.nn.Sequential(*layers)

    class Field(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, t, y):  # noqa: ARG002 - autonomous
            return self.net(y)
    return Field()


def main(argv=None):
    args = parse_args(argv)
    dump = C.load_train_dump(args.problem)
    nd = dump.get("neural")
    torch, dev, env = C.setup_torch(args.device, cpu_threads=args.cpu_threads)
    import numpy as np
    import torchdiffeq

    out = open(args.out, "a") if args.out else None
    C.emit({"header": "torchdiffeq_train", "env": env, "args": vars(args), "gradsolve_engine": dump.get("engine"),
            "gradsolve_steps": dump.get("steps")}, out)
    if nd is None:
        C.emit({"suite": "train", "anchor": "torchdiffeq", "case": "neural-fit", "error": "the dump has no neural problem"}, out)
        return
    steps = args.reps + 1 if args.reps > 0 else (args.steps or int(dump.get("steps") or 6))
    d = nd["sizes"][0]
    y0_all = np.asarray(nd["y0"], dtype=np.float64).reshape(-1, d)
    tg_all = np.asarray(nd["targets"], dtype=np.float64).reshape(-1, d)
    gs = {int(r["n"]): r for r in nd.get("gradsolve", [])}
    rtol, atol, lr = float(nd["rtol"]), float(nd["atol"]), float(nd["lr"])
    ts = torch.tensor([float(nd["t0"]), float(nd["t1"])], dtype=torch.float64, device=dev)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"--modes: unknown mode {m!r} (want {', '.join(MODES)})")
    tight_rtol, tight_atol = float(dump.get("tight_rtol") or 1e-12), float(dump.get("tight_atol") or 1e-14)
    tight = {}  # B -> (loss, seconds): the step-1 loss at the tight tolerances, once per batch
    budget = C.Budget(args.max_seconds)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    for b in sorted(C.int_list(args.b)):
        for mode in modes:
            cell = {"suite": "train", "anchor": "torchdiffeq", "case": "neural-fit", "mode": mode, "method": "dopri5",
                    "n": b, "device": str(dev), "rtol": rtol, "atol": atol, "lr": lr}
            if b > len(y0_all):
                C.emit({**cell, "error": f"the dump holds {len(y0_all)} trajectories"}, out)
                continue
            ok, predicted, reason = budget.check(mode, b, steps)
            if not ok:
                C.log(f"{mode} B={b}: skipped: {reason}")
                budget.block_key(mode, f"skipped: a smaller batch of {mode} was skipped or failed")
                C.emit({**cell, "skipped": True, "reason": reason, "predicted_s": predicted}, out)
                continue
            start = time.perf_counter()
            try:
                field = make_model(torch, nd["sizes"], nd["hidden_activation"], nd["output_activation"],
                                   nd["weights"], dev)
                params = list(field.parameters())
                opt = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999), eps=1e-8)
                y0 = torch.from_numpy(y0_all[:b].copy()).to(dev)
                tg = torch.from_numpy(tg_all[:b].copy()).to(dev)
                nfe = [0]

                def counted(t, y, field=field):
                    nfe[0] += 1
                    return field(t, y)

                if mode == "backprop":
                    def solve(y0=y0):
                        return torchdiffeq.odeint(counted, y0, ts, rtol=rtol, atol=atol, method="dopri5")[-1]
                else:
                    def solve(y0=y0, field=field, params=params):
                        return torchdiffeq.odeint_adjoint(field, y0, ts, rtol=rtol, atol=atol, method="dopri5",
                                                          adjoint_rtol=rtol, adjoint_atol=atol,
                                                          adjoint_params=tuple(params))[-1]

                def step(state, opt=opt, solve=solve, tg=tg):
                    opt.zero_grad(set_to_none=True)
                    loss = ((solve() - tg) ** 2).sum(dim=1).mean()
                    loss.backward()
                    opt.step()
                    val = loss.item()
                    sync()
                    return state, val
                C.log(f"{mode} B={b}: {steps} steps on {dev}")
                left = None if not args.max_seconds else max(1.0, args.max_seconds - (time.perf_counter() - start))
                r = C.time_train_steps(step, None, steps, budget_s=left)
                with torch.no_grad():
                    nfe0 = nfe[0]
                    final = float(((solve() - tg) ** 2).sum(dim=1).mean().item())
                    nfe_forward = nfe[0] - nfe0
                    if b not in tight:
                        t = time.perf_counter()
                        try:
                            f0 = make_model(torch, nd["sizes"], nd["hidden_activation"], nd["output_activation"],
                                            nd["weights"], dev)
                            yt = torchdiffeq.odeint(f0, y0, ts, rtol=tight_rtol, atol=tight_atol, method="dopri5")[-1]
                            tight[b] = (float(((yt - tg) ** 2).sum(dim=1).mean().item()), time.perf_counter() - t)
                        except Exception as exc:  # noqa: BLE001 - the timed steps stand without it
                            C.log(f"B={b}: tight step-1 loss failed: {type(exc).__name__}: {str(exc)[:300]}")
                            tight[b] = (None, time.perf_counter() - t)
                row = {
                    **cell,
                    "steps": r["steps_done"], "reps_done": len(r["times_ms"]),
                    "step_ms": r["median_ms"], "step_ms_min": r["best_ms"], "step_times_ms": r["times_ms"],
                    "warmup_s": r["warmup_s"],
                    "loss_first": r["losses"][0], "loss_last": r["losses"][-1], "loss_final": final,
                    "nfe_forward": nfe_forward if mode == "backprop" else None,
                    "loss_first_tight": tight[b][0], "tight_rtol": tight_rtol, "tight_atol": tight_atol,
                    "tight_s": tight[b][1],
                }
                C.loss_checks(row, gs.get(b))
                row["cell_s"] = time.perf_counter() - start
                row["predicted_s"] = predicted
                budget.record(mode, b, r["best_ms"] / 1e3, 0.0, max(0.0, r["warmup_s"] - r["best_ms"] / 1e3))
                C.log(f"{mode} B={b}: step {row['step_ms']:.3f} ms (min {row['step_ms_min']:.3f}), loss step 1 "
                      f"{row['loss_first']:.12g} (gradsolve {row.get('gradsolve_loss_first')}, rel diff "
                      f"{row.get('loss_first_rel_diff')})")
                C.emit(row, out)
            except Exception as exc:  # noqa: BLE001 - report the cell and go on
                msg = f"{type(exc).__name__}: {str(exc)[:2000]}"
                C.log(f"{mode} B={b}: failed: {msg}")
                budget.block_key(mode, f"skipped: a smaller batch of {mode} failed")
                C.emit({**cell, "error": msg, "cell_s": time.perf_counter() - start}, out)
            finally:
                gc.collect()
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
    if out is not None:
        out.close()


if __name__ == "__main__":
    main()
