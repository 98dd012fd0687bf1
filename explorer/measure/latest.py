"""The latest profile, roofline, memory timeline and numerics taken of each trace:
trace.profile, trace.roofline, trace.memory_timeline and trace.numerics record theirs here,
and the widget (opened before or after) and an exported page show them. Kept beside the
trace, not on it (a Trace is a record of its stages; this is what was measured of it), and
held weakly: a trace's record goes with the trace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from .numerics import Numerics
    from .profile import Profile
    from .roofline import Roofline
    from .timeline import MemoryTimeline


@dataclass
class Latest:
    """The latest measurement of each kind taken of one trace (None: none yet)."""

    profile: Profile | None = None
    roofline: Roofline | None = None
    timeline: MemoryTimeline | None = None
    numerics: Numerics | None = None  # the widget colours nodes by each one's error


_LATEST: WeakKeyDictionary[object, Latest] = WeakKeyDictionary()


def latest(trace: object) -> Latest:
    """The record of `trace`'s latest measurements, made empty on first use."""
    record = _LATEST.get(trace)
    if record is None:
        record = _LATEST[trace] = Latest()
    return record
