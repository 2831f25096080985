"""The reference model of periodic schedules (docs/schedules.md), ``every`` timings:
ticks at ``anchor + k * every``, fired by a dequeue of their queue under a watermark,
with the catch-up and overlap policies, pause, resume, remove, trigger and upserts.
Plain Python, no IO."""

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
    fired: int = 0
    skipped: int = 0
    missed: int = 0

    def due(self) -> int | None:
        """When its next tick is due (None: paused)."""
        if self.paused:
            return None
        if self.wm < self.anchor:
            return self.anchor
        return self.anchor + ((self.wm - self.anchor) // self.every + 1) * self.every


def tick_id(name: str, tick: int, suffix: str = "") -> str:
    return f"sched:{name}@{tick}{suffix}"


class Schedules:
    """The schedules stored in one queue, and every tick fired anywhere (to check that
    a tick fires at most once, whatever queue it lives in)."""

    def __init__(self, unit: Ops, fired: set[tuple[str, int]]) -> None:
        self.unit = unit
        self.by_name: dict[str, SchedM] = {}
        self.fired = fired
        #: schedules moved away: name -> how often it had fired (it fires no more)
        self.retired: dict[str, int] = {}

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

    def fire_due(self, now: int, max_attempts: int) -> None:
        """What a dequeue of the queue does first: fire the due ticks."""
        due = sorted((d, s.name) for s in self.by_name.values() if (d := s.due()) is not None)
        for when, name in due:
            if when <= now:
                self._run(self.by_name[name], now, max_attempts)

    def _run(self, s: SchedM, now: int, max_attempts: int) -> None:
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
        ticks = [newest - i * s.every for i in range(take - 1, -1, -1)]
        for tick in ticks:
            current = self.unit.jobs.get(s.current)
            if s.overlap == "skip" and current is not None and current.state in LIVE:
                s.skipped += 1
                self.unit.count["ticks_skipped"] += 1
                continue
            if (s.name, tick) in self.fired:
                raise AssertionError(f"the model fired tick {s.name}@{tick} twice")
            self.fired.add((s.name, tick))
            self._enqueue(s, tick_id(s.name, tick), max_attempts, now)
        s.missed += n - len(ticks)
        self.unit.count["ticks_missed"] += n - len(ticks)
        s.wm = newest
