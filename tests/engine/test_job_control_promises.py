"""Promises of docs/job-control.md that no other engine test showed, each through both
front ends (the promise -> test table is in docs/guarantees.md)."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import orjson
import pytest

from durq import CancelStatus, InvalidArgument, JobState
from durq.models import EnqueueStatus
from engine.support import expire


async def test_a_waiter_of_a_running_jobs_result_gets_cancelled_from_the_moment_of_the_cancel(
    q: Any,
) -> None:
    await q.enqueue("x")
    job = await q.dequeue()
    assert await q.wait_result(job.id, 0.01) is None  # running: no outcome yet
    assert (await q.cancel(job.id))[0].status is CancelStatus.CANCELLING
    raw = await q.wait_result(job.id, 0.01)  # the job still runs, its holder knows nothing
    assert raw is not None and orjson.loads(raw)["error"]["reason"] == "cancelled"


async def _held_by_another(q: Any) -> tuple[Any, str]:
    """Job A (key k) runs, which frees its key; job B takes the key, waiting behind a
    delay. Returns A's delivery and B's id."""
    await q.enqueue("a", key="k")
    a = await q.dequeue()
    b = await q.enqueue("b", key="k", delay=60)
    assert b.status is EnqueueStatus.CREATED
    return a, b.id


async def _holder_of_k(q: Any) -> str:
    again = await q.enqueue("c", key="k")
    assert again.status is EnqueueStatus.DEDUPLICATED
    return str(again.id)


@pytest.mark.parametrize("end", ["release", "dead", "cancel", "purge", "expiry"])
async def test_every_terminal_path_frees_a_key_only_while_it_points_to_the_job(
    q: Any, raw: Any, end: str
) -> None:
    a, b = await _held_by_another(q)
    if end == "release":
        await q.release(a)
    elif end == "dead":
        await q.requeue(a, dead=True)
    elif end == "cancel":
        await q.cancel(a.id)
        await q.release(a)
    elif end == "purge":
        await q.requeue(a, dead=True)
        assert await q.purge(a.id) == 1
    else:  # its retry expires before it starts again
        await q.enqueue("e", key="e", expires=0.2)
        e = await q.dequeue()
        await q.enqueue("f", key="e", delay=60)  # now holds the key
        await q.requeue(e, delay=0.3)
        await q.release(a)
        await asyncio.sleep(0.35)
        assert await q.dequeue() is None
        assert (await q.job(e.id)).state is JobState.EXPIRED
        assert (await q.enqueue("g", key="e")).status is EnqueueStatus.DEDUPLICATED
    assert await _holder_of_k(q) == b


async def test_discarding_a_superseded_job_frees_no_key_of_its_successor(q: Any) -> None:
    old = await q.enqueue("old", key="k")
    new = await q.enqueue("new", key="k", replace=True, delay=60)
    assert new.superseded == old.id
    assert await q.dequeue() is None  # passes the superseded id and discards it
    assert await _holder_of_k(q) == new.id


async def test_an_expiry_applies_to_a_replay_too(q: Any) -> None:
    await q.enqueue("x", expires=0.3)
    job = await q.dequeue()
    await q.requeue(job, dead=True)
    await asyncio.sleep(0.35)
    assert await q.replay(job.id) == 1
    assert await q.dequeue() is None
    info = await q.job(job.id)
    assert info.state is JobState.EXPIRED and info.reason["reason"] == "expired"


async def test_an_expiry_closes_a_throttle_window_early(q: Any) -> None:
    first = await q.enqueue(1, key="k", ttl=30, expires=0.1)
    await asyncio.sleep(0.15)
    assert await q.dequeue() is None
    assert (await q.job(first.id)).state is JobState.EXPIRED
    assert (await q.enqueue(2, key="k", ttl=30)).status is EnqueueStatus.CREATED


@pytest.mark.parametrize(
    "options",
    [
        {"ttl": 0, "key": "k"},
        {"debounce": 0, "key": "k"},
        {"debounce": 1, "max_wait": 0, "key": "k"},
        {"ttl": 1, "debounce": 1, "key": "k"},
        {"debounce": 1},
        {"ttl": 1},
    ],
    ids=["ttl-zero", "debounce-zero", "max-wait-zero", "two-modes", "no-key", "ttl-no-key"],
)
async def test_zero_windows_two_modes_and_modes_without_a_key_are_refused(
    local_q: Any, options: dict[str, Any]
) -> None:
    with pytest.raises(InvalidArgument):
        await local_q.enqueue("x", **options)


async def test_a_later_enqueue_changes_only_the_arguments_of_the_job(q: Any) -> None:
    first = await q.enqueue(1, key="k", keep_last=True, priority=3, max_attempts=2)
    again = await q.enqueue(2, key="k", keep_last=True, priority=9, max_attempts=7, group="g")
    assert (again.status, again.id) == (EnqueueStatus.UPDATED, first.id)
    job = await q.dequeue()
    assert (job.payload, job.priority, job.max_attempts, job.group) == (2, 3, 2, None)


async def test_a_keep_last_follow_up_is_listed_as_delayed_with_no_due_time(q: Any) -> None:
    await q.enqueue(1, key="k", keep_last=True)
    running = await q.dequeue()
    follow = await q.enqueue(2, key="k", keep_last=True)
    info = await q.job(follow.id)
    assert (info.state, info.due_at, info.waits_for) == (JobState.DELAYED, None, running.id)
    assert (await q.stats()).delayed == 1


async def test_a_lease_running_out_on_a_cancelled_job_ends_it_cancelled_and_starts_its_follow_up(
    q: Any, raw: Any
) -> None:
    await q.enqueue(1, key="k", keep_last=True)
    running = await q.dequeue()
    follow = await q.enqueue(2, key="k", keep_last=True)
    await q.cancel(running.id)
    await expire(raw, q, running.id)
    job = await q.dequeue()
    assert (job.id, job.payload) == (follow.id, 2)
    assert (await q.job(running.id)).state is JobState.CANCELLED


async def test_progress_info_is_small_json(q: Any) -> None:
    await q.enqueue("x")
    job = await q.dequeue()
    await q.progress(job, 0.5, {"rows": "r" * 16_000})
    with pytest.raises(InvalidArgument):
        await q.progress(job, 0.5, {"rows": "r" * 17_000})
    with pytest.raises(InvalidArgument):
        await q.progress(job, 0.5, {"not json": object()})
    assert (await q.read_progress(job.id)).info == {"rows": "r" * 16_000}


async def test_a_progress_kept_with_a_kept_record(q: Any) -> None:
    await q.enqueue("x")
    job = await q.dequeue()
    await q.progress(job, 1.0, "all")
    await q.release(job, keep=60)
    info = await q.job(job.id)
    assert info.state is JobState.COMPLETED and info.progress.info == "all"


async def test_a_cancelled_record_stays_for_the_dedup_window_and_no_longer(q: Any) -> None:
    await q.configure(dedup_window=0.2)
    job = await q.enqueue("x", delay=60)
    await q.cancel(job.id)
    info = await q.job(job.id)
    assert info.state is JobState.CANCELLED and info.reason["reason"] == "cancelled"
    assert (await q.enqueue("again", id=job.id)).status is EnqueueStatus.EXISTS
    await asyncio.sleep(0.25)
    await q.dequeue()  # any script that trims ended records
    assert (await q.enqueue("again", id=job.id)).status is EnqueueStatus.CREATED


async def test_a_naive_datetime_expiry_is_local_time(q: Any) -> None:
    at = datetime.datetime.now() + datetime.timedelta(seconds=30)  # naive: local time
    job = await q.enqueue("x", expires=at)
    assert (await q.job(job.id)).expires_at == pytest.approx(at.timestamp(), abs=0.01)
