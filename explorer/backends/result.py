"""What every backend's run returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Kernel:
    name: str
    source: str
    seconds: float = 0.0


@dataclass(frozen=True)
class RunResult:
    value: Any  # the function's output pytree
    seconds: float
    peak_bytes: int  # measured peak of temporaries: all allocations but inputs and outputs
    backend: str = "reference"
    kernels: tuple[Kernel, ...] = field(default=())
    workers: tuple[str, ...] = ()  # backend="dask": the workers that ran the split loops' tasks
    dashboard: str | None = None  # backend="dask": the cluster's dashboard link
    program: str = ""  # backend="cpu": the generated program that ran (its source)
    # a sharded program on the jax backend: peak_bytes is per device (the largest device's),
    # over this many devices; None: the run's whole peak
    devices: int | None = None


def owned(outs: list[Any], args: Sequence[Any]) -> list[Any]:
    """Each result the caller's own, as jax.jit's are (gx.compile's calls, trace.run): a
    NumPy result that is an argument or an earlier result, or a view that may share memory
    with one (a program's reshape, slice or transpose), is copied. (Host programs return
    NumPy views where the graph's op is a view: writing into `gx.compile(lambda x: x.T)(x)`
    wrote into `x`.) A fresh result, the usual case, costs one lookup and one attribute."""
    given = [a for a in args if isinstance(a, np.ndarray)]
    seen = {id(a) for a in given}
    for k, o in enumerate(outs):
        if not isinstance(o, np.ndarray):
            continue
        if id(o) in seen or o.base is not None and any(np.may_share_memory(o, a)
                                                       for a in given):
            outs[k] = o = o.copy()
        seen.add(id(o))
        given.append(o)
    return outs
