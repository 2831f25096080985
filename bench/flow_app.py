"""The tasks bench/flow.py runs in ``durq worker flow_app:app`` processes (bench/ on
PYTHONPATH). Only durq's long-standing API is used, so the same module runs under the
main branch's durq for the before/after drain comparison."""

from __future__ import annotations

import os

import durq

app = durq.App()
LOG_ENV = "BENCH_FLOW_LOG"
LEASE_ENV = "BENCH_FLOW_LEASE"


@app.task()
async def noop() -> None:
    """Nothing: the drain measures the queue and the worker, not the task."""


@app.task()
async def stamp() -> None:
    """Append the server time of this job's dequeue (its lease deadline minus the lease)
    to the file named by $BENCH_FLOW_LOG: one write per line, from any process."""
    job = durq.current_job()
    assert job is not None
    line = f"{job.lease_deadline - float(os.environ[LEASE_ENV]):.3f}\n".encode()
    fd = os.open(os.environ[LOG_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
