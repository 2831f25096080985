"""``task.options(...)`` applies per-job options to one call or to many."""

from __future__ import annotations

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
