"""A workflow id submitted again (issue 30, bug 3). Within ``result_ttl`` after its end
nothing changes (``created`` False, the handle knows the existing run); once its summary
expired, the same id runs afresh: its steps get new job ids (a new run), so whatever
its earlier steps left (dead letters, cancelled records, tombstones) does not stop
them. Before, the new submission said ``created=True`` and then hung: no step started,
and ``status()`` showed steps that never ran as done. And an id has one home, wherever
its steps are (found by the model test)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import durq
from durq.payloads import encode_result
from helpers import eventually
from worker.support import running_worker
from workflows.support import Front, courier, runs


def _flow(app: durq.App, log: str, flag: str) -> durq.Chain:
    t = app.tasks
    members = [t["square"].s(log, 1), t["dies_until"].si(log, "d", flag), t["square"].s(log, 2)]
    return durq.group(members).then(t["collect"].s(log))


async def test_a_workflow_id_runs_again_once_its_summary_expired(
    wapp: durq.App, log: str, front: Front, tmp_path: Path
) -> None:
    flag = str(tmp_path / "ok")
    wid = "album-42"  # an id derived from a record, as the docs recommend
    queue = wapp.queue(wapp.default_queue)
    queue.configure(dedup_window=3600)  # the first run's records outlive its summary
    first = await front.enqueue(_flow(wapp, log, flag), id=wid, result_ttl=0.5)
    assert first.created
    with running_worker(wapp):
        with pytest.raises(durq.WorkflowFailed, match=r"no .* yet"):
            await front.result(first, 10)
        again = await front.enqueue(_flow(wapp, log, flag), id=wid)
        assert not again.created  # within result_ttl: the same id changes nothing
        before = await front.status(first)
        assert before is not None and before.state == "failed"
        dead = before.steps[1].job_id
        assert queue.job(dead) is not None  # its dead letter stays

        async def expired() -> bool:
            return await front.status(first) is None

        deadline = time.monotonic() + 10
        while not await expired():
            assert time.monotonic() < deadline, "the summary did not expire"
            await asyncio.sleep(0.1)
        Path(flag).touch()
        second = await front.enqueue(_flow(wapp, log, flag), id=wid)
        assert second.created
        info = await front.status(second)
        assert info is not None and info.state == "running"
        assert all(s.job_id not in {x.job_id for x in before.steps} for s in info.steps)
        assert await front.result(second, 10) == 3
    callbacks = runs(log, "callback")
    assert [c["results"] for c in callbacks] == [[1, "d", 4]]
    assert queue.job(dead) is not None  # the first run's dead letter is untouched


async def test_a_handle_knows_the_run_of_the_workflow_it_found(
    wapp: durq.App, log: str, front: Front
) -> None:
    t = wapp.tasks
    flow = durq.chain(t["square"].s(log, 1), t["echo"].s())
    first = await front.enqueue(flow, id="known-1")
    again = await front.enqueue(flow, id="known-1")
    assert first.created and not again.created
    assert again.run == first.run and again.step_id(3) == first.step_id(3)
    info = await front.status(again)
    assert info is not None and info.run == first.run
    assert [s.job_id for s in info.steps] == [first.step_id(2), first.step_id(3)]
    bare = durq.WorkflowHandle(wapp, first.queue, first.id)
    with pytest.raises(durq.InvalidArgument, match="status"):
        bare.step_id(2)


async def test_a_report_of_an_earlier_run_changes_nothing(
    wapp: durq.App, log: str, front: Front, tmp_path: Path
) -> None:
    """A step of the first run that completes after the id was submitted again (it ran
    on when that run failed) does not count in the second run, whose step of the same
    node it is not."""
    flag = str(tmp_path / "ok")
    wid = "report-7"
    t = wapp.tasks
    members = [t["dies_until"].si(log, "d", flag), t["square"].s(log, 1), t["square"].s(log, 2)]
    flow = durq.group(members).then(t["collect"].s(log))
    first = await front.enqueue(flow, id=wid, result_ttl=0.3)
    queue = wapp.queue(wapp.default_queue)
    dying, late = queue.dequeue(), queue.dequeue()
    assert dying is not None and late is not None
    assert queue.requeue(dying, reason="broken", dead=True) is durq.Outcome.DEAD
    courier(queue)  # the workflow fails; `late` runs on (policy fail)
    eventually(lambda: first.status() is None, 10, "the summary to expire")
    Path(flag).touch()
    second = await front.enqueue(flow, id=wid)
    assert second.created
    # the first run's step completes now, by the holder of its lease
    assert queue.release_many([late], results=[encode_result(100)]) == [durq.Outcome.OK]
    courier(queue)
    info = await front.status(second)
    assert info is not None and info.waiting_on == {2: 3}
    with running_worker(wapp):
        assert await front.result(second, 10) == 3
    [callback] = runs(log, "callback")
    assert callback["results"] == ["d", 1, 4]


def _elsewhere(app: durq.App, log: str, queue: str) -> durq.Chain:
    sq = app.tasks["square"].options(queue=queue)
    return durq.group([sq.s(log, 1), sq.s(log, 2)]).then(
        app.tasks["collect"].options(queue=queue).s(log)
    )


async def test_a_workflow_id_submitted_again_with_its_steps_in_other_queues_changes_nothing(
    wapp: durq.App, log: str, front: Front, queue_name: str
) -> None:
    """Found by the model test: the id was looked for in its home only, and the home was
    a queue of the slot holding most steps. Submitted again with its steps in another
    queue (a task moved there between two deploys), the same id ran twice. A workflow
    with an id lives in the App's default queue, wherever its steps are."""
    old, new = f"{queue_name}-old", f"{queue_name}-new"  # two other slots
    first = await front.enqueue(_elsewhere(wapp, log, old), id="moved-7")
    again = await front.enqueue(_elsewhere(wapp, log, new), id="moved-7")
    assert first.created and not again.created
    assert first.queue == again.queue == wapp.default_queue and again.run == first.run
    # it runs once, to its end, under a worker that consumes its steps' queue only:
    # every worker delivers the outbox of the default queue, where its starts leave
    with running_worker(wapp, queues=[old, new]):
        assert await front.result(again, 10) == 2
    assert [c["results"] for c in runs(log, "callback")] == [[1, 4]]
    assert wapp.queue(new).stats().enqueued == 0
