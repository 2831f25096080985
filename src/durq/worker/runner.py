"""The Worker: one asyncio loop that fetches, runs and acknowledges jobs.

Lifecycle (``Worker.state``):

    STARTING  connecting, registering
    RUNNING   fetching as slots free up, running, acknowledging, extending leases
    DRAINING  after SIGTERM/SIGINT (or stop()): no more fetching; jobs not yet started
              are given back at once; running jobs get ``grace`` seconds, then are
              cancelled and given back (a defer: no attempt counted). A second signal
              cuts the grace short.
    STOPPED   every outcome sent (or, with Redis unreachable, logged as left to the
              lease), unregistered.

Nothing is acknowledged before it finished; anything not acknowledged comes back to
the queue when its lease ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import gc
import logging
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from durq._async.queue import AsyncQueue
from durq._version import __version__
from durq.app import durable, tracing
from durq.data_format import DATA_FORMAT
from durq.errors import InvalidArgument
from durq.metrics import WorkerMetrics
from durq.models import Job
from durq.transport import connection
from durq.worker import handoff
from durq.worker.batches import BatchPump
from durq.worker.cancel import cancel_and_wait
from durq.worker.capacity import Capacity, Delivery
from durq.worker.config import SYNC_CONCURRENCY, WorkerConfig, concurrency_for
from durq.worker.control import CANCELLED, JobControls, WorkerControl
from durq.worker.durable import DurableRuns
from durq.worker.eager import start_eagerly
from durq.worker.executor import DONE, Executor, Outcome
from durq.worker.health import HealthServer
from durq.worker.holding import Holding
from durq.worker.joblog import job_fields, log_outcome, log_start
from durq.worker.leases import LeaseKeeper
from durq.worker.memory_limit import MemoryLimit
from durq.worker.outbox import OutboxCourier
from durq.worker.pace import Pace
from durq.worker.pool import DEFAULT_KILL_GRACE, PoolBroken, cpus, start_pool
from durq.worker.pool.rss import available as rss_available
from durq.worker.pump import QueuePump
from durq.worker.registry import WorkerRegistry, new_worker_id
from durq.worker.schedules import ScheduleKeeper
from durq.worker.startup import check_server, find_shards, subscribe, wait_for_redis
from durq.worker.summary import add_summary
from durq.worker.upkeep import Upkeep

if TYPE_CHECKING:
    from durq.app.app import App
    from durq.worker.pool.pool import ProcessPool

__all__ = ["Worker", "WorkerState"]

log = logging.getLogger("durq.worker")
_debug = partial(log.isEnabledFor, logging.DEBUG)

# Container allocations between two collections of the young generation while a worker
# runs (CPython's default: 700). A job allocates a few dozen containers (its Job,
# delivery, task, coroutines, arguments, its client's futures), most of them freed by
# reference counting when it ends, and a young collection's cost is the objects alive
# in the young generation when it runs: the jobs in flight, not the threshold. So a
# higher threshold divides the collector's time per job; garbage in reference cycles
# (rare: an exception's traceback) waits a few thousand allocations longer to be freed.
YOUNG_THRESHOLD = 10_000


class _YoungThreshold:
    """Raises the young generation's threshold to YOUNG_THRESHOLD while at least one
    Worker of this process runs, and gives the process's own back when the last stops
    (a process-wide setting: several workers in one process, e.g. tests, share it)."""

    def __init__(self) -> None:
        self.users = 0
        self.saved: tuple[int, int, int] | None = None

    def raise_(self) -> None:
        self.users += 1
        if self.users == 1:
            self.saved = gc.get_threshold()
            gc.set_threshold(max(self.saved[0], YOUNG_THRESHOLD), *self.saved[1:])

    def restore(self) -> None:
        self.users -= 1
        if self.users == 0 and self.saved is not None:
            gc.set_threshold(*self.saved)
            self.saved = None


_young_threshold = _YoungThreshold()


class WorkerState(enum.Enum):
    """Where a Worker is in its life (see the module docstring)."""

    STARTING = "starting"
    RUNNING = "running"
    DRAINING = "draining"
    STOPPED = "stopped"


class Worker:
    """Runs the tasks of ``app`` from its queues.

    Args:
        app: the App whose tasks run here (only registered tasks run).
        config: see WorkerConfig.
        client: a ``redis.asyncio.Redis`` to use (default: one from the app's URL).
        metrics: where to record metrics (default: a fresh WorkerMetrics).
        handle_signals: install SIGTERM/SIGINT handlers (turn off when embedding).
    """

    def __init__(
        self,
        app: App,
        config: WorkerConfig | None = None,
        *,
        client: Any = None,
        metrics: WorkerMetrics | None = None,
        handle_signals: bool = True,
    ) -> None:
        self.app = app
        self.config = config or WorkerConfig()
        self.lease = app.lease if self.config.lease is None else self.config.lease
        named = list(self.config.queues)  # with their tasks' queues of their own (rate=)
        self.queue_names = app.routes.consumed(named) if named else app.queues
        self.queue_names = self.queue_names or [app.default_queue]
        self.id = self.config.name or new_worker_id()
        self.metrics = metrics or WorkerMetrics()
        self.state = WorkerState.STARTING
        # the jobs in hand (fetched, maybe running): one slot each
        self.concurrency = concurrency_for(self.config, app.tasks.values())
        self.capacity = Capacity(self.concurrency + self.config.prefetch)
        self.pumps: dict[str, QueuePump] = {}
        #: the queues (and shards) of batch tasks, each run by a BatchPump of its own
        self.batch_pumps: dict[str, BatchPump] = {}
        # read when scraped, rather than set twice per job; a running batch's items count
        self.metrics.in_hand.set_function(
            lambda: self.capacity.in_use() + sum(len(p.holding) for p in self.batch_pumps.values())
        )
        self._registry: WorkerRegistry | None = None
        #: the health and scaling endpoint, while served (``config.health_port``)
        self.health: HealthServer | None = None
        self._client = client
        self._owns_client = client is None
        self.handle_signals = handle_signals
        self._waiting: deque[Delivery] = deque()  # in hand, waiting to run
        self._running = 0
        # the process pool's template is forked here, before this worker starts threads
        self._pool = self._start_pool()
        pooled = self._pool.takes if self._pool is not None else lambda task: False
        # one thread per slot for sync tasks; an app of async tasks keeps a few for any
        # sync task registered later
        sync = any(not t.is_async and not pooled(t) for t in app.tasks.values())
        threads = self.concurrency if sync else min(self.concurrency, SYNC_CONCURRENCY)
        # a sync batch task's batches in flight (durq.Batch(concurrency=N)) each take a
        # thread while they run: as many threads at least
        in_flight = sum(
            t.config.batch.concurrency * len(app.shard_names(t.queue))
            for t in app.tasks.values()
            if t.config.batch is not None and not t.is_async
        )
        threads = max(threads, in_flight)
        self._executor = Executor(app, threads=threads, alone=lambda: self.capacity.in_use() == 1)
        self._stop = asyncio.Event()
        self._cut_grace = asyncio.Event()
        self._giving_back = False
        # made by run(), with the pumps; the controls are the ones its jobs see
        self._control: WorkerControl | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # run()'s
        self._controls: JobControls | None = None
        # the durable runs of the jobs that make durable calls (durq.step, durq.sleep...)
        self._durable: DurableRuns | None = None
        self.started_at = time.time()
        self.processed = 0  # runs of jobs that ended, whatever their outcome
        self.outcomes: dict[str, int] = {}  # of those runs, by outcome kind

    def _start_pool(self) -> ProcessPool | None:
        """The process pool (docs/process-pool.md), when some task runs in it; its
        settings and the memory limit checked first."""
        config = self.config
        limits = config.process_pool
        if (config.memory_limit or limits.max_memory_per_child) and not rss_available():
            raise InvalidArgument("a memory limit needs /proc (Linux) or psutil installed")
        size = self.concurrency if config.pool == "process" else cpus()
        pool = start_pool(self.app, config.pool, size, limits, self.metrics)
        if pool is None and (limits.recycles or limits.kill_grace != DEFAULT_KILL_GRACE):
            raise InvalidArgument(
                "the process pool's limits apply to tasks run in it, and no task of this "
                "app is: use --pool process (or @app.task(pool='process'))"
            )
        return pool

    def _pooled(self, delivery: Delivery) -> bool:
        """True when ``delivery``'s job runs in the process pool."""
        pool, task = self._pool, delivery.task
        return pool is not None and task is not None and pool.takes(task)

    # -- called by the pumps and the lease keeper -----------------------------------

    def accept(self, jobs: list[Job]) -> None:
        """Take fetched jobs into hand and start as many as there are free slots."""
        controls, executor, capacity = self._controls, self._executor, self.capacity
        traced = tracing.enabled()  # once per batch, not per job
        for job in jobs:
            job.control = controls  # Job.cancelled, Job.progress (worker.control)
            call = executor.prepare(job)
            task = executor.task_of(job) if isinstance(call, Outcome) else call[0]
            name = task.name if task is not None else "?"
            metrics = self.metrics.job_metrics(job.queue, name)
            if task is not None and task.log_name is not None and not isinstance(call, Outcome):
                name = task.log_name(call[1])  # the code it runs (a Django task's path)
            delivery = Delivery(job, task, call, name, metrics, traced)
            capacity.occupy(delivery)
            if capacity.open:
                self._waiting.append(delivery)
            else:  # fetched by a round trip under way when the worker began to stop
                self._finish(delivery, Outcome("defer"), 0.0)
        self._start_waiting()

    def pump_drained(self) -> bool:
        """Burst mode: stop fetching once every queue is drained and nothing is held."""
        if self.capacity.in_use() or not all(p.drained for p in self.pumps.values()):
            return False
        self.capacity.close()
        return True

    def _start_waiting(self) -> None:
        waiting = self._waiting
        if not waiting:
            return
        # each job runs in a Task of its own: its context variables (durq.current_job()
        # among them) stay its own, and cancelling it (a cancel request, a lost lease, a
        # stop) touches nothing else. Made as asyncio.Task itself unless the loop has a
        # task factory (two Python frames less per job than asyncio.create_task); a fixed
        # name: an unnamed Task formats "Task-<n>" for each job (docs/decisions/)
        loop = self._loop
        direct = loop is not None and loop.get_task_factory() is None
        while waiting and self._running < self.concurrency:
            delivery = waiting.popleft()
            self._running += 1
            delivery.started = time.monotonic()
            if waiting or self.capacity.in_use() > 1:
                if direct:
                    delivery.runner = asyncio.Task(self._run(delivery), loop=loop, name="durq-job")
                else:
                    delivery.runner = asyncio.create_task(self._run(delivery), name="durq-job")
            else:
                # the only job in hand (an idle worker's pickup): it starts now, not a
                # loop turn later; a job that ends in that step needs no task at all
                delivery.runner = start_eagerly(self._run(delivery, eager=True), "durq-job")

    def lease_lost(self, delivery: Delivery, why: str) -> None:
        """Another worker was handed this job: stop caring about it (and stop it when
        it is a coroutine)."""
        if delivery.lost or (self._durable is not None and self._durable.parked(delivery.key)):
            return  # a parked job left the worker: its lease went with it
        delivery.lost = True
        job, name = delivery.job, delivery.name
        self.metrics.lease_lost(job.queue)
        log.warning(
            "lease lost on job %s (%s) of %s: %s; another worker may be running it",
            job.id,
            name,
            job.queue,
            why,
            extra=job_fields(job, name, Outcome("lost")),
        )
        task, runner = delivery.task, delivery.runner
        if runner is not None and task is not None and (task.is_async or self._pooled(delivery)):
            runner.cancel()  # a coroutine is cancelled, a child killed

    def cancel_requested(self, delivery: Delivery) -> None:
        """A cancel of this job was asked: stop it (see ``WorkerControl``)."""
        if self._control is not None:
            self._control.cancel_requested(delivery)

    def _end_unstarted(self, delivery: Delivery) -> None:
        """A job in hand whose cancel was asked before it started: it never runs."""
        if delivery in self._waiting:
            self._waiting.remove(delivery)
            self._finish(delivery, CANCELLED, 0.0)

    # -- running a job ----------------------------------------------------------------

    async def _run(self, delivery: Delivery, eager: bool = False) -> None:
        job = delivery.job
        pickup = (job.lease_deadline - self.lease) - job.enqueued_at
        if eager:
            # an idle worker's pickup: counted a loop turn later, once the body started
            # (code that an idle worker runs cold, off its pickup); a busy worker counts
            # at once, without a loop callback per job
            asyncio.get_running_loop().call_soon(delivery.metrics.started, pickup)
        else:
            delivery.metrics.started(pickup)
        if _debug():
            log_start(job, delivery.name)
        begun = time.monotonic()
        try:
            if (
                self._pool is not None
                and self._pooled(delivery)
                and not isinstance(delivery.call, Outcome)
            ):
                outcome = await self._run_in_pool(delivery)
            else:
                outcome = await self._executor.execute(job, delivery.call, delivery.traced)
        except asyncio.CancelledError:
            if delivery.cancelling:
                outcome = CANCELLED
            else:
                outcome = Outcome("defer") if self._giving_back else Outcome("lost")
        except Exception as exc:  # a bug in durq itself: keep the job safe and say so
            name = delivery.name
            log.exception(
                "job %s (%s) of %s: internal error",
                job.id,
                name,
                job.queue,
                extra=job_fields(job, name, None),
            )
            outcome = Outcome("defer", delay=1.0, reason=str(exc).encode())
        finally:
            self._running -= 1
        runs = self._durable
        if runs is not None and runs.runs:  # one check per job; a durable run: its outcome
            outcome = runs.settle(job, delivery.name, outcome)
        if delivery.lost:
            outcome = Outcome("lost")
        controls = self._controls  # WorkerControl.busy(), without a call per job
        if controls is not None and (controls.reporters or controls.cancelled):
            await controls.ended(job)  # its last progress report, if one waits
        self._finish(delivery, outcome, time.monotonic() - begun)

    def _run_in_pool(self, delivery: Delivery) -> Awaitable[Outcome]:
        pool, executor = self._pool, self._executor
        assert pool is not None
        if not delivery.traced:
            return pool.run(delivery, executor)
        return tracing.traced_execution(delivery.job, lambda job: pool.run(delivery, executor))

    def _finish(self, delivery: Delivery, outcome: Outcome, seconds: float) -> None:
        job = delivery.job
        # frees the slot and wakes the pumps that may fetch now: they run once this
        # returns, when the outcome is in the acknowledgement buffer
        if not self.capacity.vacate(delivery):
            return  # already given back during shutdown
        if outcome.result is not None:  # the job's summary rides with its result
            add_summary(outcome, job, delivery.name, delivery.call, seconds, self.id, self.lease)
        self.pumps[job.queue].acks.add(job, outcome)
        self.processed += 1
        self.outcomes[outcome.kind] = self.outcomes.get(outcome.kind, 0) + 1
        delivery.metrics.finished(outcome.kind, seconds)
        if outcome is not DONE or _debug():  # a plain success is logged only at DEBUG
            log_outcome(job, delivery.name, outcome, seconds)
        if self._waiting:
            self._start_waiting()

    # -- lifecycle ----------------------------------------------------------------------

    def stop(self, *, immediate: bool = False) -> None:
        """Begin a graceful stop (``immediate``: no grace for running jobs)."""
        if immediate or self._stop.is_set():
            self._cut_grace.set()
        self._stop.set()

    def on_signal(self, signum: int) -> None:
        """SIGTERM or SIGINT arrived (call it on the worker's loop): the first drains,
        a second stops at once."""
        first = not self._stop.is_set()
        log.warning(
            "%s received: %s",
            signal.Signals(signum).name,
            "draining (send again to stop at once)" if first else "stopping now",
        )
        self.stop(immediate=not first)

    def _make_pumps(self) -> dict[str, AsyncQueue]:
        """A pump per queue and shard: a BatchPump for a batch task's queue
        (durq.worker.batches), else a QueuePump; every queue (and shard) by name."""
        assert self._client is not None
        owners = {t.queue: t for t in self.app.tasks.values() if t.config.batch is not None}
        queues: dict[str, AsyncQueue] = {}
        for name in self.queue_names:
            for queue in self.app.shard_names(name):  # one pump per shard
                source = queues[queue] = self.app.aqueue(queue, client=self._client)
                if name in owners:
                    self.batch_pumps[queue] = BatchPump(
                        source,
                        owners[name],
                        self._executor,
                        self.metrics,
                        lease=self.lease,
                        burst=self.config.burst,
                        worker=self.id,
                    )
                    continue
                self.pumps[queue] = QueuePump(
                    source,
                    self,
                    self.capacity,
                    self.metrics,
                    batch=self.config.batch,
                    lease=self.lease,
                    burst=self.config.burst,
                )
        return queues

    async def _set_task_rates(self) -> None:
        """The rates of tasks' queues of their own (``@app.task(rate=...)``), set on the
        queues this worker consumes."""
        for name, (_, rate) in self.app.routes.rated.items():
            if name in self.pumps:
                await self.pumps[name].queue.configure(rate=rate)

    async def run(self) -> None:
        """Run until stopped (signal, ``stop()``) or, in burst mode, drained."""
        if self._client is None:
            self._client = connection.async_client(self.app.url)
        if not await wait_for_redis(self._client, self.app.url, self._stop):
            await self._stopped_early()
            return
        await self.app.hooks.run("worker_start")  # app.on("worker_start"): set-up per process
        await find_shards(self.app, self._client, self.queue_names)
        queues = self._make_pumps()
        await self._set_task_rates()
        # jobs this worker cannot run wait for one that can (worker.holding)
        holding = Holding(self.app.tasks.values(), self.id, self.app.unknown_task_grace)
        for pump in self.pumps.values():
            pump.hold_op = holding.hold
        control = WorkerControl(
            queues, self._client, self.capacity, self.config.cancel_grace, self._end_unstarted
        )
        self._control, self._controls = control, control.controls
        pool = self._start_children(control)
        await subscribe(self.app, self._client, self.queue_names)
        await check_server(next(iter(queues.values())))
        # upsert the app's schedules before any dequeue
        schedules = ScheduleKeeper(
            self.app.schedules, self.queue_names, list(queues.values()), self._client
        )
        await schedules.start()
        registry = WorkerRegistry(
            self._client,
            self.app.namespace,
            self.id,
            {
                "host": self.id.split(":")[0],
                "pid": int(self.id.split(":")[1]) if self.id.count(":") >= 2 else 0,
                "queues": self.queue_names,
                "concurrency": self.concurrency,
                "started": self.started_at,
                "pool": self.config.pool,
                "version": __version__,
                "format": DATA_FORMAT,
                "tasks": len(holding.caps),
            },
        )
        self._registry = registry
        loop = self._loop = asyncio.get_running_loop()
        self._executor.handoff = handoff.current()  # run by run_worker: lends its thread
        if self.handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.on_signal, sig)
        keeper = LeaseKeeper(
            self.capacity,
            queues,
            self.app.tasks.values(),
            self.lease,
            self.lease_lost,
            control.cancel_requested,
            # a child is killed at its timeout: its lease is kept until then
            bounded=self._pooled,
        )
        control.keeper = keeper  # a cancel message makes it extend at once
        # the heartbeat's pace: stretched while nothing is in hand (worker.pace)
        pace = Pace(self.config.heartbeat, self._idle)
        children = (lambda: {"children": pool.snapshot()}) if pool is not None else None
        background = [
            asyncio.create_task(self._forever("lease keeper", keeper.run)),
            asyncio.create_task(
                self._forever(
                    "heartbeat",
                    lambda: registry.run(
                        pace, self.capacity, self.metrics, children, self.batch_pumps.values()
                    ),
                )
            ),
            asyncio.create_task(self._forever("cancel listener", control.listener.run)),
        ]
        background += self._serve_health(loop)
        couriers = self._couriers()
        background += [asyncio.create_task(self._forever(n, c.run)) for n, c in couriers]
        # with each heartbeat: what no wake marker announces (leases, alarms, schedule
        # refills, held jobs), so that idle pumps and couriers need not poll
        upkeep = Upkeep(
            list(self.pumps.values()),
            list(self.batch_pumps.values()),
            [c for _, c in couriers],
            schedules,
            holding,
            pace,
        )
        background.append(asyncio.create_task(self._forever("upkeep", upkeep.run)))
        background += self._keepers()
        # Everything made so far (the app, its imports, clients, scripts) lives about as
        # long as the worker: move it out of the collector's sight while the worker
        # runs, so that the full collections the jobs' short-lived objects trigger do
        # not traverse it again and again (docs/decisions/worker-collector.md). Only a
        # speed hint: the objects are given back to the collector when the worker stops
        # (an embedding process, e.g. a test suite, then collects whatever of them became
        # garbage).
        gc.freeze()
        # the jobs' tasks copy this context: their durable calls find this worker's runs
        self._durable = DurableRuns(queues, self.capacity, loop)
        host = durable.install(self._durable)
        pumps = [asyncio.create_task(self._pump(p)) for p in self.pumps.values()]
        for batch_pump in self.batch_pumps.values():  # each lane: a batch in flight
            pumps += [
                asyncio.create_task(
                    self._forever(f"batches {batch_pump.name}", partial(batch_pump.run, lane))
                )
                for lane in batch_pump.lanes
            ]
        self.state = WorkerState.RUNNING
        log.info(
            "worker %s consuming %s (concurrency %d, lease %.1fs)",
            self.id,
            ", ".join(self.queue_names),
            self.concurrency,
            self.lease,
        )
        stop_wait = asyncio.create_task(self._stop.wait())
        all_pumps: asyncio.Future[Any] = asyncio.gather(*pumps)
        _young_threshold.raise_()  # see YOUNG_THRESHOLD
        try:
            first: list[asyncio.Future[Any]] = [stop_wait, all_pumps]
            await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
            await self._drain(all_pumps)
        finally:
            _young_threshold.restore()  # first: the awaits below may be cut short
            durable.uninstall(host)

            await cancel_and_wait(stop_wait, *background)
            if self.handle_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
            with contextlib.suppress(Exception):
                await registry.remove()
            self._executor.close()
            await self._close_pool()
            self._close_health()
            gc.unfreeze()
            if self._owns_client:
                await self._client.aclose()
            self.state = WorkerState.STOPPED
            log.info("worker %s stopped after %s", self.id, _runs(self.outcomes))
        if pool is not None and pool.broken:
            raise PoolBroken("the process pool's template process died; the worker stopped")

    def _couriers(self) -> list[tuple[str, OutboxCourier]]:
        """The couriers of workflow outboxes, each with its name: each consumed queue's is delivered
        by its workers (durq.worker.outbox), and the app's default queue is the home of
        the workflows submitted with an id (docs/workflows.md): every worker delivers
        its outbox, consumed or not."""
        homes = {
            name: self.app.aqueue(name, client=self._client)
            for name in self.app.shard_names(self.app.default_queue)
            if name not in self.pumps and name not in self.batch_pumps
        }
        boxes = {name: pump.queue for name, pump in self.pumps.items()}
        boxes.update((name, pump.queue) for name, pump in self.batch_pumps.items())
        return [
            (f"outbox {name}", OutboxCourier(box, lease=min(self.lease, 10.0)))
            for name, box in [*boxes.items(), *homes.items()]
        ]

    async def _close_pool(self) -> None:
        """Stop the process pool's children and template, if there is a pool."""
        if self._pool is not None:
            await self._pool.close()

    async def _stopped_early(self) -> None:
        """Stopped while waiting for Redis: nothing ran; the process pool's template (forked
        already) exits too."""
        await self._close_pool()
        if self._owns_client and self._client is not None:
            await self._client.aclose()
        self.state = WorkerState.STOPPED
        log.info("worker %s stopped before Redis answered", self.id)

    def _start_children(self, control: WorkerControl) -> ProcessPool | None:
        """Fork the process pool's children (while the worker connects), and hand it
        what it tells the worker and the worker tells it."""
        pool = self._pool
        if pool is not None:
            pool.start()
            pool.on_broken = self.stop
            control.tell_cancel = pool.cancel
        return pool

    def _keepers(self) -> list[asyncio.Task[None]]:
        """The background tasks of the process pool and of the memory limit."""
        pool, tasks = self._pool, []
        if pool is not None:
            tasks.append(asyncio.create_task(self._forever("process pool", pool.upkeep)))
        if self.config.memory_limit is not None:
            limit = MemoryLimit(
                int(self.config.memory_limit * 1048576),
                self.capacity,
                self.metrics,
                pool.pids if pool is not None else list,
            )
            tasks.append(asyncio.create_task(self._forever("memory limit", limit.run)))
        return tasks

    def _serve_health(self, loop: asyncio.AbstractEventLoop) -> list[asyncio.Task[None]]:
        """Start the health endpoint if asked (``config.health_port``): its loop tick."""
        if self.config.health_port is None:
            return []
        self.health = HealthServer(
            self, self.config.health_port, self.config.health_host, self.config.target_latency
        )
        self.health.start(loop)
        return [asyncio.create_task(self._forever("health", self.health.tick))]

    def _close_health(self) -> None:
        if self.health is not None:
            self.health.close()

    def redis_ok(self) -> bool:
        """The last heartbeat reached Redis, within three heartbeat intervals (the
        readiness of ``durq.worker.health``, which pings past them: an idle worker
        beats once per IDLE_HEARTBEAT)."""
        registry = self._registry
        if registry is None or registry.last_ok is None:
            return False
        return time.monotonic() - registry.last_ok < 3 * self.config.heartbeat

    @property
    def heartbeat(self) -> float:
        """Seconds between heartbeats while jobs are in hand."""
        return self.config.heartbeat

    async def ping(self) -> None:
        """One PING through the worker's client (raises when Redis does not answer)."""
        if self._client is None:
            raise RuntimeError("not started")
        await self._client.ping()

    def _idle(self) -> bool:
        """Nothing in hand: no job, and no batch task's batch."""
        return self.capacity.in_use() == 0 and not any(p.holding for p in self.batch_pumps.values())

    async def _pump(self, pump: QueuePump) -> None:
        await self._forever(f"pump {pump.name}", pump.run)

    async def _forever(self, what: str, body: Callable[[], Awaitable[None]]) -> None:
        """Run ``body`` until it returns; if it fails (a bug, not a Redis outage: those
        are retried inside), log it and run it again, so no loop stops silently. A body
        that returns has nothing (more) to do, e.g. a cancel listener on a client without
        pub/sub: running it again at once would spin the event loop."""
        while True:
            try:
                await body()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed; restarting it in 1 s", what)
                await asyncio.sleep(1.0)

    async def _wait_runners(self, runners: list[asyncio.Task[None]]) -> None:
        """Until the runners finish, the grace period ends, or a second signal."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.config.grace
        pending: set[asyncio.Future[Any]] = set(runners)
        cut = asyncio.create_task(self._cut_grace.wait())
        try:
            while pending and loop.time() < give_up:
                done, _ = await asyncio.wait(
                    pending | {cut},
                    timeout=give_up - loop.time(),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if cut in done:
                    return
                pending -= done
        finally:
            cut.cancel()

    async def _drain(self, all_pumps: asyncio.Future[Any]) -> None:
        self.state = WorkerState.DRAINING
        self.capacity.close()
        if self._pool is not None:  # jobs waiting for a child go back with the others
            self._pool.drain()
        # jobs not started yet go back at once, without counting an attempt
        while self._waiting:
            delivery = self._waiting.popleft()
            self._finish(delivery, Outcome("defer"), 0.0)
        for batch_pump in self.batch_pumps.values():
            batch_pump.stop()
        runners = [d.runner for d in self.capacity.deliveries.values() if d.runner is not None]
        runners += [r for p in self.batch_pumps.values() for r in p.runners]
        if runners:
            log.info("waiting up to %.0fs for %d running jobs", self.config.grace, len(runners))
            await self._wait_runners(runners)
        self._giving_back = True
        late = [d.runner for d in self.capacity.deliveries.values() if d.runner is not None]
        for batch_pump in self.batch_pumps.values():
            batch_pump.giving_back = True
            late += batch_pump.runners
        for runner in late:
            runner.cancel()
        if late:
            log.warning("gave back %d unfinished jobs", len(late))
            await asyncio.gather(*late, return_exceptions=True)
        self.capacity.wake_all()
        try:
            await asyncio.wait_for(asyncio.shield(all_pumps), timeout=10.0)
        except asyncio.TimeoutError:
            # what the pumps hold, and what a round trip under way sent without a reply
            # yet (the round trip is cancelled below: that reply is never read)
            unsent = sum(len(p.acks) for p in self.pumps.values())
            unanswered = sum(len(p.sending) for p in self.pumps.values())
            log.error(
                "could not send %d acknowledgements, and %d more were sent without a reply "
                "(those may have been applied); the jobs not acknowledged come back after "
                "their lease",
                unsent,
                unanswered,
            )
            all_pumps.cancel()
            await asyncio.gather(all_pumps, return_exceptions=True)


# the words of the outcome kinds in the worker's last line
_OUTCOME_WORDS = {
    "done": "completed",
    "retry": "to be retried",
    "dead": "dead-lettered",
    "defer": "deferred",
    "limited": "rate-limited",
    "cancelled": "cancelled",
    "lost": "lost to another worker",
}


def _runs(outcomes: dict[str, int]) -> str:
    """``"5 runs of jobs (3 completed, 2 to be retried)"``: what a worker did, by outcome
    (a job retried twice and completed makes three runs)."""
    total = sum(outcomes.values())
    parts = [f"{n} {_OUTCOME_WORDS.get(kind, kind)}" for kind, n in outcomes.items() if n]
    noun = "run" if total == 1 else "runs"
    return f"{total} {noun} of jobs" + (f" ({', '.join(parts)})" if parts else "")
