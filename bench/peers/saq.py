"""SAQ: ``Queue.enqueue``; worker ``saq <settings>``."""

from __future__ import annotations

import os
import time

import probe
from saq import Queue

DISTS = ("saq", "redis", "hiredis")
NOTES = ["JSON serializer (default)"]

queue = Queue.from_url(os.environ["BENCH_REDIS_URL"], name="bench")


async def noop(ctx, *, i):
    probe.done()


async def lat(ctx, *, t):
    probe.started(t)


settings = {"queue": queue, "functions": [noop, lat]}  # concurrency 10 (default)
settings_c50 = {"queue": queue, "functions": [noop, lat], "concurrency": 50}
settings_c200 = {"queue": queue, "functions": [noop, lat], "concurrency": 200}
settings_c20 = {"queue": queue, "functions": [noop, lat], "concurrency": 20}


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

    async def fill(self, n):
        import asyncio

        for start in range(0, n, 200):
            await asyncio.gather(
                *(queue.enqueue("noop", i=i) for i in range(start, min(n, start + 200)))
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


def worker_specs():
    specs = {
        "default": {
            "argv": [["saq", "peers.saq.settings", "--quiet"]],
            "desc": "`saq` defaults: 1 worker process, concurrency 10",
        }
    }
    for w, c in ((2, 10), (2, 20), (2, 50), (2, 200), (3, 50), (4, 50)):
        name = "settings" if c == 10 else f"settings_c{c}"
        specs[f"w{w}-c{c}"] = {
            "argv": [["saq", f"peers.saq.{name}", "--quiet", "--workers", str(w)]],
            "desc": f"`saq --workers {w}` with concurrency {c}",
        }
    return specs
