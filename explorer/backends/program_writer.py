"""The CPU backend's program generator: a stage's graph as one generated Python module.

The module is straight-line code in schedule order, as a person would write it against the
op table: each node is one line that calls its row's NumPy reference (`ops.add(v3, v4)`) or
writes the row's NumPy form for the node's shapes (a dot: `matmul(v3, v4.T)`, np.matmul's
semantics on the BLAS dots.py picks), a
fused kernel (`fuse_0([v3, v4])`, numba, kernel_codegen.py) or, for control flow, a driver
of runtime.py whose bodies are functions of the same module; each value is cast to its node's
element type where NumPy's result may differ (`as_f32`: free when it is one already) and
`del`eted right after its last use, so live memory follows the schedule exactly as in the
interpreter core. Nothing dispatches per node at run time.

A value that depends on no parameter (a constant, an `iota`, a mask or index table built
from them) is computed once, when the program is made, by the reference semantics, and the
function reads it as a module-level name (`const_17`); the source says so where the node
would be. Values of more than FOLD_BYTES and the function's outputs (a caller may keep or
change them) are computed on every call as usual.

What the generator does not write (ops whose row says `emit=Emit.INTERPRETED`: the split
`loop`, whose chunk driver and map-reduce kernels the interpreter core already runs) is one
line that hands that node to a CpuInterpreter of that node alone; `Program.notes` lists each
such node, and the module's source says so where it happens.

Two functions are generated from one walk: `program` (what runs, and what the kernels tab
shows), and `program_measured`, which also calls `_step(node, value)` after every top-level
node, the hook the tracemalloc measurement reads (reference.measured).
"""

from __future__ import annotations

import functools
import keyword
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.graph import Graph, Node, TensorType, TupleType, Type, alone
from ...ir.ops import OPS
from ...ir.traits import Emit
from .. import reference
from ..interpreter import last_uses
from . import conv, dots, indexing, indexing_prepared, lapack, random, runtime, sorting, window
from .dot_kernels import DotKernel
from .kernels import CompiledKernel, compile_kernel
from .loops import CompiledLoop

ENTRY, MEASURED = "program", "program_measured"
# a value that depends on no parameter is computed once, when the program is made, up to
# this size (a constant of the graph always: its value is held anyway)
FOLD_BYTES = 1 << 16
# ops never computed ahead: JAX runs an opaque node, and may have effects
NOT_FOLDED = frozenset({"opaque"})
# ops laid out when the program is made (gathers and scatters at indices known only at run
# time, convolutions, LAPACK calls): op -> (its input types, attrs) -> a function of its
# inputs, or None
PREPARED: dict[str, Callable[[Sequence[Any], Any], Callable[..., Any] | None]] = {
    **{op: functools.partial(indexing_prepared.prepare, op)
       for op in ("gather", *indexing_prepared.SCATTERS)},
    "conv_general_dilated": conv.prepare, **lapack.PREPARERS}
# ops whose references run with numba loops in CPU programs (same semantics, bit for bit)
LOOPS = {**conv.REFERENCES, **indexing.REFERENCES, **random.REFERENCES, **sorting.REFERENCES,
         **window.REFERENCES}


class ProgramError(Exception):
    """A graph the generator cannot write (the backend then runs the interpreter)."""


@dataclass
class Program:
    """A generated program: its source, its entry points and what it calls."""

    source: str
    fn: Callable[..., list[Any]]
    measured: Callable[..., list[Any]]
    kernels: list[Any] = field(default_factory=list)  # CompiledKernels, in program order
    interpreters: list[Any] = field(default_factory=list)  # nodes run by the interpreter
    notes: list[str] = field(default_factory=list)  # "interpreted: loop %12 at f.py:3"
    loops: list[Any] = field(default_factory=list)  # CompiledLoops (whole scans/whiles in numba)

    def all_kernels(self) -> list[Any]:
        out = list(self.kernels) + [x for x in self.loops if x.code is not None]
        for interp in self.interpreters:
            out += interp.all_kernels()
        return out


def _literal(v: Any) -> str | None:
    """`v` as Python source when that source reads back as an equal value of the same type."""
    if isinstance(v, (bool, int, str, type(None))) or (isinstance(v, float) and np.isfinite(v)):
        return repr(v)
    if isinstance(v, tuple) and all(_literal(x) is not None for x in v):
        return repr(v)
    return None


def _ident(text: str) -> str:
    out = re.sub(r"\W+", "_", text).strip("_")
    if not out or out[0].isdigit() or keyword.iskeyword(out):
        out = "_" + out
    return out


class _Writer:
    """Writes the module: one function per graph (the stage and every body under it)."""

    # ops laid out ahead as host loops and LAPACK calls (PREPARED, and a gather at indices
    # computed ahead: indexing.prepared_gather)
    lays_out_ahead = True

    def __init__(self, make_interpreter: Callable[[Graph], Any], matmul: Callable[..., Any],
                 reuse: _Writer | None = None) -> None:
        self.make_interpreter = make_interpreter
        # a second walk (the measured twin) takes the first walk's kernels and interpreters
        self.reuse_kernels = iter(reuse.kernels) if reuse else None
        self.reuse_interpreters = iter(reuse.interpreters) if reuse else None
        self.reuse_loops = iter(reuse.loops) if reuse else None
        self.ns: dict[str, Any] = reuse.ns if reuse else {
            "ops": SimpleNamespace(), "np": np, "runtime": runtime, "matmul": matmul}
        self.functions: list[list[str]] = []
        self.kernels: list[CompiledKernel] = []
        self.interpreters: list[Any] = []
        self.loops: list[CompiledLoop] = []
        self.notes: list[str] = []
        self.taken: set[str] = set(reuse.taken) if reuse else set(self.ns)
        # (prefix, node id) -> the module-level name of a value computed ahead, and its
        # host value (what the nodes computed ahead after it read)
        self.folded: dict[tuple[str, int], str] = reuse.folded if reuse else {}
        self.folded_values: dict[tuple[str, int], Any] = reuse.folded_values if reuse else {}

    # ---- names in the module's namespace

    def bind(self, hint: str, value: Any) -> str:
        """A new module-level name for `value`."""
        name = self._fname(hint)
        self.ns[name] = value
        return name

    def op(self, name: str) -> str:
        ops = self.ns["ops"]
        attr = _ident(name)
        if not hasattr(ops, attr):  # (small convs, gather, scatters, threefry, pooling, top_k)
            setattr(ops, attr, LOOPS.get(name, OPS[name].ref))
        return f"ops.{attr}"

    def cast(self, t: Type) -> str:
        if isinstance(t, TupleType):
            parts = [self.cast(e) for e in t.elements]
            key = "as_tuple_" + "_".join(p.removeprefix("as_") for p in parts)
            if key not in self.ns:
                self.ns[key] = runtime.tuple_caster([self.ns[p] for p in parts])
                self.taken.add(key)
            return key
        assert isinstance(t, TensorType)
        key = f"as_{t.dtype}"
        if key not in self.ns:
            self.ns[key] = self.caster(t.dtype)
            self.taken.add(key)
        return key

    def caster(self, dtype: str) -> Callable[[Any], Any]:
        """The function that gives a value element type `dtype` (an ndarray of it)."""
        return runtime.caster(dtype)

    def constant(self, value: np.ndarray) -> Any:
        """A value computed ahead, as the program holds it (read-only on the host)."""
        value.setflags(write=False)
        return value

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
        params = []
        for k, p in enumerate(g.param_nodes):
            hint = p.attrs.get("name", f"p{k}")
            params.append(self._local(f"{hint}", var, p.id, params))
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

    def _local(self, hint: str, var: dict[int, str], node_id: int, taken: list[str]) -> str:
        name = _ident(hint)
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
        if n.op == "gather" and self.lays_out_ahead and (prefix, n.inputs[1]) in self.folded_values:
            # indices computed ahead: the gather's plan and window layout made now too
            t = g[n.inputs[0]].type
            assert isinstance(t, TensorType)
            fn = self.bind(f"gather_{prefix}{n.id}", indexing.prepared_gather(
                t.shape, dtypes.to_numpy(t.dtype), self.folded_values[(prefix, n.inputs[1])],
                dict(n.attrs)))
            return [f"{target} = {self.cast(n.type)}({fn}({ins[0]}))  # indices laid out ahead"]
        if self.lays_out_ahead and n.op in PREPARED and (
                fn := PREPARED[n.op]([g[i].type for i in n.inputs], n.attrs)) is not None:
            # the shapes' part worked out now (a gather's, a convolution's, which LAPACK
            # routine); a call reads the values
            how = f": {fn.method}" if hasattr(fn, "method") else ""  # (a convolution's)
            fn = self.bind(f"{_ident(n.op)}_{prefix}{n.id}", fn)
            return [f"{target} = {self.cast(n.type)}({fn}({', '.join(ins)}))"
                    f"  # its shapes laid out ahead{how}"]
        if row.program is not None and (expr := row.program(ins, [g[i].type for i in n.inputs],
                                                            n.type, n.attrs)) is not None:
            return [f"{target} = {self.cast(n.type)}({expr})"]
        args = list(ins)
        for k, v in n.attrs.items():
            text = _literal(v)
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
        run = self.bind(f"interpreted_{n.op}_{n.id}", _runner(interp))
        return f"{target} = {run}([{', '.join(ins)}])  # the interpreter core runs this node"

    def region(self, n: Node, target: str, ins: list[str], dying: Sequence[int],
               prefix: str) -> list[str]:
        a, here = n.attrs, f"{prefix}{n.op}_{n.id}_"
        args = ", ".join(ins)
        if n.op == "kernel":
            k = (next(self.reuse_kernels) if self.reuse_kernels is not None
                 else compile_kernel(n, f"{prefix}{a['body'].name}"))
            self.kernels.append(k)
            if isinstance(k, DotKernel):  # an output fusion's dot: the program's matmul
                k.matmul = self.ns["matmul"]
            loop = k.epilogue if isinstance(k, DotKernel) else k
            if loop.fn is None:  # no numba form (an op or element type): the reference runs it
                where = f" at {n.source.file}:{n.source.line}" if n.source else ""
                self.notes.append(f"interpreted: kernel {a['body'].name} %{n.id}{where} "
                                  f"({loop.reason})")
            fn = self.bind(a["body"].name, k)
            call = f"{self.cast(n.type)}({fn}(_args))"
            gone = [var for var, i in zip(ins, n.inputs) if i in dying and ins.count(var) == 1]
            if not gone or not k.in_place:
                return [f"{target} = {self.cast(n.type)}({fn}([{args}]))"]
            # the kernel may write its result over an input that dies here
            return [f"_args = [{args}]", f"del {', '.join(dict.fromkeys(gone))}",
                    f"{target} = {call}", "del _args"]  # (no later del of what it took)
        if n.op == "call":
            body = self.function(a["body"], self._fname(here + "body"), here)
            return [f"{target} = runtime.one_or_tuple({body}({args}))"]
        if n.op == "scan":
            body = self.function(a["body"], self._fname(here + "body"), here)
            t = self.bind(f"type_{here}", n.type)
            driver = (f"runtime.run_scan({body}, [{args}], {t}, length={a['length']}, "
                      f"reverse={a['reverse']}, num_consts={a['num_consts']}, "
                      f"num_carry={a['num_carry']})")
            ns = self.ns
            return self.loop(n, target, args, prefix, driver, f"{body} is the same in Python",
                             lambda vals, b=body, t=t: runtime.run_scan(
                                 ns[b], vals, ns[t], a["length"], a["reverse"],
                                 a["num_consts"], a["num_carry"]))
        if n.op == "while":
            cond = self.function(a["cond"], self._fname(here + "cond"), here + "cond_")
            body = self.function(a["body"], self._fname(here + "body"), here)
            ns = self.ns
            return self.loop(n, target, args, prefix,
                             f"runtime.run_while({cond}, {body}, [{args}])",
                             f"{cond} and {body} are the same in Python",
                             lambda vals, c=cond, b=body: runtime.run_while(ns[c], ns[b], vals))
        if n.op == "conditional":
            names = [self.function(b, self._fname(f"{here}branch{k}"), f"{here}b{k}_")
                     for k, b in enumerate(a["branches"])]
            arities = tuple(len(b.params) for b in a["branches"])
            return [f"{target} = runtime.run_conditional([{', '.join(names)}], {arities!r}, "
                    f"[{args}])"]
        raise ProgramError(f"{n.describe()}: no writer for region op {n.op}")

    def loop(self, n: Node, target: str, args: str, prefix: str, driver: str, same: str,
             fallback: Callable[[Sequence[Any]], Any]) -> list[str]:
        """A scan or while as one numba function (loops.py) where it compiles, with the
        per-iteration `driver` as its fall-back; else the driver, with the reason."""
        loop = (next(self.reuse_loops) if self.reuse_loops is not None
                else CompiledLoop(n, f"{prefix}{n.op}_{n.id}"))
        self.loops.append(loop)
        if not loop.ok:
            return [f"{target} = {driver}  # per iteration: {loop.reason}"]
        loop.fallback = fallback
        fn = self.bind(f"{n.op}_{n.id}", loop)
        return [f"{target} = {fn}([{args}])  # the whole loop in one numba function ({same})"]

    def _fname(self, hint: str) -> str:
        """A module-level name not taken yet: `hint` as an identifier, numbered if need be."""
        name = base = _ident(hint)
        k = 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def module(self) -> str:
        return "\n\n".join("\n".join(f) for f in self.functions) + "\n"

    def header(self, graph: Graph) -> str:
        """The module's docstring: what its names are, and what it leaves to others."""
        return HEADER.format(name=graph.name, matmul=dots.what(self.ns["matmul"]),
                             notes="".join(f"\n{x}." for x in self.notes))


def _runner(interp: Any) -> Callable[[list[Any]], Any]:
    """Runs a one-node interpreter on the node's inputs (each distinct input once)."""
    node = interp.graph[interp.graph.outputs[0]]
    order = list(dict.fromkeys(node.inputs))

    def run(vals: list[Any]) -> Any:
        by_id = dict(zip(node.inputs, vals))
        with np.errstate(all="ignore"):
            return interp.evaluate([by_id[i] for i in order])[0]

    return run


HEADER = '''"""The generated program of @{name} (gambit-explorer's CPU backend): one line per node, in
schedule order; `ops.X` is op X's NumPy reference, `matmul` is {matmul}, `as_T` casts to
element type T (free when the value has it), each value is deleted after its last use.{notes}"""
'''


def generate(graph: Graph, make_interpreter: Callable[[Graph], Any],
             writer: Callable[[_Writer | None], _Writer] | None = None) -> Program:
    """The program of `graph`; `make_interpreter(g)` makes the interpreter that runs a node
    the generator leaves to it; `writer(reuse)` makes the writer (a subclass of _Writer for
    another target: gpu/program.py), given the first walk's for the measured twin."""
    if writer is None:
        matmul = dots.matmul_for(graph)

        def writer(reuse: _Writer | None) -> _Writer:
            return _Writer(make_interpreter, matmul, reuse)

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
                   w.loops)
