#!/usr/bin/env python3
"""Summary of the GPU suite's final run: gradsolve's GPU engine beside its
hand-written kernels and Diffrax, and the CPU suites.

    python3 bench/gpu_summary.py DIR [DIR ...]

reads every *.jsonl file of the folders (the logs bench/gpu_final.sh writes
under $OUT, from either half or both) and prints the tables of the targets of
the CUDA engine: the gradient with the record against Diffrax (>= 200x) and
against the hand-written fused kernel (<= 1.25x), the forward solve against the
hand-written kernel (<= 1.25x), the gradient on a reused mesh against the
forward solve (<= 3x), Robertson against Kvaerno5 at matched achieved error
(>= 100x), the neural gradient against Diffrax (>= 10x). Times are ms; "kern"
is the device time of the kernels, "call" the whole ode.Solver call.
"""

import glob
import json
import math
import os
import sys


def rows(dirs):
    out = []
    for d in dirs:
        for f in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
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
    if isinstance(x, float):
        return f"{x:{w}.{p}f}" if abs(x) < 1e5 else f"{x:{w}.3g}"
    return str(x).rjust(w)


def ratio(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


def main(dirs):
    rs = rows(dirs)
    gs = [r for r in rs if "engine" in r and "grad_record_ms" in r]
    dx = [r for r in rs if "platform" in r and "grad_ms" in r and not r.get("skipped") and "error" not in r]

    lor = [r for r in gs if r["suite"] == "lorenz"]
    if lor:
        dxl = {(r["n"], r["rtol"]): r for r in dx if r.get("suite") == "lorenz" and r.get("platform") == "gpu"}
        print("Lorenz on the GPU (gradsolve engine %s; Diffrax GPU best of reps)" % lor[0]["engine"])
        print(f"{'n':>8} {'rtol':>6} {'steps':>6} | {'fwd':>8} {'g+r':>8} {'grad':>8} | {'hand-f':>8} {'hand-g':>8} | "
              f"{'fw/hd':>6} {'g+r/hd':>6} {'grd/fw':>6} | {'call-g+r':>9} | {'diffrax':>9} {'dx/g+r':>8} {'dx/call':>8} | "
              f"{'err':>8} {'dx-err':>8}")
        for r in lor:
            d = dxl.get((r["n"], r["rtol"]), {})
            dg = d.get("grad_ms")
            print(f"{r['n']:8d} {r['rtol']:6.0e} {r['steps_per_traj']:6.1f} | {fmt(r['forward_ms'], 8)} "
                  f"{fmt(r['grad_record_ms'], 8)} {fmt(r['grad_ms'], 8)} | {fmt(r.get('hand_forward_ms'), 8)} "
                  f"{fmt(r.get('hand_grad_ms'), 8)} | {fmt(r.get('forward_over_hand'), 6, 2)} "
                  f"{fmt(r.get('grad_record_over_hand'), 6, 2)} {fmt(r.get('grad_over_forward'), 6, 2)} | "
                  f"{fmt(r['grad_record_call_ms'], 9)} | {fmt(dg, 9)} {fmt(ratio(dg, r['grad_record_ms']), 8, 0)} "
                  f"{fmt(ratio(dg, r['grad_record_call_ms']), 8, 1)} | {r['median_rel_err']:8.1e} "
                  f"{d.get('median_rel_err', float('nan')):8.1e}")
        print()

    rob = [r for r in gs if r["suite"] == "robertson"]
    if rob:
        kv = [r for r in dx if r.get("suite") == "robertson"]
        print("Robertson, Rodas5P on the GPU vs Diffrax Kvaerno5 (GPU) at the nearest achieved error")
        print(f"{'n':>6} {'rtol':>6} {'steps':>6} | {'fwd':>8} {'g+r':>8} {'grad':>8} {'call-g+r':>9} | {'err':>8} | "
              f"{'kv-rtol':>7} {'kv-err':>8} {'kv-grad':>9} {'kv/g+r':>8} {'kv/call':>8}")
        for r in rob:
            best = None
            for k in kv:
                if k.get("n") != r["n"] or not k.get("median_rel_err"):
                    continue
                dist = abs(math.log10(k["median_rel_err"]) - math.log10(max(r["median_rel_err"], 1e-300)))
                if best is None or dist < best[0]:
                    best = (dist, k)
            k = best[1] if best else {}
            print(f"{r['n']:6d} {r['rtol']:6.0e} {r['steps_per_traj']:6.1f} | {fmt(r['forward_ms'], 8)} "
                  f"{fmt(r['grad_record_ms'], 8)} {fmt(r['grad_ms'], 8)} {fmt(r['grad_record_call_ms'], 9)} | "
                  f"{r['median_rel_err']:8.1e} | {k.get('rtol', float('nan')):7.0e} {k.get('median_rel_err', float('nan')):8.1e} "
                  f"{fmt(k.get('grad_ms'), 9)} {fmt(ratio(k.get('grad_ms'), r['grad_record_ms']), 8, 0)} "
                  f"{fmt(ratio(k.get('grad_ms'), r['grad_record_call_ms']), 8, 1)}")
        print()

    neu = [r for r in gs if r["suite"] == "neural"]
    dxn = [r for r in dx if r.get("suite") == "neural"]
    if neu or dxn:
        print("Neural (MLP 2-32-32-2, 1218 shared weights): gradient with the record")
        print(f"{'B':>7} {'platform':>8} | {'gs-kern':>9} {'gs-call':>9} | {'diffrax':>9} {'dx/kern':>8} {'dx/call':>8} | "
              f"{'dx-vs-gs grad diff':>18}")
        for r in neu:
            d = next((x for x in dxn if x.get("b") == r["n"] and x.get("platform") == "gpu"), {})
            dg = d.get("grad_ms")
            print(f"{r['n']:7d} {'gpu':>8} | {fmt(r['grad_record_ms'], 9)} {fmt(r['grad_record_call_ms'], 9)} | "
                  f"{fmt(dg, 9)} {fmt(ratio(dg, r['grad_record_ms']), 8, 1)} {fmt(ratio(dg, r['grad_record_call_ms']), 8, 1)} | "
                  f"{fmt(d.get('grad_max_rel_diff'), 18, 6)}")
        cpu = [r for r in rs if "grad_record1_ms" in r and "b" in r]
        for r in cpu:
            d = next((x for x in dxn if x.get("b") == r["b"] and x.get("platform") == "cpu"), {})
            dg = d.get("grad_ms")
            print(f"{r['b']:7d} {'cpu' + str(r.get('workers', '')):>8} | {'-':>9} {fmt(r['grad_record_ms'], 9)} | "
                  f"{fmt(dg, 9)} {'-':>8} {fmt(ratio(dg, r['grad_record_ms']), 8, 1)} | {fmt(d.get('grad_max_rel_diff'), 18, 6)}")
        print()

    cl = [r for r in rs if "forward1_ms" in r and "baseline_ms" in r]
    if cl:
        print("Lorenz on the CPU (gradsolve, %s goroutines)" % cl[0].get("workers"))
        print(f"{'n':>8} {'rtol':>6} | {'fwd':>9} {'base':>9} {'g+r':>9} {'grad':>9} | {'fwd1':>9} {'base1':>9}")
        for r in cl:
            print(f"{r['n']:8d} {r['rtol']:6.0e} | {fmt(r['forward_ms'])} {fmt(r['baseline_ms'])} "
                  f"{fmt(r['grad_record_ms'])} {fmt(r['grad_ms'])} | {fmt(r['forward1_ms'])} {fmt(r['baseline1_ms'])}")
        print()
    st = [r for r in rs if "problem" in r and "method" in r and "grad_record_ms" in r]
    if st:
        print("Stiff suite on the CPU")
        print(f"{'problem':>10} {'method':>13} {'n':>6} {'rtol':>6} {'workers':>7} | {'fwd':>9} {'g+r':>9} {'grad':>9} | {'err':>8}")
        for r in st:
            print(f"{r['problem']:>10} {r['method']:>13} {r['n']:6d} {r['rtol']:6.0e} {r['workers']:7d} | "
                  f"{fmt(r['forward_ms'])} {fmt(r['grad_record_ms'])} {fmt(r['grad_ms'])} | {r['median_rel_err']:8.1e}")
        print()


if __name__ == "__main__":
    main(sys.argv[1:] or ["."])
