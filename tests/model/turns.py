"""The reference model of the groups' turns (docs/design.md, "Groups, fairness, ordering,
priorities"; lua/ops/dequeue.lua): the eligible groups are served in turn, each group
giving up to its weight per turn (1 by default; all that is asked when it is the only
eligible group, or in a batch of one group), so a group that may start a job is served
within a bounded number of calls, whatever the weights of the others.

Which eligible group a call serves first the documents leave open (the rotation's order
is the server's); the model checks what they promise, per unit:

- **weights**: in one call, before the first job of a group that was eligible when the
  call began, no other group hands out more jobs in a row than one turn of it gives
  (its weight): a second turn of it would have come after that group's;
- **turns**: a group eligible all along is passed over by at most as many calls as
  there are other groups (each call that hands out jobs moves the rotation on by at
  least one group; a top-up of a batch of one group is outside the rotation).

Both hold for a group whose next turn surely hands out a job: one whose first entry in
its ready keys (as the last check read them) is the job the model says it gives next.
A group whose list starts with ids that no longer start (cancelled while listed,
superseded, past their expiry) spends a turn on them, which no one sees: such a group is
not followed until its head is clean again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model.reference import Ops


def runs(groups: list[str]) -> list[tuple[str, int]]:
    """The groups of a call's jobs, in order, as (group, jobs in a row)."""
    out: list[tuple[str, int]] = []
    for group in groups:
        if out and out[-1][0] == group:
            out[-1] = (group, out[-1][1] + 1)
        else:
            out.append((group, 1))
    return out


@dataclass
class Turns:
    """Per unit: the groups followed (eligible with a clean head) and how many calls
    passed each over; the first ready id of each group as the last check read it."""

    passed: dict[str, dict[str, int]] = field(default_factory=dict)  # unit -> group -> n
    first: dict[str, dict[str, str | None]] = field(default_factory=dict)  # unit -> group -> id

    def _clean(self, unit: str, m: Ops, group: str, now: int) -> bool:
        head = m.head(group, now)
        return head is not None and self.first.get(unit, {}).get(group) == head

    def observe(self, unit: str, m: Ops, now: int, first: dict[str, str | None]) -> None:
        """After a step (``first``: each group's first ready id, read by the check): a
        group is followed while it is eligible and its head clean."""
        self.first[unit] = first
        eligible = m.eligible(now)
        passed = self.passed.setdefault(unit, {})
        for group in list(passed):
            if group not in eligible or not self._clean(unit, m, group, now):
                del passed[group]
        for group in eligible:
            if self._clean(unit, m, group, now):
                passed.setdefault(group, 0)

    def before_call(self, unit: str, m: Ops, now: int) -> list[str]:
        """At a call's start (its upkeep applied to the model): the groups still
        followed, in the rotation, whose next turn hands out a job."""
        passed = self.passed.setdefault(unit, {})
        eligible = m.eligible(now)
        for group in list(passed):
            if group not in eligible or not self._clean(unit, m, group, now):
                del passed[group]
        return list(passed)

    def after_call(self, unit: str, m: Ops, waiting: list[str], groups: list[str],
                   rotation: bool, sole: bool) -> list[str]:  # fmt: skip
        """A call handed out jobs of ``groups`` (in order); ``waiting``: the groups
        followed when it began; ``rotation``: it served the rotation (not a top-up);
        ``sole``: one group gives all that is asked (a batch of one group). Returns what
        broke the promises (empty: none)."""
        passed = self.passed.setdefault(unit, {})
        problems: list[str] = []
        if rotation and not sole:
            for group in waiting:
                before = groups.index(group) if group in groups else len(groups)
                for other, n in runs(groups[:before]):
                    weight = m.weight(other)
                    if n > 1:
                        m.count["turns of several jobs, another group waiting"] += 1
                    if n > weight:
                        problems.append(
                            f"group {other!r} (weight {weight}) handed out {n} jobs in a "
                            f"row while group {group!r} waited its turn: {groups}"
                        )
        others = max(len(m.groups) - 1, 1)
        for group in set(groups):
            passed.pop(group, None)  # served (followed again from the next check)
        if rotation and groups:
            for group in passed:
                passed[group] += 1
                m.count["groups passed over"] += 1
                if passed[group] > others:
                    problems.append(
                        f"group {group!r}, eligible all along, was passed over by "
                        f"{passed[group]} calls ({others} other groups)"
                    )
        return problems
