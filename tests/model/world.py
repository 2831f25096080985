"""The real side of the model test: one App and its queues on the frozen-clock server,
and the units the model knows them by.

Units: ``a`` and ``b`` are plain queues in two Redis Cluster slots (``b`` is another
slot: workflows whose steps live in both go through the outbox), ``s~0`` and ``s~1``
the shards of a sharded queue. Every example gets new names.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import redis

import durq
from durq import Queue, ShardedQueue
from model.clock import FrozenClock

LEASE_S = 1.0
WINDOW_S = 2.0  # the queues' dedup window: tombstones lapse within reach
RESULT_TTL_S = 3.0  # results and ended workflows' summaries
MAX_ATTEMPTS = 3


def step(*args: Any) -> int:
    """A workflow step (run by the driver, never by a worker)."""
    return len(args)


def collect(results: list[Any], *args: Any) -> int:
    """A workflow callback."""
    return len(results)


def tick(*args: Any) -> None:
    """A periodic job."""


@dataclass
class World:
    """The App, its queues and a raw client, for one example of the state machine."""

    url: str
    clock: FrozenClock
    tag: str = field(default_factory=lambda: secrets.token_hex(4))

    def __post_init__(self) -> None:
        self.names = {"a": f"m{self.tag}", "b": f"m{self.tag}-b", "s": f"m{self.tag}-s"}
        self.app = durq.App(
            self.url,
            default_queue=self.names["a"],
            result_ttl=RESULT_TTL_S,
            max_attempts=MAX_ATTEMPTS,
            lease=LEASE_S,
            backoff=durq.fixed(0.5),
        )
        self.app.task(name="step")(step)
        self.app.task(name="collect")(collect)
        self.app.task(name="tick")(tick)
        # b stays one of the app's queues: a schedule moved out of it is looked for
        # there (docs/schedules.md: a queue the app no longer uses is not)
        self.app.task(name="step_b", queue=self.names["b"])(step)
        self.raw = redis.Redis.from_url(self.url)
        self.sharded = ShardedQueue(self.names["s"], self.url, shards=2, lease=LEASE_S,
                                    max_attempts=MAX_ATTEMPTS, result_ttl=RESULT_TTL_S)  # fmt: skip
        self.fronts: dict[str, Queue] = {
            "a": self.app.queue(self.names["a"]),
            "b": self.app.queue(self.names["b"]),
            "s~0": self.sharded.shards[0],
            "s~1": self.sharded.shards[1],
        }
        for front in self.fronts.values():
            front.configure(dedup_window=WINDOW_S)

    def unit_of(self, queue: str) -> str:
        """The unit of a queue or shard name."""
        for unit, front in self.fronts.items():
            if front.name == queue:
                return unit
        raise KeyError(queue)

    def close(self) -> None:
        self.sharded.close()
        self.app.close()
        self.raw.close()
