"""Groups: round robin between groups, weights, limits, strict order with limit 1."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from durq import Message
from durq.errors import InvalidArgument
from engine.support import expire


def groups_of(jobs: list[Any]) -> list[str | None]:
    return [j.group for j in jobs]


async def test_groups_are_served_in_turn_whatever_their_backlog(q: Any) -> None:
    await q.enqueue_many([f"a{i}" for i in range(6)], group="a")
    await q.enqueue_many([f"b{i}" for i in range(2)], group="b")
    await q.enqueue_many([f"c{i}" for i in range(2)], group="c")
    jobs = [await q.dequeue() for _ in range(10)]
    assert groups_of(jobs[:6]) == ["a", "b", "c", "a", "b", "c"]
    assert groups_of(jobs[6:]) == ["a"] * 4
    assert [j.payload for j in jobs if j.group == "a"] == [f"a{i}" for i in range(6)]


async def test_a_batch_dequeue_also_serves_groups_in_turn(q: Any) -> None:
    await q.enqueue_many(range(5), group="a")
    await q.enqueue_many(range(5), group="b")
    jobs = await q.dequeue_many(4)
    assert sorted(groups_of(jobs), key=str) == ["a", "a", "b", "b"]


async def test_a_lone_group_gives_a_whole_batch(q: Any) -> None:
    await q.enqueue_many(range(5), group="solo")
    assert [j.payload for j in await q.dequeue_many(5)] == [0, 1, 2, 3, 4]


async def test_ungrouped_jobs_take_their_turn_like_a_group(q: Any) -> None:
    await q.enqueue_many(["u1", "u2", "u3"])
    await q.enqueue_many(["g1", "g2", "g3"], group="g")
    jobs = [await q.dequeue() for _ in range(6)]
    assert [j.payload for j in jobs] == ["u1", "g1", "u2", "g2", "u3", "g3"]
    assert jobs[0].group is None


async def test_a_weight_is_the_number_of_jobs_a_group_gets_per_turn(q: Any) -> None:
    await q.configure(weights={"heavy": 3})
    await q.enqueue_many(range(9), group="heavy")
    await q.enqueue_many(range(3), group="light")
    jobs = await q.dequeue_many(8)
    assert groups_of(jobs) == ["heavy"] * 3 + ["light"] + ["heavy"] * 3 + ["light"]
    (info,) = await q.groups(names=["heavy"])
    assert info.weight == 3


async def test_a_weight_of_zero_is_refused(q: Any) -> None:
    """A turn of 0 jobs would drop the group from the rotation with its jobs ready (the
    model test found it): a weight is at least 1."""
    with pytest.raises(InvalidArgument, match="weight"):
        await q.configure(weights={"g": 0})
    (info,) = await q.groups(names=["g"])
    assert info.weight is None


async def test_a_weight_below_one_stored_before_counts_as_one(q: Any, raw: Any) -> None:
    """A weight of 0 that a release which took it stored: the group still gets its
    turns, one job each, and is never dropped from the rotation with jobs ready."""
    await q.enqueue_many(range(3), group="zero")
    await q.enqueue_many(range(3), group="other")
    raw.hset(q.keys.prefix + "gweight", "zero", 0)
    jobs = await q.dequeue_many(4)
    assert groups_of(jobs) == ["zero", "other", "zero", "other"]
    assert groups_of(await q.dequeue_many(4)) == ["zero", "other"]


async def test_a_group_limit_caps_the_jobs_it_has_active(q: Any) -> None:
    await q.configure(limits={"tenant": 2})
    await q.enqueue_many(range(5), group="tenant")
    jobs = await q.dequeue_many(5)
    assert len(jobs) == 2
    assert await q.dequeue() is None
    await q.release(jobs[0])
    assert (await q.dequeue()).payload == 2
    (info,) = await q.groups(names=["tenant"])
    assert (info.active, info.limit, info.ready) == (2, 2, 2)


async def test_a_limited_group_does_not_hold_back_other_groups(q: Any) -> None:
    await q.configure(limits={"slow": 1})
    await q.enqueue_many(range(3), group="slow")
    await q.enqueue_many(range(3), group="fast")
    jobs = await q.dequeue_many(10)
    assert sorted(groups_of(jobs), key=str) == ["fast"] * 3 + ["slow"]


async def test_the_default_group_limit_applies_to_every_named_group(q: Any) -> None:
    await q.configure(group_limit=1, limits={"vip": 3})
    for g in ("a", "b", "vip"):
        await q.enqueue_many(range(4), group=g)
    await q.enqueue_many(range(4))  # the default group is never limited
    jobs = await q.dequeue_many(20)
    counts = {g: groups_of(jobs).count(g) for g in ("a", "b", "vip", None)}
    assert counts == {"a": 1, "b": 1, "vip": 3, None: 4}


async def test_raising_a_limit_starts_waiting_jobs_at_once(q: Any) -> None:
    await q.configure(limits={"t": 1})
    await q.enqueue_many(range(3), group="t")
    assert len(await q.dequeue_many(3)) == 1
    await q.configure(limits={"t": 3})
    assert len(await q.dequeue_many(3)) == 2


async def test_raising_the_default_limit_starts_waiting_groups_at_once(q: Any) -> None:
    await q.configure(group_limit=1)
    await q.enqueue_many(range(3), group="t")
    assert len(await q.dequeue_many(3)) == 1
    await q.configure(group_limit=0)
    assert len(await q.dequeue_many(3)) == 2


async def test_limit_one_keeps_strict_order_across_a_retry(q: Any) -> None:
    await q.configure(limits={"acct": 1})
    await q.enqueue_many(["first", "second"], group="acct")
    first = await q.dequeue()
    await q.requeue(first, delay=0.15)  # waiting out its backoff, it keeps the slot
    assert await q.dequeue() is None
    await asyncio.sleep(0.2)
    assert (await q.dequeue()).payload == "first"


async def test_limit_one_keeps_strict_order_across_an_immediate_retry(q: Any) -> None:
    await q.configure(limits={"acct": 1})
    await q.enqueue_many(["first", "second"], group="acct")
    await q.requeue(await q.dequeue(), delay=0)
    again = await q.dequeue()
    assert again.payload == "first"
    assert await q.dequeue() is None
    await q.release(again)
    assert (await q.dequeue()).payload == "second"


async def test_limit_one_keeps_strict_order_across_a_lease_expiry(q: Any, raw: Any) -> None:
    await q.configure(limits={"acct": 1})
    await q.enqueue_many(["first", "second", "third"], group="acct")
    first = await q.dequeue()
    assert await q.dequeue() is None
    await expire(raw, q, first.id)
    again = await q.dequeue()
    assert (again.id, again.attempt) == (first.id, 2)
    assert await q.dequeue() is None
    await q.release(again)
    assert (await q.dequeue()).payload == "second"


async def test_limit_one_keeps_strict_order_across_a_defer(q: Any) -> None:
    await q.configure(limits={"acct": 1})
    await q.enqueue_many(["first", "second"], group="acct")
    await q.defer(await q.dequeue(), 0.1)
    assert await q.dequeue() is None
    assert (await q.dequeue(wait=1)).payload == "first"


async def test_a_group_slot_is_freed_when_its_job_dies(q: Any) -> None:
    await q.configure(limits={"acct": 1})
    await q.enqueue_many([Message("bad", max_attempts=1), Message("next")], group="acct")
    await q.requeue(await q.dequeue(), reason="x")
    assert (await q.dequeue()).payload == "next"


async def test_groups_lists_the_largest_backlogs_first(q: Any) -> None:
    await q.enqueue_many(range(3), group="mid")
    await q.enqueue_many(range(5), group="big")
    await q.enqueue_many(range(1), group="small")
    infos = await q.groups()
    assert [(g.name, g.ready) for g in infos] == [("big", 5), ("mid", 3), ("small", 1)]
    assert [g.name for g in await q.groups(limit=1)] == ["big"]
    await q.dequeue_many(9)
    assert await q.groups() == []
    assert (await q.stats()).groups == 0


async def test_removing_a_limit_or_weight_restores_the_default(q: Any) -> None:
    await q.configure(limits={"g": 1}, weights={"g": 4})
    await q.configure(limits={"g": None}, weights={"g": None})
    (info,) = await q.groups(names=["g"])
    assert (info.limit, info.weight) == (None, None)
