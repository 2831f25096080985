"""Huey (RedisHuey): ``task(...)`` / ``task.map``; worker ``huey_consumer``."""

from __future__ import annotations

import os
import time

import probe
import work
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


@huey.task()
def io_redis():
    work.io_redis_sync()


@huey.task()
def io_sleep():
    work.io_sleep_sync()


@huey.task()
def cpu():
    work.cpu_sync()


TASKS = {"noop": noop, "io_redis": io_redis, "io_sleep": io_sleep, "cpu": cpu}


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

    def fill(self, n, kind="noop"):
        if kind == "noop":
            self.enqueue_single(n)
            return
        task = TASKS[kind]
        for _ in range(n):
            task()

    def send_latency(self):
        lat(time.time())

    def queued(self):
        return huey.pending_count()

    def worker(self, mode):
        return worker_specs()[BEST if mode == "best" else mode]

    def close(self):
        pass


BEST = "process-2"
# the "jobs that do real work" scenarios: worker configuration of each (--tune --scenario)
STYLE = "sync"
WORK = {"io_redis": "process-4", "io_sleep": "thread-32", "cpu": "process-2"}
TUNE = {
    "noop": ("default", "thread-4", "thread-8", "process-2", "process-4", "process-8"),
    "io_redis": ("thread-8", "thread-16", "process-2", "process-4", "process-8"),
    "io_sleep": ("thread-32", "thread-64", "thread-128", "process-8", "process-16"),
    "cpu": ("process-2", "process-4", "thread-4"),
}


def worker_specs():
    base = ["huey_consumer", "peers.huey.huey", "-q"]
    specs = {
        "default": {
            "argv": [base],
            "desc": "`huey_consumer` defaults: 1 worker thread",
            "procs": 1,
            "slots": 1,
        }
    }
    for kind, counts in (("thread", (4, 8, 16, 32, 64, 128)), ("process", (2, 4, 8, 16))):
        for w in counts:
            specs[f"{kind}-{w}"] = {
                "argv": [[*base, "-k", kind, "-w", str(w)]],
                "desc": f"`huey_consumer -k {kind} -w {w}`",
                "procs": w if kind == "process" else 1,
                "slots": 1 if kind == "process" else w,
            }
    return specs
