"""A job's last failures, stored with it in a ring of 5 (requeue.lua,
lib/core/attempt_errors.lua):
what ``Queue.job`` returns in ``JobInfo.errors``, and ``durq job show`` and the
dashboard's job page show."""

from __future__ import annotations

from typing import Any

import pytest

from durq import CorruptQueue, JobState, Outcome


async def test_a_jobs_last_five_failures_are_kept_with_it_oldest_first(q: Any) -> None:
    await q.enqueue("x", max_attempts=10)
    for attempt in range(1, 8):
        job = await q.dequeue()
        reason = {"type": "ValueError", "message": f"bad {attempt}", "traceback": "tb " * 3000}
        assert await q.requeue(job, reason=reason, delay=0) is Outcome.RETRYING
    info = await q.job(job.id)
    assert [e["attempt"] for e in info.errors] == [3, 4, 5, 6, 7]
    assert [e["message"] for e in info.errors] == [f"bad {n}" for n in (3, 4, 5, 6, 7)]
    assert {e["type"] for e in info.errors} == {"ValueError"}
    assert info.errors[0]["at"] <= info.errors[-1]["at"]
    # the tail of a long traceback (where it was raised); the whole latest in the reason
    assert len(info.errors[-1]["traceback"]) == 4096
    assert len(info.reason["traceback"]) == len("tb " * 3000)


async def test_a_dead_letter_keeps_the_errors_of_its_attempts(q: Any) -> None:
    await q.enqueue("x", max_attempts=2, id="doomed")
    for attempt in (1, 2):
        job = await q.dequeue()
        status = await q.requeue(job, reason={"message": f"no {attempt}"}, delay=0)
    assert status is Outcome.DEAD
    info = await q.job("doomed")
    assert info.state is JobState.DEAD
    assert [(e["attempt"], e["message"]) for e in info.errors] == [(1, "no 1"), (2, "no 2")]


async def test_the_last_five_failures_stay_in_order_across_a_replay(q: Any) -> None:
    await q.enqueue("x", max_attempts=3, id="again")
    for run in ("first", "second"):
        for attempt in (1, 2, 3):
            job = await q.dequeue()
            await q.requeue(job, reason={"message": f"{run} {attempt}"}, delay=0)
        if run == "first":
            assert await q.replay(["again"]) == 1  # its attempts start again from 1
    info = await q.job("again")
    assert [e["message"] for e in info.errors] == [
        "first 2",
        "first 3",
        "second 1",
        "second 2",
        "second 3",
    ]
    assert [e["failure"] for e in info.errors] == [2, 3, 4, 5, 6]


async def test_a_job_that_never_failed_has_no_errors_and_no_error_key(q: Any, raw: Any) -> None:
    handle = await q.enqueue("x")
    await q.release(await q.dequeue())
    assert (await q.job(handle.id)).errors == ()
    assert not list(raw.scan_iter(match=q.keys.prefix + "errors:*"))


async def test_the_errors_expire_the_result_ttl_after_the_latest_failure(
    make_q: Any, raw: Any
) -> None:
    q = make_q(result_ttl=120)
    await q.enqueue("x", id="flaky")
    await q.requeue(await q.dequeue(), reason="once", delay=0)
    assert 110_000 < raw.pttl(q.keys.prefix + "errors:flaky") <= 120_000


async def test_an_error_ring_of_another_type_fails_the_requeue_and_changes_nothing(
    q: Any, raw: Any
) -> None:
    await q.enqueue("x", id="j")
    job = await q.dequeue()
    raw.set(q.keys.prefix + "errors:j", "not a hash")
    with pytest.raises(CorruptQueue, match="errors:j"):
        await q.requeue(job, reason="boom", delay=0)
    with pytest.raises(CorruptQueue, match="errors:j"):
        await q.job("j")
    raw.delete(q.keys.prefix + "errors:j")
    info = await q.job("j")
    assert (info.state, info.failures, info.errors) == (JobState.ACTIVE, 0, ())
