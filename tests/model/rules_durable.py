"""The driver's durable-step rules (a part of ``machine.DurqMachine``; the model is
``model.durable``): a holder (current or stale) records a step, sleeps or waits for a
signal; a signal is sent to a queue, before or after its waits. Checked after each:
the reply is the model's, a stale lease records and parks nothing, a step is recorded
once (a second record keeps the first), the job's stored steps are the model's, and the
parked counts are. Parked jobs holding no slot is checked by the machine's invariants
(group slots, states and due times). On the plain queues (a signal to a shard would
cross to the other through the outbox, which the workflow courier rules own)."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from durq import Job
from durq.protocol import durable
from model import invariants
from model.durable import DurableM
from model.reference import LIVE, JobM, Ops
from model.world import World

DURABLE_UNITS = ("a", "b")
NAMES = ("s1", "s2")
SIGNALS = ("x", "y")


class DurableRules:
    """Durable-step rules; the attributes are the machine's."""

    world: World
    units: dict[str, Ops]
    handles: list[tuple[str, Job]]
    serial: int
    durable: dict[str, DurableM]

    @property
    def now(self) -> int:
        raise NotImplementedError

    def init_durable(self) -> None:
        """Called by the machine's __init__ (after the units and their end hooks)."""
        self.durable = {u: DurableM(self.units[u]) for u in DURABLE_UNITS}
        for u in DURABLE_UNITS:
            before, model = self.units[u].on_end, self.durable[u]

            def hook(job: JobM, state: str, now: int, before: Any = before,
                     model: DurableM = model) -> None:  # fmt: skip
                model.ended(job, state)
                if before is not None:
                    before(job, state, now)

            self.units[u].on_end = hook

    def _holder(self, data: st.DataObject) -> tuple[str, Job, JobM | None]:
        """A handle of a plain queue: mostly one whose lease is current."""
        mine = [(u, j) for u, j in self.handles if u in DURABLE_UNITS]
        current = [(u, j) for u, j in mine if self.units[u].held(j.id, j.token)]
        if current and data.draw(st.integers(0, 4)) > 0:
            unit, job = data.draw(st.sampled_from(current))
        else:
            unit, job = data.draw(st.sampled_from(mine[-30:]))
        return unit, job, self.units[unit].held(job.id, job.token)

    def _has_holder(self) -> bool:
        return any(u in DURABLE_UNITS for u, _ in self.handles)

    def _new_name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    @precondition(lambda self: self._has_holder())
    @rule(data=st.data(), name=st.sampled_from(NAMES))
    def record_step(self, data: st.DataObject, name: str) -> None:
        unit, job, mj = self._holder(data)
        front = self.world.fronts[unit]
        self.serial += 1
        body = durable.step_body(self.serial, 1, 1, 1 << 20)
        reply = front._run(durable.record_step(front.keys, job.id, job.token, name, body))
        if mj is None:
            assert reply.tag == "refused", f"a stale lease recorded step {name}: {reply}"
        else:
            tag, kept = self.durable[unit].record(mj, name, self.serial)
            assert reply.tag == tag, f"record {job.id} {name}: {reply.tag}, expected {tag}"
            if tag == "kept":
                assert orjson.loads(reply.value)["v"] == kept
        self._check_steps(unit, job.id)

    @precondition(lambda self: self._has_holder())
    @rule(data=st.data(), ms=st.sampled_from((0, 300, 1000)))
    def sleep(self, data: st.DataObject, ms: int) -> None:
        unit, job, mj = self._holder(data)
        front = self.world.fronts[unit]
        op = durable.sleep(front.keys, job.id, job.token, self._new_name("z"), after=ms)
        reply = front._run(op)
        if mj is None:
            assert reply.tag == "refused", f"a stale lease parked {job.id}: {reply}"
            return
        tag, due = self.durable[unit].sleep(mj, ms, self.now)
        assert reply.tag == tag, f"sleep {job.id} {ms} ms: {reply.tag}, expected {tag}"
        if tag == "parked":
            assert int(reply.value) == due

    @precondition(lambda self: self._has_holder())
    @rule(data=st.data(), signal=st.sampled_from(SIGNALS),
          timeout=st.sampled_from((None, 300, 1000)))  # fmt: skip
    def wait(self, data: st.DataObject, signal: str, timeout: int | None) -> None:
        unit, job, mj = self._holder(data)
        front = self.world.fronts[unit]
        name = self._new_name("w")
        reply = front._run(durable.wait(front.keys, job.id, job.token, name, signal, timeout))
        if mj is None:
            assert reply.tag == "refused", f"a stale lease parked {job.id}: {reply}"
            return
        tag = self.durable[unit].wait(mj, signal, timeout, self.now)
        assert reply.tag == tag, f"wait {job.id} for {signal}: {reply.tag}, expected {tag}"
        if tag == "record":
            record = orjson.loads(reply.value)
            assert (record["k"], record["v"]) == ("signal", self.durable[unit].signals[signal])

    @rule(unit=st.sampled_from(DURABLE_UNITS), signal=st.sampled_from(SIGNALS))
    def send_signal(self, unit: str, signal: str) -> None:
        self.serial += 1
        woken = self.world.fronts[unit].signal(signal, self.serial)
        expected = self.durable[unit].signal(signal, self.serial, self.now)
        assert woken == expected, f"signal {signal} to {unit} woke {woken}, expected {expected}"
        invariants.sync_woken(self.world, unit, self.units[unit], self.durable[unit].woken)

    # drawn more often: they need a job in hand, which the other rules take away
    record_step_2 = record_step_3 = record_step
    wait_2 = wait
    send_signal_2 = send_signal

    def _check_steps(self, unit: str, job_id: str) -> None:
        expected = self.durable[unit].live_steps(job_id)
        if expected is None:
            return
        found = self.world.fronts[unit].steps(job_id)
        seen = {s.name: s.value for s in found if s.kind == "step"}
        assert seen == expected, f"{unit} {job_id} stores steps {seen}, expected {expected}"

    @invariant()
    def parked_jobs_are_counted(self) -> None:
        if not hasattr(self, "durable"):
            return
        for unit in DURABLE_UNITS:
            parked = self.world.fronts[unit].parked()
            asleep, waiting = self.durable[unit].parked(self.now)
            assert (parked.asleep, parked.waiting) == (asleep, waiting), (
                f"{unit} parked {parked}, expected asleep={asleep} waiting={waiting}"
            )
            for job_id in list(self.durable[unit].steps)[-5:]:
                if self.units[unit].jobs[job_id].state in LIVE:
                    self._check_steps(unit, job_id)
