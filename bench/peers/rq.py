"""RQ: ``Queue.enqueue`` / ``Queue.enqueue_many``; worker ``rq worker``."""

from __future__ import annotations

import os

import probe

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

    def enqueue_bulk(self, n, batch):
        from rq import Queue

        for start in range(0, n, batch):
            self.q.enqueue_many(
                [Queue.prepare_data(noop, (i,)) for i in range(start, min(n, start + batch))]
            )

    def fill(self, n):
        # enqueue_many writes the same job hashes and list entries as enqueue.
        self.enqueue_bulk(n, 1000)

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


def worker_specs():
    url = os.environ["BENCH_REDIS_URL"]
    base = ["rq", "worker", QUEUE, "--url", url, "-q"]
    simple = [*base, "-w", "rq.worker.SimpleWorker"]
    specs = {
        "default": {
            "argv": [base],
            "env": {"BENCH_PROBE_SYNC": "1"},
            "desc": "1 × `rq worker` (forking Worker: one child process per job)",
        },
        "fork-x4": {
            "argv": [base] * 4,
            "env": {"BENCH_PROBE_SYNC": "1"},
            "desc": "4 × `rq worker` (forking)",
        },
    }
    for k in (1, 2, 3, 4, 6):
        specs[f"simple-x{k}"] = {
            "argv": [simple] * k,
            "desc": f"{k} × `rq worker -w rq.worker.SimpleWorker` (no fork per job)",
        }
    return specs
