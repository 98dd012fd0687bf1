"""An out-of-memory error on the device names the node, its line, the bytes it asked for and
the pool's limit (backends/gpu/oom.py): a stand-in array module (NumPy, with CuPy's error
class and memory pool) whose matmul raises CuPy's error, as a pool at its limit does."""

from __future__ import annotations

import re
import types
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends.gpu.oom import DeviceOutOfMemory
from explorer.backends.gpu.program import generate_program
from explorer.backends.reference import NumpyInterpreter
from tests.backends.gpu.test_program import HostKernel


class OutOfMemoryError(MemoryError):
    """CuPy's cupy.cuda.memory.OutOfMemoryError, with its message."""

    def __init__(self, size: int, total: int, limit: int) -> None:
        super().__init__(f"Out of memory allocating {size:,} bytes (allocated so far: "
                         f"{total:,} bytes, limit set to: {limit:,} bytes).")


class Pool:
    def get_limit(self) -> int:
        return 1 << 20

    def used_bytes(self) -> int:
        return 900_000


def fake_xp() -> Any:
    """NumPy as a device array module whose matmul runs out of memory."""
    xp = types.ModuleType("fakecupy")
    xp.__dict__.update({k: getattr(np, k) for k in dir(np) if not k.startswith("__")})

    def matmul(a: Any, b: Any) -> Any:
        raise OutOfMemoryError(a.shape[0] * b.shape[-1] * 4, 900_000, 1 << 20)

    xp.matmul = matmul
    xp.cuda = types.SimpleNamespace(memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError))
    xp.get_default_memory_pool = Pool
    return xp


def _program() -> tuple[Any, Any, list[np.ndarray]]:
    x = np.ones((64, 32), np.float32)
    w = np.ones((32, 48), np.float32)
    t = gx.explore(lambda x, w: jnp.tanh(x @ w).sum(), x, w, pipeline=[])
    return t.final.graph, generate_program(t.final.graph, fake_xp(), HostKernel,
                                           NumpyInterpreter, launcher=lambda s: None), [x, w]


def test_the_error_names_the_node_its_line_the_bytes_and_the_limit() -> None:
    g, program, args = _program()
    dot = next(n for n in g.nodes if n.op == "dot_general")
    with pytest.raises(DeviceOutOfMemory) as e:
        program.fn(*args)
    text = str(e.value)
    assert f"%{dot.id} = dot_general" in text and "test_oom.py:" in text
    assert re.search(r"line \d+ of the generated program", text)
    assert "asked for 12,288 bytes" in text and "limit: 1,048,576 bytes" in text
    assert "in use: 900,000 bytes" in text and isinstance(e.value.__cause__, OutOfMemoryError)


def test_the_measured_run_names_the_node_too() -> None:
    g, program, args = _program()
    dot = next(n for n in g.nodes if n.op == "dot_general")
    seen: list[int] = []
    with pytest.raises(DeviceOutOfMemory, match=rf"%{dot.id} = dot_general \(.*test_oom.py:\d+\)"):
        program.measured(*args, lambda n, v: seen.append(n.id))
    assert dot.id not in seen


def test_other_errors_and_modules_without_the_error_pass_through() -> None:
    x = np.ones((4, 4), np.float32)
    t = gx.explore(lambda x: x @ x, x, pipeline=[])
    program = generate_program(t.final.graph, np, HostKernel, NumpyInterpreter)
    assert program.fn(x)[0].shape == (4, 4)  # (NumPy has no device error: unwrapped)
    g, bad, args = _program()
    with pytest.raises(TypeError):
        bad.fn(args[0])
