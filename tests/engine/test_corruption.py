"""Garbage written into durq's keys by something else: unreadable records, unknown ids,
keys of the wrong Redis type. durq must keep working, say clearly what is wrong, and
lose no job."""

from __future__ import annotations

import asyncio
import os
import re
import struct
from typing import Any

import pytest

from durq import AsyncQueue, CorruptQueue, JobState, LeaseLost, Message, Outcome, Queue
from durq.dev.server import RedisServer
from durq.keys import VECTOR_PARTS
from engine.support import drain, keys_of

# -- unreadable records -------------------------------------------------------------

GARBAGE_RECORDS = {
    "random bytes": b"\xff" + os.urandom(63),
    "empty": b"",
    "too short": b"\x01\x01",
    "unknown version": b"\x09" + bytes(40),
    "unknown state": b"\x01\x63" + bytes(40),
    "group length past the end": b"\x01\x01" + bytes(31) + b"\xff",
}


@pytest.mark.parametrize("garbage", GARBAGE_RECORDS.values(), ids=GARBAGE_RECORDS.keys())
async def test_an_unreadable_pending_record_is_quarantined_and_the_other_jobs_still_flow(
    q: Any, raw: Any, garbage: bytes
) -> None:
    await q.enqueue_many([Message("a", id="a"), Message("b", id="b"), Message("c", id="c")])
    raw.hset(q.keys.prefix + "jobs", "b", garbage)
    assert await drain(q) == ["a", "c"]
    (dead,) = await q.dead_letters()
    assert dead.id == "b"
    assert dead.corrupt
    assert dead.state is JobState.DEAD
    assert dead.reason["reason"] == "corrupt_record"
    assert dead.data == garbage  # kept for inspection
    stats = await q.stats()
    assert (stats.corrupt, stats.dead, stats.pending) == (1, 1, 0)


async def test_an_unreadable_delayed_record_is_quarantined_when_it_falls_due(
    q: Any, raw: Any
) -> None:
    await q.enqueue("later", id="later", delay=0.05)
    await q.enqueue("now")
    raw.hset(q.keys.prefix + "jobs", "later", b"\xff" * 40)
    await asyncio.sleep(0.08)
    assert await drain(q) == ["now"]
    assert [d.id for d in await q.dead_letters()] == ["later"]


async def test_an_unreadable_active_record_is_refused_then_quarantined_when_its_lease_ends(
    q: Any, raw: Any
) -> None:
    await q.enqueue("x", id="x")
    job = await q.dequeue(lease=0.1)
    raw.hset(q.keys.prefix + "jobs", "x", os.urandom(3))
    with pytest.raises(LeaseLost, match="unreadable"):
        await q.release(job)
    assert await q.requeue_many([job], delay=0) == [Outcome.CORRUPT]
    await asyncio.sleep(0.15)
    assert await q.dequeue() is None
    (dead,) = await q.dead_letters()
    assert (dead.id, dead.reason["reason"]) == ("x", "corrupt_record")


async def test_a_quarantined_record_is_not_replayed_but_can_be_purged(q: Any, raw: Any) -> None:
    await q.enqueue("x", id="x")
    raw.hset(q.keys.prefix + "jobs", "x", b"junk")
    await q.dequeue()
    assert await q.replay("x") == 0
    assert await q.replay_all() == 0
    assert [d.id for d in await q.dead_letters()] == ["x"]
    assert await q.purge_all() == 1
    assert await q.job("x") is None


async def test_a_record_with_a_garbled_payload_is_handed_out_and_fails_on_decode(
    q: Any, raw: Any
) -> None:
    from durq import PayloadRefused

    await q.enqueue({"ok": True}, id="x")
    record = raw.hget(q.keys.prefix + "jobs", "x")
    raw.hset(q.keys.prefix + "jobs", "x", record[:-3] + b"}}}")
    job = await q.dequeue()
    with pytest.raises(PayloadRefused, match="JSON"):
        _ = job.payload
    await q.requeue(job, dead=True, reason="bad payload")


# -- unknown and repeated ids in the ready structures ------------------------------


@pytest.mark.parametrize("where", ["pending", "g:a", "prio"])
async def test_an_unknown_id_pushed_into_a_ready_structure_is_skipped(
    q: Any, raw: Any, where: str
) -> None:
    group = "a" if where == "g:a" else None
    await q.enqueue_many(["one", "two"], group=group)
    key = q.keys.prefix + where
    if where == "prio":
        raw.zadd(key, {"stranger": -5})
    else:
        raw.lpush(key, "stranger")
    assert await drain(q) == ["one", "two"]
    stats = await q.stats()
    assert (stats.pending, stats.dead, stats.corrupt) == (0, 0, 0)
    assert await q.job("stranger") is None


async def test_an_id_listed_twice_is_handed_out_once(q: Any, raw: Any) -> None:
    await q.enqueue_many([Message("a", id="a"), Message("b", id="b")])
    raw.rpush(q.keys.prefix + "pending", "a")
    jobs = await q.dequeue_many(5)
    assert [j.id for j in jobs] == ["a", "b"]
    assert await q.release_many(jobs) == [Outcome.OK, Outcome.OK]
    assert await drain(q) == []


async def test_the_id_of_an_active_job_pushed_back_into_the_list_is_not_handed_out_twice(
    q: Any, raw: Any
) -> None:
    await q.enqueue("a", id="a")
    job = await q.dequeue()
    raw.rpush(q.keys.prefix + "pending", "a")
    assert await q.dequeue() is None
    await q.release(job)


# -- keys of the wrong Redis type ---------------------------------------------------

# every key of a queue; group 'a' is the named group the scenario uses
ALL_KEYS = (*VECTOR_PARTS, "pending", "prio", "g:a", "gp:a")
# keys that hold jobs themselves: garbage there replaces jobs, so the scenario leaves
# them empty before the garbage is written (the rest are overwritten with their data)
HOLDS_JOBS = {"jobs", "pending", "prio", "g:a", "gp:a", "delayed", "active", "dead"}


class Ledger:
    """Which jobs exist and which were finished, to show that none was lost."""

    def __init__(self) -> None:
        self.created: set[str] = set()
        self.completed: list[str] = []
        self.held: list[Any] = []

    def add(self, results: list[Any]) -> None:
        self.created |= {r.id for r in results if r.created}
        self.created -= {r.superseded for r in results if r.superseded}


async def _populate(q: Any, ledger: Ledger, empty: str) -> None:
    """Jobs in every structure except ``empty``."""
    if empty == "jobs":
        return
    if empty != "dead":
        ledger.add([await q.enqueue("dies", id="dies", max_attempts=1)])
        await q.requeue(await q.dequeue(), reason="x")
    if empty != "active":
        ledger.add([await q.enqueue("held", id="held")])
        ledger.held.append(await q.dequeue())
    await q.enqueue("done", id="done")
    await q.release(await q.dequeue(), keep=60)
    ledger.completed.append("done")
    ledger.created.add("done")
    if empty != "pending":
        ledger.add(await q.enqueue_many(["p1", "p2", Message("k1", key="k1")]))
    if empty != "prio":
        ledger.add([await q.enqueue("h1", priority=5)])
    if empty != "g:a":
        ledger.add(await q.enqueue_many(["a1", "a2"], group="a"))
    if empty != "gp:a":
        ledger.add([await q.enqueue("ah", group="a", priority=5)])
    if empty != "delayed":
        ledger.add([await q.enqueue("d1", delay=0.05)])
    await q.configure(limits={"a": 5}, weights={"a": 2})


async def _attempt(q: Any, raw: Any, key: str, call: Any, raised: list[str]) -> Any:
    """Run ``call``; if it raises CorruptQueue, the message names ``key`` and nothing
    changed."""
    before = keys_of(raw, q)
    try:
        return await call()
    except CorruptQueue as exc:
        assert key in str(exc), str(exc)
        assert keys_of(raw, q) == before, f"{call} raised {exc} but changed keys"
        raised.append(str(exc))
        return None


async def _battery(q: Any, raw: Any, key: str, ledger: Ledger) -> list[str]:
    """Every operation once, with a corrupt ``key``."""
    raised: list[str] = []

    async def run(call: Any) -> Any:
        return await _attempt(q, raw, key, call, raised)

    for opts in ({}, {"group": "a"}, {"delay": 0.01}, {"priority": 3}):
        ledger.add(await run(lambda o=opts: q.enqueue_many(["new"], **o)) or [])
    ledger.add(await run(lambda: q.enqueue_many(["k2"], key="k1", replace=True)) or [])
    jobs = await run(lambda: q.dequeue_many(4, lease=30)) or []
    for job in ledger.held:
        if await run(lambda j=job: q.extend(j, lease=30)) is not None:
            pass
    held = list(ledger.held)
    ledger.held.clear()
    for i, job in enumerate(jobs + held):
        action = (
            lambda j=job: q.release_many([j]),
            lambda j=job: q.requeue_many([j], delay=0),
            lambda j=job: q.defer_many([j], 0),
            lambda j=job: q.requeue_many([j], delay=0.01),
        )[i % 4]
        statuses = await run(action)
        if statuses is None:
            ledger.held.append(job)
        else:
            assert statuses == [Outcome.OK] or statuses == [Outcome.RETRYING], statuses
            if i % 4 == 0:
                ledger.completed.append(job.id)
    for call in (q.stats, q.dead_letters, q.groups, q.replay_all, lambda: q.job("p1")):
        await run(call)
    await run(lambda: q.purge("no-such"))
    await run(lambda: q.configure(limits={"a": 6}, group_limit=4))
    return raised


async def _recover(q: Any, ledger: Ledger) -> None:
    """Finish every job: the held ones, then everything that comes out, dead ones too."""
    for job in ledger.held:
        await q.release(job)
        ledger.completed.append(job.id)
    await asyncio.sleep(0.06)  # delayed jobs fall due
    for _ in range(3):
        while jobs := await q.dequeue_many(50):
            assert await q.release_many(jobs) == [Outcome.OK] * len(jobs)
            ledger.completed += [j.id for j in jobs]
        if not await q.replay_all():
            break


@pytest.mark.parametrize("part", ALL_KEYS)
async def test_a_key_of_the_wrong_type_raises_corrupt_queue_and_loses_no_job(
    server: RedisServer, queue_name: str, raw: Any, part: str
) -> None:
    # the scripts decide this; the blocking front end's translation is checked below
    async with AsyncQueue(queue_name, server.url, lease=10) as q:
        await _wrong_type_scenario(q, raw, part)


async def test_the_blocking_queue_raises_corrupt_queue_naming_the_key_too(
    server: RedisServer, queue_name: str, raw: Any
) -> None:
    with Queue(queue_name, server.url) as q:
        q.enqueue("x")
        raw.set(q.keys.prefix + "active", "garbage")
        for call in (q.dequeue, q.stats, lambda: q.job("x")):
            before = keys_of(raw, q)
            with pytest.raises(CorruptQueue, match=re.escape(q.keys.prefix + "active")):
                call()
            assert keys_of(raw, q) == before
        raw.delete(q.keys.prefix + "active")
        job = q.dequeue()
        assert job is not None and job.payload == "x"


async def _wrong_type_scenario(q: Any, raw: Any, part: str) -> None:
    ledger = Ledger()
    await _populate(q, ledger, empty=part if part in HOLDS_JOBS else "")
    key = q.keys.prefix + part
    if part in HOLDS_JOBS:
        assert not raw.exists(key)
    raw.set(key, "garbage")

    raised = await _battery(q, raw, key, ledger)

    # bookkeeping keys, and a zset no call of the battery writes to, go unnoticed
    assert raised or part in ("wake", "stats", "groups", "gp:a"), "no call noticed the key"
    raw.delete(key)
    await _recover(q, ledger)
    assert sorted(ledger.completed) == sorted(ledger.created)
    assert len(set(ledger.completed)) == len(ledger.completed), "a job was completed twice"
    assert await q.dead_letters() == []
    stats = await q.stats()
    assert (stats.active, stats.delayed, stats.dead) == (0, 0, 0)
    if part != "stats":
        assert stats.pending == 0


async def test_a_wake_marker_of_the_wrong_type_fails_a_blocking_dequeue_clearly(
    q: Any, raw: Any
) -> None:
    raw.set(q.keys.wake, "garbage")
    with pytest.raises(CorruptQueue, match="wake"):
        await q.dequeue(wait=0.2)
    raw.delete(q.keys.wake)
    await q.enqueue("x")
    assert (await q.dequeue(wait=0.2)).payload == "x"


async def test_the_record_layout_matches_what_the_scripts_write(q: Any, raw: Any) -> None:
    await q.enqueue(b"payload", id="x", group="grp", key="k", priority=-2, max_attempts=7)
    record = raw.hget(q.keys.prefix + "jobs", "x")
    version, state, prio, codec, attempts, max_attempts = struct.unpack_from(">BBbBHH", record)
    assert (version, state, prio, codec, attempts, max_attempts) == (1, 1, -2, 0, 0, 7)
    assert record.endswith(b"\x03grp\x01kpayload")


# -- garbage in one group's keys ----------------------------------------------------


async def test_other_groups_keep_flowing_while_one_group_list_holds_garbage(
    q: Any, raw: Any
) -> None:
    await q.enqueue_many(["a1", "a2"], group="a")
    await q.enqueue_many(["b1", "b2"], group="b")
    saved = raw.dump(q.keys.prefix + "g:a")
    raw.set(q.keys.prefix + "g:a", "garbage")
    assert sorted(await drain(q)) == ["b1", "b2"]
    raw.delete(q.keys.prefix + "g:a")
    raw.restore(q.keys.prefix + "g:a", 0, saved)  # repaired
    assert await drain(q) == ["a1", "a2"]


@pytest.mark.parametrize("how", ["lease", "retry"])
async def test_a_job_that_cannot_go_back_to_its_garbled_group_is_dead_lettered_for_replay(
    q: Any, raw: Any, how: str
) -> None:
    await q.enqueue("x", id="x", group="a")
    job = await q.dequeue(lease=0.1)
    if how == "retry":
        await q.requeue(job, delay=0.05)
    raw.set(q.keys.prefix + "gp:a", "garbage")
    await asyncio.sleep(0.12)
    assert await q.dequeue() is None
    (dead,) = await q.dead_letters()
    assert (dead.id, dead.reason["reason"]) == ("x", "corrupt_group")
    assert q.keys.prefix + "gp:a" in dead.reason["message"]
    assert not dead.corrupt
    raw.delete(q.keys.prefix + "gp:a")
    assert await q.replay("x") == 1
    assert (await q.dequeue()).id == "x"


async def test_resetting_the_counters_strands_no_prioritized_job_and_keeps_their_order(
    q: Any, raw: Any
) -> None:
    await q.enqueue_many(["p1", "p2"], priority=3)
    raw.delete(q.keys.prefix + "stats")  # an operator resets the counters
    await q.enqueue("p3", priority=3)
    await q.enqueue("plain")
    assert await drain(q) == ["p1", "p2", "p3", "plain"]


async def test_losing_the_settings_strands_no_prioritized_job(q: Any, raw: Any) -> None:
    await q.enqueue_many(["p1", "p2"], priority=3, group="g")
    await q.enqueue("plain", group="g")
    raw.delete(q.keys.prefix + "conf")
    assert sorted(await drain(q)) == ["p1", "p2", "plain"]
    await q.enqueue("p3", priority=1)
    await q.enqueue("p4", priority=1)
    assert await drain(q) == ["p3", "p4"]


async def test_a_deleted_rotation_is_rebuilt_and_no_group_is_forgotten(q: Any, raw: Any) -> None:
    await q.enqueue_many(["u1", "u2"])
    await q.enqueue_many(["a1"], group="a")
    raw.delete(q.keys.prefix + "rr")
    assert sorted(await drain(q)) == ["a1", "u1", "u2"]


async def test_a_batch_that_touches_a_garbled_group_enqueues_nothing(q: Any, raw: Any) -> None:
    raw.set(q.keys.prefix + "g:bad", "garbage")
    before = keys_of(raw, q)
    with pytest.raises(CorruptQueue, match=re.escape(q.keys.prefix + "g:bad")):
        await q.enqueue_many([Message("fine"), Message("also fine", group="ok"),
                              Message("doomed", group="bad")])  # fmt: skip
    assert keys_of(raw, q) == before


async def test_a_single_enqueue_into_a_garbled_list_changes_nothing(q: Any, raw: Any) -> None:
    # the list's RPUSH is the script's first write and its type check: the stale
    # tombstone of the id, removed after it, stays too
    raw.zadd(q.keys.prefix + "done", {"t": 1})
    raw.set(q.keys.prefix + "pending", "garbage")
    raw.set(q.keys.prefix + "g:bad", "garbage")
    before = keys_of(raw, q)
    with pytest.raises(CorruptQueue, match=re.escape(q.keys.prefix + "pending")):
        await q.enqueue("x", id="t")
    assert keys_of(raw, q) == before
    raw.delete(q.keys.prefix + "pending")
    before = keys_of(raw, q)
    with pytest.raises(CorruptQueue, match=re.escape(q.keys.prefix + "g:bad")):
        await q.enqueue_many([Message("doomed", group="bad"), Message("fine")])
    assert keys_of(raw, q) == before


async def test_a_publish_with_one_garbled_subscriber_queue_reaches_none(
    server: RedisServer, queue_name: str, raw: Any
) -> None:
    from durq import AsyncTopic

    async with AsyncTopic(queue_name, server.url) as topic:
        await topic.subscribe("a")
        await topic.subscribe("b")
        b = topic.queue("b")
        raw.set(b.keys.prefix + "jobs", "garbage")
        with pytest.raises(CorruptQueue, match=re.escape(b.keys.prefix + "jobs")):
            await topic.publish("news", id="n1")
        assert await topic.queue("a").dequeue() is None
        raw.delete(b.keys.prefix + "jobs")
        await topic.publish("news", id="n1")
        for copy in (await topic.queue("a").dequeue(), await b.dequeue()):
            assert copy is not None and copy.id == "n1"


async def test_a_record_whose_group_is_not_utf8_does_not_hold_back_its_batch(
    q: Any, raw: Any
) -> None:
    await q.enqueue_many([Message("bad", id="bad", group="gg"), Message("good", id="good")])
    record = raw.hget(q.keys.prefix + "jobs", "bad")
    raw.hset(q.keys.prefix + "jobs", "bad", record.replace(b"\x02gg", b"\x02\xff\xfe"))
    jobs = await q.dequeue_many(5)
    assert sorted(j.id for j in jobs) == ["bad", "good"]
    assert await q.release_many(jobs) == [Outcome.OK, Outcome.OK]
    assert (await q.job("good")).state is JobState.COMPLETED
