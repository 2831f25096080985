"""Celery with the Redis broker.

``task.delay`` / ``group(...).apply_async()``; worker ``celery worker``.
"""

from __future__ import annotations

import os
import time

import probe
import work
from celery import Celery, group

from peers.celery_specs import celery_specs

DISTS = ("celery", "kombu", "redis", "hiredis")
NOTES = [
    "no result backend configured (Celery's default), JSON serializer, acks_late=False (default)",
    "prefork pool: the parent process fetches from Redis and hands jobs to pool children",
]

app = Celery("bench", broker=os.environ["BENCH_REDIS_URL"])
app.conf.update(worker_hijack_root_logger=False, broker_connection_retry_on_startup=True)
QUEUE = "celery"  # Celery's default queue (a Redis list of that name)


@app.task(name="bench.noop")
def noop(i):
    probe.done()


@app.task(name="bench.lat")
def lat(t):
    probe.started(t)


@app.task(name="bench.io_redis")
def io_redis():
    work.io_redis_sync()


@app.task(name="bench.io_sleep")
def io_sleep():
    work.io_sleep_sync()


@app.task(name="bench.cpu")
def cpu():
    work.cpu_sync()


TASKS = {"noop": noop, "io_redis": io_redis, "io_sleep": io_sleep, "cpu": cpu}


class Peer:
    bulk_api = "group(...).apply_async()"
    bulk_note = "publishes each message with its own LPUSH (no pipelining); adds group metadata"

    def setup(self):
        import redis

        self.r = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])

    def after_flush(self):
        pass

    def enqueue_single(self, n):
        delay = noop.delay
        for i in range(n):
            delay(i)

    def enqueue_bulk(self, n, batch):
        for start in range(0, n, batch):
            group(noop.s(i) for i in range(start, min(n, start + batch))).apply_async()

    def fill(self, n, kind="noop"):
        if kind == "noop":
            self.enqueue_single(n)
            return
        delay = TASKS[kind].delay
        for _ in range(n):
            delay()

    def send_latency(self):
        lat.delay(time.time())

    def queued(self):
        return self.r.llen(QUEUE)

    def worker(self, mode):
        return worker_specs()[BEST if mode == "best" else mode]

    def close(self):
        pass


BEST = "threads-8-x2-tuned"


# the "jobs that do real work" scenarios: worker configuration of each (--tune --scenario)
STYLE = "sync"
WORK = {
    "io_redis": "threads-16-x2-tuned",
    "io_sleep": "threads-64-x2-tuned",
    "cpu": "solo-x2-tuned",
}
TUNE = {
    "noop": (
        "default",
        "prefork-2",
        "prefork-4-tuned",
        "solo-x2-tuned",
        "threads-8-x2-tuned",
    ),
    "io_redis": ("prefork-4-tuned", "threads-8-x2-tuned", "threads-16-x2-tuned"),
    "io_sleep": ("threads-32-x2-tuned", "threads-64-x2-tuned", "prefork-16-tuned"),
    "cpu": ("prefork-2-tuned", "solo-x2-tuned", "threads-8-x2-tuned"),
    # the process-pool row's prefork configurations (`--tune --scenario pool`)
    "pool.cpu": (("cpu",), ("prefork-2-tuned", "prefork-3-tuned", "prefork-4-tuned")),
    "pool.io_redis": (("io_redis",), ("prefork-4-tuned", "prefork-8-tuned", "prefork-16-tuned")),
    "pool.noop": (("noop",), ("prefork-2-tuned", "prefork-4-tuned")),
}

# The process-pool row (bench/rows.py, issue 33): Celery's prefork pool at its best
# 2-core settings for each part (`--tune --scenario pool --peers celery`); the latency
# part's worker is the no-op's, idle.
POOL = {
    "cpu": "prefork-3-tuned",
    "io_redis": "prefork-16-tuned",
    "noop": "prefork-4-tuned",
    "latency": "prefork-4-tuned",
}
ROWS = {
    "pool": [
        {"part": part, "label": "-P prefork", "kind": "noop" if part == "latency" else part,
         "mode": mode, **({"send": "send_latency"} if part == "latency" else {})}
        for part, mode in POOL.items()
    ]
}  # fmt: skip


def worker_specs():
    return celery_specs("peers.celery")
