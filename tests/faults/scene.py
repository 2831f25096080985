"""The set-up every fault case shares, and its verdict: a private server, the queue and a
raw client to read it after the faults, the case's ledger and its worker fleet."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

import durq
from durq.dev.server import RedisServer
from faults.checker import Report, assert_clean, check, drain, record_results
from faults.harness import Fleet, Producer, WorkerProc


@dataclass
class Scene:
    """One fault case's world (the ``scene`` fixture makes it)."""

    server: RedisServer
    #: the case's queue, and a raw client without retries, to read it after the faults
    queue: durq.Queue
    client: redis.Redis
    ledger: Path
    fleet: Fleet
    tmp_path: Path
    results_file: Path

    @property
    def url(self) -> str:
        """The server's URL."""
        return self.server.url

    @property
    def name(self) -> str:
        """The case's queue name."""
        return self.queue.name

    def workers(self, count: int, **spawn: Any) -> list[WorkerProc]:
        """``count`` workers started (``Fleet.spawn`` options) and consuming."""
        procs = [self.fleet.spawn(**spawn) for _ in range(count)]
        self.fleet.wait_ready(procs)
        return procs

    def producer(self, seqs: Sequence[int], **options: Any) -> Producer:
        """A producer thread of ``seqs`` into the case's queue (not started)."""
        return Producer(self.url, self.name, self.ledger, seqs, **options)

    def drain(self, timeout: float = 30.0) -> float:
        """Until nothing is pending, delayed or active; returns the seconds it took."""
        return drain(self.queue, timeout, self.fleet.outputs)

    def check(self, case: str, *, results: bool = True) -> Report:
        """Every job classified (``faults.checker.check``), once the queue is drained."""
        return check(case, self.ledger, self.queue, self.client, results=results)

    def verdict(
        self, report: Report, *problems: str, logs: Callable[[], str] | None = None
    ) -> None:
        """Record the case's results, then fail with every broken invariant (the
        report's and ``problems``, empty strings ignored) and the logs (the workers')."""
        record_results(self.tmp_path, report, self.results_file)
        assert_clean(report, logs or self.fleet.outputs, *problems)
