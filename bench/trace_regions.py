#!/usr/bin/env python3
"""Summarise the regions of a gradsolve execution trace, per region name.

`gradsolve bench ... -trace FILE` (and `cuda.test -test.trace FILE`) writes a
Go execution trace whose regions name the phases of each call (ode.Grad.check,
ode.Grad.run, ode.Grad.results, cuda.prepare, cuda.fill, cuda.batch,
cuda.scatter, cuda.finish, ...). This prints each name's count, median, 10th
and 90th percentiles and total, in milliseconds:

    go tool trace -d=parsed FILE | python3 bench/trace_regions.py
"""
import collections
import re
import statistics
import sys

PAT = re.compile(r'G=(\d+) (RegionBegin|RegionEnd) Time=(\d+) Task=\d+ Type="([^"]+)"')


def main():
    begun = collections.defaultdict(list)  # (goroutine, name) -> open begin times
    durs = collections.defaultdict(list)
    for line in sys.stdin:
        m = PAT.search(line)
        if not m:
            continue
        g, kind, t, name = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        if kind == "RegionBegin":
            begun[(g, name)].append(t)
        elif begun[(g, name)]:
            durs[name].append(t - begun[(g, name)].pop())
    if not durs:
        sys.exit("trace_regions: no regions on stdin (pipe `go tool trace -d=parsed FILE` in)")
    for name, d in sorted(durs.items()):
        s = sorted(d)
        print("%-24s n=%6d  median %9.4f ms  p10 %9.4f  p90 %9.4f  total %10.2f" % (
            name, len(s), statistics.median(s) / 1e6, s[len(s) // 10] / 1e6, s[len(s) * 9 // 10] / 1e6, sum(s) / 1e6))


if __name__ == "__main__":
    main()
