"""arq: ``ArqRedis.enqueue_job``; worker ``arq <WorkerSettings>``."""

from __future__ import annotations

import os
import time

import probe
import work
from arq.connections import RedisSettings

DISTS = ("arq", "redis", "hiredis")
NOTES = ["jobs are pickled (arq's default); the worker polls the queue (poll_delay 0.5 s default)"]


async def noop(ctx, i):
    probe.done()


async def lat(ctx, t):
    probe.started(t)


async def io_redis(ctx):
    await work.io_redis_async()


async def io_sleep(ctx):
    await work.io_sleep_async()


async def cpu(ctx):
    await work.cpu_async()


FUNCTIONS = (noop, lat, io_redis, io_sleep, cpu)
REDIS = RedisSettings.from_dsn(os.environ["BENCH_REDIS_URL"])


class WorkerSettings:
    """arq defaults: max_jobs=10, poll_delay=0.5 s."""

    functions = FUNCTIONS
    redis_settings = REDIS


def _settings(name, **options):
    return type(name, (), {"functions": list(FUNCTIONS), "redis_settings": REDIS, **options})


# Candidates for the 2-core sweep (see worker_specs); names are importable by the arq CLI.
MJ100_P01 = _settings("MJ100_P01", max_jobs=100, poll_delay=0.01, keep_result=0)
MJ50_P05 = _settings("MJ50_P05", max_jobs=50, poll_delay=0.05, keep_result=0)
MJ200_P01 = _settings("MJ200_P01", max_jobs=200, poll_delay=0.01, keep_result=0)
MJ10_P01 = _settings("MJ10_P01", max_jobs=10, poll_delay=0.01, keep_result=0)
MJ500_P01 = _settings("MJ500_P01", max_jobs=500, poll_delay=0.01, keep_result=0)


class Peer:
    bulk_api = None
    bulk_note = "arq has no bulk enqueue API"

    async def setup(self):
        from arq import create_pool

        self.pool = await create_pool(REDIS)

    def after_flush(self):
        pass

    async def enqueue_single(self, n):
        enqueue = self.pool.enqueue_job
        for i in range(n):
            await enqueue("noop", i)

    async def fill(self, n, kind="noop"):
        import asyncio

        args = (lambda i: (i,)) if kind == "noop" else (lambda i: ())
        for start in range(0, n, 200):
            await asyncio.gather(
                *(self.pool.enqueue_job(kind, *args(i)) for i in range(start, min(n, start + 200)))
            )

    async def send_latency(self):
        await self.pool.enqueue_job("lat", time.time())

    async def queued(self):
        return await self.pool.zcard("arq:queue")

    def worker(self, mode):
        return worker_specs()[BEST if mode == "best" else mode]

    async def close(self):
        await self.pool.aclose()


BEST = "MJ100_P01-x1"
# the "jobs that do real work" scenarios: worker configuration of each (--tune --scenario)
STYLE = "async"
WORK = {"io_redis": "MJ100_P01-x1", "io_sleep": "MJ200_P01-x2", "cpu": "MJ100_P01-x2"}
TUNE = {
    "noop": (
        "default",
        "default-x2",
        "MJ100_P01-x2",
        "MJ50_P05-x2",
        "MJ200_P01-x2",
        "MJ10_P01-x2",
        "MJ100_P01-x1",
        "MJ100_P01-x3",
    ),
    # at most 100 jobs at a time per process: redis-py's asyncio pool refuses a 101st
    # connection (MaxConnectionsError), see bench/work.py
    "io_redis": ("MJ100_P01-x1", "MJ100_P01-x2", "MJ100_P01-x3"),
    "io_sleep": ("MJ100_P01-x2", "MJ200_P01-x2", "MJ500_P01-x2"),
    "cpu": ("MJ10_P01-x2", "MJ100_P01-x2", "MJ10_P01-x3"),
}


def worker_specs():
    specs = {
        "default": {
            "argv": [["arq", "peers.arq.WorkerSettings"]],
            "desc": "1 × `arq` with default settings (max_jobs 10, poll_delay 0.5 s)",
            "procs": 1,
            "slots": 10,
        },
        "default-x2": {
            "argv": [["arq", "peers.arq.WorkerSettings"]] * 2,
            "desc": "2 × `arq` with default settings",
            "procs": 2,
            "slots": 10,
        },
    }
    for name, k in (
        ("MJ100_P01", 2),
        ("MJ50_P05", 2),
        ("MJ200_P01", 2),
        ("MJ10_P01", 2),
        ("MJ100_P01", 1),
        ("MJ100_P01", 3),
        ("MJ10_P01", 3),
        ("MJ500_P01", 2),
    ):
        cls = globals()[name]
        specs[f"{name}-x{k}"] = {
            "argv": [["arq", f"peers.arq.{name}"]] * k,
            "desc": f"{k} × `arq` with max_jobs {cls.max_jobs}, poll_delay {cls.poll_delay} s, "
            "keep_result 0",
            "procs": k,
            "slots": cls.max_jobs,
        }
    return specs
