"""The reference model of batch consumption (docs/batches.md, durq.Batch), in plain
Python, no IO: what one batch call of dequeue.lua may hand out, the slot a group's items
in a batch hold together, the batches in hand, and the turns of the groups.

- A batch call (``BatchCall``) hands out what a dequeue would, item by item, with the
  group slots counted per batch: under a group limit, a group's items in one call hold
  ONE of its slots (the first item carries it), so a group whose slot this call took
  stays eligible for the rest of the call. ``by_group`` takes every item from one group
  (as many as it gives); a top-up of a batch of one group takes from that group only,
  outside the rotation, and takes no slot (the batch holds one). The queue's rate and
  ``max_active`` count items (``FlowM.begin``), a group's rate too (``FlowM.started``
  per item).
- A batch in hand (``BatchM``) is the items one holder leased together; it ends with one
  settle of all of them (each item its own way, fenced by its own token), or its holder
  dies and its items come back once their leases run out.
- Groups are served in turn: ``model.turns`` follows them for every call, a batch of
  one group being one turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from durq import Job
from model.reference import JobM, Ops

#: dequeue.lua's batch modes (ARGV[4]): a batch, a batch of one group, a top-up
BATCH, BY_GROUP, TOP_UP = "b", "g", "t"


@dataclass
class BatchCall:
    """One batch call of dequeue.lua, as the model follows it item by item."""

    mode: str
    group: str | None = None  # a top-up's group
    slotted: set[str] = field(default_factory=set)  # groups whose slot this call took
    served: str | None = None  # BY_GROUP: the group of its first item

    def allowed(self, m: Ops, now: int) -> dict[str, str]:
        """Group -> the job it hands out next, for every group that may give this call
        one more item (its slot free, or taken by this call; its rates allow it)."""
        if self.mode == TOP_UP:
            assert self.group is not None
            head = m.head(self.group, now)
            ok = head is not None and m.flow.group_allows(self.group, now)
            return {self.group: head} if ok and head is not None else {}
        out = {}
        for group in m.groups:
            if self.served is not None and group != self.served:
                continue  # a batch of one group: its first item's group only
            head = m.head(group, now)
            slot = group in self.slotted or m.slot_free(group)
            if head and slot and m.flow.group_allows(group, now):
                out[group] = head
        return out

    def took(self, m: Ops, job: JobM) -> None:
        """``job`` was started (``Ops.start`` gave it a slot as a job's): only the first
        item of its group in a batch holds the slot; a top-up's items hold none."""
        if self.mode == BY_GROUP and self.served is None:
            self.served = job.group
        if not job.slot:
            return
        if self.mode == TOP_UP or job.group in self.slotted:
            job.slot = False
        else:
            self.slotted.add(job.group)


@dataclass
class BatchM:
    """A batch in hand: its unit, how it was formed, its items (as handed out)."""

    unit: str
    mode: str
    items: list[Job]
    group: str | None = None  # a batch of one group: its group ('' the default)

    def current(self, m: Ops) -> list[JobM]:
        """Its items whose lease it still holds."""
        held = (m.held(j.id, j.token) for j in self.items)
        return [mj for mj in held if mj is not None]

    def deadline(self, m: Ops) -> int | None:
        """When the last lease it holds runs out (None: it holds none)."""
        held = [mj.deadline for mj in self.current(m) if mj.deadline is not None]
        return max(held) if held else None
