"""The dashboard and durable steps (issue 37): the job page lists a job's steps, sleeps
and waits (never their values); ``/metrics`` counts parked jobs by reason."""

from __future__ import annotations

from collections.abc import Callable

import httpx

import durq
from dashboard.support import LiveServer
from durq.protocol import durable

Serve = Callable[..., LiveServer]


def test_the_job_page_lists_steps_and_metrics_count_parked_jobs_by_reason(
    redis_url: str, queue_name: str, serve: Serve
) -> None:
    with durq.Queue(queue_name, redis_url) as queue:
        queue.enqueue_many(["a", "b"])
        sleeper, waiter = queue.dequeue(), queue.dequeue()
        assert sleeper is not None and waiter is not None
        body = durable.step_body({"secret": "hunter2"}, 40, 1, 1 << 20)
        assert (
            queue._run(
                durable.record_step(queue.keys, sleeper.id, sleeper.token, "charge", body)
            ).tag
            == "ok"
        )
        op = durable.sleep(queue.keys, sleeper.id, sleeper.token, "nap", after=60_000)
        assert queue._run(op).tag == "parked"
        op = durable.wait(queue.keys, waiter.id, waiter.token, "w", "approve:7", 60_000)
        assert queue._run(op).tag == "parked"
        dash = serve(redis_url)
        with httpx.Client(base_url=dash.url) as client:
            page = client.get(f"/queue/job?q={queue_name}&id={sleeper.id}")
            assert page.status_code == 200
            assert "Durable steps" in page.text
            assert "charge" in page.text and "nap" in page.text and "asleep" in page.text
            assert "hunter2" not in page.text
            page = client.get(f"/queue/job?q={queue_name}&id={waiter.id}")
            assert "approve:7" in page.text and "waiting" in page.text
            metrics = client.get("/metrics").text
        assert f'durq_queue_parked{{queue="{queue_name}",reason="sleep"}} 1.0' in metrics
        assert f'durq_queue_parked{{queue="{queue_name}",reason="wait"}} 1.0' in metrics
