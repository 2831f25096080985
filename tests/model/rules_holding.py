"""The driver's rules of the holding area (a part of ``machine.DurqMachine``; the model
is ``model.holding``): workers with different task sets, and with different versions of
one task (a capability is ``<task>`` or ``<task>@<version>``), on the plain queues. A
worker that does not run a job's capability holds it (no attempt counted, its group
slot freed); a worker publishes its capabilities (its heartbeat: the sweep of the
grace runs then); a capable worker brings held jobs back to the heads of their groups.
Calls of the versioned task ``vt`` (version 1: ``vt(x)``; version 2: ``vt(x, scale)``,
its migration from 1 adds ``scale=10``) are prepared by the worker's own
``Executor.prepare`` of an App at either version: a version-1 worker holds a version-2
job (capability ``vt@2``), a version-2 worker runs a version-1 job with its arguments
upgraded.
Checked after each: the replies are the model's; after every step (``agree``), each
held job's record, its place in ``held:<cap>`` with the time it was held, the index of
the oldest per capability and ``stats().held``; the dedup keys (``invariants``): a held
job holds its key again, an enqueue with it is deduplicated or supersedes it. Jobs
under job control (throttle, debounce, keep-last, expiry), ticks and workflow steps are
not held here (their own models do not know the state)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

import durq
from durq import Job
from durq.payloads import build_call
from durq.protocol import holding
from durq.worker.executor import Executor
from model.holding import HoldingM
from model.reference import HELD, EnqueueM, Ops
from model.world import LEASE_S, World

HOLDING_UNITS = ("a", "b")
CAPS = ("vt", "vt@2", "u")
GRACE_S = 2.0
#: a worker's capabilities: task sets that differ, and versions of one task
WORKERS = {"v1": ["vt"], "v2": ["vt", "vt@2"], "u1": ["u"], "none": []}
SCALE = 10  # what the migration from version 1 adds


def _versioned_app(url: str, version: int) -> durq.App:
    """An App with task ``vt`` at ``version`` (1 or 2)."""
    app = durq.App(url)
    if version == 1:

        def vt(x: int) -> int:
            return x

        app.task(name="vt")(vt)
    else:

        def vt2(x: int, scale: int) -> int:
            return x * scale

        def up(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
            return [*args, SCALE], kwargs

        app.task(name="vt", version=2, migrate={1: up})(vt2)
    return app


class HoldingRules:
    """Holding-area rules; the attributes are the machine's."""

    world: World
    units: dict[str, Ops]
    handles: list[tuple[str, Job]]
    holding: dict[str, HoldingM]
    versioned: dict[int, durq.App]
    executors: dict[int, Executor]

    @property
    def now(self) -> int:
        raise NotImplementedError

    def _refused(self, unit: str, job: Job, status: Any) -> None:
        raise NotImplementedError

    def dequeue(self, unit: str, n: int, lease: float) -> None:
        raise NotImplementedError

    def _release(self, unit: str, job: Job) -> None:
        raise NotImplementedError

    def _enqueue(self, unit: str, e: EnqueueM) -> None:
        raise NotImplementedError

    def new_id(self) -> str:
        raise NotImplementedError

    def init_holding(self) -> None:
        self.holding = {u: HoldingM(self.units[u], round(GRACE_S * 1000)) for u in HOLDING_UNITS}
        self.versioned = {v: _versioned_app(self.world.url, v) for v in (1, 2)}
        self.executors = {v: Executor(app, 1) for v, app in self.versioned.items()}

    def close_holding(self) -> None:
        for app in self.versioned.values():
            app.close()

    @rule(unit=st.sampled_from(HOLDING_UNITS), version=st.sampled_from((1, 2)),
          group=st.sampled_from(("", "g1")))  # fmt: skip
    def enqueue_a_versioned_call(self, unit: str, version: int, group: str) -> None:
        """A producer at ``version`` enqueues ``vt``: its job carries the version."""
        x = len(self.units[unit].jobs)
        args = [x] if version == 1 else [x, 3]
        payload = build_call("vt", args, {}, {"v": 2} if version == 2 else None)
        self._enqueue(unit, EnqueueM(self.new_id(), payload, group=group))

    @rule(unit=st.sampled_from(HOLDING_UNITS), version=st.sampled_from((1, 2)))
    def a_worker_of_a_version_fetches_a_call(self, unit: str, version: int) -> None:
        """A worker at ``version`` fetches a job and prepares it as it would run it: a
        call of a version it does not run is held; an older one runs upgraded."""
        before = len(self.handles)
        self.dequeue(unit, 1, LEASE_S)
        if len(self.handles) == before:
            return
        job = self.handles[-1][1]
        payload = job.payload
        if not (isinstance(payload, list) and payload and payload[0] == "vt"):
            return  # not a call of vt: the worker goes on with it later
        jv = payload[3]["v"] if len(payload) > 3 else 1
        prepared = self.executors[version].prepare(job)
        if jv > version:
            assert getattr(prepared, "kind", None) == "hold", prepared
            assert prepared.cap == "vt@2", prepared  # type: ignore[union-attr]
            self._hold(unit, job, "vt@2")
            return
        assert isinstance(prepared, tuple), prepared
        self.units[unit].count["migrated" if jv < version else "ran as enqueued"] += 1
        expected = payload[1] if jv == version else [*payload[1], SCALE]
        assert (prepared[1], prepared[2]) == (expected, {}), (prepared, payload)
        self._release(unit, job)

    def _holdable(self) -> list[tuple[str, Job]]:
        """Handles of jobs in hand (current leases, or stale ones) that may be held."""
        out = []
        for unit, job in self.handles[-30:]:
            mj = self.units[unit].jobs.get(job.id) if unit in HOLDING_UNITS else None
            if mj is not None and mj.origin == "job" and (not mj.key or not mj.control):
                out.append((unit, job))
        return out

    @precondition(lambda self: bool(self._holdable()))
    @rule(data=st.data(), cap=st.sampled_from(CAPS))
    def a_worker_without_the_task_holds_a_job(self, data: st.DataObject, cap: str) -> None:
        """A job in hand (its lease current, or stale) is handed back to be held."""
        choices = self._holdable()
        current = [(u, j) for u, j in choices if self.units[u].held(j.id, j.token)]
        if current and data.draw(st.integers(0, 4)) > 0:
            unit, job = data.draw(st.sampled_from(current))
        else:
            unit, job = data.draw(st.sampled_from(choices))
        self._hold(unit, job, cap)

    @rule(unit=st.sampled_from(HOLDING_UNITS), cap=st.sampled_from(CAPS),
          worker=st.sampled_from(sorted(WORKERS)))  # fmt: skip
    def an_incapable_worker_fetches_and_holds(self, unit: str, cap: str, worker: str) -> None:
        """A worker beats (its capabilities published), then fetches one job of a task
        (or version) it does not run: it holds it."""
        if cap in WORKERS[worker]:
            worker = "none"
        self.a_worker_publishes_its_tasks(unit, worker, 0)
        before = len(self.handles)
        self.dequeue(unit, 1, LEASE_S)
        if len(self.handles) > before and self.handles[-1] in self._holdable():
            self._hold(*self.handles[-1], cap)

    def _hold(self, unit: str, job: Job, cap: str) -> None:
        mj = self.units[unit].held(job.id, job.token)
        front = self.world.fronts[unit]
        (status,) = front._run(holding.hold(front.keys, [(job, cap)], GRACE_S, "model"))
        if mj is None:
            return self._refused(unit, job, status)
        expected = self.holding[unit].hold(mj, cap, self.now)
        assert status.name.lower() == expected, f"hold {job.id} for {cap}: {status.name}"

    @rule(unit=st.sampled_from(HOLDING_UNITS), worker=st.sampled_from(sorted(WORKERS)),
          n=st.sampled_from((0, 1, 2, 5)))  # fmt: skip
    def a_worker_publishes_its_tasks(self, unit: str, worker: str, n: int) -> None:
        """A heartbeat: the worker's capabilities; jobs held for the grace for a
        capability no worker published for as long are dead-lettered (unknown_task).
        Then, as its next fetch would (``n`` > 0), it brings back up to ``n`` jobs of
        those of its capabilities that the reply named."""
        caps = WORKERS[worker]
        front = self.world.fronts[unit]
        dead_before = {j.id for j in self.units[unit].in_state("dead")}
        reply = front._run(holding.publish(front.keys, caps, GRACE_S))
        expected = self.holding[unit].publish(caps, self.now)
        assert reply == expected, (
            f"{worker} published {caps} on {unit}: {reply}, expected {expected}"
        )
        for job in self.units[unit].in_state("dead"):
            if job.id not in dead_before:
                reason = front.job(job.id)
                assert reason is not None and reason.reason is not None
                assert reason.reason["reason"] == "unknown_task", reason.reason
        if n and reply[1]:
            self._unhold(unit, reply[1], n)

    @rule(data=st.data(), unit=st.sampled_from(HOLDING_UNITS), n=st.sampled_from((1, 2, 5)))
    def a_capable_worker_brings_held_jobs_back(
        self, data: st.DataObject, unit: str, n: int
    ) -> None:
        """A worker whose capabilities have held jobs (mostly), as its heartbeat told it."""
        held = self.holding[unit].caps_held()
        capable = sorted(w for w, caps in WORKERS.items() if held & set(caps))
        if not capable or data.draw(st.integers(0, 3)) == 0:
            capable = ["v1", "v2", "u1"]
        self._unhold(unit, WORKERS[data.draw(st.sampled_from(capable))], n)

    def _unhold(self, unit: str, caps: list[str], n: int) -> None:
        worker = "/".join(caps)
        front = self.world.fronts[unit]
        reply = front._run(holding.unhold(front.keys, caps, n))
        expected = self.holding[unit].unhold(caps, n, self.now)
        assert reply == expected, f"{worker} brought back {reply} on {unit}, expected {expected}"

    # a job to hold comes from a fetch, which most steps do not make: drawn more often
    an_incapable_worker_fetches_and_holds_2 = an_incapable_worker_fetches_and_holds
    an_incapable_worker_fetches_and_holds_3 = an_incapable_worker_fetches_and_holds
    a_capable_worker_brings_held_jobs_back_2 = a_capable_worker_brings_held_jobs_back


def read_holding(reads: Any, unit: str, model: HoldingM) -> tuple[int, list[str]]:
    """Queue the holding area's keys of ``unit`` (check_holding): the index, and the
    held:<cap> of each capability a job was ever held for (an id in another one would
    put its capability in the index)."""
    prefix = reads.world.fronts[unit].keys.prefix
    first: int = reads.command("zrange", prefix + "heldidx", 0, -1, withscores=True)
    caps = sorted(model.used)
    for cap in caps:
        reads.command("zrange", prefix + "held:" + cap, 0, -1, withscores=True)
    return first, caps


def check_holding(reads: Any, at: tuple[int, list[str]], unit: str, model: HoldingM) -> None:
    first, caps = at
    index, *per_cap = reads.raw[first : first + 1 + len(caps)]

    def scores(rows: Any) -> dict[str, int]:
        return {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in rows}

    expected_index = {}
    for cap, rows in zip(caps, per_cap, strict=True):
        jobs = model.held(cap)
        found = scores(rows)
        assert found == {j.id: j.held_at for j in jobs}, f"{unit} held:{cap} {found}"
        if jobs:
            expected_index[cap] = jobs[0].held_at
    assert scores(index) == expected_index, f"{unit} heldidx {scores(index)}"
    assert all(j.state == HELD for j in model.unit.jobs.values() if j.cap)
