"""Batches on the queue (durq.Batch's engine, issue 36): ``dequeue_batch`` and
``settle``, through both front ends, on both servers.

The worker's batches are tested in tests/worker/test_batches.py; what the rate limit
does to batches and to a blocking ``dequeue_many`` in tests/engine/test_batch_limits.py.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from durq import InvalidArgument, Message, Outcome, Settle
from durq.payloads import decode_result, encode_result
from durq.protocol import batches, record
from durq.protocol.calls import Sleep
from engine.support import keys_of


async def fill(q: Any, n: int, group: str | None = None, start: int = 0) -> None:
    await q.enqueue_many([Message({"i": i}, group=group) for i in range(start, start + n)])


async def test_a_batch_takes_up_to_max_size_items_and_leaves_the_rest(q: Any) -> None:
    await fill(q, 250)
    jobs = await q.dequeue_batch(100)
    assert [j.payload["i"] for j in jobs] == list(range(100))
    assert len({j.id for j in jobs}) == 100
    assert (await q.stats()).active == 100
    assert (await q.settle(jobs)) == [Outcome.OK] * 100
    stats = await q.stats()
    assert (stats.pending, stats.active, stats.completed) == (150, 0, 100)


async def test_settle_ends_each_item_its_own_way_in_one_call(q: Any, raw: Any) -> None:
    await fill(q, 6)
    jobs = await q.dequeue_batch(6)
    outcomes = [
        Settle.done(encode_result("ok")),
        Settle.retry(0, "try again"),
        Settle.retry(30, {"why": "later"}),
        Settle.dead("bad row"),
        Settle.defer(0),
        Settle.rate_limited(0),
    ]
    got = await q.settle(jobs, outcomes, cause="wait")
    assert got == [Outcome.OK, Outcome.RETRYING, Outcome.RETRYING, Outcome.DEAD, Outcome.OK,
                   Outcome.OK]  # fmt: skip
    stats = await q.stats()
    assert (stats.completed, stats.retried, stats.dead, stats.deferred) == (1, 2, 1, 1)
    assert (stats.pending, stats.delayed, stats.active) == (3, 1, 0)
    assert decode_result(await q.wait_result(jobs[0].id, 1)) == (True, "ok")
    dead = await q.dead_letters()
    assert [d.id for d in dead] == [jobs[3].id]
    assert dead[0].reason["message"] == "bad row"
    # the deferred and rate-limited items gave their attempt back; the retried kept it
    again = {j.id: j for j in await q.dequeue_batch(10)}
    assert again[jobs[1].id].attempt == 2
    assert again[jobs[4].id].attempt == again[jobs[5].id].attempt == 1


async def test_an_item_done_after_a_failure_leaves_no_reason_behind(q: Any, raw: Any) -> None:
    """A done item's reason goes with its record; a queue none of whose jobs has a
    reason has no reasons hash to delete from (settle.lua looks first)."""
    await fill(q, 3)
    jobs = await q.dequeue_batch(3)
    assert not raw.exists(q.keys.prefix + "reasons")
    await q.settle(jobs[:1], [Settle.retry(0, "try again")])
    assert raw.hexists(q.keys.prefix + "reasons", jobs[0].id)
    await q.settle(jobs[1:])  # no reason of theirs: the other item's stays
    assert raw.hkeys(q.keys.prefix + "reasons") == [jobs[0].id.encode()]
    (again,) = await q.dequeue_batch(3)
    assert (await q.settle([again])) == [Outcome.OK]
    assert not raw.exists(q.keys.prefix + "reasons")
    assert (await q.stats()).completed == 3


async def test_a_stale_token_is_refused_for_that_item_only(q: Any) -> None:
    await fill(q, 3)
    old = await q.dequeue_batch(3, lease=0.05)
    time.sleep(0.1)
    fresh = await q.dequeue_many(1)  # the leases ran out: reclaimed, one handed out again
    assert (await q.settle(old)) == [Outcome.LEASE_LOST] * 3
    rest = await q.dequeue_batch(3)
    assert {j.id for j in [*fresh, *rest]} == {j.id for j in old}
    stale = next(j for j in old if j.id == fresh[0].id)
    done = await q.settle([*rest, fresh[0], stale])
    assert done == [Outcome.OK, Outcome.OK, Outcome.OK, Outcome.LEASE_LOST]
    assert (await q.stats()).completed == 3


async def test_a_refused_settle_changes_nothing(q: Any, raw: Any) -> None:
    await fill(q, 4)
    jobs = await q.dequeue_batch(4)
    await q.settle(jobs[:2])
    before = keys_of(raw, q)
    stale = [jobs[0], jobs[1]]
    assert (await q.settle(stale, [Settle.dead("x"), Settle.retry(1)])) == [Outcome.LEASE_LOST] * 2
    assert keys_of(raw, q) == before


async def test_an_unknown_outcome_is_refused_before_anything_is_sent(q: Any) -> None:
    await fill(q, 2)
    jobs = await q.dequeue_batch(2)
    with pytest.raises(InvalidArgument):
        await q.settle(jobs, [Settle.done()])
    with pytest.raises(InvalidArgument):
        await q.settle(jobs, [Settle.done(), "done"])
    with pytest.raises(InvalidArgument):
        await q.settle(jobs, cause="bored")
    assert (await q.stats()).active == 2


@pytest.mark.parametrize("size", [0, 1001, True, 2.5])
async def test_a_batch_size_out_of_range_is_refused(local_q: Any, size: Any) -> None:
    with pytest.raises(InvalidArgument, match="max_size"):
        await local_q.dequeue_batch(size)


async def test_a_group_limit_counts_a_groups_items_in_a_batch_as_one_holder(
    q: Any, raw: Any
) -> None:
    await q.configure(group_limit=1)
    await fill(q, 30, group="a")
    await fill(q, 30, group="b", start=30)
    jobs = await q.dequeue_batch(100)
    # both groups, every item, one slot each (a call that a loaded server stops at its
    # time budget may come a few items short: they wait for the slot like any other)
    assert len(jobs) >= 50 and {j.group for j in jobs} == {"a", "b"}
    held = {k.decode(): int(v) for k, v in raw.hgetall(q.keys.prefix + "gactive").items()}
    assert held == {"a": 1, "b": 1}
    await fill(q, 5, group="a", start=60)
    assert await q.dequeue_batch(100) == []  # both slots are held by the running batch
    await q.settle(jobs)
    assert raw.hgetall(q.keys.prefix + "gactive") == {}
    assert len(await q.dequeue_batch(100)) == 5 + 60 - len(jobs)


async def test_a_batchs_started_records_keep_every_items_own_header_and_payload(
    q: Any, raw: Any
) -> None:
    # dequeue.lua starts a common item from its header's bytes, the work shared by a run
    # of items whose first bytes are equal: each item's own fields must come through
    await q.configure(group_limit=2)
    await q.enqueue_many([Message({"i": i}) for i in range(3)])
    await q.enqueue_many(
        [Message({"i": 3}, key="k3"), Message({"i": 4}, group="a"),
         Message({"i": 5}, group="a", max_attempts=7)]
    )  # fmt: skip
    time.sleep(0.003)  # a later enqueued_at
    await q.enqueue_many([Message({"i": 6}), Message({"i": 7}, group="a", priority=0)])
    first = await q.dequeue_batch(1)  # back with a failure, at the head of its group
    assert await q.settle(first, [Settle.retry(0, "again")]) == [Outcome.RETRYING]
    jobs_key = q.keys.prefix + "jobs"
    before = raw.hgetall(jobs_key)
    jobs = await q.dequeue_batch(100)
    assert sorted(j.payload["i"] for j in jobs) == list(range(8))
    after = raw.hgetall(jobs_key)
    started = {j.id.encode(): record.parse_record(after[j.id.encode()]) for j in jobs}
    assert len({r.dequeued_at_ms for r in started.values() if r}) == 1
    slot_holders = []
    for jid, new in started.items():
        old = record.parse_record(before[jid])
        assert old and new and new.state == 3  # active
        assert (new.attempts, new.deliveries) == (old.attempts + 1, old.deliveries + 1)
        same = ("priority", "codec", "max_attempts", "failures", "enqueued_at_ms",
                "requeued_at_ms", "group", "key")  # fmt: skip
        assert [getattr(new, f) for f in same] == [getattr(old, f) for f in same]
        assert new.flags & ~2 == old.flags  # FLAG_SLOT (lua/lib/core/record_layout.lua)
        if new.flags & 2:
            slot_holders.append(new.group)
        assert after[jid][new.payload_offset :] == before[jid][old.payload_offset :]
    assert slot_holders == ["a"]  # the batch's items of group a hold one slot
    retried = started[first[0].id.encode()]
    assert retried is not None
    assert (retried.attempts, retried.deliveries, retried.failures) == (2, 2, 1)
    assert raw.hget(q.keys.prefix + "keys", "k3") is None  # a started job frees its key
    assert await q.settle(jobs) == [Outcome.OK] * 8  # tokens of 1 and of 2 deliveries
    assert (await q.stats()).completed == 8


async def test_a_batch_by_group_takes_one_groups_items_and_serves_groups_in_turn(q: Any) -> None:
    await fill(q, 300, group="a")
    await fill(q, 3, group="b", start=300)
    await fill(q, 3, group="c", start=303)
    groups = []
    for _ in range(4):
        jobs = await q.dequeue_batch(100, by_group=True)
        assert len({j.group for j in jobs}) == 1
        groups.append((jobs[0].group, len(jobs)))
        await q.settle(jobs)
    assert groups == [("a", 100), ("b", 3), ("c", 3), ("a", 100)]


async def test_a_batch_of_one_group_takes_its_items_past_cancelled_ones(q: Any) -> None:
    # the model test found it: a turn that met only cancelled ids ended the batch (here
    # at one item, the group's next item left ready)
    await q.enqueue_many([Message({"i": i}, group="a", id=f"a{i}") for i in range(4)])
    await q.cancel(["a1", "a2"])
    jobs = await q.dequeue_batch(2, by_group=True)
    assert [j.payload["i"] for j in jobs] == [0, 3]


async def test_a_group_whose_next_ids_were_cancelled_keeps_its_turn_for_a_batch_of_one_group(
    q: Any,
) -> None:
    # the model test found it: the group's turn went to the next group, its items ready
    await q.enqueue_many([Message({"i": i}, group="a", id=f"a{i}") for i in range(4)])
    await fill(q, 2, group="b", start=4)
    await q.cancel(["a0", "a1"])
    jobs = await q.dequeue_batch(2, by_group=True)
    assert [(j.group, j.payload["i"]) for j in jobs] == [("a", 2), ("a", 3)]


async def test_a_partial_batch_waits_up_to_max_wait_then_starts_with_what_it_has(q: Any) -> None:
    await fill(q, 7)
    began = time.monotonic()
    jobs = await q.dequeue_batch(100, max_wait=0.3)
    took = time.monotonic() - began
    assert len(jobs) == 7
    assert 0.25 <= took < 3.0
    await q.settle(jobs, cause="wait")
    assert [(b.size, b.cause) for b in await q.batches()] == [(7, "wait")]


async def test_a_full_batch_starts_at_once_without_waiting(q: Any) -> None:
    await fill(q, 100)
    began = time.monotonic()
    jobs = await q.dequeue_batch(100, max_wait=30)
    assert len(jobs) == 100
    assert time.monotonic() - began < 5.0


def _counted(op: Any, requests: list[Any]) -> Any:
    """``op``, its requests listed in ``requests`` as it makes them."""
    reply = None
    while True:
        try:
            request = op.send(reply)
        except StopIteration as stop:
            return stop.value
        requests.append(request)
        reply = yield request


async def test_a_batch_of_one_group_waits_for_more_without_spinning_while_others_are_ready(
    q: Any,
) -> None:
    """The model test found it: while a partial batch of group a waits for more items,
    group b's ready items turned its wait into a busy loop (each empty top-up passed the
    wake-up on, and with no other consumer blocked its next wait took it back at once:
    3,122 round trips in a max_wait of 0.5 s). Now it backs off: a few round trips (the
    model test checks that items of its group that come meanwhile join it on time)."""
    await fill(q, 1, group="a")
    await fill(q, 3, group="b", start=1)
    requests: list[Any] = []
    op = batches.dequeue_batch(q.keys, q.codec, 5, 0.3, 30.0, by_group=True)
    jobs = await q._run(_counted(op, requests))
    assert [j.group for j in jobs] == ["a"]
    trips = [r for r in requests if not isinstance(r, Sleep)]
    assert len(trips) <= 20, f"{len(trips)} round trips in a max_wait of 0.3 s"


async def test_the_history_keeps_the_last_hundred_batches_newest_first(q: Any) -> None:
    await fill(q, 105)
    for size in range(1, 15):
        jobs = await q.dequeue_batch(size)
        await q.settle(jobs, cause="size")
    history = await q.batches()
    assert [b.size for b in history] == list(range(14, 0, -1))
    assert all(b.cause == "size" and b.at > 0 for b in history)


async def test_a_cancelled_item_ends_cancelled_whatever_its_batch_reports(q: Any) -> None:
    await fill(q, 3)
    jobs = await q.dequeue_batch(3)
    await q.cancel([jobs[0].id, jobs[1].id])
    got = await q.settle(jobs, [Settle.done(), Settle.retry(0), Settle.done()])
    assert got == [Outcome.CANCELLED, Outcome.CANCELLED, Outcome.OK]
    stats = await q.stats()
    assert (stats.cancelled, stats.completed, stats.pending) == (2, 1, 0)


async def test_a_completed_item_keeps_its_id_taken_for_the_dedup_window(q: Any) -> None:
    await q.enqueue_many([Message({"i": 1}, id="one")])
    jobs = await q.dequeue_batch(5)
    await q.settle(jobs)
    again = await q.enqueue_many([Message({"i": 1}, id="one")])
    assert again[0].status.value == "exists"
