"""Flow control on the queue API: rates (queue, group default, per group), max_active,
RateLimited pauses, the alarm that wakes one idle consumer, and bad input."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
import redis

from durq import AsyncQueue, CorruptQueue, InvalidArgument, Message, Rate
from durq.dev.server import RedisServer
from durq.protocol import lifecycle
from durq.protocol import limits as limit_ops
from durq.protocol.status import Status
from engine.support import expire, keys_of, server_time


def groups_of(jobs: list[Any]) -> list[str | None]:
    return [j.group for j in jobs]


async def until(q: Any, at: float, raw: redis.Redis) -> None:
    """Sleep until server time ``at`` (plus a few ms)."""
    await asyncio.sleep(max(at - server_time(raw), 0) + 0.005)


# -- rates ------------------------------------------------------------------------------


async def test_a_queue_rate_lets_its_burst_start_then_spaces_starts(q: Any, raw: Any) -> None:
    await q.configure(rate=Rate(5, per=1.0, burst=2))
    await q.enqueue_many(range(10))
    first = await q.dequeue_many(10)
    assert len(first) == 2  # the burst
    assert await q.dequeue_many(10) == []
    info = await q.limits()
    assert info.rate == Rate(5, per=1.0, burst=2)
    assert info.paused_until is not None
    # two starts moved the TAT 400 ms on; the burst tolerance (200 ms) lets the next
    # one start 200 ms after them
    assert info.paused_until - info.server_time == pytest.approx(0.2, abs=0.015)
    assert info.waiting == info.ready == 8
    await until(q, info.paused_until, raw)
    assert len(await q.dequeue_many(10)) == 1
    assert await q.dequeue_many(10) == []


async def test_a_group_over_its_rate_is_parked_and_delays_no_other_group(q: Any) -> None:
    await q.configure(group_rates={"a": Rate(1, per=60.0)})
    await q.enqueue_many(["a0", "a1", "a2"], group="a")
    await q.enqueue_many(["b0", "b1", "b2"], group="b")
    await q.enqueue_many(["u0", "u1"])
    jobs = await q.dequeue_many(10)
    assert Counter(groups_of(jobs)) == {"a": 1, "b": 3, None: 2}
    info = await q.limits()
    assert [(p.name, p.ready) for p in info.parked_groups] == [("a", 2)]
    assert info.parked_groups[0].until - info.server_time == pytest.approx(60, abs=0.1)
    assert info.waiting == 2 and info.paused_until is None
    # new work of other groups flows at once; the parked group stays parked
    await q.enqueue_many(["b3"], group="b")
    await q.enqueue_many(["a3"], group="a")
    assert groups_of(await q.dequeue_many(10)) == ["b"]


async def test_groups_back_from_parking_take_their_turns_in_the_call_that_brings_them_back(
    q: Any,
) -> None:
    """The model test found it: the call that brought parked groups back counted the
    rotation before they were in it, took the group at its head for the only eligible
    one, and gave it everything asked (past its weight and the others' turns)."""
    await q.configure(group_rate=Rate(1, per=0.5))
    await q.enqueue_many([f"u{i}" for i in range(10)])  # ungrouped: no group rate
    await q.enqueue_many(["a0", "a1"], group="a")
    await q.enqueue_many(["b0", "b1"], group="b")
    assert groups_of(await q.dequeue_many(3)) == [None, "a", "b"]
    # a and b are over their rate: parked, and the default group alone takes the call
    assert groups_of(await q.dequeue_many(3)) == [None, None, None]
    await asyncio.sleep(0.6)  # their rate allows one each again
    assert groups_of(await q.dequeue_many(3)) == [None, "a", "b"]


async def test_group_rate_is_the_default_of_named_groups_only(q: Any) -> None:
    await q.configure(group_rate=Rate(1, per=60.0), group_rates={"vip": Rate(100, burst=10)})
    await q.enqueue_many(range(3), group="a")
    await q.enqueue_many(range(3), group="vip")
    await q.enqueue_many(range(3))  # ungrouped: no group rate
    jobs = await q.dequeue_many(20)
    assert Counter(groups_of(jobs)) == {"a": 1, "vip": 3, None: 3}


async def test_past_group_limiter_states_are_dropped_and_the_hash_stays_small(
    q: Any, raw: Any
) -> None:
    """Issue 30 bug 10: every group ever started under a group rate kept its limiter's
    field in <prefix>gtat for good, whatever the number of groups."""
    await q.configure(group_rate=Rate(100_000, per=1.0))  # each TAT passes within a ms
    await q.enqueue_many([Message(i, group=f"g{i}") for i in range(300)])
    await q.release_many(await q.dequeue_many(300))
    await asyncio.sleep(0.02)  # every TAT is past: the same as none
    for _ in range(400):  # each start looks at two fields and drops the past ones
        await q.enqueue(0, group="busy")
        await q.release(await q.dequeue(wait=1))
    assert raw.hlen(q.keys.prefix + "gtat") < 100


async def test_removing_the_last_limit_brings_back_more_parked_groups_than_a_call_takes(
    q: Any,
) -> None:
    """Found with issue 30's stress test: configure brings 1,000 parked groups back; the
    limiter states of those were kept (pauses in the future: parked again at their turn)
    and the others waited for their own time, a minute here."""
    await q.configure(group_rate=Rate(1, per=60.0))
    n = 1100
    await q.enqueue_many([Message(i, group=f"g{i % n}") for i in range(2 * n)])
    assert len(await q.dequeue_many(2 * n)) == n  # one each: every group parks
    await q.configure(group_rate=None)
    back = 0
    while jobs := await q.dequeue_many(500):
        back += len(jobs)
    assert back == n
    assert not (await q.limits()).parked


async def test_removing_a_groups_rate_brings_it_back_at_once(q: Any) -> None:
    await q.configure(group_rates={"a": Rate(1, per=60.0)})
    await q.enqueue_many(range(3), group="a")
    assert len(await q.dequeue_many(5)) == 1
    assert await q.dequeue() is None
    await q.configure(group_rates={"a": None})
    assert len(await q.dequeue_many(5)) == 2
    info = await q.limits()
    assert not info.limited and info.parked == 0


async def test_a_lower_rate_applies_from_the_limiters_state(q: Any) -> None:
    await q.configure(rate=Rate(1000, burst=5))
    await q.enqueue_many(range(20))
    assert len(await q.dequeue_many(10)) == 5  # the burst
    await q.configure(rate=Rate(1, per=60.0))
    await asyncio.sleep(0.01)
    assert len(await q.dequeue_many(5)) == 1
    assert await q.dequeue() is None
    await q.configure(rate=None)
    assert len(await q.dequeue_many(20)) == 14


# -- max_active -------------------------------------------------------------------------


async def test_max_active_caps_the_jobs_leased_at_once(q: Any) -> None:
    await q.configure(max_active=2)
    await q.enqueue_many(range(5))
    held = await q.dequeue_many(5)
    assert len(held) == 2
    assert await q.dequeue() is None
    info = await q.limits()
    assert (info.max_active, info.active, info.waiting) == (2, 2, 3)
    await q.release(held[0])
    one = await q.dequeue_many(5)
    assert len(one) == 1
    await q.requeue(one[0], delay=60)  # a retry waiting for its time holds no place
    assert len(await q.dequeue_many(5)) == 1
    await q.configure(max_active=None)
    assert len(await q.dequeue_many(5)) == 1


async def test_an_expired_lease_gives_its_place_back(q: Any, raw: Any) -> None:
    await q.configure(max_active=1)
    await q.enqueue_many(["a", "b"])
    job = await q.dequeue()
    assert await q.dequeue() is None
    await expire(raw, q, job.id)
    again = await q.dequeue()  # reclaimed: back at the head, its place free again
    assert again.id == job.id and again.deliveries == 2


async def test_a_freed_place_wakes_an_idle_consumer(q: Any, server: RedisServer) -> None:
    await q.configure(max_active=1)
    await q.enqueue_many(["a", "b"])
    job = await q.dequeue()
    async with AsyncQueue(q.name, server.url) as other:  # blocked while the place is taken
        waiting = asyncio.ensure_future(other.dequeue(wait=3))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await q.release(job)
        got = await asyncio.wait_for(waiting, 1.0)
    assert got is not None and got.payload == "b"


# -- RateLimited ------------------------------------------------------------------------


async def test_rate_limited_gives_the_attempt_back_however_often(make_q: Any) -> None:
    q = make_q(max_attempts=3)
    await q.enqueue("x", group="g")
    for delivery in range(1, 51):
        job = await q.dequeue()
        assert (job.attempt, job.deliveries) == (1, delivery)
        assert await q._run(limit_ops.rate_limited(q.keys, [(job, 0.0, "group")])) == [0]
    job = await q.dequeue()
    await q.release(job)
    stats = await q.stats()
    assert (stats.dead, stats.completed) == (0, 1)
    assert (await q.limits()).rate_limited == 50


async def test_rate_limited_pauses_its_group_and_keeps_the_job_first(q: Any, raw: Any) -> None:
    await q.enqueue_many(["a0", "a1"], group="a")
    await q.enqueue_many(["b0", "b1"], group="b")
    job = await q.dequeue()
    assert job.payload == "a0"
    await q._run(limit_ops.rate_limited(q.keys, [(job, 0.3, "group")]))
    # group a waits 0.3 s; group b is not held up
    assert [j.payload for j in await q.dequeue_many(10)] == ["b0", "b1"]
    info = await q.limits()
    assert [(p.name, p.ready) for p in info.parked_groups] == [("a", 2)]
    await until(q, info.parked_groups[0].until, raw)
    assert [j.payload for j in await q.dequeue_many(10)] == ["a0", "a1"]


async def test_rate_limited_with_queue_scope_pauses_the_whole_queue(q: Any, raw: Any) -> None:
    await q.enqueue_many(["a0"], group="a")
    await q.enqueue_many(["b0", "b1"], group="b")
    job = await q.dequeue()
    await q._run(limit_ops.rate_limited(q.keys, [(job, 0.3, "queue")]))
    assert await q.dequeue_many(10) == []
    info = await q.limits()
    assert info.paused_until is not None and info.waiting == 3
    await until(q, info.paused_until, raw)
    assert sorted(j.payload for j in await q.dequeue_many(10)) == ["a0", "b0", "b1"]


async def test_rate_limited_ends_a_cancelled_job_cancelled_and_still_pauses(q: Any) -> None:
    # issue 30, bug 1: the give-back undid the cancel; the upstream's 429 still holds
    await q.enqueue_many(["a", "b"])
    job = await q.dequeue()
    await q.cancel(job.id)
    assert await q._run(limit_ops.rate_limited(q.keys, [(job, 30.0, "queue")])) == [
        Status.CANCELLED
    ]
    info = await q.limits()
    assert info.paused_until is not None and info.rate_limited == 0
    assert await q.dequeue_many(10) == []  # paused; the cancelled job is not listed
    assert (await q.stats()).cancelled == 1


async def test_a_stale_lease_cannot_pause_anything(q: Any, raw: Any) -> None:
    await q.enqueue("x")
    job = await q.dequeue()
    await expire(raw, q, job.id)
    again = await q.dequeue()
    statuses = await q._run(limit_ops.rate_limited(q.keys, [(job, 5.0, "queue")]))
    assert statuses == [Status.LEASE_LOST]
    assert (await q.limits()).paused_until is None
    await q.release(again)


# -- waking one consumer ----------------------------------------------------------------


async def test_one_idle_consumer_holds_the_alarm_for_parked_work(q: Any) -> None:
    await q.configure(group_rates={"a": Rate(1, per=1.0)})
    await q.enqueue_many(range(3), group="a")

    async def fetch(consumer: str) -> tuple[int, int]:
        jobs, next_ms, _ = await q._run(lifecycle.fetch(q.keys, q.codec, 5, 10.0, consumer))
        return len(jobs), next_ms

    got, _ = await fetch("c1")
    assert got == 1
    # c2 finds the group parked: it takes the alarm (c1 left with a job)
    got, next_ms = await fetch("c2")
    assert got == 0 and 900 <= next_ms <= 1000
    # c3 leaves the alarm to c2: it plans only for the lease c1 holds (10 s)
    got, next_ms = await fetch("c3")
    assert got == 0 and next_ms > 5000
    # c2, planning again, keeps it; a consumer without an id always plans it itself
    assert (await fetch("c2"))[1] > 0
    jobs, next_ms, _ = await q._run(lifecycle.fetch(q.keys, q.codec, 5, 10.0))
    assert jobs == [] and next_ms > 0


# -- bad input and damage ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"rate": 100}, "durq.Rate"),
        ({"group_rate": "100/s"}, "durq.Rate"),
        ({"max_active": 0}, "max_active"),
        ({"max_active": -3}, "max_active"),
        ({"max_active": True}, "max_active"),
        ({"group_rates": {"": Rate(1)}}, "group"),
        ({"group_rates": {"a": 5}}, "durq.Rate"),
    ],
)
async def test_bad_settings_are_refused_before_anything_is_stored(
    q: Any, raw: Any, settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        await q.configure(group_limit=3, **settings)
    assert keys_of(raw, q) == {}


async def test_a_flow_key_of_another_type_fails_dequeue_without_changes(q: Any, raw: Any) -> None:
    await q.configure(rate=Rate(10))
    await q.enqueue_many(range(3))
    raw.set(q.keys.prefix + "park", "garbage")
    before = keys_of(raw, q)
    with pytest.raises(CorruptQueue, match="park"):
        await q.dequeue()
    assert keys_of(raw, q) == before
    raw.delete(q.keys.prefix + "park")
    assert (await q.dequeue()) is not None


async def test_parked_groups_stay_parked_when_the_rotation_is_repaired(q: Any, raw: Any) -> None:
    await q.configure(group_rates={"a": Rate(1, per=60.0)})
    await q.enqueue_many(range(3), group="a")
    await q.enqueue_many(range(2), group="b")
    assert len(await q.dequeue_many(2)) == 2  # a once, b once
    raw.delete(q.keys.prefix + "rr")  # damage: the rotation list is gone
    jobs = await q.dequeue_many(10)
    assert groups_of(jobs) == ["b"]
    assert await q.dequeue() is None
