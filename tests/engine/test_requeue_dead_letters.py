"""Requeue, retries, dead letters with reasons, replay and purge."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from durq import JobState, Message, Outcome, fixed
from durq.protocol.calls import CHUNK
from engine.support import server_time


async def test_a_requeued_job_comes_back_with_its_attempt_counted(q: Any) -> None:
    await q.enqueue("x")
    job = await q.dequeue()
    assert await q.requeue(job, reason="flaky", delay=0) is Outcome.RETRYING
    again = await q.dequeue()
    assert again.id == job.id
    assert (again.attempt, again.deliveries) == (2, 2)
    info = await q.job(job.id)
    assert info.failures == 1
    assert info.reason["message"] == "flaky"
    assert info.reason["attempt"] == 1
    stats = await q.stats()
    assert (stats.failed, stats.retried) == (1, 1)


async def test_a_retried_job_goes_back_to_the_head_of_the_queue(q: Any) -> None:
    await q.enqueue_many(["a", "b", "c"])
    job = await q.dequeue()
    await q.requeue(job, delay=0)
    assert [(await q.dequeue()).payload for _ in range(3)] == ["a", "b", "c"]


async def test_the_queue_backoff_sets_the_retry_delay(make_q: Any, raw: Any) -> None:
    q = make_q(backoff=fixed(0.2))
    await q.enqueue("x")
    job = await q.dequeue()
    now = server_time(raw)
    await q.requeue(job)
    info = await q.job(job.id)
    assert info.state is JobState.DELAYED
    assert info.due_at == pytest.approx(now + 0.2, abs=0.05)
    assert await q.dequeue() is None
    again = await q.dequeue(wait=1)
    assert again is not None and again.attempt == 2


async def test_a_job_is_dead_lettered_with_its_reason_after_max_attempts(q: Any) -> None:
    await q.enqueue({"n": 1}, max_attempts=3, id="doomed")
    for attempt in (1, 2, 3):
        job = await q.dequeue()
        assert job.attempt == attempt
        status = await q.requeue(job, reason={"error": "ValueError", "detail": attempt}, delay=0)
    assert status is Outcome.DEAD
    assert await q.dequeue() is None
    (dead,) = await q.dead_letters()
    assert dead.id == "doomed"
    assert dead.state is JobState.DEAD
    assert (dead.attempts, dead.failures, dead.max_attempts) == (3, 3, 3)
    assert dead.reason == {"error": "ValueError", "detail": 3, "attempt": 3, "reason": "failed"}
    assert dead.payload() == {"n": 1}
    assert dead.died_at is not None
    stats = await q.stats()
    assert (stats.dead, stats.dead_lettered, stats.failed, stats.retried) == (1, 1, 3, 2)


async def test_dead_true_dead_letters_at_once(q: Any) -> None:
    await q.enqueue("x", max_attempts=10)
    job = await q.dequeue()
    assert await q.requeue(job, reason="unrecoverable", dead=True) is Outcome.DEAD
    (dead,) = await q.dead_letters()
    assert dead.attempts == 1
    assert dead.reason["message"] == "unrecoverable"


async def test_requeue_many_takes_per_job_reasons_delays_and_dead_flags(q: Any) -> None:
    await q.enqueue_many(["a", "b", "c"])
    jobs = await q.dequeue_many(3)
    statuses = await q.requeue_many(
        jobs, reason=["ra", "rb", "rc"], delay=[0, 60, 0], dead=[False, False, True]
    )
    assert statuses == [Outcome.RETRYING, Outcome.RETRYING, Outcome.DEAD]
    assert (await q.job(jobs[0].id)).state is JobState.PENDING
    assert (await q.job(jobs[1].id)).state is JobState.DELAYED
    assert (await q.job(jobs[2].id)).reason["message"] == "rc"


async def test_dead_letters_are_listed_newest_first_and_paged(q: Any) -> None:
    await q.enqueue_many([Message(i, id=f"d{i}") for i in range(5)], max_attempts=1)
    for _ in range(5):
        await q.requeue(await q.dequeue(), reason="x")
    assert [d.id for d in await q.dead_letters()] == ["d4", "d3", "d2", "d1", "d0"]
    assert [d.id for d in await q.dead_letters(limit=2, offset=1)] == ["d3", "d2"]
    assert await q.dead_letters(offset=10) == []


async def test_replaying_one_dead_letter_puts_it_back_with_fresh_attempts(q: Any) -> None:
    await q.enqueue("x", id="one", max_attempts=1)
    await q.requeue(await q.dequeue(), reason="boom")
    assert await q.replay("one") == 1
    assert await q.dead_letters() == []
    info = await q.job("one")
    assert (info.state, info.attempts, info.reason) == (JobState.PENDING, 0, None)
    job = await q.dequeue()
    assert (job.id, job.attempt) == ("one", 1)
    assert (await q.stats()).replayed == 1


async def test_replay_goes_to_the_tail_and_only_touches_dead_letters(q: Any) -> None:
    await q.enqueue_many([Message("d1", id="d1"), Message("d2", id="d2")], max_attempts=1)
    for _ in range(2):
        await q.requeue(await q.dequeue(), reason="x")
    await q.enqueue("waiting", id="w")
    assert await q.replay(["d2", "w", "missing"]) == 1
    assert [(await q.dequeue()).payload for _ in range(2)] == ["waiting", "d2"]
    assert [d.id for d in await q.dead_letters()] == ["d1"]


async def test_replay_all_replays_every_dead_letter_oldest_first(q: Any) -> None:
    await q.enqueue_many([Message(i, id=f"j{i}") for i in range(4)], max_attempts=1)
    for _ in range(4):
        await q.requeue(await q.dequeue(), reason="x")
    assert await q.replay_all() == 4
    assert [(await q.dequeue()).payload for _ in range(4)] == [0, 1, 2, 3]
    assert await q.replay_all() == 0


async def test_purge_deletes_dead_letters_for_good(q: Any) -> None:
    await q.enqueue_many([Message(i, id=f"p{i}") for i in range(3)], max_attempts=1)
    for _ in range(3):
        await q.requeue(await q.dequeue(), reason="x")
    assert await q.purge("p1") == 1
    assert await q.purge(["p1", "nope"]) == 0
    assert await q.job("p1") is None
    assert await q.purge_all() == 2
    assert await q.dead_letters() == []
    stats = await q.stats()
    assert (stats.dead, stats.purged) == (0, 3)


async def test_purge_never_touches_a_job_that_is_not_dead(q: Any) -> None:
    await q.enqueue("alive", id="alive")
    assert await q.purge("alive") == 0
    assert (await q.dequeue()).id == "alive"


async def test_the_dead_letter_cap_evicts_the_oldest(q: Any) -> None:
    await q.configure(dead_cap=2)
    await q.enqueue_many([Message(i, id=f"c{i}") for i in range(4)], max_attempts=1)
    for _ in range(4):
        await q.requeue(await q.dequeue(), reason="x")
    assert [d.id for d in await q.dead_letters()] == ["c3", "c2"]
    assert await q.job("c0") is None
    assert (await q.stats()).dead_evicted == 2


async def test_a_lowered_dead_letter_cap_evicts_over_calls_but_never_grows_past_it(
    q: Any,
) -> None:
    """Issue 30 bug 10: each dead-lettering evicted up to 100, so one requeue of a batch
    of 1,000 jobs could evict 100,000 in one call. A call now evicts one per
    dead-lettering (the set never grows) and 100 more at most."""
    await q.enqueue_many([Message(i, id=f"c{i:04}") for i in range(511)], max_attempts=1)
    jobs = await q.dequeue_many(511)
    await q.requeue_many(jobs[:400], dead=True)  # 400 dead letters, no cap yet
    await q.configure(dead_cap=100)  # 300 too many
    todo = jobs[400:]
    # each batch is one call: one eviction per death, and 100 more at most
    assert CHUNK["requeue"] >= 60
    for batch, (dead, evicted) in [(50, (300, 150)), (60, (200, 310)), (1, (100, 411))]:
        now, todo = todo[:batch], todo[batch:]
        await q.requeue_many(now, dead=True)
        stats = await q.stats()
        assert (stats.dead, stats.dead_evicted) == (dead, evicted)
    assert [d.id for d in await q.dead_letters(limit=1)] == ["c0510"]
    assert await q.job("c0000") is None


async def test_a_delayed_retry_is_not_handed_out_before_its_delay(q: Any) -> None:
    await q.enqueue("x")
    await q.requeue(await q.dequeue(), delay=0.2)
    assert (await q.stats()).delayed == 1
    assert await q.dequeue() is None
    await asyncio.sleep(0.25)
    assert (await q.dequeue()).attempt == 2


@pytest.mark.parametrize("dead", [False, True])
async def test_a_failure_result_is_stored_only_when_the_job_dies(q: Any, dead: bool) -> None:
    from durq.protocol import lifecycle

    await q.enqueue("x", id="res")
    job = await q.dequeue()
    await q._run(
        lifecycle.requeue(q.keys, [(job, 0, b'{"reason":"x"}', dead)], results=[b"failed!"])
    )
    assert await q.wait_result("res", 0) == (b"failed!" if dead else None)
