"""Threads for sync tasks, with timeouts that do not shrink the pool.

A Python thread cannot be killed. When a sync task runs past its timeout, its job is
failed and its thread is abandoned: a replacement thread starts at once, so the worker
keeps its full concurrency, and the abandoned thread exits when the call returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Callable
from queue import Empty, SimpleQueue
from typing import Any

__all__ = ["ThreadRunner"]


class _Ticket:
    __slots__ = ("abandoned", "args", "ctx", "fn", "future", "kwargs", "loop", "started")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: Any,
        kwargs: Any,
        future: asyncio.Future[Any],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.future = future
        self.loop = loop
        self.ctx = contextvars.copy_context()
        self.abandoned = False
        self.started = False


def _settle(results: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for future, ok, value in results:
        if future.done():  # cancelled meanwhile (timeout, shutdown)
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


# Results are handed to the event loop in batches (each hand-off writes to the loop's
# wake-up pipe): a thread that finds more work queued keeps going and posts what it
# finished when its queue is empty, after _BATCH results, or once _HOLD seconds passed
# since the first unposted one, so a slow task never delays a finished one for long.
_BATCH = 64
_HOLD = 0.001


class ThreadRunner:
    """Runs sync callables in ``size`` threads and awaits them from asyncio."""

    def __init__(self, size: int, name: str = "durq-task") -> None:
        self._inbox: SimpleQueue[_Ticket | None] = SimpleQueue()
        self._name = name
        self._size = size
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()  # decides, per ticket, between start and abandon
        self.abandoned = 0
        for _ in range(size):
            self._spawn()

    def _spawn(self) -> None:
        thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._threads.add(thread)
        thread.start()

    def _post(self, loop: asyncio.AbstractEventLoop, results: list[Any]) -> None:
        if results:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(_settle, results)

    def _loop(self) -> None:
        while True:
            ticket = self._inbox.get()
            if ticket is None:
                return
            loop = ticket.loop
            results: list[tuple[asyncio.Future[Any], bool, Any]] = []
            first = 0.0
            while ticket is not None:
                with self._lock:
                    skip = ticket.abandoned  # timed out before it started: drop it
                    ticket.started = not skip
                if not skip:
                    try:
                        results.append(
                            (
                                ticket.future,
                                True,
                                ticket.ctx.run(ticket.fn, *ticket.args, **ticket.kwargs),
                            )
                        )
                    except BaseException as exc:
                        results.append((ticket.future, False, exc))
                    if ticket.abandoned:  # a replacement took this thread's place
                        self._post(loop, results)
                        self._threads.discard(threading.current_thread())
                        return
                    now = time.monotonic()
                    first = first or now
                    if len(results) >= _BATCH or now - first > _HOLD:
                        self._post(loop, results)
                        results, first = [], 0.0
                try:
                    ticket = self._inbox.get_nowait()
                except Empty:
                    ticket = None
                    break
                if ticket is None:  # close() asked this thread to exit
                    self._post(loop, results)
                    return
            self._post(loop, results)

    async def run(
        self, fn: Callable[..., Any], args: Any, kwargs: Any, timeout: float | None
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` in a thread; raise TimeoutError after
        ``timeout`` seconds (the thread is abandoned and replaced)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        ticket = _Ticket(fn, args, kwargs, future, loop)
        self._inbox.put(ticket)
        try:
            if timeout is None:
                # not shielded: a shield costs a future and two loop callbacks per job.
                # A cancellation (a cancelled job, shutdown) cancels the future itself,
                # which the check below reads as "not finished" like a pending one
                return await future
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            if not future.done() or future.cancelled():
                with self._lock:
                    ticket.abandoned = True
                    started = ticket.started
                if started:
                    self.abandoned += 1
                    self._spawn()
            raise

    def close(self) -> None:
        """Ask idle threads to exit (running calls finish in their own time)."""
        for _ in range(len(self._threads)):
            self._inbox.put(None)
