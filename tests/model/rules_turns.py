"""The driver's rules for weighted groups (a part of ``machine.DurqMachine``; the model
is ``model.turns``, checked in every dequeue call): a group's weight set, changed or
removed through ``Queue.configure(weights=...)`` (a sharded queue's on each shard), and
calls that find several groups ready (a dequeue of many, a batch), so that a turn of
more than one job shows. Checked after each call: a group gives at most its weight in a
row while another group waits its turn, and a group that may start is served within as
many calls as there are other groups; after them, each named group's gauges (ready,
slots held, limit, weight: ``Queue.groups``) are the model's."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from durq import Job
from durq.errors import InvalidArgument
from model import invariants
from model.reference import EnqueueM, Ops
from model.turns import Turns
from model.world import LEASE_S, World

TURN_UNITS = ("a", "b", "s~0", "s~1")
#: a weight drawn for a named group: ... unchanged, None removed (back to 1), 0 refused
WEIGHTS = (..., None, 0, 1, 2, 3)


class TurnRules:
    """Weighted groups; the attributes are the machine's."""

    world: World
    units: dict[str, Ops]
    serial: int
    turns: Turns

    @property
    def now(self) -> int:
        raise NotImplementedError

    def _dequeue(self, unit: str, n: int, lease: float) -> list[Job]:
        raise NotImplementedError

    def _form(self, unit: str, n: int, by_group: bool) -> list[Job]:
        raise NotImplementedError

    def _enqueue(self, unit: str, e: EnqueueM) -> None:
        raise NotImplementedError

    def new_id(self) -> str:
        raise NotImplementedError

    @rule(queue=st.sampled_from(("a", "b", "s")), g1=st.sampled_from(WEIGHTS),
          g2=st.sampled_from(WEIGHTS))  # fmt: skip
    def configure_weights(self, queue: str, g1: Any, g2: Any) -> None:
        """Jobs per turn of a named group set, changed or removed (the default group's
        weight is 1, and cannot be set)."""
        self._weigh(queue, {g: w for g, w in (("g1", g1), ("g2", g2)) if w is not ...})

    def _weigh(self, queue: str, weights: dict[str, int | None]) -> None:
        if not weights:
            return
        front = self.world.sharded if queue == "s" else self.world.fronts[queue]
        refused = 0 in weights.values()  # no turn at all: refused (the model found it)
        try:
            front.configure(weights=weights)
        except InvalidArgument:
            assert refused, f"weights {weights} refused"
            return
        assert not refused, f"weights {weights} accepted"
        for unit in ("s~0", "s~1") if queue == "s" else (queue,):
            m = self.units[unit]
            for group, weight in weights.items():
                if weight is None:
                    m.weights.pop(group, None)
                else:
                    m.weights[group] = weight
            m.count["weights configured"] += 1
            invariants.check_groups(self.world, unit, m)

    @rule(unit=st.sampled_from(TURN_UNITS), n=st.sampled_from((3, 4, 6)), batch=st.booleans(),
          weigh=st.sampled_from((None, "g1", "g2")), weight=st.sampled_from((2, 3)),
          ready=st.lists(st.sampled_from(("", "g1", "g1", "g2", "g2")), min_size=2,
                         max_size=6))  # fmt: skip
    def groups_share_a_call(self, unit: str, n: int, batch: bool, weigh: str | None,
                            weight: int, ready: list[str]) -> None:  # fmt: skip
        """Jobs of several groups ready (some enqueued now, a group's weight maybe set),
        then one call of ``n``: a dequeue, or a batch (durq.Batch: the turns are a
        dequeue's). Each group gives up to its weight per turn (model.turns checks the
        call)."""
        if weigh is not None:
            self._weigh(unit[0] if unit.startswith("s") else unit, {weigh: weight})
        for group in ready:
            self._enqueue(unit, EnqueueM(self.new_id(), {"n": self.serial}, group=group))
        m = self.units[unit]
        # the groups made eligible now are followed from this call on
        self.turns.observe(unit, m, self.now, invariants.read_heads(self.world, unit))
        if m.weights:
            m.count["calls under weights"] += 1
        if batch:
            self._form(unit, n, False)
        else:
            self._dequeue(unit, n, LEASE_S)
        invariants.check_groups(self.world, unit, m)

    groups_share_a_call_2 = groups_share_a_call
