"""gx.compile: a jit-like callable. The first call for each set of argument shapes and dtypes
(and pytree structure) explores the function with the default pipeline, which ends with
`fuse` (and the split pass when a memory limit is given), compiles the final stage for the backend, and
caches it; later calls with the same signature only run the executable. The traces are kept
for the TRACES most recently used signatures (a function called with ever new shapes does
not grow without bound); the executables live in the backend registry's own bounded cache.

A call does only what a call needs, as `jax.jit`'s does: JAX's own pytree flattening, a
dictionary lookup of the leaves' shapes and dtypes (and static leaves' values), then the
signature's `Entry`, which converts the traced leaves to the graph's parameters and calls the
executable (the jax backend's `jax.jit` function itself, so its C++ fast path; the CPU
backend's generated program).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from .backends import reference, registry
from .backends.jax import SignatureMismatch
from .backends.result import owned
from .frontend.arguments import ArgSpec, host_value, is_key, is_traced, static_key
from .ir import dtypes
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
    return spec.signature, tuple((np.shape(x), str(_dtype_of(x))) for x in leaves)


def _dtype_of(x: Any) -> Any:
    """A leaf's dtype (a typed PRNG key's too: NumPy cannot make one of it)."""
    return x.dtype if hasattr(x, "dtype") else np.result_type(x)


# jax.Array's implementation types once seen: always traced, their key read straight off the
# array. (For a jax array, is_traced's ABC check, np.shape and _dtype_of took 2.3 us a leaf;
# an optimizer step's 8 leaves, 20 us a call.)
_JAX_ARRAY_TYPES: set[type] = set()


def _leaf_key(leaf: Any, top_level: bool) -> Any:
    """What a call's signature holds of one leaf: shape and dtype of a traced one, the value
    of a static one (frontend/arguments.py decides which is which)."""
    kind = type(leaf)
    if kind in _JAX_ARRAY_TYPES or kind is np.ndarray and leaf.dtype.kind != "O":
        return leaf.shape, leaf.dtype
    if is_traced(leaf, top_level):
        if isinstance(leaf, jax.Array):
            _JAX_ARRAY_TYPES.add(kind)
        return np.shape(leaf), _dtype_of(leaf)
    return "static", static_key(leaf)


def _top_level(tree: Any) -> frozenset[int]:
    """Indices of the leaves that are arguments themselves (a Python number there is traced,
    as jax.jit does; inside a container it is static)."""
    out, k = set(), 0
    for child in tree.children():
        if child.num_leaves == 1 and child.num_nodes == 1:
            out.add(k)
        k += child.num_leaves
    return frozenset(out)


class Entry:
    """One signature's call: the traced leaves converted to the graph's parameters, the
    executable run, the results unflattened."""

    __slots__ = ("trace", "exe", "feed", "out_tree", "session", "call", "device", "tree_call")

    def __init__(self, trace: Trace, exe: Any, leaves: Sequence[Any], spec: ArgSpec,
                 session: Any) -> None:
        dynamic = spec.dynamic
        self.trace, self.exe, self.session = trace, exe, session
        self.out_tree = trace.traced.out_tree
        params = trace.traced.graph.param_nodes
        index = [k for k, d in enumerate(dynamic) if d]
        # the jax backend takes and gives jax arrays, as jax.jit does: nothing to convert
        self.device = bool(getattr(exe, "device_arrays", False))
        self.feed = [(k, _converter(leaves[k], p.type.dtype, p.attrs.get("name", f"%{p.id}"),
                                    self.device))
                     for k, p in zip(index, params, strict=True)]
        fast = getattr(exe, "call", None)
        self.call = fast if fast is not None else (lambda flat: exe.execute(exe.prepare(flat)))
        # a backend that jits the whole call on the user's pytree (jax), when every leaf is
        # traced (jax.jit cannot take the static ones as arguments)
        tree_call = getattr(exe, "tree_call", None)
        self.tree_call = (tree_call(spec.tree, self.out_tree)
                          if tree_call is not None and all(dynamic) and session is None
                          else None)

    def __call__(self, leaves: Sequence[Any]) -> Any:
        flat = [convert(leaves[k]) for k, convert in self.feed]
        if self.session is not None:
            with self.session():
                outs = self.call(flat)
        else:
            outs = self.call(flat)
        if not self.device:
            outs = owned([o if type(o) is np.ndarray else np.asarray(o.get() if hasattr(o, "get")
                                                                      else o) for o in outs], flat)
        return jax.tree_util.tree_unflatten(self.out_tree, outs)


def _converter(example: Any, dtype: str, name: str, device: bool = False
               ) -> Callable[[Any], Any]:
    """Leaf -> the host array of the graph parameter's element type (a typed PRNG key as its
    key data; another dtype cast where NumPy casts it safely, as check_args does). With
    `device` (the jax backend), arrays of the right type pass as they are."""
    want = dtypes.to_numpy(dtype)
    if is_key(example):
        return jax.random.key_data if device else host_value
    have = np.dtype(_dtype_of(example))
    if have == want:
        return (lambda x: x) if device else np.asarray
    if not np.can_cast(have, want, "same_kind"):
        raise reference.ArgumentError(f"argument {name} has element type {have}, but the "
                                      f"graph was traced with {want}")
    return lambda x: np.asarray(x, dtype=want)


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
        self.entries: dict[Any, Entry] = {}  # call key -> its entry (dropped with its trace)
        self._top: dict[Any, frozenset[int]] = {}
        self._fast: Callable[..., Any] | None = None
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
        fast = self._fast
        if fast is not None:
            try:
                return fast(*args)
            except SignatureMismatch:
                pass
        leaves, tree = jax.tree_util.tree_flatten(args)
        top = self._top.get(tree)
        if top is None:
            top = self._top[tree] = _top_level(tree)
        key = (tree, *(_leaf_key(x, k in top) for k, x in enumerate(leaves)))
        entry = self.entries.get(key)
        if entry is None:
            entry = self._entry(args, leaves, key)
        self._fast = entry.tree_call  # the latest signature's whole-call jit, if any
        return entry(leaves)

    def _entry(self, args: tuple[Any, ...], leaves: Sequence[Any], key: Any) -> Entry:
        """The first call with this key: trace (or find the trace), compile, keep the entry."""
        t = self.trace_for(*args)
        t.flat_args(args)  # static leaves and structure: an error that names the argument
        exe = registry.executable(t.final.graph, self.backend, self.options)
        backend = registry.get(self.backend)
        own = type(backend).session is not registry.Backend.session
        session = (functools.partial(backend.session, **self.settings)
                   if self.settings or own else None)
        spec = ArgSpec.of(args)
        entry = Entry(t, exe, leaves, spec, session)
        live = {id(x) for x in self.traces.values()}
        self.entries = {k: e for k, e in self.entries.items() if id(e.trace) in live}
        self.entries[key] = entry
        return entry

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
