"""A dead-lettered step under each failure policy, with an in-process worker; afterwards
nothing of the workflow is left in Redis but its result and summary (SCAN)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

import durq
from helpers import eventually
from worker.support import running_worker
from workflows.support import leftovers, runs


def _settle(app: durq.App, queue: str) -> None:
    """One dequeue: it discards the ids of cancelled steps still listed (as it does
    for superseded jobs), so the lists are as a running worker leaves them."""
    assert app.queue(queue).dequeue() is None


def test_fail_ends_the_workflow_and_cancels_the_rest(
    wapp: durq.App, log: str, raw: redis.Redis
) -> None:
    t = wapp.tasks
    queue = wapp.default_queue
    other = f"{queue}-b"
    members = [t["dies"].s(log, "bad")] + [t["square"].s(log, i) for i in range(10)]
    members += [t["square"].options(queue=other).s(log, 10 + i) for i in range(3)]
    handle = durq.group(members).then(t["collect"].s(log)).enqueue()
    chained = durq.chain(t["square"].s(log, 99), t["dies"].si(log, "bad2"), t["echo"].s()).enqueue()
    # one job at a time, and the other queue not consumed yet: the dead step comes
    # first, the rest is still pending when the workflow fails
    with running_worker(wapp, queues=[queue], concurrency=1):
        with pytest.raises(durq.WorkflowFailed, match="bad gives up") as failed:
            handle.result(10)
        with pytest.raises(durq.WorkflowFailed, match="bad2 gives up"):
            chained.result(10)
    error = failed.value.error
    assert error["reason"] == "child_failed" and error["job"] == handle.step_id(3)
    assert error["error"]["reason"] == "failed"
    assert runs(log, "callback") == []
    info = handle.status()
    assert info is not None and info.state == "failed"
    counts = info.counts
    assert counts["dead"] == 1 and counts.get("waiting", 0) == 0
    assert counts["cancelled"] >= 3  # the other queue's steps never ran; the callback
    assert [s.state for s in info.steps][-1] == "cancelled"
    chain_info = chained.status()
    assert chain_info is not None and [s.state for s in chain_info.steps][-1] == "cancelled"
    # a worker of the other queue finds nothing to run
    with running_worker(wapp, queues=[other]):
        _settle(wapp, other)
    _settle(wapp, queue)
    assert len(runs(log)) < 14 + 2
    assert all(r["key"] != "square-10" for r in runs(log))
    assert leftovers(raw, [queue, other], [handle.id, chained.id]) == []


def test_ignore_counts_the_dead_step_with_its_error(
    wapp: durq.App, log: str, raw: redis.Redis
) -> None:
    t = wapp.tasks
    members = [t["square"].s(log, 1), t["dies"].s(log, "bad"), t["square"].s(log, 2)]
    handle = durq.group(members).then(t["collect"].s(log)).enqueue(on_failure="ignore")
    chained = durq.chain(t["dies"].s(log, "first"), t["echo"].s()).enqueue(on_failure="ignore")
    with running_worker(wapp):
        assert handle.result(10) == 3
        result = chained.result(10)
    [callback] = runs(log, "callback")
    first, error, second = callback["results"]
    assert (first, second) == (1, 4)
    assert durq.step_error(error) == {"reason": "failed", "message": "bad gives up", "attempt": 1}
    assert durq.step_error(result) == {
        "reason": "failed", "message": "first gives up", "attempt": 1
    }  # fmt: skip
    assert durq.step_error(first) is None
    assert leftovers(raw, [wapp.default_queue], [handle.id, chained.id]) == []


def test_wait_waits_for_a_replay(
    wapp: durq.App, log: str, raw: redis.Redis, tmp_path: Path
) -> None:
    t = wapp.tasks
    flag = str(tmp_path / "fixed")
    members = [t["square"].s(log, 3), t["dies_until"].s(log, "late", flag)]
    handle = durq.group(members).then(t["collect"].s(log)).enqueue(on_failure="wait")
    queue = wapp.queue(wapp.default_queue)
    with running_worker(wapp):
        info = eventually(lambda: (i := handle.status()) and i.dead and i, 10, "a dead step")
        assert info.state == "running"
        assert list(info.dead) == [4] and info.dead[4]["reason"] == "failed"
        assert info.waiting_on == {2: 1}
        with pytest.raises(TimeoutError):
            handle.result(0.3)
        Path(flag).touch()
        assert queue.replay(handle.step_id(4)) == 1
        assert handle.result(10) == 2
    [callback] = runs(log, "callback")
    assert callback["results"] == [9, "late"]
    info = handle.status()
    assert info is not None and info.state == "completed" and not info.dead
    assert leftovers(raw, [wapp.default_queue], [handle.id]) == []
