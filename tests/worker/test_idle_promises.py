"""The README's "no polling", docs/design.md's "Blocking without polling" and
docs/workflows.md's idle couriers: an idle worker, with its queue's workflow outbox to
deliver too, blocks on wake markers until work is due, and sends next to nothing: its
heartbeat (the registry's beat and the upkeep's look, worker/upkeep.py) is stretched to
``IDLE_HEARTBEAT`` while it has nothing in hand (worker/pace.py), and a lease another
consumer takes meanwhile wakes it through the dequeue script (lua/lib/core/idlers.lua).
The promise -> test table is in docs/guarantees.md; the figures are in
docs/decisions/idle-upkeep.md."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable

import httpx
import pytest
import redis

import durq
from cli.support import durq as run_cli
from durq import lua
from durq.dashboard.data import _worker as dashboard_entry
from durq.dev.server import RedisServer
from durq.protocol.calls import IDLE_BLOCK
from durq.worker.pace import IDLE_HEARTBEAT
from durq.worker.registry import list_workers
from helpers import eventually
from worker.support import Durq, ExecLog, running_worker

#: what a worker's loops would send if they polled (commandstats also counts the
#: commands scripts call)
_POLLS = ("fcall", "fcall_ro", "evalsha", "eval", "bzpopmin", "blpop", "brpop")
#: the most commands per second an idle worker process sends (docs/decisions/idle-upkeep.md)
TARGET = 0.05
HEARTBEAT = 0.5


def idle_commands(
    app: durq.App, enqueue: Callable[[], object], calls: Callable[[], dict[str, int]]
) -> tuple[dict[str, int], float]:
    """The commands (``calls()``: INFO commandstats, by name) a worker of ``app``'s
    default queue sends once idle after running the job ``enqueue()`` makes, over a
    window of six heartbeats; and the window's seconds."""
    queue = app.queue(app.default_queue)
    with running_worker(app, queues=[queue.name], heartbeat=HEARTBEAT):
        enqueue()
        eventually(lambda: queue.stats().completed == 1, 15, "the job")
        time.sleep(3 * HEARTBEAT)  # settled: every loop blocks, the idle beat made
        before = calls()
        seconds = 6 * HEARTBEAT
        time.sleep(seconds)
        after = calls()
    return {k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}, seconds


def _calls(client: redis.Redis) -> dict[str, int]:
    stats: dict[str, dict[str, int]] = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()}


@pytest.mark.parametrize(
    ("asleep", "batch"),
    [(0, False), (10_000, False), (0, True)],
    ids=["empty", "10k-asleep", "batch"],
)
def test_an_idle_worker_sends_no_command_for_many_heartbeats(
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
        sent, seconds = idle_commands(app, lambda: noop.enqueue(*([1] if batch else [])),
                                      lambda: _calls(client))  # fmt: skip
    finally:
        client.close()
        app.close()
    sent.pop("info", None)  # this test's own
    # polling would be scripts and blocking waits every few seconds (before the upkeep,
    # ~20 commands per second per queue); an idle worker's heartbeat comes once per
    # IDLE_HEARTBEAT (10 min), so a window of a few heartbeats sees none of it
    assert not {k: n for k, n in sent.items() if k in _POLLS}, sent
    assert sum(sent.values()) <= TARGET * seconds, sent


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
def test_a_cron_schedule_that_asks_for_ticks_is_refilled_a_heartbeat_after_a_wake(
    redis_url: str, queue_name: str, batch: bool
) -> None:
    # a cron schedule asks for ticks (srefill: the time its stored ticks want more) once
    # half are used, a time the upkeep's look reads and plans its next look for; one
    # whose ticks ran out asks at once (lib/schedules/due.lua) in the dequeue of a
    # consumer woken for its time. A consumer woken for nothing has the upkeep look at
    # the next heartbeat, stretched or not: the worker refills it, on a batch task's
    # queue too
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
            time.sleep(3 * HEARTBEAT)  # idle: the looks stretched
            client.zadd(key, {"nightly": 0})  # as a schedule whose ticks ran out asks
            client.zadd(app.queue(queue_name).keys.wake, {"0": 0})  # a consumer wakes
            eventually(lambda: (client.zscore(key, "nightly") or 0) > 0, 10, "the refill")
            assert client.zscore(key, "nightly") != planned  # more ticks: asks later
    finally:
        client.close()
        app.close()


@pytest.mark.fault
@pytest.mark.slow
def test_a_lease_taken_while_a_worker_idles_comes_back_soon_after_its_holder_is_killed(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    # the doomed worker blocks first, so the job goes to it; the idle worker, whose
    # wait and looks were planned before that lease existed (minutes), is woken by the
    # dequeue that wrote it (the queue's earliest lease: lua/lib/core/idlers.lua) and
    # plans its wait for the lease's end: killed, the doomed worker's job comes back
    # within seconds of its lease's end, not at the idle worker's next stretched look
    # (a lease of 5 s at least: a shorter one bounds each idle wait, and the doomed
    # worker would block again behind the other)
    doomed = durq_cli.worker(redis_url, queue_name, args=("--lease", "5", "-c", "1"))
    eventually(lambda: "consuming" in doomed.output(), 15, durq_cli.outputs)
    time.sleep(1.0)  # blocked, first in line
    queue = app.queue(queue_name)
    with running_worker(app, queues=[queue_name], heartbeat=HEARTBEAT):
        time.sleep(4 * HEARTBEAT)  # idle: its heartbeat stretched
        app.tasks["stalls_first"].enqueue(str(exec_log), "k", 60.0)
        eventually(lambda: exec_log.count("start") == 1, 15, durq_cli.outputs)
        assert exec_log.events("start")[0]["pid"] == doomed.pid
        time.sleep(3.0)  # its lease extended
        doomed.send(signal.SIGKILL)
        killed = time.time()
        assert doomed.wait(5) == -signal.SIGKILL
        eventually(lambda: exec_log.count("finish") == 1, 20, durq_cli.outputs)
        again = exec_log.events("start")[1]
    assert (again["pid"], again["attempt"]) == (os.getpid(), 2)
    # the lease ends at most 5 s after the kill: well before a stretched look (60 s)
    assert again["time"] - killed < min(20.0, IDLE_HEARTBEAT / 2)
    eventually(lambda: queue.stats().completed == 1, 5, "the acknowledgement")
    assert queue.stats().reclaimed == 1


def test_an_idle_worker_stays_listed_and_ready_with_its_heartbeat_stretched(
    app: durq.App, queue_name: str, redis_url: str
) -> None:
    # an idle worker beats once per IDLE_HEARTBEAT and its entry lives three of those
    # (a dead idle worker stays listed up to half an hour): `durq workers` lists it long
    # after three of its heartbeats, saying it is idle and how often it beats, and its
    # readiness (/readyz) holds: past three heartbeats without a beat, a PING answers
    # for it (worker/health.py)
    client = redis.Redis.from_url(redis_url)
    try:
        with running_worker(app, queues=[queue_name], heartbeat=0.2, health_port=0) as worker:
            eventually(lambda: worker.id in _ids(client), 10, "the worker listed")
            time.sleep(2.0)  # ten heartbeats idle
            listed = {w["id"]: w for w in list_workers(client)}
            assert worker.id in listed
            assert not worker.redis_ok()  # no beat for three heartbeats
            assert worker.health is not None
            port = worker.health.port
            assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code == 200
            assert time.time() - listed[worker.id]["beat"] > 3 * 0.2  # the beat stretched
            ttl = client.pttl(f"durq:worker:{worker.id}")
            assert 3 * 0.2 * 1000 < ttl <= 3 * IDLE_HEARTBEAT * 1000
            assert listed[worker.id]["every"] == IDLE_HEARTBEAT
            shown = run_cli("workers", "--url", redis_url)
            assert shown.exit_code == 0, shown.output
            assert "(idle: every 10m)" in shown.output
            fields = {k: v for k, v in listed[worker.id].items() if k != "id"}
            assert dashboard_entry(worker.id, fields).every == IDLE_HEARTBEAT
    finally:
        client.close()


def _ids(client: redis.Redis) -> set[str]:
    return {w["id"] for w in list_workers(client)}


def test_an_idle_consumer_is_listed_for_no_less_than_its_longest_wait() -> None:
    # the dequeue lists an idle consumer until its planned wait ends at the latest; a
    # wait that outlasts the listing would let a lease taken meanwhile go unnoticed
    # (lua/lib/core/idlers.lua: PLAN_MS against protocol/calls.py: IDLE_BLOCK), and
    # the list itself must outlive a wait planned when a consumer was listed anew
    source = lua._read("lib/core/idlers")
    found = re.search(r"PLAN_MS = (\d+)", source)
    ttl = re.search(r"KEY_TTL = (\d+)", source)
    assert found is not None and ttl is not None
    assert int(found.group(1)) >= IDLE_BLOCK * 1000
    assert int(ttl.group(1)) > int(found.group(1))
