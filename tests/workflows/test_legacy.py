"""Workflows of durq 0.1.0 run on under this version, in 0.1.0's layout
(lua/lib/workflows/legacy.lua; docs/workflows.md, "Upgrading"): here a chain of two
steps is written as 0.1.0 wrote it (one hash, a started step linked without a run, a
parked one), and this version completes it or cancels it. The upgrade test
(tests/deploy/test_upgrade.py) runs 0.1.0 itself beside this version."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import durq
from durq.app.workflows import WorkflowHandle
from durq.payloads import encode_result
from durq.protocol import workflows as wf

WID = "legacywf"


@pytest.fixture
def queue(redis_url: str, queue_name: str) -> Iterator[durq.Queue]:
    q = durq.Queue(queue_name, url=redis_url)
    yield q
    q.close()


def _plant(raw: redis.Redis, queue: durq.Queue) -> None:
    """0.1.0's chain [step 1, then step 2 with step 1's result]: step 1 enqueued, step 2
    parked (its spec: queue, group, priority, attempts, delay, mutable, head, tail)."""
    prefix = queue.keys.prefix
    wk = f"{prefix}wf:{WID}"
    spec = "\0".join([prefix, "", "0", "3", "0", "1", '["add",[', "],{}]"])
    raw.hset(wk, mapping={
        "state": "running", "policy": "fail", "ttl": 60000, "created": 1,
        "plan": json.dumps({"k": "chain", "c": []}), "Q": json.dumps({prefix: [1, 2]}),
        "bars": "", "t1": "s:2", "t2": "e", "L0": "1", "p2": spec,
    })  # fmt: skip
    raw.zadd(f"{prefix}wfr", {WID: 1})
    queue.enqueue(["add", [1], {}], id=f"{WID}.1")
    raw.hset(f"{prefix}wfl", f"{WID}.1", f"{prefix}\t{WID}\t1\tfail")


def _run_one(queue: durq.Queue, value: int) -> durq.Job:
    job = queue.dequeue()
    assert job is not None
    queue.release_many([job], results=[encode_result(value)])
    return job


def test_a_chain_that_0_1_0_submitted_runs_to_its_end_under_this_version(
    raw: redis.Redis, queue: durq.Queue, wapp: durq.App
) -> None:
    _plant(raw, queue)
    assert _run_one(queue, 5).id == f"{WID}.1"
    link = raw.hget(f"{queue.keys.prefix}wfl", f"{WID}.2")
    assert link == f"{queue.keys.prefix}\t{WID}\t2\tfail".encode()  # 0.1.0 reads it
    second = _run_one(queue, 7)  # started with step 1's result, under 0.1.0's id
    assert (second.id, second.payload) == (f"{WID}.2", ["add", [5], {}])
    handle = WorkflowHandle(wapp, queue.name, WID)
    assert handle.result(timeout=10) == 7
    wk = f"{queue.keys.prefix}wf:{WID}"
    assert raw.hget(wk, "state") == b"completed" and raw.hget(wk, "t1") is None
    assert raw.ttl(wk) > 0 and not raw.zscore(f"{queue.keys.prefix}wfr", WID)


def test_a_chain_that_0_1_0_submitted_is_cancelled_by_this_version(
    raw: redis.Redis, queue: durq.Queue, wapp: durq.App
) -> None:
    _plant(raw, queue)
    assert queue.cancel_workflow(WID) == (durq.CancelStatus.CANCELLED, "cancelled")
    first = queue.job(f"{WID}.1")
    assert first is not None and first.state is durq.JobState.CANCELLED
    assert queue.dequeue() is None and queue.job(f"{WID}.2") is None  # the parked never starts
    wk = f"{queue.keys.prefix}wf:{WID}"
    assert raw.hmget(wk, "state", "cancelled", "p2") == [b"cancelled", b"2", None]
    with pytest.raises(durq.Cancelled):
        WorkflowHandle(wapp, queue.name, WID).result(timeout=10)


def _deliver(queue: durq.Queue, *fields: str) -> None:
    """Apply one outbox entry as a courier does (workflow_deliver.lua)."""

    def op() -> Any:
        reply = yield wf.deliver_call("\0".join(fields).encode())
        return reply

    assert queue._run(op()) == b"OK"


def test_outbox_entries_in_0_1_0_s_layout_are_applied_once(
    raw: redis.Redis, queue: durq.Queue
) -> None:
    _plant(raw, queue)
    prefix = queue.keys.prefix
    for _ in range(2):  # a completion without the run, delivered twice: counted once
        _deliver(queue, "C", prefix, WID, "1", "fail", "5")
    assert queue.job(f"{WID}.2") is not None
    assert queue.stats().pending == 2  # step 1 (its release never came) and step 2
    link = f"{prefix}\t{WID}\t9\tfail"
    for _ in range(2):  # a start without sender and number: one job
        _deliver(queue, "S", prefix, f"{WID}.9", "", "0", "3", "0", link, '["add",[9],{}]')
    assert queue.stats().pending == 3
    _deliver(queue, "X", prefix, WID, f"{WID}.9")  # a stop without sender and number
    nine = queue.job(f"{WID}.9")
    assert nine is not None and nine.state is durq.JobState.CANCELLED
