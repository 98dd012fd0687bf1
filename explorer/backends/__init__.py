"""Backends execute graphs: one interpreter core (interpreter.py), one registry (registry.py),
and the backends registered with it: reference (the oracle), cpu, gpu, jax and dask. A new backend
is one module that registers itself, imported here.

The target-neutral middle the program-writing targets (cpu/, gpu/) share: program_writer.py
(a stage as one generated module), executable.py (that program, or the interpreter, with the
reason), control_flow.py (the scan, while and conditional drivers the interpreter core and
generated programs both call), output_fusion.py (a dot, then its epilogue kernel), combine.py
(a split loop's chunk results) and numpy_temporaries.py (what NumPy ops allocate); widen.py
(a graph's float types made float64: the reference for measure/numerics.py)."""

# each backend module registers its backend
from . import cpu, dask, gpu, jax, reference  # noqa: F401
from .registry import (
                       BackendError,
                       available,
                       executable,
                       get,
                       names,
                       register,
                       run_graph,
                       sweep,
                       unavailable_reason,
)

__all__ = ["BackendError", "available", "executable", "get", "names", "register", "run_graph",
           "sweep", "unavailable_reason"]
