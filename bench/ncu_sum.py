"""Summarise an Nsight Compute CSV log (ncu --page details --csv --log-file F).

Usage: python3 bench/ncu_sum.py F

Prints, a line per profiled launch, the metrics that bench/gpu_pending.sh's
parts read (duration, occupancy, registers, throughput, issue rate), then
the launch's eight largest issue-stall reasons where the log has the
smsp__average_warps_issue_stalled_* metrics.
"""
import collections
import csv
import sys

WANT = ("Duration", "Achieved Occupancy", "Theoretical Occupancy", "Registers Per Thread", "Block Size",
        "Grid Size", "Compute (SM) Throughput", "Memory Throughput", "Dynamic Shared Memory Per Block",
        "Executed Ipc Active", "Warp Cycles Per Issued Instruction", "Avg. Active Threads Per Warp",
        "Local Memory Spilling Requests", "Block Limit Registers", "Block Limit Shared Mem")
STALL = "smsp__average_warps_issue_stalled_"

try:
    rows = list(csv.reader(open(sys.argv[1])))
except OSError as e:
    print(e)
    sys.exit()
hdr = next((r for r in rows if "Metric Name" in r), None)
if hdr is None:
    print("no metrics:", " | ".join(" ".join(r) for r in rows[:5])[:400])
    sys.exit()
ii, mi, vi, ui = (hdr.index(k) for k in ("ID", "Metric Name", "Metric Value", "Metric Unit"))
by = collections.defaultdict(dict)
for r in rows[rows.index(hdr) + 1:]:
    if len(r) > vi:
        by[r[ii]][r[mi]] = (r[vi], r[ui])
for k, m in by.items():
    print("launch", k, "; ".join("%s %s%s" % (w, *m[w]) for w in WANT if w in m))
    st = []
    for name, (v, _) in m.items():
        if name.startswith(STALL):
            try:
                st.append((float(v.replace(",", "")), name[len(STALL):].replace("_per_issue_active.ratio", "")))
            except ValueError:
                pass
    if st:
        print("  stalls", ", ".join("%s %.2f" % (n, v) for v, n in sorted(st, reverse=True)[:8]))
