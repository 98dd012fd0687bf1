"""Runs the sharded tests (this folder) in a process of their own with 4 and then 8 host
devices, set before JAX starts (conftest.py); the rest of the suite keeps its one device."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


@pytest.mark.parametrize("devices", [4, 8])
def test_sharded_tests_on_host_devices(devices: int) -> None:
    env = dict(os.environ)
    flags = re.sub(r"--xla_force_host_platform_device_count=\S*", "", env.get("XLA_FLAGS", ""))
    env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()
    env["GAMBIT_HOST_DEVICES"] = str(devices)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
           "--rootdir", str(ROOT), str(HERE)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (f"the sharded tests failed on {devices} host devices:\n"
                                  f"{done.stdout[-6000:]}\n{done.stderr[-3000:]}")
