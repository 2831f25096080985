"""A worker on a Redis server at ``maxmemory`` (``noeviction``): it acknowledges the jobs
in hand, stops fetching (a log line, a metric) until memory is free, then goes on; an
acknowledgement the server refuses for want of memory is kept and sent again."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import redis

import durq
from durq.dev.server import RedisServer
from durq.worker import Worker
from durq.worker.executor import DONE
from helpers import eventually
from worker.support import running_worker


@contextmanager
def full(server: RedisServer) -> Iterator[None]:
    """``server`` over its memory limit until the block ends."""
    admin = redis.Redis.from_url(server.url)
    try:
        used = int(admin.info("memory")["used_memory"])
        admin.config_set("maxmemory-policy", "noeviction")
        # well below: what the server uses moves by more than 100 KB (buffers)
        admin.config_set("maxmemory", used // 2)
        yield
    finally:
        admin.config_set("maxmemory", 0)
        admin.close()


def _refused_fetches(worker: Worker, queue: str) -> float:
    value = worker.metrics.registry.get_sample_value(
        "durq_fetches_refused_oom_total", {"queue": queue}
    )
    return value or 0.0


def _app(server: RedisServer, queue: str, gate: threading.Event) -> durq.App:
    app = durq.App(server.url, default_queue=queue)

    @app.task()
    def held(i: int) -> int:
        gate.wait(20)
        return i

    return app


def test_at_maxmemory_a_worker_acknowledges_its_jobs_then_backs_off_until_memory_is_free(
    make_server: Callable[..., RedisServer], queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = make_server()
    gate = threading.Event()
    app = _app(server, queue_name, gate)
    queue = app.queue(queue_name)
    app.tasks["held"].enqueue_many([(i,) for i in range(6)])
    caplog.set_level(logging.INFO, logger="durq.worker")
    with running_worker(app, queues=[queue_name], concurrency=3, prefetch=0, lease=5) as worker:
        eventually(lambda: queue.stats().active == 3, 10)
        with full(server):
            gate.set()  # the jobs in hand finish: their releases free memory
            eventually(lambda: queue.stats().completed == 3, 10, lambda: caplog.text)
            eventually(lambda: _refused_fetches(worker, queue_name) > 0, 10)
            time.sleep(0.5)  # a while at the limit: nothing more is handed out
            stats = queue.stats()
            assert (stats.completed, stats.active, stats.pending) == (3, 0, 3)
            assert "refuses to hand out jobs; backing off" in caplog.text
        eventually(lambda: queue.stats().completed == 6, 10, lambda: caplog.text)
        assert "Redis has memory again" in caplog.text
    assert "failed" not in caplog.text  # no acknowledgement was refused or dropped
    app.close()


def test_an_idle_worker_whose_wait_ends_at_maxmemory_backs_off_and_runs_the_job_later(
    make_server: Callable[..., RedisServer], queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # the waiter's fetch (BZPOPMIN and dequeue in one round trip) is the one refused
    server = make_server()
    gate = threading.Event()
    gate.set()
    app = _app(server, queue_name, gate)
    queue = app.queue(queue_name)
    caplog.set_level(logging.INFO, logger="durq.worker")
    with running_worker(app, queues=[queue_name], concurrency=2, lease=5) as worker:
        app.tasks["held"].options(delay=1.0).enqueue(1)
        with full(server):
            eventually(lambda: _refused_fetches(worker, queue_name) > 0, 10, lambda: caplog.text)
            assert queue.stats().completed == 0
        eventually(lambda: queue.stats().completed == 1, 10, lambda: caplog.text)
    app.close()


def test_an_acknowledgement_refused_for_want_of_memory_is_kept_for_the_next_sending(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    """durq's own acknowledgements are applied at maxmemory (lua/lib/core/frees_memory.lua),
    so the server's reply is taken from a command it refuses for want of memory; the
    pump must keep such acknowledgements, never drop them (before issue 31, it logged
    them as failed and the jobs ran again after their lease)."""
    from durq.metrics import WorkerMetrics
    from durq.worker.capacity import Capacity
    from durq.worker.pump import QueuePump

    server = make_server()
    admin = redis.Redis.from_url(server.url)
    with full(server), pytest.raises(redis.exceptions.OutOfMemoryError) as refused:
        admin.set("grows", "x" * 1000)
    admin.close()

    class Owner:
        def accept(self, jobs: list[durq.Job]) -> None: ...

        def pump_drained(self) -> bool:
            return False

    with durq.Queue(queue_name, server.url) as plain:
        plain.enqueue_many(["a", "b"])
        jobs = plain.dequeue_many(2)
    queue = durq.AsyncQueue(queue_name, server.url)
    pump = QueuePump(queue, Owner(), Capacity(2), WorkerMetrics(), batch=10, lease=5)
    for job in jobs:
        pump.acks.add(job, DONE)
    taken = pump.acks.take(10)
    assert pump._check_acks("release", [j for j, _ in taken], refused.value)
    pump.acks.put_back(taken, unsure=False)
    assert pump.acks.take(10) == taken
    assert not pump.acks.unsure  # refused, not applied: no "sent again after a lost reply"
