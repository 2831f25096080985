"""An event loop that a short sync task may borrow without ever stalling the worker.

Running a short sync task on the event loop's own thread saves the hop to a pool thread
and back (two cross-thread wake-ups, most of an idle worker's pickup), but a
call that turns out slow would stall the loop: no lease extended, no job fetched or
acknowledged, the job handed out again and run twice (issue 30). ``run_worker`` runs the
loop so that neither happens:

* two threads of its own take turns at running the loop; the one that holds it runs a
  borrowed call (``Handoff.call``) in place of the loop: it stops the loop (after the
  current turn), runs the call, and runs the loop again, without a wake-up;
* the other thread stands by. When a call has run TAKEOVER seconds (up to twice that,
  see HOT), the one standing by runs the loop instead: leases are extended, jobs
  fetched and finished as before, while the call goes on in the thread that started
  it. When it ends, its result reaches the loop like a pool thread's, and that thread
  stands by in turn;
* a call is lent only while a thread stands by (``Handoff.ready``): one stuck in a call
  that ran over lends nothing until it is back.

Both threads are daemon threads, and the caller's thread only waits (and turns SIGTERM
and SIGINT into the worker's own signal handling): a call that never returns cannot keep
the process from exiting, as an abandoned pool thread cannot. A worker run otherwise (its
own ``asyncio.run``, embedded in an application) lends no calls: its sync tasks all run
in pool threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["TAKEOVER", "Handoff", "current", "run_worker"]

T = TypeVar("T")

#: seconds a borrowed call may hold the loop's thread before the other thread runs the
#: loop: 2.5 times the longest run of a task lent the loop (executor.INLINE_BUDGET)
TAKEOVER = 0.005
#: seconds after a call the thread standing by keeps looking every TAKEOVER on its own
#: (so it may notice a call up to TAKEOVER late), so that the next call need not wake
#: it: waking it costs each call more (it then contends for the GIL) than a look costs,
#: off any job's path (docs/decisions/worker-loop-thread.md); idle, it sleeps
HOT = 0.1

_BY_LOOP: dict[asyncio.AbstractEventLoop, Handoff] = {}


def current() -> Handoff | None:
    """The Handoff of the running loop, if it was started by ``run_worker``."""
    return _BY_LOOP.get(asyncio.get_running_loop())


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # cancelled meanwhile (the job's cancel, a lost lease, a stop)
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class _Call:
    """A borrowed call under way: when it began, and whether the loop was taken over."""

    __slots__ = ("began", "taken")

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.taken = False


class Handoff:
    """The loop and the two threads that take turns at running it (see the module)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, takeover: float = TAKEOVER) -> None:
        self.loop = loop
        self.takeover = takeover
        self._cond = threading.Condition()
        self._request: tuple[Callable[..., Any], Any, contextvars.Context, Any] | None = None
        self._call: _Call | None = None  # the borrowed call under way
        self._standing = 0  # threads standing by
        self._sleeping = False  # the one standing by waits for a call to begin
        self._hot_until = 0.0  # the one standing by looks on its own until then
        self._finished = False  # the worker's coroutine ended
        self.takeovers = 0

    def ready(self) -> bool:
        """True when a call may borrow the loop's thread now (a thread stands by)."""
        return self._standing > 0 and self._request is None

    def call(self, fn: Callable[..., T], args: Any) -> asyncio.Future[T]:
        """Run ``fn(*args)`` on the thread that runs the loop, once this turn of the
        loop ends, in the caller's context; the future of its result."""
        future: asyncio.Future[T] = self.loop.create_future()
        self._request = (fn, args, contextvars.copy_context(), future)
        self.loop.stop()
        return future

    # -- the two threads ---------------------------------------------------------------

    def serve(self, main: asyncio.Future[Any], holding: bool) -> bool:
        """A thread's life: run the loop while holding it, else stand by, until ``main``
        (the worker's coroutine) is done; True when this thread held the loop then."""
        while True:
            if holding:
                if not self._hold(main):
                    return True
                holding = False
            elif self._stand_by():
                holding = True
            else:
                return False

    def _hold(self, main: asyncio.Future[Any]) -> bool:
        """Run the loop until ``main`` is done (False) or a borrowed call ran over and
        the other thread took the loop (True: this thread stands by now)."""
        while True:
            self.loop.run_forever()
            request, self._request = self._request, None
            if request is not None and self._lend(request):
                return True
            if main.done():
                with self._cond:
                    self._finished = True
                    self._cond.notify_all()
                return False

    def _lend(self, request: tuple[Callable[..., Any], Any, contextvars.Context, Any]) -> bool:
        """Run a borrowed call; True when the loop was taken over meanwhile."""
        fn, args, context, future = request
        call = _Call()
        with self._cond:
            self._call = call
            if self._sleeping:
                self._cond.notify()
        try:
            ok, value = True, context.run(fn, *args)
        except BaseException as exc:  # to the awaiting task, as from a pool thread
            ok, value = False, exc
        with self._cond:
            self._call = None
            self._hot_until = time.monotonic() + HOT
            taken = call.taken
            finished = self._finished
        if not taken:
            _settle(future, ok, value)  # the loop is not running: no hand-off needed
            return False
        if not finished:  # (a loop closed meanwhile: nobody waits any more)
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(_settle, future, ok, value)
        return True

    def _stand_by(self) -> bool:
        """Wait until a borrowed call runs over (True: this thread holds the loop now),
        or the worker's coroutine is done (False)."""
        with self._cond:
            self._standing += 1
            try:
                while not self._finished:
                    call = self._call
                    if call is None:
                        if time.monotonic() < self._hot_until:  # calls may come soon
                            self._cond.wait(self.takeover)
                            continue
                        self._sleeping = True
                        self._cond.wait()
                        self._sleeping = False
                        continue
                    left = call.began + self.takeover - time.monotonic()
                    if left > 0:
                        self._cond.wait(left)
                        continue
                    call.taken = True
                    self.takeovers += 1
                    return True
                return False
            finally:
                self._standing -= 1


def run_worker(coro: Coroutine[Any, Any, T], on_signal: Callable[[int], None] | None = None) -> T:
    """Run ``coro`` (a worker's ``run()``) to its end on a new event loop whose thread
    short sync tasks may borrow (see the module), as ``asyncio.run`` would otherwise.
    ``on_signal``, called on the loop with the signal number, receives SIGTERM and
    SIGINT when this is the main thread."""
    loop = asyncio.new_event_loop()
    handoff = Handoff(loop)
    _BY_LOOP[loop] = handoff
    main = loop.create_task(coro)
    main.add_done_callback(lambda _: loop.stop())
    done = threading.Event()
    errors: list[BaseException] = []

    def serve(holding: bool) -> None:
        try:
            if not handoff.serve(main, holding):
                return  # the other thread saw the end
        except BaseException as exc:  # a bug here: the caller must not wait for ever
            errors.append(exc)
        done.set()

    previous: dict[int, Any] = {}
    if on_signal is not None and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(
                sig, lambda signum, _: loop.call_soon_threadsafe(on_signal, signum)
            )
    threads = [
        threading.Thread(target=serve, args=(holding,), name=f"durq-loop-{i}", daemon=True)
        for i, holding in enumerate((True, False))
    ]
    try:
        for thread in threads:
            thread.start()
        done.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    _BY_LOOP.pop(loop, None)
    if errors:
        raise errors[0]
    try:
        _cancel_all(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()
    return main.result()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks left on ``loop`` and let them end (as asyncio.run does)."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
