"""Standalone reproducers: `stage.reproducer(path)` writes a Python script that rebuilds a stage
(or one fused kernel of it) from its IR text, runs it on seeded random inputs on a backend and
checks it against the reference interpreter, printing one line that starts with `ok` or
`MISMATCH`. A bug report is then one file that anyone with the project installed can run.

The script holds everything the stage needs but the project itself: the IR text, and for an
opaque node (a JAX primitive the op table lacks, ir/opaque.py) the primitive lowered to
StableHLO by `jax.export`, since the live object its IR token names exists only in the process
that traced it. What the script calls at run time (`bind_opaque`, `compare` here,
`random_inputs` in inputs.py) lives in the project, so that scripts stay short and read as
what they do.
"""

from __future__ import annotations

import base64
import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..backends import registry
from ..files import write_atomic
from ..ir import dtypes
from ..ir.graph import Graph, Node, TensorType, TupleType, alone
from ..ir.opaque import OpaqueImpl, UnboundImpl
from ..ir.ops.regions import bodies, body_path
from ..ir.parser import parse
from .closeness import check_outputs
from .inputs import describe_inputs


class ReproducerError(ValueError):
    """A reproducer that cannot be made or run: says why."""


# ---------------------------------------------------------------- the script


def reproducer(stage: Any, path: str | os.PathLike[str] | None = None, *,
               kernel: int | str | None = None, backend: str = "cpu") -> str:
    """The script reproducing `stage` (a Stage, or a Graph), or its one `kernel` (a kernel
    node's id or its body's name, see `find_kernel`), which runs on `backend` unless told
    otherwise; also written to `path` when given."""
    graph = getattr(stage, "graph", stage)
    if not isinstance(graph, Graph):
        raise ReproducerError(f"a reproducer is made of a Stage or a Graph, not "
                              f"{type(stage).__name__}")
    stage_name = getattr(stage, "name", "graph")
    if not isinstance(backend, str) or backend not in registry.names():
        raise ReproducerError(f"unknown backend {backend!r}; registered: "
                              f"{', '.join(registry.names())}")
    if path is not None and not isinstance(path, str | os.PathLike):
        raise ReproducerError(f"path must be a str or a path, not {type(path).__name__}")
    what = f"stage {stage_name!r} of @{graph.name}"
    if kernel is not None:
        where, node, inside = find_kernel(graph, kernel, stage_name)
        graph = alone(inside, node)
        what = f"kernel {node.attrs['body'].name} (%{node.id}{where}) of {what}"
    graph, opaque = _embed_opaque(graph)
    text = str(graph)
    if parse(text) != graph:  # the script would check another graph than the stage's
        raise ReproducerError(f"the IR text of {what} does not read back as the same graph "
                              f"(a printer/parser bug)")
    name = Path(path).name if path is not None else "reproducer.py"
    script = _script(what, graph, text, opaque, backend, name)
    if path is not None:
        if Path(path).is_dir():
            raise ReproducerError(f"{path} is a directory; give the script's file name")
        write_atomic(path, script)
    return script


def _script(what: str, graph: Graph, text: str, opaque: Mapping[str, dict[str, Any]],
            backend: str, name: str) -> str:
    inputs = [f"#   {line}" for line in describe_inputs(graph)] or ["#   (none)"]
    notes = []
    if opaque:
        names = ", ".join(sorted({v["opcode"] for v in opaque.values()}))
        notes = ["#", f"# It holds opaque nodes ({names}): JAX primitives the op table has no row for.",
                 "# It needs JAX to run them, from their StableHLO embedded in OPAQUE below."]
        missing = [f"{v['opcode']}: {v['missing']}" for v in opaque.values() if "missing" in v]
        notes += [f"# NOT embedded, so this script cannot run it: {m}" for m in missing]
    if "while" in _ops(graph):
        notes += ["#", "# A while loop's trip count depends on the inputs: should it not end on these",
                  "# random ones, try another --seed."]
    lines = [
        "#!/usr/bin/env python3",
        f"# Reproducer of {what}, made by gambit-explorer.",
        "#",
        "# Rebuilds the graph from its IR text, runs it on seeded random inputs on a backend and",
        "# checks the result against the reference interpreter; prints one line starting with",
        "# `ok` or `MISMATCH` and exits 1 on a mismatch.",
        "#",
        f"#     python {name} [--backend NAME (default {backend})] [--seed N (default 0)]",
        "#",
        "# Inputs, one per parameter:",
        *inputs,
        *notes,
        "",
        "import argparse",
        "import sys",
        "",
        "import explorer as gx",
        "from explorer.backends import registry",
        "from explorer.measure.inputs import random_inputs",
        "from explorer.measure.reproducer import bind_opaque, compare, not_finite",
        "",
        f"WHAT = {what!r}",
        f"BACKEND = {backend!r}",
        f"IR = {_string(text)}",
        f"OPAQUE = {_opaque_literal(opaque)}",
        "",
        "",
        "def main(argv: list[str] | None = None) -> int:",
        "    parser = argparse.ArgumentParser(description=f'Reproducer of {WHAT}.')",
        "    parser.add_argument('--backend', default=BACKEND, help='the backend to check')",
        "    parser.add_argument('--seed', type=int, default=0, help='seeds the random inputs')",
        "    options = parser.parse_args(argv)",
        "    graph = gx.parse(IR)",
        "    if OPAQUE:",
        "        print('note: this graph holds opaque nodes; JAX runs them from their embedded '",
        "              'StableHLO')",
        "        graph = bind_opaque(graph, OPAQUE)",
        "    args = random_inputs(graph, options.seed)",
        "    got = registry.run_graph(graph, [a.copy() for a in args], options.backend).outputs",
        "    want = registry.run_graph(graph, [a.copy() for a in args], 'reference').outputs",
        "    ok, error = compare(got, want)",
        "    verdict = 'ok' if ok else 'MISMATCH'",
        "    print(f'{verdict} {WHAT} on {options.backend}: relative error {error:.3g}'",
        "          f'{not_finite(want)} (seed {options.seed})')",
        "    return 0 if ok else 1",
        "",
        "",
        "if __name__ == '__main__':",
        "    sys.exit(main())",
        "",
    ]
    return "\n".join(lines)


def _string(text: str) -> str:
    """`text` as a Python literal: a raw triple-quoted block where it can be one."""
    if "'''" not in text and not text.endswith("\\") and "\r" not in text:
        return "r'''\n" + text + "\n'''.strip()"
    return repr(text)


def _opaque_literal(opaque: Mapping[str, dict[str, Any]]) -> str:
    if not opaque:
        return "{}"
    out = ["{"]
    for token, entry in opaque.items():
        out.append(f"    {token!r}: {{")
        for key, value in entry.items():
            if key == "module":  # base64, wrapped
                chunks = [value[k:k + 88] for k in range(0, len(value), 88)] or [""]
                out.append(f"        {key!r}: (")
                out += [f"            {c!r}" for c in chunks]
                out.append("        ),")
            else:
                out.append(f"        {key!r}: {value!r},")
        out.append("    },")
    out.append("}")
    return "\n".join(out)


# ---------------------------------------------------------------- one kernel


def kernels(graph: Graph) -> list[tuple[str, Node, Graph]]:
    """Every `kernel` node of `graph`, in region bodies too: (where it sits, " in %6.body" or
    "", the node, the graph holding it)."""
    found: list[tuple[str, Node, Graph]] = []

    def walk(g: Graph, where: str) -> None:
        for n in g.nodes:
            if n.op == "kernel":
                found.append((where, n, g))
                continue
            for key, body in bodies(n):
                walk(body, f" in {body_path(n, key)}{where}")

    walk(graph, "")
    return found


def find_kernel(graph: Graph, key: int | str, stage_name: str = "graph") -> tuple[str, Node, Graph]:
    """The kernel `key` names, as `kernels` lists it: a node id (an int, or "%9"), or a body's
    name ("fused_9"), either one followed by where it sits when a region body holds it
    ("%9 in %50.body"). An id or name alone picks the top level's kernel, else the only one."""
    every = kernels(graph)
    if isinstance(key, bool) or not isinstance(key, int | str):
        raise ReproducerError(f"kernel must be a node id or a kernel body's name, not {key!r}")
    if not every:
        raise ReproducerError(f"stage {stage_name!r} has no kernels (a fused stage has them)")
    head, sep, where = str(key).partition(" in ")

    def named(n: Node) -> bool:
        return head in (str(n.id), f"%{n.id}") if isinstance(key, int) or head.startswith("%") \
            else n.attrs["body"].name == head

    matches = [k for k in every if named(k[1]) and (not sep or k[0] == f" in {where}")]
    top = [k for k in matches if not k[0]]
    if len(top) == 1 or len(matches) == 1:
        return (top or matches)[0]
    listing = ", ".join(repr(f"%{n.id}{w}") for w, n, _ in (matches or every))
    if matches:
        raise ReproducerError(f"kernel {key!r} names several kernels of stage {stage_name!r}; "
                              f"say which: {listing}")
    names = ", ".join(dict.fromkeys(n.attrs["body"].name for _, n, _ in every))
    raise ReproducerError(f"stage {stage_name!r} has no kernel {key!r}; its kernels: {listing} "
                          f"(bodies {names})")


# ---------------------------------------------------------------- checking


def compare(got: Sequence[Any], want: Sequence[Any]) -> tuple[bool, float]:
    """(whether every output is within the project's tolerance of the reference's, the worst
    relative error): each output against its own element type's tolerance
    (closeness.py)."""
    return check_outputs(_flat(got), _flat(want))


def not_finite(want: Sequence[Any]) -> str:
    """", 3 of 12 values not finite" where the reference computed NaN or infinities (`compare`
    asks the backend for the same there, and compares only the rest), else ""."""
    values = [v for v in _flat(want) if v.dtype.kind in "fc"]
    total = sum(v.size for v in values)
    bad = sum(int(np.count_nonzero(~np.isfinite(v))) for v in values)
    return f", {bad} of {total} values not finite" if bad else ""


def _ops(graph: Graph) -> set[str]:
    """The ops of `graph` and of its bodies."""
    out = set(graph.ops())
    for n in graph.nodes:
        for _, body in bodies(n):
            out |= _ops(body)
    return out


def _flat(values: Sequence[Any]) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for v in values:
        out += _flat(v) if isinstance(v, tuple | list) else [np.asarray(v)]
    return out


# ---------------------------------------------------------------- opaque nodes


def _embed_opaque(graph: Graph) -> tuple[Graph, dict[str, dict[str, Any]]]:
    """`graph` with each opaque node's impl renamed to a token of its own ("name:embeddedK"),
    and per token what a fresh process needs to run it: the primitive exported to StableHLO,
    or why it could not be ("missing")."""
    embedded: dict[str, dict[str, Any]] = {}
    renamed: dict[Any, UnboundImpl] = {}

    def rename(g: Graph, n: Node, impl: Any) -> Any:
        if impl not in renamed:
            token = f"{n.attrs.get('opcode', 'opaque')}:embedded{len(renamed)}"
            renamed[impl] = UnboundImpl(token)
            embedded[token] = _export(g, n, impl)
        return renamed[impl]

    return _map_impls(graph, rename), embedded


def _map_impls(g: Graph, fn: Any) -> Graph:
    """`g` with every OpaqueImpl attribute `v` of node `n` (in bodies too) as fn(g, n, v)."""
    nodes = []
    for n in g.nodes:
        changes = {}
        for key, v in n.attrs.items():
            if isinstance(v, OpaqueImpl):
                changes[key] = fn(g, n, v)
            elif isinstance(v, Graph):
                changes[key] = _map_impls(v, fn)
            elif isinstance(v, tuple) and v and all(isinstance(x, Graph) for x in v):
                changes[key] = tuple(_map_impls(x, fn) for x in v)
        nodes.append(dataclasses.replace(n, attrs=n.attrs.replace(**changes)) if changes else n)
    return Graph(nodes, g.params, g.outputs, g.name)


def _export(g: Graph, n: Node, impl: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"opcode": str(n.attrs.get("opcode", "opaque")),
                             "inputs": tuple(str(g[i].type) for i in n.inputs), "type": str(n.type)}
    if not hasattr(impl, "primitive"):
        entry["missing"] = "its JAX primitive is not alive in the process that made this script"
        return entry
    import jax
    from jax import export

    specs = [_spec(g[i].type) for i in n.inputs]
    error: Exception | None = None
    for platforms in (("cpu", "cuda"), ("cpu",)):
        try:
            exp = export.export(jax.jit(impl.bind), platforms=platforms)(*specs)
            break
        except Exception as e:  # noqa: BLE001 - JAX refuses what it cannot export in many ways
            error = e
    else:
        entry["missing"] = f"jax.export refused it ({type(error).__name__}: {error})"
        return entry
    entry.update(platforms=tuple(exp.platforms), kept_inputs=tuple(exp.module_kept_var_idx),
                 calling_convention=exp.calling_convention_version,
                 global_constants=exp.uses_global_constants,
                 module=base64.b64encode(exp.mlir_module_serialized).decode())
    return entry


def _spec(t: Any) -> Any:
    import jax

    if not isinstance(t, TensorType):
        raise ReproducerError(f"an opaque node reads a value of type {t}, which cannot be exported")
    return jax.ShapeDtypeStruct(t.shape, dtypes.to_numpy(t.dtype))


def _types(text: str) -> Any:
    from ..ir.ops.regions import type_from_text

    return type_from_text(text)


class ExportedImpl(OpaqueImpl):
    """An opaque node's primitive rebuilt from its embedded StableHLO: `jax.export`'s Exported
    of a stand-in function of the same signature, with the embedded module put in its place
    (its serialized form needs no extra package this way)."""

    __slots__ = ("exported", "_jitted")

    def __init__(self, token: str, entry: Mapping[str, Any]) -> None:
        import jax
        import jax.numpy as jnp
        from jax import export

        self.token = token
        ins = [_spec(_types(t)) for t in entry["inputs"]]
        out = _types(entry["type"])
        outs = out.elements if isinstance(out, TupleType) else (out,)
        zeros = [jnp.zeros(t.shape, dtypes.to_numpy(t.dtype)) for t in outs]

        def stand_in(*xs: Any) -> Any:
            return tuple(zeros) if isinstance(out, TupleType) else zeros[0]

        template = export.export(jax.jit(stand_in), platforms=tuple(entry["platforms"]))(*ins)
        self.exported = dataclasses.replace(
            template, mlir_module_serialized=base64.b64decode(entry["module"]),
            module_kept_var_idx=tuple(entry["kept_inputs"]),
            calling_convention_version=entry["calling_convention"],
            uses_global_constants=entry["global_constants"])
        self._jitted: Any = None

    def bind(self, *xs: Any) -> Any:
        return self.exported.call(*xs)

    def __call__(self, *xs: Any) -> Any:
        import jax

        if self._jitted is None:
            self._jitted = jax.jit(self.exported.call)
        with jax.default_device(jax.devices("cpu")[0]):
            out = self._jitted(*[np.asarray(x) for x in xs])
        if isinstance(out, tuple | list):
            return tuple(np.array(o, copy=True) for o in out)
        return np.array(out, copy=True)


def bind_opaque(graph: Graph, opaque: Mapping[str, Mapping[str, Any]]) -> Graph:
    """`graph` with each opaque node's impl rebuilt from its entry in `opaque` (a script's
    OPAQUE); an entry that could not be embedded is a ReproducerError that says why."""
    made: dict[str, ExportedImpl] = {}

    def rebind(g: Graph, n: Node, impl: Any) -> Any:
        entry = opaque.get(impl.token)
        if entry is None:
            raise ReproducerError(f"opaque node {n.describe()} ({impl!r}) has no embedded "
                                  f"primitive in this script")
        if "missing" in entry:
            raise ReproducerError(f"opaque node {n.describe()} ({entry['opcode']}) cannot run "
                                  f"outside the process that traced it: {entry['missing']}")
        if impl.token not in made:
            made[impl.token] = ExportedImpl(impl.token, entry)
        return made[impl.token]

    return _map_impls(graph, rebind)
