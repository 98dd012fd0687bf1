"""JAX's own test suite with compilation routed through us (issue 24's figure).

    .venv/bin/python bench/jax_suite.py --jax-src /path/to/jax-git-dir-or-checkout
    .venv/bin/python bench/jax_suite.py                 # once the cache holds the files
    .venv/bin/python bench/jax_suite.py --only tests/lax_test.py::LaxTest::testOp12 -v

The test files (tests/lax_test.py, lax_numpy_test.py, lax_numpy_reducers_test.py,
lax_numpy_operators_test.py, lax_numpy_indexing_test.py, lax_control_flow_test.py) are not
vendored: they are extracted at run time into `--cache` (default /tmp/jax_suite_cache/<rev>/)
from `--jax-src`, which is either a git directory of the jax repository (bare or not; e.g. the
one `git clone --bare https://github.com/jax-ml/jax` makes) read at `--rev` (default the tag
`jax-v<installed version>`, else the nearest older `jax-v*` tag, with a notice), or a
directory holding the files (a checkout, or its tests/ folder). PyPI's jax sdist does not
ship the tests. The files need absl-py (the [dev] extra).

What is checked. JAX's `JaxTestCase._CompileAndCheck(fun, args_maker, tol=...)` is patched:
JAX's own check runs first (its result decides whether the check counts as a jax.jit pass);
where it passes, `fun` is called on fresh `args_maker()` arguments through
`gx.compile(fun, backend=b)` for each backend and compared with `jax.jit(fun)` on the same
arguments by jtu's `assertAllClose` with the test's own check_dtypes/tol/atol/rtol. Our
failures never fail the pytest test; they are written to a results file and tallied.
`_CheckAgainstNumpy` is eager and stays as it is. lax_control_flow_test calls `jax.jit`
itself rather than `_CompileAndCheck`, so in the files named by `--shadow-jit` (default that
one) the module's `jax.jit` is shadowed: each top-level call with concrete arguments (no
tracers, no jit options) is recorded (per test, the first `--shadow-cap` distinct
function-and-signature pairs), and after a test that passed, each recorded call is
replayed through our backends and compared with what jax.jit returned (jtu's default
tolerances). One check = one `_CompileAndCheck` call (or one shadowed jit call).

Sampling: jtu's JAX_NUM_GENERATED_CASES (`--cases`, default 10) bounds each parameterized
test; JAX_ENABLE_X64 stays off unless `--x64`.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

FILES = ("lax_test", "lax_numpy_test", "lax_numpy_reducers_test", "lax_numpy_operators_test",
         "lax_numpy_indexing_test", "lax_control_flow_test")
# Files run only when named (--files or --only): nn_test calls jax.jit itself, so it counts
# under --shadow-jit (e.g. testDotProductAttentionBiasGradient's vjp gives a float0 cotangent).
MORE_FILES = ("nn_test",)
BACKENDS = ("reference", "cpu", "jax")
REPO = Path(__file__).resolve().parent.parent
PYTEST_INI = """[pytest]
addopts = -p no:cacheprovider --import-mode=importlib
markers =
    multiaccelerator: may use several accelerators
    SlurmMultiNodeGpuTest: multinode GPU nightly
"""

# ---------------------------------------------------------------------------------------------
# Getting the test files


def _installed_jax_version() -> str:
    from importlib.metadata import version

    return version("jax")


def _git(src: Path, *args: str) -> str:
    git_dir = src / ".git" if (src / ".git").exists() else src
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True,
                          capture_output=True, text=True).stdout


def _vkey(tag: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", tag))


def _resolve_rev(src: Path, rev: str | None) -> str:
    want = rev or f"jax-v{_installed_jax_version()}"
    tags = _git(src, "tag", "-l", "jax-v*").split()
    if want in tags or rev is not None:
        return want
    older = sorted((t for t in tags if _vkey(t) <= _vkey(want)), key=_vkey)
    if not older:
        raise SystemExit(f"{src}: no tag {want} and no older jax-v* tag; pass --rev")
    print(f"NOTICE: {src} has no tag {want}; using the nearest older tag {older[-1]}")
    return older[-1]


def _sibling_imports(text: str, available: set[str]) -> set[str]:
    """Helper modules a test file imports from its own folder."""
    names = set(re.findall(r"^\s*(?:from|import)\s+(?:tests\.)?(\w+)", text, re.M))
    return {n for n in names if n in available}


def fetch_tests(src: Path | None, rev: str | None, cache: Path, files: list[str]) -> Path:
    """The folder <cache>/<rev>/ holding tests/<file>.py for each file (extracted if needed)."""
    if src is None:
        found = sorted(p.parent for p in cache.glob("*/tests") if p.is_dir())
        if rev is not None:
            found = [p for p in found if p.name == rev]
        if not found:
            raise SystemExit(f"no test files cached under {cache}; pass --jax-src (see --help)")
        root = max(found, key=lambda p: _vkey(p.name))
        missing = [f for f in files if not (root / "tests" / f"{f}.py").exists()]
        if missing:
            raise SystemExit(f"{root} lacks {missing}; pass --jax-src to extract them")
        return root
    src = src.resolve()
    is_git = (src / ".git").exists() or (src / "HEAD").exists() and (src / "objects").is_dir()
    if is_git:
        rev = _resolve_rev(src, rev)
        listing = _git(src, "ls-tree", "--name-only", f"{rev}:tests").split()
        available = {n[:-3] for n in listing if n.endswith(".py")}

        def read(name: str) -> str:
            return _git(src, "show", f"{rev}:tests/{name}.py")
        label = rev
    else:
        tests = src / "tests" if (src / "tests").is_dir() else src
        available = {p.stem for p in tests.glob("*.py")}

        def read(name: str) -> str:
            return (tests / f"{name}.py").read_text()
        label = rev or f"jax-v{_installed_jax_version()}-{src.name}"
    root = cache / label
    (root / "tests").mkdir(parents=True, exist_ok=True)
    todo, done = list(files), set()
    while todo:
        name = todo.pop()
        if name in done:
            continue
        if name not in available:
            raise SystemExit(f"{src}: no tests/{name}.py at {label}")
        text = read(name)
        (root / "tests" / f"{name}.py").write_text(text)
        done.add(name)
        todo.extend(_sibling_imports(text, available) - done)
    (root / "pytest.ini").write_text(PYTEST_INI)
    print(f"test files from {src} at {label} -> {root}/tests ({', '.join(sorted(done))})")
    return root


# ---------------------------------------------------------------------------------------------
# The pytest plugin (this module, loaded by `-p bench.jax_suite` in each pytest process)

_state: dict[str, Any] = {"pending": None, "out": None}


class SuiteTimeout(Exception):
    pass


@contextlib.contextmanager
def _alarm(seconds: int):
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise SuiteTimeout(f"no result within {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _current_test() -> str:
    return os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]


def _write(rec: dict[str, Any]) -> None:
    if _state["out"] is None:
        path = Path(os.environ["JAX_SUITE_RESULTS"])
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _state["out"] = open(path / f"checks-{worker}.jsonl", "a")  # noqa: SIM115
    _state["out"].write(json.dumps(rec) + "\n")
    _state["out"].flush()


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


def _cause(e: BaseException) -> str:
    """The failure's group: 'values differ', 'dtypes differ', 'shapes differ', or the
    exception's type and first line."""
    msg = str(e)
    if isinstance(e, AssertionError):
        if "nan location mismatch" in msg or "inf location mismatch" in msg:
            return "values differ (nan/inf positions)"
        if "Not equal to tolerance" in msg or "Mismatched elements" in msg:
            return "values differ"
        if "shapes" in msg and "mismatch" in msg:
            return "shapes differ"
        if "dtype" in msg:
            return f"dtypes differ: {_first_line(e)}"
    return f"{type(e).__name__}: {_first_line(e)}"


def _tail(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__)[-12:])[-4000:]


def _through_us(tc: Any, fun: Any, args: Any, want: Any, *, check_dtypes: bool = True,
                atol: Any = None, rtol: Any = None) -> dict[str, Any]:
    import explorer as gx

    timeout = int(os.environ.get("JAX_SUITE_TIMEOUT", "120"))
    res: dict[str, Any] = {}
    for b in os.environ.get("JAX_SUITE_BACKENDS", ",".join(BACKENDS)).split(","):
        t0 = time.perf_counter()
        try:
            with _alarm(timeout):
                got = gx.compile(fun, backend=b)(*args)
            tc.assertAllClose(got, want, check_dtypes=check_dtypes, atol=atol, rtol=rtol)
            res[b] = {"ok": True}
        except Exception as e:  # noqa: BLE001 - every failure of ours is tallied, none raised
            res[b] = {"ok": False, "cause": _cause(e), "tb": _tail(e)}
        res[b]["s"] = round(time.perf_counter() - t0, 3)
    return res


def _patch_compile_and_check() -> None:
    from unittest import SkipTest

    import jax
    from jax._src import test_util as jtu

    original = jtu.JaxTestCase._CompileAndCheck
    if getattr(original, "_jax_suite", False):
        return

    @functools.wraps(original)
    def patched(self: Any, fun: Any, args_maker: Any, *a: Any, **kw: Any) -> None:
        rec: dict[str, Any] = {"test": _current_test(), "kind": "CompileAndCheck"}
        try:
            original(self, fun, args_maker, *a, **kw)
        except SkipTest:
            raise
        except BaseException as e:
            rec.update(jit=False, jit_cause=_cause(e))
            _write(rec)
            raise
        tol = kw.get("tol")
        atol, rtol = kw.get("atol") or tol, kw.get("rtol") or tol
        check_dtypes = kw.get("check_dtypes", True)
        try:
            args = args_maker()
            want = jax.jit(fun)(*args)
        except Exception as e:  # noqa: BLE001
            rec.update(jit=False, jit_cause=f"jax.jit on fresh args: {_cause(e)}")
            _write(rec)
            return
        rec["jit"] = True
        rec["ours"] = _through_us(self, fun, args, want, check_dtypes=check_dtypes,
                                  atol=atol, rtol=rtol)
        _write(rec)

    patched._jax_suite = True  # type: ignore[attr-defined]
    jtu.JaxTestCase._CompileAndCheck = patched


class _ShadowJit:
    """jax.jit(fun) as the shadowed module sees it: the real jitted function, whose top-level
    calls on concrete arguments are recorded for replay through our backends."""

    def __init__(self, real: Any, fun: Any) -> None:
        self._real, self._fun = real, fun
        functools.update_wrapper(self, fun)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self._real(*args, **kwargs)
        pending = _state["pending"]
        if pending is not None and not kwargs and _concrete(args) and _concrete(out):
            key = (id(self._fun), _signature(args))
            cap = int(os.environ.get("JAX_SUITE_SHADOW_CAP", "3"))
            if len(pending) < cap and all(k != key for k, *_ in pending):
                pending.append((key, self._fun, args, out))
        return out


def _signature(tree: Any) -> Any:
    import jax
    import numpy as np

    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return treedef, tuple((np.shape(x), str(getattr(x, "dtype", None) or np.result_type(x)))
                     for x in leaves)


def _concrete(tree: Any) -> bool:
    import jax
    import numpy as np

    leaves = jax.tree_util.tree_leaves(tree)
    return all(isinstance(x, (jax.Array, np.ndarray, np.generic, int, float, complex, bool))
               and not isinstance(x, jax.core.Tracer) for x in leaves)


class _JaxProxy:
    """The `jax` module with `jit` shadowed (for one test module's globals)."""

    def __init__(self, real: Any) -> None:
        self._jax = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._jax, name)

    def jit(self, fun: Any = None, *args: Any, **kw: Any) -> Any:
        if fun is None:
            return lambda f: self.jit(f, *args, **kw)
        real = self._jax.jit(fun, *args, **kw)
        return real if args or kw else _ShadowJit(real, fun)


def pytest_configure(config: Any) -> None:
    if "JAX_SUITE_RESULTS" in os.environ:
        _patch_compile_and_check()


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    shadow = set(filter(None, os.environ.get("JAX_SUITE_SHADOW_JIT", "").split(",")))
    seen = set()
    for item in items:
        mod = getattr(item, "module", None)
        if mod is None or id(mod) in seen:
            continue
        seen.add(id(mod))
        if mod.__name__.rsplit(".", 1)[-1] in shadow and not isinstance(mod.jax, _JaxProxy):
            mod.jax = _JaxProxy(mod.jax)


def _shadowed(item: Any) -> bool:
    mod = getattr(item, "module", None)
    return mod is not None and isinstance(getattr(mod, "jax", None), _JaxProxy)


def _pytest_runtest_call(item: Any) -> None:  # tryfirst, below
    _state["pending"] = [] if _shadowed(item) else None


def _pytest_runtest_makereport(item: Any, call: Any):  # the hookwrapper below
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or _state["pending"] is None:
        return
    pending, _state["pending"] = _state["pending"], None
    if report.skipped:
        return
    test = report.nodeid
    tc = getattr(item, "_testcase", None) or _fallback_case()
    for _, fun, args, out in pending:
        rec: dict[str, Any] = {"test": test, "kind": "jit"}
        if not report.passed:
            rec.update(jit=False, jit_cause="the test failed")
        else:
            rec.update(jit=True, ours=_through_us(tc, fun, args, out))
        _write(rec)


def _fallback_case() -> Any:
    from jax._src import test_util as jtu

    class _Case(jtu.JaxTestCase):
        def runTest(self) -> None:
            pass
    return _Case()


try:
    import pytest

    pytest_runtest_call = pytest.hookimpl(tryfirst=True)(_pytest_runtest_call)
    pytest_runtest_makereport = pytest.hookimpl(hookwrapper=True)(_pytest_runtest_makereport)
except ImportError:  # the summary needs no pytest
    pass


def pytest_runtest_logreport(report: Any) -> None:
    """Each test's pytest outcome, written by the process that reports (xdist's controller)."""
    if "JAX_SUITE_RESULTS" not in os.environ or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if report.when == "call" or report.outcome != "passed":
        path = Path(os.environ["JAX_SUITE_RESULTS"]) / "tests.jsonl"
        with open(path, "a") as f:
            f.write(json.dumps({"test": report.nodeid, "when": report.when,
                                "outcome": report.outcome}) + "\n")


# ---------------------------------------------------------------------------------------------
# Running and tallying


def _load(path: Path, pattern: str) -> list[dict[str, Any]]:
    out = []
    for p in sorted(path.glob(pattern)):
        out += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return out


def _norm(cause: str) -> str:
    """Group key: numbers, shapes and object addresses folded so one cause is one group."""
    cause = re.sub(r"0x[0-9a-fA-F]+", "0x_", cause)
    return re.sub(r"\d+", "N", cause)


def _file_of(test: str) -> str:
    return Path(test.split("::", 1)[0]).stem


def summarize(results: Path, backends: list[str], cases: int, elapsed: float,
              rev: str, verbose: bool, top: int) -> str:
    checks = _load(results, "checks-*.jsonl")
    tests = _load(results, "tests.jsonl")
    lines: list[str] = []
    w = lines.append
    w(f"JAX test suite through gambit-explorer: jax {_installed_jax_version()}, tests at {rev}, "
      f"JAX_NUM_GENERATED_CASES={cases}, x64={os.environ.get('JAX_ENABLE_X64', '0')}, "
      f"{elapsed / 60:.1f} min")
    w("")
    outcomes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for t in tests:
        outcomes[_file_of(t["test"])][t["outcome"]] += 1
    per: dict[str, dict[str, int]] = collections.defaultdict(collections.Counter)
    for c in checks:
        f = per[_file_of(c["test"])]
        f["checks"] += 1
        f["jit"] += bool(c.get("jit"))
        if c.get("jit"):
            oks = [c["ours"][b]["ok"] for b in backends]
            for b, ok in zip(backends, oks):
                f[b] += ok
            f["all"] += all(oks)
    cols = ["file", "tests p/f/s", "checks", "jit ok", *backends, "all", *(f"% {b}" for b in backends),
            "% all"]
    rows = []
    total: collections.Counter = collections.Counter()
    files = sorted(set(per) | set(outcomes), key=lambda f: FILES.index(f) if f in FILES else 99)
    for name in files:
        f, o = per[name], outcomes[name]
        total.update(f)
        for k in ("passed", "failed", "skipped"):
            total["t_" + k] += o[k]
        rows.append([name, f"{o['passed']}/{o['failed']}/{o['skipped']}", f["checks"], f["jit"],
                     *(f[b] for b in backends), f["all"],
                     *(_pct(f[b], f["jit"]) for b in backends), _pct(f["all"], f["jit"])])
    rows.append(["TOTAL", f"{total['t_passed']}/{total['t_failed']}/{total['t_skipped']}",
                 total["checks"], total["jit"], *(total[b] for b in backends), total["all"],
                 *(_pct(total[b], total["jit"]) for b in backends), _pct(total["all"], total["jit"])])
    widths = [max(len(str(r[i])) for r in [cols, *rows]) for i in range(len(cols))]
    for r in [cols, *rows]:
        w("  ".join(str(v).ljust(widths[i]) if i == 0 else str(v).rjust(widths[i])
                    for i, v in enumerate(r)))
    w("")
    w("checks: one _CompileAndCheck call (or, in the --shadow-jit files, one top-level jax.jit "
      "call); 'jit ok' = JAX's own check passed; backend columns count our passes among those; "
      "'all' = passed on every backend. By kind: "
      + ", ".join(f"{k}={v}" for k, v in collections.Counter(c["kind"] for c in checks).items()))
    w("")
    groups: dict[str, dict[str, Any]] = {}
    for c in checks:
        if not c.get("jit"):
            continue
        for b in backends:
            r = c["ours"][b]
            if r["ok"]:
                continue
            g = groups.setdefault(_norm(r["cause"]), {"n": collections.Counter(), "tests": [],
                                                      "cause": r["cause"], "tb": r["tb"]})
            g["n"][b] += 1
            if c["test"] not in g["tests"]:
                g["tests"].append(c["test"])
    ranked = sorted(groups.values(), key=lambda g: -sum(g["n"].values()))
    w(f"failure causes through us ({len(ranked)} distinct; failures per backend; reproducer):")
    for i, g in enumerate(ranked[:top], 1):
        counts = " ".join(f"{b}={g['n'][b]}" for b in backends if g["n"][b])
        w(f"{i:3d}. [{counts}] {g['cause']}")
        w(f"     {len(g['tests'])} test(s), e.g. .venv/bin/python bench/jax_suite.py --cases {cases} "
          f"--only {g['tests'][0]} -v")
        if verbose:
            w("     " + g["tb"].replace("\n", "\n     "))
    if len(ranked) > top:
        w(f"  ... {len(ranked) - top} more (--top)")
    jit_fail = collections.Counter(_norm(c.get("jit_cause", "")) for c in checks if not c.get("jit"))
    if jit_fail:
        w("")
        w("checks jax.jit itself failed (not counted): "
          + "; ".join(f"{n}x {k}" for k, n in jit_fail.most_common(5)))
    return "\n".join(lines)


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}" if d else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jax-src", type=Path, help="jax git dir (bare or not) or a dir with tests/")
    ap.add_argument("--rev", help="git revision (default: tag jax-v<installed jax>)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/jax_suite_cache"))
    ap.add_argument("--files", nargs="+", default=list(FILES), choices=FILES + MORE_FILES)
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--cases", type=int, default=10, help="JAX_NUM_GENERATED_CASES")
    ap.add_argument("--jobs", "-n", type=int, default=2, help="pytest-xdist workers (0: none)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per backend per check")
    ap.add_argument("--shadow-jit", default="lax_control_flow_test",
                    help="comma-separated files whose jax.jit calls are replayed through us")
    ap.add_argument("--shadow-cap", type=int, default=3, help="shadowed jit calls kept per test")
    ap.add_argument("--x64", action="store_true", help="JAX_ENABLE_X64=1")
    ap.add_argument("--only", nargs="+", help="pytest node ids (tests/<file>.py::Class::test)")
    ap.add_argument("-k", dest="keyword", help="pytest -k expression")
    ap.add_argument("--top", type=int, default=30, help="failure causes to list")
    ap.add_argument("-v", "--verbose", action="store_true", help="tracebacks of each cause")
    ap.add_argument("--out", type=Path, help="also write the summary here")
    a = ap.parse_args(argv)
    backends = [b for b in a.backends.split(",") if b]

    files = a.files
    if a.only:
        files = sorted({_file_of(t) for t in a.only})
    if a.jax_src is None and not any(p.is_dir() for p in a.cache.glob("*/tests")):
        # (`make bench` runs every script: without JAX's test files this one has nothing to run)
        print(f"skipped: no JAX test files under {a.cache}; pass --jax-src, a git directory "
              f"of github.com/jax-ml/jax (see --help)")
        return 0
    root = fetch_tests(a.jax_src, a.rev, a.cache, files)
    results = root / "results"
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir()
    env = dict(os.environ, JAX_SUITE_RESULTS=str(results), JAX_SUITE_BACKENDS=",".join(backends),
               JAX_SUITE_TIMEOUT=str(a.timeout), JAX_SUITE_SHADOW_JIT=a.shadow_jit,
               JAX_SUITE_SHADOW_CAP=str(a.shadow_cap),
               JAX_NUM_GENERATED_CASES=str(a.cases), JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    if a.x64:
        env["JAX_ENABLE_X64"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-c", str(root / "pytest.ini"), "--rootdir", str(root),
           "-p", "bench.jax_suite", "-q", "-rN", "--tb=no", "-o", "console_output_style=count"]
    if a.jobs and not a.only:
        cmd += ["-n", str(a.jobs)]
    if a.keyword:
        cmd += ["-k", a.keyword]
    cmd += a.only or [f"tests/{f}.py" for f in files]
    print("$", " ".join(cmd), flush=True)
    t0 = time.time()
    rc = subprocess.run(cmd, cwd=root, env=env).returncode
    text = summarize(results, backends, a.cases, time.time() - t0, root.name, a.verbose, a.top)
    print(f"(pytest exit status {rc}: JAX's own outcome; ours never fails a test)\n")
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
