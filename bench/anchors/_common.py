"""Shared helpers of the Diffrax anchor scripts in this folder.

The scripts time Diffrax (JAX) on the protocols of package bench so that
gradsolve's numbers have an external anchor measured on the same machine.
This module holds what they share: choosing the JAX platform before JAX is
imported, timing (one warm-up, then best and median of reps, with
block_until_ready), the step probe that sizes RecursiveCheckpointAdjoint, the
per-cell time budget, the error measure of package bench and JSON-lines
output.

Conventions (the same as package bench): the achieved error is the median over
an evenly spaced subsample of trajectories of ||y - y_ref||_2 / ||y_ref||_2 of
the final state; the subsample indices are round(j*(n-1)/(k-1)), rounding
halves away from zero as Go's math.Round does, so both sides sample the same
trajectories.
"""

from __future__ import annotations

import json
import math
import os
import platform as _platform
import sys
import time

PROBE_MAX_STEPS = 100_000


def log(msg):
    """Progress message to stderr, flushed at once."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def emit(obj, out=None):
    """Write one JSON object as one line to stdout (and to the file out)."""
    line = json.dumps(obj, sort_keys=False, default=_json_default)
    print(line, flush=True)
    if out is not None:
        out.write(line + "\n")
        out.flush()


def _json_default(x):
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return x.item()
        if isinstance(x, np.ndarray):
            return x.tolist()
    except ImportError:
        pass
    return repr(x)


def setup_jax(platform, cpu_threads=0, mem_fraction=None):
    """Choose the JAX platform and CPU threading, import JAX and enable float64.

    Must run before anything else imports jax. platform is "cpu" or "gpu".
    cpu_threads > 0 pins the process to the first cpu_threads CPUs it may use
    (os.sched_setaffinity; XLA sizes its CPU thread pool from the affinity
    mask); 0 keeps every CPU. XLA_FLAGS is left as the caller set it (XLA
    aborts on a flag it does not know, so none is added here). Returns
    (jax, env) where env describes the machine and the settings, for the
    output's header line.
    """
    if "jax" in sys.modules:
        raise RuntimeError("setup_jax must run before jax is imported")
    affinity_before = None
    if hasattr(os, "sched_getaffinity"):
        affinity_before = sorted(os.sched_getaffinity(0))
    if cpu_threads and cpu_threads > 0:
        if affinity_before is None:
            raise RuntimeError("--cpu-threads needs os.sched_setaffinity (Linux)")
        os.sched_setaffinity(0, set(affinity_before[:cpu_threads]))
    if platform == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
    elif platform == "gpu":
        # Only CUDA: a missing GPU must be an error, never a silent CPU run.
        os.environ["JAX_PLATFORMS"] = "cuda"
        if mem_fraction is not None:
            os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", str(mem_fraction))
    else:
        raise ValueError(f"platform {platform!r}: want cpu or gpu")

    import jax

    jax.config.update("jax_enable_x64", True)
    devs = jax.devices()
    want = {"cpu"} if platform == "cpu" else {"gpu", "cuda"}
    if not devs or devs[0].platform not in want:
        raise RuntimeError(f"asked for {platform}, JAX runs on {devs}")
    x64 = str(jax.numpy.asarray(1.0).dtype) == "float64"
    if not x64:
        raise RuntimeError("float64 could not be enabled in JAX")
    env = {
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "diffrax": _version("diffrax"),
        "equinox": _version("equinox"),
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
        "platform": platform,
        "device": str(devs[0].device_kind) if hasattr(devs[0], "device_kind") else str(devs[0]),
        "devices": len(devs),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "machine": _platform.machine(),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "x64": x64,
    }
    return jax, env


def _version(mod):
    try:
        m = __import__(mod)
        return getattr(m, "__version__", "?")
    except Exception as exc:  # noqa: BLE001 - report, do not fail
        return f"unavailable ({type(exc).__name__})"


def subsample(n, k):
    """min(n, k) evenly spaced indices in [0, n), first and last included (as package bench)."""
    if k <= 0 or k >= n:
        return list(range(n))
    if k == 1:
        return [0]
    return [int(math.floor(j * (n - 1) / (k - 1) + 0.5)) for j in range(k)]


def median_rel_err(y, ref):
    """Median over rows of ||y_i - ref_i||_2 / ||ref_i||_2 (absolute if ref_i = 0)."""
    import numpy as np

    y = np.asarray(y, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    num = np.sqrt(np.sum((y - ref) ** 2, axis=1))
    den = np.sqrt(np.sum(ref**2, axis=1))
    rel = np.where(den > 0, num / np.where(den > 0, den, 1.0), num)
    if not np.all(np.isfinite(rel)):
        return float("inf")
    return float(np.median(rel))


def block(jax, x):
    return jax.block_until_ready(x)


def time_fn(jax, fn, args, reps, budget_s=None):
    """Time fn(*args): one warm-up (compile included), then up to reps timed calls.

    Returns dict(warmup_s, best_ms, median_ms, reps_done, out) where out is the
    warm-up's result. If budget_s is given and the warm-up shows that reps calls
    would overrun it, fewer reps are run (at least one) and reps_done says so.
    """
    t = time.perf_counter()
    out = block(jax, fn(*args))
    warm = time.perf_counter() - t
    times = []
    start = time.perf_counter()
    for r in range(max(1, reps)):
        if r > 0 and budget_s is not None:
            spent = time.perf_counter() - start
            if spent + min(times) / 1e3 > budget_s:
                break
        t = time.perf_counter()
        block(jax, fn(*args))
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    med = times[len(times) // 2] if len(times) % 2 else 0.5 * (times[len(times) // 2 - 1] + times[len(times) // 2])
    return dict(warmup_s=warm, best_ms=times[0], median_ms=med, reps_done=len(times), out=out)


def sized_adjoint(diffrax, attempts):
    """max_steps = checkpoints = attempts + 1, the protocol's RecursiveCheckpointAdjoint."""
    steps = int(attempts) + 1
    return steps, diffrax.RecursiveCheckpointAdjoint(checkpoints=steps)


class Budget:
    """Predicts a cell's wall time from cells already run and skips those that would overrun.

    Cells are run in order of increasing n for every tolerance. A cell's cost is
    predicted from the last measured cell with the same key (tolerance) and a
    smaller n, scaled linearly in n (an upper bound where the device is not yet
    saturated, about right where it is), plus the compile times seen so far.
    A cell whose predecessor was skipped or failed is skipped as well.
    """

    def __init__(self, max_seconds):
        self.max_seconds = max_seconds
        self.measured = {}  # key -> (n, per-call seconds summed over timed functions, probe s)
        self.blocked = {}  # key -> reason
        self.compile_s = 0.0

    def check(self, key, n, calls):
        """Return (ok, predicted_s, reason). calls is the number of timed calls per function."""
        if self.max_seconds is None or self.max_seconds <= 0:
            return True, None, ""
        if key in self.blocked:
            return False, None, self.blocked[key]
        if key not in self.measured:
            return True, None, ""
        n0, per_call, probe = self.measured[key]
        scale = max(1.0, n / n0)
        predicted = self.compile_s + scale * (probe + calls * per_call)
        if predicted > self.max_seconds:
            return False, predicted, f"predicted {predicted:.0f} s > --max-seconds {self.max_seconds:g}"
        return True, predicted, ""

    def record(self, key, n, per_call_s, probe_s, compile_s):
        self.measured[key] = (n, per_call_s, probe_s)
        self.compile_s = max(self.compile_s, compile_s)

    def block_key(self, key, reason):
        self.blocked[key] = reason


def float_list(s):
    return [float(x) for x in s.replace(",", " ").split()]


def int_list(s):
    return [int(float(x)) for x in s.replace(",", " ").split()]
