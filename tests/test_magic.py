"""%%gambit in a real IPython shell."""

import numpy as np
import pytest

import explorer as gx
from explorer import magic
from explorer.view.widget import TraceWidget
from tests.ipyshell import ipython_shell

CELL = """\
def f(x, scale):
    y = x * 2.0 + 0.0
    return jnp.sum(y * scale)
f(x, scale=1.0)
"""


@pytest.fixture(scope="module")
def ip():
    shell = ipython_shell()
    shell.run_cell("import numpy as np\nimport jax.numpy as jnp\n"
                   "x = np.arange(12, dtype=np.float32).reshape(3, 4)")
    return shell


@pytest.fixture
def shown(monkeypatch):
    out = []
    monkeypatch.setattr(magic, "display", out.append)
    return out


def run(ip, text):
    return ip.run_cell(text, store_history=True)


def test_cell_value_is_the_optimised_result(ip, shown):
    r = run(ip, "%%gambit --pipeline simplify,cse,dce --out t\n" + CELL)
    assert r.error_in_exec is None
    np.testing.assert_allclose(r.result, 2.0 * np.arange(12).sum())
    trace = ip.user_ns["t"]
    assert isinstance(trace, gx.Trace)
    assert [s.name for s in trace.stages] == ["traced", "simplify", "cse", "dce"]
    [widget] = shown
    assert isinstance(widget, TraceWidget) and widget.trace is trace
    stage = widget.run_rows[-1]  # (after jax.jit's, the baseline beside it)
    assert stage["stage"] == 3 and stage["ok"]


def test_source_lines_read_in_n(ip, shown):
    r = run(ip, "%%gambit --pipeline none --out t2\n" + CELL)
    number = r.execution_count
    graph = ip.user_ns["t2"].stages[0].graph
    mul = next(n for n in graph.nodes if n.op == "mul")
    assert str(mul.source) == f"In[{number}]:3"  # line 1 of the cell is %%gambit
    assert mul.source.line_text == "y = x * 2.0 + 0.0"


def test_setup_statements_run_normally(ip, shown):
    r = run(ip, "%%gambit --no-run\nz = x + 1\ndef g(a):\n    return a * a\ng(z)\n")
    assert r.error_in_exec is None and r.result is None
    np.testing.assert_array_equal(ip.user_ns["z"], np.arange(12).reshape(3, 4) + 1)
    assert len(shown) == 1


def test_compare_measures_against_the_baselines_and_shows_the_table(ip, shown):
    from explorer.measure.compare import Comparison

    r = run(ip, "%%gambit --compare --pipeline none\n" + CELL)
    assert r.error_in_exec is None
    np.testing.assert_allclose(r.result, 2.0 * np.arange(12).sum())
    widget, table = shown
    assert widget.tab == "run"
    rows = widget.run_rows
    assert [r["label"] for r in rows[:3]] == ["NumPy", "JAX eager", "jax.jit"]
    assert {row["backend"] for row in rows[3:]} == set(gx.backends.sweep())  # not dask
    assert isinstance(table, Comparison) and table.figure is not None
    assert [m.label for m in table.rows][:3] == ["numpy", "jax-eager", "jax-jit"]
    assert len(table.rows) == len(rows)  # the same runs, measured once


def test_default_run_is_the_stage_beside_jax_jit(ip, shown):
    """The run row's "vs jax.jit" column is filled: jax.jit is measured beside it."""
    r = run(ip, "%%gambit --pipeline none\n" + CELL)
    assert r.error_in_exec is None
    [jit, row] = shown[0].run_rows
    assert row["kind"] == "stage" and row["ok"]
    assert jit["kind"] == "baseline" and jit["backend"] == "jax-jit" and jit["error"] == ""
    assert jit["seconds"] > 0 and row["seconds"] > 0  # what the column divides


def test_profile_profiles_the_final_stage_on_open(ip, shown, monkeypatch, tmp_path):
    from explorer.measure import peaks

    monkeypatch.setattr(peaks, "GEMM_N", {"cpu": 128, "gpu": 256})  # the roofline's, small
    monkeypatch.setattr(peaks, "TRIAD_N", 1 << 16)
    monkeypatch.setattr(peaks, "cache_path", lambda: tmp_path / "peaks.json")
    r = run(ip, "%%gambit --pipeline simplify,cse --profile --backend reference --out tp\n" + CELL)
    assert r.error_in_exec is None
    widget = shown[0]
    final = len(ip.user_ns["tp"].stages) - 1
    assert [p["stage"] for p in widget.profiles] == [final - 1, final]
    assert all(p["backend"] == "reference" for p in widget.profiles)
    assert [x["stage"] for x in widget.rooflines] == [final]
    assert widget.profile_state["error"] == "" and not widget.profile_state["running"]


@pytest.mark.parametrize("cell, message", [
    ("%%gambit --bogus\n" + CELL, "unrecognized arguments: --bogus"),
    ("%%gambit --backend tpu\n" + CELL, "unknown backend 'tpu'; registered: reference"),
    ("%%gambit --backend gpu\n" + CELL, "backend 'gpu' is not available here"),
    ("%%gambit\ny = 1\n", "must be a call"),
    ("%%gambit\n", "cell body is empty"),  # IPython says so itself
    ("%%gambit\nx + 1\n", "must be a call"),
    ("%%gambit\nnp.pi(\n", "syntax error in the cell, line 2"),
    ("%%gambit\nw = 3\nw()\n", "is not a function"),
    ("%%gambit --pipeline no-such-pass\n" + CELL, "no pass named 'no-such-pass'"),
    ("%%gambit --memory-limit lots\n" + CELL, "not a byte size"),
    ("%%gambit --out 9lives\n" + CELL, "--out needs a variable name"),
    ("%%gambit\ndef h(a, *, k):\n    return a\nh(x, k=x)\n", "can only be passed by keyword"),
])
def test_usage_errors_are_short(ip, shown, capsys, cell, message):
    r = run(ip, cell)
    from IPython.core.error import UsageError

    assert isinstance(r.error_in_exec, UsageError), r.error_in_exec
    assert message in str(r.error_in_exec)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert not shown


def test_unavailable_backend_choice_is_usage_error_for_cpu_when_absent(ip, shown):
    if "cpu" in gx.trace.BACKENDS:
        pytest.skip("the cpu backend is available")
    r = run(ip, "%%gambit --backend cpu\n" + CELL)
    assert "not available" in str(r.error_in_exec)


def test_xla_without_xla_pipeline_says_so(ip, shown, capsys, monkeypatch):
    monkeypatch.setattr(magic, "xla_pipeline", None)
    r = run(ip, "%%gambit --xla --no-run\n" + CELL)
    assert r.error_in_exec is None
    assert "gx.xla_pipeline" in capsys.readouterr().out


def test_xla_shows_a_second_widget(ip, shown, monkeypatch):
    calls = []

    def fake_xla(fn, *args):
        calls.append(fn.__name__)
        return gx.explore(fn, *args, pipeline=[])

    monkeypatch.setattr(magic, "xla_pipeline", fake_xla)
    r = run(ip, "%%gambit --xla --no-run\n" + CELL)
    assert r.error_in_exec is None and calls == ["f"] and len(shown) == 2


def test_help_documents_every_option():
    doc = magic.GambitMagics.gambit.__doc__
    for option in ("--pipeline", "--memory-limit", "--backend", "--compare", "--xla",
                   "--no-run", "--out", "--profile"):
        assert option in doc
    assert "cpu" in doc and "last" in doc
