"""The App the worker and CLI tests run, in-process and in ``durq worker`` processes.

``build(url, default_queue=...)`` makes a fresh App with every test task registered; a
test enqueues through its own App (its default queue is the test's unique queue) and a
subprocess worker runs ``worker.apps:app`` (``tests/`` on PYTHONPATH, ``--url``).

Tasks take the path of an execution log as their first argument and append one JSON line
per event to it (``start``, ``finish``, ``cancelled``...) with the job id, attempt and
pid. Each line is a single ``write`` on an ``O_APPEND`` descriptor, so lines from
several processes and threads never interleave, and a line written before a SIGKILL is
on disk.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import durq


def record(log: str, event: str, key: str, **extra: Any) -> None:
    """Append one event of the running job to the execution log ``log``."""
    job = durq.current_job()
    line = {
        "event": event,
        "key": key,
        "time": time.time(),
        "pid": os.getpid(),
        "job": job.id if job else None,
        "attempt": job.attempt if job else None,
        **extra,
    }
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def _first_delivery() -> bool:
    job = durq.current_job()
    return job is not None and job.deliveries == 1


def _parse_invoice(text: str) -> None:
    raise ValueError(text)


def work(log: str, key: str, seconds: float = 0.0) -> str:
    """Record a start, sleep ``seconds`` in the task's thread, record a finish."""
    record(log, "start", key)
    time.sleep(seconds)
    record(log, "finish", key)
    return key


async def awork(log: str, key: str, seconds: float = 0.0) -> str:
    """``work`` as a coroutine; records ``cancelled`` if it is cancelled."""
    record(log, "start", key)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        record(log, "cancelled", key)
        raise
    record(log, "finish", key)
    return key


def stalls_first(log: str, key: str, seconds: float) -> str:
    """Take ``seconds`` on the job's first delivery, no time on later ones."""
    return work(log, key, seconds if _first_delivery() else 0.0)


async def astalls_first(log: str, key: str, seconds: float) -> str:
    """``stalls_first`` as a coroutine; records ``cancelled`` if it is cancelled."""
    return await awork(log, key, seconds if _first_delivery() else 0.0)


def _flaky(log: str, key: str, failures: int) -> str:
    record(log, "start", key)
    job = durq.current_job()
    assert job is not None
    if job.attempt <= failures:
        raise RuntimeError(f"transient failure {job.attempt}")
    record(log, "finish", key)
    return key


def flaky_fixed(log: str, key: str, failures: int) -> str:
    """Fail the first ``failures`` attempts, then succeed (fixed backoff: 0.4 s)."""
    return _flaky(log, key, failures)


def flaky_exponential(log: str, key: str, failures: int) -> str:
    """Fail the first ``failures`` attempts, then succeed (backoff: 0.25 s, 0.5 s...)."""
    return _flaky(log, key, failures)


def asks_retry(log: str, key: str, delay: float, times: int) -> str:
    """``raise durq.Retry(delay=delay)`` on the first ``times`` attempts."""
    record(log, "start", key)
    job = durq.current_job()
    assert job is not None
    if job.attempt <= times:
        raise durq.Retry("the upstream is not ready", delay=delay)
    record(log, "finish", key)
    return key


def refuses(log: str, key: str, reason: str) -> str:
    """``raise durq.Fail(reason)``: the job is dead-lettered at once."""
    record(log, "start", key)
    raise durq.Fail(reason)


def explodes(log: str, key: str, message: str) -> str:
    """Raise ValueError(message) from a helper on every attempt."""
    record(log, "start", key)
    _parse_invoice(message)
    return key


async def aexplodes(log: str, key: str, message: str) -> str:
    """``explodes`` as a coroutine."""
    record(log, "start", key)
    await asyncio.sleep(0)
    _parse_invoice(message)
    return key


async def slow_async(log: str, key: str, seconds: float) -> str:
    """An async task that overruns its timeout of 0.3 s."""
    return await awork(log, key, seconds)


def slow_sync(log: str, key: str, seconds: float) -> str:
    """A sync task that overruns its timeout of 0.3 s (its thread cannot be stopped)."""
    return work(log, key, seconds)


def add(a: int, b: int) -> int:
    return a + b


def chatty(key: str) -> str:
    """Logs through its own module logger, as application code does."""
    logging.getLogger("shop.orders").info("charging order %s", key)
    return key


async def achatty(key: str) -> str:
    """``chatty`` as a coroutine."""
    logging.getLogger("shop.orders").warning("order %s is late", key)
    return key


async def aadd(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


_TASKS: list[tuple[Callable[..., Any], dict[str, Any]]] = [
    (work, {}),
    (awork, {}),
    (stalls_first, {}),
    (astalls_first, {}),
    (flaky_fixed, {"backoff": durq.fixed(0.4)}),
    (flaky_exponential, {"backoff": durq.exponential(base=0.25, factor=2, jitter=False)}),
    (asks_retry, {"max_attempts": 2}),
    (refuses, {"max_attempts": 5, "result": True}),
    (explodes, {"max_attempts": 2, "backoff": durq.fixed(0.0), "result": True}),
    (aexplodes, {"max_attempts": 2, "backoff": durq.fixed(0.0)}),
    (slow_async, {"timeout": 0.3, "max_attempts": 1}),
    (slow_sync, {"timeout": 0.3, "max_attempts": 1}),
    (add, {"result": True}),
    (aadd, {"result": True}),
    (chatty, {}),
    (achatty, {}),
]


def build(url: str | None = None, *, default_queue: str = "default") -> durq.App:
    """A new App with every test task registered (3 attempts, 50 ms between, unless
    the task says otherwise)."""
    app = durq.App(url, default_queue=default_queue, max_attempts=3, backoff=durq.fixed(0.05))
    for fn, options in _TASKS:
        register: Callable[[Any], Any] = app.task(**options)
        register(fn)
    return app


app = build()
