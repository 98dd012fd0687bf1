"""The CPU target: a stage becomes one generated Python program (program.py: the CPU writer of
backends/program_writer.py) that calls NumPy, BLAS and fused numba kernels (kernel_codegen.py,
loaded and run by kernels.py; split map-reduce bodies: mapreduce.py, with libmvec through
vector_math.py), and scans and whiles compiled whole into one numba function
(compiled_control_flow.py). backend.py registers it as the "cpu" backend."""

from .backend import CpuBackend, CpuInterpreter, CpuProgram  # noqa: F401  (registers "cpu")
from .kernels import CompiledKernel, cache_dir, compile_kernel, load  # noqa: F401
