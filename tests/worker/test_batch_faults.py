"""A worker killed with SIGKILL in the middle of its batches (durq.Batch, two in flight):
every item comes back after its lease and completes on another worker, none
acknowledged twice."""

from __future__ import annotations

import signal
from collections import Counter

import pytest

import durq
from helpers import eventually
from worker.support import Durq, ExecLog

pytestmark = [pytest.mark.fault, pytest.mark.slow]


def test_sigkill_mid_batches_every_item_comes_back_after_its_lease_and_completes_once(
    exec_log: ExecLog,
    queue_name: str,
    redis_url: str,
    durq_cli: Durq,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DURQ_TEST_BATCH_QUEUE", queue_name)
    monkeypatch.setenv("DURQ_TEST_BATCH_LOG", str(exec_log))
    monkeypatch.setenv("DURQ_TEST_BATCH_CONCURRENCY", "2")  # two batches in flight
    app = durq.App(redis_url)

    @app.task(queue=queue_name, batch=durq.Batch(max_size=50, max_wait=0.2))
    def store(items: list[durq.Item]) -> None: ...

    argv = ("worker", "worker.batch_apps:app", "--url", redis_url, "-q", queue_name)
    first = durq_cli.start(*argv, "--lease", "1", url=redis_url)
    store.enqueue_many([(i,) for i in range(100)])
    eventually(lambda: exec_log.count("start") >= 100, 15, durq_cli.outputs)  # both running
    first.send(signal.SIGKILL)
    assert first.wait(5) == -signal.SIGKILL
    second = durq_cli.start(*argv, "--lease", "1", url=redis_url)
    queue = app.queue(queue_name)
    eventually(lambda: queue.stats().completed == 100, 30, durq_cli.outputs)

    finished = Counter(e["key"] for e in exec_log.events("finish"))
    assert sorted(finished, key=int) == [str(i) for i in range(100)]
    killed = {e["key"] for e in exec_log.events("start") if e["pid"] == first.pid}
    assert len(killed) == 100 and all(finished[key] == 1 for key in killed)
    assert {e["pid"] for e in exec_log.events("finish") if e["key"] in killed} == {second.pid}
    stats = queue.stats()
    assert (stats.completed, stats.size, stats.dead) == (100, 0, 0)
    assert stats.reclaimed >= len(killed)
    app.close()
