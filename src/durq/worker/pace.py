"""How often a worker's heartbeat comes: every ``heartbeat`` seconds while it has jobs
in hand, and stretched to ``IDLE_HEARTBEAT`` while it has none.

An idle worker's pumps and couriers block on wake markers until work is due, and the
dequeue script wakes one of them when a lease another consumer takes becomes the
queue's earliest (``lua/lib/core/idlers.lua``): what is left to do is saying that the
worker lives (the registry's beat, its TTL stretched to three of the stretched
intervals) and the upkeep's look (``worker.upkeep``). Both wait one ``heartbeat`` at a
time, on the local clock only, so a worker that takes jobs again beats at its usual
pace at once (docs/decisions/idle-upkeep.md).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

__all__ = ["IDLE_HEARTBEAT", "Pace"]

#: the longest time between two beats (and two looks) of an idle worker, in seconds;
#: its registry entry then lives 3 x as long after its last beat
IDLE_HEARTBEAT = 600.0


class Pace:
    """The time to the next beat, for a worker whose ``idle()`` says it has nothing in
    hand, beating every ``interval`` seconds when busy and every ``stretch`` when idle."""

    def __init__(
        self, interval: float, idle: Callable[[], bool], stretch: float = IDLE_HEARTBEAT
    ) -> None:
        self.interval = interval
        self.longest = max(interval, stretch)
        self.idle = idle
        self._soon = False

    def soon(self) -> None:
        """Cut the stretched wait under way at the next heartbeat (a consumer woke for
        nothing: its queue may want a look)."""
        self._soon = True

    def within(self) -> float:
        """The longest time to the next beat, decided at a beat: stretched while idle."""
        return self.longest if self.idle() else self.interval

    async def sleep(self, within: float, changed: Callable[[], bool] | None = None) -> None:
        """Wait one ``interval``, then more while the worker stays idle, nobody asked
        for ``soon`` and nothing ``changed()``, up to ``within`` seconds in all (rounded
        up to whole intervals)."""
        self._soon = False
        for _ in range(max(math.ceil(within / self.interval - 1e-9), 1)):
            await asyncio.sleep(self.interval)
            if self._soon or not self.idle() or (changed is not None and changed()):
                return
