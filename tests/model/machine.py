"""The driver: a hypothesis state machine that runs random sequences of every operation
against the real server and the reference model together, and checks after each step
that they agree (``invariants``).

Time is the server's frozen clock (``clock``): it moves only in the ``advance`` rule, so
a lease runs out, a delay ends, a rate allows the next start, a throttle window closes
or a tick falls due exactly when the model says. A consumer that vanishes mid-job is a
handle that is never used again, or used late (its lease gone): the next dequeue after
its lease ran out reclaims the job.

Every trigger of a known bug is gated through ``known_bugs.gated`` (none is open).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, Literal

import orjson
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

import durq.app.workflows as workflows_api
from durq import Job, Outcome, Rate
from durq._sync.sharded import shard_index
from durq.errors import InvalidArgument
from durq.limits import shard_settings
from durq.payloads import encode_result
from durq.protocol import batches as batch_ops
from durq.protocol import lifecycle
from durq.protocol import limits as flow
from durq.protocol import workflows as wf_protocol
from durq.protocol.calls import Op
from durq.protocol.status import Status
from model import invariants
from model.batches import BY_GROUP, TOP_UP, BatchCall
from model.clock import FrozenClock
from model.fanin import Workflows
from model.limiter import RateM
from model.periodic import SchedM, Schedules
from model.reference import (
    ACTIVE,
    DEAD,
    EnqueueM,
    JobM,
    ModelError,
    Ops,
)
from model.rules_batches import BatchRules
from model.rules_durable import DurableRules
from model.rules_forming import FormingRules
from model.rules_holding import HOLDING_UNITS, HoldingRules, check_holding, read_holding
from model.rules_turns import TurnRules
from model.rules_workflows import BALLAST, WorkflowRules
from model.world import LEASE_S, MAX_ATTEMPTS, RESULT_TTL_S, WINDOW_S, World

UNITS = ("a", "b", "s~0", "s~1")
PLAIN_UNITS = ("a", "b")
GROUPS = ("", "g1", "g2")
#: dedup key -> its mode (one mode per key: the documents define no mixing)
KEYS = {"k": "dedup", "r": "replace", "t": "thr", "d": "deb", "l": "keep"}
TTL_MS, DEBOUNCE_MS, MAX_WAIT_MS = 1000, 300, 1000
RATES = {
    "none": None,
    "2/s": Rate(2, per=1.0),
    "5/s,burst=2": Rate(5, per=1.0, burst=2),
}
ADVANCES = (300, 1, 100, 700, 1000, 2500)


def rate_m(rate: Rate | None) -> RateM | None:
    return None if rate is None else RateM(rate.limit, rate.per_ms, rate.burst)


class DurqMachine(WorkflowRules, DurableRules, BatchRules, FormingRules, TurnRules,
                  HoldingRules, RuleBasedStateMachine):  # fmt: skip
    """Set ``world_factory`` (making a World) on a subclass before running it."""

    world_factory: Any = None

    def __init__(self) -> None:
        super().__init__()
        self._reproducible()
        self.world: World = self.world_factory()
        self.clock: FrozenClock = self.world.clock
        self.units: dict[str, Ops] = {u: Ops(self.world.fronts[u].name) for u in UNITS}
        for unit in self.units.values():
            unit.window = round(WINDOW_S * 1000)
        self.fired: set[tuple[str, int]] = set()
        self.schedules = {u: Schedules(self.units[u], self.fired) for u in PLAIN_UNITS}
        self.declared: dict[str, str] = {}  # schedule name -> its unit, as declared
        self.handles: list[tuple[str, Job]] = []
        self.serial = 0
        self.steps = 0
        # every unit is its own Redis Cluster slot (the shards too: their outboxes carry
        # the pauses of the sharded queue)
        self.workflows = Workflows(self.units, {u: u for u in UNITS}, round(RESULT_TTL_S * 1000))
        self.wf_handles: dict[str, Any] = {}
        self.init_durable()
        self.init_batches()
        self.init_holding()

    def _reproducible(self) -> None:
        """Draw the run tags and the ids of workflows without one from a counter of the
        example, not at random: ids order the ties of the server's sorted sets, so an
        example must replay with the same ones (hypothesis replays and shrinks by
        prefixes). Undone in teardown."""
        counter = iter(range(1, 1 << 32))
        self._drawn = (wf_protocol.new_run, getattr(workflows_api, "new_ids"))  # noqa: B009
        wf_protocol.new_run = lambda: f"{next(counter):08x}"
        setattr(workflows_api, "new_ids", lambda n: [f"r{next(counter)}" for _ in range(n)])  # noqa: B010

    def teardown(self) -> None:
        self.close_holding()
        wf_protocol.new_run = self._drawn[0]
        setattr(workflows_api, "new_ids", self._drawn[1])  # noqa: B010
        if os.environ.get("DURQ_MODEL_STATS"):
            total: Counter[str] = Counter()
            for unit in self.units.values():
                total.update(unit.count)
            total.update({f"entry {k}": n for k, n in self.workflows.delivered.items()})
            print(f"example: {self.steps} steps, {dict(sorted(total.items()))}")
        self.world.close()

    @property
    def now(self) -> int:
        return self.clock.now

    # -- producing ---------------------------------------------------------------------

    @initialize(units=st.lists(st.sampled_from(UNITS), min_size=2, max_size=6),
                group=st.sampled_from(GROUPS))  # fmt: skip
    def some_jobs(self, units: list[str], group: str) -> None:
        """Every example starts with a few plain jobs."""
        for unit in units:
            self._enqueue(unit, EnqueueM(self.new_id(), {"n": self.serial}, group=group))

    def new_id(self) -> str:
        self.serial += 1
        return f"j{self.serial}"

    @rule(
        unit=st.sampled_from(UNITS),
        group=st.sampled_from(GROUPS),
        prio=st.sampled_from((0, 0, 0, 5, -5)),
        delay=st.sampled_from((0, 0, 0, 200, 1000)),
        attempts=st.integers(1, MAX_ATTEMPTS),
        key=st.sampled_from((None, None, None, *KEYS)),
        expires=st.sampled_from((None, None, 500, 2000)),
    )
    def enqueue(
        self, unit: str, group: str, prio: int, delay: int, attempts: int,
        key: str | None, expires: int | None,
    ) -> None:  # fmt: skip
        mode = KEYS[key] if key else ""
        if mode == "deb":
            delay = 0  # debounce sets the delay itself
        if expires is not None and expires <= max(delay, DEBOUNCE_MS if mode == "deb" else 0):
            expires = None  # refused at enqueue: the job could never start
        e = EnqueueM(self.new_id(), {"n": self.serial}, delay, prio, attempts, group,
                     f"{key}{group}" if key else "", mode, expires)  # fmt: skip
        if mode == "thr":
            e.window = TTL_MS
        elif mode == "deb":
            e.window, e.max_wait = DEBOUNCE_MS, MAX_WAIT_MS
        self._enqueue(unit, e)

    @precondition(lambda self: any(j.key for u in self.units.values() for j in u.jobs.values()))
    @rule(data=st.data(), expires=st.sampled_from((None, 500, 2000)),
          delay=st.sampled_from((0, 200)))  # fmt: skip
    def enqueue_the_same_key(self, data: st.DataObject, expires: int | None, delay: int) -> None:
        """A burst: another job with the key (and so the mode) of a job enqueued before."""
        keyed = sorted(
            (u, j.id) for u, m in self.units.items() for j in m.jobs.values() if j.key
        )  # fmt: skip
        unit, job_id = data.draw(st.sampled_from(keyed))
        old = self.units[unit].jobs[job_id]
        mode = KEYS[old.key[0]]
        if mode == "deb":
            delay = 0
        if expires is not None and expires <= max(delay, DEBOUNCE_MS if mode == "deb" else 0):
            expires = None
        e = EnqueueM(self.new_id(), {"n": self.serial}, delay, old.prio, old.max_attempts,
                     old.group, old.key, mode, expires)  # fmt: skip
        e.window = TTL_MS if mode == "thr" else DEBOUNCE_MS
        e.max_wait = MAX_WAIT_MS if mode == "deb" else 0
        self._enqueue(unit, e)

    @precondition(lambda self: any(u.jobs for u in self.units.values()))
    @rule(data=st.data())
    def enqueue_an_id_again(self, data: st.DataObject) -> None:
        """Idempotent enqueue: the same id again, while its job exists or its id stays
        taken, changes nothing."""
        unit = data.draw(st.sampled_from([u for u in UNITS if self.units[u].jobs]))
        m = self.units[unit]
        choices = sorted(i for i in m.jobs if m.taken(i, self.now) is not None)
        if not choices:
            return
        old = m.jobs[data.draw(st.sampled_from(choices))]
        e = EnqueueM(old.id, {"again": self.serial}, group=old.group)
        if old.origin != "job" or self._route(unit, e) != unit:
            return  # a sharded queue routes by group, key, id: this one would go elsewhere
        self._enqueue(unit, e)

    def _enqueue(self, unit: str, e: EnqueueM) -> None:
        unit = self._route(unit, e)
        m = self.units[unit]
        options: dict[str, Any] = {
            "id": e.id, "delay": e.delay / 1000, "priority": e.prio,
            "max_attempts": e.max_attempts, "group": e.group or None,
            "key": e.key or None, "replace": e.mode == "replace",
            "expires": None if e.expires is None else e.expires / 1000,
            "ttl": TTL_MS / 1000 if e.mode == "thr" else None,
            "debounce": e.window / 1000 if e.mode == "deb" else None,
            "max_wait": e.max_wait / 1000 if e.mode == "deb" else None,
            "keep_last": e.mode == "keep",
        }  # fmt: skip
        front = self.world.sharded if unit.startswith("s") else self.world.fronts[unit]
        # docs/job-control.md: debounce with an expiry needs max_wait before the expiry
        # (a burst may move the start up to max_wait after its first enqueue)
        refused = e.mode == "deb" and e.expires is not None and e.expires <= e.max_wait
        try:
            result = front.enqueue(e.payload, **options)
        except InvalidArgument as exc:
            assert refused, f"enqueue {e} refused: {exc}"
            return
        assert not refused, f"enqueue {e} accepted, with an expiry before its max_wait"
        status, ref = m.enqueue(e, self.now)
        assert (result.status.value, result.id if status != "replaced" else result.superseded) == (
            status,
            ref,
        ), f"enqueue {e} answered {result}, the model expects {status} {ref}"
        if status == "updated" and e.mode == "deb":
            invariants.debounce_start_before_expiry(self.world, unit, m.jobs[ref])

    def _route(self, unit: str, e: EnqueueM) -> str:
        if not unit.startswith("s"):
            return unit
        routing = e.group or e.key or e.id
        return f"s~{shard_index(routing, 2)}"

    # -- consuming ---------------------------------------------------------------------

    @rule(unit=st.sampled_from(UNITS), n=st.sampled_from((1, 1, 2)),
          lease=st.sampled_from((LEASE_S, 4.0)))  # fmt: skip
    def dequeue(self, unit: str, n: int, lease: float) -> None:
        """One dequeue call (a worker's fetch): its upkeep (leases run out, delayed
        jobs due, ticks of schedules), then the jobs it hands out. How much upkeep a
        call does is bounded by its budget of server time (lib/budget.lua, processor
        time): the driver reads how far it got, and the model follows."""
        self._dequeue(unit, n, lease)

    def _dequeue(self, unit: str, n: int, lease: float, *,
                 batch: BatchCall | None = None,
                 op: Op[tuple[list[Job], int, int]] | None = None) -> list[Job]:  # fmt: skip
        """One dequeue call; ``batch``: a call of a batch mode (rules_batches); ``op``:
        the call as made by ``protocol.batches.dequeue_batch`` (rules_forming), its
        ``n`` and ``lease``."""
        m = self.units[unit]
        front = self.world.fronts[unit]
        invariants.sync_parked(self.world, unit, m)
        leases = m.due_leases(self.now)
        schedules = self.schedules.get(unit)
        due = schedules.due_now(self.now) if schedules else []
        if op is not None:
            pass  # (made by the caller)
        elif batch is None:
            op = lifecycle.fetch(front.keys, front.codec, n, lease)
        else:
            op = batch_ops.fetch(front.keys, front.codec, n, lease,
                                 by_group=batch.mode == BY_GROUP, group=batch.group)  # fmt: skip
        jobs, next_ms, reclaimed = front._run(op)
        assert min(len(leases), 1) <= reclaimed <= len(leases), (
            f"{unit}: the dequeue reclaimed {reclaimed} of {len(leases)} leases run out"
        )
        m.reclaim(self.now, reclaimed)
        # (after the reclaim: a keep-last job that ends there makes its follow-up due)
        delayed = m.due_delayed(self.now)
        left = invariants.delayed_left(self.world, unit, self.now)
        promoted = [j for j in delayed if j.id not in left]
        assert promoted == delayed[: len(promoted)] and (promoted or not delayed), (
            f"{unit}: the dequeue promoted {[j.id for j in promoted]} of "
            f"{[j.id for j in delayed]} (in order, at least one)"
        )
        m.promote(self.now, promoted)
        cut = reclaimed < len(leases) or len(promoted) < len(delayed)
        if schedules:
            cut = invariants.follow_schedules(self.world, unit, schedules, due, self.now,
                                              MAX_ATTEMPTS) or cut  # fmt: skip
        assert next_ms == 0 or not cut, f"{unit}: upkeep left for later, yet next_ms={next_ms}"
        room = m.flow.begin(self.now, len(m.in_state(ACTIVE)), n)
        assert len(jobs) <= room, f"{len(jobs)} started, flow control allows {room}"
        m.count["dequeue calls"] += 1
        m.count["handed out"] += len(jobs)
        waiting = self.turns.before_call(unit, m, self.now)
        for job in jobs:
            self._started(unit, m, job, round(lease * 1000), batch)
        mode = "" if batch is None else batch.mode
        broken = self.turns.after_call(unit, m, waiting, [j.group or "" for j in jobs],
                                       rotation=mode != TOP_UP, sole=mode == BY_GROUP)  # fmt: skip
        assert not broken, f"{unit}: the groups' turns: {broken}"
        invariants.sync_doomed(self.world, unit, m, self.now)
        if len(jobs) < room and next_ms != 0:  # (0: the call was cut short by its budget)
            left_over = m.eligible(self.now) if batch is None else batch.allowed(m, self.now)
            assert not left_over, (
                f"dequeue of {n} from {unit} handed out {[j.id for j in jobs]}, but "
                f"{sorted(left_over.values())} may start now (stranded?)"
            )
        invariants.sync_parked(self.world, unit, m)
        return jobs

    @rule(data=st.data())
    def a_worker_completes_one(self, data: st.DataObject) -> None:
        """A worker of a queue with work takes one job and completes it."""
        heads = {u: self.units[u].eligible(self.now).values() for u in UNITS}
        busy = [u for u in UNITS if heads[u]]
        # workflows progress: a queue whose next job may be a step, more often than not
        steps = [u for u in busy if any(self.units[u].jobs[i].origin == "step" for i in heads[u])]
        if steps and bool(data.draw(st.booleans())):
            busy = steps
        self.complete_one(data.draw(st.sampled_from(busy or list(UNITS))))

    def complete_one(self, unit: str) -> None:
        before = len(self.handles)
        self.dequeue(unit, 1, LEASE_S)
        if len(self.handles) > before:
            self._release(*self.handles[-1])

    @rule(lease=st.sampled_from((LEASE_S, 4.0)))
    def every_queue_dequeues(self, lease: float) -> None:
        """A worker on every queue and shard takes one job. (An argument keeps the rule
        from being hypothesis's first, which it draws far more often than the others.)"""
        for unit in UNITS:
            self.dequeue(unit, 1, lease)

    def _started(self, unit: str, m: Ops, job: Job, lease: int, batch: BatchCall | None) -> None:
        mj = m.jobs.get(job.id)
        if mj is None:
            raise ModelError(f"{unit} handed out {job.id}, a job the model does not know")
        allowed = m.eligible(self.now) if batch is None else batch.allowed(m, self.now)
        assert allowed.get(mj.group) == job.id, (
            f"{unit} handed out {job.id} ({mj.state}, group {mj.group!r}); "
            f"the model allows {sorted(allowed.values())}"
        )
        m.start(mj, self.now, lease)
        if batch is not None:
            batch.took(m, mj)
        assert (job.attempt, job.deliveries, job.token) == (mj.attempts, mj.deliveries, mj.token)
        if mj.origin == "job":
            assert job.payload == mj.payload, f"{job.id}: payload {job.payload} != {mj.payload}"
        self.handles.append((unit, job))

    # -- the holder's calls (current or stale leases) ----------------------------------

    def current_handles(self) -> bool:
        """Whether some handle's lease is current (a call with a stale one is drawn
        among those, one in five)."""
        return any(self.units[u].held(j.id, j.token) for u, j in self.handles[-30:])

    def _pick(self, data: st.DataObject) -> tuple[str, Job, JobM | None]:
        """A handle: mostly one whose lease is current, sometimes a stale one."""
        current = [(u, j) for u, j in self.handles[-30:] if self.units[u].held(j.id, j.token)]
        if current and data.draw(st.integers(0, 4)) > 0:
            unit, job = data.draw(st.sampled_from(current))
        else:
            unit, job = data.draw(st.sampled_from(self.handles[-30:]))
        return unit, job, self.units[unit].held(job.id, job.token)

    def _refused(self, unit: str, job: Job, status: Outcome | Status) -> None:
        assert status.name.lower() in self.units[unit].refused(job.id), (
            f"a call with the stale lease of {job.id} answered {status.name}"
        )

    @precondition(lambda self: self.current_handles())
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        unit, job, _ = self._pick(data)
        self._release(unit, job)

    def _release(self, unit: str, job: Job) -> None:
        mj = self.units[unit].held(job.id, job.token)
        self.units[unit].count["releases" if mj else "stale releases"] += 1
        result = None
        if mj is not None and mj.origin == "step":
            value: object = BALLAST if self.workflows.heavy(unit, mj.id) else 1
            mj.result_size = len(orjson.dumps(value))
            result = encode_result(value)
        (status,) = self.world.fronts[unit].release_many([job], results=[result])
        if mj is None:
            return self._refused(unit, job, status)
        expected = self.units[unit].release(mj, self.now)
        assert status.name.lower() == expected, (
            f"release {job.id}: {status.name}, expected {expected}"
        )

    @precondition(lambda self: self.current_handles())
    @rule(data=st.data(), delay=st.sampled_from((0, 500, 3000)), dead=st.booleans())
    def requeue(self, data: st.DataObject, delay: int, dead: bool) -> None:
        unit, job, mj = self._pick(data)
        front = self.world.fronts[unit]
        (status,) = front.requeue_many([job], delay=delay / 1000, dead=dead, reason="model")
        if mj is None:
            return self._refused(unit, job, status)
        attempt = mj.attempts
        expected = self.units[unit].requeue(mj, delay, dead, self.now)
        assert status.name.lower() == expected, (
            f"requeue {job.id}: {status.name}, expected {expected}"
        )
        if expected != "cancelled":  # its last 5 failures, a replay included, kept the
            # result TTL after the latest (a key expires once the server's time is past it)
            if mj.errors_at is not None and self.now > mj.errors_at + round(RESULT_TTL_S * 1000):
                mj.errors = []
            mj.errors, mj.errors_at = [*mj.errors, attempt][-5:], self.now
            info = front.job(job.id)
            assert info is not None
            assert [e["attempt"] for e in info.errors] == mj.errors, (
                f"errors of {job.id}: {info.errors}, expected attempts {mj.errors}"
            )

    @precondition(lambda self: self.current_handles())
    @rule(data=st.data(), delay=st.sampled_from((0, 300)))
    def defer(self, data: st.DataObject, delay: int) -> None:
        unit, job, mj = self._pick(data)
        (status,) = self.world.fronts[unit].defer_many([job], delay / 1000)
        if mj is None:
            return self._refused(unit, job, status)
        expected = self.units[unit].defer(mj, delay, self.now)
        assert status.name.lower() == expected, (
            f"defer {job.id}: {status.name}, expected {expected}"
        )

    @precondition(lambda self: self.current_handles())
    @rule(data=st.data(), lease=st.sampled_from((LEASE_S, 3.0)))
    def extend(self, data: st.DataObject, lease: float) -> None:
        unit, job, mj = self._pick(data)
        (status,) = self.world.fronts[unit].extend_many([job], lease=lease)
        if mj is None:
            return self._refused(unit, job, status)
        expected = self.units[unit].extend(mj, round(lease * 1000), self.now)
        assert status.name.lower() == expected, (
            f"extend {job.id}: {status.name}, expected {expected}"
        )

    @precondition(lambda self: self.current_handles())
    @rule(data=st.data(), pause=st.sampled_from((0, 300, 1000)),
          scope=st.sampled_from(("group", "queue")))  # fmt: skip
    def rate_limited(self, data: st.DataObject, pause: int, scope: str) -> None:
        """The task raised RateLimited(retry_after=pause, scope=scope): what a worker
        sends for it (worker/acks.py)."""
        unit, job, mj = self._pick(data)
        sharded = unit.startswith("s")
        front = self.world.fronts[unit]
        scoped: Literal["group", "queue"] = "queue" if scope == "queue" else "group"
        (status,) = front._run(flow.rate_limited(front.keys, [(job, pause / 1000, scoped)]))
        if mj is None:
            return self._refused(unit, job, status)
        m = self.units[unit]
        expected = m.rate_limited(mj, pause, scope, self.now)
        if sharded and scope == "queue" and pause > 0:
            # docs/flow-control.md: it pauses the whole queue, the other shards through
            # this shard's outbox ('P' entries), unless they know of a pause that ends
            # at most a tenth of this one's length earlier (lib/queue_pause.lua)
            till = self.now + pause
            if till > m.qfan + pause / 10:
                m.qfan = till
                for other in ("s~0", "s~1"):
                    if other != unit:
                        self.workflows.push(unit, ("P", other, till))
        assert status.name.lower() == expected, (
            f"RateLimited of {job.id} (cancel asked: {mj.must_cancel}): {status.name}, "
            f"expected {expected}"
        )

    def _pick_in(self, data: st.DataObject, unit: str) -> tuple[str, Job, JobM | None]:
        """A handle of ``unit``: mostly one whose lease is current, sometimes a stale one."""
        mine = [(u, j) for u, j in self.handles if u == unit]
        current = [(u, j) for u, j in mine if self.units[u].held(j.id, j.token)]
        if current and data.draw(st.integers(0, 4)) > 0:
            u, job = data.draw(st.sampled_from(current))
        else:
            u, job = data.draw(st.sampled_from(mine[-30:]))
        return u, job, self.units[u].held(job.id, job.token)

    # -- by id -------------------------------------------------------------------------

    @precondition(lambda self: any(u.jobs for u in self.units.values()))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        unit = data.draw(st.sampled_from([u for u in UNITS if self.units[u].jobs]))
        m = self.units[unit]
        job_id = data.draw(st.sampled_from(sorted(m.jobs)))
        (result,) = self.world.fronts[unit].cancel([job_id])
        expected = m.cancel(job_id, self.now)
        assert result.status.value in expected, (
            f"cancel {job_id} ({m.jobs[job_id].state}): {result.status.value}, expected {expected}"
        )

    @precondition(lambda self: any(u.in_state(DEAD) for u in self.units.values()))
    @rule(data=st.data(), purge=st.booleans())
    def dead_letters(self, data: st.DataObject, purge: bool) -> None:
        """Replay a dead letter (back to its group's tail, attempts reset) or purge it."""
        unit = data.draw(st.sampled_from([u for u in UNITS if self.units[u].in_state(DEAD)]))
        m = self.units[unit]
        job = m.jobs[data.draw(st.sampled_from(sorted(j.id for j in m.in_state(DEAD))))]
        front = self.world.fronts[unit]
        if purge:
            assert front.purge([job.id]) == m.purge(job), f"purge {job.id}"
        else:
            assert front.replay([job.id]) == m.replay(job, self.now), f"replay {job.id}"

    # -- time --------------------------------------------------------------------------

    @rule(ms=st.sampled_from(ADVANCES))
    def time_passes(self, ms: int) -> None:
        self.clock.advance(ms)

    # -- settings ----------------------------------------------------------------------

    @rule(unit=st.sampled_from(UNITS), group_limit=st.sampled_from((1, None, 0, 2)),
          g1=st.sampled_from((1, ..., None)))  # fmt: skip
    def configure_limits(self, unit: str, group_limit: int | None, g1: Any) -> None:
        limits = None if g1 is ... else {"g1": g1}
        self.world.fronts[unit].configure(group_limit=group_limit, limits=limits)
        m = self.units[unit]
        if group_limit is not None:
            m.group_limit = group_limit
        if g1 is None:
            m.glimit.pop("g1", None)
        elif g1 is not ...:
            m.glimit["g1"] = g1
        invariants.check_groups(self.world, unit, m)

    @rule(queue=st.sampled_from(("a", "b", "s")), rate=st.sampled_from(("2/s", ..., *RATES)),
          group_rate=st.sampled_from((..., *RATES)), g2=st.sampled_from((..., *RATES)),
          max_active=st.sampled_from((..., None, 2, 3)))  # fmt: skip
    def configure_flow(self, queue: str, rate: Any, group_rate: Any, g2: Any,
                       max_active: Any) -> None:  # fmt: skip
        settings: dict[str, Any] = {}
        if rate is not ...:
            settings["rate"] = RATES[rate]
        if group_rate is not ...:
            settings["group_rate"] = RATES[group_rate]
        if max_active is not ...:
            settings["max_active"] = max_active
        group_rates = None if g2 is ... else {"g2": RATES[g2]}
        if queue == "s":
            self.world.sharded.configure(**settings, group_rates=group_rates)
            for i in range(2):
                self._flow_settings(f"s~{i}", shard_settings(settings, 2, i), group_rates)
        else:
            self.world.fronts[queue].configure(**settings, group_rates=group_rates)
            self._flow_settings(queue, settings, group_rates)

    def _flow_settings(self, unit: str, settings: dict[str, Any],
                       group_rates: dict[str, Rate | None] | None) -> None:  # fmt: skip
        converted: dict[str, object] = {
            name: rate_m(value) if name != "max_active" else value
            for name, value in settings.items()
        }
        grates = {g: rate_m(r) for g, r in (group_rates or {}).items()}
        self.units[unit].flow.configure(converted, grates)

    # -- periodic schedules ------------------------------------------------------------

    def _declare(self, name: str, unit: str, every: int, catch: str, overlap: str,
                 enabled: bool) -> SchedM:  # fmt: skip
        self.world.app.schedules.declared.pop(name, None)
        s = self.world.app.schedule(
            name, "tick", every=every / 1000, catch_up=catch, max_catch_up=3,
            overlap=overlap, enabled=enabled, queue=self.world.fronts[unit].name,
        )  # fmt: skip
        row = s.row()
        return SchedM(name, every, 0, 0, catch, 3, row.grace_ms, overlap,
                      declared_enabled=enabled)  # fmt: skip

    @rule(name=st.sampled_from(("s1", "s2")), unit=st.sampled_from(PLAIN_UNITS),
          every=st.sampled_from((500, 1000)), catch=st.sampled_from(("latest", "all", "none")),
          overlap=st.sampled_from(("allow", "skip")), enabled=st.booleans())  # fmt: skip
    def declare_schedule(self, name: str, unit: str, every: int, catch: str, overlap: str,
                         enabled: bool) -> None:  # fmt: skip
        """The code declares a schedule (new, changed, or moved to another queue), and
        a worker's start syncs it."""
        was = self.declared.get(name)
        moved = was if was is not None and was != unit else None
        old = self.schedules[moved].by_name.get(name) if moved is not None else None
        spec = self._declare(name, unit, every, catch, overlap, enabled)
        report = self.world.app.sync_schedules()
        if moved is not None and old is not None:
            # docs/schedules.md: a schedule moved to another queue fires there only: the
            # old copy is removed, and a runtime pause (or resume) of it carries over
            assert (self.world.fronts[moved].name, name, self.world.fronts[unit].name) in (
                report.moved
            ), f"{name} moved from {was} to {unit}: the sync reported {report}"
            self.schedules[moved].remove(name)
        status = self.schedules[unit].upsert(spec, self.now)
        if old is not None and status == "created" and old.declared_enabled == enabled \
                and old.paused == enabled:  # fmt: skip
            if old.paused:
                self.schedules[unit].pause(name)
            else:
                self.schedules[unit].resume(name, self.now)
        self.declared[name] = unit

    def _stored(self, data: st.DataObject) -> tuple[str, str] | None:
        found = [(u, n) for u in PLAIN_UNITS for n in sorted(self.schedules[u].by_name)]
        return data.draw(st.sampled_from(found)) if found else None

    @rule(data=st.data(), action=st.sampled_from(("pause", "resume", "remove", "trigger")))
    def control_schedule(self, data: st.DataObject, action: str) -> None:
        picked = self._stored(data)
        if picked is None:
            return
        unit, name = picked
        schedules = self.world.app.schedules
        queue = self.world.fronts[unit].name
        if action == "pause":
            schedules.pause(name, queue)
            self.schedules[unit].pause(name)
        elif action == "resume":
            schedules.resume(name, queue)
            self.schedules[unit].resume(name, self.now)
        elif action == "remove":
            schedules.remove(name, queue)
            self.schedules[unit].remove(name)
            self.world.app.schedules.declared.pop(name, None)
            self.declared.pop(name, None)
        else:
            job_id = schedules.trigger(name, queue)
            assert job_id == self.schedules[unit].trigger(name, self.now, MAX_ATTEMPTS)

    # -- weights: hypothesis picks among the rules uniformly, so the common operations
    # are listed more than once (same rule, another name)
    enqueue_2 = enqueue_3 = enqueue_4 = enqueue
    dequeue_2 = dequeue_3 = dequeue
    release_2 = release_3 = release
    rate_limited_2 = rate_limited
    cancel_2 = cancel
    requeue_2 = requeue
    every_queue_dequeues_2 = every_queue_dequeues
    enqueue_the_same_key_2 = enqueue_the_same_key
    configure_limits_2 = configure_limits
    declare_schedule_2 = declare_schedule
    control_schedule_2 = control_schedule
    submit_workflow_2 = submit_workflow_3 = WorkflowRules.submit_workflow
    cancel_workflow_2 = WorkflowRules.cancel_workflow
    courier_2 = courier_3 = WorkflowRules.courier
    a_workflow_progresses_2 = WorkflowRules.a_workflow_progresses
    time_passes_2 = time_passes_3 = time_passes_4 = time_passes

    # -- what must always hold ---------------------------------------------------------

    @invariant()
    def agree(self) -> None:
        self.steps += 1
        reads = invariants.Reads(self.world)
        units = {u: invariants.read_unit(reads, u) for u in UNITS}
        schedules = {u: invariants.read_schedules(reads, u, self.schedules[u]) for u in PLAIN_UNITS}
        workflows = invariants.read_workflows(reads, self.workflows)
        held = {u: read_holding(reads, u, self.holding[u]) for u in HOLDING_UNITS}
        reads.send()
        for unit, where in units.items():
            heads = invariants.check_unit(reads, where, unit, self.units[unit])
            self.turns.observe(unit, self.units[unit], self.now, heads)
        for unit, at in schedules.items():
            invariants.check_schedules(reads, at, unit, self.schedules[unit])
        invariants.check_workflows(reads, workflows, self.workflows, self.now)
        for unit, area in held.items():
            check_holding(reads, area, unit, self.holding[unit])
