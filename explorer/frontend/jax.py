"""JAX -> Graph: trace `fn` on example arguments to a jaxpr and translate it equation by equation.

Nested `jit`/`pjit`, `custom_jvp_call`, `custom_vjp_call`, `remat` and `closed_call` are inlined,
`stop_gradient` is dropped, and every node keeps the user's source line (a notebook cell shows
as "In[3]", not as the kernel's temporary file).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import inspect
import linecache
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.extend.core as jex_core
import numpy as np
from jax._src import source_info_util

from ..ir import dtypes
from ..ir.builder import GraphBuilder
from ..ir.graph import Graph, Source, TensorType, TupleType
from ..ir.opaque import JaxImpl
from ..ir.ops import OPS, OpError
from .arguments import ArgSpec, ArgumentMismatch, host_value, is_key
from .jax_calls import CallLog, in_library, user_frames

# Primitives that wrap a sub-jaxpr which we inline, and the params that may hold it.
_INLINE = {"pjit", "jit", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr",
           "remat", "remat2", "checkpoint", "closed_call", "core_call", "custom_lin"}
_SUBJAXPR_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")
# Primitives that are the identity on values.
_IDENTITY = {"stop_gradient", "optimization_barrier"}
# JAX primitive name -> our op name, where they differ.
_RENAME = {"copy_p": "copy"}


# Primitives translated by a handler of their own (control flow, random keys, indexing forms):
# name -> handler(cv, eqn, ins, source) -> one node id per `eqn.outvars`, or None to leave the
# equation to its op row. `cv` is the Converter below, the one object a handler is given.
# Handler modules register themselves with `handles` and are imported at the end of this module.
Handler = Callable[["Converter", Any, list[int], "Source | None"], "list[int] | None"]
HANDLERS: dict[str, Handler] = {}


def handles(*names: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for name in names:
            assert name not in HANDLERS, name
            HANDLERS[name] = fn
        return fn

    return register


class TraceError(ValueError):
    """The function could not be traced into the IR; says why and where in the user's code."""


class UnsupportedPrimitiveError(TraceError):
    pass


@dataclass
class Traced:
    graph: Graph
    in_tree: Any  # the pytree structure of (args,)
    out_tree: Any
    arg_names: tuple[str, ...]
    fn_name: str
    args: ArgSpec | None = None  # which leaves are traced and the static ones (None: all traced)
    static_names: tuple[str, ...] = ()  # the static leaves' names, as arg_names

    def flat_args(self, args: Sequence[Any]) -> list[np.ndarray]:
        """The graph's parameters from arguments like the traced ones."""
        spec = self.args or ArgSpec.of(args)
        if self.args is None and spec.tree != self.in_tree:
            raise ArgumentMismatch(f"the arguments are shaped like {spec.tree}, but the function "
                                   f"was traced with arguments shaped like {self.in_tree}")
        return [host_value(x) for x in spec.dynamic_leaves(args, lambda k: self.static_names[k])]


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
        types = tuple(_aval_type(a) for a in out_avals)
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
        cv = Converter(GraphBuilder(name=_sanitize(name)))
        env: dict[Any, int] = {}
        for k, var in enumerate(inner.invars):
            env[var] = cv.b.param(_aval_type(var.aval), f"arg{k}")
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
            scope = _join(base, _scope_of(eqn))
            frames = user_frames(eqn)
            source = _scoped(_source(frames) or outer, scope)
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
                    inner = _scoped(source, _join(scope, _call_name(eqn, sub)))
                    with (self.calls.entering(source, inner, _function_name(eqn, sub))
                          if self.calls is not None else contextlib.nullcontext()):
                        outs = self.inline(sub, ins, inner)
                for o, nid in zip(eqn.outvars, outs, strict=True):
                    env[o] = nid
                continue
            for o in eqn.outvars:  # what becomes a node must have a type the IR has
                _check_element_type(o.aval, name, source)
            outs = HANDLERS[name](self, eqn, ins, source) if name in HANDLERS else None
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


def trace(fn: Callable[..., Any], *args: Any) -> Traced:
    """Trace `fn(*args)` into a Graph. Arguments may be pytrees: array leaves are traced, the
    others are static (frontend/arguments.py)."""
    fn_name = getattr(fn, "__name__", type(fn).__name__)
    spec = ArgSpec.of(args)
    names = arg_names(fn, spec.paths)
    flat_fn = spec.closed(fn)
    dynamic = spec.dynamic_leaves(args, str)
    try:
        closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*dynamic)
    except TraceError:
        raise
    except Exception as e:  # JAX's own error (shapes, dtypes) raised inside the user's code
        raise TraceError(f"tracing {fn_name} failed: {type(e).__name__}: {_first_line(e)}"
                         f"{_user_location(e)}{_static_hint(e)}") from e
    out_tree = jax.tree_util.tree_structure(out_shape)
    calls = CallLog()
    cv = Converter(GraphBuilder(name=_sanitize(fn_name)), calls)
    env: dict[Any, int] = {}
    for var, name in zip(closed.jaxpr.invars, names):
        _check_element_type(var.aval, f"argument {name}", None)
        env[var] = cv.b.param(_aval_type(var.aval), name)
    for var, const in zip(closed.jaxpr.constvars, closed.consts):
        env[var] = cv.constant(const)
    cv.emit(closed.jaxpr, env)
    outputs = [cv.read(env, v) for v in closed.jaxpr.outvars]
    return Traced(calls.apply(cv.b.build(outputs)), spec.tree, out_tree, tuple(names), fn_name, spec,
                  tuple(arg_names(fn, spec.static_paths)))


def _static_hint(e: BaseException) -> str:
    if isinstance(e, jax.errors.TracerBoolConversionError | jax.errors.ConcretizationTypeError):
        return (". A value the function branches on in Python is traced: pass it as a Python "
                "bool or inside a container (static, as equinox.filter_jit treats it), or "
                "use lax.cond")
    return ""


@handles("empty", "empty2")
def _empty(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    """lax.empty (a buffer scans and linalg gradients fill later): zeros, as JAX lowers it."""
    return [cv.constant(np.zeros(o.aval.shape, o.aval.dtype), source) for o in eqn.outvars]


@handles("mul")
def _mul_out_dtype(cv: Converter, eqn: Any, ins: list[int],
                   source: Source | None) -> list[int] | None:
    """lax.mul(x, y, out_dtype=T) as JAX lowers it: each operand converted to T, then
    multiplied in T. Without out_dtype, the mul row."""
    if eqn.params.get("out_dtype") is None:
        return None
    t = _aval_type(eqn.outvars[0].aval).dtype  # out_dtype as JAX canonicalizes it (f64 -> f32)
    ins = [i if cv.type_of(i).dtype == t
           else cv.add("convert_element_type", [i], {"new_dtype": t}, source) for i in ins]
    return [cv.add("mul", ins, {}, source)]


@handles("dot_general")
def _dot_general(cv: Converter, eqn: Any, ins: list[int],
                 source: Source | None) -> list[int] | None:
    """dot_general with its preferred_element_type where that changes the result's type
    (bf16 operands accumulating in f32, int8 in i32); jnp.matmul names the operands' own
    type, which is no attribute. A form the row does not compute exactly runs in JAX."""
    attrs = {"dimension_numbers": _convert(eqn.params["dimension_numbers"])}
    pet = eqn.params.get("preferred_element_type")
    if pet is not None and dtypes.from_numpy(pet) != cv.type_of(ins[0]).dtype:
        attrs["preferred_element_type"] = dtypes.from_numpy(pet)
    return cv.row(eqn, "dot_general", ins, attrs, source)


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


# ---------------------------------------------------------------- named scopes


def _scope_of(eqn: Any) -> str:
    """JAX's name stack of an equation (named scopes, flax/equinox module names) without the
    transformations' wrappers: `jvp(outer)` is `outer`, `transpose(jvp(outer))` is
    `outer (transpose)`, the backward pass of `outer`."""
    parts = []
    for element in str(eqn.source_info.name_stack).split("/"):
        name, transposed = element, False
        while "(" in name and name.endswith(")"):
            head, _, rest = name.partition("(")
            transposed = transposed or head == "transpose"
            name = rest[:-1]
        if name and not (parts and parts[-1].split(" (")[0] == name):  # block (transpose)/block
            parts.append(f"{name} (transpose)" if transposed else name)
    return "/".join(parts)


def _call_name(eqn: Any, sub: Any) -> str:
    """The name a call-like primitive gives its body: the jitted function's name, the custom
    derivative's function, `checkpoint` for remat."""
    name = _function_name(eqn, sub)
    if eqn.primitive.name in ("remat", "remat2", "checkpoint"):
        name = f"checkpoint({name})" if name and name != "<lambda>" else "checkpoint"
    return "" if not name or name == "<lambda>" or name.startswith("_") else str(name)


def _function_name(eqn: Any, sub: Any) -> str:
    """The name of the function a call-like primitive calls, as Python knows it."""
    name = eqn.params.get("name")
    if not name:
        info = getattr(getattr(sub, "jaxpr", sub), "debug_info", None)
        name = getattr(info, "func_name", None)
    return str(name or "")


def _join(outer: str, inner: str) -> str:
    if not inner:
        return outer
    if not outer:
        return inner
    if outer.rsplit("/", 1)[-1] == inner.split("/", 1)[0]:  # relu's custom_jvp around relu's jit
        inner = inner.split("/", 1)[1] if "/" in inner else ""
    return f"{outer}/{inner}" if inner else outer


def _scoped(source: Source | None, scope: str) -> Source | None:
    if source is None:
        return Source("", 0, "", scope=scope) if scope else None
    return source if source.scope == scope else dataclasses.replace(source, scope=scope)


def _check_type(var: Any, typ: Any, prim: str, source: Source | None) -> None:
    expected = _aval_type(var.aval)
    if typ != expected:  # our shape rule disagrees with JAX's: a bug in the op table
        raise TraceError(f"internal: {prim} at {source} gives {typ} here but {expected} in JAX")


def _check_element_type(aval: Any, prim: str, s: Source | None) -> None:
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


def _aval_type(aval: Any) -> TensorType:
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


# ---------------------------------------------------------------- source lines


def _source(frames: Sequence[Any]) -> Source | None:
    """The user's line, from an equation's frames outside JAX (innermost first): the innermost
    frame outside installed libraries (equinox, flax, optax), else the innermost. A library's
    modules show as the node's scope instead."""
    if not frames:
        return None
    frame = next((f for f in frames if not in_library(f.file_name)), frames[0])
    return _make_source(frame.file_name, frame.start_line, frame.function_name)


def _make_source(file: str, line: int, function: str) -> Source:
    text = linecache.getline(file, line).strip()
    return Source(display_file(file), line, function, text, path=file)


def display_file(file: str) -> str:
    """A notebook cell's temporary file shows as In[N], as IPython numbers the cell."""
    try:
        from IPython import get_ipython

        ip = get_ipython()
    except ImportError:
        ip = None
    if ip is not None:
        number = getattr(getattr(ip, "compile", None), "_filename_map", {}).get(file)
        if number is not None:
            return f"In[{number}]"
    return file


def _user_location(e: BaseException) -> str:
    """' (at file:line: text)' for the innermost user frame of an exception's traceback."""
    tb = e.__traceback__
    found = None
    while tb is not None:
        fname = tb.tb_frame.f_code.co_filename
        if source_info_util.is_user_filename(fname) and "/explorer/" not in fname:
            found = (fname, tb.tb_lineno, tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    if found is None:
        return ""
    s = _make_source(*found)
    return f" (at {s} in {s.function}: `{s.line_text}`)"


def _unsupported(eqn: Any, name: str, s: Source | None) -> UnsupportedPrimitiveError:
    where = f" at {s} in {s.function}: `{s.line_text}`" if s else ""
    return UnsupportedPrimitiveError(
        f"primitive '{name}' is not supported by gambit-explorer{where}. "
        f"Supported primitives are the ops in explorer.ir.OPS.")


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0]


# ---------------------------------------------------------------- arguments


def arg_names(fn: Callable[..., Any] | None, paths: Sequence[Any]) -> list[str]:
    """`x`, `params['w']`, `model.layers[0].weight`: each leaf named by the parameter it came
    through and its path inside that argument."""
    try:
        params = list(inspect.signature(fn).parameters.values()) if fn is not None else []
    except (TypeError, ValueError):
        params = []
    names = []
    for path in paths:
        idx = path[0].idx
        if idx < len(params) and params[idx].kind in (params[idx].POSITIONAL_ONLY,
                                                      params[idx].POSITIONAL_OR_KEYWORD):
            base = params[idx].name
        else:
            base = f"args[{idx}]"
        names.append(base + jax.tree_util.keystr(path[1:]))
    return names


def _sanitize(name: str) -> str:
    clean = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)
    return clean if clean and (clean[0].isalpha() or clean[0] == "_") else f"f_{clean}"


# Handlers register themselves with `handles`: control flow; primitives with JAX-object
# params (indexing, pooling gradients); PRNG keys.
from . import jax_control, jax_params, jax_random  # noqa: E402, F401
