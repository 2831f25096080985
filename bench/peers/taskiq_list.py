"""taskiq + taskiq-redis ListQueueBroker (BRPOP, no ack): ``task.kiq``; worker ``taskiq worker``."""

from __future__ import annotations

import os
import time

import probe
import work
from taskiq_redis import ListQueueBroker

DISTS = ("taskiq", "taskiq-redis", "redis", "hiredis")
NOTES = [
    "ListQueueBroker: destructive BRPOP, no acknowledgement: jobs held by a worker that "
    "dies are lost (measured because it is taskiq's fastest Redis broker)",
]
QUEUE = "bench_list"

broker = ListQueueBroker(os.environ["BENCH_REDIS_URL"], queue_name=QUEUE)


@broker.task(task_name="noop")
async def noop(i: int) -> None:
    probe.done()


@broker.task(task_name="lat")
async def lat(t: float) -> None:
    probe.started(t)


@broker.task(task_name="io_redis")
async def io_redis() -> None:
    await work.io_redis_async()


@broker.task(task_name="io_sleep")
async def io_sleep() -> None:
    await work.io_sleep_async()


@broker.task(task_name="cpu")
async def cpu() -> None:
    await work.cpu_async()


TASKS = {"noop": noop, "io_redis": io_redis, "io_sleep": io_sleep, "cpu": cpu}


class Peer:
    bulk_api = None
    bulk_note = "taskiq has no bulk enqueue API"

    async def setup(self):
        import redis.asyncio

        self.r = redis.asyncio.Redis.from_url(os.environ["BENCH_REDIS_URL"])
        await broker.startup()

    def after_flush(self):
        pass

    async def enqueue_single(self, n):
        kiq = noop.kiq
        for i in range(n):
            await kiq(i)

    async def fill(self, n, kind="noop"):
        import asyncio

        task = TASKS[kind]
        args = (lambda i: (i,)) if kind == "noop" else (lambda i: ())
        for start in range(0, n, 200):
            await asyncio.gather(*(task.kiq(*args(i)) for i in range(start, min(n, start + 200))))

    async def send_latency(self):
        await lat.kiq(time.time())

    async def queued(self):
        return await self.r.llen(QUEUE)

    def worker(self, mode):
        return worker_specs()[BEST if mode == "best" else mode]

    async def close(self):
        await broker.shutdown()
        await self.r.aclose()


BEST = "w4-noparse"
# the "jobs that do real work" scenarios: worker configuration of each (--tune --scenario)
STYLE = "async"
WORK = {"io_redis": "w2-noparse", "io_sleep": "w2-noparse", "cpu": "w2-noparse"}
TUNE = {
    "io_redis": ("w2-noparse", "w3-noparse", "w4-noparse"),
    "io_sleep": ("w2-noparse", "w2-noparse-mat500", "w4-noparse"),
    "cpu": ("w2-noparse", "w3-noparse", "w4-noparse"),
}


def worker_specs():
    base = ["taskiq", "worker", f"{__name__}:broker", "--log-level", "WARNING"]
    specs = {
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
    for name, spec in specs.items():  # processes, and async tasks at once in each
        spec["procs"] = 1 if name == "default" else int(name.split("-")[0][1:])
        spec["slots"] = 500 if name.endswith("mat500") else 100
    return specs
