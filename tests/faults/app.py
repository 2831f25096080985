"""The App the fault-injection tests run, in ``durq worker faults.app:app`` processes and
in the tests' producers.

Every task appends lines to the run's ledger (the file named by ``$DURQ_FAULT_LEDGER``)
with one ``os.write`` on an ``O_APPEND`` descriptor: a line is in the file the moment
the call returns, so it survives a SIGKILL of the worker a microsecond later, and lines
of concurrent processes never interleave. Line formats are in ``faults.ledger``.

Tasks return ``"<pid> <lease token>"``, stored as their result (``result=True``): the
result of a job is written by the release the queue accepted, so it says which delivery
the queue counted as the completion (the zombie check of ``faults.checker.check``).
"""

from __future__ import annotations

import asyncio
import os
import time

import durq

LEDGER_ENV = "DURQ_FAULT_LEDGER"
QUEUE_ENV = "DURQ_FAULT_QUEUE"

_fd: int | None = None


def note(kind: str, seq: int, *fields: object) -> None:
    """Append one ledger line for the running job: kind, seq, job id, attempt,
    deliveries, pid, lease token, wall time, server enqueue time, then ``fields``."""
    global _fd
    if _fd is None:
        _fd = os.open(os.environ[LEDGER_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    job = durq.current_job()
    assert job is not None
    parts = [
        kind,
        seq,
        job.id,
        job.attempt,
        job.deliveries,
        os.getpid(),
        job.token,
        f"{time.time():.6f}",
        f"{job.enqueued_at:.3f}",
        *fields,
    ]
    os.write(_fd, (" ".join(str(p) for p in parts) + "\n").encode())


def _signature() -> str:
    job = durq.current_job()
    assert job is not None
    return f"{os.getpid()} {job.token}"


async def _run_for(seq: int, seconds: float) -> None:
    note("START", seq)
    if seconds:
        await asyncio.sleep(seconds)
    note("DONE", seq)


def _first_delivery() -> bool:
    job = durq.current_job()
    return job is not None and job.deliveries == 1


def build(url: str | None = None, queue: str | None = None, **options: object) -> durq.App:
    """A new App with the fault tasks registered, its default queue ``queue``."""
    queue = queue or os.environ.get(QUEUE_ENV) or "faults"
    settings: dict[str, object] = {"max_attempts": 25, "backoff": durq.fixed(0.05)}
    settings.update(options)
    app = durq.App(url, default_queue=queue, **settings)  # type: ignore[arg-type]

    @app.task(result=True)
    async def mark(seq: int, seconds: float = 0.0) -> str:
        """Record START, take ``seconds`` (asyncio sleep), record DONE."""
        await _run_for(seq, seconds)
        return _signature()

    @app.task()
    async def mark_plain(seq: int, seconds: float = 0.0) -> None:
        """``mark`` without a stored result, as most tasks are: its release writes no
        result key (the first write of such a release is a tombstone)."""
        await _run_for(seq, seconds)

    @app.task(result=True)
    async def stall(seq: int, seconds: float) -> str:
        """On its first delivery, block the whole event loop for ``seconds`` (a
        time.sleep in async code: the worker is alive but hung); at once otherwise."""
        note("START", seq)
        if _first_delivery():
            time.sleep(seconds)
        note("DONE", seq)
        return _signature()

    @app.task(result=True, timeout=1.0)
    async def stubborn(seq: int, seconds: float) -> str:
        """On its first delivery, ignore cancellation for ``seconds`` (a coroutine past
        its timeout of 1 s that cannot be stopped; the event loop stays alive)."""
        note("START", seq)
        if _first_delivery():
            give_up = time.monotonic() + seconds
            while time.monotonic() < give_up:
                try:
                    await asyncio.sleep(0.05)
                except asyncio.CancelledError:
                    note("CANCEL_IGNORED", seq)
        note("DONE", seq)
        return _signature()

    @app.task(result=True, timeout=1.0)
    def hang_sync(seq: int, seconds: float) -> str:
        """On its first delivery, block its thread for ``seconds`` (past its timeout of
        1 s: the thread is abandoned); at once otherwise."""
        note("START", seq)
        if _first_delivery():
            time.sleep(seconds)
        note("DONE", seq)
        return _signature()

    return app


app = build()
