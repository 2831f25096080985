"""Fixtures of the fault-injection tests: a case's scene (a private server, its queue,
ledger and worker fleet: ``faults.scene``), and the session's results file (its lines are
printed in the terminal summary).
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
from faults.checker import RECORDED
from faults.harness import Fleet
from faults.scene import Scene


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
def scene(
    make_server: Callable[..., RedisServer],
    ledger: Path,
    fault_queue: str,
    tmp_path: Path,
    results_file: Path,
) -> Iterator[Callable[..., Scene]]:
    """``(flavor=None, *, concurrency, lease, **RedisServer options) -> Scene``: the
    case's private server started, its queue and raw client, a fleet of workers with
    these options (none started yet); every worker left is killed at teardown."""
    made: list[Scene] = []

    def make(
        flavor: str | None = None, *, concurrency: int, lease: float, **server_options: Any
    ) -> Scene:
        server = make_server(flavor, **server_options)
        client = redis.Redis.from_url(
            server.url, socket_timeout=10, socket_connect_timeout=5, retry=Retry(NoBackoff(), 0)
        )
        fleet = Fleet(tmp_path, server.url, fault_queue, ledger, concurrency=concurrency,
                      lease=lease)  # fmt: skip
        queue = durq.Queue(fault_queue, client=client)
        made.append(Scene(server, queue, client, ledger, fleet, tmp_path, results_file))
        return made[-1]

    yield make
    for done in made:
        done.fleet.close()
        done.client.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not RECORDED:
        return
    terminalreporter.section("durq fault-injection results")
    for line, path in RECORDED:
        terminalreporter.write_line(line)
        terminalreporter.write_line(f"    {path}")
