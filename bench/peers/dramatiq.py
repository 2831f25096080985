"""Dramatiq with the Redis broker: ``actor.send`` / ``group(...).run()``; worker ``dramatiq``."""

from __future__ import annotations

import os
import time

import dramatiq
import probe
import work
from dramatiq.brokers.redis import RedisBroker

DISTS = ("dramatiq", "redis", "hiredis")
NOTES = ["default middleware (AgeLimit, TimeLimit, Retries, ...); no result backend"]
QUEUE = "bench"

broker = RedisBroker(url=os.environ["BENCH_REDIS_URL"])
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name=QUEUE)
def noop(i):
    probe.done()


@dramatiq.actor(queue_name=QUEUE)
def lat(t):
    probe.started(t)


@dramatiq.actor(queue_name=QUEUE)
def io_redis():
    work.io_redis_sync()


@dramatiq.actor(queue_name=QUEUE)
def io_sleep():
    work.io_sleep_sync()


@dramatiq.actor(queue_name=QUEUE)
def cpu():
    work.cpu_sync()


TASKS = {"noop": noop, "io_redis": io_redis, "io_sleep": io_sleep, "cpu": cpu}


class Peer:
    bulk_api = "group(...).run()"
    bulk_note = "enqueues each message with its own Lua call (no pipelining)"

    def setup(self):
        self.r = broker.client

    def after_flush(self):
        pass

    def enqueue_single(self, n):
        send = noop.send
        for i in range(n):
            send(i)

    def enqueue_bulk(self, n, batch):
        for start in range(0, n, batch):
            dramatiq.group(noop.message(i) for i in range(start, min(n, start + batch))).run()

    def fill(self, n, kind="noop"):
        if kind == "noop":
            self.enqueue_single(n)
            return
        send = TASKS[kind].send
        for _ in range(n):
            send()

    def send_latency(self):
        lat.send(time.time())

    def queued(self):
        return self.r.llen(f"dramatiq:{QUEUE}")

    def worker(self, mode):
        return worker_specs()[BEST if mode == "best" else mode]

    def close(self):
        pass


BEST = "p2-t16"
# the "jobs that do real work" scenarios: worker configuration of each (--tune --scenario)
STYLE = "sync"
WORK = {"io_redis": "p4-t8", "io_sleep": "p2-t64", "cpu": "p4-t4"}
TUNE = {
    "noop": ("default", "p2-t8", "p2-t2", "p2-t16", "p4-t4", "p3-t8"),
    "io_redis": ("p2-t8", "p2-t16", "p2-t32", "p4-t8", "p4-t16", "p6-t8"),
    "io_sleep": ("p2-t32", "p2-t64", "p2-t128"),
    "cpu": ("p2-t2", "p2-t8", "p4-t4", "p4-t8"),
}


def worker_specs():
    base = ["dramatiq", "peers.dramatiq"]
    specs = {
        "default": {
            "argv": [[*base, "-p", "1"]],
            "desc": "`dramatiq -p 1` (1 process, default 8 threads)",
            "procs": 1,
            "slots": 8,
        }
    }
    for p, t in (
        (2, 8),
        (2, 2),
        (2, 16),
        (4, 4),
        (3, 8),
        (2, 32),
        (4, 8),
        (4, 16),
        (6, 8),
        (2, 64),
        (2, 128),
    ):
        specs[f"p{p}-t{t}"] = {
            "argv": [[*base, "-p", str(p), "-t", str(t)]],
            "desc": f"`dramatiq -p {p} -t {t}`",
            "procs": p,
            "slots": t,
        }
    return specs
