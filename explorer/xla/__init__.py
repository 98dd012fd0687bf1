"""XLA's own pipeline as stages of our explorer: per-compilation dumps, parsed with
frontend.hlo, a side-by-side of our pipeline's result with XLA's, and, for a sharded program,
the SPMD story (sharding propagation, partitioning, collectives, per-device shapes and memory)."""

from .pipeline import XlaCompilation, XlaTrace, compile_with_dumps, xla_pipeline
from .side_by_side import Comparison, compare_with_xla
from .spmd import SpmdSummary, spmd_summary

__all__ = ["Comparison", "SpmdSummary", "XlaCompilation", "XlaTrace", "compare_with_xla",
           "compile_with_dumps", "spmd_summary",
           "xla_pipeline"]
