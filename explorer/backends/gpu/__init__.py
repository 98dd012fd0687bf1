"""The GPU backend (CuPy): backend.py registers it as the "gpu" backend and runs a stage as
one generated program (program.py: the GPU writer of backends/program_writer.py);
codegen.py writes fused kernels as CuPy kernel definitions, reduce.py the reductions that
span more than one block as two-stage grid reductions (by columns, coalesced, where they keep
the innermost axis) and row kernels (softmax, layer norm) as one block per row, mapreduce.py
split bodies as one RawKernel; routines.py (with conv.py, window.py, indexing.py,
shape_ops.py) convolutions, pooling, gathers, scatters, pads and concatenations as generated
CUDA (and cuBLAS); oom.py names the node where the device runs out of memory. The code
generators only write text: they import and are tested without CuPy
(tests/backends/cuda_host.py runs the RawKernels on the host)."""

from .backend import GpuBackend, GpuInterpreter, GpuProgram, sync, unavailable_reason  # noqa: F401  (registers "gpu")
