"""Fixtures of the durable-step tests: an App with the durable test tasks, a log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import durq
from durable.apps import register
from worker.fixtures import durq_cli

__all__ = ["app", "durq_cli", "log"]


@pytest.fixture
def app(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    """An App whose durable test tasks go to this test's queue (short lease)."""
    test_app = durq.App(redis_url, default_queue=queue_name, lease=2.0)
    register(test_app, max_attempts=5, backoff=durq.fixed(0.05))
    yield test_app
    test_app.close()


@pytest.fixture
def log(tmp_path: Path) -> str:
    """A fresh execution log for the tasks' side effects."""
    return str(tmp_path / "effects.jsonl")
