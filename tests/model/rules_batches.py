"""The driver's batch rules (a part of ``machine.DurqMachine``; the model is
``model.batches``): batches formed by dequeue.lua's batch modes on every unit, group
limits and rates included (a batch, a batch of one group, a top-up of one), settled in
one call (settle.lua) each item its own way with current and stale leases mixed, and a
holder that dies mid-batch (its items come back once their leases ran out; its late
settle is refused per item). Checked after each: every item is the head of a group the
model lets the batch take from, a group's items hold one slot together (the machine's
invariants compare the slots), the queue's and the groups' rates and ``max_active``
count items, a batch of one group takes what that group gives, the groups are served in
turn, and a settled batch is the newest of the queue's batch history."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from durq import Job, Outcome, Settle
from durq.protocol.status import Status
from model.batches import BATCH, BY_GROUP, TOP_UP, BatchCall, BatchM
from model.clock import FrozenClock
from model.reference import EnqueueM, JobM, Ops
from model.turns import Turns
from model.world import LEASE_S, World

BATCH_UNITS = ("a", "b", "s~0", "s~1")
KINDS = ("done", "retry", "dead", "defer", "limited")


def settle_of(kind: str, delay_ms: int) -> Settle:
    """The durq.Settle of a model outcome (a delay in ms)."""
    if kind == "done":
        return Settle.done()
    if kind == "retry":
        return Settle.retry(delay_ms / 1000, "model")
    if kind == "dead":
        return Settle.dead("model")
    if kind == "defer":
        return Settle.defer(delay_ms / 1000)
    return Settle.rate_limited(delay_ms / 1000, "group")


class BatchRules:
    """Batch rules; the attributes are the machine's."""

    world: World
    clock: FrozenClock
    units: dict[str, Ops]
    handles: list[tuple[str, Job]]
    serial: int
    batches: list[BatchM]  # in hand: formed, not settled, their holder alive
    lost: list[BatchM]  # their holder died (or settled them): a late settle is refused
    turns: Turns

    @property
    def now(self) -> int:
        raise NotImplementedError

    def _dequeue(self, unit: str, n: int, lease: float, *,
                  batch: BatchCall | None = None) -> list[Job]:  # fmt: skip
        raise NotImplementedError

    def _enqueue(self, unit: str, e: EnqueueM) -> None:
        raise NotImplementedError

    def new_id(self) -> str:
        raise NotImplementedError

    def _pick_in(self, data: st.DataObject, unit: str) -> tuple[str, Job, JobM | None]:
        raise NotImplementedError

    def _refused(self, unit: str, job: Job, status: Outcome | Status) -> None:
        raise NotImplementedError

    def init_batches(self) -> None:
        """Called by the machine's __init__."""
        self.batches, self.lost, self.turns = [], [], Turns()

    # -- forming -----------------------------------------------------------------------

    @rule(unit=st.sampled_from(BATCH_UNITS), n=st.sampled_from((2, 3, 4)),
          by_group=st.booleans())  # fmt: skip
    def dequeue_batch(self, unit: str, n: int, by_group: bool) -> None:
        """A batch (durq.Batch) formed at once (no max_wait): dequeue.lua's batch mode,
        on any queue (group limits and rates included); ``by_group``: from one group."""
        self._form(unit, n, by_group)

    def _form(self, unit: str, n: int, by_group: bool) -> list[Job]:
        call = BatchCall(BY_GROUP if by_group else BATCH)
        jobs = self._dequeue(unit, n, LEASE_S, batch=call)
        m = self.units[unit]
        if not jobs:
            return jobs
        m.count["batches by group" if by_group else "batches"] += 1
        m.count["batch items"] += len(jobs)
        if m.limited():
            m.count["batches under a group limit"] += 1
        if m.flow.on:
            m.count["batches under flow control"] += 1
        group = (jobs[0].group or "") if by_group else None
        self.batches.append(BatchM(unit, call.mode, list(jobs), group))
        if by_group:
            assert {j.group or "" for j in jobs} == {group}, (
                f"a batch of one group from {unit} took {[(j.id, j.group) for j in jobs]}"
            )
        return jobs

    @precondition(lambda self: any(b.mode == BY_GROUP for b in self.batches))
    @rule(data=st.data(), n=st.sampled_from((1, 2, 3)))
    def top_up(self, data: st.DataObject, n: int) -> None:
        """A batch of one group, still forming, takes more items of its group (dequeue.lua
        't'): outside the rotation, no slot taken (the batch holds one)."""
        self._top_up(data.draw(st.sampled_from([b for b in self.batches if b.mode == BY_GROUP])), n)

    def _top_up(self, batch: BatchM, n: int) -> None:
        jobs = self._dequeue(batch.unit, n, LEASE_S, batch=BatchCall(TOP_UP, batch.group))
        assert {j.group or "" for j in jobs} <= {batch.group}, (
            f"a top-up of group {batch.group!r} took {[(j.id, j.group) for j in jobs]}"
        )
        batch.items += jobs
        self.units[batch.unit].count["top-up items"] += len(jobs)

    @rule(unit=st.sampled_from(BATCH_UNITS), more=st.integers(1, 3))
    def a_batch_of_one_group_fills_up(self, unit: str, more: int) -> None:
        """A batch of one group forms with fewer items than it takes; more of its group
        come while it waits (max_wait), and its top-up takes them (the other groups'
        turns untouched)."""
        jobs = self._form(unit, 4, True)
        if not jobs:
            return
        batch = self.batches[-1]
        for _ in range(more):
            self._enqueue(
                unit, EnqueueM(self.new_id(), {"n": self.serial}, group=batch.group or "")
            )
        self._top_up(batch, 4 - len(jobs) if len(jobs) < 4 else 1)

    # -- ending ------------------------------------------------------------------------

    @precondition(lambda self: self.batches or self.lost)
    @rule(data=st.data(), cause=st.sampled_from(("size", "wait")))
    def settle_a_batch(self, data: st.DataObject, cause: str) -> None:
        """A batch's holder settles every item in one call, each its own way; a batch
        whose holder died (or that was settled already) is refused item by item."""
        live = bool(self.batches) and data.draw(st.integers(0, 3)) > 0
        pool = self.batches if live or not self.lost else self.lost
        batch = data.draw(st.sampled_from(pool))
        pool.remove(batch)
        self.lost.append(batch)
        self._settle_batch(data, batch, cause, late=pool is not self.batches)

    @rule(data=st.data(), unit=st.sampled_from(BATCH_UNITS), n=st.sampled_from((2, 3, 4)),
          by_group=st.booleans())  # fmt: skip
    def a_worker_runs_a_batch(self, data: st.DataObject, unit: str, n: int,
                              by_group: bool) -> None:  # fmt: skip
        """A worker forms a batch, runs it and settles every item in one call, each its
        own way (the function's outcome, or the item's own)."""
        self._run_batch(data, unit, n, by_group)

    def _run_batch(self, data: st.DataObject, unit: str, n: int, by_group: bool) -> str | None:
        """Form a batch and settle it; the group of its first item (None: no batch)."""
        if not self._form(unit, n, by_group):
            return None
        batch = self.batches.pop()
        self.lost.append(batch)
        cause = "size" if len(batch.items) == n else "wait"
        self._settle_batch(data, batch, cause, late=False)
        return batch.items[0].group or ""

    @rule(data=st.data(), unit=st.sampled_from(BATCH_UNITS),
          flood=st.sampled_from(("", "g1", "g2")))  # fmt: skip
    def a_flood_of_one_group_waits_its_turn(self, data: st.DataObject, unit: str,
                                            flood: str) -> None:  # fmt: skip
        """A flood of one group's items, then batches of one group run one after the
        other (each settled before the next, as a worker runs them): every group that
        may start a batch all along gets one within as many batches as there are groups
        (docs/batches.md: the groups are served in turn)."""
        m = self.units[unit]
        for _ in range(4):
            self._enqueue(unit, EnqueueM(self.new_id(), {"n": self.serial}, group=flood))
        waiting = set(m.eligible(self.now))
        served: list[str] = []
        # as many batches as the rotation lists groups at most: a group listed ahead of
        # the waiting ones may get ready within a batch call (a delayed job due, a lease
        # run out) and be served first
        for _ in range(len(m.groups)):
            group = self._run_batch(data, unit, 2, True)
            if group is None:
                return  # the queue's rate or max_active: no batch now
            served.append(group)
        missed = sorted(g for g in waiting - set(served) if g in m.eligible(self.now))
        assert not missed, (
            f"{unit}: groups {missed} were ready all along, yet {len(served)} batches of "
            f"one group served {served}"
        )

    def _settle_batch(self, data: st.DataObject, batch: BatchM, cause: str, late: bool) -> None:
        m = self.units[batch.unit]
        m.count["late batch settles" if late else "batches settled"] += 1
        # a batch task is never a workflow step: a step the queue handed out is left
        jobs = [j for j in batch.items if m.jobs[j.id].origin != "step"]
        if not jobs:
            return
        kinds = [data.draw(st.sampled_from(KINDS)) for _ in jobs]
        delays = [data.draw(st.sampled_from((0, 300))) for _ in jobs]
        self._settle(batch.unit, jobs, kinds, delays, cause)
        newest = self.world.fronts[batch.unit].batches()[0]
        seen = (round(newest.at * 1000), newest.size, newest.cause)
        assert seen == (self.now, len(jobs), cause), (
            f"{batch.unit}: the newest batch in the history is {newest}, expected "
            f"{len(jobs)} items settled at {self.now} ms ({cause})"
        )

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def settle(self, data: st.DataObject) -> None:
        """Items ended in one call (settle.lua), each its own way (done, retry, dead,
        defer, RateLimited of its group), each fenced by its own token: any handles,
        current and stale leases mixed, a partial settle of a batch."""
        unit = data.draw(st.sampled_from(sorted({u for u, _ in self.handles})))
        m = self.units[unit]
        picked: dict[str, Job] = {}
        for _ in range(data.draw(st.integers(1, 4))):
            _, job, _ = self._pick_in(data, unit)
            mj = m.jobs.get(job.id)
            if mj is not None and mj.origin == "step":
                continue  # a batch task is never a workflow step
            picked.setdefault(job.id, job)  # an id listed twice is refused: not drawn
        if not picked:
            return
        jobs = list(picked.values())
        kinds = [data.draw(st.sampled_from(KINDS)) for _ in jobs]
        delays = [data.draw(st.sampled_from((0, 300))) for _ in jobs]
        self._settle(unit, jobs, kinds, delays, data.draw(st.sampled_from(("", "size", "wait"))))

    def _settle(self, unit: str, jobs: list[Job], kinds: list[str], delays: list[int],
                cause: str) -> None:  # fmt: skip
        m = self.units[unit]
        outcomes = [settle_of(k, d) for k, d in zip(kinds, delays, strict=True)]
        statuses = self.world.fronts[unit].settle(jobs, outcomes, cause=cause)
        for job, kind, delay, status in zip(jobs, kinds, delays, statuses, strict=True):
            mj = m.held(job.id, job.token)
            if mj is None:
                self._refused(unit, job, status)
                continue
            if kind == "done":
                expected = m.release(mj, self.now)
            elif kind in ("retry", "dead"):
                expected = m.requeue(mj, delay, kind == "dead", self.now)
            elif kind == "defer":
                expected = m.defer(mj, delay, self.now)
            else:
                cancel = mj.cancel
                expected = m.rate_limited(mj, delay, "group", self.now)
                if cancel:  # settle.lua: it ends cancelled, and its group still pauses
                    m.flow.pause("group", mj.group, self.now, delay)
            assert status.name.lower() == expected, (
                f"settle {job.id} as {kind}: {status.name}, expected {expected}"
            )

    @precondition(lambda self: self.batches)
    @rule(data=st.data(), n=st.sampled_from((2, 4)))
    def a_batch_holder_dies(self, data: st.DataObject, n: int) -> None:
        """The worker running a batch is killed: its items stay leased until their
        leases run out, then the next batch call of their queue reclaims every one of
        them (back to its group's head, or dead once its attempts are spent, or
        cancelled when a cancel was asked). The dead holder's settle comes late, if
        ever (``settle_a_batch`` on ``lost``): refused per item."""
        batch = data.draw(st.sampled_from(self.batches))
        self.batches.remove(batch)
        self.lost.append(batch)
        m = self.units[batch.unit]
        deadline = batch.deadline(m)
        if deadline is None:
            return
        m.count["batch holders died"] += 1
        if deadline > self.now:
            self.clock.advance(deadline - self.now)
        self._form(batch.unit, n, False)
        if m.due_leases(self.now):
            return  # the call's budget of server time left leases for the next call
        kept = [mj.id for mj in batch.current(m)]
        assert not kept, f"{batch.unit}: the dead holder's items {kept} were not reclaimed"

    # drawn more often: a batch of one group in hand is what it needs
    top_up_2 = top_up

    @invariant()
    def batches_in_hand(self) -> None:
        if not hasattr(self, "turns"):
            return
        for batch in [b for b in self.batches if not b.current(self.units[b.unit])]:
            self.batches.remove(batch)  # none of its items is held any more
            self.lost.append(batch)
        del self.lost[:-20]
