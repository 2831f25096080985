"""The App of ``bench/commands.py``: one no-op task on the queue ``bench``."""

from __future__ import annotations

import os

import durq

app = durq.App(url=os.environ["BENCH_REDIS_URL"])


@app.task(queue="bench")
def noop(i: int) -> None:
    """Does nothing: the benchmark counts the queue's work, not the task's."""
