"""Task timeouts: an async run is cancelled, a sync run is abandoned (its thread
replaced); either way the job counts as failed and the worker keeps working."""

from __future__ import annotations

import durq
from helpers import eventually
from worker.support import ExecLog, running_worker


def test_an_async_task_past_its_timeout_is_cancelled_and_reported_failed(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    with running_worker(app) as worker:
        handle = app.tasks["slow_async"].enqueue(str(exec_log), "slow", 30.0)
        eventually(lambda: queue.stats().dead == 1, 10)
        assert exec_log.count("cancelled") == 1
        assert exec_log.count("finish") == 0
        assert worker._executor.threads.abandoned == 0

    info = queue.job(handle.id)
    assert info is not None and info.reason is not None
    assert info.reason["reason"] == "timeout"
    assert "over its timeout of 0.3 s" in info.reason["message"]
    cancelled_after = exec_log.events("cancelled")[0]["time"] - exec_log.events("start")[0]["time"]
    # the timeout's clock starts a moment before the task's first line records "start"
    assert 0.28 <= cancelled_after < 2.0


def test_a_sync_task_past_its_timeout_is_failed_and_the_worker_keeps_its_full_concurrency(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    with running_worker(app, concurrency=1) as worker:
        handle = app.tasks["slow_sync"].enqueue(str(exec_log), "stuck", 3.0)
        eventually(lambda: queue.stats().dead == 1, 10)
        assert worker._executor.threads.abandoned == 1
        # with one slot, these can only run in the thread that replaced the stuck one
        app.tasks["work"].enqueue_many([(str(exec_log), f"next-{i}") for i in range(5)])
        eventually(lambda: exec_log.count("finish") == 5, 5)
        assert exec_log.count("finish", "stuck") == 0, "ran while the stuck call still slept"

    info = queue.job(handle.id)
    assert info is not None and info.reason is not None
    assert info.reason["reason"] == "timeout"
    assert "its thread was abandoned and replaced" in info.reason["message"]
    assert queue.stats().completed == 5


def test_the_late_return_of_an_abandoned_sync_call_changes_nothing(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    with running_worker(app, concurrency=1):
        app.tasks["slow_sync"].enqueue(str(exec_log), "late", 0.8)
        eventually(lambda: exec_log.count("finish", "late") == 1, 10)
        app.tasks["work"].enqueue(str(exec_log), "after")
        eventually(lambda: exec_log.count("finish", "after") == 1, 5)

    stats = queue.stats()
    assert (stats.dead, stats.completed, stats.size) == (1, 1, 0)
