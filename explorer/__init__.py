"""gambit-explorer: see what a compiler does to your JAX code, pass by pass."""

from . import backends, measure, passes
from .backends.result import Kernel, RunResult
from .compile import compile  # noqa: A004 - gx.compile, as jax.jit
from .frontend.hlo_graph import from_hlo
from .frontend.jaxpr import TraceError, UnsupportedPrimitiveError
from .ir import Graph, ParseError, VerifyError, parse, verify
from .options import CompileOptions
from .trace import Stage, Trace, explore
from .units import parse_bytes
from .xla import compare_with_xla, xla_pipeline

__all__ = [
    "CompileOptions", "Graph", "Kernel", "ParseError", "RunResult", "Stage", "Trace", "TraceError",
    "UnsupportedPrimitiveError", "VerifyError", "explore", "parse", "parse_bytes", "passes",
    "backends", "measure", "verify",
    "from_hlo", "xla_pipeline", "compare_with_xla",
    "compile",
]


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext explorer` registers the %%gambit cell magic (explorer/magic.py)."""
    from .magic import load_ipython_extension as load

    load(ipython)
