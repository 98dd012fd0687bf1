"""The CPU compiler: a stage becomes one generated Python program (program.py, with its
drivers in runtime.py) that calls NumPy, BLAS and fused numba kernels (kernel_codegen.py,
loaded and run by kernels.py; split map-reduce bodies: mapreduce.py, with libmvec through
vector_math.py). backend.py registers it as the "cpu" backend."""

from .backend import CpuBackend, CpuInterpreter, CpuProgram  # noqa: F401  (registers "cpu")
from .kernels import CompiledKernel, cache_dir, compile_kernel, load  # noqa: F401
