"""Real-browser fixtures: Debian's chromium driven by Playwright, and a JupyterLab server on
localhost with its own throwaway config, settings and runtime folders.

scripts/ensure-ui-deps.sh installs chromium; without it (or Playwright) these tests skip
with a message saying so. Screenshots go to test-artifacts/browser/ (git-ignored).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.browserkit import CHROMIUM, CHROMIUM_ARGS, HERE, ROOT, keep


def stop(proc: subprocess.Popen) -> None:
    """Terminate a server, and kill it if it has not gone within 20 s."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def wait_until_up(proc: subprocess.Popen, url: str, seconds: float, log: Any, log_path: Path,
                  what: str) -> None:
    """Poll `url` until the server answers; if it exits or `seconds` pass first, fail with the
    tail of its log."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                raise RuntimeError(f"{what} did not start:\n"
                                   + log_path.read_text()[-3000:]) from None
            time.sleep(0.3)

@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: run scripts/ensure-ui-deps.sh")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors  # type: ignore[attr-defined]
    yield pg
    context.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Lab:
    def __init__(self, url: str, token: str, root: Path, app: str, data_dir: Path) -> None:
        self.url, self.token, self.root, self.app, self.data_dir = url, token, root, app, data_dir

    def notebook_url(self, name: str) -> str:
        if self.app == "notebook":  # Notebook 7
            return f"{self.url}/notebooks/{name}?token={self.token}"
        return f"{self.url}/lab/tree/{name}?token={self.token}&reset"

    def wait_for_kernel(self, name: str, timeout: float = 120) -> None:
        """Until the notebook `name` has a kernel that has started and is idle (the server's
        sessions API): keys pressed before that can run cells with no kernel to run them."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"{self.url}/api/sessions?token={self.token}",
                                        timeout=5) as r:
                sessions = json.load(r)
            if any(s.get("path", "").endswith(name)
                   and (s.get("kernel") or {}).get("execution_state") == "idle"
                   for s in sessions):
                return
            time.sleep(0.5)
        raise TimeoutError(f"no idle kernel for {name} after {timeout:.0f} s")

    def trust(self, path: Path) -> None:
        """Sign a notebook as this server's user would by running it: its outputs are trusted."""
        import nbformat
        from nbformat.sign import NotebookNotary

        nb = nbformat.read(path, as_version=4)
        NotebookNotary(data_dir=str(self.data_dir)).sign(nb)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from _server(tmp_path_factory, "jupyterlab")


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from _server(tmp_path_factory, "notebook")


def _server(tmp_path_factory: pytest.TempPathFactory, app: str) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp(app)
    root = base / "notebooks"
    root.mkdir()
    shutil.copy(HERE / "gambit_demo.ipynb", root / "gambit_demo.ipynb")
    settings = base / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    venv_bin = str(Path(sys.executable).parent)
    env = {**os.environ,
           "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),  # the kernel's python
           "JUPYTER_CONFIG_DIR": str(base / "config"),
           "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
           "JUPYTER_DATA_DIR": str(base / "data"),
           "JUPYTERLAB_SETTINGS_DIR": str(base / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
           "JUPYTER_PLATFORM_DIRS": "1", "PYTHONPATH": str(ROOT)}
    log = open(base / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", app, "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         "--ServerApp.open_browser=False"] + (["--allow-root"] if os.geteuid() == 0 else []),
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(proc, f"{url}/api/status?token={token}", 90, log, base / "lab.log",
                      "JupyterLab")
        yield Lab(url, token, root, app, base / "data")
    finally:
        stop(proc)
        log.close()
        keep(f"{app}.log", lambda tmp: shutil.copy(base / "lab.log", tmp))


class Marimo:
    def __init__(self, url: str, token: str, root: Path) -> None:
        self.url, self.token, self.root = url, token, root

    def page_url(self) -> str:
        return f"{self.url}/?access_token={self.token}"


@pytest.fixture
def marimo_edit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Marimo]:
    yield from _marimo(tmp_path_factory, "edit")


@pytest.fixture
def marimo_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Marimo]:
    yield from _marimo(tmp_path_factory, "run")


def _marimo(tmp_path_factory: pytest.TempPathFactory, mode: str) -> Iterator[Marimo]:
    """`marimo edit` or `marimo run` on gambit_marimo.py, as a user starts it: on 127.0.0.1,
    headless, behind a token the browser is given; its own config and state folders. It runs
    in its own process group (the server and its kernel processes), which stops with it."""
    pytest.importorskip("marimo", reason="marimo is missing: pip install -e '.[dev]'")
    base = tmp_path_factory.mktemp(f"marimo-{mode}")
    root = base / "notebooks"
    root.mkdir()
    shutil.copy(HERE / "gambit_marimo.py", root / "gambit_marimo.py")
    port, token = _free_port(), secrets.token_hex(16)
    venv_bin = str(Path(sys.executable).parent)
    env = {**os.environ,
           "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
           "XDG_CONFIG_HOME": str(base / "config"), "XDG_STATE_HOME": str(base / "state"),
           "MARIMO_SKIP_UPDATE_CHECK": "1", "PYTHONPATH": str(ROOT)}
    # edit: with no browser connected for 10 minutes the server stops by itself, should the
    # test process die before its cleanup (`marimo run` has no such option)
    extra = ["--skip-update-check", "--timeout", "10"] if mode == "edit" else []
    log = open(base / "marimo.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "marimo", mode, "gambit_marimo.py", "--host", "127.0.0.1",
         "--port", str(port), "--headless", "--token-password", token, "--no-sandbox", *extra],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(proc, f"{url}/health", 60, log, base / "marimo.log", f"marimo {mode}")
        yield Marimo(url, token, root)
    finally:
        stop(proc)
        try:  # the kernel processes it started, if any outlived it
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        log.close()
        keep(f"marimo-{mode}.log", lambda tmp: shutil.copy(base / "marimo.log", tmp))
