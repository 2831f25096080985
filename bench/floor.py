"""The pickup floor any Redis queue pays: LPUSH here, BRPOP in another process.

    from floor import measure_floor
    run = measure_floor(url, "blocking", n=300, interval=0.01)

No queue's code: this process LPUSHes ``time.time()`` (t0) every ``interval`` seconds,
and a receiver process (``python bench/floor.py URL OUT STYLE``), a redis-py client
blocked on ``BRPOP``, stamps ``time.time()`` when each value comes back; latency is that
stamp minus t0. The two wake-ups (the server's, the receiver's) and two round trips
are what every Redis queue's idle worker pays before its own code runs (Huey's shape),
so this is the floor beside the frameworks' pickup latency. Receiver styles:
``blocking`` (``redis.Redis``) and ``asyncio`` (``redis.asyncio.Redis``, as an asyncio
worker waits). Used by ``bench/interleaved.py`` (the floor as one more participant of
each latency round of ``make bench``).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis
import redis.asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import latency_run  # the drivers' figures (stdlib only)

STYLES = ("blocking", "asyncio")
KEY = "bench:floor"
STOP = b"stop"
#: values sent and dropped before the measured ones, as the drivers warm their workers
WARMUP = 20


def describe(style: str) -> str:
    """The floor's description, as a latency run's ``desc``."""
    parser = "hiredis" if redis.utils.HIREDIS_AVAILABLE else "Python parser"
    client = "redis.asyncio.Redis" if style == "asyncio" else "redis.Redis"
    return (
        f"redis-py {redis.__version__} ({parser}): LPUSH from the harness -> BRPOP in a "
        f"{client} receiver process, no queue"
    )


def result(pairs: Sequence[tuple[float, float]], style: str, send_s: float) -> dict[str, Any]:
    """A floor run in the shape of a driver's latency run (bench/driver.py cmd_latency):
    from (t0, returned) pairs, in seconds."""
    lat_ms = [(returned - t0) * 1000.0 for t0, returned in pairs]
    return {**latency_run(lat_ms, len(lat_ms), send_s), "style": style, "desc": describe(style)}


def _wait_blocked(client: redis.Redis, receiver: subprocess.Popen[bytes]) -> None:
    """Until the receiver blocks on BRPOP (at most 30 s)."""
    deadline = time.monotonic() + 30
    while int(client.info("clients")["blocked_clients"]) < 1:
        if receiver.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the floor's receiver never blocked (exit {receiver.poll()})")
        time.sleep(0.02)


def floor_pairs(
    url: str,
    style: str,
    n: int,
    interval: float,
    warmup: int = WARMUP,
) -> tuple[list[tuple[float, float]], float]:
    """Send ``n`` values every ``interval`` s to a fresh receiver of ``style``, after
    ``warmup`` values and a second of idling; the measured values' (t0, returned) and
    the seconds the sending took."""
    if style not in STYLES:
        raise ValueError(f"style: one of {STYLES}, not {style!r}")
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp:
        out = Path(tmp) / "returned.txt"
        receiver = subprocess.Popen([sys.executable, __file__, url, str(out), style])
        client = redis.Redis.from_url(url)
        try:
            _wait_blocked(client, receiver)
            for _ in range(warmup):
                client.lpush(KEY, repr(time.time()))
                time.sleep(interval)
            time.sleep(1.0)  # the receiver goes idle, as a worker before the drivers' jobs
            start = time.perf_counter()
            for i in range(n):
                delay = start + i * interval - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                client.lpush(KEY, repr(time.time()))
            send_s = time.perf_counter() - start
            client.lpush(KEY, STOP)
            receiver.wait(30)
        finally:
            if receiver.poll() is None:
                receiver.kill()
                receiver.wait(10)
            client.close()
        if receiver.returncode:
            raise RuntimeError(f"the floor's receiver failed (exit {receiver.returncode})")
        got = [tuple(map(float, line.split())) for line in out.read_text().splitlines() if line]
    pairs = [(t0, returned) for t0, returned in got][warmup:]  # BRPOP takes LPUSHes in order
    if len(pairs) != n:
        raise RuntimeError(f"the floor's receiver got {len(pairs)}/{n} values")
    return pairs, send_s


def measure_floor(url: str, style: str, n: int, interval: float) -> dict[str, Any]:
    """One floor run (see ``result``) on the server at ``url``."""
    pairs, send_s = floor_pairs(url, style, n, interval)
    return result(pairs, style, send_s)


# -- the receiver process ------------------------------------------------------------


def _receive(url: str, out: str, style: str) -> None:
    """BRPOP KEY until STOP arrives; write ``t0 returned`` per value."""
    lines: list[str] = []
    if style == "blocking":
        client = redis.Redis.from_url(url)
        while True:
            value: bytes = client.brpop([KEY], 0)[1]  # type: ignore[index,assignment]
            returned = time.time()
            if value == STOP:
                break
            lines.append(f"{value.decode()} {returned!r}")
        client.close()
    else:

        async def loop() -> None:
            client = redis.asyncio.Redis.from_url(url)
            while True:
                value: bytes = (await client.brpop([KEY], 0))[1]  # type: ignore[index,assignment]
                returned = time.time()
                if value == STOP:
                    break
                lines.append(f"{value.decode()} {returned!r}")
            await client.aclose()

        asyncio.run(loop())
    Path(out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    _receive(*sys.argv[1:4])
