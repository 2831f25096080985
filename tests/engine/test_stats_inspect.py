"""Stats, job details and dead-letter listings reflect what happened."""

from __future__ import annotations

from typing import Any

import pytest

from durq import JobState, Message
from engine.support import server_time


async def test_a_new_queue_has_zero_everything(q: Any, raw: Any) -> None:
    stats = await q.stats()
    assert stats.name == q.name
    assert stats.size == 0
    assert (stats.enqueued, stats.completed, stats.dead, stats.groups) == (0, 0, 0, 0)
    assert stats.server_time == pytest.approx(server_time(raw), abs=1)


async def test_sizes_track_jobs_through_every_state(q: Any) -> None:
    await q.enqueue_many(["a", "b", "c", "d"])
    await q.enqueue("later", delay=60)
    jobs = await q.dequeue_many(3)
    await q.release(jobs[0])
    await q.requeue(jobs[1], dead=True, reason="x")
    stats = await q.stats()
    assert (stats.pending, stats.delayed, stats.active, stats.dead) == (1, 1, 1, 1)
    assert stats.size == 3
    assert (stats.enqueued, stats.completed, stats.dead_lettered, stats.failed) == (5, 1, 1, 1)


async def test_job_details_follow_a_job_through_its_life(q: Any) -> None:
    await q.enqueue({"v": 1}, id="life", priority=2, group="g", key="k", max_attempts=2)
    info = await q.job("life")
    assert (info.state, info.priority, info.group, info.key) == (JobState.PENDING, 2, "g", "k")
    assert info.payload() == {"v": 1}
    assert info.dequeued_at is None and info.lease_deadline is None
    job = await q.dequeue()
    assert (await q.job("life")).state is JobState.ACTIVE
    await q.requeue(job, reason="again", delay=30)
    info = await q.job("life")
    assert (info.state, info.failures, info.deliveries) == (JobState.DELAYED, 1, 1)
    assert info.requeued_at is not None
    assert info.due_at == pytest.approx(info.requeued_at + 30, abs=0.01)
    assert not info.corrupt


async def test_a_job_nobody_ever_saw_has_no_details(q: Any) -> None:
    assert await q.job("never") is None


async def test_counters_count_each_kind_of_event(q: Any) -> None:
    await q.enqueue_many([Message(1, key="k"), Message(2, key="k")])  # 1 deduplicated
    await q.enqueue(3, key="k", replace=True)  # supersedes 1
    job = await q.dequeue()
    await q.defer(job)
    job = await q.dequeue()
    await q.requeue(job, delay=0)
    job = await q.dequeue()
    await q.requeue(job, dead=True)
    await q.replay_all()
    await q.release(await q.dequeue())
    stats = await q.stats()
    assert stats.enqueued == 2
    assert stats.deduplicated == 1
    assert stats.superseded == 1
    assert stats.deferred == 1
    assert (stats.failed, stats.retried, stats.dead_lettered) == (2, 1, 1)
    assert (stats.replayed, stats.completed) == (1, 1)
    assert stats.size == 0


async def test_queues_with_different_names_or_namespaces_are_independent(make_q: Any) -> None:
    a = make_q()
    b = make_q(name=a.name + "-other")
    c = make_q(namespace="elsewhere")
    await a.enqueue("for a")
    assert await b.dequeue() is None
    assert await c.dequeue() is None
    assert (await a.dequeue()).payload == "for a"


async def test_child_queues_share_their_parent_slot_but_not_its_jobs(make_q: Any) -> None:
    parent = make_q()
    child = make_q(name=parent.name + "/thumbs")
    assert child.keys.prefix.startswith(parent.keys.prefix[:-1].rsplit(":", 1)[0])
    await child.enqueue("c")
    assert await parent.dequeue() is None
    assert (await child.dequeue()).payload == "c"


async def test_check_names_the_keys_of_another_type_and_nothing_for_a_sound_queue(
    q: Any, raw: Any
) -> None:
    await q.enqueue("x")
    assert await q.check() == []
    raw.set(q.keys.prefix + "delayed", "garbage")
    raw.rpush(q.keys.prefix + "conf", "garbage")
    problems = await q.check()
    assert len(problems) == 2
    assert any(q.keys.prefix + "delayed" in p and "string" in p for p in problems)
    assert any(q.keys.prefix + "conf" in p and "list" in p for p in problems)


async def test_a_queue_lists_itself_in_its_namespace_when_it_first_enqueues(
    q: Any, raw: Any
) -> None:
    assert not raw.sismember("durq:queues", q.name)
    await q.enqueue("x")
    assert raw.sismember("durq:queues", q.name)
