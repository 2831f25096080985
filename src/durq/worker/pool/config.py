"""The settings of a worker's process pool (``WorkerConfig.process_pool``)."""

from __future__ import annotations

from dataclasses import dataclass

from durq.errors import InvalidArgument

__all__ = ["DEFAULT_KILL_GRACE", "ProcessPoolConfig"]

#: seconds between a task's timeout (TimeLimitExceeded raised in it) and its child's kill
DEFAULT_KILL_GRACE = 3.0


@dataclass(frozen=True)
class ProcessPoolConfig:
    """How the children of a worker's process pool live and end (docs/process-pool.md).

    Attributes:
        kill_grace: seconds a task past its ``timeout`` gets to stop after
            ``durq.TimeLimitExceeded`` was raised in it; then its child is killed with
            SIGKILL (its process group: the processes it started too) and replaced.
        max_jobs_per_child: replace a child after this many jobs (each child draws its
            own limit up to 10% lower, so that children are not replaced together).
        max_memory_per_child: replace a child whose resident memory, read after each
            job, is above this many MB.
        max_child_age: replace a child older than this many seconds, between jobs.

    A child is replaced between jobs, never during one, and its replacement is forked
    before it exits: no job is lost or charged an attempt by a replacement.
    """

    kill_grace: float = DEFAULT_KILL_GRACE
    max_jobs_per_child: int | None = None
    max_memory_per_child: float | None = None
    max_child_age: float | None = None

    def __post_init__(self) -> None:
        if not self.kill_grace >= 0:
            raise InvalidArgument("kill_grace must be >= 0 seconds")
        if self.max_jobs_per_child is not None and self.max_jobs_per_child < 1:
            raise InvalidArgument("max_jobs_per_child must be >= 1")
        if self.max_memory_per_child is not None and not self.max_memory_per_child > 0:
            raise InvalidArgument("max_memory_per_child must be > 0 MB")
        if self.max_child_age is not None and not self.max_child_age > 0:
            raise InvalidArgument("max_child_age must be > 0 seconds")

    @property
    def recycles(self) -> bool:
        """True when some limit replaces children."""
        limits = (self.max_jobs_per_child, self.max_memory_per_child, self.max_child_age)
        return any(limit is not None for limit in limits)
