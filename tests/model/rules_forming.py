"""The driver's rule for a batch formed over time (a part of ``machine.DurqMachine``):
``protocol.batches.dequeue_batch``, the code a worker and ``Queue.dequeue_batch`` form a
batch with, run step by step on the frozen server. Its clock is the server's (the
``clock`` it takes); each fetch it makes is checked as any batch call is (the machine's
``_dequeue``); its waits are played by the driver: a block on the wake marker ends when
an item arrives that rings it, or at its timeout, up to 1/hz late as a server ends it
(``late``); a sleep lasts what it asks, items arriving meanwhile. Checked once it
returns (docs/batches.md, "How a batch forms"):

- it holds at most ``max_size`` items, and the cause the code gives (``cause_of``, the
  worker's) is 'size' exactly when it holds ``max_size``;
- a partial batch starts no earlier than ``max_wait`` after its first item was fetched,
  and on time (a server's late wake-up is made up by a sleep of the rest);
- every item's lease runs at least ``lease`` past the end of ``max_wait``, so none needs
  an extension before the batch starts;
- settled with that cause, the batch is the newest of the queue's history, with it.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from durq import Job
from durq.protocol import batches as batch_ops
from durq.protocol.calls import Op, Pipeline, ScriptCall, Sleep
from durq.protocol.lifecycle import parse_dequeue
from model.batches import BATCH, BY_GROUP, BatchCall, BatchM
from model.clock import START_MS, FrozenClock
from model.reference import EnqueueM, Ops
from model.world import LEASE_S, World

FORM_UNITS = ("a", "b", "s~0", "s~1")
LEASE_MS = round(LEASE_S * 1000)
#: how late a server ends a blocking wait (1/hz s at its default hz of 10), at most
SERVER_LATE_MS = round(batch_ops.SERVER_LATE * 1000)
#: a block's shortest timeout (calls.MIN_BLOCK): a wait planned to end within it ends
#: that late
MIN_BLOCK_MS = 2

#: an item that arrives while the batch forms: ms after the one before, its group, and
#: how many come at once
arrival = st.tuples(st.sampled_from((0, 50, 150, 250, 400, 700)),
                    st.sampled_from(("", "g1", "g2")), st.integers(1, 3))  # fmt: skip


def _ms(seconds: float) -> int:
    """A wait in whole ms of the frozen clock: never shorter than asked (a wait of a
    rounding error, what is left of max_wait in floats, is a ms: real time moves on)."""
    if seconds <= 0:
        return 0
    return max(math.ceil(seconds * 1000 - 1e-6), 1)


def _passthrough(call: ScriptCall, replies: list[Any], world: World,
                 unit: str) -> Op[tuple[list[Job], int, int]]:  # fmt: skip
    """``call`` (a fetch dequeue_batch made) as the op the machine's ``_dequeue`` runs;
    its raw reply kept in ``replies`` for dequeue_batch."""
    reply = yield call
    replies.append(reply)
    front = world.fronts[unit]
    return parse_dequeue(reply, front.keys.name, front.codec), int(reply[2]), int(reply[3])


class FormingRules:
    """A batch formed over max_wait; the attributes are the machine's."""

    world: World
    clock: FrozenClock
    units: dict[str, Ops]
    serial: int
    batches: list[BatchM]
    lost: list[BatchM]

    @property
    def now(self) -> int:
        raise NotImplementedError

    def _dequeue(self, unit: str, n: int, lease: float, *, batch: BatchCall | None = None,
                 op: Op[tuple[list[Job], int, int]] | None = None) -> list[Job]:  # fmt: skip
        raise NotImplementedError

    def _enqueue(self, unit: str, e: EnqueueM) -> None:
        raise NotImplementedError

    def new_id(self) -> str:
        raise NotImplementedError

    def _settle_batch(self, data: st.DataObject, batch: BatchM, cause: str, late: bool) -> None:
        raise NotImplementedError

    @rule(data=st.data(), unit=st.sampled_from(FORM_UNITS), max_size=st.sampled_from((2, 3, 5)),
          max_wait=st.sampled_from((0, 300, 500, 1000)), by_group=st.booleans(),
          wait=st.sampled_from((None, 0.5)), late=st.sampled_from((0, 0, 40, SERVER_LATE_MS)),
          arrivals=st.lists(arrival, max_size=4))  # fmt: skip
    def a_batch_forms_within_max_wait(
        self, data: st.DataObject, unit: str, max_size: int, max_wait: int, by_group: bool,
        wait: float | None, late: int, arrivals: list[tuple[int, str, int]],
    ) -> None:  # fmt: skip
        """A batch task's worker forms a batch (durq.Batch(max_size, max_wait, by_group))
        while items arrive; it starts full, or with what it has when max_wait is up."""
        m = self.units[unit]
        due: list[tuple[int, str, int]] = []
        at = self.now
        for gap, group, count in arrivals:
            at += gap
            due.append((at, group, count))
        front = self.world.fronts[unit]
        op = batch_ops.dequeue_batch(
            front.keys, front.codec, max_size, max_wait / 1000, LEASE_S, by_group=by_group,
            wait=wait, clock=lambda: (self.clock.now - START_MS) / 1000,
        )  # fmt: skip
        first: list[int] = []  # when the first item was fetched
        jobs = self._drive(op, unit, due, late, first)
        assert len(jobs) <= max_size, f"{unit}: a batch of {len(jobs)} > max_size {max_size}"
        if not jobs:
            return
        cause = batch_ops.cause_of(len(jobs), max_size)
        expected = "size" if len(jobs) == max_size else "wait"
        assert cause == expected, f"{unit}: a batch of {len(jobs)}/{max_size} started for {cause}"
        start, ends = self.now, first[0] + max_wait
        if cause == "wait":
            assert ends <= start <= ends + MIN_BLOCK_MS, (
                f"{unit}: a partial batch ({len(jobs)}/{max_size}) started {start - first[0]} "
                f"ms after its first item, its max_wait {max_wait} ms"
            )
        for job in jobs:
            mj = m.held(job.id, job.token)
            assert mj is not None and mj.deadline is not None
            # (a top-up after a wait is leased for what was left of max_wait when the
            # wait began: longer, never shorter)
            assert mj.deadline >= ends + LEASE_MS - 1, (
                f"{unit}: item {job.id} is leased till {mj.deadline}; the batch's max_wait "
                f"ends at {ends}, and its lease is {LEASE_MS} ms from there"
            )
        m.count[f"batches formed over time ({cause})"] += 1
        of = (jobs[0].group or "") if by_group else None
        batch = BatchM(unit, BY_GROUP if by_group else BATCH, list(jobs), of)
        if data.draw(st.booleans()):
            self.lost.append(batch)  # settled now, as a worker settles a batch it ran
            self._settle_batch(data, batch, cause, late=False)
        else:
            self.batches.append(batch)  # in hand: settled later, or its holder dies

    def _drive(
        self, op: Generator[Any, Any, list[Job]], unit: str, due: list[tuple[int, str, int]],
        late: int, first: list[int],
    ) -> list[Job]:  # fmt: skip
        """Run ``op`` (dequeue_batch) to its end; its fetches through ``_dequeue``, its
        waits played on the frozen clock while the items ``due`` arrive."""
        reply: Any = None
        for _ in range(100):
            try:
                request = op.send(reply)
            except StopIteration as stop:
                return list(stop.value)
            if isinstance(request, ScriptCall):
                reply = self._fetch(request, unit, first)
            elif isinstance(request, Sleep):
                self._sleep(unit, due, self.now + _ms(request.seconds))
                reply = None
            else:
                assert isinstance(request, Pipeline), f"dequeue_batch asked for {request}"
                block, call = request.calls
                assert not isinstance(block, ScriptCall) and isinstance(call, ScriptCall)
                timeout = _ms(float(block.args[-1]))
                markers = [str(k) for k in block.args[1:-1]]
                woke = self._block(unit, markers, due, self.now + timeout, late)
                reply = [woke, self._fetch(call, unit, first)]
        raise AssertionError(
            f"{unit}: dequeue_batch made 100 requests without a batch (a busy loop?)"
        )

    def _fetch(self, call: ScriptCall, unit: str, first: list[int]) -> Any:
        """One fetch of dequeue_batch, checked as any batch call; its raw reply."""
        count, lease_ms, _, mode, *group = call.args
        assert mode in ("b", "g", "t"), f"a batch's fetch in mode {mode!r}"
        replies: list[Any] = []
        op = _passthrough(call, replies, self.world, unit)
        got = self._dequeue(unit, int(count), int(lease_ms) / 1000,
                            batch=BatchCall(str(mode), str(group[0]) if group else None),
                            op=op)  # fmt: skip
        if got and not first:
            first.append(self.now)
        return replies[0]

    def _arrive(self, unit: str, due: list[tuple[int, str, int]]) -> None:
        """The next items due arrive, at their time."""
        at, group, count = due.pop(0)
        self.clock.set(max(self.now, at))
        for _ in range(count):
            self._enqueue(unit, EnqueueM(self.new_id(), {"n": self.serial}, group=group))

    def _rang(self, markers: list[str]) -> list[Any] | None:
        """A wake-up taken from ``markers`` as BZPOPMIN takes one: its reply (None:
        none there)."""
        for key in markers:
            popped: Any = self.world.raw.zpopmin(key)
            if popped:
                member, score = popped[0]
                return [key, member, score]
        return None

    def _sleep(self, unit: str, due: list[tuple[int, str, int]], until: int) -> None:
        """A sleep till ``until``; the items due meanwhile arrive (nothing watches)."""
        while due and due[0][0] <= until:
            self._arrive(unit, due)
        self.clock.set(max(self.now, until))

    def _block(self, unit: str, markers: list[str], due: list[tuple[int, str, int]],
               until: int, late: int) -> list[Any] | None:  # fmt: skip
        """A BZPOPMIN on ``markers``: it returns at once on a wake-up there, at the
        first arrival that rings one, else at its timeout (``until``), ``late`` ms late
        as a server ends it (None)."""
        woke = self._rang(markers)
        while woke is None and due and due[0][0] <= until:
            self._arrive(unit, due)
            woke = self._rang(markers)
        if woke is None:
            self.clock.set(max(self.now, until + late))
        return woke
