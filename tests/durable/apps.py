"""The durable test tasks: each appends what it does to an execution log (one JSON line
per event: the side effects a test counts), async and sync twins of each."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import durq


def effect(log: str, event: str, key: str, **extra: Any) -> str:
    """A step's side effect: one line appended to ``log``; returns ``key``."""
    job = durq.current_job()
    line = {"event": event, "key": key, "job": job.id if job else None, **extra}
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)
    return key


def events(log: str, event: str | None = None) -> list[dict[str, Any]]:
    """The lines of ``log`` (of one ``event``), oldest first."""
    try:
        with open(log) as f:
            lines = [json.loads(x) for x in f if x.strip()]
    except FileNotFoundError:
        return []
    return [e for e in lines if event is None or e["event"] == event]


async def steps_async(log: str, key: str, n: int, fail_at: int = -1) -> list[str]:
    out = []
    job = durq.current_job()
    assert job is not None
    for i in range(n):
        out.append(await durq.step(f"s{i}", effect, log, "effect", f"{key}:{i}"))
        if i == fail_at and job.deliveries == 1:
            raise RuntimeError("fails once after this step")
    return out


def steps_sync(log: str, key: str, n: int, fail_at: int = -1) -> list[str]:
    out = []
    job = durq.current_job()
    assert job is not None
    for i in range(n):
        out.append(durq.step(f"s{i}", effect, log, "effect", f"{key}:{i}"))
        if i == fail_at and job.deliveries == 1:
            raise RuntimeError("fails once after this step")
    return out


async def sleeper_async(log: str, key: str, seconds: float) -> str:
    await durq.step("before", effect, log, "before", key)
    await durq.sleep(seconds)
    effect(log, "woke", key)
    return key


def sleeper_sync(log: str, key: str, seconds: float) -> str:
    durq.step("before", effect, log, "before", key)
    durq.sleep(seconds)
    effect(log, "woke", key)
    return key


async def waiter_async(log: str, signal: str, timeout: float | None = None) -> Any:
    effect(log, "run", signal)
    try:
        got = await durq.wait_for(signal, timeout=timeout)
    except durq.WaitTimeout as exc:
        return {"timeout": exc.signal}
    return {"got": got}


def waiter_sync(log: str, signal: str, timeout: float | None = None) -> Any:
    effect(log, "run", signal)
    try:
        got = durq.wait_for(signal, timeout=timeout)
    except durq.WaitTimeout as exc:
        return {"timeout": exc.signal}
    return {"got": got}


async def flaky_step(log: str, key: str, fails: int) -> str:
    def call() -> str:
        effect(log, "try", key)
        if len(events(log, "try")) <= fails:
            raise ConnectionError("flaky")
        return "ok"

    return str(await durq.step("flaky", call, retries=fails, backoff=0.01))


async def twice(log: str) -> None:
    await durq.step("same", effect, log, "a", "1")
    await durq.step("same", effect, log, "b", "2")


async def wake_at(log: str, at: float) -> None:
    """Sleep until ``at`` (epoch s), then log how late it woke (s)."""
    await durq.sleep_until(at)
    effect(log, "woke", f"{time.time() - at:.6f}")


TASKS = (
    wake_at,
    steps_async,
    steps_sync,
    sleeper_async,
    sleeper_sync,
    waiter_async,
    waiter_sync,
    flaky_step,
    twice,
)


def register(app: durq.App, **options: Any) -> None:
    """Declare the durable test tasks on ``app`` (results kept)."""
    for fn in TASKS:
        app.task(name=fn.__name__, result=fn is not twice, **options)(fn)
