"""Huey (RedisHuey): ``task(...)`` / ``task.map``; worker ``huey_consumer``."""

from __future__ import annotations

import os
import time

import probe
from huey import RedisHuey

DISTS = ("huey", "redis", "hiredis")
NOTES = ["jobs are pickled (Huey's default serializer); dequeue is a destructive BRPOP"]

huey = RedisHuey("bench", url=os.environ["BENCH_REDIS_URL"])


@huey.task()
def noop(i):
    probe.done()


@huey.task()
def lat(t):
    probe.started(t)


class Peer:
    bulk_api = "Task.map"
    bulk_note = "a Python loop of single enqueues (no pipelining)"

    def setup(self):
        pass

    def after_flush(self):
        pass

    def enqueue_single(self, n):
        for i in range(n):
            noop(i)

    def enqueue_bulk(self, n, batch):
        for start in range(0, n, batch):
            noop.map(range(start, min(n, start + batch)))

    def fill(self, n):
        self.enqueue_single(n)

    def send_latency(self):
        lat(time.time())

    def queued(self):
        return huey.pending_count()

    def worker(self, mode):
        return worker_specs()[BEST if mode == "best" else mode]

    def close(self):
        pass


BEST = "process-2"


def worker_specs():
    base = ["huey_consumer", "peers.huey.huey", "-q"]
    specs = {"default": {"argv": [base], "desc": "`huey_consumer` defaults: 1 worker thread"}}
    for kind, counts in (("thread", (4, 8)), ("process", (2, 4, 8))):
        for w in counts:
            specs[f"{kind}-{w}"] = {
                "argv": [[*base, "-k", kind, "-w", str(w)]],
                "desc": f"`huey_consumer -k {kind} -w {w}`",
            }
    return specs
