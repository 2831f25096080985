"""taskiq + taskiq-redis RedisStreamBroker (acks after the task).

``task.kiq``; worker ``taskiq worker``.
"""

from __future__ import annotations

import os
import time

import probe
from taskiq_redis import RedisStreamBroker

DISTS = ("taskiq", "taskiq-redis", "redis", "hiredis")
NOTES = [
    "RedisStreamBroker: XREADGROUP + XACK, so unacknowledged jobs survive a worker crash",
    "no result backend; acked entries stay in the stream (no maxlen set)",
]
QUEUE = "bench"

broker = RedisStreamBroker(os.environ["BENCH_REDIS_URL"], queue_name=QUEUE)


@broker.task(task_name="noop")
async def noop(i: int) -> None:
    probe.done()


@broker.task(task_name="lat")
async def lat(t: float) -> None:
    probe.started(t)


class Peer:
    bulk_api = None
    bulk_note = "taskiq has no bulk enqueue API"
    key_count = "xlen"

    async def setup(self):
        import redis.asyncio

        self.r = redis.asyncio.Redis.from_url(os.environ["BENCH_REDIS_URL"])
        await broker.startup()

    async def after_flush(self):
        # FLUSHALL drops the consumer group; the worker would create it at "$" and
        # skip jobs queued before it starts.
        await broker._declare_consumer_group()

    async def enqueue_single(self, n):
        kiq = noop.kiq
        for i in range(n):
            await kiq(i)

    async def fill(self, n):
        import asyncio

        for start in range(0, n, 200):
            await asyncio.gather(*(noop.kiq(i) for i in range(start, min(n, start + 200))))

    async def send_latency(self):
        await lat.kiq(time.time())

    async def queued(self):
        return await self.r.xlen(QUEUE)

    def worker(self, mode):
        return worker_specs()[BEST if mode == "best" else mode]

    async def close(self):
        await broker.shutdown()
        await self.r.aclose()


BEST = "w4-noparse"


def worker_specs():
    base = ["taskiq", "worker", f"{__name__}:broker", "--log-level", "WARNING"]
    return {
        "default": {
            "argv": [[*base, "--workers", "1"]],
            "desc": "`taskiq worker --workers 1` (other options default: max-async-tasks 100)",
        },
        "w2": {
            "argv": [[*base, "--workers", "2"]],
            "desc": "`taskiq worker` (CLI default: --workers 2)",
        },
        "w2-noparse": {
            "argv": [[*base, "--workers", "2", "--no-parse"]],
            "desc": "`taskiq worker --workers 2 --no-parse`",
        },
        "w2-noparse-mat500": {
            "argv": [[*base, "--workers", "2", "--no-parse", "--max-async-tasks", "500"]],
            "desc": "`taskiq worker --workers 2 --no-parse --max-async-tasks 500`",
        },
        "w3-noparse": {
            "argv": [[*base, "--workers", "3", "--no-parse"]],
            "desc": "`taskiq worker --workers 3 --no-parse`",
        },
        "w4-noparse": {
            "argv": [[*base, "--workers", "4", "--no-parse"]],
            "desc": "`taskiq worker --workers 4 --no-parse`",
        },
    }
