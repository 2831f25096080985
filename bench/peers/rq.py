"""RQ: ``Queue.enqueue`` / ``Queue.enqueue_many``; worker ``rq worker``."""

from __future__ import annotations

import os

import probe
import work

DISTS = ("rq", "redis", "hiredis")
NOTES = [
    "default worker forks a work horse per job; the probe writes to Redis inside the job there",
    "jobs are pickled (RQ's default serializer)",
]
QUEUE = "bench"


def noop(i):
    probe.done()


def lat(t):
    probe.started(t)


def io_redis():
    work.io_redis_sync()


def io_sleep():
    work.io_sleep_sync()


def cpu():
    work.cpu_sync()


TASKS = {"noop": noop, "io_redis": io_redis, "io_sleep": io_sleep, "cpu": cpu}


class Peer:
    bulk_api = "Queue.enqueue_many"
    bulk_note = "one Redis pipeline per call"

    def setup(self):
        from redis import Redis
        from rq import Queue

        self.conn = Redis.from_url(os.environ["BENCH_REDIS_URL"])
        self.q = Queue(QUEUE, connection=self.conn)

    def after_flush(self):
        pass

    def enqueue_single(self, n):
        enqueue = self.q.enqueue
        for i in range(n):
            enqueue(noop, i)

    def enqueue_bulk(self, n, batch, fn=noop):
        from rq import Queue

        args = (lambda i: (i,)) if fn is noop else (lambda i: ())
        for start in range(0, n, batch):
            self.q.enqueue_many(
                [Queue.prepare_data(fn, args(i)) for i in range(start, min(n, start + batch))]
            )

    def fill(self, n, kind="noop"):
        # enqueue_many writes the same job hashes and list entries as enqueue.
        self.enqueue_bulk(n, 1000, TASKS[kind])

    def send_latency(self):
        import time

        self.q.enqueue(lat, time.time())

    def queued(self):
        return self.q.count

    def worker(self, mode):
        return worker_specs()[BEST if mode == "best" else mode]

    def close(self):
        pass


BEST = "simple-x3"
# the "jobs that do real work" scenarios: worker configuration of each (--tune --scenario)
STYLE = "sync"
WORK = {"io_redis": "simple-x4", "io_sleep": "simple-x8", "cpu": "simple-x2"}
TUNE = {
    "noop": ("default", "fork-x4", "simple-x1", "simple-x2", "simple-x3", "simple-x4", "simple-x6"),
    "io_redis": ("simple-x2", "simple-x4", "simple-x6", "simple-x8"),
    "io_sleep": ("simple-x8", "simple-x16", "simple-x32"),
    "cpu": ("simple-x2", "simple-x3", "simple-x4"),
}


def worker_specs():
    url = os.environ["BENCH_REDIS_URL"]
    base = ["rq", "worker", QUEUE, "--url", url, "-q"]
    simple = [*base, "-w", "rq.worker.SimpleWorker"]
    specs = {
        "default": {
            "argv": [base],
            "env": {"BENCH_PROBE_SYNC": "1"},
            "desc": "1 × `rq worker` (forking Worker: one child process per job)",
            "procs": 1,
            "slots": 1,
        },
        "fork-x4": {
            "argv": [base] * 4,
            "env": {"BENCH_PROBE_SYNC": "1"},
            "desc": "4 × `rq worker` (forking)",
            "procs": 4,
            "slots": 1,
        },
    }
    for k in (1, 2, 3, 4, 6, 8, 16, 32):
        specs[f"simple-x{k}"] = {
            "argv": [simple] * k,
            "desc": f"{k} × `rq worker -w rq.worker.SimpleWorker` (no fork per job)",
            "procs": k,
            "slots": 1,
        }
    return specs
