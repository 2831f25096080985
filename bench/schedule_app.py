"""The App of ``bench/schedule_latency.py``: a task that records how late it started
after its tick."""

from __future__ import annotations

import os
import time

import durq

app = durq.App(url=os.environ["BENCH_REDIS_URL"], default_queue="sched")
OUT = os.environ.get("BENCH_SCHEDULE_OUT", os.devnull)


@app.task
def beat() -> None:
    """Append ``<job id> <seconds from the tick to this start>``."""
    job = durq.current_job()
    assert job is not None and job.scheduled_at is not None
    with open(OUT, "a") as f:
        f.write(f"{job.id} {time.time() - job.scheduled_at}\n")
