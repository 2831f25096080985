"""The App of the process pool's tests: the worker tests' tasks, plus tasks that hang,
spin in C, crash, leak memory or talk to the worker from a child process.

``durq worker worker.pool_app:app --pool process`` runs it in a subprocess; the tests
build their own with ``build(url, default_queue=...)``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
from collections.abc import Callable
from typing import Any

import psutil

import durq
from worker import apps
from worker.apps import record

#: memory each call of ``leaks`` keeps for the life of its process
LEAK = 50 * 1024 * 1024
_kept: list[bytearray] = []


def hangs(log: str, key: str) -> None:
    """Sleeps for ever (until its child is stopped)."""
    record(log, "start", key)
    try:
        time.sleep(10**6)
    except durq.TimeLimitExceeded:
        record(log, "time_limit", key)
        raise


def hangs_hard(log: str, key: str) -> None:
    """Ignores TimeLimitExceeded and sleeps on: only SIGKILL stops it."""
    record(log, "start", key)
    while True:
        try:
            time.sleep(10**6)
        except durq.TimeLimitExceeded:
            record(log, "time_limit", key)


def swallows_time_limit(log: str, key: str) -> str:
    """Catches TimeLimitExceeded and returns: its job timed out all the same."""
    with contextlib.suppress(durq.TimeLimitExceeded):
        hangs(log, key)
    return "finished anyway"


def blocks_in_c(log: str, key: str) -> None:
    """Locks a pthread mutex twice through ctypes: C code that never returns to Python
    (signals do not interrupt it), so only SIGKILL stops it."""
    record(log, "start", key)
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)  # a default mutex locked again: blocked for ever


def aborts(log: str, key: str) -> None:
    """Dies of SIGABRT on its first delivery, succeeds on the next."""
    record(log, "start", key)
    job = durq.current_job()
    if job is not None and job.deliveries == 1:
        os.abort()
    record(log, "finish", key)


def segfaults(log: str, key: str) -> None:
    """Dies of SIGSEGV."""
    record(log, "start", key)
    ctypes.string_at(0)


def leaks(log: str, key: str) -> int:
    """Keeps 50 MB more each call (touched: resident); its child's pid (the log has the
    child's resident bytes after the call, and its unique ones: a child forked from a
    large process, e.g. a test run's, shares that process's pages in its resident set)."""
    block = bytearray(LEAK)
    for i in range(0, LEAK, 4096):
        block[i] = 1
    _kept.append(block)
    memory = psutil.Process().memory_full_info()
    record(log, "finish", key, kept=len(_kept), rss=memory.rss, uss=memory.uss)
    return os.getpid()


def whoami(log: str, key: str) -> dict[str, Any]:
    """The child's pid and what ``durq.current_job()`` says in it."""
    job = durq.current_job()
    assert job is not None
    record(log, "finish", key)
    return {"pid": os.getpid(), "id": job.id, "attempt": job.attempt, "token": job.token}


def reports(log: str, key: str, steps: int, hold: float) -> int:
    """Reports its progress ``steps`` times, then holds its job ``hold`` seconds (its
    progress is readable while the job runs)."""
    job = durq.current_job()
    assert job is not None
    for i in range(steps):
        job.progress((i + 1) / steps, {"step": i + 1})
        time.sleep(0.02)
    time.sleep(hold)
    record(log, "finish", key)
    return os.getpid()


def waits_for_cancel(log: str, key: str, seconds: float) -> str:
    """Polls ``Job.cancelled`` and ends early when it is asked to."""
    job = durq.current_job()
    assert job is not None
    record(log, "start", key)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if job.cancelled:
            record(log, "cancelled", key)
            return "cancelled"
        time.sleep(0.02)
    record(log, "finish", key)
    return "finished"


def limited(log: str, key: str) -> str:
    """Rate limited on its first delivery."""
    job = durq.current_job()
    record(log, "start", key)
    if job is not None and job.deliveries == 1:
        raise durq.RateLimited(0.1)
    record(log, "finish", key)
    return key


def in_threads(log: str, key: str) -> int:
    """A task that asks for threads: its pid is the worker's."""
    record(log, "finish", key)
    return os.getpid()


def in_process(log: str, key: str) -> int:
    """A task that asks for the process pool: its pid is a child's."""
    record(log, "finish", key)
    return os.getpid()


def durable_in_child(log: str, key: str) -> str:
    """Makes a durable step, which a child of the process pool cannot (docs/durable.md)."""
    record(log, "start", key)
    charged: str = durq.step("charge", lambda: key)
    return charged


_TASKS: list[tuple[Any, dict[str, Any]]] = [
    (hangs, {"timeout": 1.0, "max_attempts": 2, "backoff": durq.fixed(0.0)}),
    (hangs_hard, {"timeout": 1.0, "max_attempts": 2, "backoff": durq.fixed(0.0)}),
    (blocks_in_c, {"timeout": 1.0, "max_attempts": 2, "backoff": durq.fixed(0.0)}),
    (swallows_time_limit, {"timeout": 1.0, "max_attempts": 1, "result": True}),
    (aborts, {"max_attempts": 2, "backoff": durq.fixed(0.0)}),
    (segfaults, {"max_attempts": 1}),
    (leaks, {"result": True}),
    (whoami, {"result": True}),
    (reports, {"result": True}),
    (waits_for_cancel, {"result": True}),
    (limited, {"result": True}),
    (in_threads, {"result": True, "pool": "thread"}),
    (in_process, {"result": True, "pool": "process"}),
    (durable_in_child, {"result": True, "pool": "process"}),
]


def build(url: str | None = None, *, default_queue: str = "default") -> durq.App:
    """The worker tests' App with the process pool's tasks added."""
    app = apps.build(url, default_queue=default_queue)
    for fn, options in _TASKS:
        register: Callable[[Any], Any] = app.task(**options)
        register(fn)
    return app


app = build()
