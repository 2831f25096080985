"""Celery with the Redis broker.

``task.delay`` / ``group(...).apply_async()``; worker ``celery worker``.
"""

from __future__ import annotations

import os
import time

import probe
import work
from celery import Celery, group

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
TUNED = [
    "--without-gossip",
    "--without-mingle",
    "--without-heartbeat",
    "--prefetch-multiplier",
    "64",
]


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
}


def worker_specs():
    base = ["celery", "-A", "peers.celery", "worker", "--loglevel", "WARNING"]
    tuned = " ".join(TUNED)
    specs = {
        "default": {
            "argv": [[*base, "-c", "1"]],
            "desc": "`celery worker -c 1` (prefork pool, 1 child; other options default)",
            "procs": 1,
            "slots": 1,
        },
        "prefork-2": {
            "argv": [[*base, "-c", "2"]],
            "desc": "`celery worker -c 2` (prefork; the CLI default on 2 cores)",
            "procs": 2,
            "slots": 1,
        },
        "solo-x2-tuned": {
            "argv": [[*base, "-P", "solo", *TUNED]] * 2,
            "desc": f"2 × `celery worker -P solo {tuned}`",
            "procs": 2,
            "slots": 1,
        },
    }
    for c in (2, 4, 16):
        specs[f"prefork-{c}-tuned"] = {
            "argv": [[*base, "-c", str(c), *TUNED]],
            "desc": f"`celery worker -c {c} {tuned}`",
            "procs": c,
            "slots": 1,
        }
    for t in (8, 16, 32, 64):
        specs[f"threads-{t}-x2-tuned"] = {
            "argv": [[*base, "-P", "threads", "-c", str(t), *TUNED]] * 2,
            "desc": f"2 × `celery worker -P threads -c {t} {tuned}`",
            "procs": 2,
            "slots": t,
        }
    return specs
