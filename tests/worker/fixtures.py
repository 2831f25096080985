"""Fixtures shared by the worker and CLI tests (imported by their conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import durq
from worker.apps import build
from worker.support import Durq, ExecLog


@pytest.fixture
def app(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    """The test App on the shared server; its tasks go to this test's queue."""
    test_app = build(redis_url, default_queue=queue_name)
    yield test_app
    test_app.close()


@pytest.fixture
def bapp(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    """A bare App on the shared server (the batch tests declare their batch task)."""
    bare = durq.App(redis_url, default_queue=queue_name)
    yield bare
    bare.close()


@pytest.fixture
def exec_log(tmp_path: Path) -> ExecLog:
    """A fresh execution log for the test tasks (pass ``str(exec_log)`` to them)."""
    return ExecLog(tmp_path / "executions.jsonl")


@pytest.fixture
def durq_cli(tmp_path: Path) -> Iterator[Durq]:
    """Starts ``durq`` subprocesses; whatever still runs at the end is killed."""
    procs = Durq(tmp_path)
    yield procs
    procs.cleanup()
