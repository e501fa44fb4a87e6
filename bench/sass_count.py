"""Count a SASS listing's instructions by opcode (cuobjdump -sass or nvdisasm output).

Usage: python3 bench/sass_count.py FILE...

Prints, for each file, the static count of the loads and stores by state
space (LD: generic, LDS: shared, LDG: global, LDL: local; the same for
stores), shuffles, barriers, calls and float64 arithmetic, then the 12
most frequent opcodes. Generic loads (LD, ST) of arrays that live in shared
memory wait on the long scoreboard where LDS waits on the short one.
"""
import collections
import re
import sys

INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)")
WANT = ("LD", "LDS", "LDG", "LDL", "ST", "STS", "STG", "STL", "ATOM", "ATOMS", "RED", "SHFL", "BAR", "WARPSYNC",
        "CALL", "RET", "DFMA", "DADD", "DMUL", "BRA")

for path in sys.argv[1:]:
    ops = collections.Counter()
    for line in open(path, errors="replace"):
        m = INSN.search(line)
        if m:
            ops[m.group(1)] += 1
    total = sum(ops.values())
    print("%s: %d instructions; %s" % (path.rsplit("/", 1)[-1], total, ", ".join("%s %d" % (k, ops[k]) for k in WANT if ops[k])))
    print("  top:", ", ".join("%s %d" % kv for kv in ops.most_common(12)))
