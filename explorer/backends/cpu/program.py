"""The CPU target of the program writer (backends/program_writer.py): a stage as one generated
Python module whose lines call the op table's NumPy references, BLAS through the matmul
dots.py picks (np.matmul's semantics), and the fused kernels generated as numba loop nests
(kernels.py).

What the CPU writes its own way:
- ops laid out when the program is made (PREPARED: gathers and scatters at indices known only
  at run time, convolutions, LAPACK calls; a gather at indices computed ahead), so that a call
  reads only the values;
- ops whose references run as numba routines (NUMBA_ROUTINES: small convolutions, gathers and
  scatters, threefry, pooling, top_k; same semantics, bit for bit);
- a scan or while compiled whole into one numba function where it compiles
  (compiled_control_flow.py), with the per-iteration driver as its fall-back.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from ...ir import dtypes
from ...ir.graph import Graph, Node, TensorType
from ...ir.ops import OPS
from ..program_writer import Program, ProgramWriter, generate, ident
from . import batched_dots, conv, dots, indexing, indexing_prepared, lapack, random, sorting, window
from .compiled_control_flow import CompiledControlFlow
from .kernels import BlasOutputFusion, compile_kernel

# ops laid out when the program is made (gathers and scatters at indices known only at run
# time, convolutions, LAPACK calls): op -> (its input types, attrs) -> a function of its
# inputs, or None
PREPARED: dict[str, Callable[[Sequence[Any], Any], Callable[..., Any] | None]] = {
    **{op: functools.partial(indexing_prepared.prepare, op)
       for op in ("gather", *indexing_prepared.SCATTERS)},
    "conv_general_dilated": conv.prepare, **lapack.PREPARERS}
# ops whose references run as numba routines in CPU programs (same semantics, bit for bit)
NUMBA_ROUTINES = {**conv.REFERENCES, **indexing.REFERENCES, **random.REFERENCES,
                  **sorting.REFERENCES, **window.REFERENCES}

HEADER = '''"""The generated program of @{name} (gambit-explorer's CPU backend): one line per node, in
schedule order; `ops.X` is op X's NumPy reference, `matmul` is {matmul}, `as_T` casts to
element type T (free when the value has it), each value is deleted after its last use.{notes}"""
'''


class CpuWriter(ProgramWriter):
    """The program writer for the CPU: numba kernels, BLAS, ops laid out ahead, scans and
    whiles compiled whole."""

    def compile_kernel(self, n: Node, name: str) -> Any:
        k = compile_kernel(n, name)
        if isinstance(k, BlasOutputFusion):  # an output fusion's dot: the program's matmul
            k.matmul = self.ns["matmul"]
        return k

    def op_function(self, name: str) -> Callable[..., Any]:
        return NUMBA_ROUTINES.get(name, OPS[name].ref)

    def laid_out_ahead(self, g: Graph, n: Node, target: str, ins: list[str],
                       prefix: str) -> str | None:
        if n.op == "dot_general":  # an outer product as a numba loop, else BLAS (why, listed)
            return self.dot(g, n, target, ins, prefix)
        if n.op == "gather" and (prefix, n.inputs[1]) in self.folded_values:
            # indices computed ahead: the gather's plan and window layout made now too
            t = g[n.inputs[0]].type
            assert isinstance(t, TensorType)
            fn = self.bind(f"gather_{prefix}{n.id}", indexing.prepared_gather(
                t.shape, dtypes.to_numpy(t.dtype), self.folded_values[(prefix, n.inputs[1])],
                dict(n.attrs)))
            return f"{target} = {self.cast(n.type)}({fn}({ins[0]}))  # indices laid out ahead"
        if n.op in PREPARED and (
                fn := PREPARED[n.op]([g[i].type for i in n.inputs], n.attrs)) is not None:
            # the shapes' part worked out now (a gather's, a convolution's, which LAPACK
            # routine); a call reads the values
            how = f": {fn.method}" if hasattr(fn, "method") else ""  # (a convolution's)
            fn = self.bind(f"{ident(n.op)}_{prefix}{n.id}", fn)
            return (f"{target} = {self.cast(n.type)}({fn}({', '.join(ins)}))"
                    f"  # its shapes laid out ahead{how}")
        return None

    def dot(self, g: Graph, n: Node, target: str, ins: list[str], prefix: str) -> str:
        """A dot's line: batched_dots' loop where it takes the shape, else the op table's
        np.matmul form; either way the listing says which method and why."""
        types = [g[i].type for i in n.inputs]
        if (fn := batched_dots.prepare(types, n.attrs)) is not None:
            name = self.bind(f"dot_{prefix}{n.id}", fn)
            return f"{target} = {self.cast(n.type)}({name}({', '.join(ins)}))  # {fn.method}"
        expr = OPS[n.op].program(ins, types, n.type, n.attrs)  # type: ignore[misc]
        return f"{target} = {self.cast(n.type)}({expr})  # BLAS: {batched_dots.choose(types, n.attrs)[1]}"

    def scan_or_while(self, n: Node, target: str, args: str, prefix: str, driver: str,
                      same: str, fallback: Callable[[Sequence[Any]], Any]) -> list[str]:
        """A scan or while as one numba function (compiled_control_flow.py) where it
        compiles, with the per-iteration `driver` as its fall-back; else the driver, with the
        reason."""
        whole = (next(self.reuse_control_flow) if self.reuse_control_flow is not None
                 else CompiledControlFlow(n, f"{prefix}{n.op}_{n.id}"))
        self.control_flow.append(whole)
        if not whole.ok:
            return [f"{target} = {driver}  # per iteration: {whole.reason}"]
        whole.fallback = fallback
        fn = self.bind(f"{n.op}_{n.id}", whole)
        return [f"{target} = {fn}([{args}])  # the whole {n.op} in one numba function ({same})"]

    def header(self, graph: Graph) -> str:
        return HEADER.format(name=graph.name, matmul=dots.what(self.ns["matmul"]),
                             notes="".join(f"\n{x}." for x in self.notes))


def generate_program(graph: Graph, make_interpreter: Callable[[Graph], Any]) -> Program:
    """The CPU program of `graph` (ProgramError when it cannot be written);
    `make_interpreter(g)` makes the interpreter that runs a node the writer leaves to it."""
    matmul = dots.matmul_for(graph)
    return generate(graph, lambda reuse: CpuWriter(make_interpreter, matmul, reuse))
