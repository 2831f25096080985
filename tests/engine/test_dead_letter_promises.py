"""docs/guarantees.md on dead letters, through both front ends (the promise -> test
table is there): the dead-letter set is never trimmed unless ``dead_cap`` is set."""

from __future__ import annotations

from typing import Any


async def test_without_dead_cap_no_dead_letter_is_ever_trimmed(q: Any) -> None:
    n = 2_000
    await q.enqueue_many(range(n), max_attempts=1)
    while jobs := await q.dequeue_many(500):
        await q.requeue_many(jobs, reason="x")
    stats = await q.stats()
    assert (stats.dead, stats.dead_evicted) == (n, 0)
    listed = [d.id for offset in range(0, n, 500) for d in await q.dead_letters(500, offset)]
    assert len(set(listed)) == n
