"""A sync task that meets a 429 after its cancel was asked (it still runs: sync code
cannot be interrupted, only told) ends cancelled, never runs again, and its scope still
pauses (issue 30, bug 1: RateLimited gave the job back and it completed later)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import durq
from helpers import eventually
from worker.apps import record
from worker.support import ExecLog, running_worker


def limited_after_cancel(log: str, key: str) -> str:
    """Wait for the cancel, then answer as if the upstream said 429; on a later
    delivery (there must be none) finish."""
    job = durq.current_job()
    assert job is not None
    record(log, "start", key)
    if job.deliveries == 1:
        give_up = time.monotonic() + 10
        while not job.cancelled and time.monotonic() < give_up:
            time.sleep(0.01)
        raise durq.RateLimited(0.5)
    record(log, "finish", key)
    return key


@pytest.fixture
def app(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    test_app = durq.App(redis_url, default_queue=queue_name, lease=1.5)
    test_app.task(result=True)(limited_after_cancel)
    yield test_app
    test_app.close()


def test_a_sync_task_rate_limited_after_its_cancel_ends_cancelled(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    with running_worker(app, concurrency=1, cancel_grace=5.0):
        handle = app.tasks["limited_after_cancel"].enqueue(str(exec_log), "x")
        eventually(lambda: exec_log.count("start") == 1, 5)
        assert handle.cancel().status is durq.CancelStatus.CANCELLING
        queue = app.queue(queue_name)
        eventually(lambda: queue.stats().cancelled == 1, 5, lambda: str(queue.stats()))
        time.sleep(1.5)  # past the pause: a job given back would have run again
    info = handle.info()
    assert info is not None and info.state is durq.JobState.CANCELLED
    assert exec_log.count("start") == 1 and exec_log.count("finish") == 0
    with pytest.raises(durq.Cancelled):
        handle.result(timeout=1)
    stats = queue.stats()
    assert (stats.cancelled, stats.completed) == (1, 0)
