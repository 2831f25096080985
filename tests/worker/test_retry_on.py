"""``@app.task(retry_on=..., dont_retry_on=...)``: which exceptions a failed run is
retried for; the others dead-letter the job at its first attempt, saying why."""

from __future__ import annotations

import time

import pytest

import durq
from worker.support import running_worker


class UpstreamDown(Exception):
    """A failure worth a retry."""


def _app(redis_url: str, queue_name: str) -> durq.App:
    app = durq.App(redis_url, default_queue=queue_name, max_attempts=5, backoff=durq.fixed(0))
    runs: list[str] = []

    @app.task(dont_retry_on=(ValueError, KeyError))
    def parse(text: str) -> None:
        runs.append("parse")
        raise ValueError(f"bad input {text!r}")

    @app.task(retry_on=UpstreamDown)
    def call_api(kind: str) -> None:
        runs.append(kind)
        raise UpstreamDown("503") if kind == "down" else LookupError("no such user")

    app.runs = runs  # type: ignore[attr-defined]
    return app


def test_an_exception_the_task_does_not_retry_dead_letters_at_the_first_attempt(
    redis_url: str, queue_name: str
) -> None:
    app = _app(redis_url, queue_name)
    queue = app.queue(queue_name)
    bad = app.tasks["parse"].enqueue("x")
    other = app.tasks["call_api"].enqueue("lookup")  # not in retry_on
    flaky = app.tasks["call_api"].enqueue("down")  # in retry_on: all five attempts
    with running_worker(app):
        for handle in (bad, other, flaky):
            for _ in range(200):
                info = queue.job(handle.id)
                if info is not None and info.state is durq.JobState.DEAD:
                    break
                time.sleep(0.05)
    runs: list[str] = app.runs  # type: ignore[attr-defined]
    assert runs.count("parse") == 1 and runs.count("lookup") == 1
    assert runs.count("down") == 5
    dead = {j.id: j for j in queue.dead_letters(10)}
    reason = dead[bad.id].reason or {}
    assert reason["retried"] is False and reason["type"] == "builtins.ValueError"
    assert "retried" not in (dead[flaky.id].reason or {"retried": True})
    app.close()


@pytest.mark.parametrize(
    "options",
    [{"retry_on": "ValueError"}, {"dont_retry_on": (ValueError, 3)}, {"retry_on": BaseException}],
)
def test_retry_on_takes_exception_classes_checked_when_the_task_is_declared(
    options: dict[str, object],
) -> None:
    app = durq.App("redis://127.0.0.1:1")
    with pytest.raises(durq.InvalidArgument, match="takes exception classes"):
        app.task(**options)(lambda: None)  # type: ignore[call-overload]
