"""What every backend's run returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
