"""Release: completion, kept records, results, id retention."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from durq import EnqueueStatus, JobState, Outcome
from engine.support import server_time


async def test_a_released_job_is_gone_and_counted(q: Any) -> None:
    await q.enqueue("x")
    job = await q.dequeue()
    await q.release(job)
    stats = await q.stats()
    assert (stats.pending, stats.active, stats.completed) == (0, 0, 1)
    assert await q.dequeue() is None
    info = await q.job(job.id)  # a tombstone: finished, nothing else kept
    assert info.state is JobState.COMPLETED
    assert info.data is None


async def test_released_ids_stay_taken_for_the_dedup_window(q: Any) -> None:
    first = await q.enqueue("x", id="invoice-1")
    await q.release(await q.dequeue())
    again = await q.enqueue("x", id="invoice-1")
    assert again.status is EnqueueStatus.EXISTS
    assert again.id == first.id
    assert await q.dequeue() is None


async def test_an_id_is_free_again_once_the_dedup_window_after_its_enqueue_ends(q: Any) -> None:
    await q.configure(dedup_window=0.2)
    await q.enqueue("x", id="again")
    await q.release(await q.dequeue())
    assert (await q.enqueue("x", id="again")).status is EnqueueStatus.EXISTS
    await asyncio.sleep(0.25)
    assert (await q.enqueue("y", id="again")).status is EnqueueStatus.CREATED
    assert (await q.dequeue()).payload == "y"


async def test_with_no_dedup_window_a_released_id_is_free_at_once(q: Any) -> None:
    await q.configure(dedup_window=0)
    await q.enqueue("x", id="reuse")
    await q.release(await q.dequeue())
    assert await q.job("reuse") is None
    assert (await q.enqueue("y", id="reuse")).created


async def test_keep_retains_the_completed_record_for_inspection(q: Any, raw: Any) -> None:
    await q.enqueue({"k": 1}, id="kept")
    job = await q.dequeue()
    await q.release(job, keep=120)
    info = await q.job("kept")
    assert info.state is JobState.COMPLETED
    assert info.payload() == {"k": 1}
    assert info.attempts == 1
    assert info.retained_until > server_time(raw) + 100
    assert (await q.stats()).retained >= 1


async def test_kept_records_are_removed_when_their_retention_ends(q: Any) -> None:
    await q.configure(dedup_window=0)
    await q.enqueue("x", id="short")
    await q.release(await q.dequeue(), keep=0.1)
    assert (await q.job("short")).state is JobState.COMPLETED
    await asyncio.sleep(0.15)
    await q.dequeue()  # housekeeping runs with other operations
    assert await q.job("short") is None
    assert (await q.stats()).retained == 0


async def test_a_result_is_stored_with_the_release_and_can_be_awaited(q: Any) -> None:
    await q.enqueue("x", id="r1")
    job = await q.dequeue()
    await q.release(job, result={"answer": 42})
    assert orjson.loads(await q.wait_result("r1", 1)) == {"answer": 42}


async def test_release_many_releases_each_and_reports_each(q: Any) -> None:
    await q.enqueue_many(range(4))
    jobs = await q.dequeue_many(4)
    statuses = await q.release_many(jobs[:3])
    assert statuses == [Outcome.OK] * 3
    assert (await q.stats()).active == 1
    assert await q.release_many([]) == []


async def test_release_many_stores_one_result_per_job(q: Any) -> None:
    await q.enqueue_many(["a", "b"])
    jobs = await q.dequeue_many(2)
    await q.release_many(jobs, results=[b"first", None])
    assert await q.wait_result(jobs[0].id, 0) == b"first"
    assert await q.wait_result(jobs[1].id, 0) is None


async def test_release_many_replaces_stale_results_and_gives_each_its_ttl(q: Any, raw: Any) -> None:
    # one DEL for the batch's result keys (lib/core/result.lua, store_results): a list left
    # by an earlier job of the same id must not keep its old element
    ids = ["s1", "s2", "s3"]
    for job_id in ids[:2]:
        raw.rpush(q.keys.prefix + "result:" + job_id, b"stale")
    for job_id in ids:
        await q.enqueue({"n": job_id}, id=job_id)
    jobs = await q.dequeue_many(3)
    by_id = {j.id: j for j in jobs}
    ordered = [by_id[i] for i in ids]
    assert await q.release_many(ordered, results=[b"one", None, b"three"]) == [Outcome.OK] * 3
    assert raw.lrange(q.keys.prefix + "result:s1", 0, -1) == [b"one"]
    assert raw.lrange(q.keys.prefix + "result:s2", 0, -1) == [b"stale"]  # no result given
    assert raw.lrange(q.keys.prefix + "result:s3", 0, -1) == [b"three"]
    for job_id in ("s1", "s3"):
        assert 0 < raw.pttl(q.keys.prefix + "result:" + job_id) <= 3_600_000


async def test_a_kept_record_is_the_active_one_with_its_state_completed(q: Any, raw: Any) -> None:
    # release writes it from the peeked header and the unchanged tail (lib/core/record_peek.lua)
    await q.enqueue({"k": 1}, id="kept2", key="kk", group="g", priority=3)
    job = await q.dequeue()
    active = raw.hget(q.keys.prefix + "jobs", "kept2")
    await q.release(job, keep=60)
    kept = raw.hget(q.keys.prefix + "jobs", "kept2")
    assert kept[1] == 5  # ST_COMPLETED (lib/core/record_layout.lua)
    assert kept[:1] + kept[2:] == active[:1] + active[2:]
