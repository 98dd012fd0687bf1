"""This machine's peaks for the roofline: FLOP/s from a BLAS matrix product and memory
bandwidth from a STREAM-style triad, measured once per machine and backend and cached in the
user's cache directory (`peaks(..., remeasure=True)` measures again; `cache_path()` says
where they are kept; it is written whole, files.py).

  FLOP/s     float32 matrix product, n = 2048 on CPU (NumPy's BLAS on every core) or
             8192 on GPU (CuPy's cuBLAS): 2 n^3 FLOPs per product, the best of five
  bandwidth  a = b + s * c over three float64 arrays of 2^24 elements (128 MiB each, past
             the last-level caches of most machines), one parallel numba loop on CPU or one
             CuPy elementwise kernel on GPU: 24 bytes per element, the best of five (STREAM
             counts the bytes a triad reads and writes, as here)
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..files import write_atomic

GEMM_N = {"cpu": 2048, "gpu": 8192}
TRIAD_N = 1 << 24
REPEATS = 5


@dataclass(frozen=True)
class Peaks:
    """The measured peaks of one machine and backend."""

    machine: str  # what the peaks were measured on (host, processor, cores, device)
    backend: str  # "cpu" or "gpu"
    flops: float  # FLOP/s of the float32 matrix product
    bandwidth: float  # bytes/s of the triad
    how: str  # how they were measured
    measured_at: str  # ISO date and time

    @property
    def ridge(self) -> float:
        """The arithmetic intensity (FLOPs per byte) where the roofline's two parts meet."""
        return self.flops / self.bandwidth

    def __str__(self) -> str:
        return (f"{self.machine} ({self.backend}): {self.flops / 1e9:,.1f} GFLOP/s, "
                f"{self.bandwidth / 1e9:,.1f} GB/s, ridge {self.ridge:.1f} FLOPs/byte "
                f"(measured {self.measured_at})")


def machine(backend: str = "cpu") -> str:
    """A name for this machine as `backend` sees it: host, processor and cores (and the GPU)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    name = f"{platform.node()} · {cpu} · {os.cpu_count()} cores"
    if backend == "gpu":
        import cupy as cp

        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        name += f" · {props['name'].decode()}"
    return name


def cache_path() -> Path:
    """Where measured peaks are kept: the user's cache directory (XDG on Linux)."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("gambit-explorer")) / "peaks.json"


def _best(fn: Callable[[], Any], sync: Callable[[], None]) -> float:
    fn()
    sync()
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def _triad_cpu() -> Callable[[np.ndarray, np.ndarray, np.ndarray, float], None]:
    import numba

    @numba.njit(parallel=True, cache=False)
    def triad(a: np.ndarray, b: np.ndarray, c: np.ndarray, s: float) -> None:  # pragma: no cover
        for i in numba.prange(a.shape[0]):
            a[i] = b[i] + s * c[i]

    return triad


def _measure_cpu() -> tuple[float, float, str]:
    n = GEMM_N["cpu"]
    rng = np.random.default_rng(0)
    x, y = rng.random((n, n), np.float32), rng.random((n, n), np.float32)
    gemm = _best(lambda: x @ y, lambda: None)
    a, b, c = (np.full(TRIAD_N, k, np.float64) for k in (0.0, 1.0, 2.0))
    triad = _triad_cpu()
    stream = _best(lambda: triad(a, b, c, 3.0), lambda: None)
    how = (f"float32 matmul {n}x{n} (NumPy's BLAS), triad over 3 x {TRIAD_N:,} float64 "
           f"(numba, parallel)")
    return 2 * n**3 / gemm, 24 * TRIAD_N / stream, how


def _measure_gpu() -> tuple[float, float, str]:
    import cupy as cp

    n = GEMM_N["gpu"]
    x = cp.random.random((n, n), dtype=cp.float32)
    y = cp.random.random((n, n), dtype=cp.float32)
    sync = cp.cuda.Device().synchronize
    gemm = _best(lambda: x @ y, sync)
    triad = cp.ElementwiseKernel("float64 b, float64 c, float64 s", "float64 a",
                                 "a = b + s * c", "gambit_triad")
    a = cp.zeros(TRIAD_N, cp.float64)
    b, c = cp.ones(TRIAD_N, cp.float64), cp.full(TRIAD_N, 2.0, cp.float64)
    stream = _best(lambda: triad(b, c, 3.0, a), sync)
    how = (f"float32 matmul {n}x{n} (cuBLAS via CuPy), triad over 3 x {TRIAD_N:,} float64 "
           f"(one CuPy elementwise kernel)")
    return 2 * n**3 / gemm, 24 * TRIAD_N / stream, how


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def peaks(backend: str = "cpu", remeasure: bool = False, path: Path | None = None,
          at_least: Peaks | None = None) -> Peaks:
    """This machine's peaks for `backend` ("cpu", or "gpu"; other backends run on one of
    them: "reference", "jax" on CPU and "dask" use the CPU's), from the cache unless
    `remeasure` or none is kept for this machine yet. With `at_least` (earlier peaks of this
    machine), a new measurement keeps the higher of each figure: a loaded machine can only
    measure its peaks low."""
    device = "gpu" if backend == "gpu" else "cpu"
    if device == "gpu":
        from ..backends.gpu.backend import unavailable_reason

        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"cannot measure the GPU's peaks: {reason}")
    path = path or cache_path()
    name = machine(device)
    key = f"{device}|{name}"
    cached = _load(path)
    if not remeasure and key in cached:
        try:
            return Peaks(**cached[key])
        except TypeError:
            pass  # an older layout: measure again
    flops, bandwidth, how = _measure_gpu() if device == "gpu" else _measure_cpu()
    if at_least is not None and at_least.machine == name:
        flops, bandwidth = max(flops, at_least.flops), max(bandwidth, at_least.bandwidth)
    found = Peaks(name, device, flops, bandwidth, how, time.strftime("%Y-%m-%d %H:%M"))
    cached[key] = asdict(found)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(cached, indent=1))  # another process may read it now
    except OSError:
        pass  # a read-only home: measured every session
    return found
