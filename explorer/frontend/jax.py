"""JAX -> Graph: trace `fn` on example arguments to a jaxpr and translate it equation by equation.

Nested `jit`/`pjit`, `custom_jvp_call`, `custom_vjp_call`, `remat` and `closed_call` are inlined,
`stop_gradient` is dropped, and every node keeps the user's source line (a notebook cell shows
as "In[3]", not as the kernel's temporary file).
"""

from __future__ import annotations

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
from ..ir.graph import Graph, Source, TensorType
from ..ir.ops import OPS, OpError

# Primitives that wrap a sub-jaxpr which we inline, and the params that may hold it.
_INLINE = {"pjit", "jit", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr",
           "remat", "checkpoint", "closed_call", "core_call", "custom_lin"}
_SUBJAXPR_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")
# Primitives that are the identity on values.
_IDENTITY = {"stop_gradient", "optimization_barrier", "reduce_precision"}
# JAX primitive name -> our op name, where they differ.
_RENAME = {"copy_p": "copy"}


# Primitives translated by a handler of their own (control flow, random keys, indexing forms):
# name -> handler(b, eqn, ins, source) -> one node id per `eqn.outvars`. Handler modules
# register themselves with `handles` and are imported at the end of this module.
Handler = Callable[[GraphBuilder, Any, list[int], "Source | None"], list[int]]
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


def trace(fn: Callable[..., Any], *args: Any) -> Traced:
    """Trace `fn(*args)` into a Graph. Arguments may be pytrees of arrays and numbers."""
    fn_name = getattr(fn, "__name__", type(fn).__name__)
    leaves_with_paths, in_tree = jax.tree_util.tree_flatten_with_path(args)
    names = _arg_names(fn, leaves_with_paths)
    for (_, leaf), name in zip(leaves_with_paths, names):
        if not _is_array_like(leaf):
            raise TraceError(
                f"argument {name} of {fn_name} is a {type(leaf).__name__}: gambit-explorer "
                f"traces arrays, so pass a NumPy/JAX array or a Python number there")
    try:
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    except TraceError:
        raise
    except Exception as e:  # JAX's own error (shapes, dtypes) raised inside the user's code
        raise TraceError(f"tracing {fn_name} failed: {type(e).__name__}: {_first_line(e)}"
                         f"{_user_location(e)}") from e
    out_tree = jax.tree_util.tree_structure(out_shape)
    b = GraphBuilder(name=_sanitize(fn_name))
    env: dict[Any, int] = {}
    for var, name in zip(closed.jaxpr.invars, names):
        env[var] = b.param(_aval_type(var.aval), name)
    for var, const in zip(closed.jaxpr.constvars, closed.consts):
        env[var] = b.constant(np.asarray(const))
    _emit(b, closed.jaxpr, env)
    outputs = [_read(b, env, v) for v in closed.jaxpr.outvars]
    return Traced(b.build(outputs), in_tree, out_tree, tuple(names), fn_name)


def _emit(b: GraphBuilder, jaxpr: Any, env: dict[Any, int], outer: Source | None = None) -> None:
    """Translate `jaxpr`'s equations; `outer` is the call site of an inlined sub-jaxpr, the
    source of inner equations whose own traceback has no user frame (a cached library jit)."""
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        source = _source(eqn) or outer
        ins = [_read(b, env, v, source) for v in eqn.invars]
        if name in _IDENTITY:
            for o, i in zip(eqn.outvars, ins):
                env[o] = i
            continue
        if name in _INLINE:
            sub = next((eqn.params[p] for p in _SUBJAXPR_PARAMS if p in eqn.params), None)
            if sub is None:
                raise _unsupported(eqn, name, source)
            inner = getattr(sub, "jaxpr", sub)
            consts = getattr(sub, "consts", ())
            sub_env: dict[Any, int] = dict(zip(inner.invars, ins))
            for var, c in zip(inner.constvars, consts):
                sub_env[var] = b.constant(np.asarray(c), source=source)
            _emit(b, inner, sub_env, source)
            for o, v in zip(eqn.outvars, inner.outvars):
                env[o] = _read(b, sub_env, v, source)
            continue
        if name in HANDLERS:
            outs = HANDLERS[name](b, eqn, ins, source)
            for o, nid in zip(eqn.outvars, outs, strict=True):
                _check_type(o, b.type_of(nid), name, source)
                env[o] = nid
            continue
        op = _RENAME.get(name, name)
        if op not in OPS or OPS[op].sample is None:  # accept only rows checked against JAX
            raise _unsupported(eqn, name, source)
        attrs = {k: _convert(eqn.params[k]) for k in OPS[op].attrs if k in eqn.params}
        try:
            nid = b.add(op, ins, attrs, source)
        except OpError as e:
            raise TraceError(f"{name} at {source}: {e}") from None
        typ = b.type_of(nid)
        if len(eqn.outvars) == 1:
            _check_type(eqn.outvars[0], typ, name, source)
            env[eqn.outvars[0]] = nid
        else:
            for k, o in enumerate(eqn.outvars):
                env[o] = b.add("get_tuple_element", [nid], {"index": k}, source)
                _check_type(o, b.type_of(env[o]), name, source)


def jaxpr_to_graph(closed: Any, name: str, outer: Source | None = None) -> Graph:
    """A (closed) sub-jaxpr as a Graph of its own: a region's body. Its parameters are the
    jaxpr's inputs in order, its outputs the jaxpr's outputs; `outer` is the source of
    equations that have no user frame of their own."""
    inner = getattr(closed, "jaxpr", closed)
    consts = getattr(closed, "consts", ())
    b = GraphBuilder(name=_sanitize(name))
    env: dict[Any, int] = {}
    for k, var in enumerate(inner.invars):
        env[var] = b.param(_aval_type(var.aval), f"arg{k}")
    for var, c in zip(inner.constvars, consts):
        env[var] = b.constant(np.asarray(c), source=outer)
    _emit(b, inner, env, outer)
    return b.build([_read(b, env, v, outer) for v in inner.outvars])


def _read(b: GraphBuilder, env: dict[Any, int], v: Any, source: Source | None = None) -> int:
    if isinstance(v, jex_core.Literal):
        return b.constant(np.asarray(v.val, dtype=v.aval.dtype), source=source)
    return env[v]


def _check_type(var: Any, typ: Any, prim: str, source: Source | None) -> None:
    expected = _aval_type(var.aval)
    if typ != expected:  # our shape rule disagrees with JAX's: a bug in the op table
        raise TraceError(f"internal: {prim} at {source} gives {typ} here but {expected} in JAX")


def _aval_type(aval: Any) -> TensorType:
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


def _source(eqn: Any) -> Source | None:
    frame = source_info_util.user_frame(eqn.source_info.traceback)
    if frame is None:
        return None
    return _make_source(frame.file_name, frame.start_line, frame.function_name)


def _make_source(file: str, line: int, function: str) -> Source:
    text = linecache.getline(file, line).strip()
    return Source(_display_file(file), line, function, text)


def _display_file(file: str) -> str:
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


def _is_array_like(x: Any) -> bool:
    if isinstance(x, bool | int | float | np.ndarray | np.generic | jax.Array):
        return not (isinstance(x, np.ndarray) and x.dtype == object)
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _arg_names(fn: Callable[..., Any], leaves: Sequence[tuple[Any, Any]]) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for path, _ in leaves:
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


from . import jax_control  # noqa: E402, F401  (registers the control-flow handlers)
