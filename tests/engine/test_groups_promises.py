"""The README's promise for a flooding tenant, through both front ends (the promise ->
test table is in docs/guarantees.md; bench/groups.py measures it with 1,000,000 jobs)."""

from __future__ import annotations

from typing import Any


async def test_a_small_tenants_jobs_come_out_within_the_first_20_behind_a_flood(q: Any) -> None:
    for start in range(0, 20_000, 5_000):
        await q.enqueue_many(range(start, start + 5_000), group="flood")
    await q.enqueue_many([f"s{i}" for i in range(10)], group="small")
    first = [await q.dequeue() for _ in range(20)]
    assert [j.payload for j in first if j.group == "small"] == [f"s{i}" for i in range(10)]
