#!/usr/bin/env python3
"""Summarise the regions of a Go execution trace (gradsolve bench -trace).

Usage: go tool trace -d=parsed FILE | scripts/trace_regions.py [SKIP]

Prints, per region name, the count and the median, min and max duration
in ms, in order of first appearance; SKIP (default 0) leading regions of
each name are left out (warm-up calls).
"""
import re, statistics, sys

skip = int(sys.argv[1]) if len(sys.argv) > 1 else 0
pat = re.compile(r'G=(\d+) Region(Begin|End) Time=(\d+) .*Type="([^"]+)"')
open_, durs, order = {}, {}, []
for line in sys.stdin:
    m = pat.search(line)
    if not m:
        continue
    g, kind, t, name = m.group(1), m.group(2), int(m.group(3)), m.group(4)
    key = (g, name)
    if kind == "Begin":
        open_.setdefault(key, []).append(t)
    elif open_.get(key):
        t0 = open_[key].pop()
        if name not in durs:
            durs[name] = []
            order.append(name)
        durs[name].append((t - t0) / 1e6)
print(f"{'region':24} {'n':>5} {'median ms':>10} {'min':>9} {'max':>9}")
for name in order:
    d = durs[name][skip:] or durs[name]
    print(f"{name:24} {len(d):5d} {statistics.median(d):10.3f} {min(d):9.3f} {max(d):9.3f}")
