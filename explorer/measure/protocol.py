"""What measurement and the view ask of a trace and of its stages, as typing Protocols: a
Trace and its Stages (explorer/trace.py) are one. The layers below the facade refer to a
trace by these, never by importing trace.py: the facade calls down into measure/ and view/,
and they use the object they are handed by its attributes and methods."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ..analysis.cost import Cost
from ..analysis.memory import MemoryPlan
from ..ir.graph import Graph
from ..options import CompileOptions
from ..passes.base import Pass, PassReport


class StageLike(Protocol):
    """One stage: the pass's name, its graph and report (Stage)."""

    name: str
    graph: Graph
    report: PassReport
    pass_: Pass | None

    @property
    def cost(self) -> Cost: ...

    @property
    def memory(self) -> MemoryPlan: ...

    def reproducer(self, path: Any = None, *, kernel: int | str | None = None,
                   backend: str = "cpu") -> str: ...


class TraceLike(Protocol):
    """A trace: its stages, the traced example arguments and the options (Trace). The
    measuring methods return what measure/ makes (a Profile, a Roofline, a MemoryTimeline,
    Numerics)."""

    example_args: tuple[Any, ...]
    options: CompileOptions
    pipeline: list[Pass]  # the passes as given (Trace.replanned runs them again)

    @property
    def stages(self) -> Sequence[StageLike]: ...

    @property
    def final(self) -> StageLike: ...

    @property
    def name(self) -> str: ...

    @property
    def memory_limit(self) -> int | None: ...

    def stage(self, key: int | str) -> StageLike: ...

    def after_firing(self, stage: int | str, k: int) -> Graph: ...

    def flat_args(self, args: tuple[Any, ...]) -> list[np.ndarray]: ...

    def profile(self, *args: Any, stage: int | str = -1, backend: str | None = None,
                repeats: int = 5, **settings: Any) -> Any: ...

    def roofline(self, *args: Any, stage: int | str = -1, backend: str | None = None,
                 repeats: int = 5, **settings: Any) -> Any: ...

    def memory_timeline(self, *args: Any, stage: int | str = -1, backend: str | None = None,
                        **settings: Any) -> Any: ...

    def numerics(self, *args: Any, seed: int | None = None) -> Any: ...
    def replanned(self, memory_limit: Any = ..., pipeline: Any = None,
                  reuse: Sequence[Sequence[Any]] = ()) -> TraceLike: ...
