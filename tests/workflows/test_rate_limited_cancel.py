"""A running step of a cancelled workflow whose task raises RateLimited ends cancelled:
the give-back of RateLimited must not undo the cancel flag the workflow's cancel set
(issue 30, bug 1). Driven through the queue's operations, without a worker."""

from __future__ import annotations

import durq
from durq.protocol import limits as limit_ops
from durq.protocol.status import Status


def test_a_cancelled_workflows_step_given_back_by_rate_limited_ends_cancelled(
    wapp: durq.App, log: str
) -> None:
    t = wapp.tasks
    queue = wapp.queue(wapp.default_queue)
    flow_of = durq.group([t["square"].s(log, i) for i in range(2)]).then(t["collect"].s(log))
    handle = flow_of.enqueue()
    step = queue.dequeue()
    assert step is not None
    assert handle.cancel() is durq.CancelStatus.CANCELLED  # the running step is flagged
    assert queue._run(limit_ops.rate_limited(queue.keys, [(step, 0.0, "queue")])) == [
        Status.CANCELLED
    ]
    assert queue.dequeue() is None  # it did not come back; nothing else starts
    info = queue.job(step.id)
    assert info is not None and info.state is durq.JobState.CANCELLED
    status = handle.status()
    assert status is not None and status.state == "cancelled"
    assert status.counts == {"cancelled": 3}
