"""gambit-explorer: see what a compiler does to your JAX code, pass by pass."""

from . import passes
from .backends.result import Kernel, RunResult
from .frontend.jax import TraceError, UnsupportedPrimitiveError
from .ir import Graph, ParseError, VerifyError, parse, verify
from .trace import Stage, Trace, explore
from .units import parse_bytes

__all__ = [
    "Graph", "Kernel", "ParseError", "RunResult", "Stage", "Trace", "TraceError",
    "UnsupportedPrimitiveError", "VerifyError", "explore", "parse", "parse_bytes", "passes",
    "verify",
]
