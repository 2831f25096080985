"""The tasks of the flow-control tests, run by ``durq worker flow.app:app`` processes.

Each task appends one JSON line per event to the log file named in its first argument
(one ``os.write`` on an ``O_APPEND`` descriptor: lines from several processes never
interleave, and a line written before a SIGKILL is on disk). ``start`` lines carry the
server time of the job's dequeue, ``deq`` (its lease deadline minus the lease), which is
what the limits are measured on.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import durq

LEASE = 2.0
"""The lease the tests' workers run with (``--lease``): ``deq`` is computed from it."""


def record(log: str, event: str, **extra: Any) -> None:
    job = durq.current_job()
    line = {
        "event": event,
        "time": time.time(),
        "pid": os.getpid(),
        "job": job.id if job else None,
        "group": job.group if job else None,
        "attempt": job.attempt if job else None,
        "deliveries": job.deliveries if job else None,
        "deq": round(job.lease_deadline - LEASE, 3) if job else None,
        "enq": job.enqueued_at if job else None,
        **extra,
    }
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


async def tick(log: str, seconds: float = 0.0) -> None:
    """Record a start, take ``seconds``, record a finish."""
    record(log, "start")
    if seconds:
        await asyncio.sleep(seconds)
    record(log, "finish")


def hold(log: str, seconds: float) -> None:
    """A sync task holding its thread for ``seconds`` (for max_active)."""
    record(log, "start")
    time.sleep(seconds)
    record(log, "finish")


def slows_down(log: str, times: int, retry_after: float, scope: str = "group") -> str:
    """Raise durq.RateLimited (of ``scope``) on its first ``times`` deliveries, then
    finish."""
    job = durq.current_job()
    assert job is not None
    record(log, "start")
    if job.deliveries <= times:
        raise durq.RateLimited(retry_after, scope=scope)  # type: ignore[arg-type]
    record(log, "finish")
    return "done"


def build(url: str | None = None) -> durq.App:
    """A new App with the flow test tasks (3 attempts, 50 ms between retries)."""
    new = durq.App(url, max_attempts=3, backoff=durq.fixed(0.05))
    new.task()(tick)
    new.task()(hold)
    new.task(result=True)(slows_down)
    return new


app = build()
