#!/usr/bin/env python3
"""Summary of the training suite beside its anchors: gradsolve vs Diffrax + optax vs torchdiffeq.

    python3 bench/anchors/train_summary.py DIR [DIR ...]

reads every *.jsonl file of the folders (the logs bench/gpu_train.sh writes
under $OUT: gradsolve's `bench -suite train|gpu-train -json` rows, those of
diffrax_train.py and torchdiffeq_train.py and, if present, diffrax_lorenz.py's
gradients) and prints two tables:

* training steps: gradsolve's median step, its kernel time (of the step,
  where the engine's trace sees it, and of a whole Grad call with the record
  on the same problem), the step over that kernel (target <= 1.3x + 0.1 ms),
  fit.New; the median jitted Diffrax + optax step and torchdiffeq's (backprop,
  adjoint) steps, each as a ratio to gradsolve's; the step-1 losses'
  relative differences from gradsolve's (target <= 1e-8);
* whole Solver.Grad calls of the Lorenz protocol: median call, kernel,
  copies and bytes, the call over the kernel, Diffrax's jitted gradient
  (diffrax_lorenz.py at rtol 1e-6) and its ratio to the whole call.

Times are milliseconds (medians over the runs' timed steps or calls).
"""

import glob
import json
import math
import os
import sys


def rows(dirs):
    out = []
    for d in dirs:
        files = sorted(glob.glob(os.path.join(d, "*.jsonl"))) if os.path.isdir(d) else [d]
        for f in files:
            with open(f) as fh:
                for line in fh:
                    line = line.strip()
                    if not line.startswith("{"):
                        continue
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    r["_file"] = os.path.basename(f)
                    out.append(r)
    return out


def fmt(x, w=9, p=3):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-".rjust(w)
    if isinstance(x, bool):
        return ("yes" if x else "NO").rjust(w)
    if isinstance(x, float):
        return f"{x:{w}.{p}f}" if abs(x) < 1e5 else f"{x:{w}.3g}"
    return str(x).rjust(w)


def fmte(x, w=8):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-".rjust(w)
    return f"{x:{w}.1e}"


def ratio(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


def rel(a, b):
    if a is None or b is None:
        return None
    return abs(a - b) / abs(b) if b else abs(a - b)


def main(dirs):
    rs = rows(dirs)
    gs = [r for r in rs if r.get("suite") in ("train", "gpu-train") and "anchor" not in r and "case" in r
          and "ms" in r]
    ok = [r for r in rs if "anchor" in r and not r.get("skipped") and "error" not in r]
    bad = [r for r in rs if "anchor" in r and (r.get("skipped") or "error" in r)]
    dx = {(r["case"], r["n"]): r for r in ok if r["anchor"] == "diffrax"}
    tb = {(r["case"], r["n"]): r for r in ok if r["anchor"] == "torchdiffeq" and r.get("mode") == "backprop"}
    ta = {(r["case"], r["n"]): r for r in ok if r["anchor"] == "torchdiffeq" and r.get("mode") == "adjoint"}
    dl = {r["n"]: r for r in rs if r.get("suite") == "lorenz" and "grad_ms" in r and abs(r.get("rtol", 0) - 1e-6) < 1e-12
          and not r.get("skipped") and "error" not in r}

    fits = [r for r in gs if r["case"].endswith("-fit")]
    if fits:
        print(f"Training steps (gradsolve engine {fits[0]['engine']}, {fits[0]['reps']} timed steps; Diffrax + optax "
              f"jitted; torchdiffeq dopri5), ms")
        print(f"{'case':<10} {'n':>7} | {'step':>8} {'min':>8} {'kernel':>8} {'g+r kern':>8} {'/kern':>6} {'call':>8} {'new':>9} | "
              f"{'diffrax':>8} {'dx/gs':>6} | {'torch bp':>9} {'bp/gs':>6} {'torch adj':>9} {'adj/gs':>6} | "
              f"{'loss step 1':>19} {'dx diff':>8} {'bp diff':>8} {'adj diff':>8} | {'dx tight':>8} {'bp tight':>8} {'same':>5}")
        for r in fits:
            key = (r["case"], r["n"])
            d, b, a = dx.get(key, {}), tb.get(key, {}), ta.get(key, {})
            s = r["ms"]
            k = r.get("grad_kernel_ms") or r.get("kernel_ms")
            ddiff = rel(d.get("loss_first"), r["loss_first"])
            tdx = rel(d.get("loss_first_tight"), r.get("loss_first_tight"))
            tbp = rel(b.get("loss_first_tight"), r.get("loss_first_tight"))
            tights = [x for x in (tdx, tbp) if x is not None]
            agree = None if not tights else max(tights) <= 1e-8
            print(f"{r['case']:<10} {r['n']:7d} | {fmt(s, 8)} {fmt(r.get('min_ms'), 8)} {fmt(r.get('kernel_ms'), 8)} "
                  f"{fmt(r.get('grad_kernel_ms'), 8)} {fmt(ratio(s, k), 6, 2)} {fmt(r.get('grad_call_ms'), 8)} "
                  f"{fmt(r.get('new_ms'), 9, 1)} | "
                  f"{fmt(d.get('step_ms'), 8)} {fmt(ratio(d.get('step_ms'), s), 6, 1)} | "
                  f"{fmt(b.get('step_ms'), 9)} {fmt(ratio(b.get('step_ms'), s), 6, 1)} "
                  f"{fmt(a.get('step_ms'), 9)} {fmt(ratio(a.get('step_ms'), s), 6, 1)} | "
                  f"{r['loss_first']:19.13g} {fmte(ddiff)} {fmte(rel(b.get('loss_first'), r['loss_first']))} "
                  f"{fmte(rel(a.get('loss_first'), r['loss_first']))} | {fmte(tdx)} {fmte(tbp)} {fmt(agree, 5)}")
        print("  loss diffs: relative to gradsolve's step-1 loss at the suite's rtol (the meshes differ: local-error "
              "level); tight: the step-1 loss of every side at rtol 1e-12, same: all tight diffs <= 1e-8 (the same problem)")
        print("  kernel: the step's kernels (where the engine's trace sees them); g+r kern: a whole Grad call with the "
              "record on the same problem; /kern = step / (g+r kern, else kernel); call: that call's whole time; new: fit.New")
        for r in fits:
            d = dx.get((r["case"], r["n"]))
            if d and d.get("failed_trajectories"):
                print(f"  WARNING: Diffrax {r['case']} n={r['n']}: {d['failed_trajectories']} trajectories did not finish")
        print()

    calls = [r for r in gs if r["case"] in ("grad-record", "grad-mesh")]
    if calls:
        print(f"Whole Solver.Grad calls, Lorenz rtol 1e-6, host slices in and out (engine {calls[0]['engine']}), ms")
        print(f"{'case':<12} {'n':>8} {'steps':>6} | {'call':>8} {'min':>8} {'first':>9} | {'kernel':>8} {'copies':>8} "
              f"{'up MB':>8} {'down MB':>8} {'/kern':>6} | {'diffrax':>8} {'dx/call':>7}")
        for r in calls:
            d = dl.get(r["n"], {}) if r["case"] == "grad-record" else {}
            dg = d.get("grad_ms_median", d.get("grad_ms"))
            print(f"{r['case']:<12} {r['n']:8d} {r['steps_per_traj']:6.1f} | {fmt(r['ms'], 8)} {fmt(r.get('min_ms'), 8)} "
                  f"{fmt(r.get('first_ms'), 9)} | {fmt(r.get('kernel_ms'), 8)} {fmt(r.get('transfer_ms'), 8)} "
                  f"{fmt((r.get('upload_bytes') or 0) / 1e6, 8, 2)} {fmt((r.get('download_bytes') or 0) / 1e6, 8, 2)} "
                  f"{fmt(ratio(r['ms'], r.get('kernel_ms')), 6, 2)} | {fmt(dg, 8)} {fmt(ratio(dg, r['ms']), 7, 1)}")
        print()
    for r in bad:
        what = r.get("reason") if r.get("skipped") else r.get("error")
        print(f"{r['anchor']} {r.get('case')} {r.get('mode', '')} n={r.get('n')}: "
              f"{'skipped' if r.get('skipped') else 'failed'}: {str(what)[:300]}")
    if not gs and not ok:
        print("no rows found in", " ".join(dirs))
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
