"""The event loop that short sync calls borrow (``durq.worker.handoff``): a call runs on
the loop's thread in its caller's context, and one that runs over TAKEOVER leaves the
loop to the other thread, which keeps it running meanwhile."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from durq.worker import handoff
from durq.worker.handoff import TAKEOVER, run_worker

TAG: contextvars.ContextVar[str] = contextvars.ContextVar("TAG", default="")


def whoami(sleep: float = 0.0) -> tuple[str, str]:
    time.sleep(sleep)
    return threading.current_thread().name, TAG.get()


def test_a_short_call_runs_on_the_loops_thread_in_its_callers_context() -> None:
    async def main() -> list[tuple[str, str]]:
        lender = handoff.current()
        assert lender is not None
        while not lender.ready():  # the other thread is on its way to stand by
            await asyncio.sleep(0.001)
        loop_thread = threading.current_thread().name
        TAG.set("the job's")
        seen = [await lender.call(whoami, ()) for _ in range(20)]
        assert {name for name, _ in seen} == {loop_thread}
        assert lender.takeovers == 0
        return seen

    seen = run_worker(main())
    assert {tag for _, tag in seen} == {"the job's"}


def test_a_call_that_runs_over_leaves_the_loop_running_on_the_other_thread() -> None:
    async def main() -> tuple[int, int]:
        lender = handoff.current()
        assert lender is not None
        ticks = 0

        async def tick() -> None:  # the loop's other duties: lease keeper, pumps...
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        names = []
        for _ in range(3):  # the threads swap roles each time
            while not lender.ready():
                await asyncio.sleep(0.001)
            before = ticks
            name, _ = await lender.call(whoami, (0.3,))
            names.append((name, threading.current_thread().name))
            assert ticks - before >= 10  # it ticked all along the call
        ticker.cancel()
        for called_on, resumed_on in names:
            assert called_on != resumed_on  # the call's thread handed the loop over
        return lender.takeovers, ticks

    takeovers, _ = run_worker(main())
    assert takeovers == 3


def test_a_borrowed_calls_exception_reaches_its_caller() -> None:
    def boom() -> None:
        raise ValueError("in the task")

    async def main() -> str:
        lender = handoff.current()
        assert lender is not None
        while not lender.ready():
            await asyncio.sleep(0.001)
        with pytest.raises(ValueError, match="in the task"):
            await lender.call(boom, ())
        return "done"

    assert run_worker(main()) == "done"


def test_a_call_that_never_returns_does_not_keep_the_worker_from_ending() -> None:
    """As an abandoned pool thread: the worker gives up on the call, and run_worker
    returns although the thread that runs it is still stuck (a daemon thread)."""
    release = threading.Event()

    async def main() -> str:
        lender = handoff.current()
        assert lender is not None
        while not lender.ready():
            await asyncio.sleep(0.001)
        stuck = lender.call(release.wait, ())
        await asyncio.sleep(TAKEOVER * 20)  # the loop runs on: taken over
        assert not stuck.done() and not lender.ready()  # no thread stands by: no lending
        stuck.cancel()
        return "ended"

    started = time.monotonic()
    assert run_worker(main()) == "ended"
    assert time.monotonic() - started < 5
    release.set()


def test_the_coroutines_exception_is_raised_and_no_loop_is_left_behind() -> None:
    async def main() -> None:
        raise RuntimeError("the worker failed")

    with pytest.raises(RuntimeError, match="the worker failed"):
        run_worker(main())
    assert not handoff._BY_LOOP
