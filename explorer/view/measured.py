"""What the widget has measured: the stage shown and the stage before it, profiled on a
backend, with the stage's roofline and memory timeline (explorer/measure/profile.py,
roofline.py, timeline.py), kept per stage as plain data for the heat overlay and the roofline
and memory tabs; and the reproducer scripts the kernels tab offers as downloads.

Every one taken is kept (one per stage and backend: both panes' profiles, on each backend);
the front end shows the latest of each stage, listed first. What the trace's own record holds
(measure/latest.py: what trace.profile() and the others took, and what widgets took) is there
from the start, so a profile taken in Python shows in a widget opened after it, and every
profile taken is in an exported page.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..backends import registry
from ..measure.latest import Latest, keep, latest
from .schema import ReproducerFile

if TYPE_CHECKING:
    from ..measure.profile import Profile
    from ..measure.protocol import TraceLike
    from ..measure.roofline import Roofline
    from ..measure.timeline import MemoryTimeline


def measured_data(profiles: list[Profile], rooflines: list[Roofline],
                  timelines: list[MemoryTimeline]) -> dict[str, list[Any]]:
    """The `profiles`, `rooflines` and `timelines` traits from every one taken (each list
    oldest first): by stage, and within a stage the latest first (the one the front end
    shows), then the others (other backends' and, in a saved page, kept with it)."""
    def by_stage(items: list[Any]) -> list[Any]:
        return [x.to_data() for x in sorted(reversed(items), key=lambda x: x.stage_index)]

    return {"profiles": by_stage(profiles), "rooflines": by_stage(rooflines),
            "timelines": by_stage(timelines)}


def trace_measured(trace: TraceLike) -> dict[str, list[Any]]:
    """Every profile, roofline and memory timeline taken of the trace (measure/latest.py)."""
    taken = latest(trace)
    return measured_data(list(taken.profiles.values()), list(taken.rooflines.values()),
                         list(taken.timelines.values()))


class ProfileLog:
    """The profiles, rooflines and memory timelines a widget has: `profiles`, `rooflines` and
    `timelines` hold the latest by stage index; `taken` every one (measure/latest.py's
    record: one per stage and backend)."""

    def __init__(self, trace: TraceLike, repeats: int = 5) -> None:
        self.trace = trace
        self.repeats = repeats
        self.profiles: dict[int, Profile] = {}
        self.rooflines: dict[int, Roofline] = {}
        self.timelines: dict[int, MemoryTimeline] = {}
        self.taken = Latest()
        record = latest(trace)
        for kind in ("profiles", "rooflines", "timelines"):
            for x in getattr(record, kind).values():
                if x.stage_index < len(trace.stages):
                    self._keep(kind, x, trace_too=False)

    def _keep(self, kind: str, x: Any, trace_too: bool = True) -> None:
        """Record `x` here (and, by default, in the trace's own record, so trace.to_html
        keeps it too)."""
        getattr(self, kind)[x.stage_index] = x
        keep(getattr(self.taken, kind), x)
        if trace_too:
            keep(getattr(latest(self.trace), kind), x)

    def data(self) -> dict[str, list[Any]]:
        return measured_data(list(self.taken.profiles.values()),
                             list(self.taken.rooflines.values()),
                             list(self.taken.timelines.values()))

    def jobs(self, index: int) -> list[str]:
        """What profiling stage `index` measures, in order, as the progress names it."""
        stages = self.trace.stages
        out = [f"profile of stage {index - 1} {stages[index - 1].name}"] if index > 0 else []
        return out + [f"profile and roofline of stage {index} {stages[index].name}",
                      f"memory timeline of stage {index} {stages[index].name}"]

    def take(self, index: int, backend: str, progress: Callable[[int, str], None]) -> list[str]:
        """Profile stage `index` and the stage before it on `backend`, then the stage's
        roofline and memory timeline; `progress(k, label)` before each. A backend that
        cannot run here raises registry.BackendError with the registry's reason; any other
        failure is returned as a line saying what could not be measured, and the rest goes on."""
        registry.get(backend)  # unknown or unavailable: the registry's reason
        t, errors = self.trace, []
        jobs = self.jobs(index)
        k = 0

        def step() -> None:
            nonlocal k
            progress(k, jobs[k])
            k += 1

        def failed(what: str, e: Exception) -> None:
            errors.append(f"{what} on {backend}: {type(e).__name__}: {e}")

        if index > 0:
            step()
            try:
                self._keep("profiles", t.profile(stage=index - 1, backend=backend,
                                                 repeats=self.repeats))
            except Exception as e:  # said in the widget: the other stage may still profile
                failed(f"stage {index - 1}", e)
        step()
        try:
            roof = t.roofline(stage=index, backend=backend, repeats=self.repeats)
            self._keep("rooflines", roof)
            self._keep("profiles", roof.profile)
        except Exception as e:
            failed(f"the roofline of stage {index}", e)
            try:
                self._keep("profiles", t.profile(stage=index, backend=backend,
                                                 repeats=self.repeats))
            except Exception as e2:
                failed(f"stage {index}", e2)
        step()
        try:
            self._keep("timelines", t.memory_timeline(stage=index, backend=backend))
        except Exception as e:
            failed(f"the memory timeline of stage {index}", e)
        return errors


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_.") or "x"


def reproducer_filename(trace: TraceLike, index: int, kernel: int | str | None = None) -> str:
    """`prog_stage3_fuse.py`, `prog_stage3_fuse_fused_29.py`: the function, the stage and
    the kernel (by its name, also when asked for by node id), in characters any file system
    takes."""
    stage = trace.stages[index]
    name = f"{_safe(trace.name)}_stage{index}_{_safe(stage.name)}"
    if isinstance(kernel, int) and kernel in stage.graph and stage.graph[kernel].op == "kernel":
        kernel = stage.graph[kernel].attrs["body"].name  # a kernel asked for by node id
    if kernel is not None:
        name += f"_{_safe(kernel if isinstance(kernel, str) else f'node{kernel}')}"
    return name + ".py"


def reproducer_file(trace: TraceLike, index: int, kernel: int | str | None = None,
                    backend: str = "cpu") -> ReproducerFile:
    """Stage `index`'s reproducer (or one kernel's) as the front end saves it, or why not."""
    filename = reproducer_filename(trace, index, kernel)
    try:
        text = trace.stages[index].reproducer(kernel=kernel, backend=backend)
    except Exception as e:  # said beside the button that asked
        return ReproducerFile(type="reproducer", filename=filename, text="",
                              error=f"{type(e).__name__}: {e}")
    return ReproducerFile(type="reproducer", filename=filename, text=text, error="")
