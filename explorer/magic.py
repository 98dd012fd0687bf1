"""%%gambit: explore a notebook cell's last call, pass by pass.

    %load_ext explorer

    %%gambit --pipeline simplify,cse,dce
    def f(x, y):
        return jnp.sum((x[:, None, :] - y[None]) ** 2, axis=-1)
    f(x, y)

The cell runs as usual up to its last statement, which must be a call `fn(args...)`. Instead
of calling fn eagerly, the magic traces it with those arguments (gx.explore), shows the
step-through widget, runs the optimised program and makes its result the cell's value. The
run tab gets the final stage's row beside jax.jit's (its "vs jax.jit" column); `--profile`
profiles the final stage as the run tab's button does.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from .backends import registry
from .trace import explore
from .xla import xla_pipeline

NOT_A_CALL = ("the last statement of a %%gambit cell must be a call such as `f(x, y)`: "
              "the magic traces that function with those arguments")


def default_backend() -> str:
    here = registry.available()
    return next((b for b in ("cpu", "reference") if b in here), here[0])


def parse_pipeline(text: str | None) -> str | list[str] | None:
    """None: the default pipeline; 'none' or '': no passes; else 'a,b,c'."""
    if text is None or text.strip().lower() == "default":
        return None
    if text.strip().lower() in ("", "none"):
        return []
    return text


class CellCall:
    """A cell split into the statements to run and its final call, compiled so that source
    lines of nodes traced from it read In[N] (IPython's compile cache maps the file)."""

    def __init__(self, shell: Any, line: str, cell: str) -> None:
        text = f"%%gambit {line}\n{cell}"
        self.filename = shell.compile.cache(text, cell_number(shell), raw_code=text)
        try:
            tree = ast.parse(cell, filename=self.filename)
        except SyntaxError as e:
            raise UsageError(f"syntax error in the cell, line {(e.lineno or 0) + 1}: {e.msg}") \
                from None
        ast.increment_lineno(tree, 1)  # the cell's first line is the %%gambit line
        last = tree.body[-1] if tree.body else None
        if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)):
            raise UsageError(NOT_A_CALL)
        self.setup = ast.Module(body=tree.body[:-1], type_ignores=[])
        self.call: ast.Call = last.value

    def _eval(self, node: ast.expr, ns: dict[str, Any]) -> Any:
        expr = ast.fix_missing_locations(ast.copy_location(ast.Expression(node), node))
        return eval(compile(expr, self.filename, "eval"), ns)  # noqa: S307 - the user's cell

    def run(self, ns: dict[str, Any]) -> tuple[Any, tuple[Any, ...]]:
        """Run the setup statements; evaluate the call's function and arguments."""
        exec(compile(self.setup, self.filename, "exec"), ns)  # noqa: S102 - the user's cell
        fn = self._eval(self.call.func, ns)
        args = self._eval(ast.Tuple(elts=self.call.args, ctx=ast.Load()), ns)
        keys: list[ast.expr | None] = [None if k.arg is None else ast.Constant(k.arg)
                                       for k in self.call.keywords]
        kwargs = self._eval(ast.Dict(keys=keys, values=[k.value for k in self.call.keywords]),
                            ns)
        if not callable(fn):
            raise UsageError(f"{ast.unparse(self.call.func)} is not a function: {NOT_A_CALL}")
        return fn, positional(fn, tuple(args), kwargs)


def cell_number(shell: Any) -> int:
    """The In[N] of the running cell: the number IPython cached the calling cell's code under
    (its execution_count may already point at the next cell, as in IPython 9)."""
    numbers = getattr(shell.compile, "_filename_map", {})
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename in numbers:
            return int(numbers[frame.f_code.co_filename])
        frame = frame.f_back  # type: ignore[assignment]
    return int(shell.execution_count)


def positional(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Keyword arguments as positions: the tracer takes the arguments positionally."""
    if not kwargs:
        return args
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise UsageError(f"cannot pass these arguments to {getattr(fn, '__name__', fn)}: {e}") \
            from None
    bound.apply_defaults()
    if bound.kwargs:
        raise UsageError("%%gambit traces positional arguments; "
                         f"{', '.join(bound.kwargs)} can only be passed by keyword")
    return tuple(bound.args)


@magics_class
class GambitMagics(Magics):
    @magic_arguments()
    @argument("--pipeline", default=None, metavar="PASSES",
              help="comma-separated pass names, e.g. simplify,cse,dce; 'none' for no passes; "
                   "default: the standard pipeline")
    @argument("--memory-limit", default=None, metavar="BYTES",
              help="bound on the peak of live temporaries, e.g. 256MiB")
    @argument("--backend", default=None, metavar="NAME",
              help="where to run the optimised program: a registered backend (reference, "
                   "cpu, gpu, jax, ...; default: cpu if available, else reference)")
    @argument("--scheduler", default=None, metavar="ADDRESS",
              help="with --backend dask: the Dask scheduler to run on, e.g. tcp://10.0.0.1:8786 "
                   "(default: the active client, else a local cluster for the cell)")
    @argument("--compare", action="store_true",
              help="measure the final stage on every available backend (not dask, unless it is "
                   "--backend) against NumPy, JAX "
                   "eager and jax.jit; show the table and plot under the widget")
    @argument("--profile", action="store_true",
              help="profile the final stage (and the stage before it) on the backend when the "
                   "widget opens, as the run tab's profile button does: the heat overlay, the "
                   "kernels tab's times, the roofline and memory tabs")
    @argument("--xla", action="store_true", help="also show XLA's own pipeline, pass by pass")
    @argument("--no-run", action="store_true",
              help="only trace and show the widget; the cell's value is None")
    @argument("--out", default=None, metavar="NAME", help="store the Trace in variable NAME")
    @cell_magic
    def gambit(self, line: str, cell: str) -> Any:
        """Explore the cell's last call `fn(args...)` pass by pass, in the step-through widget.

        The cell runs normally up to its last statement; that call is traced with its
        arguments instead of being run eagerly, and the cell's value is the result computed
        by the optimised program (the final stage).
        """
        opts = parse_argstring(self.gambit, line)
        backend = opts.backend or default_backend()
        try:
            chosen = registry.get(backend)
        except registry.BackendError as e:
            raise UsageError(f"%%gambit --backend: {e}") from None
        settings = {} if opts.scheduler is None else {"client": opts.scheduler}
        if settings and backend != "dask":
            raise UsageError(f"--scheduler is for --backend dask, not {backend}")
        if opts.out is not None and not opts.out.isidentifier():
            raise UsageError(f"--out needs a variable name, got {opts.out!r}")
        call = CellCall(self.shell, line, cell)
        fn, args = call.run(self.shell.user_ns)
        try:
            trace = explore(fn, *args, pipeline=parse_pipeline(opts.pipeline),
                            memory_limit=opts.memory_limit)
        except (ValueError, KeyError, NotImplementedError) as e:  # TraceError, PipelineError
            raise UsageError(f"%%gambit: {e}") from None
        if opts.out:
            self.shell.user_ns[opts.out] = trace
        widget = trace.widget()
        display(widget)
        if opts.xla:
            show_xla(fn, args)
        final = len(trace.stages) - 1
        value = None
        with contextlib.ExitStack() as runs:  # one session for the run and the widget's runs
            try:
                runs.enter_context(chosen.session(**settings))
            except registry.BackendError as e:
                raise UsageError(f"%%gambit --backend {backend}: {e}") from None
            if not opts.no_run:
                try:
                    value = trace.run(backend=backend, stage=final).value
                except Exception as e:  # the backend's message, not its traceback
                    raise UsageError(f"running the final stage on {backend} failed: "
                                     f"{type(e).__name__}: {e}") from None
            if opts.compare:
                widget.tab = "run"
                widget.run(list(registry.sweep()) + [backend] * (backend not in registry.sweep()),
                           stage=final, baselines=True)
                display(widget.comparison())
            elif not opts.no_run:  # the row beside jax.jit's: its "vs jax.jit" column
                widget.run([backend], stage=final, baselines=["jax-jit"])
            if opts.profile:  # as the profile button does (a failure is said in the widget)
                widget.profile(backend, stage=final)
        return value


def show_xla(fn: Any, args: tuple[Any, ...]) -> None:
    if xla_pipeline is None:  # a build without XLA's view (a test stands in for one)
        print("--xla: XLA's pipeline view (gx.xla_pipeline) is not in this version")
        return
    try:
        display(xla_pipeline(fn, *args).widget())
    except Exception as e:  # XLA's view is extra: its failure must not hide ours
        print(f"--xla: could not show XLA's pipeline: {type(e).__name__}: {e}")


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(GambitMagics)
