"""DBOS Transact for Python on PostgreSQL: the anchor of the durable-steps row (issue 37).

Its own venv (``dbos`` from PyPI). The driver starts a PostgreSQL of its own
(``bench/postgres.py``: a temporary cluster on a free loopback port, durability off like
the Valkey server), creates DBOS's system tables with ``dbos migrate``, and enqueues
workflows with ``DBOSClient``; the workers are processes that launch DBOS on the same
database (``serve()``) and run the queue ``bench`` with the worker
concurrency and polling interval of their configuration.

``bench_wf3`` is three steps (``@DBOS.step``), each one Redis INCR (work.io_redis_sync):
the first two of ``bench:steps``, the last of ``bench:done``, which counts workflows.
``bench_sleeper`` calls ``DBOS.sleep(3600)``: a durable sleep that blocks its workflow's
thread, so a sleeping workflow holds one of the worker's slots.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import work
from dbos import DBOS
from postgres import SETTINGS_TEXT

DISTS = ("dbos", "psycopg", "sqlalchemy", "redis", "hiredis")
QUEUE = "bench"
ENV_PG = "BENCH_PG_URL"


@DBOS.step()
def incr(key: str) -> None:
    work.io_redis_sync(key)


@DBOS.workflow(name="bench_wf3")
def wf3() -> None:
    incr("bench:steps")
    incr("bench:steps")
    incr(work.KEY_DONE)


@DBOS.workflow(name="bench_sleeper")
def sleeper() -> None:
    DBOS.sleep(3600)


WORKFLOWS = {"wf3": "bench_wf3", "sleeper": "bench_sleeper"}


def serve() -> None:
    """A worker process: launch DBOS on the bench's database, register the queue with
    the settings of its configuration (DBOS keeps a queue's settings in the database:
    every worker of a run writes the same), run until SIGTERM."""
    concurrency = int(os.environ.get("BENCH_DBOS_CONCURRENCY", "0"))
    DBOS(
        config={
            "name": "durq-bench",
            "system_database_url": os.environ[ENV_PG],
            # one executor per process: DBOS counts worker_concurrency per executor, and
            # every process would otherwise be the executor "local"
            "executor_id": f"bench-{os.getpid()}",
            "sys_db_pool_size": max(20, concurrency + 10),
            "log_level": "WARNING",
            "run_admin_server": False,
        }
    )
    DBOS.launch()
    DBOS.register_queue(
        QUEUE,
        worker_concurrency=concurrency or None,
        polling_interval_sec=float(os.environ.get("BENCH_DBOS_POLL", "1.0")),
        on_conflict="always_update",
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)


def _sql(url: str, query: str) -> list[tuple]:
    """One query of the driver's on its own connection (marked, so the statement counts
    can leave the harness's own queries out)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(f"/* bench-driver */ {query}")
        return cur.fetchall() if cur.description else []


class Peer:
    bulk_api = None
    bulk_note = ""

    def __init__(self):
        self.pg = None
        self.client = None

    @property
    def url(self):
        return self.pg.url if self.pg else "postgresql://unset"

    def setup(self):
        from common import LOGS_DIR
        from dbos import DBOSClient
        from postgres import Postgres

        if self.pg is None:
            self.pg = Postgres(LOGS_DIR / "dbos.postgres.log")
            self.pg.start()
            dbos_cli = Path(sys.executable).parent / "dbos"
            subprocess.run([str(dbos_cli), "migrate", "-s", self.pg.url], check=True,
                           capture_output=True, timeout=300)  # fmt: skip
            self.client = DBOSClient(system_database_url=self.pg.url)

    def after_flush(self):
        if self.pg is not None:
            _sql(self.url, "TRUNCATE dbos.workflow_status CASCADE")

    def fill(self, n, kind="wf3"):
        options = {"workflow_name": WORKFLOWS.get(kind, "bench_wf3"), "queue_name": QUEUE}
        for _ in range(n):
            self.client.enqueue(options)

    def queued(self):
        return _sql(
            self.url, "SELECT count(*) FROM dbos.workflow_status WHERE status = 'ENQUEUED'"
        )[0][0]

    def asleep_state(self, kind):
        counts = dict(
            _sql(self.url, "SELECT status, count(*) FROM dbos.workflow_status GROUP BY status")
        )
        pending = counts.get("PENDING", 0)  # started: asleep in a thread of a worker
        return {"asleep": pending, "waiting": counts.get("ENQUEUED", 0), "slots_held": pending}

    def store_size(self):
        return _sql(self.url, "SELECT pg_database_size(current_database())")[0][0]

    def store_counters(self):
        calls, ms = _sql(
            self.url,
            "SELECT coalesce(sum(calls), 0), coalesce(sum(total_exec_time), 0) "
            "FROM pg_stat_statements WHERE query NOT LIKE '%bench-driver%'",
        )[0]
        return {"statements": int(calls), "exec_us": float(ms) * 1000.0}

    def worker(self, mode):
        spec = dict(worker_specs()[BEST if mode == "best" else mode])
        spec["env"] = {**spec["env"], ENV_PG: self.url}
        return spec

    def close(self):
        if self.client is not None:
            self.client.destroy()
        if self.pg is not None:
            self.pg.close()


SERVE = ["python", "-c", "from peers.dbos import serve; serve()"]


def worker_specs():
    specs = {
        "default": {
            "argv": [SERVE],
            "env": {},
            "desc": "1 process launching DBOS, queue `bench` with its defaults (no worker "
            "concurrency limit, polled every 1 s)",
            "procs": 1,
            "slots": 0,
        }
    }
    for p in (1, 2):
        for c in (20, 50, 100):
            for poll in (0.01, 0.1):
                ms = round(poll * 1000)
                specs[f"p{p}-c{c}-poll{ms}ms"] = {
                    "argv": [SERVE] * p,
                    "env": {"BENCH_DBOS_CONCURRENCY": str(c), "BENCH_DBOS_POLL": str(poll)},
                    "desc": f"{p} × DBOS process, queue `bench` with worker_concurrency={c}, "
                    f"polling_interval_sec={poll:g}",
                    "procs": p,
                    "slots": c,
                }
    return specs


# chosen by `--tune --scenario durable --peers dbos`
BEST = "p1-c50-poll10ms"
TUNE = {
    "durable.drain": (
        ("wf3",),
        ("p1-c50-poll10ms", "p1-c100-poll10ms", "p2-c20-poll10ms", "p2-c50-poll10ms",
         "p2-c100-poll10ms", "p2-c50-poll100ms"),
    ),
}  # fmt: skip
NOTES = [
    SETTINGS_TEXT,
    "workflows enqueued with `DBOSClient.enqueue` onto a DBOS `Queue`, run by worker "
    "processes that each `DBOS.launch()`; sync workflows and steps (each workflow runs in "
    "a thread of its worker)",
]
ROWS = {
    "durable": [
        {"part": "drain", "label": "3 × @DBOS.step", "kind": "wf3", "mode": BEST},
        {"part": "asleep", "label": "DBOS.sleep(3600)", "kind": "sleeper", "mode": BEST},
    ]
}
