"""Celery with the Redis broker.

``task.delay`` / ``group(...).apply_async()``; worker ``celery worker``.
"""

from __future__ import annotations

import os
import time

import probe
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

    def fill(self, n):
        self.enqueue_single(n)

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


def worker_specs():
    base = ["celery", "-A", "peers.celery", "worker", "--loglevel", "WARNING"]
    return {
        "default": {
            "argv": [[*base, "-c", "1"]],
            "desc": "`celery worker -c 1` (prefork pool, 1 child; other options default)",
        },
        "prefork-2": {
            "argv": [[*base, "-c", "2"]],
            "desc": "`celery worker -c 2` (prefork; the CLI default on 2 cores)",
        },
        "prefork-4-tuned": {
            "argv": [[*base, "-c", "4", *TUNED]],
            "desc": "`celery worker -c 4 " + " ".join(TUNED) + "`",
        },
        "solo-x2-tuned": {
            "argv": [[*base, "-P", "solo", *TUNED]] * 2,
            "desc": "2 × `celery worker -P solo " + " ".join(TUNED) + "`",
        },
        "threads-8-x2-tuned": {
            "argv": [[*base, "-P", "threads", "-c", "8", *TUNED]] * 2,
            "desc": "2 × `celery worker -P threads -c 8 " + " ".join(TUNED) + "`",
        },
    }
