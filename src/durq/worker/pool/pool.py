"""The worker's process pool: children that run sync tasks, one job at a time each.

The worker keeps everything that touches Redis: leases (extended while a child runs the
job, whatever its timeout: the child is killed at a bounded time), and every fenced
release or requeue. A child only runs the job it is handed and sends back its outcome, so
killing it at any moment is safe: its job's lease token is the fence, and the worker
decides what becomes of the job.

* **One job per idle child.** A job is sent to a child only when the child is idle; the
  others wait in the worker's memory, never in a child's socket (Celery's parent could
  block writing to a child that had died, celery#1310).
* **Time limits.** At the task's ``timeout`` the child gets SIGUSR1 (``TimeLimitExceeded``
  is raised in the task); ``kill_grace`` seconds later its process group gets SIGKILL
  and a replacement is forked at once. Either way the job fails with reason ``timeout``
  and follows its retry policy; a child stopped by the exception is replaced too.
* **Deaths.** A child that dies by itself (a signal, an exit) fails its job with the
  signal in the reason (``durq.worker.pool.reasons``), and is replaced.
* **Hooks.** A child runs the hooks of the jobs it runs; for a job whose child died
  running it (killed at its hard limit, or by itself) the worker runs the end hook
  (``task_retry``/``task_failure``, with ``TimeLimitExceeded`` or ``ChildDied``).
* **Recycling.** ``max_jobs_per_child`` (each child its own limit, up to 10% lower),
  ``max_memory_per_child`` (resident memory after each job), ``max_child_age``: the
  child is replaced between jobs, its replacement forked before it exits (for the job
  and age limits, as its last job starts), so no job waits and none is charged.
* **Stopping.** A job cancelled, whose lease was lost, or still running at the end of a
  drain, has its child killed; the worker ends the job as it would a thread's
  (cancelled, nothing, given back). Jobs that wait for a child when the worker drains
  are given back at once, without an attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import random
import signal
import socket
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from durq.app.task import Task
from durq.context import set_current_job
from durq.errors import ChildDied, LeaseLost, TimeLimitExceeded
from durq.metrics import WorkerMetrics
from durq.protocol.args import reason_json
from durq.worker.capacity import Delivery
from durq.worker.executor import DONE, Executor, Outcome, end_hook
from durq.worker.pool.child import TIME_LIMIT_SIGNAL
from durq.worker.pool.config import ProcessPoolConfig
from durq.worker.pool.errors import PoolBroken
from durq.worker.pool.metrics import PoolMetrics
from durq.worker.pool.reasons import OomKills, death_fields
from durq.worker.pool.rss import rss
from durq.worker.pool.template import Template
from durq.worker.pool.wire import Frames, frame, job_fields

if TYPE_CHECKING:
    from durq.app.app import App

__all__ = ["PoolBroken", "ProcessPool"]

log = logging.getLogger("durq.worker")

#: a child that dies before it is ready is replaced after a pause, doubling to this
_MOST_PAUSE = 5.0


def _stopped(delivery: Delivery) -> str:
    """Why the worker stops a child whose run was cancelled."""
    if delivery.cancelling:
        return "cancelled"
    return "lease_lost" if delivery.lost else "shutdown"


def _recycled(child: Child, cause: str) -> str:
    """Why ``child`` is replaced between jobs, for the log."""
    if cause == "max_memory":
        return f"used {child.rss / 1048576:.0f} MB after a job (max_memory_per_child)"
    if cause == "timeout":
        return "was stopped by TimeLimitExceeded"
    if cause == "max_jobs":
        return f"ran its {child.limit} jobs (max_jobs_per_child)"
    return "reached its max_child_age"


class _State(enum.Enum):
    STARTING = "starting"  # forked (or asked for), not ready yet
    IDLE = "idle"
    BUSY = "busy"
    RETIRED = "retired"  # takes no job; closed once its replacement is ready
    DEAD = "dead"


class Child:
    """One child process, as the worker sees it."""

    def __init__(self, sock: socket.socket, predecessor: Child | None) -> None:
        self.sock = sock
        self.frames = Frames()
        self.pid = 0
        self.state = _State.STARTING
        self.asked = time.monotonic()  # when its fork was asked for
        self.born = 0.0  # when it was ready
        self.jobs = 0
        self.limit: int | None = None  # its max_jobs_per_child, jittered
        self.rss = 0
        self.delivery: Delivery | None = None
        self.seq = 0
        self.future: asyncio.Future[tuple[Any, ...]] | None = None
        self.soft_at: float | None = None  # TimeLimitExceeded was signalled
        self.kill_timer: asyncio.TimerHandle | None = None
        self.stopping: str | None = None  # why the worker killed it
        self.retiring: str | None = None  # replaced after its job, for this cause
        self.successor: Child | None = None
        self.predecessor = predecessor  # the child it replaces, closed when it is ready
        self.replaces: str = ""  # for the log: what happened to the child it replaces
        self.open = True  # its socket (the worker's end)


class ProcessPool:
    """The children of one worker.

    Args:
        app: the App whose tasks run in the children (imported in the template, which is
            forked now: call before any thread starts).
        size: children kept.
        config: kill grace and recycling limits.
        default: True when sync tasks without a ``pool`` of their own run here.
        metrics: the worker's metrics (the pool's are added to its registry).
    """

    def __init__(
        self,
        app: App,
        size: int,
        config: ProcessPoolConfig,
        *,
        default: bool,
        metrics: WorkerMetrics,
    ) -> None:
        self.size = size
        self.config = config
        self.default = default
        self.metrics = PoolMetrics(metrics, self.alive)
        self.template = Template.start(app)
        self.children: set[Child] = set()
        self._by_request: dict[int, Child] = {}
        self._by_pid: dict[int, Child] = {}
        self._idle: deque[Child] = deque()
        self._waiters: deque[asyncio.Future[Child | None]] = deque()
        self._seq = 0
        self._oom = OomKills()
        self._failed_starts = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.draining = False
        self.closing = False
        self.broken = False
        #: called once when the template died (the worker stops)
        self.on_broken: Callable[[], None] = lambda: None
        #: seconds from asking for a child to its being ready, the latest first
        self.start_times: deque[float] = deque(maxlen=64)

    # -- what runs here -----------------------------------------------------------------

    def takes(self, task: Task[Any, Any]) -> bool:
        """True when ``task``'s jobs run in this pool."""
        if task.is_async:
            return False
        pool = task.config.pool
        return pool == "process" or (pool is None and self.default)

    def alive(self) -> int:
        """Children alive (starting, idle, busy or retiring)."""
        return sum(1 for c in self.children if c.state is not _State.DEAD)

    def pids(self) -> list[int]:
        """The template's and the children's process ids (the worker's memory counts
        them)."""
        alive = [c.pid for c in self.children if c.pid and c.state is not _State.DEAD]
        return [self.template.pid, *alive]

    def snapshot(self) -> list[dict[str, Any]]:
        """The children for the worker's heartbeat: pid, state, job, jobs run, resident
        bytes, age."""
        now = time.monotonic()
        out = []
        for c in sorted(self.children, key=lambda c: c.born or c.asked):
            if c.state is _State.DEAD or not c.pid:
                continue
            job = c.delivery.job if c.delivery is not None else None
            out.append(
                {
                    "pid": c.pid,
                    "state": c.state.value,
                    "job": job.id if job is not None else None,
                    "queue": job.queue if job is not None else None,
                    "task": c.delivery.name if c.delivery is not None else None,
                    "jobs": c.jobs,
                    "rss": rss(c.pid) or c.rss,
                    "age": round(now - c.born, 1) if c.born else 0.0,
                }
            )
        return out

    # -- life of the pool ---------------------------------------------------------------

    def start(self) -> None:
        """Fork the children (in the worker's event loop)."""
        loop = self._loop = asyncio.get_running_loop()
        loop.add_reader(self.template.fileno(), self._from_template)
        for _ in range(self.size):
            self._spawn(None)

    def drain(self) -> None:
        """The worker drains: jobs waiting for a child are given back at once."""
        self.draining = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def close(self) -> None:
        """Close every child's socket (idle children exit), then the template, which
        kills what is left and exits."""
        self.closing = True
        self.drain()
        loop = asyncio.get_running_loop()
        for child in list(self.children):
            self._close(child)
        with contextlib.suppress(ValueError, OSError):
            loop.remove_reader(self.template.fileno())
        await loop.run_in_executor(None, self.template.close)

    # -- running a job ------------------------------------------------------------------

    async def run(self, delivery: Delivery, executor: Executor) -> Outcome:
        """Run ``delivery``'s job in a child; its outcome."""
        child = await self._acquire()
        if child is None:  # the worker drains: not started, so no attempt counts
            return Outcome("defer")
        loop = asyncio.get_running_loop()
        job, task = delivery.job, delivery.task
        assert task is not None
        self._seq += 1
        seq = child.seq = self._seq
        child.state, child.delivery, child.soft_at = _State.BUSY, delivery, None
        future = child.future = loop.create_future()
        delivery.started = time.monotonic()  # a wait for a child is no run time
        self._prefork(child)
        timeout = task.config.timeout
        timer = loop.call_later(timeout, self._time_is_up, child, seq) if timeout else None
        try:
            try:
                await loop.sock_sendall(child.sock, frame(("run", seq, job_fields(job))))
            except OSError:  # it died idle (its exit is on its way): the job never started
                child.future, child.delivery = None, None
                log.warning("job %s (%s) of %s: its child process died before the job "
                            "reached it; given back without an attempt",
                            job.id, delivery.name, job.queue)  # fmt: skip
                return Outcome("defer")
            reply = await future
        except asyncio.CancelledError:
            if child.future is future:  # still running it: stop it
                self._kill(child, seq, _stopped(delivery))
            raise
        finally:
            if timer is not None:
                timer.cancel()
        outcome = self._outcome(delivery, executor, reply)
        if reply[0] == "died" and outcome.error is not None and executor.app.hooks.around_jobs:
            await self._hooks_of_death(executor, delivery, outcome)
        return outcome

    @staticmethod
    async def _hooks_of_death(executor: Executor, delivery: Delivery, outcome: Outcome) -> None:
        """The end hooks of a job whose child died running it (killed at its hard time
        limit, or by itself): the child could not run them, so the worker does, in the
        job's context, with the exception that says how it died."""
        job, task = delivery.job, delivery.task
        assert task is not None
        end = end_hook(outcome, None)
        if end is not None:
            job.task = task.name
            set_current_job(job)  # this run's own asyncio task: local to it
            await executor.app.hooks.run(end[0], job, end[1])

    def cancel(self, delivery: Delivery) -> None:
        """A cancel of ``delivery``'s job was asked: ``Job.cancelled`` becomes true in
        its child (the worker kills the child after ``cancel_grace``)."""
        self._tell(delivery, "cancel")

    def _tell(self, delivery: Delivery, what: str) -> None:
        for child in self.children:
            if child.delivery is delivery and child.open:
                with contextlib.suppress(OSError):
                    child.sock.send(frame((what, child.seq)))

    def _outcome(self, delivery: Delivery, executor: Executor, reply: tuple[Any, ...]) -> Outcome:
        kind, data, timed_out, stopped = reply
        task, job = delivery.task, delivery.job
        assert task is not None and delivery.started is not None
        if kind == "done":  # decided in the child, which ran the job's hooks by it
            outcome_kind, result, delay, reason, summary, scope = data
            if outcome_kind == "done" and result is None:
                return DONE
            return Outcome(outcome_kind, result, delay, reason, summary, scope)
        if timed_out:
            elapsed = time.monotonic() - delivery.started
            grace = f"killed with SIGKILL {self.config.kill_grace:g} s later"
            outcome = executor.timed_out(task, job, elapsed, f" ({grace}, and replaced)")
            outcome.error = TimeLimitExceeded(
                f"{task.name} ran past its timeout of {task.config.timeout} s; its child "
                f"process was {grace}"
            )
            return outcome
        if self.broken or stopped:  # not the job's doing: given back, no attempt counted
            why = "the process pool's template process died" if self.broken else stopped
            reason = reason_json({"reason": "pool", "message": why})
            return Outcome("defer", delay=1.0, reason=reason)
        fields = death_fields(data, self._oom)
        self.metrics.killed(fields["reason"])
        log.warning("job %s (%s) of %s: %s", job.id, delivery.name, job.queue, fields["message"])
        outcome = executor.failed(task, job, fields)
        outcome.error = ChildDied(fields["message"])
        return outcome

    # -- children -----------------------------------------------------------------------

    async def _acquire(self) -> Child | None:
        if self.draining:
            return None
        while self._idle:
            child = self._idle.popleft()
            if child.state is _State.IDLE and child.open:
                return child
        waiter: asyncio.Future[Child | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            handed = waiter.result() if waiter.done() and not waiter.cancelled() else None
            if handed is not None:
                self._offer(handed)  # handed over as this run was cancelled
            raise

    def _offer(self, child: Child) -> None:
        """``child`` is idle: to the first job waiting for one, else to the idle list."""
        child.state = _State.IDLE
        if not child.open:
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(child)
                return
        self._idle.append(child)

    def _spawn(self, predecessor: Child | None, replaces: str = "") -> Child | None:
        """Ask the template for a child (``predecessor``: the one it replaces)."""
        if self.broken or self.closing:
            return None
        ours, theirs = socket.socketpair()
        try:
            request = self.template.fork(theirs)
        except OSError:
            ours.close()
            return None  # the template is gone: its end of file says so
        finally:
            theirs.close()
        ours.setblocking(False)
        child = Child(ours, predecessor)
        child.replaces = replaces
        if predecessor is not None:
            predecessor.successor = child
        self.children.add(child)
        self._by_request[request] = child
        assert self._loop is not None
        self._loop.add_reader(ours.fileno(), self._readable, child)
        return child

    def _spawn_later(self, predecessor: Child | None, replaces: str) -> None:
        """A replacement after a pause that doubles while children die before they are
        ready (a fork that keeps failing must not spin)."""
        self._failed_starts += 1
        pause = min(0.1 * 2 ** (self._failed_starts - 1), _MOST_PAUSE)
        log.error(
            "a child of the process pool died before it was ready; forking another in %.1f s",
            pause,
        )
        assert self._loop is not None
        self._loop.call_later(pause, self._spawn, predecessor, replaces)

    def _from_template(self) -> None:
        messages = self.template.read()
        for message in messages or ():
            if message[0] == "forked":
                child = self._by_request.pop(message[1], None)
                if child is not None and child.state is not _State.DEAD:
                    child.pid = message[2]
                    self._by_pid[child.pid] = child
            elif message[0] == "exited":
                found = self._by_pid.pop(message[1], None)
                if found is not None:
                    self._ended(found, message[2])
        if messages is None:
            self._broke()

    def _readable(self, child: Child) -> None:
        try:
            data = child.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._hang_up(child)
            return
        for message in child.frames.feed(data):
            self._message(child, message)

    def _message(self, child: Child, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "done":
            _, seq, fields, resident = message
            future = child.future
            if seq != child.seq or future is None:
                return
            child.rss, child.jobs = resident, child.jobs + 1
            child.future, child.delivery = None, None
            if child.kill_timer is not None:
                child.kill_timer.cancel()
                child.kill_timer = None
            if not future.done():
                future.set_result(("done", fields, child.soft_at is not None, None))
            self._after_job(child)
        elif kind == "progress":
            _, seq, fraction, info = message
            delivery = child.delivery
            control = delivery.job.control if delivery is not None else None
            if seq == child.seq and delivery is not None and control is not None:
                job = delivery.job
                try:
                    control.progress(job, fraction, info)
                except LeaseLost:
                    self._tell(delivery, "lost")
                except Exception as exc:  # checked in the child: should not happen
                    log.debug("job %s of %s: progress not reported: %s", job.id, job.queue, exc)
        elif kind == "ready":
            if not child.pid:  # (before the template's "forked": two sockets, no order)
                child.pid = message[1]
                self._by_pid[child.pid] = child
            self._ready(child)

    def _ready(self, child: Child) -> None:
        if child.state is not _State.STARTING:
            return
        now = time.monotonic()
        child.born = now
        self.start_times.appendleft(now - child.asked)
        self._failed_starts = 0
        limit = self.config.max_jobs_per_child
        if limit is not None:
            child.limit = limit - random.randint(0, limit // 10)
        if child.replaces:
            log.info(
                "child %d of the process pool ready in %.1f ms, replacing one that %s",
                child.pid,
                (now - child.asked) * 1000,
                child.replaces,
            )
        predecessor, child.predecessor = child.predecessor, None
        if predecessor is not None and predecessor.state is _State.RETIRED:
            self._close(predecessor)
        if self.closing:
            self._close(child)
        else:
            self._offer(child)

    def _prefork(self, child: Child) -> None:
        """The job just handed to ``child`` is its last (its job or age limit): fork its
        replacement now, so that it is ready when the job ends."""
        if child.successor is not None:
            return
        cause = None
        if child.limit is not None and child.jobs + 1 >= child.limit:
            cause = "max_jobs"
        age = self.config.max_child_age
        if age is not None and time.monotonic() - child.born >= age:
            cause = "max_age"
        if cause is not None:
            child.retiring = cause
            self._spawn(child, _recycled(child, cause))

    def _after_job(self, child: Child) -> None:
        """``child`` finished a job: idle again, or replaced."""
        if child.state is not _State.BUSY or child.stopping:
            return
        cause = child.retiring
        if cause is None and child.soft_at is not None:
            cause = "timeout"  # interrupted by TimeLimitExceeded: started afresh
        limit = self.config.max_memory_per_child
        if cause is None and limit is not None and child.rss > limit * 1024 * 1024:
            cause = "max_memory"
        age = self.config.max_child_age
        if cause is None and age is not None and time.monotonic() - child.born >= age:
            cause = "max_age"
        if cause is None and child.limit is not None and child.jobs >= child.limit:
            cause = "max_jobs"
        if cause is None:
            self._offer(child)
        else:
            self._retire(child, cause)

    def _retire(self, child: Child, cause: str) -> None:
        child.state = _State.RETIRED
        self.metrics.recycled(cause)
        successor = child.successor
        if successor is None:
            self._spawn(child, _recycled(child, cause))
        elif successor.state is not _State.STARTING:  # ready already
            self._close(child)

    async def upkeep(self) -> None:
        """Replace the idle children past ``max_child_age``, until cancelled (a child
        past it while busy is replaced after its job)."""
        age = self.config.max_child_age
        if age is None:
            return
        while True:
            await asyncio.sleep(min(age / 4, 1.0))
            now = time.monotonic()
            for child in list(self._idle):
                idle = child.state is _State.IDLE and child.open and child.successor is None
                if idle and not self.closing and now - child.born >= age:
                    self._retire(child, "max_age")

    def _time_is_up(self, child: Child, seq: int) -> None:
        if child.seq != seq or child.future is None or child.stopping:
            return
        child.soft_at = time.monotonic()
        self.template.signal(child.pid, TIME_LIMIT_SIGNAL)
        assert self._loop is not None
        child.kill_timer = self._loop.call_later(
            self.config.kill_grace, self._kill, child, seq, "timeout"
        )

    def _kill(self, child: Child, seq: int, why: str) -> None:
        """SIGKILL ``child``'s process group if it still runs job ``seq``; its
        replacement is forked at once."""
        if child.seq != seq or child.future is None or child.stopping or child.state is _State.DEAD:
            return
        child.stopping = why
        self.metrics.killed(why)
        self.template.signal(child.pid, signal.SIGKILL, group=True)
        if child.successor is None:
            child.successor = self._spawn(None, f"was killed ({why})")

    def _close(self, child: Child) -> None:
        """Close the worker's end of ``child``'s socket: an idle child exits."""
        if not child.open:
            return
        child.open = False
        if self._loop is not None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(child.sock.fileno())
        child.sock.close()

    def _hang_up(self, child: Child) -> None:
        """``child``'s socket reached end of file: it died, or closed it. Make sure it
        is dead; its exit status (from the template) ends its job."""
        self._close(child)
        if child.pid and child.state is not _State.DEAD:
            self.template.signal(child.pid, signal.SIGKILL, group=True)

    def _ended(self, child: Child, status: int | None) -> None:
        """``child`` exited (``status``: its wait status; None when unknown)."""
        was = child.state
        child.state = _State.DEAD
        self._close(child)
        self.children.discard(child)
        if child.kill_timer is not None:
            child.kill_timer.cancel()
        future, child.future = child.future, None
        if future is not None and not future.done():
            future.set_result(("died", status, child.soft_at is not None, child.stopping))
        if self.closing or self.broken:
            return
        if was is _State.STARTING:
            self._spawn_later(child.predecessor, child.replaces)
        elif child.successor is None and was is not _State.RETIRED:
            what = "died" if child.stopping is None else f"was killed ({child.stopping})"
            child.successor = self._spawn(None, what)

    def _broke(self) -> None:
        """The template is gone (end of file on its socket): its children are dying
        (PR_SET_PDEATHSIG) or killed here; their jobs are given back, and the worker
        stops."""
        if self.broken:
            return
        self.broken = True
        assert self._loop is not None
        with contextlib.suppress(ValueError, OSError):
            self._loop.remove_reader(self.template.fileno())
        log.error(
            "the process pool's template process (pid %d) died: no child can be forked; "
            "the worker stops (the jobs of its children are given back)",
            self.template.pid,
        )
        for child in list(self.children):
            if child.pid and child.state is not _State.DEAD:
                with contextlib.suppress(OSError):
                    os.killpg(child.pid, signal.SIGKILL)
            self._ended(child, None)
        self.drain()
        self.on_broken()
