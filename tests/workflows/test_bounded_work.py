"""No workflow script call runs long, at the documented limit (issue 30, bug 10): the
largest workflow docs/workflows.md allows (100,000 steps: a group of 99,999 and its
callback) is submitted, then cancelled, failed, or run to its end, and the server's
slow log (``slowlog-log-slower-than 10000``: 10 ms) stays empty. Its starts, the
gathering of its results and the stop of its steps go over many calls (cursors and
outbox entries). Before, one cancel of such a workflow ran over a second.

The slow log measures wall time: on a machine whose CPU is saturated (CI's busy cores),
a call can wait for the CPU longer than it works. So each call is also sent alone and
the CPU time the server spent on it is measured (the server process's CPU clock, as
tests/lua/test_script_bounds.py reads it), which tells the work when the slow log
cannot (``Big.check``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest
import redis

import durq
from durq.app import workflows
from durq.codec import PayloadCodec
from durq.dev.server import RedisServer
from durq.payloads import encode_result
from durq.protocol import lifecycle
from durq.protocol import workflows as wf
from durq.protocol.args import reason_json
from durq.protocol.calls import Op, Pipeline, ScriptCall
from durq.protocol.status import Status
from lua.test_script_bounds import cpu_clock
from workflows.support import courier

pytestmark = [pytest.mark.slow]  # server time: its CPU clock (see above)

BOUND_MS = 10.0
SIZE = wf.MAX_NODES


class Meter:
    """Runs ops with each of their calls sent alone, and notes the CPU time the server's
    main thread spent on each (none where /proc does not tell)."""

    def __init__(self, pid: int) -> None:
        self.clock = cpu_clock(pid)
        self.calls = 0
        self.cpu: list[tuple[float, str]] = []

    def cpu_ms(self) -> float | None:
        try:
            return time.clock_gettime_ns(self.clock) / 1e6
        except (OSError, AttributeError):  # not Linux
            return None

    def serial(self, op: Op[Any]) -> Generator[Any, Any, Any]:
        try:
            request = next(op)
            while True:
                calls = request.calls if isinstance(request, Pipeline) else (request,)
                replies = []
                for call in calls:
                    replies.append((yield from self._one(call)))
                if isinstance(request, Pipeline):
                    request = op.send(replies)
                elif isinstance(replies[0], Exception):
                    request = op.throw(replies[0])
                else:
                    request = op.send(replies[0])
        except StopIteration as stop:
            return stop.value

    def _one(self, call: Any) -> Generator[Any, Any, Any]:
        before = self.cpu_ms()
        [reply] = yield Pipeline((call,))
        after = self.cpu_ms()
        self.calls += 1
        if before is not None and after is not None:
            if isinstance(call, ScriptCall):
                name = call.script.name
                if name == "workflow_deliver":  # with the kind of the entry
                    name += f" {str(call.args[0])[2:3]}"  # b'R...
            else:
                name = str(call.args[0])
            self.cpu.append((after - before, name))
        return reply


@pytest.fixture
def server(make_server: Callable[..., RedisServer]) -> Iterator[RedisServer]:
    """A private server whose slow log records every call over 10 ms."""
    srv = make_server()
    client = redis.Redis.from_url(srv.url)
    client.config_set("slowlog-log-slower-than", int(BOUND_MS * 1000))
    client.config_set("slowlog-max-len", 1000)
    client.close()
    yield srv


class Big:
    """The largest workflow on the private server, driven call by call."""

    def __init__(self, server: RedisServer) -> None:
        self.app = durq.App(server.url, default_queue="big", max_attempts=3)

        @self.app.task()
        def one(i: int) -> int:
            return i

        @self.app.task()
        def count(values: list[int]) -> int:
            return len(values)

        self.flow = durq.group([one.s(i) for i in range(SIZE - 1)]).then(count.s())
        self.queue = self.app.queue("big")
        assert self.queue.dequeue() is None  # loads durq's library: not a call measured
        self.client = redis.Redis.from_url(server.url)
        self.meter = Meter(server.pid)

    def run(self, op: Op[Any]) -> Any:
        return self.queue._run(self.meter.serial(op))

    def submit(self) -> durq.WorkflowHandle:
        self.client.slowlog_reset()
        app, sub = workflows._prepare(self.flow, None, "fail", None)
        created, run = self.run(sub.op())
        assert created
        self.courier()  # (the client starts them all; nothing is left)
        assert self.queue.stats().pending == SIZE - 1
        return durq.WorkflowHandle(app, "big", sub.id, run=run)

    def courier(self, rounds: int = 100_000) -> list[bytes]:
        entries: list[bytes] = courier(self.queue, rounds=rounds, run=self.run)
        return entries

    def take(self, n: int) -> list[durq.Job]:
        jobs: list[durq.Job] = self.run(lifecycle.dequeue(self.queue.keys, PayloadCodec(), n, 60))
        return jobs

    def check(self) -> None:
        """The slow log is empty. On a machine whose CPU is saturated it may record waits
        for the CPU: then the CPU time of the calls tells their work instead, 99.9 % of
        them under the bound and none over three times it (a step of the Lua collector or
        of the server's cron lands on whichever call runs then; a call whose work grew
        with the workflow took over 100 ms at this size)."""
        assert self.meter.calls > SIZE // 100  # the work went over many calls
        slow = [(e["duration"] / 1000, e["command"][:60]) for e in self.client.slowlog_get(100)]
        if not slow:
            return
        # (the CPU pressure the machine reported was no guide: 13.5 ms of wall time at 7.9 %)
        assert self.meter.cpu, f"calls over {BOUND_MS} ms: {slow}"
        ordered = sorted(self.meter.cpu)
        assert ordered[int(len(ordered) * 0.999)][0] < BOUND_MS, ordered[-20:]
        assert ordered[-1][0] < 3 * BOUND_MS, ordered[-5:]

    def close(self) -> None:
        self.client.close()
        self.app.close()


@pytest.fixture
def big(server: RedisServer) -> Iterator[Big]:
    made = Big(server)
    yield made
    made.close()


@pytest.mark.parametrize("end", ["cancel", "fail"])
def test_the_largest_workflow_stops_in_short_calls(big: Big, end: str) -> None:
    handle = big.submit()
    if end == "cancel":
        status, _ = big.run(wf.cancel(big.queue.keys, handle.id))
        assert status is Status.CANCELLED
    else:
        [job] = big.take(1)
        reason = reason_json("broken")
        assert big.run(lifecycle.requeue(big.queue.keys, [(job, 0, reason, True)])) == [Status.DEAD]
        assert [e[:2] for e in big.courier(rounds=1)] == [b"D\0"]  # it fails
    assert big.take(1) == []  # the guard: no step starts while the stop goes on
    entries = big.courier()
    assert len(entries) > SIZE // wf.STOP_CHUNK // 2  # the stop went over many calls
    big.check()
    stats = big.queue.stats()
    assert stats.pending == 0 and stats.cancelled == SIZE - 1 - (end == "fail")
    info = handle.status()
    assert info is not None and info.state == ("cancelled" if end == "cancel" else "failed")
    assert info.counts.get("cancelled", 0) >= SIZE - 1


def test_the_largest_workflow_runs_to_its_end_in_short_calls(big: Big) -> None:
    handle = big.submit()
    done = 0
    while jobs := big.take(100):
        results = [encode_result(j.payload[1][0] % 7) for j in jobs]
        big.run(lifecycle.release(big.queue.keys, jobs, results=results))
        done += len(jobs)
    assert done == SIZE - 1
    assert len(big.courier()) >= SIZE // wf.FIRE_CHUNK - 1  # gathered over calls
    [callback] = big.take(1)
    assert callback.payload[0] == "count"
    assert callback.payload[1][0] == [i % 7 for i in range(SIZE - 1)]
    big.run(lifecycle.release(big.queue.keys, [callback], results=[encode_result(SIZE - 1)]))
    assert handle.result(5) == SIZE - 1
    big.check()
    info = handle.status()
    assert info is not None and info.state == "completed"
