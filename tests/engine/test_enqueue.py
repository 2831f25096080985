"""Enqueue: statuses, ids, payloads, options, batches."""

from __future__ import annotations

from typing import Any

import pytest

from durq import EnqueueStatus, JobState, Message
from durq.protocol.calls import MAX_BATCH


async def test_an_enqueued_job_is_created_pending_and_comes_back_with_its_payload(q: Any) -> None:
    result = await q.enqueue({"to": "ada@example.com", "n": [1, 2.5, None, True]})
    assert result.status is EnqueueStatus.CREATED
    assert result.created
    assert result.superseded is None
    info = await q.job(result.id)
    assert info.state is JobState.PENDING
    assert info.attempts == 0
    assert info.max_attempts == 5
    job = await q.dequeue()
    assert job.id == result.id
    assert job.queue == q.name
    assert job.payload == {"to": "ada@example.com", "n": [1, 2.5, None, True]}
    assert (job.attempt, job.deliveries) == (1, 1)


async def test_random_ids_are_distinct_sixteen_character_strings(q: Any) -> None:
    results = await q.enqueue_many(range(200))
    ids = [r.id for r in results]
    assert len(set(ids)) == 200
    assert all(len(i) == 16 and i.isascii() for i in ids)


async def test_bytes_payloads_are_stored_as_they_are(q: Any) -> None:
    blob = bytes(range(256)) * 3
    await q.enqueue(blob)
    job = await q.dequeue()
    assert job.payload == blob
    assert job.data == blob


async def test_enqueueing_an_existing_id_again_changes_nothing(q: Any) -> None:
    first = await q.enqueue("first", id="order-17")
    again = await q.enqueue("second", id="order-17")
    assert first.status is EnqueueStatus.CREATED
    assert again.status is EnqueueStatus.EXISTS
    assert again.id == "order-17"
    assert not again.created
    assert (await q.stats()).pending == 1
    assert (await q.dequeue()).payload == "first"
    assert await q.dequeue() is None


async def test_an_id_in_use_by_an_active_delayed_or_dead_job_is_taken(q: Any) -> None:
    await q.enqueue("a", id="active")
    await q.enqueue("d", id="delayed", delay=60)
    await q.enqueue("x", id="dead", max_attempts=1)
    job_a = await q.dequeue()
    job_x = await q.dequeue()
    await q.requeue(job_x, reason="boom")
    for job_id in ("active", "delayed", "dead"):
        assert (await q.enqueue("again", id=job_id)).status is EnqueueStatus.EXISTS
    assert job_a.id == "active"


async def test_enqueue_many_returns_one_result_per_item_in_order(q: Any) -> None:
    results = await q.enqueue_many(
        ["plain", Message("own id", id="m-1"), Message("later", delay=30)], priority=2
    )
    assert [r.status for r in results] == [EnqueueStatus.CREATED] * 3
    assert results[1].id == "m-1"
    assert (await q.job(results[2].id)).state is JobState.DELAYED
    assert (await q.job(results[0].id)).priority == 2


async def test_message_options_override_the_batch_defaults(q: Any) -> None:
    results = await q.enqueue_many(
        [Message("mine", priority=-3, max_attempts=9, group="g2"), "default"],
        priority=4,
        max_attempts=2,
        group="g1",
    )
    mine, default = [await q.job(r.id) for r in results]
    assert (mine.priority, mine.max_attempts, mine.group) == (-3, 9, "g2")
    assert (default.priority, default.max_attempts, default.group) == (4, 2, "g1")


async def test_enqueue_many_of_nothing_returns_nothing(q: Any) -> None:
    assert await q.enqueue_many([]) == []
    assert await q.enqueue_many(iter(())) == []


async def test_a_batch_larger_than_one_script_call_is_enqueued_whole_and_in_order(q: Any) -> None:
    n = MAX_BATCH * 2 + 7
    results = await q.enqueue_many(range(n))
    assert len(results) == n
    assert all(r.created for r in results)
    assert (await q.stats()).pending == n
    jobs = await q.dequeue_many(n + 5)
    assert [j.payload for j in jobs] == list(range(n))


async def test_a_batch_with_a_repeated_id_creates_it_once(q: Any) -> None:
    results = await q.enqueue_many([Message(1, id="dup"), Message(2, id="dup")])
    assert [r.status for r in results] == [EnqueueStatus.CREATED, EnqueueStatus.EXISTS]
    assert [j.payload for j in await q.dequeue_many(5)] == [1]


async def test_the_queue_default_max_attempts_applies_unless_given(make_q: Any) -> None:
    q = make_q(max_attempts=3)
    default = await q.enqueue(1)
    given = await q.enqueue(2, max_attempts=7)
    assert (await q.job(default.id)).max_attempts == 3
    assert (await q.job(given.id)).max_attempts == 7


@pytest.mark.parametrize(
    "payload",
    [0, -1.5, "", "ünïcødé ✓", [], {}, None, False, {"nested": {"deep": [[[1]]]}}, 2**63 - 1],
)
async def test_json_values_round_trip_exactly(q: Any, payload: Any) -> None:
    await q.enqueue(payload)
    assert (await q.dequeue()).payload == payload


async def test_tuples_come_back_as_lists(q: Any) -> None:
    await q.enqueue((1, (2, 3)))
    assert (await q.dequeue()).payload == [1, [2, 3]]


async def test_the_msgpack_serializer_round_trips_bytes_inside_structures(make_q: Any) -> None:
    q = make_q(serializer="msgpack")
    await q.enqueue({"blob": b"\x00\xff", "n": 3})
    assert (await q.dequeue()).payload == {"blob": b"\x00\xff", "n": 3}


async def test_a_pickled_payload_is_refused_by_a_queue_that_did_not_choose_pickle(
    make_q: Any,
) -> None:
    from durq import PayloadRefused

    pickler = make_q(serializer="pickle")
    plain = make_q()
    await pickler.enqueue({1, 2, 3})
    job = await plain.dequeue()
    with pytest.raises(PayloadRefused, match="pickle"):
        _ = job.payload
    assert job.data  # the raw bytes stay available
    await plain.requeue(job, delay=0)
    assert (await pickler.dequeue()).payload == {1, 2, 3}


async def test_a_single_enqueue_stores_the_record_a_batch_stores(q: Any, raw: Any) -> None:
    # one job goes through enqueue_single.lua, several through enqueue_plain.lua
    single = await q.enqueue({"n": 1})
    batch = await q.enqueue_many([{"n": 1}, {"n": 1}])
    records = [raw.hget(q.keys.prefix + "jobs", r.id) for r in (single, *batch)]
    # equal but for enqueued_at (I6 at bytes 14-19 of the header, lib/core/record_layout.lua)
    assert len({rec[:14] + rec[20:] for rec in records}) == 1
    stats = await q.stats()
    assert (stats.pending, stats.enqueued) == (3, 3)
    assert [j.id for j in await q.dequeue_many(3)] == [single.id, *(r.id for r in batch)]


async def test_a_single_enqueue_of_a_taken_id_exists_and_changes_nothing(q: Any) -> None:
    first = await q.enqueue("a", id="job-1")
    again = await q.enqueue("b", id="job-1")
    assert (first.status, again.status) == (EnqueueStatus.CREATED, EnqueueStatus.EXISTS)
    assert again.id == "job-1"
    assert (await q.stats()).enqueued == 1
    assert (await q.dequeue()).payload == "a"
