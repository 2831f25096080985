"""The App of ``bench/pickup_timeline.py``, with its measurement-only stamps.

Imported by the ``durq worker`` under test, so the stamps run in the worker's own process:
``time.time()`` when the event loop's selector returns with events (the worker's
wake-up), when the loop hands bytes to a stream (``StreamReader.feed_data``), and when an
exchange that carried a ``BZPOPMIN`` returns (the fetch's reply read and parsed). The
task bodies write those three beside their own start. The patches
live here and in the tool, never in ``src/``: they exist only to be measured.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import time
from collections.abc import Sequence
from typing import Any

import durq
from durq._async import driver as _driver

app = durq.App(url=os.environ["BENCH_REDIS_URL"])
OUT = os.environ.get("BENCH_TIMELINE_OUT", os.devnull)

#: time.time() of the last selector wait that returned events: the process woke up
_woke = [0.0]
#: time.time() when the event loop last handed bytes to a stream (data_received)
_fed = [0.0]
#: (woke, fed, parsed) of the last exchange that carried a BZPOPMIN: the fetch after a wait
_fetched = [0.0, 0.0, 0.0]

_select = selectors.EpollSelector.select


def _stamped_select(self: Any, timeout: float | None = None) -> Any:
    ready = _select(self, timeout)
    if ready:
        _woke[0] = time.time()
    return ready


# asyncio's default loop uses selectors.DefaultSelector (epoll on Linux); with uvloop
# installed the worker runs on uvloop instead and the wake-up stamp stays 0 (n/a)
selectors.EpollSelector.select = _stamped_select  # type: ignore[method-assign]

_feed = asyncio.StreamReader.feed_data


def _stamped_feed(self: Any, data: bytes) -> None:
    _fed[0] = time.time()
    _feed(self, data)


asyncio.StreamReader.feed_data = _stamped_feed  # type: ignore[method-assign]

_exchange = _driver.async_exchange


async def _stamped_exchange(conn: Any, packed: Sequence[bytes], count: int) -> list[Any]:
    replies = await _exchange(conn, packed, count)
    if b"BZPOPMIN" in packed[0][:48]:
        _fetched[0], _fetched[1], _fetched[2] = _woke[0], _fed[0], time.time()
    return replies


_driver.async_exchange = _stamped_exchange  # type: ignore[assignment]


def _record(kind: str, seq: int, t0: float) -> None:
    body = time.time()
    with open(OUT, "a") as f:
        f.write(f"{kind} {seq} {t0!r} {' '.join(map(repr, _fetched))} {body!r}\n")


@app.task(queue="timeline")
def tl_sync(seq: int, t0: float) -> None:
    """A plain ``def`` task: runs in the worker's thread pool."""
    _record("def", seq, t0)


@app.task(queue="timeline")
async def tl_async(seq: int, t0: float) -> None:
    """An ``async def`` task: runs on the worker's event loop."""
    _record("async", seq, t0)
