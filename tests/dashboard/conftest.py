"""Fixtures of the dashboard tests: a served dashboard, its App, a headless Chromium."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import durq
from dashboard.apps import build
from dashboard.support import CHROMIUM_ARGS, LiveServer, chromium_or_skip
from durq.dashboard import create_app


@pytest.fixture
def app(redis_url: str) -> Iterator[durq.App]:
    """The test App on the shared server."""
    test_app = build(redis_url)
    yield test_app
    test_app.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., LiveServer]]:
    """Factory: ``serve(url, **create_app options)`` starts a dashboard on a free
    loopback port; all are stopped at teardown."""
    started: list[LiveServer] = []

    def start(url: str, **options: Any) -> LiveServer:
        options.setdefault("sample_interval", 0.25)
        options.setdefault("refresh", 0)
        server = LiveServer(create_app(url, **options)).start()
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium (Debian's), shared by a module's browser tests (module scope:
    Playwright's sync API runs an event loop of its own, which must not outlive the
    module into asyncio tests)."""
    executable = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser page (its own cookies); an ``alert`` fails the test."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    pg = context.new_page()
    alerts: list[str] = []

    def on_dialog(dialog: Any) -> None:
        if dialog.type == "alert":
            alerts.append(dialog.message)
            dialog.dismiss()
        else:  # confirm() before destructive actions: accept
            dialog.accept()

    pg.on("dialog", on_dialog)
    yield pg
    context.close()
    assert not alerts, f"a script ran in the page: alert({alerts[0]!r})"
