"""Worker settings."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from durq.errors import InvalidArgument
from durq.keys import check_queue_name
from durq.protocol.args import lease_ms
from durq.worker.pool import ProcessPoolConfig, cpus

if TYPE_CHECKING:
    from durq.app.task import Task

__all__ = ["ASYNC_CONCURRENCY", "SYNC_CONCURRENCY", "WorkerConfig", "concurrency_for"]


@dataclass(frozen=True)
class WorkerConfig:
    """How a worker process runs.

    Attributes:
        queues: the queues to consume (default: every queue of the app's tasks).
        concurrency: jobs running at once in this process: async tasks as coroutines,
            sync tasks in as many threads. Default: ASYNC_CONCURRENCY (100) when every
            task of the app is ``async def``, else SYNC_CONCURRENCY (20); see
            ``concurrency_for``.
        prefetch: jobs held beyond ``concurrency``, started as slots free up (default 0:
            a worker takes only what it can start, which keeps groups fair).
        lease: seconds of the lease under which jobs are fetched (default: the app's);
            the worker extends leases every third of it while it lives, so a dead
            worker's jobs come back within about one lease.
        grace: seconds running jobs get to finish on SIGTERM/SIGINT before they are
            cancelled and given back (default 25).
        cancel_grace: seconds a sync task whose job was cancelled gets to notice
            ``durq.current_job().cancelled`` and return, before its thread is abandoned
            as on a timeout (default 5; async tasks are cancelled at once).
        heartbeat: seconds between heartbeats (default 5): the registry's, and the
            upkeep's look at each queue (``durq.worker.upkeep``); stretched to
            ``IDLE_HEARTBEAT`` (10 min) while nothing is in hand (``durq.worker.pace``).
        burst: stop once the queues are drained (nothing ready, running or scheduled).
        batch: the most jobs fetched or acknowledged per round trip (default 500).
        pool: where sync tasks run unless they name a ``pool`` of their own:
            ``"thread"`` (the default) or ``"process"``, child processes forked from a
            template (docs/process-pool.md), ``concurrency`` of them (default: the
            CPUs); tasks that ask for the process pool under threads get as many
            children as there are CPUs.
        process_pool: the children's kill grace and recycling limits.
        memory_limit: MB of resident memory (this process, its pool's children and
            template) above which the worker stops fetching until it is back under 90%
            of it (``worker.memory_limit``); None: no limit.
        health_port: serve /livez, /readyz, /scale.json and /metrics on this port
            (``durq.worker.health``; None: not served; 0: any free port).
        health_host: the address the health endpoint listens on (loopback by default).
        target_latency: seconds within which ready jobs should start, for the worker
            count /scale.json suggests (default 10).
    """

    queues: Sequence[str] = ()
    concurrency: int | None = None
    prefetch: int = 0
    lease: float | None = None
    grace: float = 25.0
    cancel_grace: float = 5.0
    heartbeat: float = 5.0
    burst: bool = False
    batch: int = 500
    name: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    pool: Literal["thread", "process"] = "thread"
    process_pool: ProcessPoolConfig = field(default_factory=ProcessPoolConfig)
    memory_limit: float | None = None
    health_port: int | None = None
    health_host: str = "127.0.0.1"
    target_latency: float = 10.0

    def __post_init__(self) -> None:
        for q in self.queues:
            check_queue_name(q)
        if self.concurrency is not None and self.concurrency < 1:
            raise InvalidArgument("concurrency must be >= 1")
        if self.prefetch < 0:
            raise InvalidArgument("prefetch must be >= 0")
        if self.grace < 0 or self.heartbeat <= 0:
            raise InvalidArgument("grace must be >= 0 and heartbeat > 0")
        if self.cancel_grace < 0:
            raise InvalidArgument("cancel_grace must be >= 0")
        if not 1 <= self.batch <= 1000:
            raise InvalidArgument("batch must be in 1..1000")
        if self.lease is not None:
            lease_ms(self.lease)  # refused here rather than by every fetch
        if self.pool not in ("thread", "process"):
            raise InvalidArgument(f"pool must be 'thread' or 'process', got {self.pool!r}")
        if self.memory_limit is not None and not self.memory_limit > 0:
            raise InvalidArgument("memory_limit must be > 0 MB")
        if self.health_port is not None and not 0 <= self.health_port <= 65535:
            raise InvalidArgument("health_port must be in 0..65535")
        if not self.target_latency > 0:
            raise InvalidArgument("target_latency must be > 0")


#: the default concurrency of a worker whose tasks are all ``async def``: a job waiting
#: on I/O costs a coroutine, and at 20 a worker spends its time on round trips that
#: fetch and acknowledge a few jobs each (bench/archive/analysis-wave2.md §3); 100 is also the
#: most connections redis-py's asyncio pool gives a task body by default
ASYNC_CONCURRENCY = 100
#: the default concurrency when any task is a plain ``def``: one thread each, and more
#: threads only contend for the GIL
SYNC_CONCURRENCY = 20


def concurrency_for(config: WorkerConfig, tasks: Iterable[Task[Any, Any]]) -> int:
    """The jobs a worker runs at once: ``config.concurrency``, or the default for
    ``tasks`` (the CPUs for the process pool, ASYNC_CONCURRENCY when all are async,
    else SYNC_CONCURRENCY)."""
    if config.concurrency is not None:
        return config.concurrency
    if config.pool == "process":
        return cpus()
    tasks = list(tasks)
    if tasks and all(t.is_async for t in tasks):
        return ASYNC_CONCURRENCY
    return SYNC_CONCURRENCY
