"""Durable steps in the reference model (issue 37): what a job's runs stored (step
results, by name, recorded once per lease token by the holder of the current lease),
the signals kept, and the jobs parked in a sleep or a wait. A parked job is delayed,
holds no group slot and no place under ``max_active``, and gave back the attempt its
delivery used; a signal makes every job waiting for it ready at the head of its group."""

from __future__ import annotations

from dataclasses import dataclass, field

from model.reference import CANCELLED, DEAD, DELAYED, LIVE, JobM, Ops

#: the due time of a wait without a timeout (lua/lib/durable/steps.lua)
FOREVER = 9007199254740991


@dataclass
class WaitM:
    signal: str
    deadline: int  # 0: none
    due: int  # where it is parked in the delayed set


@dataclass
class DurableM:
    """The durable state of one queue (its Ops ``unit``)."""

    unit: Ops
    # job id -> (the job, its steps by name): a job enqueued again under a used id (a new
    # JobM) starts with none, its first one's went with its record
    steps: dict[str, tuple[JobM, dict[str, int]]] = field(default_factory=dict)
    signals: dict[str, int] = field(default_factory=dict)  # kept: name -> payload
    waits: dict[str, WaitM] = field(default_factory=dict)  # parked waiters by job
    asleep: dict[str, int] = field(default_factory=dict)  # job -> its sleep's end
    #: the jobs the last signal woke, in the order the model put them at their heads
    #: (the server wakes them in any order: HRANDFIELD; the driver reads it)
    woken: list[JobM] = field(default_factory=list)

    def record(self, job: JobM, name: str, value: int) -> tuple[str, int | None]:
        """A step of held ``job`` completed: ``ok``, or ``kept`` with the first value."""
        owner, stored = self.steps.get(job.id, (job, {}))
        if owner is not job:
            owner, stored = job, {}
        self.steps[job.id] = (job, stored)
        if name in stored:
            return "kept", stored[name]
        stored[name] = value
        return "ok", None

    def _park(self, job: JobM, due: int, now: int) -> tuple[str, int | None]:
        """``parked`` (due then: an expiry before ``due`` makes it due then), or
        ``cancelled`` when a cancel was asked while it ran."""
        if job.cancel:
            self.unit.end(job, CANCELLED, now)
            return "cancelled", None
        if job.expires is not None and job.expires < due:
            due = job.expires
        job.attempts = max(job.attempts - 1, 0)
        self.unit.drop_slot(job)
        job.state, job.due, job.deadline, job.token = DELAYED, due, None, None
        job.returning = True
        return "parked", due

    def sleep(self, job: JobM, ms: int, now: int) -> tuple[str, int | None]:
        """Held ``job`` reached a new sleep of ``ms``."""
        if ms <= 0:
            return "done", None
        self.waits.pop(job.id, None)
        tag, due = self._park(job, now + ms, now)
        if tag == "parked":
            self.asleep[job.id] = now + ms
        return tag, due

    def wait(self, job: JobM, signal: str, timeout: int | None, now: int) -> str:
        """Held ``job`` reached a new wait for ``signal``."""
        if signal in self.signals:
            return "record"
        deadline = 0 if timeout is None else now + timeout
        tag, due = self._park(job, deadline or FOREVER, now)
        if tag == "parked" and due is not None:
            self.waits[job.id] = WaitM(signal, deadline, due)
            self.asleep.pop(job.id, None)
        return tag

    def signal(self, name: str, payload: int, now: int) -> int:
        """Signal ``name`` sent to this queue: kept, and its waiters woken (those whose
        deadline passed record a timeout and stay where they are)."""
        self.signals[name] = payload
        woken = 0
        self.woken = []
        for job_id, w in sorted(self.waits.items()):
            if w.signal != name:
                continue
            del self.waits[job_id]
            job = self.unit.jobs[job_id]
            if w.deadline and w.deadline <= now:
                continue
            if job.state == DELAYED and job.due == w.due:
                self.unit.make_ready(job, True, now)
                self.woken.append(job)
                woken += 1
        return woken

    def ended(self, job: JobM, state: str) -> None:
        """``job`` ended: it sleeps and waits no more; its steps go with its record (a
        dead letter keeps them, for a replay)."""
        self.waits.pop(job.id, None)
        self.asleep.pop(job.id, None)
        if state != DEAD:
            self.steps.pop(job.id, None)

    def parked(self, now: int) -> tuple[int, int]:
        """(asleep, waiting) as ``Queue.parked`` counts them: sleeps and waits whose end
        is still to come, of jobs that have not ended."""
        asleep = sum(1 for end in self.asleep.values() if end > now)
        waiting = sum(1 for w in self.waits.values() if w.due > now)
        return asleep, waiting

    def live_steps(self, job_id: str) -> dict[str, int] | None:
        """The steps a live or dead job keeps (None: not such a job)."""
        job = self.unit.jobs.get(job_id)
        if job is None or job.state not in (*LIVE, DEAD):
            return None
        owner, stored = self.steps.get(job_id, (job, {}))
        return stored if owner is job else {}
