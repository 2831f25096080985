"""The reference model of one durq queue (or one shard), in plain Python, no IO: what a
user can observe of each job (state, attempts, deliveries, its lease, its cancel flag,
its group slot, its dedup key and job-control mode), the order in which each group
hands its ready jobs out, and the queue's counters. Flow control is in ``limiter``,
schedules in ``periodic``, workflows in ``fanin``.

The model is written from the documents (docs/design.md "Job states", "Groups",
job-control.md, flow-control.md), not from the scripts: where both agree the driver
finds nothing, and every disagreement is a finding. What the documents leave open (which
eligible group a dequeue serves, when a lazily discarded record goes) the model leaves
open too, and the driver observes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from model.limiter import FlowM

PENDING, DELAYED, ACTIVE = "pending", "delayed", "active"
COMPLETED, DEAD, CANCELLED, EXPIRED, SUPERSEDED = (
    "completed", "dead", "cancelled", "expired", "superseded",
)  # fmt: skip
PURGED = "purged"  # a dead letter deleted for good: nothing of it is left
HELD = "held"  # waits for a worker that runs its task (model.holding)
LIVE = (PENDING, DELAYED, ACTIVE)
PARKED = 9007199254740991  # a keep-last follow-up's due time while its predecessor runs
PRIO_SHIFT = 2**44
DEFAULT_WINDOW = 60_000
RECLAIM_MAX = 100  # leases reclaimed per dequeue call at most (dequeue.lua)


@dataclass
class JobM:
    """One job as a user sees it."""

    id: str
    group: str = ""
    prio: int = 0
    key: str = ""
    mode: str = ""  # '', 'thr', 'deb', 'keep' (job control), 'dedup', 'replace'
    max_attempts: int = 5
    enq: int = 0
    state: str = PENDING
    attempts: int = 0
    deliveries: int = 0
    due: int | None = None  # while delayed
    deadline: int | None = None  # while active
    token: str | None = None  # the current lease's token
    cancel: bool = False  # a cancel was asked while it ran
    slot: bool = False  # holds one of its group's slots
    returning: bool = False  # started before: comes back to its group's head
    expires: int | None = None
    payload: object = None
    follow: str | None = None  # keep-last: the follow-up waiting for this job
    waits_for: str | None = None  # keep-last: the job this follow-up waits for
    control: bool = False  # has job-control data (expiry, a dedup mode, a follow-up)
    ended_at: int | None = None
    origin: str = "job"  # 'job', 'tick', 'step'
    # its error ring (lib/core/attempt_errors.lua): the attempts of its last 5 failures,
    # and when the latest was (the ring expires the result TTL after it)
    errors: list[int] = field(default_factory=list)
    errors_at: int | None = None
    must_cancel: bool = False  # a cancel answered CANCELLED/CANCELLING: ends cancelled
    result_size: int = 0  # the bytes of the result its holder releases it with (a step)
    cap: str = ""  # while held: the capability it waits for, and since when
    held_at: int = 0


@dataclass
class GroupOrder:
    """The ready jobs of one group in the order dequeue hands them out: higher
    priorities first (FIFO within a level, a returning job first of its level), then
    the default level, then lower ones."""

    fifo: list[str] = field(default_factory=list)  # priority 0, in order
    scored: dict[str, int] = field(default_factory=dict)  # other priorities: score

    def push(self, job: JobM, seq: int, head: bool) -> None:
        if job.prio == 0:
            if head:
                self.fifo.insert(0, job.id)
            else:
                self.fifo.append(job.id)
        else:
            self.scored[job.id] = -job.prio * PRIO_SHIFT + (0 if head else seq)

    def remove(self, job_id: str) -> None:
        if job_id in self.scored:
            del self.scored[job_id]
        elif job_id in self.fifo:
            self.fifo.remove(job_id)

    def order(self) -> list[str]:
        ranked = sorted(self.scored.items(), key=lambda item: (item[1], item[0]))
        high = [i for i, score in ranked if score < 0]
        low = [i for i, score in ranked if score >= 0]
        return high + self.fifo + low

    def __len__(self) -> int:
        return len(self.fifo) + len(self.scored)


class ModelError(AssertionError):
    """The server did something the model (the documents) does not allow."""


@dataclass
class UnitM:
    """One queue or shard: its jobs, ready order, dedup keys, settings and counters."""

    name: str
    jobs: dict[str, JobM] = field(default_factory=dict)
    groups: dict[str, GroupOrder] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # dedup key -> holder
    throttle: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (id, until)
    tombs: dict[str, int] = field(default_factory=dict)  # released id -> taken until
    seq: int = 0
    window: int = DEFAULT_WINDOW
    group_limit: int = 0
    glimit: dict[str, int] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)  # named group -> jobs per turn
    flow: FlowM = field(default_factory=FlowM)
    count: Counter[str] = field(default_factory=Counter)
    #: called when a job reaches a terminal state: (job, state, now) (workflow steps)
    on_end: Callable[[JobM, str, int], None] | None = None
    #: the kind of the workflow stop that guards a pending step from starting ('X' or
    #: 'K'), or None (lib/wf_stop.lua: dequeue ends such a step cancelled)
    guard: Callable[[JobM], str | None] | None = None
    #: the end of the latest queue pause this shard sent to its siblings or received
    #: from one (lib/queue_pause.lua 'qfan')
    qfan: int = 0
    #: called when dequeue ends a guarded step (before its end): unlinks it
    on_guard: Callable[[JobM], None] | None = None

    # -- reads -------------------------------------------------------------------------

    def in_state(self, *states: str) -> list[JobM]:
        return [j for j in self.jobs.values() if j.state in states]

    def limited(self) -> bool:
        return self.group_limit > 0 or bool(self.glimit)

    def weight(self, group: str) -> int:
        """The jobs ``group`` gives per turn (1 unless configured; the default group's
        is always 1)."""
        return self.weights.get(group, 1) if group else 1

    def slots_held(self, group: str) -> int:
        return sum(1 for j in self.jobs.values() if j.slot and j.group == group)

    def slot_free(self, group: str) -> bool:
        if group == "" or not self.limited():
            return True
        limit = self.glimit.get(group, self.group_limit)
        return limit <= 0 or self.slots_held(group) < limit

    def doomed(self, job: JobM, now: int) -> str | None:
        """The state a ready job ends in when dequeue reaches it instead of starting it:
        cancelled when the stop of its workflow guards it (lib/wf_stop.lua), expired
        past its expiry; None for a job that starts."""
        if self.guard is not None and self.guard(job):
            return CANCELLED
        if job.expires is not None and job.expires <= now:
            return EXPIRED
        return None

    def head(self, group: str, now: int) -> str | None:
        for job_id in self.groups.get(group, GroupOrder()).order():
            if not self.doomed(self.jobs[job_id], now):
                return job_id
        return None

    def eligible(self, now: int) -> dict[str, str]:
        """Group -> the job it hands out next, for every group that may start one now
        (its slots and its rate allow it)."""
        out = {}
        for group in self.groups:
            head = self.head(group, now)
            if head and self.slot_free(group) and self.flow.group_allows(group, now):
                out[group] = head
        return out

    def taken(self, job_id: str, now: int) -> bool | None:
        """Whether an enqueue of ``job_id`` finds it taken: True, False, or None when
        either may happen (a finished record goes lazily after its retention)."""
        job = self.jobs.get(job_id)
        if job is None:
            return False
        if job.state in (*LIVE, DEAD, HELD):
            return True
        if job.state == PURGED:
            return False
        if job.state == COMPLETED:
            return self.tombs.get(job_id, 0) > now
        kept_from = job.enq if job.state == SUPERSEDED else (job.ended_at or 0)
        return True if now < kept_from + self.window else None

    # -- structure moves ---------------------------------------------------------------

    def order_of(self, group: str) -> GroupOrder:
        return self.groups.setdefault(group, GroupOrder())

    def next_seq(self, now: int) -> int:
        self.seq = now if self.seq == 0 else self.seq + 1
        return self.seq

    def make_ready(self, job: JobM, head: bool, now: int) -> None:
        seq = 0 if head or job.prio == 0 else self.next_seq(now)
        self.order_of(job.group).push(job, seq, head)
        job.state, job.due, job.deadline, job.token = PENDING, None, None, None
        job.returning = False

    def leave_ready(self, job: JobM) -> None:
        self.order_of(job.group).remove(job.id)

    def drop_slot(self, job: JobM) -> None:
        job.slot = False

    def end(self, job: JobM, state: str, now: int) -> None:
        """Job ``job`` reaches terminal state ``state`` (its structures left already)."""
        if job.must_cancel and state != CANCELLED:
            raise ModelError(f"{job.id}: its cancel was answered, yet it ends {state}")
        self.drop_slot(job)
        self.finish_control(job, state, now)
        job.state, job.due, job.deadline, job.token, job.cancel = state, None, None, None, False
        job.ended_at = now
        if state == COMPLETED and job.enq + self.window > now:
            self.tombs[job.id] = job.enq + self.window
        self.count[state] += 1
        if self.on_end is not None:
            self.on_end(job, state, now)

    def finish_control(self, job: JobM, why: str, now: int) -> None:
        """The dedup key is freed only while it points to the job; a keep-last
        follow-up becomes due and keeps the key; a throttle window closes early on a
        cancel or an expiry (docs/job-control.md, Keys)."""
        if not job.key:
            return
        handed = False
        if job.mode == "keep" and job.follow and job.control:
            follow = self.jobs.get(job.follow)
            if follow and follow.state == DELAYED and follow.due == PARKED:
                follow.due, follow.waits_for = now, None
                handed = True
        elif job.mode == "keep" and job.waits_for:
            first = self.jobs.get(job.waits_for)
            if first and first.deliveries > 0 and first.state in LIVE:
                if self.keys.get(job.key) == job.id:
                    self.keys[job.key] = first.id
                if first.follow == job.id:
                    first.follow = None
                handed = True
        if not handed and self.keys.get(job.key) == job.id:
            del self.keys[job.key]
        if job.mode == "thr" and why in (CANCELLED, EXPIRED):
            holder = self.throttle.get(job.key)
            if holder and holder[0] == job.id:
                del self.throttle[job.key]


@dataclass
class EnqueueM:
    """One enqueue as the driver makes it (times in ms)."""

    id: str
    payload: object = None
    delay: int = 0
    prio: int = 0
    max_attempts: int = 5
    group: str = ""
    key: str = ""
    mode: str = ""  # '', 'dedup', 'replace', 'thr', 'deb', 'keep'
    expires: int | None = None  # ms from now
    window: int = 0  # ttl (thr) or debounce (deb)
    max_wait: int = 0
    origin: str = "job"


CREATED, EXISTS, DEDUPLICATED, REPLACED, UPDATED = (
    "created", "exists", "deduplicated", "replaced", "updated",
)  # fmt: skip
OK, LEASE_LOST, NOT_FOUND, RETRYING = "ok", "lease_lost", "not_found", "retrying"
CANCELLING, FINISHED = "cancelling", "finished"


class Ops(UnitM):
    """UnitM with the operations: each applies what the documents say a call does and
    returns what the call must answer."""

    # -- enqueue -----------------------------------------------------------------------

    def enqueue(self, e: EnqueueM, now: int) -> tuple[str, str]:
        park = None
        if e.mode == "thr":
            holder = self.throttle.get(e.key)
            if holder and now <= holder[1] and holder[0] != e.id:
                self.count["deduplicated"] += 1
                return DEDUPLICATED, holder[0]
        elif e.mode in ("deb", "keep"):
            other = self.jobs.get(self.keys.get(e.key, ""))
            if other and other.id != e.id and other.deliveries == 0 and other.state in (
                PENDING, DELAYED,
            ):  # fmt: skip
                self.update(other, e, now)
                return UPDATED, other.id
            if (
                e.mode == "keep"
                and other
                and other.id != e.id
                and other.deliveries > 0
                and (other.state in LIVE)
            ):
                park = other
                del self.keys[e.key]
        delay = e.window if e.mode == "deb" else (1 if park else e.delay)
        status, ref = self.enqueue_one(e, delay, now)
        if status not in (CREATED, REPLACED):
            if park:
                self.keys[e.key] = park.id
            return status, ref
        self.control_data(self.jobs[e.id], e, park, now)
        return status, ref

    def update(self, other: JobM, e: EnqueueM, now: int) -> None:
        """A debounce or keep-last enqueue gives a job that has not started its
        arguments; a debounce also moves its start (never past max_wait)."""
        other.payload = e.payload
        self.count["deduplicated"] += 1
        if e.mode == "deb" and other.state == DELAYED and other.due != PARKED:
            due = now + e.window
            if e.max_wait:
                due = min(due, other.enq + e.max_wait)
            other.due = due

    def control_data(self, job: JobM, e: EnqueueM, park: JobM | None, now: int) -> None:
        if e.expires is not None:
            job.expires = now + e.expires
            job.control = True
        if e.mode in ("thr", "deb", "keep"):
            job.control = True
            job.mode = e.mode
        if e.mode == "thr":
            self.throttle[e.key] = (e.id, now + e.window)
        if park:
            job.waits_for, job.due = park.id, PARKED
            park.follow, park.control = job.id, True

    def enqueue_one(self, e: EnqueueM, delay: int, now: int) -> tuple[str, str]:
        taken = self.taken(e.id, now)
        if taken is None:
            raise ModelError(f"the driver reused {e.id}, whose record may or may not be gone")
        if taken:
            return EXISTS, e.id
        self.tombs.pop(e.id, None)
        status, ref = CREATED, e.id
        if e.key:
            other = self.jobs.get(self.keys.get(e.key, ""))
            # a held job never started (its hold gave it its key back): it counts too
            if other and other.state in (PENDING, DELAYED, HELD):
                if e.mode != "replace":
                    self.count["deduplicated"] += 1
                    return DEDUPLICATED, other.id
                self.supersede(other, now)
                status, ref = REPLACED, other.id
        job = JobM(
            e.id, e.group, e.prio, e.key, e.mode if e.mode in ("dedup", "replace") else "",
            e.max_attempts, now, payload=e.payload, origin=e.origin,
        )  # fmt: skip
        self.jobs[e.id] = job
        if delay > 0:
            job.state, job.due = DELAYED, now + delay
        else:
            self.make_ready(job, False, now)
        if e.key:
            self.keys[e.key] = e.id
        self.count["enqueued"] += 1
        return status, ref

    def supersede(self, other: JobM, now: int) -> None:
        if other.state == PENDING:
            self.leave_ready(other)
        other.cap = ""  # a held one leaves its holding area
        other.state, other.due, other.ended_at = SUPERSEDED, None, now
        self.count["superseded"] += 1

    # -- dequeue -----------------------------------------------------------------------

    def due_leases(self, now: int) -> list[JobM]:
        """The leases that ran out, in the order dequeue reclaims them (at most
        RECLAIM_MAX a call)."""
        return sorted(
            (j for j in self.in_state(ACTIVE) if (j.deadline or 0) <= now),
            key=lambda j: (j.deadline, j.id),
        )[:RECLAIM_MAX]

    def reclaim(self, now: int, limit: int | None = None) -> list[str]:
        """Leases that ran out come back (oldest deadline first), or end: cancelled
        when a cancel was asked, dead once their attempts are used up. ``limit``: how
        many the call reclaimed (its budget may leave the rest for the next)."""
        due = self.due_leases(now)[:limit]
        for job in due:
            if job.cancel:
                self.end(job, CANCELLED, now)
            elif job.attempts >= job.max_attempts:
                self.end(job, DEAD, now)
                self.count["dead_lettered"] += 1
                self.count["reclaimed"] += 1  # reclaimed, then dead-lettered
            else:
                self.drop_slot(job)
                self.make_ready(job, True, now)
                self.count["reclaimed"] += 1
        return [j.id for j in due]

    def due_delayed(self, now: int) -> list[JobM]:
        """The delayed jobs due, in the order dequeue promotes them."""
        return sorted(
            (j for j in self.in_state(DELAYED) if (j.due or 0) <= now),
            key=lambda j: (j.due, j.id),
        )

    def promote(self, now: int, jobs: list[JobM] | None = None) -> None:
        """Due delayed jobs (``jobs``, default all) become ready (a returning one at
        its group's head), or end expired when their expiry has passed."""
        for job in self.due_delayed(now) if jobs is None else jobs:
            if job.expires is not None and job.expires <= now:
                self.end(job, EXPIRED, now)
            else:
                self.drop_slot(job)
                self.make_ready(job, job.returning, now)

    def start(self, job: JobM, now: int, lease: int) -> None:
        """Job ``job`` is handed out: the doomed jobs before it in its group ended on
        the way (expired, or cancelled by their workflow's stop)."""
        order = self.order_of(job.group)
        for job_id in order.order():
            if job_id == job.id:
                break
            self.doom_reached(self.jobs[job_id], now)
        self.leave_ready(job)
        job.state, job.due = ACTIVE, None
        job.attempts += 1
        job.deliveries += 1
        job.deadline, job.token = now + lease, f"{job.deliveries}.{now}"
        job.slot = self.limited() and job.group != ""
        if job.key and job.mode != "keep" and self.keys.get(job.key) == job.id:
            del self.keys[job.key]
        self.flow.started(job.group, now)

    def doom_reached(self, job: JobM, now: int) -> None:
        """A doomed ready job that dequeue reached: it ends expired, or cancelled as
        its workflow's stop would end it (its link goes first: it reports nothing)."""
        state = self.doomed(job, now)
        if state is None:
            raise ModelError(f"{job.id} was ended on the way, but nothing dooms it")
        self.leave_ready(job)
        if state == CANCELLED and self.on_guard is not None:
            self.on_guard(job)
        self.end(job, state, now)

    # -- the holder's calls ------------------------------------------------------------

    def held(self, job_id: str, token: str) -> JobM | None:
        job = self.jobs.get(job_id)
        if job is None or job.state != ACTIVE or job.token != token:
            return None
        return job

    def refused(self, job_id: str) -> set[str]:
        """What a call with a stale lease may answer (it changes nothing)."""
        return {LEASE_LOST, NOT_FOUND}

    def send_back(self, job: JobM, delay: int, now: int) -> None:
        if delay > 0:
            job.state, job.due, job.deadline, job.token = DELAYED, now + delay, None, None
            job.returning = True  # it keeps its slot while it waits
        else:
            self.drop_slot(job)
            self.make_ready(job, True, now)

    def release(self, job: JobM, now: int) -> str:
        if job.cancel:
            self.end(job, CANCELLED, now)
            return CANCELLED
        self.end(job, COMPLETED, now)
        return OK

    def requeue(self, job: JobM, delay: int, dead: bool, now: int) -> str:
        if job.cancel:
            self.end(job, CANCELLED, now)
            return CANCELLED
        self.count["failed"] += 1
        if dead or job.attempts >= job.max_attempts:
            self.end(job, DEAD, now)
            self.count["dead_lettered"] += 1
            return DEAD
        self.send_back(job, delay, now)
        self.count["retried"] += 1
        return RETRYING

    def defer(self, job: JobM, delay: int, now: int) -> str:
        if job.cancel:
            self.end(job, CANCELLED, now)
            return CANCELLED
        job.attempts = max(job.attempts - 1, 0)
        self.send_back(job, delay, now)
        self.count["deferred"] += 1
        return OK

    def rate_limited(self, job: JobM, pause: int, scope: str, now: int) -> str:
        """RateLimited: the job goes back to its group's head without using an attempt,
        and its scope pauses; a job whose cancel was asked ends cancelled, as defer and
        requeue end it (docs/job-control.md: whatever its holder reports), and its
        scope pauses all the same (the upstream's answer holds)."""
        self.flow.pause(scope, job.group, now, pause)
        if job.cancel:
            self.end(job, CANCELLED, now)
            return CANCELLED
        job.attempts = max(job.attempts - 1, 0)
        self.send_back(job, 0, now)
        self.count["rate_limited"] += 1
        return OK

    def extend(self, job: JobM, lease: int, now: int) -> str:
        job.deadline = now + lease
        return CANCELLED if job.cancel else OK

    # -- by id -------------------------------------------------------------------------

    def replay(self, job: JobM, now: int) -> bool:
        """A dead letter goes back to its group's tail, its attempts reset."""
        if job.state != DEAD:
            return False
        job.attempts = 0
        self.make_ready(job, False, now)
        self.count["replayed"] += 1
        return True

    def purge(self, job: JobM) -> bool:
        if job.state != DEAD:
            return False
        job.state = PURGED
        self.count["purged"] += 1
        return True

    def cancel(self, job_id: str, now: int) -> set[str]:
        """What cancel answers (the states it may find a finished job in aside)."""
        job = self.jobs.get(job_id)
        if job is None or job.state == PURGED:
            return {NOT_FOUND}
        if job.state in (PENDING, DELAYED, HELD):
            if job.state == PENDING:
                self.leave_ready(job)
            job.cap = ""  # a held one leaves its holding area at once
            job.must_cancel = True
            self.end(job, CANCELLED, now)
            return {CANCELLED}
        if job.state == ACTIVE:
            job.cancel = job.must_cancel = True
            return {CANCELLING}
        if self.taken(job_id, now) is not True:
            return {FINISHED, NOT_FOUND}  # its record or tombstone goes lazily once lapsed
        return {FINISHED}
