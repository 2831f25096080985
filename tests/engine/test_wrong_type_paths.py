"""A key of another Redis type on each path of the per-job scripts (dequeue, release and
the single enqueue): the call fails with CorruptQueue naming the key and changes nothing.

dequeue and release check the keys they write just before their first write, except
those a typed read made earlier already proved (lib/core/type_check.lua): which keys that
leaves depends on the path a call takes (an idle queue, an expired lease, a due delayed
job, a due schedule tick, group limits, a slot or job control to give back), so each
path is tried with each key it uses."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import durq
from durq import CorruptQueue, Queue
from durq.dev.server import RedisServer
from engine.support import keys_of

# the queue's keys dequeue may write, or read after its first write (dequeue.lua)
DEQUEUE_KEYS = ["jobs", "active", "delayed", "dead", "done", "reasons", "conf", "rr", "rrset"]
DEQUEUE_KEYS += ["gactive", "glimit", "gweight"]
# release's, and those of the jobs that give back a slot or end their job control
RELEASE_KEYS = ["jobs", "conf", "done", "reasons", "active"]
SLOT_KEYS = [*RELEASE_KEYS, "gactive", "glimit", "rr", "rrset"]
CONTROL_KEYS = [*SLOT_KEYS, "keys", "delayed", "ctl", "progress"]


def _idle(q: Queue) -> Callable[[], Any]:
    q.enqueue("x")
    return lambda: q.dequeue()


def _hundred(q: Queue) -> Callable[[], Any]:
    q.enqueue_many(range(100))
    return lambda: q.dequeue_many(100)


def _empty(q: Queue) -> Callable[[], Any]:
    return lambda: q.dequeue()


def _expired_lease(q: Queue) -> Callable[[], Any]:
    q.enqueue("x")
    assert q.dequeue(lease=0.05) is not None
    time.sleep(0.07)
    return lambda: q.dequeue()


def _due_delayed(q: Queue) -> Callable[[], Any]:
    q.enqueue("x", delay=0.01)
    time.sleep(0.03)
    return lambda: q.dequeue()


def _limited(q: Queue) -> Callable[[], Any]:
    q.configure(group_limit=3, weights={"a": 2})
    q.enqueue_many(["a1", "a2"], group="a")
    q.enqueue("b", group="b")
    return lambda: q.dequeue_many(3)


DEQUEUE_PATHS: dict[str, Callable[[Queue], Callable[[], Any]]] = {
    "idle": _idle,
    "hundred": _hundred,
    "empty": _empty,
    "expired_lease": _expired_lease,
    "due_delayed": _due_delayed,
    "limited": _limited,
}


def _release(keys: list[str], n: int = 1, **enqueue: Any) -> Any:
    def prepare(q: Queue) -> Callable[[], Any]:
        if enqueue.get("group"):
            q.configure(limits={enqueue["group"]: 5})
        q.enqueue_many(range(n), **{k: v for k, v in enqueue.items() if k != "expires"})
        if "expires" in enqueue:
            q.enqueue("controlled", expires=enqueue["expires"])
        jobs = q.dequeue_many(n + 1)
        return lambda: q.release_many(jobs, keep=1 if n == 1 else 0)

    return keys, prepare


RELEASE_PATHS = {
    "one": _release(RELEASE_KEYS),
    "hundred": _release(RELEASE_KEYS, 100),
    "slot": _release(SLOT_KEYS, group="a"),
    "control": _release(CONTROL_KEYS, expires=30),
}


@pytest.fixture
def queue(server: RedisServer, queue_name: str) -> Iterator[Queue]:
    with Queue(queue_name, server.url, lease=10) as q:
        yield q


@pytest.fixture
def raw(server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(server.url)
    yield client
    client.close()


def _fails_naming(q: Queue, raw: redis.Redis, part: str, call: Callable[[], Any]) -> None:
    key = q.keys.prefix + part
    raw.delete(key)
    raw.set(key, "garbage")
    before = keys_of(raw, q)
    try:
        with pytest.raises(CorruptQueue, match=re.escape(key) + " holds a string"):
            call()
        assert keys_of(raw, q) == before
    finally:
        # the session's server is shared: a queue left corrupt would be read (and
        # reported) by every later reader of the whole namespace (dashboard, stats)
        raw.delete(key)


@pytest.mark.parametrize("part", DEQUEUE_KEYS)
@pytest.mark.parametrize("path", DEQUEUE_PATHS)
def test_dequeue_fails_naming_the_key_and_changes_nothing(
    queue: Queue, raw: redis.Redis, path: str, part: str
) -> None:
    _fails_naming(queue, raw, part, DEQUEUE_PATHS[path](queue))


@pytest.mark.parametrize("part", DEQUEUE_KEYS)
def test_dequeue_firing_a_schedule_tick_fails_naming_the_key_and_changes_nothing(
    server: RedisServer, queue_name: str, queue: Queue, raw: redis.Redis, part: str
) -> None:
    app = durq.App(server.url, default_queue=queue_name)

    @app.task(name="tick")
    def tick() -> None:
        pass

    app.schedule("hb", "tick", every=0.1)
    app.sync_schedules()
    time.sleep(0.15)
    try:
        _fails_naming(queue, raw, part, queue.dequeue)
        raw.delete(queue.keys.prefix + part)  # the queue held nothing else there
        job = queue.dequeue()
        assert job is not None and job.payload[0] == "tick"  # the tick was due
    finally:
        app.close()


@pytest.mark.parametrize(
    ("path", "part"), [(path, part) for path, (keys, _) in RELEASE_PATHS.items() for part in keys]
)
def test_release_fails_naming_the_key_and_changes_nothing(
    queue: Queue, raw: redis.Redis, path: str, part: str
) -> None:
    _fails_naming(queue, raw, part, RELEASE_PATHS[path][1](queue))


# the keys a single plain enqueue (enqueue_single.lua) reads or writes: into an idle
# queue, whose default group it offers to the rotation, and into one that has work
SINGLE_PATHS: dict[str, tuple[list[str], Callable[[Queue], Any]]] = {
    "idle": (["jobs", "done", "rrset", "rr", "pending"], lambda q: None),
    "busy": (["jobs", "done", "rrset", "pending"], lambda q: q.enqueue("first")),
}


@pytest.mark.parametrize(
    ("path", "part"), [(path, part) for path, (keys, _) in SINGLE_PATHS.items() for part in keys]
)
def test_single_enqueue_fails_naming_the_key_and_changes_nothing(
    queue: Queue, raw: redis.Redis, path: str, part: str
) -> None:
    SINGLE_PATHS[path][1](queue)
    _fails_naming(queue, raw, part, lambda: queue.enqueue("x", id="job-1"))
    assert queue.enqueue("x", id="job-1").created  # nothing of it was left behind


@pytest.mark.parametrize("part", SINGLE_PATHS["idle"][0])
def test_task_enqueue_fails_naming_the_key_and_changes_nothing(
    server: RedisServer, queue_name: str, queue: Queue, raw: redis.Redis, part: str
) -> None:
    app = durq.App(server.url)

    @app.task(queue=queue_name)
    def add(i: int) -> None:
        pass

    try:
        _fails_naming(queue, raw, part, lambda: add.enqueue(1))
        assert add.enqueue(2).status is durq.EnqueueStatus.CREATED
    finally:
        app.close()
