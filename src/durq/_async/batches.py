"""AsyncQueueBatches: batch consumption (``durq.Batch``) on a durq queue, used from
asyncio code (a part of ``AsyncQueue``).

This file is the source of truth; ``durq/_sync/batches.py`` (``QueueBatches``) is generated
from it by ``scripts/unasync.py`` (CI fails when they drift).
A worker forms and settles the batches of a batch task itself; these methods do the same
for code that consumes a queue without one. All logic lives in ``durq.protocol.batches``.
"""

from __future__ import annotations

from collections.abc import Sequence

from durq._async.driver import AsyncDriver
from durq.codec import PayloadCodec
from durq.keys import QueueKeys
from durq.models import BatchRecord, Job, Outcome, Settle
from durq.protocol import batches
from durq.protocol.lifecycle import Leased
from durq.protocol.status import outcomes as as_outcomes

__all__ = ["AsyncQueueBatches"]


class AsyncQueueBatches:
    """Batches of a queue: the part of ``AsyncQueue`` that takes and settles many jobs
    as one batch."""

    # set by AsyncQueue
    keys: QueueKeys
    codec: PayloadCodec
    lease: float
    result_ttl: float
    _driver: AsyncDriver

    async def dequeue_batch(
        self,
        max_size: int,
        *,
        max_wait: float = 0.0,
        by_group: bool = False,
        lease: float | None = None,
        wait: float | None = None,
    ) -> list[Job]:
        """Take a batch: up to ``max_size`` ready jobs (1..1000), leased together (each
        with its own token). Under a group limit, a group's jobs in the batch hold one of
        its slots together, not one each; under a rate limit the batch is cut to what
        the limit allows now. ``by_group``: every job of one group, the groups served in
        turn. ``max_wait``: a batch that has fewer than ``max_size`` waits up to that
        many seconds from its first job for more (blocking, no polling). ``wait``: block
        up to that long for the first job. Settle it with ``settle``."""
        op = batches.dequeue_batch(
            self.keys,
            self.codec,
            max_size,
            max_wait,
            self.lease if lease is None else lease,
            by_group=by_group,
            wait=wait,
        )
        return await self._driver.run(op)

    async def settle(
        self,
        jobs: Sequence[Leased],
        outcomes: Sequence[Settle] | None = None,
        *,
        cause: str = "",
    ) -> list[Outcome]:
        """End the jobs of a batch in one call, each as its ``durq.Settle`` says (None:
        all done), each fenced by its own lease token: an outcome per job (OK, RETRYING,
        DEAD, CANCELLED, LEASE_LOST, NOT_FOUND, CORRUPT; a refused job changes nothing
        and the others are settled). ``cause`` ('size' or 'wait') records the batch in
        the queue's history (``batches``)."""
        chosen = outcomes if outcomes is not None else [Settle.done()] * len(jobs)
        op = batches.settle(
            self.keys, batches.settle_rows(jobs, chosen), result_ttl=self.result_ttl, cause=cause
        )
        return as_outcomes(await self._driver.run(op))

    async def batches(self) -> list[BatchRecord]:
        """The queue's recent batches, newest first (the last 100 settled with a cause):
        their sizes and why each started."""
        return await self._driver.run(batches.history(self.keys))
