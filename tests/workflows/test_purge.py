"""A workflow under ``on_failure="wait"`` whose dead step can no longer be replayed,
because its dead letter was purged or evicted by ``dead_cap``: the workflow fails (the
step died for good), its result raises ``WorkflowFailed`` naming the purge, in one slot
and across slots (through the outbox). A purge applied twice and its outbox entry
delivered twice count once. Afterwards nothing of the workflow is left in Redis but its
result and summary (SCAN)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import redis

import durq
from durq.codec import PayloadCodec
from durq.keys import OutboxKeys
from durq.protocol import lifecycle
from durq.protocol import workflows as wf
from durq.protocol.calls import Op
from helpers import eventually
from worker.support import running_worker
from workflows.support import leftovers, runs


def _waiting(handle: durq.WorkflowHandle) -> durq.WorkflowInfo:
    """The workflow's status once it waits for a dead step."""
    info: durq.WorkflowInfo = eventually(
        lambda: (i := handle.status()) and i.dead and i, 10, "a dead step"
    )
    return info


def _raises_promptly(handle: durq.WorkflowHandle, why: str, step: str) -> dict[str, Any]:
    """The workflow's result raises WorkflowFailed naming ``step`` and ``why``: the
    reason it died for good; returns that reason."""
    started = time.monotonic()
    with pytest.raises(durq.WorkflowFailed, match=f"{why}: its dead letter was {why}") as failed:
        handle.result(10)
    assert time.monotonic() - started < 5
    error = failed.value.error
    assert error["reason"] == "child_failed" and error["job"] == step
    inner: dict[str, Any] = error["error"]
    assert isinstance(inner, dict) and inner["reason"] == why
    return inner


def _group_waiting_on_step_4(
    wapp: durq.App, log: str, tmp_path: Path
) -> tuple[durq.WorkflowHandle, durq.Queue]:
    """A group under "wait" whose step 4 dies for good (its flag never appears), with a
    callback; and the queue of its steps."""
    t = wapp.tasks
    flag = str(tmp_path / "never")
    members = [t["square"].s(log, 3), t["dies_until"].s(log, "late", flag)]
    handle = durq.group(members).then(t["collect"].s(log)).enqueue(on_failure="wait")
    return handle, wapp.queue(wapp.default_queue)


def test_a_purged_dead_step_fails_its_waiting_workflow(
    wapp: durq.App, log: str, raw: redis.Redis, tmp_path: Path
) -> None:
    handle, queue = _group_waiting_on_step_4(wapp, log, tmp_path)
    with running_worker(wapp):
        info = _waiting(handle)
        assert list(info.dead) == [4] and info.state == "running"
        with pytest.raises(TimeoutError):
            handle.result(0.2)
        assert queue.purge(handle.step_id(4)) == 1
        inner = _raises_promptly(handle, "purged", handle.step_id(4))
    assert inner["dead"]["reason"] == "failed" and "late: no " in inner["dead"]["message"]
    ended = handle.status()
    assert ended is not None and ended.state == "failed" and not ended.dead
    assert runs(log, "callback") == []
    assert queue.stats().purged == 1
    assert leftovers(raw, [wapp.default_queue], [handle.id]) == []


def test_a_dead_step_evicted_by_dead_cap_fails_its_waiting_workflow(
    wapp: durq.App, log: str, raw: redis.Redis, tmp_path: Path
) -> None:
    t = wapp.tasks
    queue = wapp.queue(wapp.default_queue)
    queue.configure(dead_cap=1)
    flag = str(tmp_path / "never")
    handle = durq.group([t["dies_until"].s(log, "first", flag)]).enqueue(on_failure="wait")
    with running_worker(wapp):
        [dead] = _waiting(handle).dead
        # another dead letter: the cap evicts the step's
        other = durq.chain(t["dies"].s(log, "other")).enqueue()
        inner = _raises_promptly(handle, "evicted", handle.step_id(dead))
        with pytest.raises(durq.WorkflowFailed, match="other gives up"):
            other.result(10)
    assert inner["dead"]["reason"] == "failed"
    assert queue.stats().dead_evicted == 1
    assert leftovers(raw, [wapp.default_queue], [handle.id, other.id]) == []


def test_a_purge_in_another_slot_fails_the_workflow_through_the_outbox(
    wapp: durq.App, log: str, raw: redis.Redis, tmp_path: Path
) -> None:
    t = wapp.tasks
    home_queue = wapp.default_queue
    other = f"{home_queue}-b"  # another hash tag: another slot
    flag = str(tmp_path / "never")
    members = [
        t["square"].s(log, 1),
        t["square"].s(log, 2),
        t["dies_until"].options(queue=other).s(log, "far", flag),
    ]
    handle = durq.group(members).then(t["collect"].s(log)).enqueue(on_failure="wait")
    assert handle.queue == home_queue
    far = wapp.queue(other)
    with running_worker(wapp, queues=[home_queue, other]):
        info = _waiting(handle)
        [dead] = info.dead
        step = handle.step_id(dead)
        assert far.purge(step) == 1
        inner = _raises_promptly(handle, "purged", step)
    assert inner["dead"]["reason"] == "failed"
    assert runs(log, "callback") == []
    assert leftovers(raw, [home_queue, other], [handle.id]) == []


def _outbox(queue: durq.Queue) -> OutboxKeys:
    return OutboxKeys(queue.keys.name, queue.keys.namespace)


def _apply(entry: bytes) -> Op[object]:
    reply = yield wf.deliver_call(entry)
    return reply


def test_a_purge_applied_twice_and_its_entry_delivered_twice_count_once(
    wapp: durq.App, log: str, raw: redis.Redis, tmp_path: Path
) -> None:
    handle, queue = _group_waiting_on_step_4(wapp, log, tmp_path)
    with running_worker(wapp):
        _waiting(handle)
    step = handle.step_id(4)
    # nothing is delivered from here on: the entry is applied by hand, twice
    assert queue.purge(step) == 1
    assert queue.purge([step, step]) == 0
    jobs, _, _ = queue._run(lifecycle.fetch(_outbox(queue), PayloadCodec(), 10, 30.0))
    gone = [j for j in jobs if b'"reason":"purged"' in j.data]
    assert len(gone) == 1 and gone[0].data.startswith(b"D\0")
    for _ in range(2):
        assert queue._run(_apply(gone[0].data)) == b"OK"
    queue._run(lifecycle.release(_outbox(queue), jobs))
    with pytest.raises(durq.WorkflowFailed, match="purged"):
        handle.result(1)
    stats = raw.hgetall(f"{queue.keys.prefix}stats")
    assert stats[b"wf_failed"] == b"1"
    assert queue.stats().purged == 1
    # the outbox's wake marker stays: no worker came to find the outbox empty
    left = leftovers(raw, [wapp.default_queue], [handle.id])
    assert [key for key in left if not key.endswith(":wfo:wake")] == []


async def test_apurge_fails_the_waiting_workflow(wapp: durq.App, log: str, tmp_path: Path) -> None:
    t = wapp.tasks
    flag = str(tmp_path / "never")
    handle = await durq.group([t["dies_until"].s(log, "a", flag)]).aenqueue(on_failure="wait")
    queue = wapp.aqueue(wapp.default_queue)
    with running_worker(wapp):
        info = None
        for _ in range(200):
            info = await handle.astatus()
            if info is not None and info.dead:
                break
            await asyncio.sleep(0.05)
        assert info is not None and info.dead
        assert await queue.purge_all() == 1
        with pytest.raises(durq.WorkflowFailed, match="purged"):
            await handle.aresult(10)
    await wapp.aclose()
