"""The README's "no polling", docs/design.md's "Blocking without polling" and
docs/workflows.md's idle couriers: an idle worker, with its queue's workflow outbox to
deliver too, blocks on wake markers until work is due, and sends nothing but its
heartbeat: the registry's beat and the upkeep's look (worker/upkeep.py). The promise ->
test table is in docs/guarantees.md."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

import durq
from durq.dev.server import RedisServer
from helpers import eventually
from worker.support import ExecLog, running_worker

#: what a worker's loops would send if they polled (commandstats also counts the
#: commands scripts call)
_POLLS = ("fcall", "fcall_ro", "evalsha", "eval", "bzpopmin", "blpop", "brpop")
#: a heartbeat's commands: the registry's beat (SADD, HSET, PEXPIRE), the upkeep's look
#: at the queue (TIME, ZRANGE, ZRANGE, EXISTS, GET) and at its outbox (TIME, ZRANGE)
_PER_BEAT = 10
HEARTBEAT = 0.5


def _calls(client: redis.Redis) -> dict[str, int]:
    stats: dict[str, dict[str, int]] = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()}


@pytest.mark.parametrize(
    ("asleep", "batch"),
    [(0, False), (10_000, False), (0, True)],
    ids=["empty", "10k-asleep", "batch"],
)
def test_an_idle_worker_sends_nothing_but_its_heartbeat(
    make_server: Callable[..., RedisServer], queue_name: str, asleep: int, batch: bool
) -> None:
    url = make_server().url  # its own server: commandstats counts every client
    app = durq.App(url, default_queue=queue_name)
    if batch:  # a batch task's queue: its own pump (worker/batches.py)

        @app.task(batch=durq.Batch(max_size=10, max_wait=0.05))
        def noop(items: list[durq.Item]) -> None: ...

    else:

        @app.task
        def noop() -> None: ...

    if asleep:  # jobs asleep for an hour (a durq.sleep parks its job as these)
        noop.options(delay=3600).enqueue_many([()] * asleep)
    client = redis.Redis.from_url(url)
    try:
        with running_worker(app, queues=[queue_name], heartbeat=HEARTBEAT):
            noop.enqueue(*([1] if batch else []))
            eventually(lambda: app.queue(queue_name).stats().completed == 1, 10, "the job")
            time.sleep(2 * HEARTBEAT)  # settled: every loop blocks
            before = _calls(client)
            seconds = 2.0
            time.sleep(seconds)
            after = _calls(client)
    finally:
        client.close()
        app.close()
    sent = {k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}
    sent.pop("info", None)  # this test's own
    beats = seconds / HEARTBEAT + 2  # the first and last may fall either side
    # polling would be scripts and blocking waits every few seconds (before the upkeep,
    # ~20 commands per second per queue); the heartbeat is a few plain reads and writes
    assert not {k: n for k, n in sent.items() if k in _POLLS}, sent
    assert sum(sent.values()) <= _PER_BEAT * beats, sent


def test_a_lease_taken_while_an_idle_worker_waits_is_reclaimed_when_it_ends(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    # another consumer, blocked before the worker, is woken by the enqueue and takes the
    # job under a 1 s lease, then "dies" (never acknowledges): the worker, idle in a wait
    # planned before that lease existed (up to IDLE_BLOCK, minutes), must still take the
    # job back when the lease ends, because its upkeep looks at the leases each heartbeat
    queue = app.queue(queue_name)
    taken: list[durq.Job | None] = []
    other = threading.Thread(target=lambda: taken.append(queue.dequeue(lease=1.0, wait=10)))
    other.start()
    time.sleep(0.3)  # blocked first: Redis serves blocked clients in order
    with running_worker(app, queues=[queue_name], heartbeat=0.3):
        time.sleep(0.5)  # the worker blocks too, with nothing due
        handle = app.tasks["work"].enqueue(str(exec_log), "k")
        other.join(10)
        assert taken and taken[0] is not None and taken[0].id == handle.id
        eventually(lambda: queue.stats().completed == 1, 15, "the job run by the worker")
    assert queue.stats().reclaimed == 1
    assert [e["attempt"] for e in exec_log.events("finish")] == [2]


@pytest.mark.parametrize("batch", [False, True], ids=["queue", "batch-queue"])
def test_a_cron_schedule_that_asks_for_ticks_is_refilled_within_a_heartbeat(
    redis_url: str, queue_name: str, batch: bool
) -> None:
    # a cron schedule asks for ticks (srefill: the time its stored ticks want more) once
    # half are used; the upkeep's look finds the request due and the worker refills it,
    # on a batch task's queue too
    app = durq.App(redis_url, default_queue=queue_name)
    if batch:

        @app.task(batch=durq.Batch(max_size=10, max_wait=0.1))
        def store(items: list[durq.Item]) -> None: ...

    else:

        @app.task
        def store() -> None: ...

    app.schedule("nightly", store, cron="0 3 * * *")
    client = redis.Redis.from_url(redis_url)
    key = f"{app.queue(queue_name).keys.prefix}srefill"
    try:
        with running_worker(app, queues=[queue_name], heartbeat=HEARTBEAT):
            eventually(lambda: client.zscore(key, "nightly") is not None, 10, "the upsert")
            planned = client.zscore(key, "nightly")
            client.zadd(key, {"nightly": 0})  # as a schedule half through its ticks asks
            eventually(lambda: (client.zscore(key, "nightly") or 0) > 0, 10, "the refill")
            assert client.zscore(key, "nightly") != planned  # more ticks: asks later
    finally:
        client.close()
        app.close()
