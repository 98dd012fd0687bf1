"""passes/targets.py: which backends' results XLA compiles."""

from __future__ import annotations

from explorer.backends import registry
from explorer.passes.targets import XLA_BACKENDS, xla_lays_out


def test_only_the_jax_backend_is_compiled_by_xla() -> None:
    assert xla_lays_out("jax")
    assert not any(xla_lays_out(b) for b in ("cpu", "gpu", "reference", "dask", None))


def test_every_xla_backend_is_registered() -> None:
    assert XLA_BACKENDS <= set(registry.names())
