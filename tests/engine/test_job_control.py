"""Job control in the engine: cancel, progress, expiry and the dedup modes throttle,
debounce and keep-last, through each front end on each server (docs/job-control.md)."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import orjson
import pytest

from durq import CancelStatus, InvalidArgument, JobState, LeaseLost, Message, Outcome, Topic
from durq.models import EnqueueStatus
from durq.protocol import limits as limit_ops
from durq.protocol.status import Status
from engine.support import expire


async def _result(q: Any, job_id: str) -> dict[str, Any]:
    raw = await q.wait_result(job_id, 0.01)
    assert raw is not None, "no outcome stored"
    value: dict[str, Any] = orjson.loads(raw)
    return value


# -- cancel ---------------------------------------------------------------------------


async def test_a_cancelled_pending_job_is_never_delivered_and_its_key_is_freed(q: Any) -> None:
    first = await q.enqueue("a", key="k")
    prio = await q.enqueue("b", priority=5)
    plain = await q.enqueue("c")
    results = await q.cancel([first.id, prio.id])
    assert [(r.status, r.state) for r in results] == [
        (CancelStatus.CANCELLED, JobState.PENDING),
        (CancelStatus.CANCELLED, JobState.PENDING),
    ]
    again = await q.enqueue("a2", key="k")
    assert again.status is EnqueueStatus.CREATED  # the key was freed
    got = [j.payload for j in await q.dequeue_many(10)]
    assert got == ["c", "a2"]
    stats = await q.stats()
    assert (stats.cancelled, stats.pending) == (2, 0)
    info = await q.job(first.id)
    assert info.state is JobState.CANCELLED and info.data == b""
    assert info.reason["reason"] == "cancelled"
    assert (await _result(q, first.id))["error"]["reason"] == "cancelled"
    assert plain.id in {r.id for r in await q.cancel([plain.id])}


async def test_a_cancelled_delayed_or_backing_off_job_is_never_delivered(q: Any, raw: Any) -> None:
    await q.configure(group_limit=1)
    later = await q.enqueue("later", delay=60)
    await q.enqueue("x", group="g")
    job = await q.dequeue()
    await q.requeue(job, delay=60)  # backing off, holding its group's only slot
    await q.enqueue("y", group="g")
    assert await q.dequeue() is None  # the slot is held
    results = await q.cancel([later.id, job.id])
    assert [r.status for r in results] == [CancelStatus.CANCELLED] * 2
    assert results[1].state is JobState.DELAYED
    raw.zadd(q.keys.prefix + "delayed", {later.id: 0, job.id: 0}, xx=True)  # due, if listed
    assert [j.payload for j in await q.dequeue_many(10)] == ["y"]  # slot given back
    assert (await q.stats()).delayed == 0
    assert "next attempt" in (await q.job(job.id)).reason["message"]


@pytest.mark.parametrize("end", ["release", "requeue", "dead", "defer", "rate_limited", "lease"])
async def test_a_running_job_is_flagged_and_ends_cancelled_whatever_its_holder_says(
    q: Any, raw: Any, end: str
) -> None:
    await q.enqueue("x", key="k")
    job = await q.dequeue()
    (result,) = await q.cancel(job.id)
    assert (result.status, result.state) == (CancelStatus.CANCELLING, JobState.ACTIVE)
    assert (await q.cancel(job.id))[0].status is CancelStatus.CANCELLING  # idempotent
    assert (await q.job(job.id)).cancel_requested
    assert await q.extend_many([job]) == [Outcome.CANCELLED]  # the durable flag
    assert await q.progress(job, 0.5) is True
    if end == "release":
        assert await q.release_many([job], results=[b'"value"']) == [Outcome.CANCELLED]
    elif end in ("requeue", "dead"):
        assert await q.requeue_many([job], delay=0, dead=end == "dead") == [Outcome.CANCELLED]
    elif end == "defer":
        assert await q.defer_many([job]) == [Outcome.CANCELLED]
    elif end == "rate_limited":  # issue 30 bug 1: a RateLimited did undo the cancel
        assert await q._run(limit_ops.rate_limited(q.keys, [(job, 0.0, "group")])) == [
            Status.CANCELLED
        ]
    else:
        await expire(raw, q, job.id)
        assert await q.dequeue() is None
    info = await q.job(job.id)
    assert info.state is JobState.CANCELLED and not info.cancel_requested
    assert await q.dequeue() is None
    stats = await q.stats()
    assert (stats.cancelled, stats.completed, stats.retried, stats.dead) == (1, 0, 0, 0)
    assert (await _result(q, job.id))["error"]["reason"] == "cancelled"  # not "value"
    assert (await q.cancel(job.id))[0].status is CancelStatus.FINISHED


async def test_cancel_of_a_finished_or_unknown_job_changes_nothing(q: Any) -> None:
    done = await q.enqueue("done")
    await q.release(await q.dequeue())
    dead = await q.enqueue("dead")
    await q.requeue(await q.dequeue(), dead=True)
    results = await q.cancel([done.id, dead.id, "no-such-job"])
    assert [(r.status, r.state) for r in results] == [
        (CancelStatus.FINISHED, JobState.COMPLETED),
        (CancelStatus.FINISHED, JobState.DEAD),
        (CancelStatus.NOT_FOUND, None),
    ]
    assert (await q.stats()).cancelled == 0
    with pytest.raises(InvalidArgument):
        await q.cancel([""])


async def test_a_cancel_frees_a_key_only_while_it_points_to_the_job(q: Any, raw: Any) -> None:
    old = await q.enqueue("old", key="k")
    new = await q.enqueue("new", key="k", replace=True)
    assert new.status is EnqueueStatus.REPLACED
    assert (await q.cancel(old.id))[0].status is CancelStatus.FINISHED  # superseded
    assert raw.hget(q.keys.prefix + "keys", "k") == new.id.encode()


# -- progress -------------------------------------------------------------------------


async def test_progress_is_fenced_by_the_lease_token(q: Any, raw: Any) -> None:
    await q.enqueue("x")
    stale = await q.dequeue()
    assert await q.progress(stale, 0.25, {"step": "download"}) is False
    await expire(raw, q, stale.id)
    fresh = await q.dequeue()
    assert fresh.id == stale.id
    with pytest.raises(LeaseLost):
        await q.progress(stale, 0.9)
    await q.progress(fresh, 0.5)
    got = await q.read_progress(fresh.id)
    assert (got.fraction, got.info) == (0.5, None) and got.at > 0
    info = await q.job(fresh.id)
    assert info.progress == got
    await q.release(fresh)
    assert await q.read_progress(fresh.id) is None  # gone with the record


async def test_progress_of_a_failed_job_stays_with_its_dead_letter(q: Any) -> None:
    await q.enqueue("x")
    job = await q.dequeue()
    await q.progress(job, 0.75, "half way")
    await q.requeue(job, dead=True)
    assert (await q.job(job.id)).progress.info == "half way"
    assert await q.purge(job.id) == 1
    assert await q.read_progress(job.id) is None


@pytest.mark.parametrize("fraction", [-0.1, 1.5, float("nan"), "half", True])
async def test_a_bad_progress_report_is_refused(q: Any, fraction: Any) -> None:
    await q.enqueue("x")
    job = await q.dequeue()
    with pytest.raises(InvalidArgument):
        await q.progress(job, fraction)


# -- expiry ---------------------------------------------------------------------------


async def test_a_job_not_started_by_its_expiry_ends_expired_and_frees_its_key(q: Any) -> None:
    await q.enqueue("backlog")
    gone = await q.enqueue("late", expires=0.1, key="k")
    delayed = await q.enqueue("delayed", delay=0.05, expires=0.1)
    kept = await q.enqueue("kept", expires=30)
    await asyncio.sleep(0.15)
    assert [j.payload for j in await q.dequeue_many(10)] == ["backlog", "kept"]
    for job_id in (gone.id, delayed.id):
        info = await q.job(job_id)
        assert info.state is JobState.EXPIRED
        assert info.reason["reason"] == "expired" and info.reason["expires_at"] > 0
        assert (await _result(q, job_id))["error"]["reason"] == "expired"
    assert (await q.stats()).expired == 2
    assert (await q.job(kept.id)).expires_at is not None
    assert (await q.enqueue("again", key="k")).status is EnqueueStatus.CREATED


async def test_the_expiry_applies_to_every_start_retries_included(q: Any, raw: Any) -> None:
    await q.enqueue("x", expires=0.3)
    job = await q.dequeue()
    await q.requeue(job, delay=0)  # back at once: starts again in time
    job = await q.dequeue()
    assert job.attempt == 2
    await q.requeue(job, delay=0.4)
    await asyncio.sleep(0.45)
    assert await q.dequeue() is None
    assert (await q.job(job.id)).state is JobState.EXPIRED


@pytest.mark.parametrize(
    "options",
    [
        {"expires": -1},
        {"expires": 0},
        {"expires": datetime.datetime.now() - datetime.timedelta(seconds=5)},
        {"expires": 1, "delay": 2},
        {"expires": "soon"},
        {"ttl": -1, "key": "k"},
        {"ttl": 5},
        {"debounce": -0.5, "key": "k"},
        {"debounce": 1, "key": "k", "max_wait": 0.5},
        {"debounce": 1, "key": "k", "delay": 1},
        {"max_wait": 3, "key": "k"},
        {"keep_last": True},
        {"keep_last": True, "ttl": 1, "key": "k"},
        {"debounce": 1, "key": "k", "replace": True},
        {"debounce": 0.5, "key": "k", "max_wait": 5, "expires": 1},
        {"debounce": 0.5, "key": "k", "expires": 60},
    ],
)
async def test_bad_job_control_options_are_clear_errors_at_enqueue(
    local_q: Any, options: dict[str, Any]
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await local_q.enqueue("x", **options)
    assert str(caught.value)


async def test_an_expiry_as_a_datetime(q: Any) -> None:
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=30)
    job = await q.enqueue("x", expires=at)
    assert (await q.job(job.id)).expires_at == pytest.approx(at.timestamp(), abs=0.01)


# -- throttle, debounce, keep-last ------------------------------------------------------


async def test_throttle_allows_one_job_per_key_per_ttl(q: Any) -> None:
    first = await q.enqueue(1, key="k", ttl=0.3)
    await q.release(await q.dequeue())  # finished: the window still holds
    second = await q.enqueue(2, key="k", ttl=0.3)
    assert (second.status, second.id) == (EnqueueStatus.DEDUPLICATED, first.id)
    await asyncio.sleep(0.35)
    third = await q.enqueue(3, key="k", ttl=0.3)
    assert third.status is EnqueueStatus.CREATED
    await q.cancel(third.id)  # a cancel closes the window early
    assert (await q.enqueue(4, key="k", ttl=0.3)).status is EnqueueStatus.CREATED


async def test_debounce_runs_once_with_the_newest_arguments(q: Any) -> None:
    results = [await q.enqueue(i, key="k", debounce=0.2, max_wait=5) for i in range(5)]
    assert [r.status for r in results] == [EnqueueStatus.CREATED] + [EnqueueStatus.UPDATED] * 4
    assert len({r.id for r in results}) == 1
    assert await q.dequeue() is None
    await asyncio.sleep(0.25)
    assert [j.payload for j in await q.dequeue_many(10)] == [4]


async def test_debounce_is_bounded_by_max_wait(q: Any) -> None:
    first = await q.enqueue(0, key="k", debounce=0.3, max_wait=0.4)
    for i in range(1, 4):
        await asyncio.sleep(0.1)
        await q.enqueue(i, key="k", debounce=0.3, max_wait=0.4)
    info = await q.job(first.id)
    assert info.due_at - info.enqueued_at == pytest.approx(0.4, abs=0.01)


async def test_a_debounced_job_cannot_expire_before_its_latest_start(q: Any) -> None:
    """Issue 30 bug 9: debounce=0.5, max_wait=5, expires=1 was accepted; the burst's
    updates moved the start past the expiry and its newest arguments were dropped."""
    with pytest.raises(InvalidArgument, match="max_wait"):
        await q.enqueue(0, key="k", debounce=0.5, max_wait=5, expires=1)
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)
    with pytest.raises(InvalidArgument, match="max_wait"):
        await q.enqueue(0, key="k", debounce=0.5, max_wait=5, expires=at)
    with pytest.raises(InvalidArgument, match="needs max_wait"):
        await q.enqueue(0, key="k", debounce=0.5, expires=60)
    assert (await q.stats()).enqueued == 0
    # an expiry after the latest start: the burst runs once, with its newest arguments
    first = await q.enqueue(0, key="k", debounce=0.1, max_wait=0.3, expires=5)
    for i in range(1, 4):
        await asyncio.sleep(0.1)
        assert (await q.enqueue(i, key="k", debounce=0.1, max_wait=0.3, expires=5)).id == first.id
    await asyncio.sleep(0.35)
    assert [j.payload for j in await q.dequeue_many(10)] == [3]


async def test_keep_last_keeps_one_follow_up_with_the_newest_arguments(q: Any) -> None:
    first = await q.enqueue(1, key="k", keep_last=True)
    update = await q.enqueue(2, key="k", keep_last=True)  # not started: takes the args
    assert (update.status, update.id) == (EnqueueStatus.UPDATED, first.id)
    running = await q.dequeue()
    assert running.payload == 2
    follow = [await q.enqueue(i, key="k", keep_last=True) for i in range(3, 6)]
    assert [r.status for r in follow] == [EnqueueStatus.CREATED] + [EnqueueStatus.UPDATED] * 2
    assert (await q.job(follow[0].id)).waits_for == first.id
    assert await q.dequeue() is None  # the follow-up waits for the running job
    await q.requeue(running, delay=0)  # a retry is not the end: it still waits
    running = await q.dequeue()
    assert running.id == first.id
    assert await q.dequeue() is None
    await q.release(running)
    nxt = await q.dequeue()
    assert (nxt.id, nxt.payload) == (follow[0].id, 5)
    again = await q.enqueue(6, key="k", keep_last=True)  # the follow-up runs: waits again
    await q.requeue(nxt, dead=True)  # dead is an end too
    assert [j.id for j in await q.dequeue_many(10)] == [again.id]


async def test_a_cancelled_follow_up_gives_the_key_back_to_the_running_job(q: Any) -> None:
    await q.enqueue(1, key="k", keep_last=True)
    running = await q.dequeue()
    follow = await q.enqueue(2, key="k", keep_last=True)
    assert (await q.cancel(follow.id))[0].status is CancelStatus.CANCELLED
    after = await q.enqueue(3, key="k", keep_last=True)  # waits for the running job again
    assert after.status is EnqueueStatus.CREATED
    assert await q.dequeue() is None
    await q.cancel(running.id)
    await q.release(running)  # ends cancelled: the follow-up starts all the same
    assert [j.payload for j in await q.dequeue_many(10)] == [3]


def test_topics_refuse_job_control(redis_url: str, queue_name: str) -> None:
    with Topic(queue_name, redis_url) as topic, pytest.raises(InvalidArgument):
        topic.publish_many([Message("x", expires=5)])


async def test_job_control_data_goes_with_the_job(q: Any, raw: Any) -> None:
    ctl, progress = q.keys.prefix + "ctl", q.keys.prefix + "progress"
    released = await q.enqueue("a", expires=30)
    job = await q.dequeue()
    await q.progress(job, 0.5)
    assert raw.hexists(ctl, released.id) and raw.hexists(progress, released.id)
    await q.release(job)
    old = await q.enqueue("b", key="k", expires=30)
    await q.enqueue("c", key="k", replace=True)  # supersedes: dequeue discards the old one
    assert [j.payload for j in await q.dequeue_many(10)] == ["c"]
    for job_id in (released.id, old.id):
        assert not raw.hexists(ctl, job_id) and not raw.hexists(progress, job_id)
    assert raw.hlen(ctl) == 0
