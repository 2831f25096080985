"""A real server whose clock stands still until the test moves it.

Every time durq uses is the server's (``TIME`` inside the scripts; key TTLs). The model
test runs a private server under libfaketime with an absolute time read from a file at
every clock read (``FAKETIME_NO_CACHE``), wall and monotonic clocks alike, so the
server's clock is frozen between two moves, to the millisecond. Leases, delays, rates,
expiries, debounce windows, throttle windows, dedup windows, schedule ticks and result
TTLs then all happen exactly when the model says, and a run is reproducible from its
seed. The price: no blocking command may use a timeout (it would never end), so the
driver never waits (``dequeue`` without ``wait``).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from durq.dev.server import RedisServer
from faults.harness import faketime_library
from helpers import require_flavor

START_MS = 1_893_456_000_000
"""Where the clock starts: 2030-01-01 00:00:00 UTC (any fixed point: runs are
reproducible whatever the day)."""


class FrozenClock:
    """The time a libfaketime'd server reads: ``now`` ms, moved only by ``advance``."""

    def __init__(self, path: Path, start_ms: int = START_MS) -> None:
        self.path = path
        self.now = 0
        self.set(start_ms)

    def set(self, ms: int) -> None:
        if ms < self.now:
            raise ValueError(f"the clock only moves forward ({ms} < {self.now})")
        self.now = ms
        when = datetime.datetime.fromtimestamp(ms // 1000, datetime.timezone.utc)
        # libfaketime parses the fraction as a double: half a ms more keeps the server's
        # floor(us / 1000) on `ms`
        text = f"{when:%Y-%m-%d %H:%M:%S}.{ms % 1000:03d}500\n"
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.path)  # atomic: the server never reads half a line

    def advance(self, ms: int) -> int:
        self.set(self.now + ms)
        return self.now


@contextmanager
def _preloaded(env: dict[str, str]) -> Iterator[None]:
    """The environment ``env`` for the processes spawned inside (the server inherits
    it; this process does not load libfaketime)."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def frozen_server(flavor: str, data_dir: Path) -> tuple[RedisServer, FrozenClock]:
    """A started private server of ``flavor`` whose clock is a FrozenClock (skipped
    without libfaketime, failed under CI)."""
    library = faketime_library()
    clock = FrozenClock(data_dir / "faketime.rc")
    env = {
        "LD_PRELOAD": library,
        "FAKETIME_TIMESTAMP_FILE": str(clock.path),
        "FAKETIME_NO_CACHE": "1",
        "TZ": "UTC",
    }
    server = RedisServer(binary=require_flavor(flavor), flavor=flavor, data_dir=data_dir / "srv")
    with _preloaded(env):
        server.start()
    return server, clock
