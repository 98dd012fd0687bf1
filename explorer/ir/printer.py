"""The IR's text form: HLO-like, one node a line, read back exactly by `parser.parse`.

    graph @f {
      %0 = f32[3,4] parameter() {index=0, name="x"}
      %1 = f32[3,4] mul(%0, %0) loc("In[3]", 4, "f")
      return %1
    }
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from .graph import Graph, Literal, Node
from .opaque import OpaqueImpl

# Literals with more elements than this print as base64 of their bytes.
INLINE_LITERAL_LIMIT = 16


def format_value(v: Any, indent: str = "") -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _fmt_float(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, tuple | list):
        inner = ", ".join(format_value(x, indent) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, Literal):
        return _fmt_literal(v)
    if isinstance(v, Graph):
        return print_graph(v, indent)
    if isinstance(v, OpaqueImpl):
        return f"jax<{json.dumps(v.token)}>"
    raise TypeError(f"cannot print attribute value {v!r} of type {type(v).__name__}")


def _fmt_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    r = repr(float(x))
    return r if any(c in r for c in ".en") else r + ".0"


def _fmt_literal(lit: Literal) -> str:
    arr = lit.array
    if arr.size <= INLINE_LITERAL_LIMIT:
        body = _nested(arr.tolist())
    else:
        body = 'b64"' + base64.b64encode(arr.tobytes()).decode() + '"'
    return f"dense<{lit.type} {body}>"


def _nested(x: Any) -> str:
    if isinstance(x, list):
        return "[" + ", ".join(_nested(e) for e in x) + "]"
    if isinstance(x, complex):  # (real, imaginary), as HLO writes a complex element
        return f"({_fmt_float(x.real)}, {_fmt_float(x.imag)})"
    return format_value(float(x) if not isinstance(x, bool | int) else x)


def format_node(n: Node, indent: str = "  ") -> str:
    args = ", ".join(f"%{i}" for i in n.inputs)
    text = f"{indent}%{n.id} = {n.type} {n.op}({args})"
    if n.attrs:
        text += " {" + ", ".join(f"{k}={format_value(v, indent)}" for k, v in n.attrs.items()) + "}"
    if n.source is not None:
        s = n.source
        scope = f", {json.dumps(s.scope)}" if s.scope else ""
        text += f" loc({json.dumps(s.file)}, {s.line}, {json.dumps(s.function)}{scope})"
    return text


def print_graph(g: Graph, indent: str = "") -> str:
    lines = [f"graph @{g.name} {{"]
    lines += [format_node(n, indent + "  ") for n in g.nodes]
    lines.append(f"{indent}  return " + ", ".join(f"%{i}" for i in g.outputs))
    lines.append(f"{indent}}}")
    return "\n".join(lines)
