"""Per-job options of a workflow step (issue 30, bug 8): ``queue``, ``group``,
``priority``, ``delay`` and ``expires`` apply (``max_attempts``, ``timeout`` and the
backoff come from the task); the others are refused at ``enqueue()`` with an error
naming the option. Before, every option but queue, group, priority and delay was
dropped silently: ``task.options(expires=0.5).s(...)`` ran a second later."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest

import durq
from durq.payloads import encode_result
from workflows.support import Front, courier


def _run_one(queue: durq.Queue, value: Any) -> durq.Job:
    job = queue.dequeue()
    assert job is not None
    queue.release_many([job], results=[encode_result(value)])
    return job


@pytest.mark.parametrize("where", ["home slot", "another slot"])
async def test_a_step_that_expires_before_it_starts_never_runs(
    wapp: durq.App, log: str, front: Front, where: str
) -> None:
    t = wapp.tasks
    home = wapp.queue(wapp.default_queue)
    step_name = wapp.default_queue if where == "home slot" else f"{wapp.default_queue}-b"
    brief = t["square"].options(queue=step_name, expires=0.3)
    members = [brief.s(log, 1), t["square"].s(log, 2), t["square"].s(log, 3)]
    handle = await front.enqueue(durq.group(members).then(t["collect"].s(log)))
    courier(home)  # its start, when it is in another slot
    time.sleep(0.5)
    steps = wapp.queue(step_name)
    info = await front.status(handle)
    assert info is not None
    expired = info.steps[0].job_id
    while (job := steps.dequeue()) is not None:  # never the expired step
        assert job.id != expired
    courier(steps)  # its end reaches the workflow: policy fail
    with pytest.raises(durq.WorkflowFailed, match="expired") as failed:
        await front.result(handle, 5)
    assert failed.value.error["job"] == expired
    got = steps.job(expired)
    assert got is not None and got.state is durq.JobState.EXPIRED


async def test_a_later_step_s_expiry_counts_from_its_start(
    wapp: durq.App, log: str, front: Front
) -> None:
    t = wapp.tasks
    queue = wapp.queue(wapp.default_queue)
    brief = t["echo"].options(expires=0.5)
    fixed = t["echo"].options(expires=datetime.datetime.now() + datetime.timedelta(seconds=0.5))
    late = await front.enqueue(durq.chain(t["square"].s(log, 1), brief.s()), on_failure="ignore")
    never = await front.enqueue(durq.chain(t["square"].s(log, 2), fixed.s()), on_failure="ignore")
    time.sleep(0.7)  # longer than either expiry, before the first steps ran
    _run_one(queue, 1)
    _run_one(queue, 4)
    job = queue.dequeue()  # the relative one started now: it has its 0.5 s
    assert job is not None and job.payload[1] == [1]
    assert queue.dequeue() is None  # the fixed time passed: it expired
    queue.release_many([job], results=[encode_result("late")])
    courier(queue)  # the expiry reaches its workflow (a death leaves through the outbox)
    assert await front.result(late, 5) == "late"
    error = durq.step_error(await front.result(never, 5))  # policy ignore: its error
    assert error is not None and error["reason"] == "expired"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"id": "x"}, "takes no id option"),
        ({"key": "k"}, "takes no key option"),
        ({"replace": True}, "takes no replace option"),
        ({"ttl": 5}, "takes no ttl option"),
        ({"debounce": 1}, "takes no debounce option"),
        ({"max_wait": 5}, "takes no max_wait option"),
        ({"keep_last": True}, "takes no keep_last option"),
        ({"priority": 11}, "priority must be an int in -10..10"),
        ({"group": ""}, "group"),
        ({"expires": 0}, "expires must be a number of seconds"),
        ({"expires": 1, "delay": 2}, "not after the delay"),
        ({"expires": datetime.datetime(2000, 1, 1)}, "in the past"),
    ],
    ids=lambda v: str(v),
)
async def test_an_option_a_step_cannot_take_is_refused_at_enqueue(
    wapp: durq.App, log: str, front: Front, options: dict[str, Any], match: str
) -> None:
    sq = wapp.tasks["square"]
    flow = durq.group([sq.s(log, 1), sq.options(**options).s(log, 2)])
    with pytest.raises(durq.InvalidArgument, match=match):
        await front.enqueue(flow)
    assert wapp.queue(wapp.default_queue).stats().enqueued == 0


async def test_the_options_a_step_takes_apply(wapp: durq.App, log: str, front: Front) -> None:
    t = wapp.tasks
    name = wapp.default_queue
    other = f"{name}/other"  # the same slot
    steps = [
        t["square"].options(group="tenant", priority=5).s(log, 1),
        t["square"].options(queue=other).s(log, 2),
        t["square"].options(delay=60).s(log, 3),
        t["square"].options(expires=60).s(log, 4),
    ]
    handle = await front.enqueue(durq.group(steps))
    info = await front.status(handle)
    assert info is not None
    ids = [s.job_id for s in info.steps]
    queue = wapp.queue(name)
    first = queue.job(ids[0])
    assert first is not None and (first.group, first.priority) == ("tenant", 5)
    assert wapp.queue(other).job(ids[1]) is not None
    delayed = queue.job(ids[2])
    assert delayed is not None and delayed.state is durq.JobState.DELAYED
    expiring = queue.job(ids[3])
    assert expiring is not None and expiring.expires_at is not None
    assert 50 < expiring.expires_at - time.time() <= 60
