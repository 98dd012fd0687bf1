"""Standalone reproducers (explorer/measure/reproducer.py): the script of a stage, or of one kernel of
it, run in a fresh Python process, rebuilds the graph from its IR text and prints `ok`; a
backend that computes something else gives `MISMATCH` and exit status 1."""

from __future__ import annotations

import runpy
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.ir import GraphBuilder, TensorType
from explorer.measure.reproducer import ReproducerError, bind_opaque, compare, kernels, reproducer
from tests.corpora.zoo import zoo

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(3)


def kernel_vector(x: jax.Array, y: jax.Array, v: jax.Array) -> jax.Array:
    return jnp.exp(-0.5 * jnp.sum((x[:, None] - y[None]) ** 2, -1)) @ v


def with_bessel(x: jax.Array) -> jax.Array:
    return jax.lax.bessel_i1e(x) * 2.0 + 1.0  # no row for bessel_i1e: an opaque node


@cache
def _zoo(name: str) -> gx.Trace:
    fn, args = zoo()[name]
    return gx.explore(fn, *args)


@cache
def _split() -> gx.Trace:
    args = [RNG.standard_normal(s).astype(np.float32) for s in ((203, 3), (150, 3), (150,))]
    t = gx.explore(kernel_vector, *args, memory_limit="32KiB")
    assert "loop" in t.final.graph.ops()  # 203 rows: a loop body and a tail
    return t


def _tail_kernel() -> str:
    """A kernel of the split loop's tail, whose id its body's kernel has too: "%8 in %29.tail"."""
    where, n, _ = next(k for k in kernels(_split().final.graph) if k[0].endswith(".tail"))
    return f"%{n.id}{where}"


# Runs scripts one after the other in one fresh process, each as `python script.py` would
# (as __main__, its exit status caught): a process's start (importing JAX) costs more than a
# script's run.
BATCH = """
import runpy, sys
for path in sys.argv[1:]:
    print("=== " + path, flush=True)
    sys.argv = [path]
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        print(f"exit {e.code}", flush=True)
"""


def _python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_scripts_of_stages_and_kernels_print_ok_in_a_fresh_process(tmp_path: Path) -> None:
    gpt = _zoo("gpt_block").final
    first = kernels(gpt.graph)[0][1]
    stages = {
        "traced": (_zoo("gpt_block").stages[0], {}),
        "fused": (gpt, {}),
        "split": (_split().final, {}),
        "scan": (_zoo("rnn_scan").final, {}),
        "while": (_zoo("while_halving").final, {}),
        "kernel": (gpt, {"kernel": first.attrs["body"].name}),
        "tail kernel": (_split().final, {"kernel": _tail_kernel()}),
    }
    paths = {}
    for name, (stage, options) in stages.items():
        paths[name] = tmp_path / f"{name.replace(' ', '_')}.py"
        assert stage.reproducer(paths[name], **options) == paths[name].read_text()
    opaque = tmp_path / "opaque.py"
    gx.explore(with_bessel, np.ones(5, np.float32)).final.reproducer(opaque)
    with ThreadPoolExecutor(2) as pool:  # the opaque one alone, exactly as a user runs it
        alone = pool.submit(_python, str(opaque))
        batch = _python("-c", BATCH, *map(str, paths.values()))
    assert batch.returncode == 0, batch.stderr
    outputs = dict(zip(stages, batch.stdout.split("=== ")[1:], strict=True))
    for name, out in outputs.items():
        lines = out.strip().splitlines()
        assert lines[0] == str(paths[name]) and lines[-1] == "exit 0", (name, out, batch.stderr)
        assert lines[-2].startswith("ok ") and "on cpu" in lines[-2], (name, out)
    assert f"ok kernel {first.attrs['body'].name} (%{first.id})" in outputs["kernel"]
    assert f"({_tail_kernel()})" in outputs["tail kernel"]
    r = alone.result()
    assert r.returncode == 0, r.stderr
    note, result = r.stdout.strip().splitlines()
    assert note.startswith("note: this graph holds opaque nodes") and result.startswith("ok ")


def test_a_wrong_backend_result_is_a_mismatch(tmp_path: Path) -> None:
    """A toy backend that adds 1 to what the reference computes, registered in the fresh
    process before the script runs: the script itself catches it."""
    path = tmp_path / "scan.py"
    _zoo("rnn_scan").final.reproducer(path)
    code = f"""
import dataclasses, runpy, sys
from explorer.backends import registry

class Broken(registry.Backend):
    name = "broken"

    def compile(self, graph, options):
        exe = registry.get("reference").compile(graph, options)

        class Wrong:
            def run(self, args):
                r = exe.run(args)
                return dataclasses.replace(r, outputs=[o + 1 for o in r.outputs])
        return Wrong()

registry.register(Broken())
sys.argv = [{str(path)!r}, "--backend", "broken", "--seed", "4"]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
    r = _python("-c", code)
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("MISMATCH ") and "on broken" in r.stdout and "seed 4" in r.stdout


def test_compare_uses_each_outputs_tolerance() -> None:
    want = [np.ones(3, np.float32), np.arange(3, dtype=np.int32)]
    assert compare([w.copy() for w in want], want) == (True, 0.0)
    assert compare([want[0] * (1 + 1e-6), want[1]], want)[0]  # f32 within 1e-3
    ok, error = compare([want[0], want[1] + 1], want)  # integers must be exact
    assert not ok and error == pytest.approx(0.5)
    assert compare([want[0]], want) == (False, float("inf"))
    assert not compare([np.full(3, np.nan, np.float32), want[1]], want)[0]


def test_script_is_deterministic_and_says_what_it_reproduces(tmp_path: Path) -> None:
    stage = _zoo("rnn_scan").final
    script = stage.reproducer(tmp_path / "rnn.py")
    assert script == stage.reproducer(tmp_path / "rnn.py")
    assert "# Reproducer of stage 'fuse' of @rnn, made by gambit-explorer." in script
    assert "python rnn.py [--backend NAME (default jax)]" in stage.reproducer(tmp_path / "rnn.py",
                                                                             backend="jax")
    scope = runpy.run_path(str(tmp_path / "rnn.py"))  # not as __main__: only the definitions
    assert gx.parse(scope["IR"]) == stage.graph and scope["OPAQUE"] == {}
    b = GraphBuilder("quotes")  # a name that a raw triple-quoted string cannot hold
    x = b.param(TensorType((2,), "f32"), "x'''\\")
    g = b.build([b.add("neg", [x])])
    reproducer(g, tmp_path / "quotes.py")
    assert gx.parse(runpy.run_path(str(tmp_path / "quotes.py"))["IR"]) == g


def test_a_primitive_jax_cannot_export_is_named(tmp_path: Path) -> None:
    def f(x):
        return jax.pure_callback(np.sort, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1.0

    path = tmp_path / "callback.py"
    gx.explore(f, np.ones(4, np.float32), pipeline=[]).final.reproducer(path)
    text = path.read_text()
    assert "# It holds opaque nodes (pure_callback)" in text and "NOT embedded" in text
    scope = runpy.run_path(str(path))  # not as __main__: only the definitions
    with pytest.raises(ReproducerError, match="pure_callback.*cannot run outside"):
        bind_opaque(gx.parse(scope["IR"]), scope["OPAQUE"])


def test_bad_input_says_what_is_wrong(tmp_path: Path) -> None:
    t = _zoo("rnn_scan")
    with pytest.raises(ReproducerError, match=r"no kernel 'nope'; its kernels: '%9 in %6\.body' "
                                              r"\(bodies fused_9\)"):
        t.final.reproducer(kernel="nope")
    loop = _split().final
    name = _tail_kernel().split()[0]
    with pytest.raises(ReproducerError, match=rf"names several kernels .*; say which: '{name} in "):
        loop.reproducer(kernel=int(name[1:]))
    with pytest.raises(ReproducerError, match="stage 'traced' has no kernels"):
        t.stages[0].reproducer(kernel=3)
    with pytest.raises(ReproducerError, match="kernel must be a node id"):
        t.final.reproducer(kernel=True)
    with pytest.raises(ReproducerError, match="unknown backend 'cuda'; registered: reference"):
        t.final.reproducer(backend="cuda")
    with pytest.raises(ReproducerError, match="is a directory"):
        t.final.reproducer(tmp_path)
    with pytest.raises(ReproducerError, match="Stage or a Graph, not str"):
        reproducer("graph @f {}")
    assert "kernel fused_9 (%9 in %6.body)" in t.final.reproducer(kernel=9)
