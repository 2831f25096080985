"""A deploy between two runs of a job (issue 37): the function edited to add a step
before the one it stopped at resumes the job in flight; the steps it stored are found by
name and do not run again."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

import durq
from durable.apps import effect, events
from helpers import eventually
from worker.support import running_worker


@pytest.fixture
def apps(redis_url: str, queue_name: str) -> Iterator[tuple[durq.App, durq.App]]:
    """Two Apps of the test's queue: the code before a deploy, and after it."""
    old = durq.App(redis_url, default_queue=queue_name, lease=2.0)
    new = durq.App(redis_url, default_queue=queue_name, lease=2.0)
    yield old, new
    old.close()
    new.close()


def _deployed_while_waiting(
    old: durq.App, new: durq.App, queue_name: str, log: str
) -> tuple[str, Any]:
    """Task "order" of ``old`` run until it waits for signal "approved", which is sent;
    then ``new``'s worker run until the job ended. Returns the job's id and result."""
    queue = old.queue(queue_name)
    with running_worker(old, concurrency=1):
        handle = old.tasks["order"].enqueue(log)
        eventually(lambda: queue.parked().waiting == 1, 10)
    new.signal("approved", None)
    with running_worker(new, concurrency=1):
        return handle.id, handle.result(timeout=10)


def test_a_deploy_that_adds_a_step_resumes_a_job_in_flight(
    apps: tuple[durq.App, durq.App], queue_name: str, log: str
) -> None:
    old, new = apps

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

    assert _deployed_while_waiting(old, new, queue_name, log)[1] == "v2"
    assert [(e["event"], e["key"]) for e in events(log)] == [
        ("charge", "v1"),
        ("receipt", "v2"),
        ("ship", "v2"),
    ]


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_a_run_that_completes_without_reaching_stored_steps_names_them_in_the_log(
    apps: tuple[durq.App, durq.App],
    queue_name: str,
    log: str,
    kind: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a deploy removed a step a job in flight had stored: the job completes all the
    # same, and the worker says which stored steps its last run never reached
    old, new = apps

    @old.task(name="order", result=True)
    async def order_v1(log: str) -> str:
        await durq.step("charge", effect, log, "charge", "v1")
        await durq.step("gift-wrap", effect, log, "wrap", "v1")  # removed by the deploy
        await durq.wait_for("approved")
        return "v1"

    if kind == "async":

        @new.task(name="order", result=True)
        async def order_v2(log: str) -> str:
            await durq.step("charge", effect, log, "charge", "v2")
            await durq.wait_for("approved")
            return "v2"
    else:

        @new.task(name="order", result=True)
        def order_v2_sync(log: str) -> str:
            durq.step("charge", effect, log, "charge", "v2")
            durq.wait_for("approved")
            return "v2"

    with caplog.at_level(logging.INFO, logger="durq.worker"):
        job_id, result = _deployed_while_waiting(old, new, queue_name, log)
    assert result == "v2"
    lines = [r.getMessage() for r in caplog.records if "without reaching" in r.getMessage()]
    assert lines == [
        f"job {job_id} (order) of {queue_name} completed without reaching 1 stored "
        "step(s) of earlier runs: gift-wrap (renamed or removed by a deploy?)"
    ]
    assert [(e["event"], e["key"]) for e in events(log)] == [
        ("charge", "v1"),
        ("wrap", "v1"),
    ]
