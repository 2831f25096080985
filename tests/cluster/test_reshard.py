"""Slots of a busy queue migrate between nodes (``redis-cli --cluster reshard``) while
producers and consumers run: nothing is lost, nothing fails for good."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field

import pytest

import durq.transport.cluster
from durq import AsyncQueue, Message
from durq.dev.topology import LocalCluster
from durq.transport.cluster import slot_of

MOVED_SLOTS = 40


def _name_in_low_slots(prefix: str) -> str:
    """A queue name whose slot is among the first MOVED_SLOTS slots (node 0's lowest
    slots, the ones ``reshard`` moves first)."""
    for i in itertools.count():
        name = f"{prefix}-{i}"
        if slot_of(f"{{{name}}}") < MOVED_SLOTS:
            return name
    raise AssertionError("unreachable")


@dataclass
class Flow:
    """Producers and consumers of one queue, and what they saw."""

    url: str
    name: str
    acked: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)
    errors: list[BaseException] = field(default_factory=list)
    producing: bool = True

    async def produce(self, k: int) -> None:
        async with AsyncQueue(self.name, self.url) as queue:
            for i in itertools.count():
                if not self.producing:
                    return
                ids = [f"p{k}-{i}-{j}" for j in range(5)]
                try:
                    await queue.enqueue_many([Message({"id": x}, id=x) for x in ids])
                except Exception as exc:  # recorded: the test fails on any
                    self.errors.append(exc)
                    continue
                self.acked.update(ids)
                await asyncio.sleep(0.002)

    async def consume(self) -> None:
        async with AsyncQueue(self.name, self.url, lease=5) as queue:
            idle_since = time.monotonic()
            while self.producing or time.monotonic() - idle_since < 1.0:
                try:
                    jobs = await queue.dequeue_many(20, wait=0.2)
                    if jobs:
                        await queue.release_many(jobs)
                        idle_since = time.monotonic()
                except Exception as exc:
                    self.errors.append(exc)
                    continue
                self.done.update(j.id for j in jobs)


@pytest.mark.slow
async def test_a_resharding_while_jobs_flow_loses_nothing(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    followed: list[str] = []
    pause = durq.transport.cluster.redirect_pause

    def counting(error: Exception, attempt: int) -> float:
        followed.append(type(error).__name__)
        return pause(error, attempt)

    monkeypatch.setattr(durq.transport.cluster, "redirect_pause", counting)
    flow = Flow(cluster.url, _name_in_low_slots(f"reshard-{time.time_ns() % 10**6}"))
    tag = f"{{{flow.name}}}"
    first = cluster.owner(tag)
    other = next(n for n in cluster.nodes() if n["primary"] and n["id"] != first["id"])
    producers = [asyncio.create_task(flow.produce(k)) for k in range(2)]
    consumers = [asyncio.create_task(flow.consume()) for _ in range(2)]
    await asyncio.sleep(0.5)
    for source, target in [(first, other), (other, first)] * 2:
        await asyncio.to_thread(cluster.reshard, source["id"], target["id"], MOVED_SLOTS)
        assert cluster.owner(tag)["id"] == target["id"]
        await asyncio.sleep(0.3)
    flow.producing = False
    await asyncio.gather(*producers)
    await asyncio.wait_for(asyncio.gather(*consumers), 30)

    assert not flow.errors, flow.errors[:3]
    assert "MovedError" in followed, followed  # the clients did follow the migration
    assert len(flow.acked) > 500
    lost = flow.acked - flow.done
    assert not lost, f"{len(lost)} acknowledged jobs were never delivered"
    async with AsyncQueue(flow.name, cluster.url) as queue:
        stats = await queue.stats()
    assert stats.pending == stats.active == stats.delayed == 0
