"""The reference model of periodic schedules (docs/schedules.md), ``every`` timings:
ticks at ``anchor + k * every``, fired by a dequeue of their queue under a watermark,
with the catch-up and overlap policies, pause, resume, remove, trigger and upserts.
Plain Python, no IO.

A catch-up is decided at once and fired over calls (lib/schedules_due.lua): when a
schedule is found due, its policy decides which of its due ticks fire (the others are
missed), the watermark moves to just before the first of them and ``cu`` keeps the
newest; they then fire oldest first, as many per dequeue as its budget of server time
allows. How far one call got is the server's to say (its budget is processor time):
the driver reads it and the model follows (``decide``, ``fire_upto``); which ticks fire,
skip or are missed is the model's.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.reference import LIVE, EnqueueM, Ops


@dataclass
class SchedM:
    name: str
    every: int
    anchor: int
    wm: int
    catch: str = "latest"
    cap: int = 100
    grace: int = 0
    overlap: str = "allow"
    paused: bool = False
    declared_enabled: bool = True
    current: str = ""
    cu: int = 0  # the newest tick of a catch-up under way: the ticks in (wm, cu] fire
    fired: int = 0
    skipped: int = 0
    missed: int = 0

    def due(self) -> int | None:
        """When its next tick is due (None: paused); a catch-up under way is due."""
        if self.paused:
            return None
        return self.after(self.wm)

    def after(self, t: int) -> int:
        """Its first tick after ``t``."""
        if t < self.anchor:
            return self.anchor
        return self.anchor + ((t - self.anchor) // self.every + 1) * self.every


def tick_id(name: str, tick: int, suffix: str = "") -> str:
    return f"sched:{name}@{tick}{suffix}"


class Schedules:
    """The schedules stored in one queue, and every tick fired anywhere (to check that
    a tick fires at most once, whatever queue it lives in)."""

    def __init__(self, unit: Ops, fired: set[tuple[str, int]]) -> None:
        self.unit = unit
        self.by_name: dict[str, SchedM] = {}
        self.fired = fired

    def upsert(self, spec: SchedM, now: int) -> str:
        """Create or change schedule ``spec.name`` (docs: "Upserting"): the watermark
        stays; a change of timing applies from the next tick after the change; a
        runtime pause survives unless the declared ``enabled`` flag changed."""
        old = self.by_name.get(spec.name)
        if old is None:
            spec.wm = max(now, spec.wm)
            spec.anchor = now
            spec.paused = not spec.declared_enabled
            self.by_name[spec.name] = spec
            return "created"
        paused = old.paused
        if old.declared_enabled != spec.declared_enabled:
            paused = not spec.declared_enabled
            if spec.declared_enabled:
                old.wm = max(old.wm, now)
        timing = old.every != spec.every
        if timing:
            old.every, old.anchor, old.wm = spec.every, now, max(now, old.wm)
        changed = (old.catch, old.cap, old.overlap) != (spec.catch, spec.cap, spec.overlap)
        old.catch, old.cap, old.grace, old.overlap = spec.catch, spec.cap, spec.grace, spec.overlap
        updated = changed or old.declared_enabled != spec.declared_enabled
        old.paused, old.declared_enabled = paused, spec.declared_enabled
        return "changed" if timing else ("updated" if updated else "unchanged")

    def pause(self, name: str) -> None:
        self.by_name[name].paused = True

    def resume(self, name: str, now: int) -> None:
        s = self.by_name[name]
        s.paused = False
        s.wm = max(s.wm, now)

    def remove(self, name: str) -> None:
        del self.by_name[name]

    def trigger(self, name: str, now: int, max_attempts: int) -> str:
        s = self.by_name[name]
        job_id = tick_id(name, now, ":run")
        self._enqueue(s, job_id, max_attempts, now)  # twice in one ms: one job
        return job_id

    def _enqueue(self, s: SchedM, job_id: str, max_attempts: int, now: int) -> None:
        self.unit.enqueue(EnqueueM(job_id, max_attempts=max_attempts, origin="tick"), now)
        s.current = job_id
        s.fired += 1
        self.unit.count["ticks_fired"] += 1

    def due_now(self, now: int) -> list[str]:
        """The schedules due at ``now``, in the order dequeue looks at them (their next
        tick, then their name)."""
        due = sorted((d, s.name) for s in self.by_name.values() if (d := s.due()) is not None)
        return [name for when, name in due if when <= now]

    def decide(self, s: SchedM, now: int) -> None:
        """Schedule ``s`` is due with no catch-up under way: its policy decides which of
        its due ticks fire; the others are missed (sch_decide)."""
        k_now = (now - s.anchor) // s.every
        k_wm = (s.wm - s.anchor) // s.every if s.wm >= s.anchor else -1
        n = k_now - k_wm
        if n <= 0:
            return
        newest = s.anchor + k_now * s.every
        if s.catch == "all":
            take = min(n, max(s.cap, 1))
        elif s.catch == "none" and now - newest > s.grace:
            take = 0
        else:
            take = 1
        s.missed += n - take
        self.unit.count["ticks_missed"] += n - take
        if take:
            s.wm, s.cu = newest - take * s.every, newest  # (ticks are whole ms)
        else:
            s.wm = newest

    def fire_upto(self, s: SchedM, wm: int, now: int, max_attempts: int) -> None:
        """Fire (or skip, under overlap "skip") the decided ticks of ``s`` up to ``wm``,
        oldest first (sch_catch_up)."""
        if not s.wm <= wm <= max(s.cu, s.wm):
            raise AssertionError(
                f"schedule {s.name}: the watermark moved to {wm}, outside its catch-up "
                f"({s.wm}, {s.cu}]"
            )
        while s.wm < wm:
            tick = s.after(s.wm)
            current = self.unit.jobs.get(s.current)
            if s.overlap == "skip" and current is not None and current.state in LIVE:
                s.skipped += 1
                self.unit.count["ticks_skipped"] += 1
            else:
                if (s.name, tick) in self.fired:
                    raise AssertionError(f"the model fired tick {s.name}@{tick} twice")
                self.fired.add((s.name, tick))
                self._enqueue(s, tick_id(s.name, tick), max_attempts, now)
            s.wm = tick
