"""gx.compile: a jit-like callable. The first call for each set of argument shapes and dtypes
(and pytree structure) explores the function with the default pipeline, which ends with
`fuse` (and the split pass when a memory limit is given), compiles the final stage for the backend, and
caches it; later calls with the same signature only run the executable. The traces are kept
for the TRACES most recently used signatures (a function called with ever new shapes does
not grow without bound); the executables live in the backend registry's own bounded cache.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from .backends import registry
from .frontend.arguments import ArgSpec
from .options import CompileOptions
from .passes import DEFAULT_PIPELINE
from .trace import Trace, explore

Signature = tuple[Any, tuple[tuple[tuple[int, ...], str], ...]]
TRACES = 32  # signatures whose Trace a Compiled keeps, least recently used evicted first


def signature(args: Sequence[Any]) -> Signature:
    """Equal for arguments that trace to the same graph: the pytree structure, the static
    leaves' values and the traced leaves' shapes and dtypes."""
    spec = ArgSpec.of(args)
    leaves = spec.dynamic_leaves(args, str)
    return spec.signature, tuple((np.shape(x), str(getattr(x, "dtype", np.result_type(x))))
                                 for x in leaves)


class Compiled:
    """The callable gx.compile returns; `.traces` holds one Trace per signature seen (the
    TRACES most recent)."""

    def __init__(self, fn: Callable[..., Any], memory_limit: int | str | None, backend: str,
                 pipeline: Sequence[str] | None, settings: dict[str, Any] | None = None) -> None:
        if backend not in registry.names():  # a registered but unavailable one fails on call
            registry.get(backend)
        self.settings = dict(settings or {})  # the backend's run settings (dask: client=)
        self.fn = fn
        self.options = CompileOptions.make(memory_limit, backend)
        self.memory_limit = self.options.memory_limit
        self.backend = backend
        self.pipeline = list(pipeline) if pipeline is not None else list(DEFAULT_PIPELINE)
        self.traces: OrderedDict[Signature, Trace] = OrderedDict()
        functools.update_wrapper(self, fn)

    def trace_for(self, *args: Any) -> Trace:
        """The exploration behind calls with arguments like these (made on first use)."""
        key = signature(args)
        if key in self.traces:
            self.traces.move_to_end(key)
        else:
            self.traces[key] = explore(self.fn, *args, pipeline=self.pipeline,
                                       options=self.options)
            while len(self.traces) > TRACES:
                self.traces.popitem(last=False)
        return self.traces[key]

    def __call__(self, *args: Any) -> Any:
        t = self.trace_for(*args)
        exe = registry.executable(t.final.graph, self.backend, self.options)
        with registry.get(self.backend).session(**self.settings):
            outs = exe.execute(exe.prepare(t.flat_args(args)))
        outs = [np.asarray(o.get() if hasattr(o, "get") else o) for o in outs]
        return jax.tree_util.tree_unflatten(t.traced.out_tree, outs)

    def __repr__(self) -> str:
        return (f"<gx.compile of {getattr(self.fn, '__name__', self.fn)} on {self.backend}: "
                f"{len(self.traces)} signature(s) compiled>")


def compile(fn: Callable[..., Any] | None = None, *, memory_limit: int | str | None = None,  # noqa: A001
            backend: str = "cpu", pipeline: Sequence[str] | None = None, **settings: Any) -> Any:
    """`gx.compile(fn)` or `@gx.compile(memory_limit="256MiB")`: see the module docstring.
    `settings` are the backend's run settings, e.g. backend="dask", client=ADDRESS."""
    if fn is None:
        return lambda f: Compiled(f, memory_limit, backend, pipeline, settings)
    return Compiled(fn, memory_limit, backend, pipeline, settings)
