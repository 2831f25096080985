"""The App of the durable kill test (``durq worker durable.kill_app:app``): a task of five
steps, each appending its effect to a log 50 ms before its result is recorded."""

from __future__ import annotations

import asyncio
import os

import durq

app = durq.App(max_attempts=1000, backoff=durq.fixed(0.05))


async def _effect(log: str, job: str, step: int) -> int:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{job} {step} {os.getpid()}\n".encode())
    finally:
        os.close(fd)
    await asyncio.sleep(0.05)  # the window between a step's effect and its record
    return step


async def five_steps(log: str, job: str) -> None:
    """Five steps, each one line in ``log``."""
    for i in range(5):
        await durq.step(f"s{i}", _effect, log, job, i)


app.task(queue="durable-kill")(five_steps)
