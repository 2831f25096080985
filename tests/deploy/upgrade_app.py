"""The App of the upgrade tests, loaded by the previous release (its workers and its
producer, ``deploy.upgrade_writer``) and by this tree alike: it uses only the public API
both have.

Two queues in two Cluster slots (``<prefix>-a``, ``<prefix>-b``), and a third
(``<prefix>-c``) for ``later``, a task that a worker started with
``$DURQ_UP_WITHOUT_LATER`` set does not have (it holds its jobs); every task appends a
line to the ledger (``$DURQ_UP_LEDGER``) with one ``os.write`` on an ``O_APPEND``
descriptor, which survives a SIGKILL a microsecond later::

    KIND seq job_id attempt pid durq_version

KIND is DONE for a job run to its end, STEP for a workflow step, TICK for a periodic job
(seq -1).
"""

from __future__ import annotations

import asyncio
import os

import durq

PREFIX = os.environ.get("DURQ_UP_PREFIX", "up")
QA = f"{PREFIX}-a"
QB = f"{PREFIX}-b"
QC = f"{PREFIX}-c"
LEDGER_ENV = "DURQ_UP_LEDGER"

app = durq.App(
    os.environ.get("DURQ_UP_URL"),
    default_queue=QA,
    lease=1.0,
    max_attempts=8,
    backoff=durq.fixed(2.0),  # retries wait in the delayed set across the upgrade
)

_fd: int | None = None


def note(kind: str, seq: int) -> None:
    """One ledger line for the running job."""
    global _fd
    if _fd is None:
        _fd = os.open(os.environ[LEDGER_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    job = durq.current_job()
    assert job is not None
    line = f"{kind} {seq} {job.id} {job.attempt} {os.getpid()} {durq.__version__}\n"
    os.write(_fd, line.encode())


@app.task(queue=QA, result=True)
async def mark(seq: int, secs: float = 0.0) -> int:
    if secs:
        await asyncio.sleep(secs)
    note("DONE", seq)
    return seq


@app.task(queue=QB, result=True)
async def mark_b(seq: int, secs: float = 0.0) -> int:
    if secs:
        await asyncio.sleep(secs)
    note("DONE", seq)
    return seq


@app.task(queue=QA)
def flaky(seq: int) -> int:
    """Fails its first attempt: its retry waits (2 s) in the delayed set."""
    job = durq.current_job()
    assert job is not None
    if job.attempt == 1:
        raise RuntimeError("first attempt fails")
    note("DONE", seq)
    return seq


@app.task(queue=QA, max_attempts=1)
def doomed(seq: int) -> int:
    """Dead-lettered under the previous release; runs once replayed under this tree."""
    if durq.__version__ == os.environ.get("DURQ_UP_OLD_VERSION"):
        raise durq.Fail("the previous release cannot run it")
    note("DONE", seq)
    return seq


@app.task(queue=QA)
def add(x: int, y: int) -> int:
    note("STEP", x)
    return x + y


@app.task(queue=QB)
async def double(x: int) -> int:
    await asyncio.sleep(0.05)
    note("STEP", x)
    return 2 * x


@app.task(queue=QA)
def total(xs: list[int]) -> int:
    note("STEP", len(xs))
    return sum(xs)


@app.task(queue=QA)
def tick() -> None:
    note("TICK", -1)


def later(seq: int) -> int:
    note("DONE", seq)
    return seq


later_task = None if os.environ.get("DURQ_UP_WITHOUT_LATER") else app.task(queue=QC)(later)


app.schedule("up-tick", tick, every=1.0)
