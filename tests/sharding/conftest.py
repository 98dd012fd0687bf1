"""The sharded tests need several devices, and JAX fixes its host devices when it starts: they
run in a process of their own, started by test_host_devices.py with
`XLA_FLAGS=--xla_force_host_platform_device_count=N` and GAMBIT_HOST_DEVICES=N set (once for 4
devices, once for 8). In the suite's own one-device process only that launcher is collected;
in the launched one, everything but it.

By hand: `GAMBIT_HOST_DEVICES=4 XLA_FLAGS=--xla_force_host_platform_device_count=4
python -m pytest -n 0 tests/sharding`.
"""

from __future__ import annotations

import os

import pytest

DEVICES = os.environ.get("GAMBIT_HOST_DEVICES")

if DEVICES is None:
    collect_ignore_glob = ["test_[!h]*.py"]  # all but test_host_devices.py
else:
    collect_ignore = ["test_host_devices.py"]


@pytest.fixture(scope="session")
def devices() -> int:
    """How many host devices this process has (those it was launched for)."""
    import jax

    if DEVICES is None:  # (a file named on the command line: conftest cannot ignore it)
        pytest.skip("the sharded tests run in a process with host devices: through "
                    "test_host_devices.py, or with GAMBIT_HOST_DEVICES and XLA_FLAGS set")
    n = jax.device_count()
    assert n == int(DEVICES), f"launched for {DEVICES} devices, JAX has {n}: XLA_FLAGS unset?"
    return n
