"""An idle worker's wait (up to protocol.calls.IDLE_BLOCK, minutes) outlasts the socket
timeout (30 s by default): the exchange of a blocking command is given its timeout on
top, through both front ends, and the connection keeps its own afterwards."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import durq
from durq.protocol import lifecycle
from durq.protocol.calls import Op


def _wait(q: durq.Queue | durq.AsyncQueue, seconds: float) -> Op[Any]:
    return lifecycle.fetch_after_wait(q.keys, q.codec, 1, 10.0, seconds)


@pytest.mark.parametrize("front", ["async", "sync"])
def test_a_blocking_wait_may_outlast_the_socket_timeout(
    redis_url: str, queue_name: str, front: str
) -> None:
    url = f"{redis_url}?socket_timeout=0.3"
    start = time.monotonic()
    if front == "sync":
        with durq.Queue(queue_name, url) as q:
            jobs, next_ms, _ = q._run(_wait(q, 1.0))
            assert (jobs, next_ms) == ([], -1)
            assert q.stats().size == 0  # the connection is usable, with its own timeout
    else:

        async def main() -> tuple[list[durq.Job], int]:
            async with durq.AsyncQueue(queue_name, url) as q:
                jobs, next_ms, _ = await q._run(_wait(q, 1.0))
                assert (await q.stats()).size == 0
                return jobs, next_ms

        assert asyncio.run(main()) == ([], -1)
    assert time.monotonic() - start >= 0.9  # blocked the whole second, not cut short
