#!/usr/bin/env python3
"""Where a generated kernel's compile time goes: NVRTC's front end (CUDA C++
to PTX) against ptxas (PTX to machine code), per source and variant.

Usage (on the GPU host; the sources come from TestSizeDiag:
`GS_SIZE_DIAG=DIR go test ./cuda -run TestSizeDiag`):

    python3 bench/ptxas_profile.py -out LOGDIR [-variants base,noinline,...] [-nvrtc-time] SRC.cu ...

For each source and variant it compiles the source to PTX with NVRTC (the
engine's options: --fmad=false -std=c++17 -default-device, for
compute_90), then runs ptxas on that PTX at -O3 (the default) and -O1, and
prints one JSON row per (source, variant): the front end's seconds, the
PTX's bytes, each ptxas run's seconds, and ptxas -v's registers, spill
bytes and stack frame of the kernel (the largest of its functions).

Variants change the source or the NVRTC options; join several with '+'
(minimal+splitc):
  base      as generated;
  noinline  every program's function kept a call (GS_FUNC __noinline__):
            ptxas compiles several functions instead of one inlined whole;
  lurolled  the LU factor and solve templates' loops kept loops
            (#pragma unroll 1), not unrolled over the state dimension;
  both      noinline and lurolled;
  inlined   a split kernel's step programs inlined again (GS_STEP
            __device__): the kernel as it was before kernelgen split it
            (Config.SplitFrom); the same as base for an unsplit kernel;
  minimal   NVRTC's -minimal (12.4+: no texture, surface or device-runtime
            declarations);
  splitc    NVRTC's --split-compile=0 (optimisation passes in parallel
            threads, per function: more gain on split kernels);
  pch       the prelude as a header (#include "gs_prelude.cuh", -I) with
            automatic precompiled headers (NVRTC 12.8+: --pch, --pch-dir):
            compiled twice, nvrtc_ptx_s is the second compile's (the
            header read from the PCH), pch_create_s the first's, pch_log
            what NVRTC said of the PCH.
-nvrtc-time adds --time=FILE to each compile and puts the table of
NVRTC's phases (front end, optimiser, ptxas) in the row (nvrtc_time).
"""
import argparse
import concurrent.futures as cf
import ctypes
import glob
import json
import os
import re
import subprocess
import sys
import time

OPTS = ["--fmad=false", "-std=c++17", "-default-device"]


def nvrtc_lib():
    for pat in ("/usr/local/cuda/lib64/libnvrtc.so*", "/usr/local/cuda/targets/*/lib/libnvrtc.so*"):
        for p in sorted(glob.glob(pat)):
            if "builtins" in p or "alt" in p:
                continue
            try:
                return ctypes.CDLL(p)
            except OSError:
                pass
    raise SystemExit("no libnvrtc found")


def to_ptx(src, name, arch, extra, want_log=False):
    lib = nvrtc_lib()
    prog = ctypes.c_void_p()
    r = lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None, None)
    if r:
        return None, "create %d" % r, 0.0
    opts = ["--gpu-architecture=compute_%s" % arch] + OPTS + extra
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    t = time.perf_counter()
    r = lib.nvrtcCompileProgram(prog, len(opts), arr)
    dt = time.perf_counter() - t
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    if r:
        return None, "compile %d: %s" % (r, log.value.decode(errors="replace")[-2000:]), dt
    lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
    ptx = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetPTX(prog, ptx)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return ptx.value, log.value.decode(errors="replace") if want_log else "", dt


def rolled(src):
    """The LU templates' for loops preceded by #pragma unroll 1."""
    out = []
    inside = False
    for line in src.split("\n"):
        if re.match(r"GS_DEVICE void gs_lu_(factor|solve|solve_t|shift)\(", line):
            inside = True
        elif inside and line.startswith("}"):
            inside = False
        if inside and re.match(r"\s*for \(", line):
            out.append("#pragma unroll 1")
        out.append(line)
    return "\n".join(out)


PRELUDE_START = "#ifndef GS_PRELUDE_CUH\n"
PRELUDE_END = "#endif  // GS_PRELUDE_CUH\n"


def variant(src, v):
    """The source, the further NVRTC options and whether to use a PCH of
    variant v (names joined by '+')."""
    parts = v.split("+")
    known = {"base", "noinline", "lurolled", "both", "inlined", "minimal", "splitc", "pch"}
    bad = [p for p in parts if p not in known]
    if bad:
        raise SystemExit("unknown variant %s" % "+".join(bad))
    extra = []
    if "noinline" in parts or "both" in parts:
        src = "#define GS_FUNC __device__ __noinline__\n" + src
    if "lurolled" in parts or "both" in parts:
        src = rolled(src)
    if "inlined" in parts:
        src = "#define GS_STEP __device__\n" + src
    if "minimal" in parts:
        extra.append("-minimal")
    if "splitc" in parts:
        extra.append("--split-compile=0")
    return src, extra, "pch" in parts


def pch_split(src):
    """The source with its prelude replaced by #include "gs_prelude.cuh",
    and the prelude; None if it has none."""
    a = src.find(PRELUDE_START)
    b = src.find(PRELUDE_END)
    if a < 0 or b < a:
        return None, None
    b += len(PRELUDE_END)
    return src[:a] + '#include "gs_prelude.cuh"\n' + src[b:], src[a:b]


VRE = re.compile(r"Compiling entry function '(\w+)'|Function properties for (\w+)|(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads|Used (\d+) registers")


def ptxas(ptxfile, level, timeout):
    cmd = ["ptxas", "-arch=sm_90", "-O%d" % level, "-v", ptxfile, "-o", ptxfile + ".O%d.cubin" % level]
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"s": None, "error": "timeout %d s" % timeout}
    dt = time.perf_counter() - t
    res = {"s": round(dt, 2)}
    if p.returncode:
        res["error"] = p.stderr[-1000:]
        return res
    funcs = {}
    cur = None
    for line in p.stderr.splitlines():
        m = re.search(r"Function properties for (\S+)", line) or re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            cur = m.group(1)
            funcs.setdefault(cur, {})
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur:
            funcs[cur].update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            funcs[cur]["regs"] = int(m.group(1))
    res["functions"] = len(funcs)
    res["spill_st"] = sum(f.get("spill_st", 0) for f in funcs.values())
    res["stack_max"] = max([f.get("stack", 0) for f in funcs.values()] or [0])
    res["regs_max"] = max([f.get("regs", 0) for f in funcs.values()] or [0])
    return res


def one(path, v, outdir, timeout, levels, nvrtc_time):
    name = os.path.basename(path)[:-3]
    src, extra, pch = variant(open(path).read(), v)
    row = {"source": name, "variant": v, "src_bytes": len(src)}
    tfile = os.path.join(outdir, "%s.%s.time.csv" % (name, v))
    if nvrtc_time:
        extra = extra + ["--time=" + tfile]
    if pch:
        body, header = pch_split(src)
        if body is None:
            row["error"] = "no prelude to precompile"
            return row
        inc = os.path.join(outdir, "pch.%s.%s" % (name, v))
        os.makedirs(inc, exist_ok=True)
        open(os.path.join(inc, "gs_prelude.cuh"), "w").write(header)
        extra = extra + ["--include-path=" + inc, "--pch", "--pch-dir=" + inc]
        ptx, log1, dt1 = to_ptx(body, name + ".cu", "90", extra, True)
        row["pch_create_s"] = round(dt1, 2)
        if ptx is None:
            row["error"] = log1
            return row
        ptx, log2, dt = to_ptx(body, name + ".cu", "90", extra, True)
        row["pch_log"] = [l for l in (log1 + log2).splitlines() if "pch" in l.lower() or "PCH" in l][:6]
    else:
        ptx, err, dt = to_ptx(src, name + ".cu", "90", extra)
    row["nvrtc_ptx_s"] = round(dt, 2)
    if nvrtc_time and os.path.exists(tfile):
        row["nvrtc_time"] = open(tfile).read()[-3000:]
    if ptx is None:
        row["error"] = err if not pch else log2
        return row
    row["ptx_bytes"] = len(ptx)
    f = os.path.join(outdir, "%s.%s.ptx" % (name, v))
    open(f, "wb").write(ptx)
    for lv in levels:
        row["ptxas_O%d" % lv] = ptxas(f, lv, timeout)
    for suffix in [".O%d.cubin" % lv for lv in levels]:
        try:
            os.remove(f + suffix)
        except OSError:
            pass
    os.remove(f)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-out", required=True)
    ap.add_argument("-variants", default="base")
    ap.add_argument("-levels", default="3,1")
    ap.add_argument("-timeout", type=int, default=200)
    ap.add_argument("-workers", type=int, default=8)
    ap.add_argument("-nvrtc-time", action="store_true")
    ap.add_argument("srcs", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    levels = [int(x) for x in a.levels.split(",")]
    jobs = [(s, v) for s in a.srcs for v in a.variants.split(",")]
    with cf.ProcessPoolExecutor(a.workers) as ex:
        futs = [ex.submit(one, s, v, a.out, a.timeout, levels, a.nvrtc_time) for s, v in jobs]
        for fu in futs:
            try:
                row = fu.result()
            except Exception as e:  # noqa: BLE001
                row = {"error": repr(e)}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
