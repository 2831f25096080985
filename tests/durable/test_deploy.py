"""A deploy between two runs of a job (issue 37): the function edited to add a step
before the one it stopped at resumes the job in flight; the steps it stored are found by
name and do not run again."""

from __future__ import annotations

import durq
from durable.apps import effect, events
from helpers import eventually
from worker.support import running_worker


def test_a_deploy_that_adds_a_step_resumes_a_job_in_flight(
    redis_url: str, queue_name: str, log: str
) -> None:
    old = durq.App(redis_url, default_queue=queue_name, lease=2.0)
    new = durq.App(redis_url, default_queue=queue_name, lease=2.0)

    @old.task(name="order", result=True)
    async def order_v1(log: str) -> str:
        await durq.step("charge", effect, log, "charge", "v1")
        await durq.wait_for("approved")
        await durq.step("ship", effect, log, "ship", "v1")
        return "v1"

    @new.task(name="order", result=True)
    async def order_v2(log: str) -> str:
        await durq.step("charge", effect, log, "charge", "v2")
        await durq.step("receipt", effect, log, "receipt", "v2")  # added by the deploy
        await durq.wait_for("approved")
        await durq.step("ship", effect, log, "ship", "v2")
        return "v2"

    try:
        queue = old.queue(queue_name)
        with running_worker(old, concurrency=1):
            handle = old.tasks["order"].enqueue(log)
            eventually(lambda: queue.parked().waiting == 1, 10)
        new.signal("approved", None)
        with running_worker(new, concurrency=1):
            assert handle.result(timeout=10) == "v2"
        assert [(e["event"], e["key"]) for e in events(log)] == [
            ("charge", "v1"),
            ("receipt", "v2"),
            ("ship", "v2"),
        ]
    finally:
        old.close()
        new.close()
