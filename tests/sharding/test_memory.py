"""Memory per device (issue 43 section 4): the planner's per-device peak of every sharded zoo
program bounds what XLA plans for one device (planned >= 0.9 x measured, the issue's figure;
bench/sharded_memory.py prints the table), and the jax backend, jax-jit and compare report
their peaks per device."""

from __future__ import annotations

from typing import Any

import pytest

import explorer as gx
from explorer.measure.timing import measure_jax
from tests.corpora.sharded import programs

NAMES = ["data_parallel_mlp", "tensor_parallel_mlp", "collectives", "sharded_attention"]


@pytest.fixture(scope="module")
def traces(devices: int) -> dict[str, tuple[Any, Any, Any]]:
    out = {}
    for name, (fn, args) in programs(devices).items():
        out[name] = (fn, args, gx.explore(fn, *args))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_planned_per_device_peak_bounds_the_jax_backends(traces: dict, devices: int,
                                                         name: str) -> None:
    fn, args, trace = traces[name]
    for k, stage in enumerate(trace.stages):
        plan = stage.memory
        assert plan.devices == devices, stage.name
        assert plan.per_device_peak is not None and plan.per_device_peak > 0
        run = trace.run(*args, backend="jax", stage=k)
        assert run.devices == devices
        assert plan.per_device_peak >= 0.9 * run.peak_bytes, (
            f"{name} {stage.name}: planned {plan.per_device_peak} per device, XLA "
            f"{run.peak_bytes}")


@pytest.mark.parametrize("name", NAMES)
def test_jax_jit_reports_its_peak_per_device(traces: dict, devices: int, name: str) -> None:
    fn, args, trace = traces[name]
    m = measure_jax(fn, list(args), None, jit=True, repeats=1)
    assert m.devices == devices and m.peak_how.endswith(", per device")
    assert trace.stages[0].memory.per_device_peak >= 0.9 * m.peak_bytes


def test_a_shard_map_bodys_temporaries_are_planned(traces: dict, devices: int) -> None:
    """They were not counted at all before: the body holds the collectives' results."""
    trace = traces["collectives"][2]
    plan = trace.stages[0].memory
    assert plan.per_device_peak >= 256  # at least four of its [2, 4] f32 blocks
    assert plan.peak_bytes >= devices * 256  # every device's body, run on one host


def test_compare_labels_per_device_peaks(traces: dict, devices: int) -> None:
    fn, args, trace = traces["tensor_parallel_mlp"]
    c = trace.compare(*args, backends=("jax", "reference"), baselines=("jax-jit",),
                      stages=[0], repeats=1, plot=False, progress=False)
    text = str(c)
    assert c.row("traced on jax").devices == devices
    assert c.row("traced on reference").devices is None  # one host runs every device
    assert f"per device (x{devices})" in text and "XLA memory_analysis, per device" in text
