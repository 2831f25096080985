"""``task.options(...)`` applies per-job options to one call or to many."""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
import textwrap
from typing import Any

import pytest

import durq
from durq.models import JobState
from worker.support import ExecLog


def test_options_enqueue_many_applies_the_options_to_each_item_but_prepared_calls(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    work = app.tasks["work"]
    log = str(exec_log)
    handles = work.options(delay=60, group="tenant-1").enqueue_many(
        [(log, "as-tuple"), {"log": log, "key": "as-dict"}, work.call(log, "prepared")]
    )
    queue = app.queue(queue_name)
    infos = [queue.job(h.id) for h in handles]
    assert [(i.state, i.group) for i in infos if i is not None] == [
        (JobState.DELAYED, "tenant-1"),
        (JobState.DELAYED, "tenant-1"),
        (JobState.PENDING, None),  # a prepared call keeps its own options
    ]


async def test_options_aenqueue_many_goes_to_the_queue_given(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    other = f"{queue_name}-other"
    handles = (
        await app.tasks["work"]
        .options(queue=other)
        .aenqueue_many([(str(exec_log), f"k{i}") for i in range(3)])
    )
    assert {h.queue for h in handles} == {other}
    assert app.queue(other).stats().pending == 3
    await app.aclose()


def test_eta_takes_an_aware_datetime_and_the_job_is_due_then(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    # the issue: only delay= in seconds; Celery's apply_async(eta=datetime) had no peer
    work = app.tasks["work"]
    eta = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    handle = work.options(eta=eta).enqueue(str(exec_log), "later")
    past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    now = work.options(eta=past).enqueue(str(exec_log), "now")  # in the past: at once
    queue = app.queue(queue_name)
    info = queue.job(handle.id)
    assert info is not None and info.state is JobState.DELAYED and info.due_at is not None
    assert abs(info.due_at - eta.timestamp()) < 30  # the server's clock, this machine's eta
    assert (queue.job(now.id) or info).state is JobState.PENDING
    prepared = work.options(eta=eta).call(str(exec_log), "prepared")
    (many,) = app.enqueue_calls([prepared])
    assert (queue.job(many.id) or info).state is JobState.DELAYED


# A producer whose clock runs 5 minutes ahead (libfaketime): it enqueues with an eta two
# minutes ahead of the real (and the server's) time, through both front ends, plain and
# with job control (enqueue_control.lua), and prints what its clock said.
_SKEWED_PRODUCER = textwrap.dedent(
    """
    import asyncio, datetime, json, sys, time
    import durq

    url, queue, eta = sys.argv[1], sys.argv[2], datetime.datetime.fromisoformat(sys.argv[3])
    app = durq.App(url, default_queue=queue)

    @app.task
    def later(label: str) -> None: ...

    sync = later.options(eta=eta).enqueue("sync")
    controlled = later.options(eta=eta, expires=3600).enqueue("controlled")

    async def main() -> str:
        handle = await later.options(eta=eta).aenqueue("async")
        await app.aclose()
        return handle.id

    ids = [sync.id, controlled.id, asyncio.run(main())]
    print(json.dumps({"clock": time.time(), "ids": ids}))
    """
)


def test_an_eta_is_due_on_the_servers_clock_when_the_producers_clock_is_skewed(
    redis_url: str, queue_name: str
) -> None:
    # the issue: the time left until an eta was measured on the producer's clock, so a
    # producer 5 minutes fast enqueued a job due in 2 minutes as ready at once
    if shutil.which("faketime") is None:
        pytest.skip("needs faketime (libfaketime)")
    eta = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=2)
    run = subprocess.run(
        ["faketime", "-f", "+300s", sys.executable, "-c", _SKEWED_PRODUCER,
         redis_url, queue_name, eta.isoformat()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["clock"] - eta.timestamp() > 120  # its clock was past the eta already
    app = durq.App(redis_url)
    queue = app.queue(queue_name)
    for job_id in out["ids"]:
        info = queue.job(job_id)
        assert info is not None and info.state is JobState.DELAYED, info
        assert info.due_at is not None and abs(info.due_at - eta.timestamp()) < 5, info
    app.close()


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"eta": datetime.datetime(2030, 1, 1)}, "has no time zone: give an aware datetime"),
        ({"eta": 60}, "eta must be a datetime, not int"),
        (
            {"eta": datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc), "delay": 5},
            "give eta or delay, not both",
        ),
    ],
)
def test_a_naive_eta_or_one_with_a_delay_is_refused(
    app: durq.App, options: dict[str, Any], problem: str
) -> None:
    with pytest.raises(durq.InvalidArgument, match=problem):
        app.tasks["work"].options(**options)
