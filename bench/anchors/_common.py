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


# --- training steps (diffrax_train.py, torchdiffeq_train.py) ---------------

TRAIN_DUMP_FORMAT = "gradsolve/bench-train"


def load_train_dump(path):
    """The problem file of `gradsolve bench -suite train|gpu-train -dump FILE` (bench.TrainDump)."""
    with open(path) as fh:
        d = json.load(fh)
    if d.get("format") != TRAIN_DUMP_FORMAT:
        raise ValueError(f"{path}: format {d.get('format')!r}, want {TRAIN_DUMP_FORMAT!r} "
                         f"(write it with gradsolve bench -suite train -dump)")
    nd = d.get("neural")
    if nd is not None:
        sizes = nd["sizes"]
        nparams = sum(sizes[k] * sizes[k + 1] + sizes[k + 1] for k in range(len(sizes) - 1))
        if len(nd["weights"]) != nparams:
            raise ValueError(f"{path}: {len(nd['weights'])} weights, sizes {sizes} need {nparams}")
        if sizes[0] != sizes[-1] or len(nd["y0"]) % sizes[0] or len(nd["y0"]) != len(nd["targets"]):
            raise ValueError(f"{path}: inconsistent neural sizes, y0 or targets")
        for act in (nd["hidden_activation"], nd["output_activation"]):
            if act not in ("tanh", "identity"):
                raise ValueError(f"{path}: activation {act!r} not supported here")
    ld = d.get("lorenz_fit")
    if ld is not None:
        for c in ld["cases"]:
            if len(c["targets"]) != 3 * c["n"]:
                raise ValueError(f"{path}: Lorenz calibration n={c['n']}: {len(c['targets'])} targets")
    return d


def time_train_steps(step, state, steps, budget_s=None):
    """Run up to `steps` training steps, state, loss = step(state), the first untimed.

    step must leave its results computed (block_until_ready, a synchronised
    device) and return the loss as a Python float, read back inside the
    step as a training loop does. The first call is the warm-up (the
    compile of a jitted step, step 1 of the fit: its loss is the step-1
    loss); the others are timed one by one. If budget_s is given, the timed
    steps stop early once the next would overrun it (at least one is run).
    Returns dict(warmup_s, times_ms, median_ms, best_ms, losses, state,
    steps_done).
    """
    t = time.perf_counter()
    state, loss = step(state)
    warm = time.perf_counter() - t
    losses = [float(loss)]
    times = []
    start = time.perf_counter()
    for _ in range(max(1, steps - 1)):
        if times and budget_s is not None and time.perf_counter() - start + min(times) / 1e3 > budget_s:
            break
        t = time.perf_counter()
        state, loss = step(state)
        times.append((time.perf_counter() - t) * 1e3)
        losses.append(float(loss))
    return dict(warmup_s=warm, times_ms=times, median_ms=median(times), best_ms=min(times), losses=losses,
                state=state, steps_done=len(losses))


def median(xs):
    """Median of a non-empty list (the mean of the middle two for an even length), NaN if empty."""
    s = sorted(xs)
    if not s:
        return float("nan")
    m = len(s) // 2
    return s[m] if len(s) % 2 else 0.5 * (s[m - 1] + s[m])


def rel_diff(a, b):
    """|a - b| / |b| (|a - b| if b == 0; None if either is None)."""
    if a is None or b is None:
        return None
    return abs(a - b) / abs(b) if b else abs(a - b)


def loss_checks(row, gs, tol=1e-8):
    """Add gradsolve's losses from a dump result gs and the relative differences to row."""
    if gs is None:
        return row
    row["gradsolve_loss_first"] = gs.get("loss_first")
    row["gradsolve_loss_last"] = gs.get("loss_last")
    row["gradsolve_loss_final"] = gs.get("loss_final")
    row["gradsolve_step_ms"] = gs.get("step_ms")
    row["loss_first_rel_diff"] = rel_diff(row.get("loss_first"), gs.get("loss_first"))
    row["loss_last_rel_diff"] = rel_diff(row.get("loss_last"), gs.get("loss_last"))
    row["loss_final_rel_diff"] = rel_diff(row.get("loss_final"), gs.get("loss_final"))
    d = row["loss_first_rel_diff"]
    row["loss_first_agrees"] = d is not None and d <= tol
    row["loss_tol"] = tol
    # The same problem solved tightly on both sides (rtol 1e-12): agreement
    # to tol shows that both fit the same weights, data and initial values.
    row["gradsolve_loss_first_tight"] = gs.get("loss_first_tight")
    dt = rel_diff(row.get("loss_first_tight"), gs.get("loss_first_tight"))
    row["loss_tight_rel_diff"] = dt
    row["same_problem"] = dt is not None and dt <= tol
    return row


def setup_torch(device, cpu_threads=0):
    """Import torch, choose the device ("auto", "cpu" or "cuda") and the CPU threads.

    "cuda" fails without a usable GPU; "auto" takes one if there is one.
    cpu_threads > 0 pins the process to its first cpu_threads CPUs and sets
    torch's intra-op threads alike. Returns (torch, dev, env).
    """
    if cpu_threads and cpu_threads > 0:
        if not hasattr(os, "sched_setaffinity"):
            raise RuntimeError("--cpu-threads needs os.sched_setaffinity (Linux)")
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:cpu_threads]))
    import torch

    if cpu_threads and cpu_threads > 0:
        torch.set_num_threads(cpu_threads)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("asked for cuda, torch sees no GPU")
    dev = torch.device(device)
    env = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torchdiffeq": _version("torchdiffeq"),
        "numpy": _version("numpy"),
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else _platform.processor() or "cpu",
        "cuda": getattr(torch.version, "cuda", None),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
        "machine": _platform.machine(),
    }
    return torch, dev, env
