"""A traced node's location (`Source`, printed as `loc(...)`): the user's line, found in an
equation's frames or an exception's traceback (a notebook cell shows as "In[3]", not as the
kernel's temporary file), and the named scope, read off JAX's name stack (named scopes,
flax/equinox modules, jitted functions)."""

from __future__ import annotations

import dataclasses
import linecache
from collections.abc import Sequence
from typing import Any

from jax._src import source_info_util

from ..ir.graph import Source
from .jax_calls import in_frontend, in_library


def user_source(frames: Sequence[Any]) -> Source | None:
    """The user's line, from an equation's frames outside JAX (innermost first): the innermost
    frame outside installed libraries (equinox, flax, optax), else the innermost. A library's
    modules show as the node's scope instead. Frames of the frontend's own call of the traced
    function are no user's line: an equation with only those (a `shard_map` or `jit` object
    handed to explore() itself) has none."""
    frames = [f for f in frames if not in_frontend(f.file_name)]
    if not frames:
        return None
    frame = next((f for f in frames if not in_library(f.file_name)), frames[0])
    return make_source(frame.file_name, frame.start_line, frame.function_name)


def make_source(file: str, line: int, function: str) -> Source:
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


def user_location(e: BaseException) -> str:
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
    s = make_source(*found)
    return f" (at {s} in {s.function}: `{s.line_text}`)"


# ---------------------------------------------------------------- named scopes


def scope_of(eqn: Any) -> str:
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


def call_name(eqn: Any, sub: Any) -> str:
    """The name a call-like primitive gives its body: the jitted function's name, the custom
    derivative's function, `checkpoint` for remat."""
    name = function_name(eqn, sub)
    if eqn.primitive.name in ("remat", "remat2", "checkpoint"):
        name = f"checkpoint({name})" if name and name != "<lambda>" else "checkpoint"
    return "" if not name or name == "<lambda>" or name.startswith("_") else str(name)


def function_name(eqn: Any, sub: Any) -> str:
    """The name of the function a call-like primitive calls, as Python knows it."""
    name = eqn.params.get("name")
    if not name:
        info = getattr(getattr(sub, "jaxpr", sub), "debug_info", None)
        name = getattr(info, "func_name", None)
    return str(name or "")


def join_scopes(outer: str, inner: str) -> str:
    if not inner:
        return outer
    if not outer:
        return inner
    if outer.rsplit("/", 1)[-1] == inner.split("/", 1)[0]:  # relu's custom_jvp around relu's jit
        inner = inner.split("/", 1)[1] if "/" in inner else ""
    return f"{outer}/{inner}" if inner else outer


def scoped(source: Source | None, scope: str) -> Source | None:
    if source is None:
        return Source("", 0, "", scope=scope) if scope else None
    return source if source.scope == scope else dataclasses.replace(source, scope=scope)
