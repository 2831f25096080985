"""The reference model of workflows (docs/workflows.md): a group of steps with a
callback, or a chain, whose steps are jobs of the model's queues; completions counted
once, a callback started once, the policy "fail" on a death, a cancel; steps in another
Redis Cluster slot reached through outbox entries delivered at least once. Plain
Python, no IO.

The outbox is modelled by what its entries order: the model records each entry when
the documents say one is written (a completion or a start for another slot, a death,
the cancels of a failure), and applies it when the courier delivers it. An entry
delivered again (its courier died after applying it) must change nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from model.reference import (
    ACTIVE,
    CANCELLED,
    COMPLETED,
    DELAYED,
    PENDING,
    EnqueueM,
    JobM,
    ModelError,
    Ops,
)

Ident = tuple[str, ...]  # an outbox entry: its kind and what it is about


@dataclass
class NodeM:
    n: int
    unit: str
    job_id: str
    group: str = ""
    issued: bool = False  # its start was ordered (its parked spec consumed)
    started: bool = False  # its job exists
    blocked: bool = False  # cancelled before its job existed: a start finds a tombstone
    done: bool = False
    linked: bool = True  # its job reports to the workflow


@dataclass
class WorkflowM:
    id: str
    home: str
    kind: str  # 'group' (members, then the callback) or 'chain'
    leaves: list[int]
    nodes: dict[int, NodeM]
    state: str = "running"
    ended_at: int = 0

    def next_after(self, n: int) -> list[int]:
        """The nodes that start once node ``n`` completed."""
        if self.kind == "chain":
            i = self.leaves.index(n)
            return self.leaves[i + 1 : i + 2]
        members, callback = self.leaves[:-1], self.leaves[-1]
        if n in members and all(self.nodes[m].done for m in members):
            return [callback]
        return []

    def first(self) -> list[int]:
        return self.leaves[:1] if self.kind == "chain" else self.leaves[:-1]


@dataclass
class Workflows:
    """Every workflow of one example, the outbox entries written and not yet applied,
    and the units (queues) their steps live in."""

    units: dict[str, Ops]
    slot_of: dict[str, str]  # unit -> its hash tag
    ttl: int
    by_id: dict[str, WorkflowM] = field(default_factory=dict)
    step_of: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)
    expected: dict[str, Counter[Ident]] = field(default_factory=dict)  # unit -> entries
    applied: set[Ident] = field(default_factory=set)
    unreleased: Counter[str] = field(default_factory=Counter)  # unit -> entries held

    # -- entries -----------------------------------------------------------------------

    def write(self, unit: str, ident: Ident) -> None:
        self.expected.setdefault(unit, Counter())[ident] += 1
        self.unreleased[unit] += 1

    def same_slot(self, a: str, b: str) -> bool:
        return self.slot_of[a] == self.slot_of[b]

    # -- submit ------------------------------------------------------------------------

    def submit(self, wf: WorkflowM, now: int) -> None:
        self.by_id[wf.id] = wf
        for node in wf.nodes.values():
            self.step_of[(node.unit, node.job_id)] = (wf.id, node.n)
        self.start(wf, wf.first(), now)

    def start(self, wf: WorkflowM, leaves: list[int], now: int) -> None:
        """Start leaves: in the home's slot at once, else through the home's outbox
        (one 'S' entry per queue)."""
        remote: dict[str, list[str]] = {}
        for n in leaves:
            node = wf.nodes[n]
            node.issued = True
            if self.same_slot(node.unit, wf.home):
                self.create(node, now)
            else:
                remote.setdefault(node.unit, []).append(node.job_id)
        for unit, ids in remote.items():
            self.write(wf.home, ("S", unit, *sorted(ids)))

    def create(self, node: NodeM, now: int) -> None:
        if node.started or node.blocked:
            return
        node.started = True
        unit = self.units[node.unit]
        if unit.taken(node.job_id, now) is not False:
            raise ModelError(
                f"step {node.job_id} starts, but its id is still taken by an earlier job "
                f"({unit.jobs[node.job_id].state}): a workflow submitted again under an id "
                "whose first run ended must not reuse its steps' ids (it would never start)"
            )
        e = EnqueueM(node.job_id, group=node.group, max_attempts=3, origin="step")
        status, _ = unit.enqueue(e, now)
        if status != "created":
            raise ModelError(f"step {node.job_id} could not be created ({status})")

    # -- what a step's end reports -----------------------------------------------------

    def ended(self, unit: str, job: JobM, state: str, now: int) -> None:
        """Job ``job`` of ``unit`` reached a terminal state (Ops.end)."""
        found = self.step_of.get((unit, job.id))
        if found is None:
            return
        wf = self.by_id[found[0]]
        node = wf.nodes[found[1]]
        if not node.linked:
            return
        node.linked = False
        if state == COMPLETED:
            if self.same_slot(unit, wf.home):
                self.completed(wf, node.n, now)
            else:
                self.write(unit, ("C", wf.id, str(node.n)))
        else:  # dead, cancelled, expired: deaths always go through the outbox
            self.write(unit, ("D", wf.id, str(node.n)))

    def completed(self, wf: WorkflowM, n: int, now: int) -> None:
        node = wf.nodes[n]
        if wf.state != "running" or node.done:
            return
        node.done = True
        if n == wf.leaves[-1]:
            wf.state, wf.ended_at = "completed", now
            return
        self.start(wf, wf.next_after(n), now)

    def died(self, wf: WorkflowM, now: int) -> None:
        """Policy "fail": the workflow fails; its steps that did not start are
        cancelled, its running steps finish."""
        if wf.state == "running":
            self.stop(wf, "failed", now)

    def cancel(self, wf: WorkflowM, now: int) -> str:
        if wf.state != "running":
            return "finished"
        self.stop(wf, "cancelled", now)
        return "cancelled"

    def stop(self, wf: WorkflowM, state: str, now: int) -> None:
        wf.state, wf.ended_at = state, now
        kind = "K" if state == "cancelled" else "X"
        remote: dict[str, list[str]] = {}
        for node in wf.nodes.values():
            if not node.issued:
                node.blocked = True  # parked: never starts
            elif self.same_slot(node.unit, wf.home):
                self.stop_step(node, kind, now)
            else:
                remote.setdefault(node.unit, []).append(node.job_id)
        for unit, ids in remote.items():
            self.write(wf.home, (kind, unit, *ids))

    def stop_step(self, node: NodeM, kind: str, now: int) -> None:
        """An 'X' (fail) or 'K' (cancel) order for one step in its queue."""
        unit = self.units[node.unit]
        job = unit.jobs.get(node.job_id)
        if not node.started or job is None:
            node.blocked = True
            return
        if not node.linked:
            return
        if job.state in (PENDING, DELAYED):
            node.linked = False
            unit.cancel(job.id, now)
        elif job.state == ACTIVE and kind == "K":
            job.cancel = job.must_cancel = True

    # -- the courier -------------------------------------------------------------------

    def deliver(self, unit: str, ident: Ident, now: int) -> None:
        """The courier of ``unit``'s outbox applies entry ``ident``."""
        expected = self.expected.setdefault(unit, Counter())
        if expected[ident] > 0:
            expected[ident] -= 1
            self.applied.add(ident)
            self.apply(ident, now)
        elif ident not in self.applied:
            raise ModelError(f"the outbox of {unit} held {ident}, which nothing wrote")

    def apply(self, ident: Ident, now: int) -> None:
        kind = ident[0]
        if kind == "S":
            for job_id in ident[2:]:
                wid, n = self.step_of[(ident[1], job_id)]
                self.create(self.by_id[wid].nodes[n], now)
        elif kind in ("C", "D"):
            wf = self.by_id[ident[1]]
            if kind == "C":
                self.completed(wf, int(ident[2]), now)
            else:
                self.died(wf, now)
        else:
            for job_id in ident[2:]:
                wid, n = self.step_of[(ident[1], job_id)]
                self.stop_step(self.by_id[wid].nodes[n], kind, now)

    def summary_kept(self, wf: WorkflowM, now: int) -> bool | None:
        """Whether the workflow's summary is still stored (None: at its last ms)."""
        if wf.state == "running":
            return True
        return now <= wf.ended_at + self.ttl


__all__ = ["CANCELLED", "NodeM", "WorkflowM", "Workflows"]
