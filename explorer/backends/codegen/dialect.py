"""What a code-generation target supplies to the shared emitters: a `Dialect`.

The emitters (kernel_emitter.py, mapreduce_emitter.py) walk a plan once and write values and
statements only through a dialect: element type names, literals, casts, the identities and
combines of monoids, the target's scalar forms (through ONE method, `scalar_form`), the
text generated code starts with (imports or device helpers), and statement syntax (definitions,
assignments, loops, conditionals, indexing). What a target does differently around that (numba
loop nests with `prange`, one CUDA thread or warp per row) stays in its own module.

Every dialect's runtime provides, under these names, the helpers the emitters call:
`maximum`/`minimum` (NaN wins, as np.maximum), `top_k_key` (lax.top_k's total order as a
double: +NaN, +inf, ..., -inf, -NaN), `idiv`/`irem` (lax's integer division and remainder),
`to_int` (conversion as XLA converts).

`Block` collects the lines of one generated body, indented by its dialect.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from ...ir.graph import Graph, Node
from ...ir.traits import MONOIDS
from .kernel_plan import PlanError
from .scalar_form import FALLS_BACK, ScalarExpr, scalar_form

# how two values of a monoid combine, in order (no reassociation): the same in every dialect,
# whose runtime provides `maximum` and `minimum`
COMBINE = {"add": "{0} + {1}", "mul": "{0} * {1}", "max": "maximum({0}, {1})",
           "min": "minimum({0}, {1})", "and": "{0} & {1}", "or": "{0} | {1}"}


class Dialect:
    """A target's syntax; subclasses fill in the abstract methods."""

    name = ""  # the target's name, for messages
    forms: Mapping[str, object] = {}  # op name -> scalar form (cpu/numba_forms.py, gpu/cuda_forms.py)
    indent = "    "  # one level of nesting
    helpers = ""  # the text every generated source of this target starts with
    shape_generic = False  # constants and loop extents are run-time arguments, not literals
    unroll = 0  # contractions over at most this many features are written out term by term

    # ---- values
    def scalar_form(self, g: Graph, n: Node) -> ScalarExpr:
        """The scalar form of `n` (a node of graph `g`) in this dialect; an op that falls
        back raises PlanError. The one place a dialect reads its forms table."""
        form = scalar_form(g, n, self.forms)
        if form is FALLS_BACK:
            raise PlanError(f"{n.describe()}: {n.op} has no scalar form in the {self.name} "
                            f"code generator here")
        return form

    def type_name(self, d: str) -> str:
        """Element type `d` as generated code spells it (PlanError where the target has none)."""
        raise NotImplementedError

    def literal(self, v: object, d: str) -> str:
        """A literal of element type `d` (NaN and infinities included)."""
        raise NotImplementedError

    def cast(self, expr: str, d: str) -> str:
        """`expr` converted to element type `d`."""
        raise NotImplementedError

    def identity(self, kind: str, d: str) -> str:
        """The literal of monoid `kind`'s identity for element type `d`."""
        return self.literal(MONOIDS[kind].identity_value(d), d)

    def combine(self, kind: str, a: str, b: str) -> str:
        """An accumulator `a` of monoid `kind` with `b` folded in."""
        return COMBINE[kind].format(a, b)

    def accumulate(self, kind: str, a: str, b: str) -> str:
        """An accumulator `a` of monoid `kind` with `b` folded in, as a reduction folds: a
        dialect may let sums and products reassociate here (and only here)."""
        return self.combine(kind, a, b)

    def constant(self, n: Node) -> str:
        """The literal of a constant node."""
        return self.literal(n.attrs["value"].array.item(), n.dtype)

    def exp64(self, x: str) -> str:
        """exp of a double."""
        raise NotImplementedError

    def index(self, array: str, index: Sequence[str], shape: Sequence[int]) -> str:
        """Element `index` of C-contiguous `array` of `shape` ("0" for a size-1 dimension)."""
        raise NotImplementedError

    def extent(self, array: str, axis: int, size: int) -> str:
        """The size of `array`'s dimension `axis` (which is `size` here)."""
        return str(size)

    # ---- statements: templates a dialect sets ({0}, {1}, ...: the parts)
    DEFINE = ""  # a value defined once: {0} name, {1} type name, {2} value
    DECLARE = ""  # a variable later statements assign, as DEFINE
    ASSIGN = ""  # {0} = {1}
    FOR = ""  # {0} variable, {1} start, {2} stop, {3} step
    IF = ELIF = WHILE = ""  # {0} condition
    ELSE = BREAK = TRUE = ""
    END: str | None = None  # the line closing a block (None where indentation closes it)
    NOT = AND = OR = ""  # {0} operand; the operator between operands
    SELECT = ""  # {1} where {0}, else {2}
    FLOORDIV = ""  # {0} / {1} of non-negative integers, rounded down

    def define(self, name: str, d: str, expr: str) -> str:
        return self.DEFINE.format(name, self.type_name(d), expr)

    def declare(self, name: str, d: str, expr: str) -> str:
        return self.DECLARE.format(name, self.type_name(d), expr)

    def assign(self, name: str, expr: str) -> str:
        return self.ASSIGN.format(name, expr)

    def for_range(self, var: str, start: str, stop: str, step: str = "1") -> str:
        """The header of a loop of `var` from `start` up to `stop`."""
        return self.FOR.format(var, start, stop, step)

    def if_(self, cond: str) -> str:
        return self.IF.format(cond)

    def elif_(self, cond: str) -> str:
        return self.ELIF.format(cond)

    def else_(self) -> str:
        return self.ELSE

    def while_(self, cond: str) -> str:
        return self.WHILE.format(cond)

    def end(self) -> str | None:
        return self.END

    def brk(self) -> str:
        return self.BREAK

    def true(self) -> str:
        return self.TRUE

    def not_(self, x: str) -> str:
        return self.NOT.format(x)

    def and_(self, *xs: str) -> str:
        return self.AND.join(xs)

    def or_(self, *xs: str) -> str:
        return self.OR.join(xs)

    def floordiv(self, a: str, b: str) -> str:
        """`a` / `b` rounded down, for non-negative integer indices."""
        return self.FLOORDIV.format(a, b)

    def select(self, cond: str, a: str, b: str) -> str:
        """`a` where `cond`, else `b`."""
        return self.SELECT.format(cond, a, b)


class Block:
    """The lines of one generated body, written at a nesting depth in a dialect's syntax."""

    def __init__(self, dialect: Dialect, depth: int = 0, lines: list[str] | None = None) -> None:
        self.d, self.depth = dialect, depth
        self.lines: list[str] = [] if lines is None else lines

    def __call__(self, *lines: str) -> None:
        self.lines += [self.d.indent * self.depth + line for line in lines]

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        """Statements nested under `header` (a loop's or a conditional's)."""
        self(header)
        self.depth += 1
        yield
        self.depth -= 1
        end = self.d.end()
        if end is not None:
            self(end)

    def reopen(self, header: str) -> None:
        """Inside a conditional's block: its next branch (`elif_`, `else_`)."""
        self.depth -= 1
        self(header)
        self.depth += 1
