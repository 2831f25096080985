"""Jobs a worker cannot run at all (garbage payload, wrong arguments; an unknown task under
``unknown_task_grace=0``) are dead-lettered at once with the reason, and the worker keeps
running."""

from __future__ import annotations

from typing import Any

import pytest

import durq
from durq.worker import WorkerState
from helpers import eventually
from worker.support import ExecLog, running_worker


@pytest.mark.parametrize(
    ("payload", "reason", "message"),
    [
        (["no_such_task", [], {}], "unknown_task", "has run task no_such_task for 0 s"),
        (b"\x00\xffgarbage\x13", "malformed_payload", "not a durq task call"),
        ({"task": "work"}, "malformed_payload", "not a durq task call"),
        (["work", "not-a-list", {}], "malformed_payload", "not a durq task call"),
        (["work", [1, 2, 3, 4, 5], {}], "bad_arguments", "work(): too many positional"),
        (["add", [1], {"c": 2}], "bad_arguments", "add(): "),
    ],
    ids=["unknown-task", "raw-bytes", "json-object", "args-not-a-list", "too-many-args",
         "wrong-kwargs"],
)  # fmt: skip
def test_a_job_the_worker_cannot_run_is_dead_lettered_at_once_and_the_worker_goes_on(
    payload: Any, reason: str, message: str, app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    app.unknown_task_grace = 0  # an unknown task's job is not held (tests/deploy)
    with running_worker(app) as worker:
        bad = queue.enqueue(payload, max_attempts=5)
        eventually(lambda: queue.stats().dead == 1, 10)
        app.tasks["work"].enqueue(str(exec_log), "after")
        eventually(lambda: exec_log.count("finish") == 1, 10)
        assert worker.state is WorkerState.RUNNING

    (dead,) = queue.dead_letters()
    assert dead.id == bad.id
    assert dead.reason is not None
    assert dead.reason["reason"] == reason
    assert message in dead.reason["message"]
    assert (dead.attempts, dead.max_attempts) == (1, 5)
    assert queue.stats().retried == 0


@pytest.mark.parametrize(
    ("producer", "size", "reason", "message"),
    [
        # pickled by a client that may; the worker's JSON queue refuses to unpickle it
        ({"serializer": "pickle"}, 10, "undecodable_payload", "pickle"),
        # written by a producer with a larger limit (or by hand): the worker's holds
        ({"max_payload_bytes": 4 << 20}, 2 << 20, "payload_too_large", "at most 1048576"),
    ],
    ids=["pickled", "over-max-payload-bytes"],
)
def test_a_payload_the_worker_must_not_decode_is_dead_lettered_unread_and_not_run(
    producer: dict[str, Any],
    size: int,
    reason: str,
    message: str,
    app: durq.App,
    exec_log: ExecLog,
    queue_name: str,
    redis_url: str,
) -> None:
    assert app.max_payload_bytes == 1 << 20
    queue = app.queue(queue_name)
    with durq.Queue(queue_name, redis_url, **producer) as other:
        bad = other.enqueue(["work", [str(exec_log), "x" * size], {}])
    with running_worker(app) as worker:
        eventually(lambda: queue.stats().dead == 1, 10)
        app.tasks["work"].enqueue(str(exec_log), "after")
        eventually(lambda: exec_log.count("finish") == 1, 10)
        assert worker.state is WorkerState.RUNNING

    info = queue.job(bad.id)
    assert info is not None and info.reason is not None
    assert info.reason["reason"] == reason
    assert message in info.reason["message"]
    assert exec_log.keys("start") == ["after"]


def test_a_flood_of_bad_jobs_among_good_ones_does_not_stop_the_good_ones(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    good = app.tasks["work"]
    payloads: list[Any] = []
    for i in range(20):
        payloads.append(good.message(good.call(str(exec_log), f"good-{i}")))
        payloads.append(b"\x00junk" if i % 2 else ["missing_task", [i], {}])
    with running_worker(app, concurrency=4):
        queue.enqueue_many(payloads)
        # the jobs of a task the worker does not have wait for one that has it
        eventually(lambda: (s := queue.stats()).size == s.held, 10)

    assert sorted(exec_log.keys("finish")) == sorted(f"good-{i}" for i in range(20))
    stats = queue.stats()
    assert (stats.completed, stats.dead, stats.held) == (20, 10, 10)
