"""The README's retries: exponential backoff with jitter, and a backoff of your own (the
promise -> test table is in docs/guarantees.md)."""

from __future__ import annotations

import itertools
import time

import durq
from helpers import SLACK, eventually
from worker.support import running_worker


def test_exponential_backoff_jitters_within_the_upper_half_of_each_delay() -> None:
    delay = durq.exponential(base=1.0, factor=2.0, cap=300.0)
    for attempt, full in [(1, 1.0), (3, 4.0), (20, 300.0)]:
        drawn = [delay(attempt) for _ in range(200)]
        assert all(full / 2 <= d <= full for d in drawn)
        assert len(set(drawn)) > 100  # spread out, not one value
    assert durq.exponential(base=1.0, jitter=False)(3) == 4.0


def test_a_backoff_of_your_own_sets_each_retry_delay(redis_url: str, queue_name: str) -> None:
    app = durq.App(redis_url, default_queue=queue_name)
    starts: list[float] = []

    @app.task(backoff=lambda attempt: 0.2 * attempt, max_attempts=3)
    def flaky() -> None:
        starts.append(time.monotonic())
        if len(starts) < 3:
            raise RuntimeError("not yet")

    with running_worker(app):
        flaky.enqueue()
        eventually(lambda: app.queue(queue_name).stats().completed == 1, 10, "the third run")
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert 0.2 <= gaps[0] < 0.2 + SLACK and 0.4 <= gaps[1] < 0.4 + SLACK, gaps
    app.close()


def test_current_job_gives_the_id_attempt_and_token_of_each_delivery(
    redis_url: str, queue_name: str
) -> None:
    app = durq.App(redis_url, default_queue=queue_name)
    seen: list[tuple[str, int, str]] = []

    @app.task(backoff=durq.fixed(0.05), max_attempts=2)
    def twice() -> None:
        job = durq.current_job()
        assert job is not None
        seen.append((job.id, job.attempt, job.token))
        if job.attempt == 1:
            raise RuntimeError("again")

    with running_worker(app):
        handle = twice.enqueue()
        eventually(lambda: app.queue(queue_name).stats().completed == 1, 10, "the retry")
    assert [(i, a) for i, a, _ in seen] == [(handle.id, 1), (handle.id, 2)]
    assert len({t for _, _, t in seen}) == 2 and all(t for _, _, t in seen)  # one per delivery
    app.close()
