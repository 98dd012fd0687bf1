"""Memory per device (issue 43 section 4): the planner's per-device peak of every sharded zoo
program bounds what XLA plans for one device (planned >= 0.9 x measured, the issue's figure;
bench/sharded_memory.py prints the table), and the jax backend, jax-jit and compare report
their peaks per device."""

from __future__ import annotations

from typing import Any

import pytest

import explorer as gx
from explorer.measure.timing import measure_jax
from explorer.passes.split import InfeasibleMemoryLimit
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


def _rows_program(devices: int) -> tuple[Any, tuple[Any, ...]]:
    """A row-split elementwise chain: one device holds a 1/devices share of each value."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from tests.corpora.sharded import mesh

    rows = NamedSharding(mesh((devices,), ("x",)), P("x"))
    fn = jax.jit(lambda x: (jnp.exp(x) * jnp.sin(jnp.exp(x))).sum(1), in_shardings=rows,
                 out_shardings=rows)
    x = np.random.default_rng(0).standard_normal((64 * devices, 256)).astype(np.float32)
    return fn, (x,)


def test_a_per_device_limit_plans_one_devices_share(devices: int) -> None:
    import numpy as np

    fn, args = _rows_program(devices)
    want = np.asarray(fn(*args))
    free = gx.explore(fn, *args).final.memory
    assert free.devices == devices and free.per_device_peak * 2 < free.peak_bytes
    limit = (free.per_device_peak + free.peak_bytes) // 2 + 64 * 1024  # one device's fits
    fits = gx.explore(fn, *args, memory_limit=f"{limit}/device")
    assert fits.options.per_device and "per device" in fits.options.describe()
    assert "split" not in [s.name for s in fits.stages if s.report.changed]
    whole = gx.explore(fn, *args, memory_limit=limit)  # the same bytes for the whole program
    assert "split" in [s.name for s in whole.stages if s.report.changed]
    tight = gx.explore(fn, *args, memory_limit=f"{free.per_device_peak // 2 + 16 * 1024} per device")
    assert any(n.op == "loop" for n in tight.final.graph.nodes)
    assert tight.final.memory.per_device_peak <= tight.options.memory_limit
    for backend in ("reference", "cpu", "jax"):
        got = np.asarray(tight.run(*args, backend=backend).value)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5, err_msg=backend)


def test_an_infeasible_per_device_limit_says_per_device(devices: int) -> None:
    """A shard_map's body is not split: the smallest limit is what it needs per device."""
    fn, args = programs(devices)["collectives"]
    with pytest.raises(InfeasibleMemoryLimit, match="per device.*shard_map"):
        gx.explore(fn, *args, memory_limit="64/device")


def test_the_widgets_cost_view_and_run_rows_say_per_device(traces: dict, devices: int) -> None:
    from explorer.view.payload import cost_view
    from explorer.view.runs import row_of
    from explorer.view.schema import CostView, RunRow, problems

    fn, args, trace = traces["tensor_parallel_mlp"]
    view = cost_view(trace, 0)
    assert problems(view, CostView) == []
    assert view["devices"] == devices
    assert view["device_peak_bytes"] == trace.stages[0].memory.per_device_peak
    assert view["per_device_limit"] is False
    limited = trace.replanned(memory_limit="1MiB/device")
    assert cost_view(limited, len(limited.stages) - 1)["per_device_limit"] is True
    m = measure_jax(fn, list(args), None, jit=True, repeats=1)
    row = row_of(m, "baseline:jax-jit", "baseline", None, "jax-jit")
    assert problems(row, RunRow) == [] and row["devices"] == devices
