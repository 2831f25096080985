"""QueueBatches: batch consumption (``durq.Batch``) on a durq queue, used from
asyncio code (a part of ``Queue``).

GENERATED from durq/_async/batches.py by scripts/unasync.py: edit that file.
A worker forms and settles the batches of a batch task itself; these methods do the same
for code that consumes a queue without one. All logic lives in ``durq.protocol.batches``.
"""

from __future__ import annotations

from collections.abc import Sequence

from durq._sync.driver import Driver
from durq.codec import PayloadCodec
from durq.keys import QueueKeys
from durq.models import BatchRecord, Job, Outcome, Settle
from durq.protocol import batches
from durq.protocol.lifecycle import Leased
from durq.protocol.status import outcomes as as_outcomes

__all__ = ["QueueBatches"]


class QueueBatches:
    """Batches of a queue: the part of ``Queue`` that takes and settles many jobs
    as one batch."""

    # set by Queue
    keys: QueueKeys
    codec: PayloadCodec
    lease: float
    result_ttl: float
    _driver: Driver

    def dequeue_batch(
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
        return self._driver.run(op)

    def settle(
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
        return as_outcomes(self._driver.run(op))

    def batches(self) -> list[BatchRecord]:
        """The queue's recent batches, newest first (the last 100 settled with a cause):
        their sizes and why each started."""
        return self._driver.run(batches.history(self.keys))
