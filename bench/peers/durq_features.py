"""durq's side of the feature rows (bench/rows.py): the tasks, worker configurations and
variants of startup, the process pool, batches and durable steps.

Each feature is detected in the durq being measured, and a variant whose feature is
missing is declared with ``skip`` ("not available in this durq: ..."), so the report
lists it and it lights up, unchanged, once the feature lands:

    pool      `durq worker --help` lists `--pool` (issue 33): `durq worker --pool process
              -c N` runs the plain `def` tasks (cpu_sync, io_redis_sync, noop, lat) in N
              child processes
    batch     `durq.Batch` exists (issue 36): bulk_batch below
    durable   `durq.step` and `durq.sleep` exist (issue 37): wf3 and sleeper below

The feature engineers' checklist is in bench/README.md ("Feature rows").
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import probe
import work
from common import BATCH_MAX_WAIT

if TYPE_CHECKING:  # imported when used: importing peers.durq never fails (its docstring)
    import durq

BATCH_QUEUE = "bench-batch"  # a batch task owns its queue


@functools.cache
def missing() -> dict[str, str | None]:
    """Per feature, why this durq cannot run it (None: it can)."""
    help_text = subprocess.run(
        [sys.executable, "-m", "durq", "worker", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    ).stdout
    pool = None if "--pool" in help_text else "`durq worker` has no --pool option"
    return {**api_missing(), "pool": pool}


@functools.cache
def api_missing() -> dict[str, str | None]:
    """The part of ``missing()`` that the worker's app needs (``register``), read from
    durq's API alone: no ``durq worker --help`` run inside every worker's start, which
    the startup row would count as durq's."""
    import durq

    out: dict[str, str | None] = {"startup": None}
    out["batch"] = None if hasattr(durq, "Batch") else "no durq.Batch"
    lacking = [f"durq.{n}" for n in ("step", "sleep") if not hasattr(durq, n)]
    out["durable"] = f"no {' nor '.join(lacking)}" if lacking else None
    return out


def register(app: durq.App, queue: str) -> dict[str, Any]:
    """The feature rows' tasks on ``app``: the per-job bulk write always; the batch,
    durable and sleeping tasks where this durq has their feature (declared through
    ``Any``, since the API they use may not exist yet)."""

    @app.task(queue=queue)
    async def bulk_job(row: dict[str, Any], t: float | None = None) -> None:
        if t is not None:
            probe.started(t)
        await work.bulk_write_async([row])

    import durq

    tasks: dict[str, Any] = {"bulk_job": bulk_job}
    declare: Any = app.task
    api: Any = durq
    if api_missing()["batch"] is None:

        async def bulk_batch(items: list[Any]) -> None:
            for item in items:
                if len(item.args) > 1:
                    probe.started(item.args[1])
            await work.bulk_write_async([item.args[0] for item in items])

        batch = api.Batch(max_size=100, max_wait=BATCH_MAX_WAIT)
        tasks["bulk_batch"] = declare(queue=BATCH_QUEUE, batch=batch)(bulk_batch)
    if api_missing()["durable"] is None:

        async def wf3() -> None:  # three steps, each one INCR; the last counts the job
            await api.step("one", work.io_redis_async, "bench:steps")
            await api.step("two", work.io_redis_async, "bench:steps")
            await api.step("three", work.io_redis_async)

        async def sleeper() -> None:
            await api.sleep(3600)

        tasks.update(wf3=declare(queue=queue)(wf3), sleeper=declare(queue=queue)(sleeper))
    return tasks


def fill_args(kind: str, i: int) -> tuple[Any, ...]:
    """The arguments of job ``i`` of ``kind``: an item's row for the bulk writes."""
    return (work.row(i),) if kind in ("bulk_job", "bulk_batch") else ()


def worker_specs(command: Callable[[str], list[str]]) -> dict[str, dict[str, Any]]:
    """The feature rows' configurations of ``durq worker`` (``command(queue)``: its
    command line for that queue): 2 processes at the default concurrency; the process
    pool; the batch queue's workers."""
    specs: dict[str, dict[str, Any]] = {
        "p2": {
            "argv": [[*command("bench"), "-p", "2"]],
            "desc": "`durq worker -p 2` (default concurrency)",
            "procs": 2,
            "slots": 20,
        }
    }
    for c in (2, 4, 8, 16):
        specs[f"pool-c{c}"] = {
            "argv": [[*command("bench"), "-p", "1", "--pool", "process", "-c", str(c)]],
            "desc": f"`durq worker --pool process -c {c}` ({c} child processes)",
            "procs": c,
            "slots": 1,
        }
    for p in (1, 2):
        specs[f"batch-p{p}"] = {
            "argv": [[*command(BATCH_QUEUE), "-p", str(p)]],
            "desc": f"`durq worker -q {BATCH_QUEUE} -p {p}`",
            "procs": p,
            "slots": 1,
        }
    return specs


# durq's two drains of the batch row hold 5x the part's items (bench/rows.py, part_size),
# both alike: 20,000 items in batches drained in about a third of a second, of which the
# ramp of the two processes (the second's first fetch, the first batches) and the end of
# the last batches were a share worth several percent of the rate (celery-batches' drains
# of 20,000 last ten seconds and more)
BATCH_SCALE = 5
# The variants: (row, part, label, task kind, worker configuration, extra). The pool's
# thread-pool no-op runs with the same slots as its process pool: the pool's overhead.
POOL_MODES = {"cpu": "pool-c2", "io_redis": "pool-c8", "noop": "pool-c2", "latency": "pool-c2"}
VARIANTS: list[tuple[str, str, str, str, str, dict[str, Any]]] = [
    ("startup", "start", "`durq worker`", "io_redis_async", "default", {}),
    ("startup", "start", "`durq worker -p 2`", "io_redis_async", "p2", {}),
    ("pool", "cpu", "--pool process", "cpu_sync", POOL_MODES["cpu"], {}),
    ("pool", "io_redis", "--pool process", "io_redis_sync", POOL_MODES["io_redis"], {}),
    ("pool", "noop", "--pool process", "noop", POOL_MODES["noop"], {}),
    ("pool", "noop", "threads", "noop", "p1-c2", {"feature": "startup"}),
    ("pool", "latency", "--pool process", "noop", POOL_MODES["latency"],
     {"send": "send_latency"}),
    ("batch", "per job", "async def task", "bulk_job", "p2-c100",
     {"feature": "startup", "scale": BATCH_SCALE}),
    ("batch", "per batch", "durq.Batch(max_size=100)", "bulk_batch", "batch-p2",
     {"scale": BATCH_SCALE}),
    ("batch", "latency", f"durq.Batch(max_wait={BATCH_MAX_WAIT:g})", "bulk_batch", "batch-p1",
     {"send": "send_latency_batch"}),
    ("durable", "drain", "3 × durq.step", "wf3", "p2-c100", {}),
    ("durable", "asleep", "durq.sleep(3600)", "sleeper", "p2-c100", {}),
]  # fmt: skip


def rows() -> dict[str, list[dict[str, Any]]]:
    """durq's variants of every row; those of a missing feature carry ``skip``."""
    why = missing()
    out: dict[str, list[dict[str, Any]]] = {}
    for row, part, label, kind, mode, extra in VARIANTS:
        v = {"part": part, "label": label, "kind": kind, "mode": mode, **extra}
        reason = why[v.pop("feature", row)]
        if reason:
            v["skip"] = f"not available in this durq: {reason}"
        out.setdefault(row, []).append(v)
    return out


def asleep_state(queue: Any) -> dict[str, int]:
    """Sleeping jobs are delayed (parked, holding no slot); active ones hold a slot."""
    stats = queue.stats()
    return {"asleep": stats.delayed, "waiting": stats.pending, "slots_held": stats.active}
