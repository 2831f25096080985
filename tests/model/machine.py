"""The driver: a hypothesis state machine that runs random sequences of every operation
against the real server and the reference model together, and checks after each step
that they agree (``invariants``).

Time is the server's frozen clock (``clock``): it moves only in the ``advance`` rule, so
a lease runs out, a delay ends, a rate allows the next start, a throttle window closes
or a tick falls due exactly when the model says. A consumer that vanishes mid-job is a
handle that is never used again, or used late (its lease gone): the next dequeue after
its lease ran out reclaims the job.

Every trigger of a known bug is gated here, through ``known_bugs.gated``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from durq import Job, Outcome, Rate
from durq._sync.sharded import shard_index
from durq.errors import InvalidArgument
from durq.limits import shard_settings
from durq.payloads import encode_result
from durq.protocol import limits as flow
from durq.protocol.status import Status
from model import invariants
from model.clock import FrozenClock
from model.fanin import Workflows
from model.known_bugs import gated
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
from model.rules_workflows import WF_UNITS, WorkflowRules
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


class DurqMachine(WorkflowRules, RuleBasedStateMachine):
    """Set ``world_factory`` (making a World) on a subclass before running it."""

    world_factory: Any = None

    def __init__(self) -> None:
        super().__init__()
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
        self.workflows = Workflows(
            {u: self.units[u] for u in WF_UNITS}, {"a": "a", "b": "b"}, round(RESULT_TTL_S * 1000)
        )
        self.wf_handles: dict[str, Any] = {}
        self.wf_shapes: dict[str, tuple[str, list[str], str]] = {}
        for u in WF_UNITS:
            self.units[u].on_end = self._step_ended(u)

    def _step_ended(self, unit: str) -> Callable[[JobM, str, int], None]:
        def hook(job: JobM, state: str, now: int) -> None:
            self.workflows.ended(unit, job, state, now)

        return hook

    def teardown(self) -> None:
        if os.environ.get("DURQ_MODEL_STATS"):
            total: Counter[str] = Counter()
            for unit in self.units.values():
                total.update(unit.count)
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
            if gated("debounce-vs-expiry"):
                expires = None
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
            if gated("debounce-vs-expiry"):
                expires = None
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
        try:
            result = front.enqueue(e.payload, **options)
        except InvalidArgument:
            if e.mode == "deb" and e.expires is not None:
                return  # refusing debounce with an expiry is one fix of issue 30's bug 9
            raise
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

    def _before_dequeue(self, unit: str) -> None:
        """What a dequeue does before it serves: reclaim, promote, fire ticks."""
        m = self.units[unit]
        m.reclaim(self.now)
        m.promote(self.now)
        if unit in self.schedules:
            self.schedules[unit].fire_due(self.now, MAX_ATTEMPTS)
        invariants.sync_parked(self.world, unit, m)

    @rule(unit=st.sampled_from(UNITS), n=st.sampled_from((1, 1, 2)),
          lease=st.sampled_from((LEASE_S, 4.0)))  # fmt: skip
    def dequeue(self, unit: str, n: int, lease: float) -> None:
        m = self.units[unit]
        self._before_dequeue(unit)
        room = m.flow.begin(self.now, len(m.in_state(ACTIVE)), n)
        jobs = self.world.fronts[unit].dequeue_many(n, lease=lease)
        assert len(jobs) <= room, f"{len(jobs)} started, flow control allows {room}"
        for job in jobs:
            self._started(unit, m, job, round(lease * 1000))
        invariants.sync_doomed(self.world, unit, m, self.now)
        if len(jobs) < room:
            left = m.eligible(self.now)
            assert not left, (
                f"dequeue of {n} from {unit} handed out {[j.id for j in jobs]}, but "
                f"{sorted(left.values())} may start now (stranded?)"
            )
        invariants.sync_parked(self.world, unit, m)

    @rule()
    def every_queue_dequeues(self) -> None:
        """A worker on every queue and shard takes one job."""
        for unit in UNITS:
            self.dequeue(unit, 1, LEASE_S)

    def _started(self, unit: str, m: Ops, job: Job, lease: int) -> None:
        mj = m.jobs.get(job.id)
        if mj is None:
            raise ModelError(f"{unit} handed out {job.id}, a job the model does not know")
        allowed = m.eligible(self.now)
        assert allowed.get(mj.group) == job.id, (
            f"{unit} handed out {job.id} ({mj.state}, group {mj.group!r}); "
            f"the model allows {sorted(allowed.values())}"
        )
        m.start(mj, self.now, lease)
        assert (job.attempt, job.deliveries, job.token) == (mj.attempts, mj.deliveries, mj.token)
        if mj.origin == "job":
            assert job.payload == mj.payload, f"{job.id}: payload {job.payload} != {mj.payload}"
        self.handles.append((unit, job))

    # -- the holder's calls (current or stale leases) ----------------------------------

    def _pick(self, data: st.DataObject) -> tuple[str, Job, JobM | None]:
        """A handle: mostly one whose lease is current, sometimes a stale one."""
        current = [(u, j) for u, j in self.handles if self.units[u].held(j.id, j.token)]
        if current and data.draw(st.integers(0, 4)) > 0:
            unit, job = data.draw(st.sampled_from(current))
        else:
            unit, job = data.draw(st.sampled_from(self.handles[-30:]))
        return unit, job, self.units[unit].held(job.id, job.token)

    def _refused(self, unit: str, job: Job, status: Outcome | Status) -> None:
        assert status.name.lower() in self.units[unit].refused(job.id), (
            f"a call with the stale lease of {job.id} answered {status.name}"
        )

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        unit, job, mj = self._pick(data)
        result = encode_result(1) if mj is not None and mj.origin == "step" else None
        (status,) = self.world.fronts[unit].release_many([job], results=[result])
        if mj is None:
            return self._refused(unit, job, status)
        expected = self.units[unit].release(mj, self.now)
        assert status.name.lower() == expected, (
            f"release {job.id}: {status.name}, expected {expected}"
        )

    @precondition(lambda self: self.handles)
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

    @precondition(lambda self: self.handles)
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

    @precondition(lambda self: self.handles)
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

    @precondition(lambda self: self.handles)
    @rule(data=st.data(), pause=st.sampled_from((0, 300, 1000)),
          scope=st.sampled_from(("group", "queue")))  # fmt: skip
    def rate_limited(self, data: st.DataObject, pause: int, scope: str) -> None:
        """The task raised RateLimited(retry_after=pause, scope=scope): what a worker
        sends for it (worker/acks.py)."""
        unit, job, mj = self._pick(data)
        if mj is not None and mj.cancel and gated("ratelimited-undoes-cancel"):
            return
        sharded = unit.startswith("s")
        if sharded and scope == "queue" and gated("sharded-queue-pause-one-shard"):
            scope = "group"
        front = self.world.fronts[unit]
        scoped: Literal["group", "queue"] = "queue" if scope == "queue" else "group"
        (status,) = front._run(flow.rate_limited(front.keys, [(job, pause / 1000, scoped)]))
        if mj is None:
            return self._refused(unit, job, status)
        m = self.units[unit]
        expected = m.rate_limited(mj, pause, scope, self.now)
        if sharded and scope == "queue" and expected == "ok":
            for other in ("s~0", "s~1"):  # docs: scope "queue" pauses the whole queue
                if other != unit:
                    self.units[other].flow.pause("queue", "", self.now, pause)
        assert status.name.lower() == expected, (
            f"RateLimited of {job.id} (cancel asked: {mj.must_cancel}): {status.name}, "
            f"expected {expected}"
        )

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
        if was is not None and was != unit and gated("schedule-moved-fires-twice"):
            unit = was
        stored = self.schedules[unit].by_name.get(name)
        if (stored is not None and stored.every != every and gated("timing-change-lifts-pause")
                and stored.paused != (not enabled)):  # fmt: skip
            every = stored.every  # a runtime pause (or resume) would be undone
        spec = self._declare(name, unit, every, catch, overlap, enabled)
        self.world.app.sync_schedules()
        self.schedules[unit].upsert(spec, self.now)
        if was is not None and was != unit:
            # issue 30, bug 5: the copy in the old queue stops firing
            old = self.schedules[was].by_name.pop(name, None)
            if old is not None:
                self.schedules[was].retired[name] = old.fired
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
    dequeue_2 = dequeue_3 = dequeue_4 = dequeue
    release_2 = release_3 = release
    rate_limited_2 = rate_limited
    cancel_2 = cancel
    requeue_2 = requeue
    every_queue_dequeues_2 = every_queue_dequeues
    enqueue_the_same_key_2 = enqueue_the_same_key
    configure_limits_2 = configure_limits
    declare_schedule_2 = declare_schedule
    control_schedule_2 = control_schedule
    submit_workflow_2 = WorkflowRules.submit_workflow
    cancel_workflow_2 = cancel_workflow_3 = WorkflowRules.cancel_workflow
    courier_2 = WorkflowRules.courier
    time_passes_2 = time_passes

    # -- what must always hold ---------------------------------------------------------

    @invariant()
    def agree(self) -> None:
        self.steps += 1
        for unit in UNITS:
            invariants.check_unit(self.world, unit, self.units[unit], self.now)
        for unit in PLAIN_UNITS:
            invariants.check_schedules(self.world, unit, self.schedules[unit])
        invariants.check_workflows(self.world, self.workflows, self.now)
