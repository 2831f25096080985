"""The App of the workflow tests, in-process and in ``durq worker`` processes
(``durq worker workflows.apps:app -q QUEUE``; ``tests/`` on PYTHONPATH).

Tasks that take a log path append one JSON line per run (worker.apps.record): the
tests count runs by job id from it, across processes and SIGKILLs.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

import durq
from worker.apps import record


def square(log: str, i: int, pause: float = 0.0) -> int:
    """A group member: i * i (after ``pause`` seconds)."""
    time.sleep(pause)
    record(log, "run", f"square-{i}")
    return i * i


def collect(results: list[Any], log: str, key: str = "callback") -> int:
    """A callback: logs the results it received, returns how many."""
    record(log, "run", key, results=results)
    return len(results)


def link(seen: list[str], log: str, key: str, pause: float = 0.0) -> list[str]:
    """A chain step: the keys of the steps before it, then its own."""
    record(log, "start", key)
    time.sleep(pause)
    record(log, "run", key, seen=seen)
    return [*seen, key]


def echo(value: Any) -> Any:
    """Returns what it gets."""
    return value


def double(x: int) -> int:
    """Typed: an int in, an int out."""
    return 2 * x


def shout(text: str) -> str:
    """Typed: a str in."""
    return text.upper()


def total(values: list[int]) -> int:
    """Typed: a list in."""
    return sum(values)


def dies(log: str, key: str) -> None:
    """Is dead-lettered at once (durq.Fail)."""
    record(log, "run", key)
    raise durq.Fail(f"{key} gives up")


def dies_until(log: str, key: str, flag: str) -> str:
    """Is dead-lettered at once until the file ``flag`` exists."""
    record(log, "run", key)
    if not os.path.exists(flag):
        raise durq.Fail(f"{key}: no {flag} yet")
    return key


def slow_first(log: str, key: str, seconds: float) -> str:
    """Sleeps ``seconds`` on its first delivery only; logs start and finish."""
    job = durq.current_job()
    record(log, "start", key)
    if job is not None and job.deliveries == 1:
        time.sleep(seconds)
    record(log, "finish", key)
    return key


async def nap(log: str, key: str, seconds: float) -> str:
    """An async step: logs its start, sleeps ``seconds``, logs its run; logs
    ``stopped`` instead when it is cancelled (WorkflowHandle.cancel)."""
    record(log, "start", key)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        record(log, "stopped", key)
        raise
    record(log, "run", key)
    return key


_TASKS: list[tuple[Any, dict[str, Any]]] = [
    (square, {}),
    (collect, {}),
    (link, {}),
    (echo, {}),
    (double, {}),
    (shout, {}),
    (total, {}),
    (dies, {"max_attempts": 1}),
    (dies_until, {"max_attempts": 1}),
    (slow_first, {}),
    (nap, {}),
]


def build(url: str | None = None, *, default_queue: str = "default", **options: Any) -> durq.App:
    """A new App with every workflow test task registered."""
    options.setdefault("max_attempts", 50)  # kills must not exhaust attempts
    options.setdefault("backoff", durq.fixed(0.05))
    app = durq.App(url, default_queue=default_queue, **options)
    for fn, task_options in _TASKS:
        register: Callable[[Any], Any] = app.task(**task_options)
        register(fn)
    return app


app = build(lease=float(os.environ.get("DURQ_TEST_LEASE", "30")))
