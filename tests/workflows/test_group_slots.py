"""A workflow that fails or is cancelled gives back the group slots its steps held
(issue 30, bug 2): with ``group_limit=1``, a step backing off holds its group's slot and
a job J of that group waits; once the workflow ends early, its step ends cancelled, the
group is offered again and an idle consumer is woken, so J runs. In the home's slot
(the failure or cancel itself) and in another one (the 'X'/'K' outbox entries), through
both front ends."""

from __future__ import annotations

import threading
import time

import pytest

import durq
from workflows.support import Front, courier


@pytest.mark.parametrize("how", ["cancel", "fail"])
@pytest.mark.parametrize("where", ["home slot", "another slot"])
async def test_a_workflow_that_ends_early_gives_its_group_slot_back(
    wapp: durq.App, log: str, front: Front, how: str, where: str
) -> None:
    t = wapp.tasks
    home_name = f"{wapp.default_queue}/o"  # the other steps' queue: the workflow's home
    step_name = wapp.default_queue if where == "home slot" else f"{wapp.default_queue}-b"
    home, steps_q = wapp.queue(home_name), wapp.queue(step_name)
    steps_q.configure(group_limit=1)
    held = t["square"].options(queue=step_name, group="g")
    others = t["square"].options(queue=home_name)
    members = [held.s(log, 1), others.s(log, 2), others.s(log, 3)]
    flow = durq.group(members).then(t["collect"].options(queue=home_name).s(log))
    handle = await front.enqueue(flow)
    assert handle.queue == (step_name if where == "home slot" else home_name)
    home = wapp.queue(handle.queue)
    courier(home)  # the start of the step in another slot, if it is there
    queue = front.queue(step_name)
    step = await queue.dequeue()
    info = await front.status(handle)
    assert step is not None and info is not None and step.id == info.steps[0].job_id
    # it fails once and backs off: it keeps the group's slot while it waits
    assert await queue.requeue(step, reason="flaky", delay=60) is durq.Outcome.RETRYING
    job = await queue.enqueue_many([("square", [log, 9], {})], group="g")  # J
    assert await queue.dequeue() is None  # J waits for the slot

    # an idle consumer of the queue blocks for J; the workflow's end must wake it
    got: list[durq.Job | None] = []
    waiter = threading.Thread(target=lambda: got.append(_take(wapp, step_name, 5.0)))
    waiter.start()
    time.sleep(0.3)
    began = time.monotonic()
    if how == "cancel":
        assert await front.cancel(handle) is durq.CancelStatus.CANCELLED
    else:
        dead = wapp.queue(home_name).dequeue()
        assert dead is not None
        assert wapp.queue(home_name).requeue(dead, reason="broken", dead=True) is durq.Outcome.DEAD
        courier(wapp.queue(home_name))  # (a death always leaves through the outbox)
        courier(home)  # the death reaches the workflow: it fails
    courier(home)  # the stop of the step in another slot, if it is there
    waiter.join(10)
    assert got and got[0] is not None and got[0].id == job[0].id, got
    assert time.monotonic() - began < 2.5, "the consumer was not woken"
    stopped = steps_q.job(step.id)
    assert stopped is not None and stopped.state is durq.JobState.CANCELLED
    info = await front.status(handle)
    assert info is not None and info.state == ("cancelled" if how == "cancel" else "failed")


def _take(app: durq.App, name: str, wait: float) -> durq.Job | None:
    # a consumer of its own (connection and thread), as an idle worker is
    queue = durq.Queue(name, app.url)
    try:
        return queue.dequeue(wait=wait)
    finally:
        queue.close()
