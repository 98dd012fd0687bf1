"""A fake CUDA device for the graph-capture layer (explorer/backends/gpu/graphs.py) where there
is no GPU: NumPy arrays of a subclass (`DeviceArray`) stand in for CuPy's, and a recording
stream stands in for `cupy.cuda.Stream`'s capture.

Outside a capture every operation on device arrays runs at once, as on a GPU. Under capture
each one also runs once (so that its result has a buffer, as CuPy's allocation during
capture gives one) and is recorded on the tape as a replay that recomputes it from the same
argument buffers into the same result buffers: a launch of the graph runs the tape in order,
with no Python of the program's (no program lines, no kernel objects, no driver loops). What
CUDA refuses under capture raises here too: reading a device value on the host (`bool`,
`.item()`, `int()`, `asnumpy`), a synchronize, an upload of host data; the capture is then
invalid and `end_capture` raises, as cudaStreamEndCapture does.

What this cannot show: CUDA's own rules beyond these (which APIs a real capture accepts),
timing, and CuPy's memory pool (the private pool here is a no-op).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import numpy as np


class HostSync(RuntimeError):
    """What CUDA raises for a host synchronisation under stream capture."""


class Tape:
    def __init__(self) -> None:
        self.ops: list[Callable[[], None]] | None = None  # while a capture is on
        self.invalid = ""
        self.uploads = 0  # host arrays copied into device buffers (DeviceArray.set)

    @property
    def capturing(self) -> bool:
        return self.ops is not None

    def sync(self, what: str) -> None:
        if self.capturing:
            self.invalid = self.invalid or what
            raise HostSync(f"operation not permitted when stream is capturing: {what}")


TAPE = Tape()


def plain(x: Any) -> Any:
    """Device arrays (in lists and tuples too) as plain ndarrays over the same memory."""
    if isinstance(x, DeviceArray):
        return x.view(np.ndarray)
    if isinstance(x, list | tuple):
        return type(x)(plain(v) for v in x)
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    return x


def device(x: Any) -> Any:
    """Results as device arrays (a NumPy scalar as a 0-d one)."""
    if isinstance(x, np.ndarray):
        return x.view(DeviceArray)
    if isinstance(x, np.generic):
        return np.asarray(x).view(DeviceArray)
    if isinstance(x, tuple | list):
        return type(x)(device(v) for v in x)
    return x


def _refill(buffers: Any, fresh: Any) -> None:
    if isinstance(buffers, np.ndarray) and not buffers.flags.writeable:
        return  # a read-only view (broadcast_to): its base is recomputed where it is made
    if isinstance(buffers, np.ndarray):
        np.copyto(buffers.view(np.ndarray), np.asarray(plain(fresh)).reshape(buffers.shape),
                  casting="unsafe")
    elif isinstance(buffers, tuple | list):
        for b, f in zip(buffers, fresh):
            _refill(b, f)


def run(fn: Callable[..., Any], args: tuple, kwargs: dict | None = None) -> Any:
    """`fn` on the plain arrays of `args`; under capture, also recorded as its replay."""
    kwargs = kwargs or {}
    out = device(fn(*plain(args), **plain(kwargs)))
    if TAPE.ops is not None:
        TAPE.ops.append(lambda: _refill(out, fn(*plain(args), **plain(kwargs))))
    return out


class DeviceArray(np.ndarray):
    """An array "on the device": NumPy's functions and operators on it go through `run`."""

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        out = kwargs.get("out")
        result = run(getattr(ufunc, method), inputs, kwargs)
        return out[0] if isinstance(out, tuple) and len(out) == 1 else result

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return run(func, args, kwargs)

    # methods that do not dispatch through the two protocols above
    def astype(self, *a: Any, **k: Any) -> Any:
        return run(np.ndarray.astype, (self, *a), k)

    def reshape(self, *a: Any, **k: Any) -> Any:
        return run(np.ndarray.reshape, (self, *a), k)

    def transpose(self, *a: Any) -> Any:
        return run(np.ndarray.transpose, (self, *a))

    @property
    def T(self) -> Any:  # noqa: N802
        return run(np.transpose, (self,))

    def copy(self, *a: Any, **k: Any) -> Any:
        return run(np.ndarray.copy, (self, *a), k)

    def ravel(self, *a: Any) -> Any:
        return run(np.ndarray.ravel, (self, *a))

    def __getitem__(self, index: Any) -> Any:
        return run(lambda x, i: x[i], (self, index))

    def __setitem__(self, index: Any, value: Any) -> None:
        base = self.view(np.ndarray)

        def put() -> None:
            base[plain(index)] = plain(value)

        put()
        if TAPE.ops is not None:
            TAPE.ops.append(put)

    def set(self, host: np.ndarray) -> None:
        """CuPy's ndarray.set: a host array copied in (an upload)."""
        TAPE.sync("a host-to-device copy from pageable memory")
        TAPE.uploads += 1
        np.copyto(self.view(np.ndarray), host)

    # reading a device value on the host
    def __bool__(self) -> bool:
        TAPE.sync("bool() of a device value")
        return bool(self.view(np.ndarray))

    def __int__(self) -> int:
        TAPE.sync("int() of a device value")
        return int(self.view(np.ndarray))

    def __index__(self) -> int:
        TAPE.sync("a device value as an index")
        return self.view(np.ndarray).__index__()

    def __float__(self) -> float:
        TAPE.sync("float() of a device value")
        return float(self.view(np.ndarray))

    def item(self, *a: Any) -> Any:
        TAPE.sync(".item() of a device value")
        return self.view(np.ndarray).item(*a)

    def tolist(self) -> Any:
        TAPE.sync(".tolist() of a device value")
        return self.view(np.ndarray).tolist()


class FakeCupy:
    """The array module: CuPy's names the programs and drivers use, over DeviceArray."""

    __name__ = "fakecupy"
    ndarray = DeviceArray

    def __getattr__(self, name: str) -> Any:
        f = getattr(np, name)
        if not callable(f) or isinstance(f, type):
            return f

        def call(*a: Any, **k: Any) -> Any:
            return run(f, a, k)

        call.__name__ = name
        return call

    @staticmethod
    def asarray(x: Any, dtype: Any = None) -> Any:
        if isinstance(x, DeviceArray):
            return x if dtype is None or x.dtype == dtype else x.astype(dtype)
        TAPE.sync("a host value uploaded (asarray)")
        return np.array(x, dtype).view(DeviceArray)

    @staticmethod
    def asnumpy(x: Any) -> np.ndarray:
        TAPE.sync("asnumpy")
        return np.array(plain(x))

    @staticmethod
    def copyto(dst: Any, src: Any) -> None:
        run(np.copyto, (dst, src))

    @staticmethod
    def empty(shape: Any, dtype: Any = float) -> Any:
        return np.empty(shape, dtype).view(DeviceArray)  # (an allocation: nothing to replay)


class RawModule:
    """cupy.RawModule on the host: the CUDA source compiled as C++ (tests/backends/cuda_host.py)
    and each launch run on the arrays' memory; under capture a launch is also recorded, its
    replay the same launch on the same buffers (the routines of gpu/routines.py launch so)."""

    def __init__(self, code: str, options: tuple = ()) -> None:
        from explorer.backends.gpu.routines import THREADS
        from tests.backends.cuda_host import build_module, host_call

        self.call = host_call(build_module(code), THREADS)

    def get_function(self, name: str) -> Callable[..., None]:
        def launch(grid: tuple[int, ...], block: tuple[int, ...], args: tuple) -> None:
            go = lambda: self.call(name, grid, list(plain(tuple(args))))  # noqa: E731
            go()
            if TAPE.ops is not None:
                TAPE.ops.append(go)

        return launch


FakeCupy.RawModule = RawModule
xp = FakeCupy()


class FakeGraph:
    def __init__(self, ops: list[Callable[[], None]]) -> None:
        self.ops, self.launches = ops, 0

    def launch(self, stream: Any = None) -> None:
        self.launches += 1
        for op in self.ops:
            op()


class FakeStream:
    """cupy.cuda.Stream's capture, recorded: begin_capture, end_capture -> FakeGraph."""

    made = 0

    def __init__(self) -> None:
        FakeStream.made += 1

    def __enter__(self) -> FakeStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def begin_capture(self) -> None:
        assert not TAPE.capturing, "nested capture"
        TAPE.ops, TAPE.invalid = [], ""

    def end_capture(self) -> FakeGraph:
        ops, invalid = TAPE.ops, TAPE.invalid
        TAPE.ops, TAPE.invalid = None, ""
        if invalid:
            raise HostSync(f"cudaErrorStreamCaptureInvalidated ({invalid})")
        assert ops is not None
        return FakeGraph(ops)

    def synchronize(self) -> None:
        TAPE.sync("stream.synchronize()")


def private_pool() -> tuple[Any, Any]:
    return object(), nullcontext()
