"""Running the dashboard and workers inside a test: a uvicorn server in a thread, a
Worker in a thread, and Chromium through Playwright.

Import as ``from dashboard.support import ...`` (``tests/`` is on sys.path).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

import durq
from durq.dev.server import free_port
from durq.worker import Worker, WorkerConfig, WorkerState
from helpers import eventually, in_ci

CHROMIUM = os.environ.get("DURQ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS_ENV = "DURQ_SCREENSHOTS_DIR"
"""Where the browser tests save their screenshots (default: the test's tmp_path). CI
and ``make screenshots`` set it to docs/screenshots."""


def chromium_or_skip() -> str:
    """Chromium's path; skips the test when it or Playwright is missing (fails in CI,
    which installs both)."""
    reason = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "the playwright package is not installed (pip install -e '.[dev]')"
    if reason is None and not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        reason = f"no Chromium at {CHROMIUM}: apt-get install chromium (or set DURQ_CHROMIUM)"
    if reason is not None:
        if in_ci():
            pytest.fail(f"{reason} (CI must run the browser tests)", pytrace=False)
        pytest.skip(reason)
    return CHROMIUM


class LiveServer:
    """An ASGI app served by uvicorn on a free loopback port, in a thread."""

    def __init__(self, app: Any, host: str = "127.0.0.1") -> None:
        self.port = free_port()
        self.host = host
        config = uvicorn.Config(
            app, host=host, port=self.port, log_level="warning", timeout_graceful_shutdown=2
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="dashboard", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> LiveServer:
        self.thread.start()
        eventually(lambda: self.server.started or not self.thread.is_alive(), 10, "uvicorn")
        assert self.server.started, "the dashboard server did not start"
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@contextmanager
def running_worker(app: durq.App, **config: Any) -> Iterator[Worker]:
    """A Worker of ``app`` in a thread of its own for the ``with`` block."""
    config.setdefault("grace", 2.0)
    config.setdefault("heartbeat", 0.2)
    worker = Worker(app, WorkerConfig(**config), handle_signals=False)
    loops: list[asyncio.AbstractEventLoop] = []

    async def main() -> None:
        loops.append(asyncio.get_running_loop())
        await worker.run()

    thread = threading.Thread(target=lambda: asyncio.run(main()), name="worker", daemon=True)
    thread.start()
    eventually(lambda: worker.state is not WorkerState.STARTING, 10, "the worker to start")
    try:
        yield worker
    finally:
        if loops and thread.is_alive():
            loops[0].call_soon_threadsafe(worker.stop)
        thread.join(15)
        assert not thread.is_alive(), "the worker did not stop within 15 s"


def screenshot_dir(tmp_path: Path) -> Path:
    """``$DURQ_SCREENSHOTS_DIR`` (created), or the test's tmp_path."""
    wanted = os.environ.get(SCREENSHOTS_ENV)
    target = Path(wanted) if wanted else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    return target
