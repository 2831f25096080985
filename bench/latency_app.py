"""The App of ``bench/latency_ab.py``'s workers: the same pickup probe as a plain and an
async task."""

from __future__ import annotations

import os
import time

import durq

app = durq.App(url=os.environ["BENCH_REDIS_URL"])
OUT = os.environ.get("BENCH_LATENCY_OUT", os.devnull)


def _record(kind: str, enqueued_at: float) -> None:
    delay = time.time() - enqueued_at
    with open(OUT, "a") as f:
        f.write(f"{kind} {delay}\n")


@app.task(queue="latency")
def lat_sync(t: float) -> None:
    """A plain ``def`` task: runs in the worker's thread pool."""
    _record("sync", t)


@app.task(queue="latency")
async def lat_async(t: float) -> None:
    """An ``async def`` task: runs on the worker's event loop."""
    _record("async", t)
