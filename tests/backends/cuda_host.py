"""The GPU backend's map-reduce kernels (backends/gpu/mapreduce.py) run on the host: their
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

from explorer.backends.gpu import mapreduce as gpu_mapreduce
from explorer.backends.reference import NumpyInterpreter
from explorer.files import replacing, write_atomic
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
    return _compile(text).launch


def _compile(text: str, flags: Sequence[str] = ()) -> Any:
    """The C++ `text` as a loaded shared library (built once per text)."""
    key = hashlib.sha256(text.encode()).hexdigest()[:20]
    if key not in _LIBS:
        BUILD.mkdir(exist_ok=True)
        src, lib = BUILD / f"{key}.cpp", BUILD / f"{key}.so"
        if not lib.exists():
            write_atomic(src, text)  # (kept beside the library, to read)
            with replacing(lib) as lib_tmp:
                done = subprocess.run([host_compiler() or "g++", "-std=c++14", "-O1", "-shared",
                                       "-fPIC", *flags, "-o", str(lib_tmp), str(src)],
                                      capture_output=True, text=True)
                if done.returncode:
                    raise RuntimeError(f"g++ failed on {src}:\n{done.stderr[-4000:]}")
        _LIBS[key] = ctypes.CDLL(str(lib))
    return _LIBS[key]


# A block's threads as host threads (pthreads), so that the kernels that cooperate within a
# block (backends/gpu/reduce.py) run as written: `__shared__` memory is static (one block
# runs at a time), `__syncthreads` is a barrier of the block's threads, and a warp shuffle
# passes values through a per-lane slot between two barriers of the warp's 32 threads.
COOP_SHIM = r"""
#include <math.h>
#include <string.h>
#include <pthread.h>
#define __global__
#define __device__
#define __shared__ static
struct _dim3 { unsigned x, y, z; };
static thread_local _dim3 blockIdx, threadIdx;
static _dim3 blockDim, gridDim;
static pthread_barrier_t _block_bar, _warp_bar[32];
static unsigned char _lanes[1024 * 8];
static inline void __syncthreads() { pthread_barrier_wait(&_block_bar); }
template <typename T> T __shfl_down_sync(unsigned, T v, int d) {
  static_assert(sizeof(T) <= 8, "a shuffled value is at most 8 bytes");
  const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
  memcpy(_lanes + 8 * threadIdx.x, &v, sizeof v);
  pthread_barrier_wait(&_warp_bar[w]);
  T out = v;
  if (lane + d < 32) memcpy(&out, _lanes + 8 * (threadIdx.x + d), sizeof out);
  pthread_barrier_wait(&_warp_bar[w]);
  return out;
}
static inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, sizeof d); return d; }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rsqrt(float x) { return 1.0f / sqrtf(x); }
struct _Launch { void** a; unsigned t; };
// atomics (generated gathers and scatters, backends/gpu/indexing.py): the block's threads
// run at once here, so these are real atomics
static inline unsigned int atomicCAS(unsigned int* p, unsigned int cmp, unsigned int v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return cmp; }
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp,
                                           unsigned long long v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return cmp; }
template <typename T> static inline T atomicAdd(T* p, T v) {
  T old = *p, want;
  do { want = old + v; } while (!__atomic_compare_exchange(p, &old, &want, false,
                                                           __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
  return old;
}
static inline int atomicMax(int* p, int v) {
  int old = *p;
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST,
                                                 __ATOMIC_SEQ_CST)) {}
  return old;
}
"""


def _coop_launcher(name: str, params: str) -> str:
    casts = [f"({p.rsplit(' ', 1)[0].replace('__restrict__', '').strip()})L->a[{k}]"
             for k, p in enumerate(params.split(", "))]
    return (f"static void* _run_{name}(void* p) {{\n"
            f"  const _Launch* L = (const _Launch*)p;\n"
            f"  threadIdx.x = L->t; threadIdx.y = threadIdx.z = 0;\n"
            f"  for (unsigned by = 0; by < gridDim.y; ++by)\n"
            f"    for (unsigned bx = 0; bx < gridDim.x; ++bx) {{\n"
            f"      blockIdx.x = bx; blockIdx.y = by; blockIdx.z = 0;\n"
            f"      {name}({', '.join(casts)});\n"
            f"      pthread_barrier_wait(&_block_bar);  // the next block reuses __shared__\n"
            f"    }}\n  return 0;\n}}\n"
            f'extern "C" int launch_{name}(void** a, unsigned gx, unsigned gy, unsigned threads) {{\n'
            f"  if (threads % 32 || threads > 1024) return 1;\n"
            f"  blockDim.x = threads; blockDim.y = blockDim.z = 1;\n"
            f"  gridDim.x = gx; gridDim.y = gy; gridDim.z = 1;\n"
            f"  pthread_barrier_init(&_block_bar, 0, threads);\n"
            f"  for (unsigned w = 0; w < threads / 32; ++w) pthread_barrier_init(&_warp_bar[w], 0, 32);\n"
            f"  pthread_attr_t attr; pthread_attr_init(&attr); pthread_attr_setstacksize(&attr, 1 << 18);\n"
            f"  static pthread_t th[1024]; static _Launch L[1024];\n"
            f"  for (unsigned t = 0; t < threads; ++t) {{\n"
            f"    L[t].a = a; L[t].t = t; pthread_create(&th[t], &attr, _run_{name}, &L[t]); }}\n"
            f"  for (unsigned t = 0; t < threads; ++t) pthread_join(th[t], 0);\n"
            f"  pthread_barrier_destroy(&_block_bar);\n"
            f"  for (unsigned w = 0; w < threads / 32; ++w) pthread_barrier_destroy(&_warp_bar[w]);\n"
            f"  return 0;\n}}\n")


def build_module(source: str) -> dict[str, Any]:
    """Every kernel of a cooperative module (`source`), compiled for the host: name ->
    launch(args, gx, gy, threads), a block's threads running as threads."""
    kernels = KERNEL.findall(source)
    text = COOP_SHIM + source + "".join(_coop_launcher(n, p) for n, p in kernels)
    lib = _compile(text, ["-pthread"])
    return {n: getattr(lib, f"launch_{n}") for n, _ in kernels}


def host_call(module: dict[str, Any], threads: int) -> Any:
    """The `call(name, grid, args)` of backends/gpu/reduce.launch, on the host."""

    def call(name: str, grid: tuple[int, ...], args: list[np.ndarray]) -> None:
        gx, gy = (*grid, 1)[:2]
        ptrs = (ctypes.c_void_p * len(args))(*[a.ctypes.data for a in args])
        rc = module[name](ptrs, ctypes.c_uint(gx), ctypes.c_uint(gy), ctypes.c_uint(threads))
        assert rc == 0, f"{name}: {threads} threads per block is not a multiple of 32 up to 1024"

    return call


def nvcc_ptx(source: str) -> subprocess.CompletedProcess:
    """nvcc's device compile of `source` to PTX (with the flags CuPy's RawKernel gets)."""
    BUILD.mkdir(exist_ok=True)
    src = BUILD / (hashlib.sha256(source.encode()).hexdigest()[:20] + ".cu")
    write_atomic(src, source)
    return subprocess.run(["nvcc", "--ptx", "--std=c++14", "--fmad=false", "-o", "/dev/null",
                           str(src)], capture_output=True, text=True)


class HostFusedBody(gpu_mapreduce.GpuFusedBody):
    """A split body's generated CUDA kernel, run on the host over NumPy arrays."""

    launches = 0

    @property
    def xp(self) -> Any:
        return np

    def launch(self, args: Sequence[Any]) -> None:
        threads = gpu_mapreduce.THREADS
        if self.code.lanes > 1:  # a warp per row, folding by shuffles: a block's threads as threads
            blocks = (self.code.threads + threads - 1) // threads
            host_call(build_module(self.code.source), threads)(self.code.name, (blocks,), list(args))
        else:
            fn = build(self.code.source)
            ptrs = (ctypes.c_void_p * len(args))(*[a.ctypes.data for a in args])
            fn(ptrs, ctypes.c_long(self.code.rows), ctypes.c_uint(threads))
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
