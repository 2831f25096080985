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
import os
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
#: the worker's environment variable that sets bulk_batch's batches in flight
#: (``durq.Batch(concurrency=N)``, declared in the worker's app: a spec per setting)
BATCH_CONCURRENCY_ENV = "BENCH_BATCH_CONCURRENCY"


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

        # in flight per process: set by the worker's spec (batch-pP-nN), 1 elsewhere (a
        # durq without the option is measured at 1)
        n = int(os.environ.get(BATCH_CONCURRENCY_ENV, "1"))
        inflight = {"concurrency": n} if n > 1 else {}
        batch = api.Batch(max_size=100, max_wait=BATCH_MAX_WAIT, **inflight)
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
    for p in (1, 2, 3):
        for n in (1, 2, 4, 8, 16, 32):  # durq.Batch(concurrency=n): batches in flight per process
            specs[f"batch-p{p}" if n == 1 else f"batch-p{p}-n{n}"] = {
                "argv": [[*command(BATCH_QUEUE), "-p", str(p)]],
                "env": {BATCH_CONCURRENCY_ENV: str(n)},
                "desc": f"`durq worker -q {BATCH_QUEUE} -p {p}`, durq.Batch(concurrency={n})",
                "procs": p,
                "slots": n,
            }
    return specs


#: what `--tune --scenario batch --peers durq` drains for each drain part of the row
#: (the best of each goes into VARIANTS)
TUNE = {
    "batch.per job": (("bulk_job",), ("p2-c100", "p3-c100")),
    "batch.per batch": (
        ("bulk_batch",),
        (
            "batch-p1",
            "batch-p1-n2",
            "batch-p1-n4",
            "batch-p1-n8",
            "batch-p1-n16",
            "batch-p1-n32",
            "batch-p2",
            "batch-p2-n2",
            "batch-p2-n4",
            "batch-p2-n8",
            "batch-p3-n2",
            "batch-p3-n4",
        ),
    ),
}


# durq's two drains of the batch row hold 20x the part's items (bench/rows.py,
# part_size), both alike: 400,000 items, so that the batch drain (50,000-130,000 items/s
# on this shared 2-core VM) lasts 3 s and more, its ramp and end a small share of it, and
# its rate steadier (at 5x, 100,000 items lasted 1.0-1.4 s and the rate swung ~20%
# between runs); the per-job drain then lasts ~25 s (celery-batches' drains of 20,000
# last ten seconds and more)
BATCH_SCALE = 20
# Each drain's worker configuration is its best of `--tune --scenario batch --peers durq
# --work-n 300000` (TUNE below; three sweeps on the shared VM, 2026-11-28, items/s; the
# first beside another engineer's load, the third the quietest):
#   per job    p2-c100 13,719 / 13,474 / 19,771; p3-c100 14,773 / 16,605 / 18,973
#                                                           -> p3-c100 (2 sweeps of 3)
#   per batch  -p 1, 1 batch in flight: 53,505 / 51,746 / 59,888
#                    2: 53,524 / 73,442 / 89,244;  4: 52,750 / 82,854 / 79,883
#              -p 2, 1: 54,215 / 88,691 / 83,397
#                    2: 56,302 / 93,218 / 95,822;  4: 60,447 / 91,937 / 100,072
#                                                           -> batch-p2-n4 (2 sweeps of 3,
#                                                              within 2% in the other)
# A fourth sweep (quiet, with -p 3): per job p2-c100 18,333, p3-c100 15,657; per batch
# -p 1: 58,484 / n2 90,562 / n4 85,209; -p 2: 81,527 / n2 93,647 / n4 81,329; -p 3: n2
# 89,179 / n4 79,691. Settings within ~15% of each other swap places from sweep to sweep;
# the choices above stood.
# With the worker's cheaper batch items (docs/decisions/batch-per-item-cost.md, i36-py),
# -p 2 with 8 batches in flight: two sweeps (load 1-2) per batch -p 2 n2 80,519 / 71,202,
# n4 64,919 / 69,244, n8 75,854 / 71,048; -p 3 n4 80,494 / 68,416; and nine drains of
# 400,000 items for each of n4 and n8 (the worker alone, from its first
# item done): n4 65-90k (mean 77k), n8 71-85k (mean 80k) -> batch-p2-n8: ahead of n4 in
# both sweeps and on average over the drains, and steadier (a small lead, within the
# noise of one run). Per job: p2-c100 14,539 / 13,927, p3-c100 16,289 / 13,521 (p3-c100
# stays).
# With a formed batch giving the loop a few turns before it starts (worker.batches,
# docs/decisions/batch-throughput.md, "Finishing before starting"), two sweeps of 300,000
# items (quiet, 2026-11-28): per job p2-c100 19,076 / 18,644, p3-c100 19,843 / 19,907; per
# batch -p 1: n8 124,161 / 128,944, n16 148,261 / 140,180, n32 135,698 / 132,772; -p 2:
# n4 109,561 / 116,388, n8 117,580 / 123,478; -p 3 n4 104,717 / 114,191 -> batch-p1-n16
# (first in both; one process, so the server's core is its own).
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
    ("batch", "per job", "async def task", "bulk_job", "p3-c100",
     {"feature": "startup", "scale": BATCH_SCALE}),
    ("batch", "per batch", "durq.Batch(max_size=100, concurrency=16)", "bulk_batch",
     "batch-p1-n16", {"scale": BATCH_SCALE}),
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


def workers_idle(url: str, processes: int) -> float | None:
    """When (``time.time()``) the last of ``processes`` live workers said it is idle:
    its beats stretched (``every``, minutes: worker/pace.py), in the beat that comes a
    heartbeat at most after its last job left; None while one has not (a durq without
    ``every``: never)."""
    import durq

    with durq.Namespace(url) as namespace:
        beats = list(namespace.live_workers().values())
    idle = [b.get("beat") for b in beats if _number(b.get("every")) >= 60]
    if len(beats) < processes or len(idle) < len(beats):
        return None
    return max(_number(t) for t in idle)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def asleep_state(queue: Any) -> dict[str, int]:
    """Sleeping jobs are delayed (parked, holding no slot); active ones hold a slot."""
    stats = queue.stats()
    return {"asleep": stats.delayed, "waiting": stats.pending, "slots_held": stats.active}
