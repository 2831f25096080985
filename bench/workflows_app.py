"""The App of ``bench/workflows.py``: a no-op step and a callback on the queue ``wfbench``."""

from __future__ import annotations

import os

import durq

app = durq.App(url=os.environ["BENCH_REDIS_URL"])


@app.task(queue="wfbench")
def noop(i: int) -> int:
    """Returns its argument: the benchmark measures the queue's work, not the task's."""
    return i


@app.task(queue="wfbench")
def collect(results: list[int]) -> int:
    """The group's callback: how many results it got."""
    return len(results)
