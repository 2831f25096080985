"""A failover under load: producers enqueue and an in-process worker runs jobs on a
``redis+sentinel://`` URL while the primary is killed with SIGKILL (or switched with
SENTINEL FAILOVER). Measures how long producers and the worker take to resume, and how
many acknowledged jobs the failover lost.

Run it on its own to repeat the measurement (the numbers in docs/guarantees.md):

    .venv/bin/python tests/sentinel/harness.py --runs 5
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

import durq
from durq.dev.server import RedisServer
from durq.dev.topology import LocalSentinel
from durq.worker.config import WorkerConfig
from durq.worker.runner import Worker

DELAY = 1.0  # seconds each job waits before it may run


@dataclass
class Outcome:
    """What one failover did to the jobs."""

    mode: str
    acked: int = 0
    processed: int = 0
    lost: int = 0
    duplicates: int = 0
    not_durable: int = 0  # enqueues refused by the durability check (not acknowledged)
    produce_resume_s: float = 0.0  # from the kill to the first enqueue, sent after it, acked
    work_resume_s: float = 0.0  # from the kill to the first run of a job enqueued after it
    # (less the jobs' delay)
    errors: list[str] = field(default_factory=list)

    def line(self) -> str:
        """One line for the report."""
        return (
            f"{self.mode:<22} acked={self.acked:<6} lost={self.lost:<3} "
            f"duplicates={self.duplicates:<4} not_durable={self.not_durable:<3} "
            f"producers_resume={self.produce_resume_s:.2f}s "
            f"worker_resume={self.work_resume_s:.2f}s"
        )


class _Load:
    """Producers enqueueing ids and a worker recording them, on one queue."""

    def __init__(self, setup: LocalSentinel, durability: durq.Durability | None) -> None:
        self.queue = f"fo-{secrets.token_hex(4)}"
        self.app = durq.App(setup.url, default_queue=self.queue, lease=2.0,
                            durability=durability)  # fmt: skip
        self.finished: list[str] = []
        self.acked: set[str] = set()
        self.sent_at: dict[str, float] = {}  # job id -> when its enqueue was sent
        self.killed_at = float("inf")
        self.resumed = {"produce": float("inf"), "work": float("inf")}
        self.producing = True
        self.not_durable = 0
        self.errors: list[str] = []

        @self.app.task(queue=self.queue)
        async def record(job_id: str) -> None:
            self.finished.append(job_id)
            if self.sent_at.get(job_id, 0) > self.killed_at:
                self.resumed["work"] = min(self.resumed["work"], time.monotonic())

        self.record = record

    async def produce(self, k: int) -> None:
        for i in itertools.count():
            if not self.producing:
                return
            job_id = f"{k}-{i}"
            self.sent_at[job_id] = time.monotonic()
            try:
                # delayed, so that the jobs of the last DELAY seconds before a failover
                # are still waiting in Redis then, as in a queue with a backlog
                await self.record.options(id=job_id, delay=DELAY).aenqueue(job_id)
            except durq.NotDurable:
                self.not_durable += 1
                continue
            except Exception as exc:  # retried through outages already: record it
                self.errors.append(f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(0.1)
                continue
            self.acked.add(job_id)
            if self.sent_at[job_id] > self.killed_at:
                self.resumed["produce"] = min(self.resumed["produce"], time.monotonic())
            await asyncio.sleep(0.003)

    async def until_resumed(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and max(self.resumed.values()) == float("inf"):
            await asyncio.sleep(0.02)

    async def until_drained(self, timeout: float) -> None:
        """Until every acknowledged job ran, or the queue is empty (the rest is lost)."""
        deadline = time.monotonic() + timeout
        queue = self.app.aqueue(self.queue)
        while time.monotonic() < deadline and not self.acked <= set(self.finished):
            try:
                if (await queue.stats()).size == 0:
                    break
            except redis.RedisError:
                pass  # still failing over
            await asyncio.sleep(0.2)
        await asyncio.sleep(0.3)  # late duplicates


async def _kill_primary(setup: LocalSentinel, load: _Load, lag: float) -> RedisServer:
    """SIGKILL the primary; with ``lag``, after cutting it off its replicas for that
    long first (as in a partition that ends with the primary's death: the replicas miss
    the last ``lag`` seconds of writes)."""
    old = setup.primary()
    replicas = [s for s in setup.data if s is not old]
    with redis.Redis(port=old.port) as client:
        assert client.info("replication")["role"] == "master"
        if lag:
            for replica in replicas:  # frozen, so they cannot reconnect before the kill
                replica.pause()
            client.execute_command("CLIENT", "KILL", "TYPE", "replica")
    if lag:
        await asyncio.sleep(lag)
    old.kill()
    load.killed_at = time.monotonic()
    for replica in replicas:
        replica.resume()
    await asyncio.to_thread(setup.wait_promoted, old)
    return old


async def run_failover(
    setup: LocalSentinel,
    *,
    durability: durq.Durability | None = None,
    kill: bool = True,
    lag: float = 0.0,
    before: float = 1.5,
    after: float = 1.5,
) -> Outcome:
    """Produce and work for ``before`` seconds, fail over, go on for ``after`` seconds
    past the resumption, then drain; returns the measurements."""
    mode = ("kill -9" if kill else "SENTINEL FAILOVER") + (f", lag {lag:g}s" if lag else "")
    mode += f", WAIT {durability.replicas}" if durability else ""
    load = _Load(setup, durability)
    worker = Worker(load.app, WorkerConfig(queues=[load.queue], concurrency=20, grace=5.0),
                    handle_signals=False)  # fmt: skip
    working = asyncio.create_task(worker.run())
    producers = [asyncio.create_task(load.produce(k)) for k in range(4)]
    await asyncio.sleep(before)
    if kill:
        old = await _kill_primary(setup, load, lag)
    else:
        load.killed_at = time.monotonic()
        await asyncio.to_thread(setup.failover)
    await load.until_resumed(30)
    await asyncio.sleep(after)
    load.producing = False
    await asyncio.gather(*producers)
    await load.until_drained(15)
    worker.stop()
    await asyncio.wait_for(working, 30)
    await load.app.aclose()
    if kill:
        await asyncio.to_thread(setup.recover, old)
    done = set(load.finished)
    return Outcome(
        mode,
        acked=len(load.acked),
        processed=len(done),
        lost=len(load.acked - done),
        duplicates=len(load.finished) - len(done),
        not_durable=load.not_durable,
        produce_resume_s=load.resumed["produce"] - load.killed_at,
        work_resume_s=load.resumed["work"] - load.killed_at - DELAY,
        errors=load.errors,
    )


def main(argv: list[str]) -> int:
    """Repeat the measurement and print one line per run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--flavor", default="valkey")
    parser.add_argument("--only-switch", action="store_true", help="only SENTINEL FAILOVER")
    args = parser.parse_args(argv)
    logging.getLogger("durq").setLevel(logging.ERROR)  # the outage's retries are expected
    modes = [(True, 0.0), (True, 0.5), (False, 0.0)]  # kill -9, lagging, SENTINEL FAILOVER
    if args.only_switch:
        modes = [(False, 0.0)]
    with LocalSentinel(flavor=args.flavor, replicas=2) as setup:
        for kill, lag in modes:
            for durability in (None, durq.Durability(replicas=1)):
                for _ in range(args.runs):
                    outcome = asyncio.run(
                        run_failover(setup, durability=durability, lag=lag, kill=kill)
                    )
                    print(outcome.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    sys.exit(main(sys.argv[1:]))
