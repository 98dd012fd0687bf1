"""The latest profile, roofline and memory timeline taken of each trace: trace.profile,
trace.roofline and trace.memory_timeline record theirs here, and the widget (opened before or
after) and an exported page show them. Kept beside the trace, not on it (a Trace is a record
of its stages; this is what was measured of it), and held weakly: a trace's record goes
with the trace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from .profile import Profile
    from .roofline import Roofline
    from .timeline import MemoryTimeline


@dataclass
class Latest:
    """The latest measurement of each kind taken of one trace (None: none yet)."""

    profile: Profile | None = None
    roofline: Roofline | None = None
    timeline: MemoryTimeline | None = None


_LATEST: WeakKeyDictionary[object, Latest] = WeakKeyDictionary()


def latest(trace: object) -> Latest:
    """The record of `trace`'s latest measurements, made empty on first use."""
    record = _LATEST.get(trace)
    if record is None:
        record = _LATEST[trace] = Latest()
    return record
