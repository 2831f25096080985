"""Jobs wait for a worker that can run them: the holding area (docs/deployment.md, "Jobs
wait for a worker that can run them"), with workers of two releases of one app on one
queue, in this process."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
import redis

import durq
from deploy.apps import Ran, v1, v2
from durq.dev.server import RedisServer
from durq.protocol import holding
from durq.protocol.record import FLAG_HELD
from durq.protocol.status import Status
from durq.transport.connection import sync_client
from durq.worker.pace import IDLE_HEARTBEAT
from helpers import eventually
from worker.support import running_worker


@pytest.fixture
def ran() -> Ran:
    return Ran()


@pytest.fixture
def apps(redis_url: str, queue_name: str, ran: Ran) -> Iterator[tuple[durq.App, durq.App]]:
    old, new = v1(redis_url, queue_name, ran), v2(redis_url, queue_name, ran)
    yield old, new
    old.close()
    new.close()


def test_a_job_of_a_task_the_worker_does_not_run_is_held_without_an_attempt_and_not_fetched_again(
    apps: tuple[durq.App, durq.App], queue_name: str
) -> None:
    old, new = apps
    queue = old.queue(queue_name)
    with running_worker(old):
        handle = new.tasks["t"].enqueue(1)
        eventually(lambda: queue.stats().held == 1, 10)
        info = queue.job(handle.id)
        assert info is not None and info.state is durq.JobState.HELD
        assert info.attempts == 0 and info.deliveries == 1
        assert info.reason is not None and info.reason["reason"] == "held"
        assert (info.reason["task"], info.reason["version"]) == ("t", 1)
        time.sleep(1.0)  # five heartbeats of an incapable worker: nobody fetches it again
        info = queue.job(handle.id)
        assert info is not None and info.deliveries == 1 and info.state is durq.JobState.HELD


@pytest.mark.slow  # ~10 s: two workers in turn (make test runs it; make test-fast not)
def test_a_worker_that_runs_the_task_takes_the_held_jobs_in_its_next_fetch(
    apps: tuple[durq.App, durq.App], queue_name: str, ran: Ran
) -> None:
    old, new = apps
    queue = old.queue(queue_name)
    with running_worker(old):
        new.tasks["t"].enqueue_many([(i,) for i in range(30)])
        eventually(lambda: queue.stats().held == 30, 10)
        with running_worker(new, concurrency=5):
            eventually(lambda: len(ran.of("t")) == 30, 10)
    assert sorted(args[0] for _, args in ran.of("t")) == list(range(30))
    assert {release for release, _ in ran.of("t")} == {"v2"}
    stats = queue.stats()
    assert (stats.held, stats.dead, stats.size) == (0, 0, 0)


def test_a_job_of_an_older_version_runs_with_its_arguments_upgraded_by_the_migration(
    apps: tuple[durq.App, durq.App], queue_name: str, ran: Ran
) -> None:
    old, new = apps
    old.tasks["u"].enqueue(7)  # a job of version 1: u(x)
    with running_worker(new):
        eventually(lambda: ran.of("u") == [("v2", (7, 10))], 10)


@pytest.mark.slow  # ~10 s: two workers in turn (make test runs it; make test-fast not)
def test_a_job_of_a_newer_version_waits_for_a_worker_of_that_version(
    apps: tuple[durq.App, durq.App], queue_name: str, ran: Ran
) -> None:
    old, new = apps
    queue = old.queue(queue_name)
    with running_worker(old):
        handle = new.tasks["u"].enqueue(3, 2)  # version 2: the v1 worker cannot run it
        eventually(lambda: queue.stats().held == 1, 10)
        info = queue.job(handle.id)
        assert info is not None and info.reason is not None
        assert (info.reason["task"], info.reason["version"]) == ("u", 2)
        with running_worker(new):
            eventually(lambda: ran.of("u") == [("v2", (3, 2))], 10)
    assert not [r for r, _ in ran.of("u") if r == "v1"]


@pytest.mark.slow  # ~10 s: two workers in turn (make test runs it; make test-fast not)
def test_an_older_version_without_a_migration_waits_for_a_worker_of_its_version(
    redis_url: str, queue_name: str, ran: Ran
) -> None:
    new = v2(redis_url, queue_name, ran, migrate=False)
    old = v1(redis_url, queue_name, ran)
    queue = new.queue(queue_name)
    try:
        old.tasks["u"].enqueue(5)
        with running_worker(new):
            eventually(lambda: queue.stats().held == 1, 10)
            with running_worker(old):
                eventually(lambda: ran.of("u") == [("v1", (5,))], 10)
    finally:
        new.close()
        old.close()


def test_a_held_job_is_dead_lettered_as_unknown_task_once_no_worker_had_its_task_for_the_grace(
    redis_url: str, queue_name: str, ran: Ran
) -> None:
    old = v1(redis_url, queue_name, ran, unknown_task_grace=1.0)
    new = v2(redis_url, queue_name, ran)
    queue = old.queue(queue_name)
    try:
        with running_worker(old):
            handle = new.tasks["t"].enqueue(1)
            eventually(lambda: queue.stats().held == 1, 10)
            eventually(lambda: queue.stats().dead == 1, 10)
        (dead,) = queue.dead_letters()
        assert dead.id == handle.id and dead.reason is not None
        assert dead.reason["reason"] == "unknown_task"
        assert "no worker of this queue has run task t for 1 s" in dead.reason["message"]
        assert queue.stats().held == 0
    finally:
        old.close()
        new.close()


@pytest.mark.slow  # ~10 s: two workers in turn (make test runs it; make test-fast not)
def test_a_held_job_is_not_dead_lettered_while_a_live_worker_of_the_queue_runs_its_task(
    redis_url: str, queue_name: str, ran: Ran
) -> None:
    # the capable worker is busy (one slot, taken by a long job), so the held job waits
    # past the grace; its heartbeats keep saying it runs the task: no dead letter
    old = v1(redis_url, queue_name, ran, unknown_task_grace=1.0)
    new = v2(redis_url, queue_name, ran, unknown_task_grace=1.0)
    gate = durq.Queue(queue_name, redis_url)
    queue = old.queue(queue_name)

    @new.task(name="busy")
    def busy() -> None:
        time.sleep(2.5)
        ran.add("v2", "busy")

    try:
        with running_worker(old), running_worker(new, concurrency=1, prefetch=0):
            new.tasks["busy"].enqueue()
            eventually(lambda: queue.stats().active == 1, 10)
            new.tasks["t"].enqueue(1)
            eventually(lambda: queue.stats().held == 1 or ran.of("t") != [], 10)
            eventually(lambda: ran.of("t") != [], 10)
        assert queue.stats().dead == 0
    finally:
        gate.close()
        old.close()
        new.close()


def test_a_held_job_can_be_cancelled_like_a_pending_one(
    apps: tuple[durq.App, durq.App], queue_name: str, ran: Ran
) -> None:
    old, new = apps
    queue = old.queue(queue_name)
    with running_worker(old):
        handle = new.tasks["t"].enqueue(1)
        eventually(lambda: queue.stats().held == 1, 10)
        (result,) = queue.cancel(handle.id)
        assert result.status is durq.CancelStatus.CANCELLED
    with running_worker(new):  # the capable worker finds nothing to bring back
        time.sleep(0.6)
    info = queue.job(handle.id)
    assert info is not None and info.state is durq.JobState.CANCELLED
    assert ran.of("t") == [] and queue.stats().held == 0


def test_a_held_record_reads_as_a_delayed_one_to_durq_0_1_0_and_a_cancel_empties_its_holding_area(
    apps: tuple[durq.App, durq.App], queue_name: str, redis_url: str
) -> None:
    """docs/decisions/held-records.md: the state byte is 0.1.0's delayed, with FLAG_HELD."""
    old, new = apps
    queue = old.queue(queue_name)
    raw = sync_client(redis_url)  # redis.Redis, or RedisCluster under tests/cluster
    prefix = queue.keys.prefix
    with running_worker(old):
        handle = new.tasks["t"].enqueue(1)
        eventually(lambda: queue.stats().held == 1, 10)
        record = raw.hget(prefix + "jobs", handle.id)
        assert isinstance(record, bytes) and record[1] == 2 and record[32] & FLAG_HELD
        assert raw.zrange(prefix + "held:t", 0, -1) == [handle.id.encode()]
        (result,) = queue.cancel(handle.id)
        assert result.status is durq.CancelStatus.CANCELLED
        record = raw.hget(prefix + "jobs", handle.id)
        assert isinstance(record, bytes) and record[1] == 7 and not record[32] & FLAG_HELD
        assert raw.zcard(prefix + "held:t") == 0 and raw.zcard(prefix + "heldidx") == 0
        assert queue.stats().held == 0
    raw.close()


def test_a_migration_that_raises_dead_letters_the_job_with_its_reason(
    redis_url: str, queue_name: str, ran: Ran
) -> None:
    old = v1(redis_url, queue_name, ran)
    new = durq.App(redis_url, default_queue=queue_name)

    def broken(
        args: list[object], kwargs: dict[str, object]
    ) -> tuple[list[object], dict[str, object]]:
        raise KeyError("scale")

    @new.task(name="u", version=2, migrate={1: broken})
    def u(x: int, scale: int) -> None:
        ran.add("v2", "u", x, scale)

    queue = new.queue(queue_name)
    try:
        handle = old.tasks["u"].enqueue(1)
        with running_worker(new):
            eventually(lambda: queue.stats().dead == 1, 10)
        (dead,) = queue.dead_letters()
        assert dead.id == handle.id and dead.reason is not None
        assert (dead.reason["reason"], dead.reason["version"]) == ("migration_failed", 1)
        assert ran.of("u") == []
    finally:
        old.close()
        new.close()


@pytest.mark.slow  # ~10 s: two workers in turn (make test runs it; make test-fast not)
def test_held_jobs_of_a_sharded_queue_wait_in_their_shard_and_a_capable_worker_runs_them(
    redis_url: str, queue_name: str, ran: Ran
) -> None:
    old = v1(redis_url, queue_name, ran, shards={queue_name: 2})
    new = v2(redis_url, queue_name, ran, shards={queue_name: 2})
    shards = [old.queue(name) for name in old.shard_names(queue_name)]
    try:
        with running_worker(old):
            new.tasks["t"].enqueue_many([(i,) for i in range(20)])
            eventually(lambda: sum(s.stats().held for s in shards) == 20, 10)
            assert all(s.stats().held > 0 for s in shards)  # each shard holds its own
            with running_worker(new):
                eventually(lambda: len(ran.of("t")) == 20, 10)
        assert sorted(args[0] for _, args in ran.of("t")) == list(range(20))
        assert [(s.stats().held, s.stats().dead) for s in shards] == [(0, 0), (0, 0)]
    finally:
        old.close()
        new.close()


def test_every_way_of_enqueueing_carries_the_task_version(
    redis_url: str, queue_name: str, ran: Ran
) -> None:
    # a v1 worker holds version-2 jobs of u for "u@2": each path wrote the version
    old = v1(redis_url, queue_name, ran)
    new = v2(redis_url, queue_name, ran)
    queue = old.queue(queue_name)
    u = new.tasks["u"]
    new.schedule("u-tick", u, args=(100, 2), every=3600)
    try:
        new.sync_schedules([queue_name])
        new.schedules.trigger("u-tick")
        ids = [
            u.enqueue(1, 2).id,
            u.options(priority=1).enqueue(2, 2).id,
            *(r.id for r in u.enqueue_many([(3, 2), (4, 2)])),
            durq.chain(u.s(5, 2)).enqueue().id,
        ]
        with running_worker(old):
            eventually(lambda: queue.stats().held == 6, 10)
        assert ran.of("u") == []
        with running_worker(new):
            eventually(lambda: len(ran.of("u")) == 6, 10)
        assert sorted(args for _, args in ran.of("u")) == [
            (1, 2), (2, 2), (3, 2), (4, 2), (5, 2), (100, 2)
        ]  # fmt: skip
        assert len(ids) == 5
    finally:
        old.close()
        new.close()


def _fetch_and_hold(queue: durq.Queue, cap: str = "t") -> durq.Job:
    """Fetch one job and hold it, as a worker without ``cap`` does (hold.lua)."""
    job = queue.dequeue(lease=30)
    assert job is not None
    (status,) = queue._run(holding.hold(queue.keys, [(job, cap)], 600, "w"))
    assert status is Status.OK, status
    return job


def test_a_held_job_keeps_its_dedup_key_until_a_worker_starts_it(
    apps: tuple[durq.App, durq.App], queue_name: str
) -> None:
    """Fetching frees a job's key (it started); holding gives it back: the job never
    started, so an enqueue with its key is deduplicated against it, and one with
    ``replace`` supersedes it (it leaves the holding area)."""
    old, new = apps
    queue = old.queue(queue_name)
    t = new.tasks["t"]
    first = t.options(key="k").enqueue(1)
    assert _fetch_and_hold(queue).id == first.id
    again = t.options(key="k").enqueue(2)
    assert (again.status, again.id) == (durq.EnqueueStatus.DEDUPLICATED, first.id)
    assert queue.stats().held == 1
    replaced = t.options(key="k", replace=True).enqueue(3)
    assert replaced.status is durq.EnqueueStatus.REPLACED
    info = queue.job(first.id)
    assert info is not None and info.state is durq.JobState.SUPERSEDED
    assert queue.stats().held == 0  # it left the holding area
    # the replacement, held too, keeps the key; once a worker starts it, the key is free
    assert _fetch_and_hold(queue).id == replaced.id
    assert t.options(key="k").enqueue(4).status is durq.EnqueueStatus.DEDUPLICATED
    queue._run(holding.unhold(queue.keys, ["t"], 10))
    assert queue.dequeue(lease=30) is not None
    assert t.options(key="k").enqueue(5).status is durq.EnqueueStatus.CREATED


def test_a_job_that_took_the_key_while_another_was_fetched_keeps_it_when_that_one_is_held(
    apps: tuple[durq.App, durq.App], queue_name: str
) -> None:
    old, new = apps
    queue = old.queue(queue_name)
    t = new.tasks["t"]
    first = t.options(key="k").enqueue(1)
    fetched = queue.dequeue(lease=30)  # the key is free: it started, as far as we know
    assert fetched is not None and fetched.id == first.id
    second = t.options(key="k").enqueue(2)
    assert second.status is durq.EnqueueStatus.CREATED
    (status,) = queue._run(holding.hold(queue.keys, [(fetched, "t")], 600, "w"))
    assert status is Status.OK
    third = t.options(key="k").enqueue(3)
    assert (third.status, third.id) == (durq.EnqueueStatus.DEDUPLICATED, second.id)


def test_an_idle_worker_says_its_capabilities_with_its_stretched_look_covering_the_next_one(
    make_server: Callable[..., RedisServer], queue_name: str, ran: Ran
) -> None:
    # the entries that keep a job held later from being dead-lettered while this worker
    # lives say until when they cover (lib/holding/seen.lua): an idle worker, whose looks
    # come once per IDLE_HEARTBEAT (minutes: far more than this 2 s grace), says them
    # with its first stretched look, covering past the next one by a quarter of the
    # grace at least, by caps_seen.lua's few commands (caps.lua, its held-job check
    # ZMSCORE and its sweep, only at start and while jobs are held)
    url = make_server().url  # its own server: commandstats counts every client
    app = v2(url, queue_name, ran, unknown_task_grace=2.0)
    caps = app.queue(queue_name).keys.prefix + "caps"
    client = redis.Redis.from_url(url)

    def covered() -> float:  # seconds past the server's now
        seconds, micros = client.time()
        return (int(client.hget(caps, "t") or 0) - seconds * 1000 - micros // 1000) / 1000

    try:
        with running_worker(app, heartbeat=0.2):
            eventually(lambda: client.hget(caps, "t") is not None, 10, "published at start")
            assert covered() < IDLE_HEARTBEAT  # the first look comes a heartbeat later
            before = _calls(client)
            eventually(lambda: covered() > IDLE_HEARTBEAT, 10, "said for the next look")
            after = _calls(client)
        sent = {k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}
        assert "zmscore" not in sent, sent
        assert covered() <= IDLE_HEARTBEAT + 2 * 0.5 + 1
        assert 0 < client.pttl(caps) <= 2 * 2000 + 3600_000 + 60_000
    finally:
        client.close()
        app.close()


def test_a_job_held_after_a_worker_said_it_runs_its_task_waits_for_the_end_of_what_it_covered(
    redis_url: str, queue_name: str, ran: Ran
) -> None:
    # the sweep counts the grace from the end of what the last saying covers, not from
    # its time: an idle worker says its capabilities once per stretched look (minutes
    # apart), and a job held in between, past the grace, stays held while that saying
    # covers (the worker brings it back at that next look). The price: a worker that
    # died keeps its tasks' held jobs from the dead letters that much longer
    app = v2(redis_url, queue_name, ran, unknown_task_grace=0.5)
    queue = app.queue(queue_name)

    def now() -> int:
        return int(queue.client.time()[0])

    try:
        with running_worker(app, heartbeat=0.2):
            key = queue.keys.prefix + "caps"
            eventually(lambda: int(queue.client.hget(key, "t") or 0) / 1000 > now() + 60, 10)
        handle = app.tasks["t"].enqueue(1)  # no worker: held as an incapable one would
        fetched = queue.dequeue(lease=30)
        assert fetched is not None and fetched.id == handle.id
        (status,) = queue._run(holding.hold(queue.keys, [(fetched, "t")], 0.5, "w"))
        assert status is Status.OK
        time.sleep(1.0)  # twice the grace
        dead, _ = queue._run(holding.publish(queue.keys, ["other"], 0.5))  # another's sweep
        assert dead == 0
        assert queue.stats().held == 1
        # once the saying's cover has ended the grace ago, the sweep dead-letters it
        queue.client.hset(key, "t", (now() - 1) * 1000)
        dead, _ = queue._run(holding.publish(queue.keys, ["other"], 0.5))
        assert dead == 1
        assert [d.id for d in queue.dead_letters()] == [handle.id]
    finally:
        app.close()


def _calls(client: redis.Redis) -> dict[str, int]:
    stats: dict[str, dict[str, int]] = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()}
