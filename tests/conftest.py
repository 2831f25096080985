"""Fixtures shared by all tests: real servers, unique queue names, private servers.

Tests isolate from each other by unique queue names on the shared session
servers; they never FLUSHALL them. Tests that kill, pause or restart a server
get a private one from ``make_server``.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from durq.dev.server import RedisServer
from helpers import (
    FLAVOR_IDS,
    default_flavor,
    flavor_params,
    require_flavor,
    selected_flavors,
    start_server,
)

_FIXTURE_BY_FLAVOR = {"valkey": "valkey_server", "redis": "redis62_server"}

# pytest-xdist's workers start with COLUMNS=80 in their environment: the CLI's consoles,
# made when durq.cli is first imported, would take it for every later test's terminal
# width (tests/cli/support.py sets COLUMNS per call, as a serial run sees it)
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


def _session_server(flavor: str) -> Iterator[RedisServer]:
    require_flavor(flavor)
    server = start_server(flavor)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def valkey_server() -> Iterator[RedisServer]:
    """The shared Valkey 9 server (appendonly no) for the whole session."""
    yield from _session_server("valkey")


@pytest.fixture(scope="session")
def redis62_server() -> Iterator[RedisServer]:
    """The shared Redis 6.2 server (appendonly no) for the whole session."""
    yield from _session_server("redis")


@pytest.fixture(scope="session", params=flavor_params())
def server(request: pytest.FixtureRequest) -> RedisServer:
    """Each selected shared server in turn; ids ``valkey`` and ``redis6.2``."""
    result: RedisServer = request.getfixturevalue(_FIXTURE_BY_FLAVOR[request.param])
    return result


@pytest.fixture(scope="session")
def redis_url(request: pytest.FixtureRequest) -> str:
    """URL of one shared server: Valkey, unless DURQ_TEST_SERVERS deselects it."""
    flavor = selected_flavors()[0]
    shared: RedisServer = request.getfixturevalue(_FIXTURE_BY_FLAVOR[flavor])
    return shared.url


@pytest.fixture
def server_binary() -> str:
    """Path of the default flavor's server binary (skipped, or failed in CI, if missing)."""
    return require_flavor(default_flavor())


@pytest.fixture
def queue_name() -> str:
    """A queue name unique to this test: ``t-`` and 10 hex characters."""
    return f"t-{secrets.token_hex(5)}"


@pytest.fixture
def make_server() -> Iterator[Callable[..., RedisServer]]:
    """Factory ``(flavor=None, **RedisServer kwargs) -> started RedisServer``.

    For tests that kill, pause or restart their server; all are closed at teardown.
    """
    started: list[RedisServer] = []

    def make(flavor: str | None = None, **kwargs: Any) -> RedisServer:
        server = start_server(flavor, **kwargs)
        started.append(server)
        return server

    yield make
    for server in reversed(started):
        server.close()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark what ``make test-fast`` leaves out by what a test needs (``browser``: the
    Chromium fixture; ``cluster``: the session's local Cluster; ``django6``: the Django 6
    venv). The tests of a Django project form an xdist group, so that one worker builds
    it. The ``fault`` tests are spread over the workers like the others: each kills only
    its own servers and processes, and one group of them made a chain as long as the
    rest of the suite on one worker (make coverage: 16 min against 12)."""
    for item in items:
        needs = set(getattr(item, "fixturenames", ()))
        if "browser" in needs:
            item.add_marker(pytest.mark.browser)
        if "cluster" in needs:
            item.add_marker(pytest.mark.cluster)
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("django_env") == "django6":
            item.add_marker(pytest.mark.django6)
        if "django_project" in needs:
            # one worker builds each Django project (a session fixture: 15-22 s each
            # under load, once per xdist worker that ran one of its tests)
            item.add_marker(pytest.mark.xdist_group("django-project"))


class _GroupIds:
    """pytest-xdist (3.8) tells its ``loadgroup`` scheduler a test's group by appending
    ``@group`` to the test's node id through a field pytest 9.2 no longer reads
    (pytest-dev/pytest-xdist#1386): every group, the fault tests' included, was spread
    over the workers. On an xdist worker this appends it where pytest keeps the id now,
    after xdist's own attempt (a no-op once xdist's fix lands)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[Any]) -> None:
        if not getattr(config.option, "loadgroup", False):
            return
        try:
            from _pytest.nodeid import NodeId  # pytest >= 9.2
        except ImportError:  # an older pytest: xdist's own ids work there
            return

        for item in items:
            names = {
                str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                for mark in item.iter_markers("xdist_group")
            }
            suffix = "@" + "_".join(sorted(names))
            if names and not item.nodeid.endswith(suffix):
                item._id = NodeId.parse(item.nodeid + suffix)


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "loadgroup", False):
        config.pluginmanager.register(_GroupIds(), "durq-xdist-group-ids")


def pytest_report_header(config: pytest.Config) -> str:
    """Say which server flavors this run tests against."""
    return "durq test servers: " + ", ".join(FLAVOR_IDS[f] for f in selected_flavors())
