"""The program writer: a stage's graph as one generated Python module, for any target.

The module is straight-line code in schedule order, as a person would write it against the
op table: each node is one line that calls its row's NumPy reference (`ops.add(v3, v4)`) or
writes the row's program form for the node's shapes (a dot: `matmul(v3, v4.T)`), a fused
kernel (`fuse_0([v3, v4])`) or, for control flow, a driver of control_flow.py (the ones the
interpreter core runs too) whose bodies are functions of the same module; each value is cast
to its node's element type where the result may differ (`as_f32`: free when it is one
already) and `del`eted right after its last use, so live memory follows the schedule exactly
as in the interpreter core. Nothing dispatches per node at run time.

A value that depends on no parameter (a constant, an `iota`, a mask or index table built
from them) is computed once, when the program is made, by the reference semantics, and the
function reads it as a module-level name (`const_17`); the source says so where the node
would be. Values of more than FOLD_BYTES and the function's outputs (a caller may keep or
change them) are computed on every call as usual.

What the writer does not write (ops whose row says `emit=Emit.INTERPRETED`: the split
`loop`, whose chunk driver and map-reduce kernels the interpreter core already runs) is one
line that hands that node to an interpreter of that node alone; `Program.notes` lists each
such node, and the module's source says so where it happens.

Two functions are generated from one walk: `program` (what runs, and what the kernels tab
shows), and `program_measured`, which also calls `_step(node, value)` after every top-level
node, the hook the measurement reads (reference.measured, the GPU's pool readings).

A target subclasses `ProgramWriter` and supplies what differs: `compile_kernel` (its fused
kernels), `header` (the module's docstring), and where it wants them `op_function` (what
`ops.X` is), `constant` (where a value computed ahead lives), `laid_out_ahead` (ops it lays
out when the program is made) and `scan_or_while` (a scan or while compiled whole). The CPU's writer
is cpu/program.py, the GPU's gpu/program.py.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from ..ir import dtypes
from ..ir.graph import Graph, Node, TensorType, TupleType, Type, alone
from ..ir.ops import OPS
from ..ir.traits import Emit
from . import control_flow, reference
from .interpreter import last_uses

ENTRY, MEASURED = "program", "program_measured"
# a value that depends on no parameter is computed once, when the program is made, up to
# this size (a constant of the graph always: its value is held anyway)
FOLD_BYTES = 1 << 16
# ops never computed ahead: JAX runs an opaque node, and may have effects
NOT_FOLDED = frozenset({"opaque"})


class ProgramError(Exception):
    """A graph the writer cannot write (the backend then runs the interpreter)."""


@dataclass
class Program:
    """A generated program: its source, its entry points and what it calls."""

    source: str
    fn: Callable[..., list[Any]]
    measured: Callable[..., list[Any]]
    kernels: list[Any] = field(default_factory=list)  # the fused kernels, in program order
    interpreters: list[Any] = field(default_factory=list)  # nodes run by the interpreter
    notes: list[str] = field(default_factory=list)  # "interpreted: loop %12 at f.py:3"
    # scans and whiles compiled whole (cpu/compiled_control_flow.py), in program order
    control_flow: list[Any] = field(default_factory=list)

    def all_kernels(self) -> list[Any]:
        out = list(self.kernels) + [x for x in self.control_flow if x.code is not None]
        for interp in self.interpreters:
            out += interp.all_kernels()
        return out


def literal(v: Any) -> str | None:
    """`v` as Python source when that source reads back as an equal value of the same type."""
    if isinstance(v, (bool, int, str, type(None))) or (isinstance(v, float) and np.isfinite(v)):
        return repr(v)
    if isinstance(v, tuple) and all(literal(x) is not None for x in v):
        return repr(v)
    return None


def ident(text: str) -> str:
    """`text` as a Python identifier (runs of other characters become one underscore)."""
    out = re.sub(r"\W+", "_", text).strip("_")
    if not out or out[0].isdigit() or keyword.iskeyword(out):
        out = "_" + out
    return out


def caster(dtype: str, xp: Any = np) -> Callable[[Any], np.ndarray]:
    """`as_f32(x)`: x as an ndarray of array module `xp` (NumPy; CuPy in GPU programs) and
    that element type; free when it already is one (a NumPy scalar from a 0-d op, or a
    Python number, becomes a 0-d array)."""
    want, array = dtypes.to_numpy(dtype), xp.ndarray

    def cast(x: Any) -> np.ndarray:
        if type(x) is array and x.dtype == want:
            return x
        return xp.asarray(x, dtype=want)

    cast.__name__ = f"as_{dtype}"
    return cast


def tuple_caster(casts: Sequence[Callable[[Any], np.ndarray]]) -> Callable[[Any], tuple]:
    """The cast of a tuple-typed value: each element by its own type."""

    def cast(xs: Any) -> tuple:
        return tuple(c(x) for c, x in zip(casts, xs, strict=True))

    return cast


class ProgramWriter:
    """Writes the module: one function per graph (the stage and every body under it). A
    target's subclass supplies its kernels and its header (see the module docstring)."""

    # the word a note uses for a kernel that does not run as generated code
    fallback_words: ClassVar[str] = "interpreted"

    def __init__(self, make_interpreter: Callable[[Graph], Any], matmul: Callable[..., Any],
                 reuse: ProgramWriter | None = None, xp: Any = np) -> None:
        self.make_interpreter, self.xp = make_interpreter, xp
        # a second walk (the measured twin) takes the first walk's kernels and interpreters
        self.reuse_kernels = iter(reuse.kernels) if reuse else None
        self.reuse_interpreters = iter(reuse.interpreters) if reuse else None
        self.reuse_control_flow = iter(reuse.control_flow) if reuse else None
        self.ns: dict[str, Any] = reuse.ns if reuse else {
            "ops": SimpleNamespace(), "np": np, "matmul": matmul,
            "control_flow": control_flow if xp is np else SimpleNamespace(
                one_or_tuple=control_flow.one_or_tuple, run_while=control_flow.run_while,
                run_conditional=control_flow.run_conditional,
                run_scan=partial(control_flow.run_scan, xp=xp))}
        self.functions: list[list[str]] = []
        self.kernels: list[Any] = []
        self.interpreters: list[Any] = []
        self.control_flow: list[Any] = []
        self.notes: list[str] = []
        self.taken: set[str] = set(reuse.taken) if reuse else set(self.ns)
        # (prefix, node id) -> the module-level name of a value computed ahead, and its
        # host value (what the nodes computed ahead after it read)
        self.folded: dict[tuple[str, int], str] = reuse.folded if reuse else {}
        self.folded_values: dict[tuple[str, int], Any] = reuse.folded_values if reuse else {}

    # ---- what a target supplies

    def compile_kernel(self, n: Node, name: str) -> Any:
        """The callable of fused kernel `n` (with `in_place`, the inputs it may write its
        result over, and `reason`, why it does not run as generated code, or "")."""
        raise NotImplementedError

    def header(self, graph: Graph) -> str:
        """The module's docstring: what its names are, and what it leaves to others."""
        raise NotImplementedError

    def op_function(self, name: str) -> Callable[..., Any]:
        """What `ops.<name>` is: the op's NumPy reference."""
        return OPS[name].ref

    def constant(self, value: np.ndarray) -> Any:
        """A value computed ahead, as the program holds it (read-only on the host)."""
        value.setflags(write=False)
        return value

    def laid_out_ahead(self, g: Graph, n: Node, target: str, ins: list[str],
                       prefix: str) -> str | None:
        """The line of an op whose work on its shapes the target does when the program is
        made (None: written as any other)."""
        return None

    def scan_or_while(self, n: Node, target: str, args: str, prefix: str, driver: str,
                      same: str, fallback: Callable[[Sequence[Any]], Any]) -> list[str]:
        """The lines of a scan or while: here the per-iteration `driver`; a target may
        compile it whole instead (keeping `fallback`, the driver as a function of the
        values, and saying that the bodies are `same` in Python)."""
        return [f"{target} = {driver}"]

    # ---- names in the module's namespace

    def bind(self, hint: str, value: Any) -> str:
        """A new module-level name for `value`."""
        name = self.fname(hint)
        self.ns[name] = value
        return name

    def op(self, name: str) -> str:
        ops = self.ns["ops"]
        attr = ident(name)
        if not hasattr(ops, attr):
            setattr(ops, attr, self.op_function(name))
        return f"ops.{attr}"

    def cast(self, t: Type) -> str:
        if isinstance(t, TupleType):
            parts = [self.cast(e) for e in t.elements]
            key = "as_tuple_" + "_".join(p.removeprefix("as_") for p in parts)
            if key not in self.ns:
                self.ns[key] = tuple_caster([self.ns[p] for p in parts])
                self.taken.add(key)
            return key
        assert isinstance(t, TensorType)
        key = f"as_{t.dtype}"
        if key not in self.ns:
            self.ns[key] = caster(t.dtype, self.xp)
            self.taken.add(key)
        return key

    def fname(self, hint: str) -> str:
        """A module-level name not taken yet: `hint` as an identifier, numbered if need be."""
        name = base = ident(hint)
        k = 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    # ---- values computed ahead

    def foldable(self, g: Graph) -> set[int]:
        """The nodes of `g` whose values depend on no parameter, to be computed ahead: pure
        ops and kernels whose inputs are all such values, of at most FOLD_BYTES (constants of
        any size), neither outputs of `g` nor unread."""
        keep, read = set(g.outputs), {i for n in g.nodes for i in n.inputs}
        done: set[int] = set()
        for n in g.nodes:
            if n.op == "parameter" or n.id in keep or n.id not in read or \
                    not isinstance(n.type, TensorType) or n.op in NOT_FOLDED:
                continue
            if n.op != "constant" and (
                    (OPS[n.op].emit is not Emit.CALL and n.op != "kernel")
                    or not all(i in done for i in n.inputs)
                    or math.prod(n.type.shape) * dtypes.itemsize(n.type.dtype) > FOLD_BYTES):
                continue
            done.add(n.id)
        return done

    def fold(self, g: Graph, n: Node, prefix: str) -> str:
        """Compute node `n` (of `foldable`) now, on the reference semantics, and bind it."""
        key = (prefix, n.id)
        if key in self.folded:  # (the measured twin: the first walk's)
            return self.folded[key]
        order = list(dict.fromkeys(n.inputs))
        vals = [self.folded_values[(prefix, i)] for i in order]
        with np.errstate(all="ignore"):
            out = reference.evaluate(alone(g, n), vals)[0]
        value = np.require(out, dtypes.to_numpy(n.type.dtype), "C")  # (0-d stays 0-d)
        self.folded_values[key] = value  # (read-only from here: what the program holds)
        self.folded[key] = self.bind(f"const_{prefix}{n.id}", self.constant(value))
        return self.folded[key]

    # ---- functions

    def function(self, g: Graph, name: str, prefix: str, measured: bool = False) -> str:
        """Write `g` as function `name` (its bodies first, as functions of their own)."""
        lines: list[str] = []
        var: dict[int, str] = {}
        params: list[str] = []
        for k, p in enumerate(g.param_nodes):
            hint = p.attrs.get("name", f"p{k}")
            params.append(self.local(f"{hint}", var, p.id, params))
        head = f"def {name}({', '.join(params)}{', _step' if measured else ''}):"
        doc = f'    """@{g.name}: {len(g.nodes)} nodes, {len(g.outputs)} outputs."""'
        lines += [head, doc]
        ahead = self.foldable(g)
        frees = {k: [i for i in v if i not in ahead] for k, v in last_uses(g).items()}
        for n in g.nodes:
            if n.op == "parameter":
                continue
            where = f"  ({n.source.file}:{n.source.line})" if n.source else ""
            if n.id in ahead:
                var[n.id] = self.fold(g, n, prefix)
                lines.append(f"    # %{n.id} = {n.op}{where}: {var[n.id]}, computed when the "
                             "program was made")
                continue
            lines.append(f"    # %{n.id} = {n.op}{where}")
            target = f"v{n.id}"
            var[n.id] = target
            body = self.node(g, n, target, var, frees.get(n.id, ()), prefix)
            gone = {v for x in body if x.startswith("del ") for v in x[4:].split(", ")}
            lines += [f"    {x}" for x in body]
            if measured:
                key = self.bind(f"node_{prefix}{n.id}", n)
                lines.append(f"    _step({key}, {target})")
            dead = [var[i] for i in frees.get(n.id, ()) if var[i] not in gone]
            if dead:
                lines.append(f"    del {', '.join(dead)}")
        outs = ", ".join(var[o] for o in g.outputs)
        lines.append(f"    return [{outs}]")
        self.functions.append(lines)
        return name

    def local(self, hint: str, var: dict[int, str], node_id: int, taken: list[str]) -> str:
        """A parameter's name in its function (the user's, where it is free)."""
        name = ident(hint)
        if re.fullmatch(r"v\d+", name) or name in taken or name in self.ns or name == "_step":
            name = f"{name}_{len(taken)}"
        var[node_id] = name
        return name

    def node(self, g: Graph, n: Node, target: str, var: dict[int, str], dying: Sequence[int],
             prefix: str) -> list[str]:
        ins = [var[i] for i in n.inputs]
        row = OPS[n.op]
        if row.emit is Emit.INTERPRETED:
            return [self.interpreted(g, n, target, ins)]
        if row.emit is Emit.REGION:
            return self.region(n, target, ins, dying, prefix)
        if n.op == "get_tuple_element":
            return [f"{target} = {ins[0]}[{n.attrs['index']}]"]
        if (line := self.laid_out_ahead(g, n, target, ins, prefix)) is not None:
            return [line]
        if row.program is not None and (expr := row.program(ins, [g[i].type for i in n.inputs],
                                                            n.type, n.attrs)) is not None:
            return [f"{target} = {self.cast(n.type)}({expr})"]
        args = list(ins)
        for k, v in n.attrs.items():
            text = literal(v)
            args.append(f"{k}={text if text is not None else self.bind(f'{k}_{prefix}{n.id}', v)}")
        return [f"{target} = {self.cast(n.type)}({self.op(n.op)}({', '.join(args)}))"]

    def interpreted(self, g: Graph, n: Node, target: str, ins: list[str]) -> str:
        if self.reuse_interpreters is not None:
            interp = next(self.reuse_interpreters)
        else:
            interp = self.make_interpreter(alone(g, n))
        self.interpreters.append(interp)
        where = f" at {n.source.file}:{n.source.line}" if n.source else ""
        self.notes.append(f"interpreted: {n.op} %{n.id}{where} (the interpreter core's driver)")
        run = self.bind(f"interpreted_{n.op}_{n.id}", runner(interp))
        return f"{target} = {run}([{', '.join(ins)}])  # the interpreter core runs this node"

    def kernel(self, n: Node, target: str, ins: list[str], dying: Sequence[int],
               prefix: str) -> list[str]:
        """A fused kernel's call, writing its result over an input that dies here where it
        may."""
        body = n.attrs["body"]
        k = (next(self.reuse_kernels) if self.reuse_kernels is not None
             else self.compile_kernel(n, f"{prefix}{body.name}"))
        self.kernels.append(k)
        if k.reason:  # no generated form (an op or element type): the reference runs it
            where = f" at {n.source.file}:{n.source.line}" if n.source else ""
            self.notes.append(f"{self.fallback_words}: kernel {body.name} %{n.id}{where} "
                              f"({k.reason})")
        fn, args = self.bind(body.name, k), ", ".join(ins)
        gone = [var for var, i in zip(ins, n.inputs) if i in dying and ins.count(var) == 1]
        if not gone or not k.in_place:
            return [f"{target} = {self.cast(n.type)}({fn}([{args}]))"]
        # the kernel may write its result over an input that dies here
        return [f"_args = [{args}]", f"del {', '.join(dict.fromkeys(gone))}",
                f"{target} = {self.cast(n.type)}({fn}(_args))",
                "del _args"]  # (no later del of what it took)

    def region(self, n: Node, target: str, ins: list[str], dying: Sequence[int],
               prefix: str) -> list[str]:
        a, here = n.attrs, f"{prefix}{n.op}_{n.id}_"
        args = ", ".join(ins)
        if n.op == "kernel":
            return self.kernel(n, target, ins, dying, prefix)
        if n.op == "call":
            body = self.function(a["body"], self.fname(here + "body"), here)
            return [f"{target} = control_flow.one_or_tuple({body}({args}))"]
        drivers = self.ns["control_flow"]
        if n.op == "scan":
            body = self.function(a["body"], self.fname(here + "body"), here)
            t = self.bind(f"type_{here}", n.type)
            driver = (f"control_flow.run_scan({body}, [{args}], {t}, length={a['length']}, "
                      f"reverse={a['reverse']}, num_consts={a['num_consts']}, "
                      f"num_carry={a['num_carry']})")
            ns = self.ns
            return self.scan_or_while(
                n, target, args, prefix, driver, f"{body} is the same in Python",
                lambda vals, b=body, t=t: drivers.run_scan(
                    ns[b], vals, ns[t], a["length"], a["reverse"], a["num_consts"],
                    a["num_carry"]))
        if n.op == "while":
            cond = self.function(a["cond"], self.fname(here + "cond"), here + "cond_")
            body = self.function(a["body"], self.fname(here + "body"), here)
            ns = self.ns
            return self.scan_or_while(
                n, target, args, prefix, f"control_flow.run_while({cond}, {body}, [{args}])",
                f"{cond} and {body} are the same in Python",
                lambda vals, c=cond, b=body: drivers.run_while(ns[c], ns[b], vals))
        if n.op == "conditional":
            names = [self.function(b, self.fname(f"{here}branch{k}"), f"{here}b{k}_")
                     for k, b in enumerate(a["branches"])]
            arities = tuple(len(b.params) for b in a["branches"])
            return [f"{target} = control_flow.run_conditional([{', '.join(names)}], "
                    f"{arities!r}, [{args}])"]
        raise ProgramError(f"{n.describe()}: no writer for region op {n.op}")

    def module(self) -> str:
        return "\n\n".join("\n".join(f) for f in self.functions) + "\n"


def runner(interp: Any) -> Callable[[list[Any]], Any]:
    """Runs a one-node interpreter on the node's inputs (each distinct input once)."""
    node = interp.graph[interp.graph.outputs[0]]
    order = list(dict.fromkeys(node.inputs))

    def run(vals: list[Any]) -> Any:
        by_id = dict(zip(node.inputs, vals))
        with np.errstate(all="ignore"):
            return interp.evaluate([by_id[i] for i in order])[0]

    return run


def generate(graph: Graph, writer: Callable[[ProgramWriter | None], ProgramWriter]) -> Program:
    """The program of `graph`; `writer(reuse)` makes the target's writer, given the first
    walk's for the measured twin."""
    w = writer(None)
    w.function(graph, ENTRY, "")
    shown = w.header(graph) + "\n" + w.module()
    m = writer(w)  # the measured twin: same walk, with the hook
    m.function(graph, MEASURED, "", measured=True)
    text = shown + "\n\n" + m.module()
    try:
        exec(compile(text, f"<program @{graph.name}>", "exec"), w.ns)
    except SyntaxError as e:  # a bug of ours: say so plainly
        raise ProgramError(f"generated program does not parse: {e}") from e
    return Program(shown, w.ns[ENTRY], w.ns[MEASURED], w.kernels, w.interpreters, w.notes,
                   w.control_flow)
