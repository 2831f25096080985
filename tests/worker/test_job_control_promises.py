"""Promises of docs/job-control.md that need a worker and no other test showed: a
message on the cancel channel cancels nothing by itself, a progress report still
waiting when the job ends is written before its outcome, and an async task hears
LeaseLost at its next report (the promise -> test table is in docs/guarantees.md)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis

import durq
from helpers import eventually
from worker.support import running_worker

LEASE = 1.5


@pytest.fixture
def capp(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    app = durq.App(redis_url, default_queue=queue_name, lease=LEASE, max_attempts=3)
    yield app
    app.close()


def test_a_message_on_the_cancel_channel_from_anything_else_cancels_nothing(
    capp: durq.App, redis_url: str, queue_name: str
) -> None:
    started: list[str] = []

    @capp.task(result=True)
    async def hold() -> str:
        job = durq.current_job()
        assert job is not None
        started.append(job.id)
        await asyncio.sleep(0.8)
        return "done"

    channel = capp.queue(queue_name).keys.prefix + "cancel"
    client = redis.Redis.from_url(redis_url)
    try:
        with running_worker(capp):
            eventually(lambda: client.pubsub_numsub(channel)[0][1] == 1, 5, "the listener")
            handle = hold.enqueue()
            eventually(lambda: started, 5, "the job to start")
            client.publish(channel, handle.id)  # not through cancel(): no flag
            result: object = handle.result(timeout=5)
            assert result == "done"
    finally:
        client.close()
    stats = capp.queue(queue_name).stats()
    assert (stats.completed, stats.cancelled) == (1, 0)


def test_a_progress_report_still_waiting_when_the_job_ends_is_written_before_its_outcome(
    capp: durq.App, queue_name: str
) -> None:
    @capp.task(max_attempts=1)
    def reports_then_fails() -> None:
        job = durq.current_job()
        assert job is not None
        job.progress(0.1)  # written at once
        job.progress(0.9, "last")  # within the interval: waits for the next write
        raise durq.Fail("gives up")

    with running_worker(capp):
        handle = reports_then_fails.enqueue()
        eventually(lambda: capp.queue(queue_name).stats().dead == 1, 5, "the dead letter")
    info = handle.info()
    assert info is not None and info.state is durq.JobState.DEAD
    assert info.progress is not None and (info.progress.fraction, info.progress.info) == (
        0.9, "last"
    )  # fmt: skip


def test_an_async_task_hears_lease_lost_at_its_next_report(redis_url: str, queue_name: str) -> None:
    # a long lease: the lease keeper (which stops an async task whose lease it finds
    # lost) does not look during the test; the progress write finds it first
    capp = durq.App(redis_url, default_queue=queue_name, lease=30.0)
    queue = capp.queue(queue_name)
    heard: list[BaseException] = []

    @capp.task
    async def taken_over() -> None:
        job = durq.current_job()
        assert job is not None
        client = redis.Redis.from_url(redis_url)
        client.zadd(queue.keys.prefix + "active", {job.id: 0}, xx=True)  # its lease ran out
        client.close()
        other = queue.dequeue(lease=30)  # another consumer takes the job over
        assert other is not None and other.id == job.id
        job.progress(0.5)  # an async task does not wait for the write
        await asyncio.sleep(0.1)  # the write was refused meanwhile
        try:
            job.progress(0.6)
        except durq.LeaseLost as exc:
            heard.append(exc)

    with running_worker(capp):
        taken_over.enqueue()
        eventually(lambda: heard, 5, "LeaseLost")
        time.sleep(0.1)
    capp.close()
    assert isinstance(heard[0], durq.LeaseLost)


async def test_a_handles_cancel_of_a_job_the_queue_has_no_trace_of_raises_job_not_found(
    capp: durq.App, queue_name: str
) -> None:
    queue = capp.queue(queue_name)
    queue.configure(dedup_window=0)  # a finished job leaves no trace at all

    @capp.task
    def noop() -> None: ...

    handle = noop.enqueue()
    job = queue.dequeue()
    assert job is not None
    queue.release(job)
    with pytest.raises(durq.JobNotFound):
        handle.cancel()
    with pytest.raises(durq.JobNotFound):
        await handle.acancel()
    await capp.aclose()
