"""Expand/contract for workflows across durq releases: a producer writes a workflow in a
layout that every live worker of its queues reads.

While a live worker consuming one of a workflow's queues (its steps', its callback's, its
home's) has an older data format than this tree's (durq 0.1.0: no format in its
heartbeat), the workflow is submitted in 0.1.0's layout
(``durq.protocol.workflows_legacy``), which both versions' workers run; once none is
live, in this tree's. A workflow that 0.1.0's layout cannot hold (a step with
``expires``) is refused at submit with ``durq.FleetTooOld``, naming the old workers:
nothing is written, so a producer that retries once they are gone loses nothing.

The fleet is read from the registry (``durq.protocol.fleet``: O(workers), never O(jobs))
at most once per ``FLEET_TTL`` seconds per App and namespace. A worker of 0.1.0 that
starts within that window meets workflows in the new layout, as it would have without
the gate: start old workers before new producers, not after (docs/deployment.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from durq.errors import FleetTooOld
from durq.keys import NamespaceKeys, QueueKeys, split_shard
from durq.protocol import workflows as wf
from durq.protocol.calls import Op
from durq.protocol.fleet import OldWorker, old_workers
from durq.protocol.workflows_legacy import legacy_problems, submit_legacy

__all__ = ["FLEET_TTL", "FleetGate"]

FLEET_TTL = 5.0  # seconds a producer keeps what it read of the fleet


class FleetGate:
    """One App's view of its namespace's old workers, read at most every FLEET_TTL
    seconds (shared by its threads and event loops: a read is idempotent, so two that
    race only cost a read)."""

    def __init__(self, namespace: str) -> None:
        self.space = NamespaceKeys(namespace)
        self._lock = threading.Lock()
        self._read_at = -FLEET_TTL
        self._old: list[OldWorker] = []

    def cached(self) -> list[OldWorker] | None:
        """The old workers, or None when what was read is older than FLEET_TTL."""
        with self._lock:
            if time.monotonic() - self._read_at < FLEET_TTL:
                return self._old
        return None

    def read(self, batch: bool) -> Op[list[OldWorker]]:
        """Read the fleet (and keep it for FLEET_TTL seconds)."""
        old = yield from old_workers(self.space, batch=batch)
        with self._lock:
            self._old, self._read_at = old, time.monotonic()
        return old


def consuming(old: Iterable[OldWorker], queues: Iterable[str]) -> list[OldWorker]:
    """The workers of ``old`` that consume one of ``queues`` (a shard's name matches the
    name of its sharded queue too)."""
    names = set()
    for name in queues:
        names.add(name)
        names.add(split_shard(name)[0])
    return [w for w in old if names & set(w.queues)]


def legacy_submit(
    old: list[OldWorker],
    home: str,
    home_keys: QueueKeys,
    workflow_id: str,
    policy: str,
    ttl_ms: int,
    compiled: wf.Compiled,
) -> Op[tuple[bool, str]]:
    """The submit in 0.1.0's layout, for a workflow whose queues workers ``old``
    consume; raises FleetTooOld when that layout cannot hold it."""
    problems = legacy_problems(compiled)
    if problems:
        versions = ", ".join(sorted({w.version for w in old}))
        raise FleetTooOld([w.id for w in old], home, problems, versions)
    return submit_legacy(home_keys, workflow_id, policy, ttl_ms, compiled)
