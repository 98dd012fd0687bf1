"""Shared pytest configuration: markers, the fuzz scale switch (GAMBIT_FUZZ=full), and float32
dots at full precision where JAX runs on a GPU."""

from __future__ import annotations

import os

import pytest

FULL_FUZZ = os.environ.get("GAMBIT_FUZZ") == "full"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fuzz: fuzz/property tests; `make fuzz` runs them at full scale")
    config.addinivalue_line("markers", "browser: real-browser tests (Playwright + chromium)")
    config.addinivalue_line("markers", "gpu: needs CuPy and a GPU; skipped without them")
    _full_precision_dots_on_gpu()


def _full_precision_dots_on_gpu() -> None:
    """JAX on a GPU computes float32 dots in a TF32-like precision by default (measured on an
    H100: 3.7e-3 relative from the float64 reference), where our reference, cpu and gpu
    backends compute them in float32; the tests compare backends at float32's tolerance, so
    they pin JAX's matmul precision to "highest" there. No effect on a CPU."""
    try:
        import jax

        if jax.default_backend() == "gpu":
            jax.config.update("jax_default_matmul_precision", "highest")
    except (ImportError, RuntimeError):
        pass
