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

        _built.update(app=app, noop=noop, lat=lat)
    return _built


def __getattr__(name: str) -> Any:  # PEP 562: `durq worker peers.durq:app`
    if name in ("app", "noop", "lat"):
        return _build()[name]
    raise AttributeError(name)


class Peer:
    bulk_api = "Task.enqueue_many"
    bulk_note = "one round trip per queue per call"

    def setup(self) -> None:
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

    def fill(self, n: int) -> None:
        # enqueue_many stores the same jobs as enqueue.
        self.enqueue_bulk(n, 1000)

    def send_latency(self) -> None:
        self.lat.enqueue(time.time())

    def queued(self) -> int:
        try:
            stats = self.app.queue(QUEUE).stats()
        except AttributeError:
            import durq

            with durq.Queue(QUEUE, url=os.environ["BENCH_REDIS_URL"]) as q:
                stats = q.stats()
        return int(stats.pending)

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


def worker_specs() -> dict[str, dict[str, Any]]:
    url = os.environ["BENCH_REDIS_URL"]
    base = ["durq", "worker", "peers.durq:app", "-q", QUEUE, "--url", url, "--log-level", "warning"]
    specs: dict[str, dict[str, Any]] = {
        "default": {
            "argv": [[*base, "-p", "1"]],
            "desc": "`durq worker -p 1` (default concurrency 20)",
        },
    }
    for p, c in ((1, 50), (1, 100), (2, 20), (2, 50), (2, 100), (3, 50)):
        specs[f"p{p}-c{c}"] = {
            "argv": [[*base, "-p", str(p), "-c", str(c)]],
            "desc": f"`durq worker -p {p} -c {c}`",
        }
    return specs
