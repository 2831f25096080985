"""Helpers of the workflow tests: what a finished workflow may leave in Redis."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path
from typing import Any

import redis

# keys a queue keeps whatever it ran (counters, tombstones, dead letters and their
# reasons, superseded records until a dequeue passes them, and the one-member wake
# marker: an offer sets it, and a worker that fetched the job without blocking and then
# stopped leaves it for the next idle consumer; the numbering of workflow start entries
# between queues, lua/lib/workflows/seq.lua, which does not grow with workflows)
_QUEUE_KEYS = ("stats", "done", "dead", "reasons", "jobs", "conf", "wake", "wfq", "wfi")


def _expires(name: str) -> bool:
    """A key that expires by itself: a worker's own wake marker (worker/alarm.py), the
    capabilities workers publish (lua/ops/caps.lua), the idle consumers
    (lib/core/idlers.lua), a failed job's last errors (lib/core/attempt_errors.lua, kept
    for the result TTL)."""
    return name in ("caps", "idlers") or name.startswith(("ring:", "errors:"))


def leftovers(raw: redis.Redis, queues: list[str], workflow_ids: list[str]) -> list[str]:
    """The keys of ``queues`` that ended workflows must not leave behind (SCAN):
    anything but the queues' own bookkeeping, an empty outbox, each workflow's result
    and summary, and the wake markers of workers (all of which expire)."""
    found: list[str] = []
    for queue in queues:
        tag, _, rest = queue.partition("/")
        prefix = f"durq:{{{tag}}}{'/' + rest if rest else ''}:"
        for key in raw.scan_iter(match=prefix.replace("[", "\\[") + "*", count=1000):
            name = key.decode()[len(prefix) :]
            if name.startswith("wfo:"):
                name = name[4:]
                # (its idle couriers and their own markers expire)
                if name in ("stats", "done", "conf") or (_expires(name) and raw.pttl(key) > 0):
                    continue
            elif name in _QUEUE_KEYS:
                continue
            elif name.startswith("wfi:") and raw.scard(key) <= 1:
                continue  # at most the number of an entry applied out of order
            elif _expires(name) and raw.pttl(key) > 0:
                continue
            elif name.startswith(("result:", "wf:")):
                wid = name.split(":", 1)[1]
                if wid in workflow_ids and raw.pttl(key) > 0:
                    continue
            elif name.startswith("wfd:"):  # a failed or cancelled run's done set: its TTL
                wid = name.split(":", 2)[2]
                if wid in workflow_ids and raw.pttl(key) > 0:
                    continue
            found.append(key.decode())
    return sorted(found)


def live_jobs(raw: redis.Redis, queue: str) -> dict[str, int]:
    """The records in a queue's jobs hash by state name (dead letters, superseded)."""
    from durq.protocol.record import STATE_NAMES, parse_record

    tag, _, rest = queue.partition("/")
    prefix = f"durq:{{{tag}}}{'/' + rest if rest else ''}:"
    out: dict[str, int] = {}
    for _, value in raw.hscan_iter(prefix + "jobs"):
        rec = parse_record(value)
        name = STATE_NAMES[rec.state] if rec else "unreadable"
        out[name] = out.get(name, 0) + 1
    return out


def runs(log: str, key: str | None = None) -> list[dict[str, Any]]:
    """The ``run`` events of the execution log (of one key)."""
    path = Path(log)
    if not path.exists():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if e["event"] == "run" and (key is None or e["key"] == key)]


class KillingFleet:
    """``durq worker workflows.apps:app`` processes on ``queues``, one of them SIGKILLed
    and replaced every ``interval`` seconds while ``killing``."""

    def __init__(
        self,
        durq_cli: Any,
        url: str,
        queues: list[str],
        *,
        size: int = 3,
        lease: float = 1.0,
        concurrency: int = 8,
    ) -> None:
        self.cli = durq_cli
        self.url = url
        self.queues = queues
        self.lease = lease
        self.concurrency = concurrency
        self.procs = [self.spawn() for _ in range(size)]
        self.kills = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def spawn(self) -> Any:
        args = ["worker", "workflows.apps:app", "--url", self.url, "--heartbeat", "0.2"]
        for queue in self.queues:
            args += ["-q", queue]
        args += ["--lease", str(self.lease), "-c", str(self.concurrency), "--grace", "0"]
        return self.cli.start(*args, url=self.url)

    def killing(self, interval: float = 1.0, seed: int = 16) -> KillingFleet:
        rng = random.Random(seed)

        def loop() -> None:
            while not self._stop.wait(interval):
                alive = [p for p in self.procs if p.alive()]
                if alive:
                    victim = rng.choice(alive)
                    victim.kill()
                    self.kills += 1
                    self.procs.remove(victim)
                self.procs.append(self.spawn())

        self._thread = threading.Thread(target=loop, name="killer", daemon=True)
        self._thread.start()
        return self

    def stop_killing(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def close(self) -> None:
        self.stop_killing()
        for proc in self.procs:
            proc.kill()


class Front:
    """One front end of the workflow API behind coroutines: ``sync`` (``enqueue``,
    ``cancel``, ``status``, ``result`` and the blocking ``Queue``) or ``async``
    (``aenqueue``, ``acancel``, ``astatus``, ``aresult`` and the ``AsyncQueue``)."""

    def __init__(self, app: Any, kind: str) -> None:
        self.app = app
        self.kind = kind

    async def enqueue(self, flow: Any, **options: Any) -> Any:
        if self.kind == "sync":
            return flow.enqueue(**options)
        return await flow.aenqueue(**options)

    async def cancel(self, handle: Any) -> Any:
        return handle.cancel() if self.kind == "sync" else await handle.acancel()

    async def status(self, handle: Any) -> Any:
        return handle.status() if self.kind == "sync" else await handle.astatus()

    async def result(self, handle: Any, timeout: float) -> Any:
        if self.kind == "sync":
            return handle.result(timeout)
        return await handle.aresult(timeout)

    def queue(self, name: str) -> Any:
        """The queue ``name`` in this front end (a blocking one seen as coroutines)."""
        from engine.support import Blocking

        if self.kind == "sync":
            return Blocking(self.app.queue(name))
        return self.app.aqueue(name)


def courier(queue: Any, *, rounds: int = 10_000, run: Any = None) -> list[bytes]:
    """Be the courier of the blocking ``queue``'s workflow outbox until it is empty (or
    ``rounds`` fetches): apply every entry, release it (each op through ``run``, by
    default ``queue._run``). The entries, in order."""
    from durq.codec import PayloadCodec
    from durq.keys import OutboxKeys
    from durq.protocol import lifecycle
    from durq.protocol import workflows as wf

    run = run or queue._run
    box = OutboxKeys(queue.keys.name, queue.keys.namespace, queue.keys.shard_count)
    seen: list[bytes] = []
    for _ in range(rounds):
        jobs, _, _ = run(lifecycle.fetch(box, PayloadCodec(), 100, 30.0))
        if not jobs:
            break
        for job in jobs:
            reply = run(_deliver(wf.deliver_call(job.data)))
            assert reply == b"OK", reply
            seen.append(job.data)
        run(lifecycle.release(box, jobs))
    return seen


def _deliver(call: Any) -> Any:
    reply = yield call
    return reply
