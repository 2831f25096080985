"""Durable steps at the protocol level (issue 37), through both front ends: a step is
recorded only by the holder of the current lease (fenced), once; a sleep or a wait
parks its job without an attempt counted or a slot held; a signal is kept for its ttl,
wakes every waiter, and a wait past its deadline records a timeout."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from durq.models import Parked
from durq.protocol import durable

KEEP = 60_000  # ms: a sleep that does not end during a test


async def run(q: Any, op: Any) -> Any:
    return await q._run(op)


def body(value: Any) -> bytes:
    return durable.step_body(value, 1, 1, 1 << 20)


async def test_a_worker_whose_lease_was_taken_cannot_record_a_step(q: Any) -> None:
    await q.enqueue({"n": 1})
    first = await q.dequeue(lease=0.2)
    await asyncio.sleep(0.4)  # its lease ran out: the next dequeue hands it out again
    second = await q.dequeue(lease=10)
    assert second is not None and second.id == first.id and second.token != first.token
    stale = await run(q, durable.record_step(q.keys, first.id, first.token, "charge", body(1)))
    assert stale.tag == "refused"
    fresh = await run(q, durable.record_step(q.keys, second.id, second.token, "charge", body(2)))
    assert fresh.tag == "ok"
    again = await run(q, durable.record_step(q.keys, second.id, second.token, "charge", body(3)))
    assert again.tag == "kept" and orjson.loads(again.value)["v"] == 2  # the first wins
    assert [(s.name, s.value) for s in await q.steps(first.id)] == [("charge", 2)]


async def test_a_sleep_parks_the_job_without_counting_an_attempt(q: Any) -> None:
    await q.enqueue({"n": 1})
    job = await q.dequeue(lease=10)
    reply = await run(q, durable.sleep(q.keys, job.id, job.token, "nap", after=KEEP))
    assert reply.tag == "parked"
    stats = await q.stats()
    assert (stats.active, stats.delayed) == (0, 1)
    assert await q.parked() == Parked(asleep=1, waiting=0)
    info = await q.job(job.id)
    assert info is not None and info.attempts == 0
    [nap] = await q.steps(job.id)
    assert (nap.name, nap.kind, nap.state) == ("nap", "sleep", "asleep")
    # the old lease is gone with the job: it records nothing
    late = await run(q, durable.record_step(q.keys, job.id, job.token, "x", body(1)))
    assert late.tag == "refused"


async def test_a_sleep_whose_end_passed_returns_at_once(q: Any) -> None:
    await q.enqueue({"n": 1})
    job = await q.dequeue(lease=10)
    reply = await run(q, durable.sleep(q.keys, job.id, job.token, "nap", after=0))
    assert reply.tag == "done"
    assert (await q.stats()).active == 1


async def wait(q: Any, job: Any, signal: str, timeout: int | None = None) -> Any:
    return await run(q, durable.wait(q.keys, job.id, job.token, "w", signal, timeout))


async def test_a_signal_sent_before_the_wait_is_delivered_when_it_is_reached(q: Any) -> None:
    await q.signal("approve:1", {"by": "ada"})
    await q.enqueue({"n": 1})
    job = await q.dequeue(lease=10)
    reply = await wait(q, job, "approve:1")
    assert reply.tag == "record"
    record = orjson.loads(reply.value)
    assert (record["k"], record["v"]) == ("signal", {"by": "ada"})


async def test_one_signal_wakes_every_job_waiting_for_it(q: Any) -> None:
    await q.enqueue_many([{"n": i} for i in range(3)])
    jobs = [await q.dequeue(lease=10) for _ in range(3)]
    for job in jobs:
        assert (await wait(q, job, "go")).tag == "parked"
    assert (await q.parked()).waiting == 3
    assert await q.signal("go", [1, 2]) == 3
    assert (await q.parked()).waiting == 0
    again = [await q.dequeue(lease=10) for _ in range(3)]
    assert sorted(j.id for j in again) == sorted(j.id for j in jobs)
    for job in again:
        reply = await wait(q, job, "go")
        assert reply.tag == "record" and orjson.loads(reply.value)["v"] == [1, 2]


async def test_a_wait_past_its_deadline_records_a_timeout_and_a_late_signal_changes_nothing(
    q: Any,
) -> None:
    await q.enqueue({"n": 1})
    job = await q.dequeue(lease=10)
    assert (await wait(q, job, "late", timeout=200)).tag == "parked"
    await asyncio.sleep(0.35)
    again = await q.dequeue(lease=10)  # promoted at its deadline, like a delayed job
    assert again is not None and again.id == job.id
    reply = await wait(q, again, "late", timeout=200)
    assert reply.tag == "record" and orjson.loads(reply.value)["k"] == "timeout"
    await q.signal("late", 1)
    [w] = await q.steps(job.id)
    assert w.state == "timed out"


async def test_a_signal_is_kept_only_for_its_ttl(q: Any) -> None:
    await q.signal("brief", 1, ttl=0.1)
    await asyncio.sleep(0.25)
    await q.enqueue({"n": 1})
    job = await q.dequeue(lease=10)
    assert (await wait(q, job, "brief")).tag == "parked"


async def test_a_signal_sent_again_with_its_id_changes_nothing(q: Any) -> None:
    await q.enqueue({"n": 1})
    job = await q.dequeue(lease=10)
    assert (await wait(q, job, "once")).tag == "parked"
    assert await q.signal("once", 1, id="sig-1") == 1
    assert await q.signal("once", 1, id="sig-1") == 0
    assert (await q.stats()).pending == 1


async def test_a_parked_job_holds_neither_its_groups_slot_nor_a_place_under_max_active(
    q: Any,
) -> None:
    await q.configure(limits={"tenant": 1}, max_active=1)
    await q.enqueue({"n": 1}, group="tenant")
    await q.enqueue({"n": 2}, group="tenant")
    first = await q.dequeue(lease=10)
    assert await q.dequeue(lease=10) is None  # the group's one slot, max_active's one place
    assert (await wait(q, first, "resume")).tag == "parked"
    second = await q.dequeue(lease=10)
    assert second is not None and second.payload == {"n": 2}
    await q.release(second)
    assert await q.signal("resume", None) == 1
    back = await q.dequeue(lease=10)
    assert back is not None and back.id == first.id


async def test_a_parked_job_can_be_cancelled_and_never_runs_again(q: Any) -> None:
    await q.enqueue({"n": 1})
    job = await q.dequeue(lease=10)
    assert (await run(q, durable.sleep(q.keys, job.id, job.token, "nap", after=KEEP))).tag == (
        "parked"
    )
    [result] = await q.cancel(job.id)
    assert result.status.name == "CANCELLED"
    info = await q.job(job.id)
    assert info is not None and info.state.name == "CANCELLED"
    assert await q.parked() == Parked(0, 0)
    assert await q.signal("anything", 1) == 0


async def test_a_cancel_asked_while_a_job_runs_ends_it_at_its_sleep(q: Any) -> None:
    await q.enqueue({"n": 1})
    job = await q.dequeue(lease=10)
    [result] = await q.cancel(job.id)
    assert result.status.name == "CANCELLING"
    reply = await run(q, durable.sleep(q.keys, job.id, job.token, "nap", after=KEEP))
    assert reply.tag == "cancelled"
    info = await q.job(job.id)
    assert info is not None and info.state.name == "CANCELLED"


async def test_a_parked_job_whose_expiry_comes_first_ends_expired_then(q: Any) -> None:
    await q.enqueue({"n": 1}, expires=1.0)
    job = await q.dequeue(lease=10)
    reply = await run(q, durable.sleep(q.keys, job.id, job.token, "nap", after=KEEP))
    # due at its expiry, not at its end (the server's clock is this machine's)
    assert reply.tag == "parked" and int(reply.value) < time.time() * 1000 + KEEP / 2
    await asyncio.sleep(1.3)
    assert await q.dequeue(lease=10) is None
    info = await q.job(job.id)
    assert info is not None and info.state.name == "EXPIRED"
    assert await q.parked() == Parked(0, 0)


async def test_the_last_signal_sent_is_the_one_kept_even_within_a_millisecond(q: Any) -> None:
    for value in range(5):  # most of them in the same millisecond of the server's clock
        await q.signal("latest", value)
    await q.enqueue({"n": 1})
    job = await q.dequeue(lease=10)
    reply = await wait(q, job, "latest")
    assert reply.tag == "record" and orjson.loads(reply.value)["v"] == 4
