"""xla_pipeline of sharded programs (explorer/xla/spmd.py, pipeline.py): the stages of XLA's
sharding propagation and SPMD partitioner, the collectives it inserted with the user's lines,
per-device shapes and memory. JAX takes its host devices from XLA_FLAGS when it starts, so each
fixture runs tests/xla/spmd_check.py in a subprocess with the flag set; the rest of the suite
keeps its one device."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).with_name("spmd_programs.py")
NAMES = ["dp_mlp", "tp_mlp", "tp_mlp_step", "dp_tp_mlp_step", "shard_map_psum",
         "shard_map_collectives", "attention"]


def _run(devices: int, *argv: str, **env_vars: str) -> list[dict[str, Any]]:
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
           "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT), **env_vars}
    done = subprocess.run([sys.executable, "-m", "tests.xla.spmd_check", *argv], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@cache
def stories(devices: int) -> dict[str, dict[str, Any]]:
    return {s["program"]: s for s in _run(devices, *NAMES)}


def line_of(snippet: str) -> int:
    """The line of spmd_programs.py that holds `snippet` (exactly one)."""
    (k,) = [k for k, text in enumerate(PROGRAMS.read_text().splitlines(), 1) if snippet in text]
    return k


def inserted(s: dict[str, Any], opcode: str) -> list[dict[str, Any]]:
    return [c for c in s["collectives"] if c["opcode"] == opcode and c["stage"] != "traced"]


@pytest.mark.parametrize("name", NAMES)
def test_partitioning_stages_and_per_device_shapes(name: str) -> None:
    s = stories(4)[name]
    assert s["devices"] == 4
    stages = s["stages"]
    # XLA's own names: Shardy's propagation runs in XLA as `shardy-xla` (GSPMD's would be
    # `sharding-propagation`), then the partitioner; both are stages, before the final module
    assert s["propagation"] and all(p in stages for p in s["propagation"])
    assert any(x.endswith(".spmd-partitioning") for x in stages), stages
    k = stages.index(s["partitioning"])
    assert 0 < stages.index(s["propagation"][0]) < k < len(stages) - 1
    # the stages from the partitioned module on say they are one device's program
    assert s["per_device_notes"] == [i >= k for i in range(len(stages))]
    # per-device shapes as JAX shards the arguments, and XLA's argument bytes per device
    assert s["partitioned_params"] == s["jax_shard_shapes"]
    assert s["memory"]["argument"] == s["final_param_bytes"]
    assert "XLA's memory per device (each of 4)" in s["summary"]
    assert "one device's program" in s["summary"]
    assert s["partitioned_text_reads_back"]
    # lines are the user's: never the explorer's own lowering code (where JAX locates a
    # shard_map's boundaries when xla_pipeline lowers the function)
    assert s["own_lines"] == [] and s["user_lines"] > 0


def test_data_parallel_mlp() -> None:
    s = stories(4)["dp_mlp"]
    shapes = {w: (g, d, sh) for w, g, d, sh in s["shapes"]}
    assert shapes["parameter x.1"] == ("f32[64,32]", "f32[16,32]", "{devices=[4,1]<=[4]}")
    assert shapes["parameter w1.1"] == ("f32[32,64]", "f32[32,64]", "{replicated}")
    # the partitioner inserts one all-reduce per weight gradient, at the loss's line (the
    # backward dot products' source), summing over the data axis
    loss = line_of("return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)")
    first = [c for c in inserted(s, "all-reduce") if c["stage"] == s["partitioning"]]
    assert sorted(c["type"] for c in first) == ["f32[32,64]", "f32[64,32]"]
    assert all(c["line"] == loss and c["file"].endswith("spmd_programs.py") for c in first)
    assert all(c["attrs"]["reduction"] == "add" for c in first)
    # XLA's CPU all-reduce combiner merges them: a collective pass that is a stage
    assert any("all-reduce-combiner" in p for p in s["collective_passes"])
    combined = [c for c in inserted(s, "all-reduce") if "combiner" in c["stage"]]
    assert [c["type"] for c in combined] == ["(f32[64,32], f32[32,64])"]


def test_tensor_parallel_mlp_with_sharding_constraint() -> None:
    s = stories(4)["tp_mlp"]
    shapes = {w: d for w, _, d, _ in s["shapes"]}
    assert (shapes["parameter w1.1"], shapes["parameter w2.1"]) == ("f32[32,16]", "f32[16,32]")
    assert s["side_by_side_label"] == "XLA (cpu, per device of 4)"  # compare_with_xla's column
    story = s["story"]  # str(trace.spmd()), readable
    assert re.search(r"parameter w1\.1 +f32\[32,64\] -> f32\[32,16\] +\{devices=\[1,4\]<=\[4\]\}",
                     story)
    assert re.search(r"in spmd-cleanup\.pipeline-start \(the SPMD partitioner\):\n +all-reduce -> "
                     r"f32\[64,32\] replica_groups=mesh\[.*\} reduction=add +at .*spmd_programs\.py:"
                     + str(line_of("return h @ w2")), story)
    assert "XLA's memory per device (each of 4): arguments 12.0 KiB" in story
    (ar,) = inserted(s, "all-reduce")
    assert ar["stage"] == s["partitioning"] and ar["line"] == line_of("return h @ w2")
    # what propagation decided, by the user's lines: the constraint (a copy in HLO) and the
    # values before it split by columns
    constraint = line_of("jax.lax.with_sharding_constraint(h")
    assert ["copy", "f32[64,64]", "{devices=[1,4]<=[4]}", constraint] in s["shardings"]
    assert ["tanh", "f32[64,64]", "{devices=[1,4]<=[4]}", line_of("h = jnp.tanh(x @ w1)")] \
        in s["shardings"]
    assert ar["type"] == "f32[64,32]" and "'axis_1'" in ar["attrs"]["replica_groups"]


def test_tensor_parallel_training_step() -> None:
    s = stories(4)["tp_mlp_step"]
    shapes = {w: d for w, _, d, _ in s["shapes"]}
    assert shapes["output 0"] == "f32[32,16]" and shapes["output 1"] == "f32[16,32]"
    # the forward's partial products of h @ w2 are summed over the model axis
    lines = {c["line"] for c in inserted(s, "all-reduce")}
    assert line_of("return jnp.mean((h @ w2 - y) ** 2)") in lines


def test_data_and_tensor_parallel_on_a_2d_mesh() -> None:
    s = stories(4)["dp_tp_mlp_step"]
    shapes = {w: d for w, _, d, _ in s["shapes"]}
    assert shapes["parameter x.1"] == "f32[32,32]" and shapes["parameter w1.1"] == "f32[32,32]"
    groups = {c["attrs"]["replica_groups"] for c in inserted(s, "all-reduce")}
    # devices (data, model) = [[0, 1], [2, 3]]: sums over the model axis pair 0-1 and 2-3,
    # sums over the data axis (the weight gradients) pair 0-2 and 1-3
    assert "{{0,1},{2,3}}" in groups and "{{0,2},{1,3}}" in groups
    assert any("all-reduce-combiner" in p for p in s["collective_passes"])


def test_shard_map_psum() -> None:
    s = stories(4)["shard_map_psum"]
    (ar,) = [c for c in s["collectives"] if c["opcode"] == "all-reduce"]
    assert ar["stage"] == "traced"  # written by the program (psum), not inserted by XLA
    assert ar["line"] == line_of('jax.lax.psum(a @ b, "x")')
    assert ar["type"] == "f32[16,8]" and ar["attrs"]["replica_groups"] == "{{0,1,2,3}}"
    assert "written by the program" in s["story"]


def test_shard_map_gather_permute_all_to_all() -> None:
    s = stories(4)["shard_map_collectives"]
    lines = {c["opcode"]: c["line"] for c in s["collectives"] if c["stage"] == "traced"}
    assert lines == {"all-gather": line_of("jax.lax.all_gather("),
                     "collective-permute": line_of("jax.lax.ppermute("),
                     "all-to-all": line_of("jax.lax.all_to_all(")}
    # XLA's CPU pipeline decomposes the all-to-all: a pass on collectives, with its new form
    assert any("all-to-all-decomposer" in p for p in s["collective_passes"])
    assert [c["line"] for c in inserted(s, "all-to-all")] == [line_of("jax.lax.all_to_all(")]


def test_sharded_attention_block() -> None:
    s = stories(4)["attention"]
    shapes = {w: d for w, _, d, _ in s["shapes"]}
    assert shapes["parameter wq.1"] == "f32[32,8]" and shapes["parameter wo.1"] == "f32[8,32]"
    (ar,) = inserted(s, "all-reduce")
    assert ar["line"] == line_of("return out.reshape(b, s, d) @ wo")
    assert ar["type"] == "f32[2,16,32]"


def test_gspmd_propagation_is_a_stage_too() -> None:
    """With JAX's older partitioner (GSPMD), XLA's `sharding-propagation` pass is the stage."""
    (s,) = _run(4, "tp_mlp", JAX_USE_SHARDY_PARTITIONER="false")
    assert s["propagation"] == ["spmd-partitioner.sharding-propagation"]
    assert any(x.endswith(".spmd-partitioning") for x in s["stages"])
    (ar,) = inserted(s, "all-reduce")
    assert ar["line"] == line_of("return h @ w2")
    assert s["partitioned_params"] == s["jax_shard_shapes"]


def test_eight_devices() -> None:
    got = {s["program"]: s for s in _run(8, "dp_mlp", "dp_tp_mlp_step", "shard_map_collectives",
                                         "attention")}
    for s in got.values():
        assert s["devices"] == 8 and s["partitioning"] in s["stages"]
        assert s["partitioned_params"] == s["jax_shard_shapes"]
        assert s["memory"]["argument"] == s["final_param_bytes"]
        assert "each of 8" in s["summary"]
    assert {w: d for w, _, d, _ in got["dp_mlp"]["shapes"]}["parameter x.1"] == "f32[8,32]"
    # 8 devices split the 4 heads' features too: the scores need a sum of their own
    (scores,) = [c for c in inserted(got["attention"], "all-reduce") if c["type"] != "f32[2,16,32]"]
    assert scores["line"] == line_of('scores = jnp.einsum("bqhd,bkhd->bhqk", q, k)')
    gathered = [c for c in got["shard_map_collectives"]["collectives"] if c["opcode"] == "all-gather"]
    assert [c["type"] for c in gathered] == ["f32[16,32]"]


def test_more_devices_than_exist_says_how_to_get_them() -> None:
    r, a = _run(4, "toomany", "8")
    assert a["error"] is not None and "AbstractMesh" in a["error"]
    assert "--xla_force_host_platform_device_count" in a["error"]
    assert r["error"] is not None
    assert "needs 8 devices" in r["error"] and "has 4" in r["error"]
    assert "spmd_check.py" in r["error"] and "jax.make_mesh((need,)" in r["error"]  # the line
    assert "XLA_FLAGS=--xla_force_host_platform_device_count=8" in r["error"]


def test_one_device_program_has_no_partitioning() -> None:
    """In this process (one device): the summary says there is nothing to partition."""
    import numpy as np

    import explorer as gx

    trace = gx.xla_pipeline(lambda a, b: (a @ b).sum(), np.ones((8, 4), np.float32),
                            np.ones((4, 2), np.float32))
    s = trace.spmd()
    assert (s.devices, s.partitioning, s.collectives, s.shapes) == (1, None, (), ())
    assert repr(s) == str(s) and str(s).startswith("SPMD over 1 device\n")
    assert "partitioning: (no stage)" in str(s) and "collectives: none" in str(s)
    assert "XLA's memory on its one device: arguments 160 B" in trace.summary()
    assert "per device" not in trace.summary()
