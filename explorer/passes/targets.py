"""What the passes know of the backend that will run their result (the compile options'
`backend`, which a pass reads by naming it in `options_read`, passes/pipeline.py).

On the jax backend (backends/jax.py) the final stage is lowered back to jax.lax and compiled
by XLA, which makes its own layout, fusion and transpose-folding decisions with its own cost
model. A rewrite that only fixes a layout (which operand of a product comes first, where a
transpose sits) gains nothing there and can cost XLA time, so such rewrites decline for
these backends and say so in a remark (bench/jax_stages.py measures the stages against
`jax.jit`).
"""

from __future__ import annotations

# backends whose result XLA compiles: it lays out, fuses and folds transposes itself
XLA_BACKENDS = frozenset({"jax"})


def xla_lays_out(backend: str | None) -> bool:
    """Whether XLA compiles what runs on `backend` (None: not known, so no)."""
    return backend in XLA_BACKENDS
