"""QueueDurable: the durable steps of a queue seen from outside a job (a part of
``Queue``): signals sent to it, the steps a job stored, the jobs parked now.

GENERATED from durq/_async/durable.py by scripts/unasync.py: edit that file.
Inside a job, the steps are ``durq.step``, ``durq.sleep``, ``durq.sleep_until`` and
``durq.wait_for`` (``durq.app.durable``); docs/durable.md. All logic lives in
``durq.protocol.durable``.
"""

from __future__ import annotations

from typing import Any

from durq._sync.driver import Driver
from durq._sync.retry import retrying
from durq.keys import QueueKeys
from durq.models import Parked, StoredStep
from durq.protocol import durable
from durq.protocol.args import new_ids

__all__ = ["QueueDurable"]


class QueueDurable:
    """Signals, stored steps and parked jobs of a queue: the part of ``Queue`` that
    durable steps add."""

    # set by Queue
    keys: QueueKeys
    enqueue_retry_for: float
    _driver: Driver

    def signal(
        self,
        name: str,
        payload: Any = None,
        *,
        ttl: float = durable.DEFAULT_SIGNAL_TTL,
        id: str | None = None,
    ) -> int:
        """Send signal ``name`` with ``payload`` (JSON data, at most 64 KiB) to this
        queue: every job of it waiting for ``name`` (``durq.wait_for``) gets the payload
        and is made ready now, and a wait reached within ``ttl`` seconds from now gets it
        at once. The newest signal of a name is the one kept. Sent again with the same
        ``id`` (a retry through connection errors, which this call makes itself) it
        changes nothing. Returns how many jobs it made ready (in a sharded queue: in the
        shard it entered by; the other shards get it through its outbox)."""
        body = durable.signal_payload(payload)
        ttl_ms = durable.signal_ttl_ms(ttl)
        signal_id = id or new_ids(1)[0]
        op = durable.signal
        others = durable.other_shards(self.keys)

        def attempt() -> tuple[int, float]:
            return self._driver.run(op(self.keys, name, signal_id, ttl_ms, body, others))

        return (retrying(attempt, self.enqueue_retry_for))[0]

    def steps(self, job_id: str) -> list[StoredStep]:
        """What job ``job_id`` stored: its steps, sleeps and waits, oldest first (empty
        when none, or once the job's record is gone)."""
        return self._driver.run(durable.stored_steps(self.keys, job_id))

    def parked(self) -> Parked:
        """How many of the queue's jobs sleep and wait for a signal now."""
        return self._driver.run(durable.parked(self.keys))
