"""Backends execute graphs: one interpreter core (interpreter.py), one registry (registry.py),
and the backends registered with it: reference (the oracle), cpu, gpu, jax and dask. A new backend
is one module that registers itself, imported here."""

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
