"""Acknowledgements waiting to be sent: a job's outcome is buffered the moment it
finishes and sent with the next round trip of its queue (together with the next fetch),
never before the job finished."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from durq.keys import QueueKeys
from durq.models import Job
from durq.protocol import holding, lifecycle
from durq.protocol import limits as limit_ops
from durq.protocol.calls import Op
from durq.worker.executor import Outcome

__all__ = ["AckBuffer", "HoldOp"]

#: how a worker sends its held jobs (``worker.holding.Holding.hold``)
HoldOp = Callable[[QueueKeys, Sequence[tuple[Job, str]]], Op[Any]]


class AckBuffer:
    """Outcomes of one queue's finished jobs, in arrival order per kind."""

    def __init__(self) -> None:
        self.items: list[tuple[Job, Outcome]] = []
        # (id, token) of outcomes sent in a round trip whose reply was lost: that sending
        # may have been applied, so a refusal of the next one is no sign of a lost lease
        self.unsure: set[tuple[str, str]] = set()

    def __len__(self) -> int:
        return len(self.items)

    def add(self, job: Job, outcome: Outcome) -> None:
        """Buffer a finished job's outcome ("lost" and "parked" outcomes need no
        message: nothing to say, or said by the script that parked the job)."""
        if outcome.kind != "lost" and outcome.kind != "parked":
            self.items.append((job, outcome))

    def take(self, limit: int) -> list[tuple[Job, Outcome]]:
        """Remove and return up to ``limit`` outcomes."""
        taken, self.items = self.items[:limit], self.items[limit:]
        return taken

    def put_back(self, taken: Sequence[tuple[Job, Outcome]], *, unsure: bool = True) -> None:
        """Return outcomes whose round trip failed, to be sent again first. ``unsure``:
        no reply came, so that sending may have been applied (False: the server said it
        was not, e.g. refused for want of memory)."""
        self.items[:0] = taken
        if unsure:
            self.unsure.update((job.id, job.token) for job, _ in taken)

    def sent_again(self, job: Job) -> bool:
        """True when this sending of ``job``'s outcome repeats one whose reply was lost
        (that one may have been applied); forgets it either way, as the reply came."""
        key = (job.id, job.token)
        if key in self.unsure:
            self.unsure.discard(key)
            return True
        return False

    @staticmethod
    def ops(
        keys: QueueKeys,
        taken: Sequence[tuple[Job, Outcome]],
        result_ttl: float,
        hold: HoldOp | None = None,
    ) -> list[tuple[str, list[Job], Op[Any]]]:
        """The operations that send ``taken``: one per kind present. ``hold``: how held
        jobs are sent (``worker.holding``; None: dead-lettered at once)."""
        done = [(j, o) for j, o in taken if o.kind == "done"]
        failed: list[tuple[Job, Outcome]] = []
        deferred: list[tuple[Job, Outcome]] = []
        limited: list[tuple[Job, Outcome]] = []
        held: list[tuple[Job, Outcome]] = []
        if len(done) != len(taken):  # most round trips send successes only: one pass
            # a cancelled job is sent as failed: its record's cancel flag makes the
            # script end it cancelled, never retried (lib/control/job_control.lua)
            failed = [(j, o) for j, o in taken if o.kind in ("retry", "dead", "cancelled")]
            deferred = [(j, o) for j, o in taken if o.kind == "defer"]
            limited = [(j, o) for j, o in taken if o.kind == "limited"]
            held = [(j, o) for j, o in taken if o.kind == "hold"]
        out: list[tuple[str, list[Job], Op[Any]]] = []
        if done:
            results = [o.result for _, o in done]
            jobs = [j for j, _ in done]
            op = lifecycle.release(
                keys, jobs, results=results if any(results) else None, result_ttl=result_ttl
            )
            out.append(("release", jobs, op))
        if failed:
            items = [(j, o.delay, o.reason, o.kind == "dead") for j, o in failed]
            results = [o.result for _, o in failed]
            op = lifecycle.requeue(
                keys, items, results=results if any(results) else None, result_ttl=result_ttl
            )
            out.append(("requeue", [j for j, _ in failed], op))
        if deferred:
            out.append(
                (
                    "defer",
                    [j for j, _ in deferred],
                    lifecycle.defer(keys, [(j, o.delay) for j, o in deferred]),
                )
            )
        if limited:
            paused = [(j, o.delay, o.scope) for j, o in limited]
            out.append(
                ("rate_limited", [j for j, _ in limited], limit_ops.rate_limited(keys, paused))
            )
        if held:
            caps = [(j, o.cap) for j, o in held]
            op = hold(keys, caps) if hold is not None else holding.hold(keys, caps, 0, "")
            out.append(("hold", [j for j, _ in held], op))
        return out
