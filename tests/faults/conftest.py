"""Fixtures of the fault-injection tests: a private server per test, worker fleets,
ledgers, and the session's results file (its lines are printed in the terminal summary).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

import durq
from durq.dev.server import RedisServer
from faults.harness import RECORDED, Fleet


@pytest.fixture(scope="session")
def results_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One JSON object per line, one line per case run in this session."""
    return tmp_path_factory.getbasetemp() / "fault-results.jsonl"


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.txt"
    path.touch()
    return path


@pytest.fixture
def fault_queue() -> str:
    return f"f-{secrets.token_hex(4)}"


@pytest.fixture
def fleet_factory(tmp_path: Path, ledger: Path, fault_queue: str) -> Iterator[Callable[..., Fleet]]:
    """``(url, **Fleet options) -> Fleet``; every worker left is killed at teardown."""
    fleets: list[Fleet] = []

    def make(url: str, **options: Any) -> Fleet:
        fleet = Fleet(tmp_path, url, fault_queue, ledger, **options)
        fleets.append(fleet)
        return fleet

    yield make
    for fleet in fleets:
        fleet.close()


@pytest.fixture
def observe(
    fault_queue: str,
) -> Iterator[Callable[[RedisServer], tuple[durq.Queue, redis.Redis]]]:
    """``(server) -> (Queue, raw client)`` to read the test's queue after the faults."""
    opened: list[tuple[durq.Queue, redis.Redis]] = []

    def make(server: RedisServer) -> tuple[durq.Queue, redis.Redis]:
        client = redis.Redis.from_url(
            server.url, socket_timeout=10, socket_connect_timeout=5, retry=Retry(NoBackoff(), 0)
        )
        queue = durq.Queue(fault_queue, client=client)
        opened.append((queue, client))
        return queue, client

    yield make
    for _, client in opened:
        client.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not RECORDED:
        return
    terminalreporter.section("durq fault-injection results")
    for line, path in RECORDED:
        terminalreporter.write_line(line)
        terminalreporter.write_line(f"    {path}")
