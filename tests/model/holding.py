"""The holding area of one queue (docs/deployment.md, "Jobs wait for a worker that can
run them"; lua/lib/holding/held.lua), in the model: a job whose task, at its version,
the worker that fetched it does not run is held (no attempt counted, its group slot
freed) under a capability ``<task>`` or ``<task>@<version>``; a worker that publishes
a capability (with its heartbeat) learns which of its capabilities have held jobs, and
brings them back to the head of their groups; a held job holds its dedup key again
(unless another job took it since it was fetched); once a job was held for the grace and no
worker of the queue published its capability for as long, the next publish of any
worker dead-letters it (``unknown_task``). Written from those documents."""

from __future__ import annotations

from dataclasses import dataclass, field

from model.reference import ACTIVE, CANCELLED, DEAD, HELD, JobM, Ops

SWEEP_CAPS, SWEEP_JOBS = 20, 100  # per publish (caps.lua); the model never reaches them


@dataclass
class HoldingM:
    """The holding area of one unit."""

    unit: Ops
    grace: int  # ms
    seen: dict[str, int] = field(default_factory=dict)  # capability -> last published
    used: set[str] = field(default_factory=set)  # the capabilities jobs were ever held for

    def held(self, cap: str) -> list[JobM]:
        """The jobs held for ``cap``, in the order they come back (held first, then id)."""
        jobs = [j for j in self.unit.jobs.values() if j.state == HELD and j.cap == cap]
        return sorted(jobs, key=lambda j: (j.held_at, j.id))

    def caps_held(self) -> set[str]:
        return {j.cap for j in self.unit.jobs.values() if j.state == HELD}

    def hold(self, job: JobM, cap: str, now: int) -> str:
        """A worker that does not run ``cap`` hands back ``job`` (in its hand)."""
        m = self.unit
        if job.cancel:
            m.end(job, CANCELLED, now)
            return CANCELLED
        assert job.state == ACTIVE
        job.attempts = max(job.attempts - 1, 0)
        m.drop_slot(job)
        job.state, job.deadline, job.token = HELD, None, None
        job.cap, job.held_at = cap, now
        if job.key:  # it never started: its key again, unless another job took it
            m.keys.setdefault(job.key, job.id)
        self.used.add(cap)
        m.count["held"] += 1
        return "ok"

    def publish(self, caps: list[str], now: int) -> tuple[int, list[str]]:
        """A worker says it runs ``caps``: (how many held jobs the sweep dead-lettered,
        which of ``caps`` have held jobs)."""
        for cap in caps:
            self.seen[cap] = now
        waiting = [c for c in caps if c in self.caps_held()]
        dead = 0
        for cap in sorted(self.caps_held(), key=lambda c: (self.held(c)[0].held_at, c)):
            seen = self.seen.get(cap)
            if seen is not None and seen > now - self.grace:
                continue
            for job in self.held(cap):
                if job.held_at <= now - self.grace:
                    job.cap = ""
                    self.unit.end(job, DEAD, now)
                    self.unit.count["dead_lettered"] += 1
                    self.unit.count["unknown_task"] += 1
                    dead += 1
        return dead, waiting

    def unhold(self, caps: list[str], n: int, now: int) -> tuple[int, list[str]]:
        """A worker that runs ``caps`` brings up to ``n`` of their held jobs back, each
        to its group's head: (how many, which of ``caps`` may have more)."""
        back, more = 0, []
        self.unit.count["unhold calls"] += 1
        for cap in caps:
            if n - back <= 0:
                more.append(cap)
                continue
            jobs = self.held(cap)
            for job in jobs[: n - back]:
                job.cap = ""
                self.unit.make_ready(job, True, now)
                self.unit.count["unheld"] += 1
                back += 1
            if self.held(cap):
                more.append(cap)
        return back, more
