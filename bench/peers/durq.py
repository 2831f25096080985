"""durq — the plug-in point for our own queue.

Runs from the project venv (``.venv``), so it measures the working tree's durq.
Written against the planned API:

    app = durq.App(url=...)
    @app.task(queue="bench") def noop(i): ...
    noop.enqueue(i)                       # single
    noop.enqueue_many([(i,), ...])        # bulk: one round trip per queue
    durq worker peers.durq:app -q bench -c CONCURRENCY -p PROCESSES --url URL

If ``durq.App`` or the ``durq worker`` CLI is missing or broken, ``setup()`` (or
the worker start) fails and the orchestrator records durq as skipped with the error;
the peers are measured all the same. Owner's checklist: ``queued()`` must count
ready jobs (it uses ``app.queue(name).stats().pending``), ``fill()`` must store the
same jobs as ``enqueue``, and ``BEST`` must name the fastest entry of
``worker_specs()`` in a sweep (``bench/run.py --tune --peers durq``).

The app is built lazily (module ``__getattr__``), so importing this module never
fails and ``durq worker peers.durq:app`` still finds ``app``.
"""

from __future__ import annotations

import os
import time
from typing import Any

import probe
import work

from peers import durq_features

DISTS = ("durq", "redis", "hiredis")
NOTES = ["measures the working tree (editable install in .venv)"]
QUEUE = "bench"

_built: dict[str, Any] = {}


def _build() -> dict[str, Any]:
    if not _built:
        import durq

        app = durq.App(url=os.environ["BENCH_REDIS_URL"])

        @app.task(queue=QUEUE)
        def noop(i: int) -> None:
            probe.done()

        @app.task(queue=QUEUE)
        def lat(t: float) -> None:
            probe.started(t)

        @app.task(queue=QUEUE)
        async def lat_async(t: float) -> None:  # the latency probe as an async task
            probe.started(t)

        @app.task(queue=QUEUE)
        async def noop_async() -> None:  # for bench/worker_profile.py
            probe.done()

        # the "jobs that do real work" scenarios (bench/work.py), as async def and def
        @app.task(queue=QUEUE)
        async def io_redis_async() -> None:
            await work.io_redis_async()

        @app.task(queue=QUEUE)
        def io_redis_sync() -> None:
            work.io_redis_sync()

        @app.task(queue=QUEUE)
        async def io_sleep_async() -> None:
            await work.io_sleep_async()

        @app.task(queue=QUEUE)
        def io_sleep_sync() -> None:
            work.io_sleep_sync()

        @app.task(queue=QUEUE)
        async def cpu_async() -> None:
            await work.cpu_async()

        @app.task(queue=QUEUE)
        def cpu_sync() -> None:
            work.cpu_sync()

        _built.update(durq_features.register(app, QUEUE))
        _built.update(
            app=app,
            noop=noop,
            lat=lat,
            lat_async=lat_async,
            noop_async=noop_async,
            io_redis_async=io_redis_async,
            io_redis_sync=io_redis_sync,
            io_sleep_async=io_sleep_async,
            io_sleep_sync=io_sleep_sync,
            cpu_async=cpu_async,
            cpu_sync=cpu_sync,
        )
    return _built


def __getattr__(name: str) -> Any:  # PEP 562: `durq worker peers.durq:app`
    if name in ("app", "noop", "lat"):
        return _build()[name]
    raise AttributeError(name)


def _compile_durq() -> None:
    """Write durq's bytecode, as installing a wheel does (pip compiled every peer's):
    the working tree's editable install has none until an import writes it, and never
    where PYTHONDONTWRITEBYTECODE is set, so each worker would compile durq's sources
    at start, a cost no installed durq pays (issue 33: about a third of a start). The
    Functions library's file too (durq.lua.library_cache), which an installed durq's
    first worker writes, but not under PYTHONDONTWRITEBYTECODE."""
    import compileall

    import durq
    from durq.lua import SCRIPT_NAMES
    from durq.lua.functions import Library, build
    from durq.lua.library_cache import cached_library

    compileall.compile_dir(os.path.dirname(durq.__file__), quiet=1)
    cached_library(SCRIPT_NAMES, lambda: build(SCRIPT_NAMES), Library, write=True)


class Peer:
    bulk_api = "Task.enqueue_many"
    bulk_note = "one round trip per queue per call"

    def setup(self) -> None:
        _compile_durq()
        built = _build()
        self.app, self.noop, self.lat = built["app"], built["noop"], built["lat"]

    def after_flush(self) -> None:
        pass

    def enqueue_single(self, n: int) -> None:
        enqueue = self.noop.enqueue
        for i in range(n):
            enqueue(i)

    def enqueue_bulk(self, n: int, batch: int) -> None:
        for start in range(0, n, batch):
            self.noop.enqueue_many([(i,) for i in range(start, min(n, start + batch))])

    def fill(self, n: int, kind: str = "noop") -> None:
        # enqueue_many stores the same jobs as enqueue.
        if kind == "noop":
            self.enqueue_bulk(n, 1000)
            return
        task = _build()[kind]
        for start in range(0, n, 1000):
            stop = min(n, start + 1000)
            task.enqueue_many([durq_features.fill_args(kind, i) for i in range(start, stop)])

    def send_latency(self) -> None:
        self.lat.enqueue(time.time())

    def send_latency_async(self) -> None:
        _build()["lat_async"].enqueue(time.time())

    def send_latency_batch(self) -> None:
        _build()["bulk_batch"].enqueue(work.row(0), time.time())

    def queued(self) -> int:
        return sum(
            int(self.app.queue(q).stats().pending) for q in (QUEUE, durq_features.BATCH_QUEUE)
        )

    def asleep_state(self, kind: str) -> dict[str, int]:
        return durq_features.asleep_state(self.app.queue(QUEUE))

    def asleep_idle(self, processes: int) -> float | None:
        return durq_features.workers_idle(os.environ["BENCH_REDIS_URL"], processes)

    def worker(self, mode: str) -> dict[str, Any]:
        return worker_specs()[BEST if mode == "best" else mode]

    def close(self) -> None:
        app = _built.get("app")
        if app is not None and hasattr(app, "close"):
            app.close()


BEST = "p2-c100"
# measured in the same run as well: the best configuration with one process, since the
# targets compare drain rates with one process and with two
ALSO = ("p1-c100",)
# pickup latency is measured for a plain `def` task (send_latency) and, in the same run,
# for an `async def` one: the latency target holds for both task styles
LATENCY_ALSO = {"async def": "send_latency_async"}


# The "jobs that do real work" scenarios: (label, task, worker configuration, task style).
# Both task styles, and for the datastore-bound one 1 and 2 processes (the issue's
# targets compare both with the fastest peer). Chosen by `--tune --scenario S`.
WORK = {
    "io_redis": [
        ("async def, 1 process", "io_redis_async", "p1-c100", "async"),
        ("async def, 2 processes", "io_redis_async", "p2-c100", "async"),
        ("def, 1 process", "io_redis_sync", "p1-c20", "sync"),
        ("def, 2 processes", "io_redis_sync", "p2-c100", "sync"),
    ],
    "io_sleep": [
        ("async def", "io_sleep_async", "p2-c500", "async"),
        ("def", "io_sleep_sync", "p2-c500", "sync"),
    ],
    "cpu": [
        ("async def", "cpu_async", "p2-c20", "async"),
        ("def", "cpu_sync", "p3-c50", "sync"),
    ],
}
# what `--tune --scenario S` drains: both task styles, with these configurations
TUNE = {
    "io_redis": (("io_redis_async", "io_redis_sync"), ("p1-c20", "p1-c100", "p2-c20", "p2-c100")),
    "io_sleep": (("io_sleep_async", "io_sleep_sync"), ("p2-c100", "p2-c200", "p2-c500")),
    "cpu": (("cpu_async", "cpu_sync"), ("p1-c20", "p2-c20", "p3-c50")),
    **durq_features.TUNE,  # the batch row's drains
}


def worker_specs() -> dict[str, dict[str, Any]]:
    url = os.environ["BENCH_REDIS_URL"]

    def command(queue: str) -> list[str]:
        return ["durq", "worker", "peers.durq:app", "-q", queue, "--url", url, "--log-level",
                "warning"]  # fmt: skip

    base = command(QUEUE)
    specs: dict[str, dict[str, Any]] = {
        "default": {
            "argv": [[*base, "-p", "1"]],
            "desc": "`durq worker -p 1` (default concurrency 20)",
            "procs": 1,
            "slots": 20,
        },
    }
    for p, c in (
        (1, 2),
        (1, 20),
        (1, 50),
        (1, 100),
        (2, 20),
        (2, 50),
        (2, 100),
        (3, 50),
        (3, 100),
        (2, 200),
        (2, 500),
        (1, 500),
    ):
        specs[f"p{p}-c{c}"] = {
            "argv": [[*base, "-p", str(p), "-c", str(c)]],
            "desc": f"`durq worker -p {p} -c {c}`",
            "procs": p,
            "slots": c,
        }
    specs.update(durq_features.worker_specs(command))
    return specs


def rows() -> dict[str, list[dict[str, Any]]]:
    """The feature rows' variants (bench/peers/durq_features.py)."""
    return durq_features.rows()
