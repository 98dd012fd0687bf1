"""The profiles, rooflines, memory timelines and numerics taken of each trace: trace.profile,
trace.roofline, trace.memory_timeline and trace.numerics record theirs here (and so does the widget, both
panes' profiles), and the widget (opened before or after) and an exported page show them.
Kept beside the trace, not on it (a Trace is a record of its stages; this is what was
measured of it), and held weakly: a trace's record goes with the trace.

Every one taken is kept, one per stage and backend (a later one of the same stage on the same
backend replaces it), in the order taken; `profile`, `roofline` and `timeline` are the latest
of each (assigning one records it; assigning None forgets every one of that kind). Numerics
are kept once, the latest (the widget colours nodes by each one's error)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from .numerics import Numerics
    from .profile import Profile
    from .roofline import Roofline
    from .timeline import MemoryTimeline

Taken = dict[tuple[int, str], Any]  # (stage index, backend) -> the measurement, oldest first


def keep(store: Taken, x: Any) -> None:
    """Record `x` in `store` as the newest of its stage and backend."""
    key = (x.stage_index, x.backend)
    store.pop(key, None)
    store[key] = x


class Newest:
    """The newest measurement of one kind (`store`: the record's dict of them); assigning
    one records it, assigning None forgets every one of that kind."""

    def __init__(self, store: str) -> None:
        self.store = store

    def __get__(self, record: Any, owner: Any = None) -> Any:
        return None if record is None else next(reversed(getattr(record, self.store).values()),
                                                None)

    def __set__(self, record: Any, x: Any) -> None:
        store = getattr(record, self.store)
        if x is None:
            store.clear()
        else:
            keep(store, x)


class Latest:
    """Every measurement of each kind taken of one trace (see the module docstring)."""

    profile: Profile | None = Newest("profiles")  # type: ignore[assignment]
    roofline: Roofline | None = Newest("rooflines")  # type: ignore[assignment]
    timeline: MemoryTimeline | None = Newest("timelines")  # type: ignore[assignment]

    def __init__(self) -> None:
        self.profiles: Taken = {}
        self.rooflines: Taken = {}
        self.timelines: Taken = {}
        self.numerics: Numerics | None = None


_LATEST: WeakKeyDictionary[object, Latest] = WeakKeyDictionary()


def latest(trace: object) -> Latest:
    """The record of `trace`'s measurements, made empty on first use."""
    record = _LATEST.get(trace)
    if record is None:
        record = _LATEST[trace] = Latest()
    return record
