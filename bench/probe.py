"""Instrumentation called by the benchmark tasks inside worker processes.

``done()`` is the whole body of the no-op task: it bumps an in-process counter that a
daemon thread adds to the Redis key ``bench:done`` every few milliseconds, so the task
itself does no I/O and the driver can see when all jobs have run. ``started(t)`` is
the body of the latency task: it takes ``time.time()`` first thing and buffers
``(enqueue time, start time)`` for the same thread to RPUSH to ``bench:lat``.

Workers that fork a child per job (RQ's default ``Worker``) lose the buffer when the
child exits, so with ``BENCH_PROBE_SYNC=1`` both functions write to Redis directly
(one round trip inside the job; the start time is still taken before it).
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis

KEY_DONE = "bench:done"
KEY_LAT = "bench:lat"
FLUSH_INTERVAL = 0.003

_lock = threading.Lock()
_pid: int | None = None
_count = 0
_lat: list[str] = []
_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        import redis

        _client = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    return _client


def _reset_after_fork() -> None:
    global _lock, _pid, _count, _lat, _client
    _lock = threading.Lock()
    _pid = None
    _count = 0
    _lat = []
    _client = None


os.register_at_fork(after_in_child=_reset_after_fork)
_SYNC = os.environ.get("BENCH_PROBE_SYNC") == "1"


def _flusher() -> None:
    global _count, _lat
    client = None
    while True:
        time.sleep(FLUSH_INTERVAL)
        with _lock:
            count, _count = _count, 0
            lat, _lat = _lat, []
        if not count and not lat:
            continue
        if client is None:
            import redis

            client = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
        pipe = client.pipeline(transaction=False)
        if count:
            pipe.incrby(KEY_DONE, count)
        if lat:
            pipe.rpush(KEY_LAT, *lat)
        pipe.execute()


def _ensure_flusher() -> None:
    global _pid
    pid = os.getpid()
    if _pid == pid:
        return
    with _lock:
        if _pid != pid:
            threading.Thread(target=_flusher, name="bench-probe", daemon=True).start()
            _pid = pid


def done() -> None:
    """Count one executed no-op job."""
    global _count
    if _SYNC:
        _redis().incr(KEY_DONE)
        return
    if _pid != os.getpid():
        _ensure_flusher()
    with _lock:
        _count += 1


def started(enqueued_at: float) -> None:
    """Record that a latency job enqueued at ``enqueued_at`` (time.time()) starts now."""
    global _lat
    now = time.time()
    entry = f"{enqueued_at!r} {now!r}"
    if _SYNC:
        _redis().rpush(KEY_LAT, entry)
        return
    if _pid != os.getpid():
        _ensure_flusher()
    with _lock:
        _lat.append(entry)
