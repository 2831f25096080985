"""The driver's workflow rules (a part of ``machine.DurqMachine``): submit a group with a
callback, a chain or a wide group (its stop takes several calls), with steps in two
slots, under a new id, an id used before or none; cancel; be the courier of any
queue's outbox: deliver, die before or after applying what it took, or apply each
entry twice, taking one, two or many entries at a time. Steps are taken and released
by the machine's dequeue and release rules."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from redis.exceptions import ResponseError

import durq
from durq.app.workflows import WorkflowHandle
from durq.codec import PayloadCodec
from durq.errors import JobNotFound
from durq.keys import OutboxKeys
from durq.protocol import lifecycle
from durq.protocol import limits as flow
from durq.protocol import workflows as wf_ops
from durq.protocol.calls import Op
from model.fanin import Ident, NodeM, RunM, Workflows
from model.reference import ModelError, Ops
from model.world import LEASE_S, World

WF_UNITS = ("a", "b")
OUTBOX_UNITS = ("a", "b", "s~0", "s~1")
WIDE = 50  # members of a wide group: its stop takes two calls (STOP_CHUNK is 50)
BALLAST = "x" * 150_000  # an argument or a result: two of them pass CHUNK_BYTES


def _apply(entry: bytes) -> Op[object]:
    call = flow.pause_call(entry) if entry.startswith(flow.PAUSE_ENTRY) else None
    reply = yield call or wf_ops.deliver_call(entry)
    return reply


def ident_of(unit_of: Any, entry: bytes) -> Ident:
    """What an outbox entry orders, as the model names it (fanin.py)."""
    f = [p.decode() for p in entry.split(b"\0")]
    kind = f[0]
    if kind == "S":
        return ("S", unit_of(f[1]), unit_of(f[2]), int(f[3]), *f[4::8])
    if kind == "Q":
        pairs = ((unit_of(f[i]), int(f[i + 1])) for i in range(4, len(f), 2))
        return ("Q", unit_of(f[1]), unit_of(f[2]), int(f[3]), *pairs)
    if kind in ("C", "D"):
        return (kind, unit_of(f[1]), f[2], int(f[3]), f[-1])
    if kind in ("X", "K"):
        sender = unit_of(f[3]) if f[3] else ""
        return (kind, unit_of(f[1]), f[2], sender, int(f[4]) if f[4] else "", *f[5:])
    if kind == "E":
        return ("E", unit_of(f[1]), f[2], f[3])
    if kind == "R":
        return ("R", unit_of(f[1]), f[2], int(f[3]), f[5])
    if kind == "F":
        return ("F", unit_of(f[1]), f[2], f[3], int(f[4]))
    if kind == "P":
        return ("P", unit_of(f[1]), int(f[2]))
    raise ModelError(f"an outbox entry of a kind the model does not drive: {entry!r}")


def home_of(places: list[str]) -> str:
    """The home of a workflow without an id: the unit (every unit a slot of its own)
    holding most of its steps, the first such in the steps' order (workflows._home)."""
    counts = Counter(places)
    return next(u for u in places if counts[u] == max(counts.values()))


class WorkflowRules:
    """Workflow rules; the attributes are the machine's."""

    world: World
    units: dict[str, Ops]
    workflows: Workflows
    wf_handles: dict[str, Any]
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
        shape=st.sampled_from(("group", "chain") * 4 + ("wide",)),
        places=st.lists(st.sampled_from(WF_UNITS), min_size=3, max_size=3),
        group=st.sampled_from(("", "g1", "g1")),
        which=st.sampled_from(("new", "again", "again", "none")),
        heavy=st.sampled_from((False, False, False, True)),
        data=st.data(),
    )
    def submit_workflow(self, shape: str, places: list[str], group: str, which: str,
                        heavy: bool, data: st.DataObject) -> None:  # fmt: skip
        """``heavy``: arguments and results so large that a group's first steps start
        in two calls, and its results are gathered in two (an 'R', an 'F' entry carries
        on)."""
        wid = self._workflow_id(which, data)
        t = self.world.app.tasks
        if shape == "wide":  # one queue for the members, the callback in the last place
            places = [places[0]] * WIDE + places[-1:]
        heavy = heavy and shape == "group"
        ballast = (BALLAST,) if heavy else ()
        steps = [
            t["step"].options(queue=self.world.fronts[u].name, group=group or None).s(i, *ballast)
            for i, u in enumerate(places[:-1])
        ]  # fmt: skip
        last = self.world.fronts[places[-1]].name
        flow_: Any
        if shape == "chain":
            flow_ = durq.chain(*steps, t["step"].options(queue=last).s())
        else:
            flow_ = durq.group(steps).then(t["collect"].options(queue=last).s())
        old = self.workflows.by_id.get(wid) if wid is not None else None
        handle = flow_.enqueue(id=wid)
        if old is not None and self.workflows.summary_kept(old, self.now):
            assert not handle.created, f"workflow {wid} was submitted again while it exists"
            assert (handle.run, self.world.unit_of(handle.queue)) == (old.run, old.home), (
                f"workflow {wid} submitted again: {handle.run} in {handle.queue}, "
                f"expected the existing run {old.run} in {old.home}"
            )
            return
        assert handle.created, f"workflow {wid} (new, or its summary expired) was not created"
        # docs/workflows.md: one with an id lives in the App's default queue (a), one
        # without in the queue holding most of its steps
        home = "a" if wid is not None else home_of(places)
        assert self.world.unit_of(handle.queue) == home, (
            f"workflow {handle.id} with steps in {places} lives in {handle.queue}"
        )
        self.wf_handles[handle.id] = handle
        run = self._read_plan(handle, shape, group)
        run.heavy = heavy
        for n in run.first():
            run.nodes[n].size = len(BALLAST) if heavy else 100
        self.workflows.submit(run, self.now)

    def _workflow_id(self, which: str, data: st.DataObject) -> str | None:
        """A new id, one used before (its workflow may run, have ended, or be gone), or
        none (a random one)."""
        if which == "none":
            return None
        given = sorted(w for w in self.workflows.by_id if w.startswith("w"))
        if which == "again" and given:
            # (not an id drawn for a workflow submitted without one: that one lives
            # where most of its steps are, docs/workflows.md)
            return str(data.draw(st.sampled_from(given)))
        self.serial += 1
        return f"w{self.serial}"

    def _read_plan(self, handle: Any, shape: str, group: str) -> RunM:
        info = handle.status()
        assert info is not None and info.state == "running", f"{handle.id}: {info}"
        assert info.run == handle.run, f"{handle.id}: status shows run {info.run}, not {handle.run}"
        nodes = {}
        for s in info.steps:
            assert s.job_id == f"{handle.id}.{handle.run}.{s.node}", s
            nodes[s.node] = NodeM(s.node, self.world.unit_of(s.queue), s.job_id, group)
        nodes[max(nodes)].group = ""  # the last step or the callback: only a queue given
        home = self.world.unit_of(handle.queue)
        kind = "chain" if shape == "chain" else "group"
        return RunM(handle.id, handle.run, home, kind, sorted(nodes), nodes)

    def complete_one(self, unit: str) -> None:
        raise NotImplementedError

    @precondition(lambda self: any(r.state == "running" for r in self.workflows.by_id.values()))
    @rule(data=st.data())
    def a_workflow_progresses(self, data: st.DataObject) -> None:
        """A worker moves a running workflow on: it completes one job of a queue where a
        step of it waits, or delivers an outbox that holds entries."""
        running = sorted(w for w, r in self.workflows.by_id.items() if r.state == "running")
        run = self.workflows.by_id[data.draw(st.sampled_from(running))]
        ready = sorted(
            {n.unit for n in run.nodes.values()
             if n.linked and self.units[n.unit].jobs[n.job_id].state == "pending"}
        )  # fmt: skip
        boxes = [u for u in OUTBOX_UNITS if self.workflows.held(u)]
        choices = [("step", u) for u in ready] + [("box", u) for u in boxes]
        if choices:
            kind, unit = data.draw(st.sampled_from(choices))
            if kind == "step":
                self.complete_one(unit)
            else:
                self.courier(unit, "deliver", 100)

    @precondition(lambda self: self.wf_handles)
    @rule(data=st.data())
    def cancel_workflow(self, data: st.DataObject) -> None:
        wid = data.draw(st.sampled_from(sorted(self.wf_handles)))
        run = self.workflows.by_id[wid]
        handle = WorkflowHandle(self.world.app, self.world.fronts[run.home].name, wid)
        expected = self.workflows.cancel(wid, self.now)
        try:
            status = handle.cancel().value
        except JobNotFound:
            status = "not_found"
        assert status == expected, f"cancel of workflow {wid}: {status}, expected {expected}"

    @rule(
        unit=st.sampled_from(OUTBOX_UNITS),
        mode=st.sampled_from(("deliver", "deliver", "lost", "die", "twice")),
        batch=st.sampled_from((100, 100, 1, 2)),
    )
    def courier(self, unit: str, mode: str, batch: int) -> None:
        """Deliver the outbox of ``unit`` as a worker does (durq.worker.outbox): take
        up to ``batch`` entries under a lease, apply each, release them. Or die: before
        applying what it took ("lost"), or after ("die"): the entries come back when
        their lease ends. Or apply each twice (at least once is the contract)."""
        front = self.world.fronts[unit]
        keys = OutboxKeys(front.keys.name, front.keys.namespace, front.keys.shard_count)
        jobs, _, _ = front._run(lifecycle.fetch(keys, PayloadCodec(), batch, LEASE_S))
        if mode == "lost":
            return
        done = []
        for job in jobs:
            ident = ident_of(self._unit_of_prefix, job.data)
            waits = self.workflows.waits(ident)
            for _ in range(2 if mode == "twice" else 1):
                try:
                    front._run(_apply(job.data))
                except ResponseError as exc:
                    # a stop waits for its consume: retried later (here: its lease ends)
                    assert waits and "DURQ_WAIT" in str(exc), f"{ident}: {exc}"
                    break
                assert not waits, f"{ident} was applied before the consume it waits for"
                self.workflows.deliver(unit, ident, self.now)
            else:
                done.append(job)
        if done and mode != "die":
            front._run(lifecycle.release(keys, done))
            for job in done:
                self.workflows.released(unit, ident_of(self._unit_of_prefix, job.data))
