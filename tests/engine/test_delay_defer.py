"""Delays and defers: not early, on time, and waking blocked consumers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from durq import JobState, Outcome
from engine.support import server_time
from helpers import SLACK

# A blocked consumer wakes at the server's timer ticks (hz 10 by default: 100 ms), so
# "on time" means within one tick after the due time, plus a round trip. That is the
# promise these tests check, so it does not take the suite's scheduling SLACK.
TICK = 0.1
ON_TIME = TICK + 0.05


async def test_a_delayed_job_is_not_handed_out_before_it_is_due(q: Any, raw: Any) -> None:
    result = await q.enqueue("later", delay=0.25)
    info = await q.job(result.id)
    assert info.state is JobState.DELAYED
    assert info.due_at == pytest.approx(info.enqueued_at + 0.25, abs=0.002)
    while server_time(raw) < info.due_at - 0.05:
        assert await q.dequeue() is None
        await asyncio.sleep(0.05)
    job = await q.dequeue(wait=1)
    assert job.payload == "later"
    assert server_time(raw) >= info.due_at


async def test_a_blocked_dequeue_wakes_for_a_delayed_job_at_its_due_time(q: Any, raw: Any) -> None:
    result = await q.enqueue("later", delay=0.2)
    due = (await q.job(result.id)).due_at
    job = await q.dequeue(wait=3)
    got_at = server_time(raw)
    assert job.id == result.id
    assert due <= got_at < due + ON_TIME


async def test_a_blocked_dequeue_wakes_for_a_delay_enqueued_while_it_waits(
    q: Any, raw: Any, server: Any
) -> None:
    from durq import Queue
    from engine.support import later

    other = Queue(q.name, server.url)
    try:
        # the consumer first plans to sleep for the whole wait; the new, earlier due
        # time must wake it to re-plan
        with later(0.1, lambda: other.enqueue("soon", delay=0.2)):
            start = time.monotonic()
            job = await q.dequeue(wait=3)
    finally:
        other.close()
    assert job.payload == "soon"
    assert 0.3 <= time.monotonic() - start < 0.3 + ON_TIME + 0.05


async def test_a_blocked_dequeue_wakes_when_a_lease_runs_out(q: Any, raw: Any) -> None:
    await q.enqueue("x")
    first = await q.dequeue(lease=0.2)
    again = await q.dequeue(wait=3)
    got_at = server_time(raw)
    assert again.id == first.id
    assert first.lease_deadline <= got_at < first.lease_deadline + ON_TIME


async def test_delayed_jobs_become_ready_in_due_order(q: Any) -> None:
    await q.enqueue("c", delay=0.15)
    await q.enqueue("a", delay=0.05)
    await q.enqueue("b", delay=0.1)
    await asyncio.sleep(0.2)
    assert [j.payload for j in await q.dequeue_many(3)] == ["a", "b", "c"]


async def test_a_due_job_joins_the_tail_behind_jobs_already_waiting(q: Any) -> None:
    await q.enqueue("delayed", delay=0.05)
    await asyncio.sleep(0.08)
    await q.enqueue("ready")
    # the delayed job became due first, but is promoted at this dequeue: behind "ready"
    assert [j.payload for j in await q.dequeue_many(2)] == ["ready", "delayed"]


async def test_a_deferred_job_gives_its_attempt_back(q: Any) -> None:
    await q.enqueue("x", max_attempts=1)
    job = await q.dequeue()
    await q.defer(job)
    again = await q.dequeue()
    assert (again.attempt, again.deliveries) == (1, 2)
    assert (await q.stats()).deferred == 1
    assert await q.requeue(again, delay=0) is Outcome.DEAD


async def test_a_deferred_job_returns_to_the_head(q: Any) -> None:
    await q.enqueue_many(["a", "b"])
    await q.defer(await q.dequeue())
    assert [(await q.dequeue()).payload for _ in range(2)] == ["a", "b"]


async def test_a_job_deferred_for_a_while_comes_back_when_due(q: Any, raw: Any) -> None:
    await q.enqueue("x")
    job = await q.dequeue()
    await q.defer(job, 0.3)
    info = await q.job(job.id)
    assert info.state is JobState.DELAYED
    assert await q.dequeue() is None
    again = await q.dequeue(wait=2)
    assert again.id == job.id
    assert server_time(raw) >= info.due_at


async def test_defer_many_takes_one_delay_per_job(q: Any) -> None:
    await q.enqueue_many(["a", "b"])
    jobs = await q.dequeue_many(2)
    assert await q.defer_many(jobs, [0, 60]) == [Outcome.OK, Outcome.OK]
    assert (await q.job(jobs[0].id)).state is JobState.PENDING
    assert (await q.job(jobs[1].id)).state is JobState.DELAYED


async def test_a_long_wait_is_cut_into_bounded_blocks_and_still_returns_the_job(
    q: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from durq.protocol import calls

    monkeypatch.setattr(calls, "MAX_BLOCK", 0.1)
    await q.enqueue("x", delay=0.25)
    start = time.monotonic()
    job = await q.dequeue(wait=2)
    assert job.payload == "x"
    assert time.monotonic() - start < 0.25 + SLACK


def _with_next_due(op: Any, next_ms: int) -> Any:
    """Drive ``op`` (a dequeue), but tell it after its first call that the next job is
    due in ``next_ms`` ms, as the server says when one is about to fall due."""
    request = next(op)
    reply = list((yield request))
    reply[2] = next_ms
    try:
        while True:
            request = op.send(reply)
            reply = yield request
    except StopIteration as stop:
        return stop.value


async def test_a_consumer_told_a_job_is_due_in_a_millisecond_does_not_hang(
    q: Any, server: Any
) -> None:
    """Redis 6.2 reads a 0.001 s block as 0 ms, which means forever."""
    from durq import Queue
    from durq.protocol import lifecycle
    from engine.support import later

    other = Queue(q.name, server.url)
    try:
        with later(2.0, lambda: other.enqueue("rescue")):  # ends a wait that never would
            start = time.monotonic()
            jobs = await q._run(_with_next_due(lifecycle.dequeue(q.keys, q.codec, 1, 5.0, 0.2), 1))
            elapsed = time.monotonic() - start
    finally:
        other.close()
    assert jobs == []
    assert elapsed < 0.2 + SLACK
