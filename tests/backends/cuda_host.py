"""The GPU backend's map-reduce kernels (backends/gpu_mapreduce.py) run on the host: their
exact CUDA source, compiled as C++ by the machine's g++ with a few lines standing in for
CUDA's built-ins, and launched thread by thread over the same grid CuPy would use. Split
bodies then run through `GpuFusedBody` itself (pre and post parts on NumPy), so that the
generated kernels' semantics are tested where there is no GPU. What this cannot see: device
code generation, NVRTC's dialect and the GPU's own math library (`nvcc_ptx` compiles the same
source for the device where nvcc is installed).
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from explorer.backends import gpu_mapreduce
from explorer.backends.reference import NumpyInterpreter
from explorer.ir.graph import Graph

# CUDA's built-ins that the generated kernels use, for the host
SHIM = r"""
#include <math.h>
#include <string.h>
#define __global__
#define __device__
struct _dim3 { unsigned x, y, z; };
static _dim3 blockIdx, blockDim, threadIdx;
static inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, sizeof d); return d; }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rsqrt(float x) { return 1.0f / sqrtf(x); }
"""
KERNEL = re.compile(r'extern "C" __global__ void (\w+)\((.*?)\) \{', re.S)
BUILD = Path(tempfile.gettempdir()) / "gambit-cuda-host"
_LIBS: dict[str, Any] = {}


def host_compiler() -> str | None:
    return shutil.which("g++")


def build(source: str) -> Any:
    """The kernel of `source` compiled for the host: a function (args, rows, threads)."""
    name, params = KERNEL.search(source).groups()  # type: ignore[union-attr]
    casts = [f"({p.rsplit(' ', 1)[0].replace('__restrict__', '').strip()})a[{k}]"
             for k, p in enumerate(params.split(", "))]
    text = SHIM + source + (
        f'\nextern "C" void launch(void** a, long rows, unsigned threads) {{\n'
        f"  blockDim.x = threads;\n"
        f"  for (long b = 0; b * threads < rows; ++b)\n"
        f"    for (unsigned t = 0; t < threads; ++t) {{\n"
        f"      blockIdx.x = (unsigned)b; threadIdx.x = t;\n"
        f"      {name}({', '.join(casts)});\n"
        f"    }}\n}}\n")
    key = hashlib.sha256(text.encode()).hexdigest()[:20]
    if key not in _LIBS:
        BUILD.mkdir(exist_ok=True)
        src, lib = BUILD / f"{key}.cpp", BUILD / f"{key}.so"
        if not lib.exists():
            src.write_text(text)
            subprocess.run([host_compiler() or "g++", "-std=c++14", "-O1", "-shared", "-fPIC",
                            "-o", str(lib), str(src)], check=True, capture_output=True, text=True)
        _LIBS[key] = ctypes.CDLL(str(lib)).launch
    return _LIBS[key]


def nvcc_ptx(source: str) -> subprocess.CompletedProcess:
    """nvcc's device compile of `source` to PTX (with the flags CuPy's RawKernel gets)."""
    BUILD.mkdir(exist_ok=True)
    src = BUILD / (hashlib.sha256(source.encode()).hexdigest()[:20] + ".cu")
    src.write_text(source)
    return subprocess.run(["nvcc", "--ptx", "--std=c++14", "--fmad=false", "-o", "/dev/null",
                           str(src)], capture_output=True, text=True)


class HostFusedBody(gpu_mapreduce.GpuFusedBody):
    """A split body's generated CUDA kernel, run on the host over NumPy arrays."""

    launches = 0

    @property
    def xp(self) -> Any:
        return np

    def launch(self, args: Sequence[Any]) -> None:
        fn = build(self.code.source)
        ptrs = (ctypes.c_void_p * len(args))(*[a.ctypes.data for a in args])
        fn(ptrs, ctypes.c_long(self.code.rows), ctypes.c_uint(gpu_mapreduce.THREADS))
        HostFusedBody.launches += 1


class HostCudaInterpreter(NumpyInterpreter):
    """The reference interpreter whose split bodies of the map-reduce form run as the GPU
    backend's kernels, on the host."""

    def make_child(self, body: Graph, prefix: str) -> Any:
        if body.name.startswith("split_"):
            fused = gpu_mapreduce.compile_body(body, prefix.rstrip("/").replace("/", "_") or body.name,
                                               NumpyInterpreter, HostFusedBody)
            if fused is not None:
                return fused
        return type(self)(body, prefix)
