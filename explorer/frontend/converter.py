"""The converter core of the JAX frontend: `Converter` translates a jaxpr's equations into the
graph being built, one op row per primitive, and hands the primitives that need more to the
handlers registered with `handles` (the handler modules jax_control, jax_params and
jax_random import this module; frontend/jaxpr.py, the `trace` entry, imports them).

Nested `jit`/`pjit`, `custom_jvp_call`, `custom_vjp_call`, `remat` and `closed_call` are inlined,
`stop_gradient` is dropped, a primitive without a row runs through JAX as an opaque node, and
every node keeps the user's source line and named scope (frontend/locations.py).
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Sequence
from typing import Any

import jax.extend.core as jex_core
import numpy as np

from ..ir import dtypes
from ..ir.builder import GraphBuilder
from ..ir.graph import Graph, Source, TensorType, TupleType
from ..ir.opaque import JaxImpl
from ..ir.ops import OPS, OpError
from .arguments import host_value, is_key
from .jax_calls import CallLog, user_frames
from .locations import call_name, function_name, join_scopes, scope_of, scoped, user_source

# Primitives that wrap a sub-jaxpr which we inline, and the params that may hold it.
_INLINE = {"pjit", "jit", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr",
           "remat", "remat2", "checkpoint", "closed_call", "core_call", "custom_lin"}
_SUBJAXPR_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")
# Primitives that are the identity on values.
# (pvary marks a shard_map value as varying over mesh axes: a type-level fact.)
_IDENTITY = {"stop_gradient", "optimization_barrier", "pvary"}
# Inlined calls whose parameters may carry shardings (in_shardings, out_shardings).
_JIT = {"pjit", "jit"}
# JAX primitive name -> our op name, where they differ.
_RENAME = {"copy_p": "copy"}

# Primitives translated by a handler of their own (control flow, random keys, indexing forms):
# name -> handler(cv, eqn, ins, source) -> one node id per `eqn.outvars`, or None to leave the
# equation to its op row. `cv` is the Converter below, the one object a handler is given.
# Handler modules (jax_control, jax_params, jax_random) register themselves with `handles`;
# frontend/jaxpr.py imports them.
Handler = Callable[["Converter", Any, list[int], "Source | None"], "list[int] | None"]
HANDLERS: dict[str, Handler] = {}


def handles(*names: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for name in names:
            assert name not in HANDLERS, name
            HANDLERS[name] = fn
        return fn

    return register


# How a jit's in/out shardings apply to its inputs/outputs, registered by
# frontend/jax_sharding.py as handlers are: (cv, eqn, node ids, "in_shardings" |
# "out_shardings", source) -> the node ids to use.
Shardings = Callable[["Converter", Any, list[int], str, "Source | None"], list[int]]
JIT_SHARDINGS: list[Shardings] = []


class TraceError(ValueError):
    """The function could not be traced into the IR; says why and where in the user's code."""


class UnsupportedPrimitiveError(TraceError):
    pass


class Converter:
    """Translates jaxpr equations into the graph being built: what a handler module
    (jax_control, jax_params, jax_random) receives, so that a new primitive's converter is one
    function, `@handles("name") def f(cv, eqn, ins, source)`, written with these methods:

      cv.add(op, ins, attrs, source)     one node of an op row (raises OpError if refused)
      cv.row(eqn, op, ins, attrs, source)  the equation as a node of row `op`, its results
                                         read out if several, opaque if the row refuses it
      cv.opaque(eqn, ins, source)        the equation as a node that runs it through JAX
      cv.attr(param)                     a jaxpr parameter as a plain attribute value
      cv.constant(value, source), cv.type_of(id), cv.node(id)
      cv.inline(closed_jaxpr, ins, source)   a sub-jaxpr's equations, in place
      cv.region(closed_jaxpr, name, source)  a sub-jaxpr as a graph of its own (a body)
    """

    def __init__(self, builder: GraphBuilder, calls: CallLog | None = None) -> None:
        self.b = builder
        self.calls = calls  # which call of the user's each equation is in (the top graph's)

    # ---- the graph being built

    def add(self, op: str, ins: Sequence[int], attrs: dict[str, Any] | None = None,
            source: Source | None = None) -> int:
        return self.b.add(op, ins, attrs, source)

    def constant(self, value: Any, source: Source | None = None) -> int:
        return self.b.constant(host_value(value), source=source)

    def type_of(self, nid: int) -> Any:
        return self.b.type_of(nid)

    def node(self, nid: int) -> Any:
        return self.b.node(nid)

    # ---- an equation

    @staticmethod
    def attr(v: Any) -> Any:
        """A jaxpr param as a plain, printable attribute value."""
        return _convert(v)

    def row(self, eqn: Any, op: str, ins: list[int], attrs: dict[str, Any],
            source: Source | None) -> list[int]:
        """One node of row `op`, and a get_tuple_element per result when it has several (an
        opaque node running the primitive through JAX if the row refuses this form)."""
        try:
            nid = self.b.add(op, ins, attrs, source)
        except OpError:  # a form of the primitive our row does not take: JAX runs it
            return self.opaque(eqn, ins, source)
        if len(eqn.outvars) == 1 and not isinstance(self.b.type_of(nid), TupleType):
            return [nid]  # (a split into one piece is a 1-tuple here, an array in JAX)
        return [self.b.add("get_tuple_element", [nid], {"index": k}, source)
                for k in range(len(eqn.outvars))]

    def opaque(self, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
        """A primitive without a row: an `opaque` node that runs through JAX (ir/opaque.py)."""
        in_avals = tuple(v.aval for v in eqn.invars)
        out_avals = tuple(v.aval for v in eqn.outvars)
        types = tuple(aval_type(a) for a in out_avals)
        multiple = eqn.primitive.multiple_results
        typ = TupleType(types) if multiple else types[0]
        impl = JaxImpl(eqn.primitive, eqn.params, in_avals, out_avals)
        attrs = {"opcode": eqn.primitive.name, "text": _params_text(eqn.params), "type": str(typ),
                 "impl": impl}
        try:
            nid = self.b.add("opaque", ins, attrs, source)
        except OpError as e:
            raise TraceError(f"{eqn.primitive.name} at {source}: {e}") from None
        if not multiple:
            return [nid]
        return [self.b.add("get_tuple_element", [nid], {"index": k}, source)
                for k in range(len(types))]

    # ---- sub-jaxprs

    def inline(self, closed: Any, ins: Sequence[int], source: Source | None) -> list[int]:
        """A (closed) sub-jaxpr's equations emitted here on the nodes `ins`; its outputs."""
        inner = getattr(closed, "jaxpr", closed)
        env: dict[Any, int] = dict(zip(inner.invars, ins, strict=True))
        for var, c in zip(inner.constvars, getattr(closed, "consts", ())):
            env[var] = self.constant(c, source)
        self.emit(inner, env, source)
        return [self.read(env, v, source) for v in inner.outvars]

    @staticmethod
    def region(closed: Any, name: str, outer: Source | None = None) -> Graph:
        """A (closed) sub-jaxpr as a Graph of its own: a region's body. Its parameters are
        the jaxpr's inputs in order, its outputs the jaxpr's outputs; `outer` is the source of
        equations that have no user frame of their own."""
        inner = getattr(closed, "jaxpr", closed)
        cv = Converter(GraphBuilder(name=graph_name(name)))
        env: dict[Any, int] = {}
        for k, var in enumerate(inner.invars):
            env[var] = cv.b.param(aval_type(var.aval), f"arg{k}")
        for var, c in zip(inner.constvars, getattr(closed, "consts", ())):
            env[var] = cv.constant(c, outer)
        cv.emit(inner, env, outer)
        return cv.b.build([cv.read(env, v, outer) for v in inner.outvars])

    def read(self, env: dict[Any, int], v: Any, source: Source | None = None) -> int:
        """The node of a jaxpr variable, or a constant for a literal."""
        if isinstance(v, jex_core.Literal):
            return self.b.constant(np.asarray(v.val, dtype=v.aval.dtype), source=source)
        return env[v]

    # ---- the translation

    def emit(self, jaxpr: Any, env: dict[Any, int], outer: Source | None = None) -> None:
        """Translate `jaxpr`'s equations; `outer` is the call site of an inlined sub-jaxpr,
        the source of inner equations whose own traceback has no user frame (a cached library
        jit)."""
        base = outer.scope if outer is not None else ""
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            scope = join_scopes(base, scope_of(eqn))
            frames = user_frames(eqn)
            source = scoped(user_source(frames) or outer, scope)
            if self.calls is not None and source is not None:
                source = self.calls.note(eqn, frames, source)
            ins = [self.read(env, v, source) for v in eqn.invars]
            if name in _IDENTITY:
                for o, i in zip(eqn.outvars, ins):
                    env[o] = i
                continue
            if name in _INLINE:
                sub = next((eqn.params[p] for p in _SUBJAXPR_PARAMS if p in eqn.params), None)
                if sub is None:  # a call we cannot open: it still runs, as an opaque node
                    outs = self.opaque(eqn, ins, source)
                else:
                    inner = scoped(source, join_scopes(scope, call_name(eqn, sub)))
                    for apply in JIT_SHARDINGS if name in _JIT else ():
                        ins = apply(self, eqn, ins, "in_shardings", source)
                    with (self.calls.entering(source, inner, function_name(eqn, sub))
                          if self.calls is not None else contextlib.nullcontext()):
                        outs = self.inline(sub, ins, inner)
                    for apply in JIT_SHARDINGS if name in _JIT else ():
                        outs = apply(self, eqn, outs, "out_shardings", source)
                for o, nid in zip(eqn.outvars, outs, strict=True):
                    env[o] = nid
                continue
            for o in eqn.outvars:  # what becomes a node must have a type the IR has
                check_element_type(o.aval, name, source)
            outs = self.handled(name, eqn, ins, source)
            if outs is None:  # no handler, or the handler leaves it to the op row
                op = _RENAME.get(name, name)
                if op not in OPS or OPS[op].sample is None or _on_keys(eqn):  # unchecked row
                    outs = self.opaque(eqn, ins, source)
                else:
                    attrs = {k: _convert(eqn.params[k]) for k in OPS[op].attrs if k in eqn.params}
                    outs = self.row(eqn, op, ins, attrs, source)
            for o, nid in zip(eqn.outvars, outs, strict=True):
                _check_type(o, self.b.type_of(nid), name, source)
                env[o] = nid


    def handled(self, name: str, eqn: Any, ins: list[int], source: Source | None) -> list[int] | None:
        """The equation through its handler (None: no handler, or the handler leaves it to the
        row). A parameter the handler expects and this JAX does not give (a higher-order
        primitive of another JAX version) is a TraceError naming the primitive, not a KeyError."""
        if name not in HANDLERS:
            return None
        try:
            return HANDLERS[name](self, eqn, ins, source)
        except KeyError as e:
            raise TraceError(f"{name} at {source}: its parameters lack {e} (this JAX states "
                             f"{name} with {', '.join(sorted(eqn.params))}), which "
                             f"gambit-explorer does not know") from None


def _on_keys(eqn: Any) -> bool:
    """Whether the equation moves typed PRNG keys (held as key data, so a row's shape
    attributes would be off by the key's trailing dimensions): JAX runs those."""
    return any(is_key(getattr(v, "aval", None)) for v in (*eqn.invars, *eqn.outvars))


def _params_text(params: dict[str, Any], limit: int = 240) -> str:
    """The primitive's parameters, one short line (sub-jaxprs as their equation counts)."""
    parts = []
    for k, v in params.items():
        inner = getattr(v, "jaxpr", v)
        if hasattr(inner, "eqns"):
            text = f"<jaxpr: {len(inner.eqns)} equations>"
        else:
            text = " ".join(repr(v).split())
            text = text if len(text) <= 60 else text[:57] + "..."
        parts.append(f"{k}={text}")
    out = ", ".join(parts)
    return out if len(out) <= limit else out[:limit - 3] + "..."


def _check_type(var: Any, typ: Any, prim: str, source: Source | None) -> None:
    expected = aval_type(var.aval)
    if typ != expected:  # our shape rule disagrees with JAX's: a bug in the op table
        raise TraceError(f"internal: {prim} at {source} gives {typ} here but {expected} in JAX")


def check_element_type(aval: Any, prim: str, s: Source | None) -> None:
    """Refuse an element type the IR lacks (float8, int2) where it first appears, naming it
    and the user's line, rather than failing later or computing it in another type."""
    dt = getattr(aval, "dtype", None)
    if dt is None or is_key(aval):
        return
    try:
        dtypes.from_numpy(dt)
    except (TypeError, ValueError):
        where = f" at {s} in {s.function}: `{s.line_text}`" if s else ""
        raise TraceError(f"element type {dt} ({prim}) is not supported by gambit-explorer"
                         f"{where}; supported: {', '.join(dtypes.NAMES)}") from None


def aval_type(aval: Any) -> TensorType:
    """An abstract value's type; a typed PRNG key array is held as its key data (u32[..., 2]
    for threefry), the array `jax.random.key_data` gives."""
    if is_key(aval):
        return TensorType(tuple(aval.shape) + tuple(aval.dtype._impl.key_shape), "u32")
    return TensorType(tuple(aval.shape), dtypes.from_numpy(aval.dtype))


def _convert(v: Any) -> Any:
    """A jaxpr param as a plain, printable attribute value."""
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return dtypes.from_numpy(v)
    if hasattr(v, "dtype") and not hasattr(v, "shape") and hasattr(v, "name"):
        return dtypes.from_numpy(v.dtype)
    if isinstance(v, enum.Enum):
        return int(v.value)
    if isinstance(v, bool | int | float | str) or v is None:
        return v
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, tuple | list):
        return tuple(_convert(x) for x in v)
    try:
        return dtypes.from_numpy(np.dtype(v))
    except TypeError:
        raise TraceError(f"cannot represent parameter value {v!r}") from None


def graph_name(name: str) -> str:
    """A Python function's name as a graph name the IR text accepts (`<lambda>` -> `_lambda_`)."""
    clean = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)
    return clean if clean and (clean[0].isalpha() or clean[0] == "_") else f"f_{clean}"
