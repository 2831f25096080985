"""Promises of docs/flow-control.md that no other engine test showed, each through both
front ends (the promise -> test table is in docs/guarantees.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from durq import Rate
from durq.protocol import lifecycle, wake
from durq.protocol import limits as limit_ops
from durq.protocol.calls import Command
from durq.worker.pace import IDLE_HEARTBEAT
from engine.support import expire


async def _rate_limited(q: Any, job: Any, seconds: float, scope: Any) -> None:
    assert await q._run(limit_ops.rate_limited(q.keys, [(job, seconds, scope)])) == [0]


async def test_rate_limited_zero_gives_the_job_back_without_pausing_anything(q: Any) -> None:
    await q.enqueue_many(["a0", "a1"], group="a")
    for scope in ("group", "queue"):
        job = await q.dequeue()
        assert job.payload == "a0"
        await _rate_limited(q, job, 0.0, scope)
        info = await q.limits()
        assert (info.paused_until, info.parked_groups) == (None, [])
    assert [j.payload for j in await q.dequeue_many(5)] == ["a0", "a1"]


async def test_rate_limited_with_group_scope_pauses_the_ungrouped_jobs_as_one_group(
    q: Any,
) -> None:
    await q.enqueue_many(["u0", "u1"])
    await q.enqueue_many(["b0"], group="b")
    job = await q.dequeue()
    assert job.payload == "u0"
    await _rate_limited(q, job, 30.0, "group")
    assert [j.payload for j in await q.dequeue_many(5)] == ["b0"]
    assert await q.dequeue() is None


async def test_removing_every_limit_ends_the_pauses_and_forgets_the_group_limiters(
    q: Any, raw: Any
) -> None:
    await q.configure(group_rates={"a": Rate(1, per=60.0)})
    await q.enqueue_many(["a0", "a1"], group="a")
    await q.enqueue_many(["u0", "u1"])
    await q.enqueue_many(["b0", "b1"], group="b")
    jobs = {j.payload: j for j in await q.dequeue_many(3)}
    assert set(jobs) == {"a0", "u0", "b0"}  # a is parked now, for a minute
    await _rate_limited(q, jobs["b0"], 60.0, "group")  # b pauses itself
    await _rate_limited(q, jobs["u0"], 60.0, "queue")  # and u0 the whole queue
    assert await q.dequeue() is None
    assert raw.exists(q.keys.prefix + "gtat")
    await q.configure(group_rates={"a": None})  # the last limit goes
    assert sorted(j.payload for j in await q.dequeue_many(10)) == ["a1", "b0", "b1", "u0", "u1"]
    info = await q.limits()
    assert (info.paused_until, info.parked) == (None, 0)
    assert not raw.exists(q.keys.prefix + "gtat")


async def test_a_group_whose_own_rate_changes_is_looked_at_again_at_once(q: Any) -> None:
    await q.configure(group_rates={"a": Rate(1, per=60.0)})
    await q.enqueue_many(range(4), group="a")
    assert len(await q.dequeue_many(4)) == 1
    assert await q.dequeue() is None  # parked for a minute
    # the limiter's TAT stands (a minute on); a burst of 5 at this rate tolerates 4
    # minutes of it, so the group may start at once
    await q.configure(group_rates={"a": Rate(1, per=60.0, burst=5)})
    assert len(await q.dequeue_many(4)) == 3


async def test_a_start_counts_again_after_a_reclaim_or_a_rate_limited_give_back(
    q: Any, raw: Any
) -> None:
    await q.configure(rate=Rate(1, per=60.0, burst=2))
    await q.enqueue_many(["a", "b"])
    job = await q.dequeue()
    await expire(raw, q, job.id)
    again = await q.dequeue()
    assert again.id == job.id  # the second start of the burst: b waits
    assert await q.dequeue() is None
    await q.enqueue("c")
    await q.configure(rate=None)  # removing every limit forgets the limiter
    await q.configure(rate=Rate(1, per=60.0, burst=2))
    await _rate_limited(q, again, 0.0, "group")
    assert (await q.dequeue()).id == job.id  # starts once more: counted
    assert (await q.dequeue()).payload == "b"
    assert await q.dequeue() is None  # c waits


@pytest.mark.parametrize("end", ["defer", "rate_limited", "dead"])
async def test_every_end_of_a_lease_gives_its_max_active_place_back(q: Any, end: str) -> None:
    await q.configure(max_active=1)
    await q.enqueue_many(["a", "b"])
    job = await q.dequeue()
    assert await q.dequeue() is None
    if end == "defer":
        await q.defer(job, delay=60)
    elif end == "rate_limited":
        await _rate_limited(q, job, 60.0, "group")  # its (default) group pauses
        await q.enqueue("c", group="c")
    else:
        await q.requeue(job, dead=True)
    got = await q.dequeue()
    assert got is not None and got.id != job.id


async def test_a_setting_left_out_of_configure_is_left_as_it_is(q: Any) -> None:
    await q.configure(rate=Rate(10), max_active=3, group_rates={"a": Rate(2)})
    await q.configure(group_rate=Rate(5))
    await q.configure(group_rates={"b": Rate(1)})
    info = await q.limits()
    assert (info.rate, info.group_rate, info.max_active) == (Rate(10), Rate(5), 3)
    assert info.group_rates == {"a": Rate(2), "b": Rate(1)}
    await q.configure(max_active=None)
    info = await q.limits()
    assert (info.rate, info.max_active) == (Rate(10), None)


async def test_a_shorter_rate_limited_pause_never_shortens_a_longer_one(q: Any) -> None:
    await q.enqueue_many(["a0", "a1", "a2"], group="a")
    first, second = await q.dequeue_many(2)
    await _rate_limited(q, first, 30.0, "group")
    await _rate_limited(q, second, 0.2, "group")  # the TAT is later already: it stands
    await asyncio.sleep(0.3)
    assert await q.dequeue() is None
    info = await q.limits()
    assert [p.name for p in info.parked_groups] == ["a"]
    assert info.parked_groups[0].until - info.server_time > 29


async def test_an_alarm_whose_holder_never_comes_back_is_taken_over(q: Any) -> None:
    await q.configure(group_rates={"a": Rate(1, per=0.3)})
    await q.enqueue_many(range(3), group="a")

    async def fetch(consumer: str) -> tuple[int, int]:
        jobs, next_ms, _ = await q._run(lifecycle.fetch(q.keys, q.codec, 5, 10.0, consumer))
        return len(jobs), next_ms

    assert (await fetch("c0"))[0] == 1
    got, next_ms = await fetch("c1")  # c1 holds the alarm, then vanishes
    assert got == 0 and 0 < next_ms <= 300
    assert (await fetch("c2"))[1] > 5000  # c2 leaves it to c1: it plans for c0's lease
    await asyncio.sleep(0.35)  # c1 never comes; c2's own wait ends
    assert (await fetch("c2"))[0] == 1  # the work is c2's
    got, next_ms = await fetch("c2")  # and so is the alarm for the next start
    assert got == 0 and 0 < next_ms <= 300


async def test_an_alarm_outlives_its_time_for_the_stretched_looks_of_idle_workers(
    q: Any,
) -> None:
    # a holder that dies leaves its alarm; void for claims once past, it stays longer
    # than an idle worker's stretched look (worker/upkeep.py), which then sees it past
    # and wakes a consumer of its own for the parked work
    await q.configure(group_rates={"a": Rate(1, per=0.3)})
    await q.enqueue_many(range(2), group="a")
    jobs, _, _ = await q._run(lifecycle.fetch(q.keys, q.codec, 5, 10.0, "c0"))
    assert len(jobs) == 1
    jobs, next_ms, _ = await q._run(lifecycle.fetch(q.keys, q.codec, 5, 10.0, "c1"))
    assert not jobs and 0 < next_ms <= 300  # c1 holds the alarm, then vanishes
    ttl = await q._run(_pttl(q.keys.prefix + "alarm"))
    assert ttl > IDLE_HEARTBEAT * 1000
    ahead = await q._run(wake.look(q.keys, "c2"))
    assert 0 < ahead.alarm_ms <= 300 and ahead.alarm_at > 0
    await asyncio.sleep(0.35)
    past = await q._run(wake.look(q.keys, "c2"))  # past: due now, the same alarm
    assert (past.alarm_ms, past.alarm_at) == (0, ahead.alarm_at)
    assert (await q._run(wake.look(q.keys, "c1"))).alarm_ms == -1  # its holder's own


def _pttl(key: str) -> Any:
    return (yield Command(("PTTL", key)))
