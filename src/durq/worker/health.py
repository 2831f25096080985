"""A worker's health and scaling signals over HTTP (``durq worker --health-port PORT``;
docs/deployment.md, "Kubernetes").

- ``GET /livez``: 200 while the worker's event loop turns (a tick every second, checked
  against ``LIVE_WITHIN``); it asks nothing of Redis, so a Redis outage does not get
  the worker restarted, only marked not ready.
- ``GET /readyz``: 200 while the worker consumes and its last heartbeat reached Redis
  (within three heartbeat intervals; a worker with nothing in hand beats once per 10 min,
  so past them a PING through its client answers, at most one per heartbeat interval);
  503 while it starts, drains or stops, or while Redis is out of reach.
- ``GET /scale.json``: per queue the worker consumes, jobs ready, leased, held, delayed
  and due, the age of the oldest ready job, and a suggested worker count (below), for
  KEDA's metrics-api scaler (``valueLocation: workers``).
- ``GET /metrics``: the same as Prometheus gauges (``durq_scale_*``).

The suggested count: the workers busy with the leased jobs, plus those that start the
backlog (ready and due) within the target latency at the mean run time this worker
measured (1 s before it ran anything): ``ceil((leased + backlog * run / target) /
concurrency)``, and at least 1 while anything is ready, due or leased: it never says
0 while a job runs, so a scale-to-zero never stops a busy worker.

The server runs in a thread of its own; the queue readings are made on the worker's
event loop with its client, one ``scaling`` script call per queue (or shard) per
request, read only, O(1).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from durq.metrics import WorkerMetrics
from durq.protocol.scaling import QueueLoad, load
from durq.worker.pump import QueuePump

__all__ = ["LIVE_WITHIN", "HealthServer", "suggested_workers"]

log = logging.getLogger("durq.worker")

#: seconds after the event loop's last tick that /livez fails
LIVE_WITHIN = 10.0
#: seconds between ticks
TICK = 1.0
#: seconds a /scale.json request waits for the readings
_READ_TIMEOUT = 5.0
#: seconds /readyz waits for the PING of a worker whose last beat is older than three
#: heartbeats (an idle one's)
_PING_TIMEOUT = 1.0


class Worker(Protocol):
    """What the endpoint reads of a worker (``durq.worker.runner.Worker``)."""

    @property
    def state(self) -> Any: ...  # a WorkerState

    @property
    def pumps(self) -> dict[str, QueuePump]: ...

    @property
    def concurrency(self) -> int: ...

    @property
    def metrics(self) -> WorkerMetrics: ...

    @property
    def heartbeat(self) -> float: ...

    def redis_ok(self) -> bool: ...

    async def ping(self) -> None: ...


def suggested_workers(
    ready: int, due: int, leased: int, concurrency: int, run: float, target: float
) -> int:
    """Workers needed to run the leased jobs and start the backlog within ``target``
    seconds at ``run`` seconds per job (see the module docstring)."""
    backlog = ready + due
    if backlog + leased == 0:
        return 0
    need = (leased + backlog * run / max(target, 1e-3)) / max(concurrency, 1)
    return max(1, math.ceil(need))


class HealthServer:
    """Serves one worker's /livez, /readyz, /scale.json and /metrics.

    Args:
        worker: the worker (its state, pumps, heartbeat and metrics are read).
        port: the port (0: any free one, see ``port`` once started).
        host: the address to listen on (loopback by default, like the metrics port).
        target_latency: seconds within which the backlog should start (the suggested
            worker count).
    """

    def __init__(
        self, worker: Worker, port: int, host: str = "127.0.0.1", target_latency: float = 10.0
    ) -> None:
        self.worker = worker
        self.target_latency = target_latency
        self.ticked = time.monotonic()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pinged: tuple[float, bool] | None = None  # when /readyz pinged, and the answer
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start serving (the readings are made on ``loop``, the worker's)."""
        self._loop = loop
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="durq-health", daemon=True
        )
        self._thread.start()
        log.info("health and scaling endpoints on port %d", self.port)

    def close(self) -> None:
        """Stop serving."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
        self._server.server_close()

    async def tick(self) -> None:
        """Note that the event loop turns, every ``TICK`` seconds, until cancelled."""
        while True:
            self.ticked = time.monotonic()
            await asyncio.sleep(TICK)

    # -- the readings -----------------------------------------------------------------

    def live(self) -> bool:
        return time.monotonic() - self.ticked < LIVE_WITHIN

    def ready(self) -> tuple[bool, str]:
        """Ready, and why not."""
        state = self.worker.state.value
        if state != "running":  # starting, draining, stopped
            return False, state
        if not self.worker.redis_ok() and not self._reachable():
            return False, "redis unreachable"
        return True, "ready"

    def _reachable(self) -> bool:
        """A PING through the worker's client answers (the last answer within a
        heartbeat interval stands: probes cost one PING per interval at most)."""
        now = time.monotonic()
        last = self._pinged
        if last is not None and now - last[0] < self.worker.heartbeat:
            return last[1]
        ok = self._loop is not None
        if self._loop is not None:
            ping = asyncio.wait_for(self.worker.ping(), _PING_TIMEOUT)
            try:
                asyncio.run_coroutine_threadsafe(ping, self._loop).result(_PING_TIMEOUT + 1)
            except Exception:  # refused, cut, or no answer in time
                ok = False
        self._pinged = (now, ok)
        return ok

    def scale(self) -> dict[str, Any]:
        """The /scale.json document (raises on a Redis error or a timeout)."""
        if self._loop is None:
            raise RuntimeError("not started")
        pumps = list(self.worker.pumps.values())

        async def read() -> list[QueueLoad]:
            return list(await asyncio.gather(*(p.queue._run(load(p.queue.keys)) for p in pumps)))

        loads = asyncio.run_coroutine_threadsafe(read(), self._loop).result(_READ_TIMEOUT)
        queues: dict[str, dict[str, Any]] = {}
        for pump, q in zip(pumps, loads, strict=True):
            name = pump.queue.name
            row = queues.setdefault(
                name, {"ready": 0, "leased": 0, "held": 0, "delayed": 0, "due": 0, "age": 0.0}
            )
            for field in ("ready", "leased", "held", "delayed", "due"):
                row[field] += getattr(q, field)
            row["age"] = max(row["age"], q.oldest_age)
        total = {f: sum(r[f] for r in queues.values()) for f in ("ready", "leased", "held", "due")}
        concurrency = self.worker.concurrency
        run = self._mean_run()
        workers = suggested_workers(
            total["ready"], total["due"], total["leased"], concurrency, run, self.target_latency
        )
        return {
            **total,
            "oldest_age": max((r["age"] for r in queues.values()), default=0.0),
            "concurrency": concurrency,
            "mean_run": run,
            "target_latency": self.target_latency,
            "workers": workers,
            "queues": queues,
        }

    def _mean_run(self) -> float:
        finished = ran = 0.0
        for _started, _pickup, done, seconds in self.worker.metrics.totals().values():
            finished += done
            ran += seconds
        return ran / finished if finished else 1.0

    def metrics_text(self, doc: dict[str, Any]) -> str:
        lines = []
        gauges = {
            "ready": "Jobs ready",
            "leased": "Jobs leased (running or fetched)",
            "held": "Jobs waiting for a worker that runs their task",
            "due": "Delayed jobs whose time has come",
            "age": "Age in seconds of the oldest ready job (sampled from group heads)",
        }
        for field, help_text in gauges.items():
            name = f"durq_scale_{field}"
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
            for queue, row in doc["queues"].items():
                lines.append(f'{name}{{queue="{_label(queue)}"}} {row[field]}')
        lines += [
            "# HELP durq_scale_workers Workers suggested for the target latency",
            "# TYPE durq_scale_workers gauge",
            f"durq_scale_workers {doc['workers']}",
        ]
        return "\n".join(lines) + "\n"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _handler(health: HealthServer) -> Callable[..., BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/livez":
                live = health.live()
                self._send(200 if live else 503, "live\n" if live else "loop stalled\n")
            elif path == "/readyz":
                ready, why = health.ready()
                self._send(200 if ready else 503, why + "\n")
            elif path in ("/scale.json", "/metrics"):
                try:
                    doc = health.scale()
                except Exception as exc:
                    self._send(503, f"queues not readable: {type(exc).__name__}\n")
                    return
                if path == "/metrics":
                    self._send(200, health.metrics_text(doc), "text/plain; version=0.0.4")
                else:
                    self._send(200, json.dumps(doc), "application/json")
            else:
                self._send(404, "not found\n")

        def _send(self, status: int, body: str, kind: str = "text/plain") -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every few seconds: not worth a log line each

    return Handler
