"""SAQ: ``Queue.enqueue``; worker ``saq <settings>``."""

from __future__ import annotations

import os
import time

import probe
import work
from saq import Queue

DISTS = ("saq", "redis", "hiredis")
NOTES = ["JSON serializer (default)"]

queue = Queue.from_url(os.environ["BENCH_REDIS_URL"], name="bench")


async def noop(ctx, *, i):
    probe.done()


async def lat(ctx, *, t):
    probe.started(t)


async def io_redis(ctx):
    await work.io_redis_async()


async def io_sleep(ctx):
    await work.io_sleep_async()


async def cpu(ctx):
    await work.cpu_async()


FUNCTIONS = [noop, lat, io_redis, io_sleep, cpu]
settings = {"queue": queue, "functions": FUNCTIONS}  # concurrency 10 (default)
settings_c50 = {"queue": queue, "functions": FUNCTIONS, "concurrency": 50}
settings_c200 = {"queue": queue, "functions": FUNCTIONS, "concurrency": 200}
settings_c20 = {"queue": queue, "functions": FUNCTIONS, "concurrency": 20}
settings_c500 = {"queue": queue, "functions": FUNCTIONS, "concurrency": 500}


class Peer:
    bulk_api = None
    bulk_note = "SAQ has no bulk enqueue API (Queue.map enqueues and waits for results)"

    async def setup(self):
        await queue.connect()

    def after_flush(self):
        pass

    async def enqueue_single(self, n):
        enqueue = queue.enqueue
        for i in range(n):
            await enqueue("noop", i=i)

    async def fill(self, n, kind="noop"):
        import asyncio

        kwargs = (lambda i: {"i": i}) if kind == "noop" else (lambda i: {})
        for start in range(0, n, 200):
            await asyncio.gather(
                *(queue.enqueue(kind, **kwargs(i)) for i in range(start, min(n, start + 200)))
            )

    async def send_latency(self):
        await queue.enqueue("lat", t=time.time())

    async def queued(self):
        return await queue.count("queued")

    def worker(self, mode):
        return worker_specs()[BEST if mode == "best" else mode]

    async def close(self):
        await queue.disconnect()


BEST = "w2-c20"
# the "jobs that do real work" scenarios: worker configuration of each (--tune --scenario)
STYLE = "async"
WORK = {"io_redis": "w2-c50", "io_sleep": "w2-c200", "cpu": "w2-c20"}
TUNE = {
    "noop": ("default", "w2-c10", "w2-c20", "w2-c50", "w2-c200", "w3-c50", "w4-c50"),
    "io_redis": ("w2-c20", "w2-c50", "w3-c50", "w4-c50"),
    "io_sleep": ("w2-c50", "w2-c200", "w2-c500"),
    "cpu": ("w2-c10", "w2-c20", "w3-c50"),
}


def worker_specs():
    specs = {
        "default": {
            "argv": [["saq", "peers.saq.settings", "--quiet"]],
            "desc": "`saq` defaults: 1 worker process, concurrency 10",
            "procs": 1,
            "slots": 10,
        }
    }
    for w, c in ((2, 10), (2, 20), (2, 50), (2, 200), (3, 50), (4, 50), (2, 500)):
        name = "settings" if c == 10 else f"settings_c{c}"
        specs[f"w{w}-c{c}"] = {
            "argv": [["saq", f"peers.saq.{name}", "--quiet", "--workers", str(w)]],
            "desc": f"`saq --workers {w}` with concurrency {c}",
            "procs": w,
            "slots": c,
        }
    return specs
