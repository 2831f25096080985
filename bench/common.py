"""Shared pieces of the benchmark harness.

This module is imported both by the orchestrator (``bench/run.py``, project venv)
and by the per-peer driver (``bench/driver.py``, inside each peer's own venv), so it
uses the standard library only; ``redis`` is imported lazily by the functions that
need it (every peer venv has redis-py).

Layout::

    bench/run.py          orchestrator: Redis server, sequencing (its parts: interleaved.py,
                          sections.py, driver_client.py, peer_run.py, calibration.py, ...)
    bench/driver.py       runs inside a peer venv; JSON-lines protocol on stdin/stdout
    bench/peers/<x>.py    one module per peer (tasks + enqueue calls + worker command lines)
    bench/probe.py        imported by the tasks inside worker processes (done counter, start times)
    bench/report.py       results.json -> RESULTS.md + results.png (bench-tools venv, matplotlib)
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT_DIR = BENCH_DIR.parent
ENVS_DIR = BENCH_DIR / ".envs"
LOGS_DIR = BENCH_DIR / ".logs"
MAIN_VENV = ROOT_DIR / ".venv"

# Redis keys written by bench/probe.py from inside the workers.
KEY_DONE = "bench:done"  # INCRBY'd with the number of no-op jobs executed
KEY_LAT = "bench:lat"  # RPUSH'd "<enqueue time> <start time>" per latency job
ENV_URL = "BENCH_REDIS_URL"
ENV_PROBE_SYNC = "BENCH_PROBE_SYNC"
# set on each worker a driver starts, a tag of that start: every process below it inherits
# it, even one that leaves the worker's process group and tree (marked_processes)
ENV_WORKER = "BENCH_WORKER"  # "1": write to Redis inside the task (fork-per-job workers)
QUEUE = "bench"  # queue name used by every peer that lets us choose one

# "Jobs that do real work" (bench/work.py): each drains jobs whose body does what the
# name says; the rate is compared with a limit (see scenario_limit).
SCENARIOS = ("io_redis", "io_sleep", "cpu")
SCENARIO_TITLES = {
    "io_redis": "datastore-bound: one Redis round trip per job",
    "io_sleep": "I/O-bound: each job waits 10 ms",
    "cpu": "CPU-bound: each job burns 2 ms of CPU in Python",
}

# The feature rows (bench/rows.py): each sets a durq feature against the peer that anchors
# it, measured round-robin in one run; `--scenario NAME` runs one alone. A peer module
# lists its variants of a row in ``rows()`` (or ``ROWS``); a variant durq cannot run yet
# carries ``skip`` (the reason) and is reported as declared but not measured.
ROWS = ("startup", "pool", "batch", "durable")
ROW_TITLES = {
    "startup": "startup: from launching the worker's command to the first job completed",
    "pool": "process pool against Celery's prefork pool (issue 33)",
    "batch": "batch consumption against celery-batches (issue 36)",
    "durable": "durable steps against DBOS Transact on PostgreSQL (issue 37)",
}
# Each row's parts: what the part measures (a driver command: drain, latency, startup,
# asleep) and its size in a full run and in --quick (jobs; startup: fresh starts per turn).
ROW_PARTS: dict[str, dict[str, tuple[str, int, int]]] = {
    "startup": {"start": ("startup", 3, 5)},
    "pool": {
        "cpu": ("drain", 2_000, 1_000),
        "io_redis": ("drain", 20_000, 5_000),
        "noop": ("drain", 20_000, 5_000),
        "latency": ("latency", 500, 200),
    },
    "batch": {
        "per job": ("drain", 20_000, 5_000),
        "per batch": ("drain", 20_000, 5_000),
        "latency": ("latency", 40, 16),
    },
    "durable": {"drain": ("drain", 2_000, 500), "asleep": ("asleep", 100_000, 10_000)},
}
# A batch item's pickup is measured with items sent one at a time, further apart than the
# batch's max_wait (each peer module's batch tasks use BATCH_MAX_WAIT), so each waits alone.
BATCH_MAX_WAIT = 0.1
BATCH_LATENCY_INTERVAL = 0.25
# how long the "asleep" part counts the store's commands while the workers idle
ASLEEP_WINDOW = {"full": 10.0, "quick": 5.0}


def row_sizes(quick: bool) -> dict[str, int]:
    """Every row part's size, keyed "row.part" (Settings.row_n)."""
    return {
        f"{row}.{part}": quick_n if quick else n
        for row, parts in ROW_PARTS.items()
        for part, (_, n, quick_n) in parts.items()
    }


@dataclass(frozen=True)
class PeerMeta:
    """What the orchestrator needs to know before the peer's venv exists."""

    name: str  # CLI name, e.g. "taskiq-list"
    module: str  # bench/peers/<module>.py
    display: str
    env: str | None  # venv under bench/.envs; None = the project venv (durq)
    requirements: tuple[str, ...] = ()
    dists: tuple[str, ...] = ()  # distributions whose versions are reported
    notes: tuple[str, ...] = field(default_factory=tuple)
    rows: tuple[str, ...] = ("startup",)  # the feature rows (ROWS) it takes part in
    classic: bool = True  # False: a row's anchor only (no enqueue/latency/drain/work rows)


# Every peer gets redis-py with hiredis, like durq (which depends on redis[hiredis]).
PEERS: dict[str, PeerMeta] = {
    meta.name: meta
    for meta in (
        PeerMeta(
            "durq",
            "durq",
            "durq",
            None,
            (),
            ("durq", "redis", "hiredis"),
            ("runs from the project venv (.venv); the worker CLI is `durq worker`",),
            ROWS,
        ),
        PeerMeta("rq", "rq", "RQ", "rq", ("rq", "redis[hiredis]"), ("rq", "redis", "hiredis")),
        PeerMeta(
            "celery",
            "celery",
            "Celery",
            "celery",
            ("celery[redis]", "redis[hiredis]"),
            ("celery", "kombu", "redis", "hiredis"),
            rows=("startup", "pool"),
        ),
        PeerMeta(
            "dramatiq",
            "dramatiq",
            "Dramatiq",
            "dramatiq",
            ("dramatiq[redis]", "redis[hiredis]"),
            ("dramatiq", "redis", "hiredis"),
        ),
        PeerMeta(
            "arq", "arq", "arq", "arq", ("arq", "redis[hiredis]"), ("arq", "redis", "hiredis")
        ),
        PeerMeta(
            "saq",
            "saq",
            "SAQ",
            "saq",
            # saq 0.26.4 imports typing_extensions without declaring it; its "redis"
            # extra pins redis<8.
            ("saq[redis,hiredis]", "typing_extensions"),
            ("saq", "redis", "hiredis"),
        ),
        PeerMeta(
            "taskiq",
            "taskiq_stream",
            "taskiq (RedisStreamBroker)",
            "taskiq",
            ("taskiq", "taskiq-redis", "redis[hiredis]"),
            ("taskiq", "taskiq-redis", "redis", "hiredis"),
        ),
        PeerMeta(
            "taskiq-list",
            "taskiq_list",
            "taskiq (ListQueueBroker)",
            "taskiq",
            ("taskiq", "taskiq-redis", "redis[hiredis]"),
            ("taskiq", "taskiq-redis", "redis", "hiredis"),
        ),
        PeerMeta(
            "huey",
            "huey",
            "Huey (RedisHuey)",
            "huey",
            ("huey", "redis[hiredis]"),
            ("huey", "redis", "hiredis"),
        ),
        # the anchors of two feature rows only, each in a venv of its own
        PeerMeta(
            "celery-batches",
            "celery_batch",
            "celery-batches",
            "celery-batches",
            ("celery[redis]", "celery-batches", "redis[hiredis]"),
            ("celery-batches", "celery", "kombu", "redis", "hiredis"),
            rows=("batch",),
            classic=False,
        ),
        PeerMeta(
            "dbos",
            "dbos",
            "DBOS Transact",
            "dbos",
            ("dbos", "redis[hiredis]"),
            ("dbos", "psycopg", "sqlalchemy", "redis", "hiredis"),
            rows=("durable",),
            classic=False,
        ),
    )
}
DEFAULT_PEERS = tuple(PEERS)


def env_python(meta: PeerMeta) -> Path:
    """The interpreter that runs this peer's driver and workers."""
    venv = MAIN_VENV if meta.env is None else ENVS_DIR / meta.env
    return venv / "bin" / "python"


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """Sizes of one run. ``--quick`` shrinks everything."""

    repeat: int = 3
    enqueue_n: int = 5_000  # jobs per enqueue-rate measurement
    bulk_batch: int = 1_000  # jobs per bulk call
    drain_n: int = 20_000
    drain_cap: float = 15.0  # seconds of draining before we stop and report a partial rate
    latency_n: int = 500
    latency_interval: float = 0.010
    memory_n: int = 100_000
    # jobs per drain of each "real work" scenario, and bare bodies run for its limit
    work_n: dict[str, int] = field(
        default_factory=lambda: {"io_redis": 20_000, "io_sleep": 20_000, "cpu": 2_000}
    )
    # the feature rows: each part's size ("row.part": ROW_PARTS), the cap of their drains
    # (DBOS drains a few hundred workflows a second), the "asleep" part's idle window
    row_n: dict[str, int] = field(default_factory=lambda: row_sizes(quick=False))
    row_cap: float = 60.0
    asleep_window: float = ASLEEP_WINDOW["full"]

    @classmethod
    def quick(cls, repeat: int = 1) -> Settings:
        return cls(
            repeat=repeat,
            enqueue_n=2_000,
            bulk_batch=500,
            drain_n=5_000,
            drain_cap=10.0,
            latency_n=200,
            memory_n=10_000,
            work_n={"io_redis": 5_000, "io_sleep": 5_000, "cpu": 1_000},
            row_n=row_sizes(quick=True),
            row_cap=30.0,
            asleep_window=ASLEEP_WINDOW["quick"],
        )


def scenario_limit(
    scenario: str, procs: int, slots: int, cpus: int, bare_rate: float | None = None
) -> float | None:
    """The rate a worker of ``procs`` processes running ``slots`` jobs each could reach:
    io_redis, the bare body at the same processes and concurrency (measured: bare.py);
    io_sleep, one job per 10 ms per slot; cpu, 500 jobs/s (2 ms each) per core it can
    use (one per process, at most the machine's)."""
    if scenario == "io_redis":
        return bare_rate
    if scenario == "io_sleep":
        return procs * slots * 100.0
    if scenario == "cpu":
        return min(procs, cpus) * 500.0
    raise ValueError(scenario)


# --------------------------------------------------------------------------- statistics


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty list."""
    data = sorted(values)
    if not data:
        return math.nan
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def latency_run(lat_ms: list[float], n: int, send_s: float) -> dict[str, Any]:
    """One latency run's figures (ms), as the drivers and the floor record them."""
    return {
        "n": n,
        "send_s": send_s,
        "p50_ms": percentile(lat_ms, 50),
        "p99_ms": percentile(lat_ms, 99),
        "max_ms": max(lat_ms),
        "min_ms": min(lat_ms),
        "loadavg": os.getloadavg()[0],
    }


def summary(values: list[float]) -> dict[str, float | int] | None:
    """Median, min and max of repeated measurements (None if there are none)."""
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def overall_rate(runs: list[dict[str, Any]]) -> dict[str, float | int] | None:
    """Drains' jobs per second overall: from launching the worker's command to the last
    job done, start-up included (a worker that restarts or scales from zero pays it)."""
    return summary([r["done"] / r["wall_s"] for r in runs if r.get("wall_s")])


def drain_timeout(n: int, cap: float) -> float:
    """How long to wait for a driver's drain of ``n`` jobs capped at ``cap`` seconds:
    filling the queue (about 100 jobs/ms at worst), the cap, and a minute on each side
    for starting and stopping the workers."""
    return 60 + n / 100 + cap + 60


def work_drain(entry: dict[str, Any], n: int, cap: float) -> dict[str, Any]:
    """The driver's ``drain`` arguments for a "real work" variant of a peer's hello
    (``work[scenario]`` entries): its worker configuration and its task."""
    return {"mode": entry["mode"], "n": n, "cap": cap, "kind": entry["task"]}


def drain_text(r: dict[str, Any]) -> str:
    """A driver's drain result as a log line's tail: rate, startup, drain time, and
    whether the cap cut it short."""
    flag = "" if r["complete"] else f" (PARTIAL: {r['done']}/{r['target']} in cap)"
    return (
        f"{r['rate'] or 0:,.0f} jobs/s, startup {r['startup_s'] or 0:.2f} s, "
        f"drain {r['drain_s']:.2f} s{flag}"
    )


def descendants(roots: list[int]) -> set[int]:
    """Every process below ``roots`` (children, grandchildren, ...), from ``ps``."""
    try:
        out = subprocess.run(["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True)
    except OSError:
        return set()
    kids: dict[int, list[int]] = {}
    for line in out.stdout.splitlines():
        pid, ppid = (int(x) for x in line.split())
        kids.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for kid in kids.get(todo.pop(), []):
            if kid not in found:
                found.add(kid)
                todo.append(kid)
    return found


def process_state(pid: int) -> str | None:
    """The state letter of ``pid`` (R, S, D, Z, ...), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def marked_processes(mark: str) -> set[int]:
    """The live processes whose environment holds ``mark`` ("NAME=value"). Linux (/proc)
    only; elsewhere none are found."""
    want = mark.encode()
    found = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if want in env and process_state(int(entry.name)) not in (None, "Z"):
            found.add(int(entry.name))
    return found


def redis_url() -> str:
    return os.environ[ENV_URL]


def log(msg: str) -> None:
    """A line of the orchestrator's progress, with the time of day."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)
