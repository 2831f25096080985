"""``@app.task(rate=durq.Rate(...))``: a rate limit of one task's own, built on the
queues' limiter (the issue: a limited task needed its own queue, set up by hand)."""

from __future__ import annotations

import time

import pytest

import durq
from helpers import eventually
from worker.support import running_worker


def test_a_task_with_a_rate_starts_no_faster_than_it_and_the_other_tasks_are_not_held(
    redis_url: str, queue_name: str
) -> None:
    app = durq.App(redis_url, default_queue=queue_name)
    starts: dict[str, list[float]] = {"sms": [], "email": []}

    @app.task(rate=durq.Rate(2, per=1.0))
    def send_sms(n: int) -> None:
        starts["sms"].append(time.monotonic())

    @app.task
    def send_email(n: int) -> None:
        starts["email"].append(time.monotonic())

    assert send_sms.queue == f"{queue_name}.send_sms"
    send_sms.enqueue_many([(i,) for i in range(5)])
    send_email.enqueue_many([(i,) for i in range(5)])
    # -q names the task's declared queue: its queue of its own is consumed too
    with running_worker(app, queues=[queue_name]):
        eventually(lambda: len(starts["sms"]) == 5 and len(starts["email"]) == 5, 20)
    sms = starts["sms"]
    # 2 per second, burst 1: the 5th start is 2 s after the 1st (margin for a slow CI)
    assert sms[-1] - sms[0] >= 1.5, sms
    assert max(starts["email"]) - min(starts["email"]) < 1.0  # not held by the rate
    info = app.queue(send_sms.queue).limits()
    assert info.rate == durq.Rate(2, per=1.0)
    app.close()


def test_a_bad_rate_or_a_sharded_task_with_a_rate_is_refused_at_declaration(
    redis_url: str,
) -> None:
    app = durq.App(redis_url)
    with pytest.raises(durq.InvalidArgument, match=r"rate must be a durq\.Rate"):
        app.task(rate="10/s")(lambda: None)  # type: ignore[call-overload]
    with pytest.raises(durq.InvalidArgument, match="cannot be sharded"):
        app.task(rate=durq.Rate(1), shards=2)(lambda: None)
    app.close()
