"""The driver's workflow rules (a part of ``machine.DurqMachine``): submit a group with a
callback or a chain, with steps in two slots, under an id that may be used again;
cancel; be the courier of a queue's outbox, dying after an apply or applying twice.
Steps are taken and released by the machine's dequeue and release rules."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

import durq
from durq.codec import PayloadCodec
from durq.errors import DurqError, JobNotFound
from durq.keys import OutboxKeys
from durq.protocol import lifecycle
from durq.protocol import workflows as wf_ops
from durq.protocol.calls import Op
from model.fanin import Ident, NodeM, WorkflowM, Workflows
from model.known_bugs import gated
from model.reference import ModelError, Ops
from model.world import LEASE_S, World

WF_UNITS = ("a", "b")


def _apply(entry: bytes) -> Op[object]:
    reply = yield wf_ops.deliver_call(entry)
    return reply


def ident_of(unit_of: Any, entry: bytes) -> Ident:
    """What an outbox entry orders, as the model names it."""
    f = [p.decode() for p in entry.split(b"\0")]
    kind = f[0]
    if kind == "S":
        items = f[2:]
        return ("S", unit_of(f[1]), *sorted(items[0::7]))
    if kind in ("C", "D"):
        return (kind, f[2], f[3])
    if kind in ("X", "K"):
        return (kind, unit_of(f[1]), *f[3:])
    raise ModelError(f"an outbox entry of a kind the model does not drive: {entry!r}")


class WorkflowRules:
    """Workflow rules; the attributes are the machine's."""

    world: World
    units: dict[str, Ops]
    workflows: Workflows
    wf_handles: dict[str, Any]
    wf_shapes: dict[str, tuple[str, list[str], str]]  # the first submission's
    serial: int

    @property
    def now(self) -> int:
        raise NotImplementedError

    def _unit_of_prefix(self, prefix: str) -> str:
        for unit, front in self.world.fronts.items():
            if front.keys.prefix == prefix:
                return unit
        raise KeyError(prefix)

    @rule(
        shape=st.sampled_from(("group", "chain")),
        places=st.lists(st.sampled_from(WF_UNITS), min_size=3, max_size=3),
        group=st.sampled_from(("", "g1", "g1")),
        again=st.booleans(),
        data=st.data(),
    )
    def submit_workflow(self, shape: str, places: list[str], group: str, again: bool,
                        data: st.DataObject) -> None:  # fmt: skip
        if gated("workflow-cancel-strands-group"):
            group = ""
        wid = self._workflow_id(again, data)
        if wid in self.wf_shapes and gated("workflow-id-unique-per-home-only"):
            shape, places, group = self.wf_shapes[wid]
        self.wf_shapes.setdefault(wid, (shape, places, group))
        t = self.world.app.tasks
        steps = [
            t["step"].options(queue=self.world.fronts[u].name, group=group or None).s(i)
            for i, u in enumerate(places[:-1])
        ]  # fmt: skip
        last = self.world.fronts[places[-1]].name
        flow: Any
        if shape == "group":
            flow = durq.group(steps).then(t["collect"].options(queue=last).s())
        else:
            flow = durq.chain(*steps, t["step"].options(queue=last).s())
        old = self.workflows.by_id.get(wid)
        try:
            handle = flow.enqueue(id=wid)
        except DurqError:
            # refusing an id whose first run ended is one way to fix issue 30's bug 3
            if old is None or self.workflows.summary_kept(old, self.now) is not False:
                raise
            return
        if old is not None and self.workflows.summary_kept(old, self.now):
            assert not handle.created, f"workflow {wid} was submitted again while it exists"
            return
        assert handle.created, f"workflow {wid} (new) was not created"
        self.wf_handles[wid] = handle
        self.workflows.submit(self._read_plan(handle, shape, group), self.now)

    def _workflow_id(self, again: bool, data: st.DataObject) -> str:
        reusable = sorted(
            w.id for w in self.workflows.by_id.values()
            if self.workflows.summary_kept(w, self.now) is True
            or (self.workflows.summary_kept(w, self.now) is False
                and not gated("workflow-resubmit-hangs"))
        )  # fmt: skip
        if again and reusable:
            return data.draw(st.sampled_from(reusable))
        self.serial += 1
        return f"w{self.serial}"

    def _read_plan(self, handle: Any, shape: str, group: str) -> WorkflowM:
        info = handle.status()
        assert info is not None and info.state == "running", f"{handle.id}: {info}"
        nodes = {
            s.node: NodeM(s.node, self.world.unit_of(s.queue), s.job_id, group) for s in info.steps
        }
        nodes[max(nodes)].group = ""  # the last step or the callback: only a queue given
        home = self.world.unit_of(handle.queue)
        return WorkflowM(handle.id, home, shape, sorted(nodes), nodes)

    @precondition(lambda self: self.wf_handles)
    @rule(data=st.data())
    def cancel_workflow(self, data: st.DataObject) -> None:
        wid = data.draw(st.sampled_from(sorted(self.wf_handles)))
        wf = self.workflows.by_id[wid]
        kept = self.workflows.summary_kept(wf, self.now)
        try:
            status = self.wf_handles[wid].cancel()
        except JobNotFound:
            assert kept is not True, f"cancel of workflow {wid}: not found, yet it exists"
            return
        assert kept is not False, f"cancel of workflow {wid}: {status}, yet it is gone"
        expected = self.workflows.cancel(wf, self.now)
        assert status.value == expected, f"cancel of workflow {wid}: {status}, expected {expected}"

    @rule(unit=st.sampled_from(WF_UNITS), mode=st.sampled_from(("deliver", "die", "twice")))
    def courier(self, unit: str, mode: str) -> None:
        """Deliver the outbox of ``unit`` as a worker does: take its entries under a
        lease, apply each, release them; or die after applying (they come back when
        their lease ends), or apply each twice (at least once is the contract)."""
        front = self.world.fronts[unit]
        keys = OutboxKeys(front.keys.name, front.keys.namespace, front.keys.shard_count)
        jobs, _, _ = front._run(lifecycle.fetch(keys, PayloadCodec(), 100, LEASE_S))
        release = []
        for job in jobs:
            ident = ident_of(self._unit_of_prefix, job.data)
            gate = ident[0] == "S" and gated("callback-twice-after-courier-crash")
            again = mode != "deliver" and not gate
            for _ in range(2 if again and mode == "twice" else 1):
                reply = front._run(_apply(job.data))
                if isinstance(reply, DurqError):
                    raise reply
                self.workflows.deliver(unit, ident, self.now)
            if not (again and mode == "die"):
                release.append(job)
        if release:
            front._run(lifecycle.release(keys, release))
            self.workflows.unreleased[unit] -= len(release)
