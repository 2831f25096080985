"""Fixtures of the schedule tests: an App on the shared server with this test's queue,
and ``durq worker`` processes of ``schedules.apps:app``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import durq
from schedules.apps import build
from worker.support import DurqProcess, durq_env


@pytest.fixture
def app(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    test_app = build(redis_url, queue_name)
    yield test_app
    test_app.close()


@pytest.fixture
def log_path(tmp_path: Path) -> str:
    return str(tmp_path / "ticks.jsonl")


@pytest.fixture
def workers(
    tmp_path: Path, redis_url: str, queue_name: str
) -> Iterator[Callable[..., DurqProcess]]:
    """Start ``durq worker schedules.apps:app`` processes on this test's queue; all are
    SIGKILLed at the end."""
    started: list[DurqProcess] = []

    def start(
        schedules: list[dict[str, Any]], lease: float = 30.0, *args: str, shards: int = 0
    ) -> DurqProcess:
        env = durq_env(redis_url)
        env["DURQ_TEST_SHARDS"] = str(shards)
        env["DURQ_TEST_QUEUE"] = queue_name
        env["DURQ_TEST_LEASE"] = str(lease)
        env["DURQ_TEST_SCHEDULES"] = json.dumps(schedules)
        argv = ["worker", "schedules.apps:app", "-q", queue_name, "--heartbeat", "0.5",
                "--grace", "1", *args]  # fmt: skip
        proc = DurqProcess(argv, env, tmp_path / f"worker-{len(started)}.log")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
