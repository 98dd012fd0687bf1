"""JAX -> Graph: `trace` traces `fn` on example arguments to a jaxpr and translates it equation
by equation (frontend/converter.py, with the handlers of jax_control, jax_params and
jax_random registered on import here), every node keeping the user's source line.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from ..ir.builder import GraphBuilder
from ..ir.graph import Graph
from . import jax_control, jax_params, jax_random, jax_sharding  # noqa: F401  (they register their handlers)
from .arguments import ArgSpec, ArgumentMismatch, host_value
from .converter import (
    Converter,
    TraceError,
    UnsupportedPrimitiveError,
    aval_type,
    check_element_type,
    graph_name,
)
from .jax_calls import CallLog
from .locations import user_location

__all__ = ["TraceError", "Traced", "UnsupportedPrimitiveError", "arg_names", "trace"]


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
                         f"{user_location(e)}{_static_hint(e)}") from e
    out_tree = jax.tree_util.tree_structure(out_shape)
    calls = CallLog()
    cv = Converter(GraphBuilder(name=graph_name(fn_name)), calls)
    env: dict[Any, int] = {}
    for var, name, x in zip(closed.jaxpr.invars, names, dynamic):
        check_element_type(var.aval, f"argument {name}", None)
        env[var] = cv.b.param(aval_type(var.aval), name)
        jax_sharding.argument_sharding(cv, env[var], x)  # an argument laid out over devices
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


def _first_line(e: BaseException) -> str:
    """JAX's message, its first line; where that line ends in a colon (shard_map's refusal of
    a split that does not divide, say) the two lines it introduces too (the mesh, and which
    axis does not divide which dimension), not the advice that follows."""
    lines = [line.strip() for line in str(e).strip().splitlines()]
    first = (lines or [""])[0]
    if not first.endswith(":"):
        return first
    detail = [line for line in lines[1:] if line][:2]
    return " ".join([first, *detail])


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
