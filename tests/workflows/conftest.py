"""Fixtures of the workflow tests: the workflow App, durq subprocesses, a raw client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis

import durq
from worker.fixtures import durq_cli, exec_log
from workflows.apps import build
from workflows.support import Front

__all__ = ["durq_cli", "exec_log"]


@pytest.fixture
def wapp(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    """The workflow test App on the shared server; steps go to this test's queue."""
    app = build(redis_url, default_queue=queue_name)
    yield app
    app.close()


@pytest.fixture
def log(tmp_path: Path) -> str:
    """The path of this test's execution log."""
    return str(tmp_path / "runs.jsonl")


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    """A plain redis-py client on the shared server."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture(params=["sync", "async"])
async def front(request: pytest.FixtureRequest, wapp: durq.App) -> AsyncIterator[Front]:
    """The front end a test drives the workflow API through (both, in turn)."""
    yield Front(wapp, str(request.param))
    await wapp.aclose()
