"""Dedup keys: deduplication while a job has not started, and superseding."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from durq import EnqueueStatus, JobState


async def test_a_second_job_with_the_key_of_a_waiting_job_is_deduplicated(q: Any) -> None:
    first = await q.enqueue("v1", key="user:7")
    second = await q.enqueue("v2", key="user:7")
    assert second.status is EnqueueStatus.DEDUPLICATED
    assert second.id == first.id
    assert not second.created
    assert [j.payload for j in await q.dequeue_many(5)] == ["v1"]
    assert (await q.stats()).deduplicated == 1


async def test_a_delayed_job_holds_its_key_too(q: Any) -> None:
    first = await q.enqueue("v1", key="k", delay=60)
    assert (await q.enqueue("v2", key="k")).id == first.id


async def test_once_a_job_has_started_its_key_is_free(q: Any) -> None:
    await q.enqueue("v1", key="k")
    started = await q.dequeue()
    second = await q.enqueue("v2", key="k")
    assert second.status is EnqueueStatus.CREATED
    assert second.id != started.id
    assert (await q.dequeue()).payload == "v2"


async def test_replace_supersedes_the_waiting_job(q: Any) -> None:
    old = await q.enqueue("old", key="cfg")
    new = await q.enqueue("new", key="cfg", replace=True)
    assert new.status is EnqueueStatus.REPLACED
    assert new.created
    assert new.superseded == old.id
    assert new.id != old.id
    info = await q.job(old.id)
    assert info.state is JobState.SUPERSEDED
    assert info.reason["by"] == new.id
    assert (await q.stats()).pending == 1
    assert [j.payload for j in await q.dequeue_many(5)] == ["new"]
    assert (await q.stats()).superseded == 1


async def test_a_superseded_job_is_discarded_and_its_record_freed(q: Any) -> None:
    await q.enqueue("a", key="k", id="old")
    await q.enqueue("b", key="k", replace=True)
    await q.dequeue_many(5)
    info = await q.job("old")
    assert info.data is None  # only its id is kept, for the dedup window


async def test_the_replacement_goes_to_the_tail(q: Any) -> None:
    await q.enqueue("x", key="k")
    await q.enqueue("y")
    await q.enqueue("x2", key="k", replace=True)
    assert [j.payload for j in await q.dequeue_many(5)] == ["y", "x2"]


async def test_replacing_a_delayed_or_prioritized_job_supersedes_it(q: Any) -> None:
    await q.enqueue("late", key="d", delay=60, id="late")
    await q.enqueue("hi", key="p", priority=5, id="hi")
    await q.enqueue("late2", key="d", replace=True)
    await q.enqueue("hi2", key="p", replace=True, priority=5)
    stats = await q.stats()
    assert (stats.delayed, stats.pending, stats.superseded) == (0, 2, 2)
    assert (await q.job("late")).state is JobState.SUPERSEDED
    assert sorted(j.payload for j in await q.dequeue_many(5)) == ["hi2", "late2"]


async def test_replace_with_no_waiting_job_just_creates(q: Any) -> None:
    result = await q.enqueue("x", key="fresh", replace=True)
    assert result.status is EnqueueStatus.CREATED
    assert result.superseded is None


async def test_the_id_of_a_superseded_job_stays_taken_while_it_is_listed(q: Any) -> None:
    await q.enqueue("a", key="k", id="old")
    await q.enqueue("b", key="k", replace=True)
    assert (await q.enqueue("c", id="old")).status is EnqueueStatus.EXISTS


async def test_keys_dedup_within_one_batch(q: Any) -> None:
    results = await q.enqueue_many(["a", "b", "c"], key="same")
    assert [r.status for r in results] == [
        EnqueueStatus.CREATED,
        EnqueueStatus.DEDUPLICATED,
        EnqueueStatus.DEDUPLICATED,
    ]
    assert {r.id for r in results} == {results[0].id}


async def test_a_deduplicated_key_does_not_outlive_its_job(q: Any) -> None:
    await q.configure(dedup_window=0.1)
    await q.enqueue("a", key="k")
    await q.release(await q.dequeue())
    await asyncio.sleep(0.12)
    assert (await q.enqueue("b", key="k")).status is EnqueueStatus.CREATED


@pytest.mark.parametrize("options", [{}, {"priority": 2}, {"delay": 30}], ids=str)
async def test_a_superseded_id_stays_taken_for_the_dedup_window_wherever_it_waited(
    q: Any, options: dict[str, Any]
) -> None:
    await q.enqueue("old", id="old", key="k", **options)
    await q.enqueue("new", key="k", replace=True)
    await q.dequeue_many(5)  # discards the superseded job, wherever it was listed
    assert (await q.enqueue("again", id="old")).status is EnqueueStatus.EXISTS


@pytest.mark.parametrize("options", [{}, {"priority": 2}, {"delay": 30}], ids=str)
async def test_a_superseded_id_is_free_once_the_dedup_window_after_its_enqueue_ends(
    q: Any, options: dict[str, Any]
) -> None:
    await q.configure(dedup_window=0.1)
    await q.enqueue("old", id="old", key="k", **options)
    await asyncio.sleep(0.12)
    await q.enqueue("new", key="k", replace=True)
    await q.dequeue_many(5)
    assert (await q.enqueue("again", id="old")).status is EnqueueStatus.CREATED


async def test_a_batch_frees_the_keys_its_jobs_hold_and_no_other(q: Any, raw: Any) -> None:
    # dequeue frees the started jobs' keys together (one HMGET, one HDEL per group turn)
    for i in range(5):
        await q.enqueue({"n": i}, key=f"k{i}")
    raw.hset(q.keys.prefix + "keys", "k3", "another-job")  # k3 held by someone else now
    assert len(await q.dequeue_many(5)) == 5
    assert raw.hgetall(q.keys.prefix + "keys") == {b"k3": b"another-job"}
    for i in (0, 1, 2, 4):
        assert (await q.enqueue({"n": i}, key=f"k{i}")).status is EnqueueStatus.CREATED


async def test_garbage_in_the_keys_hash_does_not_stop_keyed_jobs(q: Any, raw: Any) -> None:
    await q.enqueue_many(["a", "b"], key=None)
    await q.enqueue("c", key="k")
    raw.delete(q.keys.prefix + "keys")
    raw.set(q.keys.prefix + "keys", "garbage")
    assert sorted(j.payload for j in await q.dequeue_many(5)) == ["a", "b", "c"]
