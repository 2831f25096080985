"""Durability modes: an enqueue that returns only once its write has more copies.

By default an enqueue returns when the Redis primary has applied it. With a Durability,
the enqueue script and WAIT (and, where the server has it, WAITAOF) go in one pipeline
on one connection, so the enqueue returns after the write reached ``replicas`` replicas
and, with ``fsync``, the local append-only file (and the replicas' when ``replicas`` is
set). If fewer copies confirm within ``timeout``, ``NotDurable`` is raised: the job *was*
enqueued on the primary, and retrying with the same id is safe.

Replication in Redis is asynchronous: WAIT shrinks the window in which a failover loses
acknowledged writes, it does not close it (see docs/guarantees.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from durq.errors import InvalidArgument, NotDurable

__all__ = ["Durability"]


@dataclass(frozen=True)
class Durability:
    """How many copies a write needs before an enqueue returns.

    Attributes:
        replicas: replicas that must have received the write (WAIT).
        fsync: the write must be in the local append-only file on disk (and in the
            replicas' with ``replicas`` > 0) (WAITAOF; Redis 7.2+ and Valkey; needs
            ``appendonly yes``).
        timeout: seconds to wait for the copies before raising NotDurable.
    """

    replicas: int = 0
    fsync: bool = False
    timeout: float = 1.0

    def __post_init__(self) -> None:
        if self.replicas < 0 or not 0 < self.timeout <= 60:
            raise InvalidArgument("durability needs replicas >= 0 and 0 < timeout <= 60 s")

    @property
    def active(self) -> bool:
        """True when anything is waited for."""
        return self.replicas > 0 or self.fsync

    def command(self) -> tuple[str | int, ...]:
        """The WAIT or WAITAOF command that confirms this connection's writes."""
        ms = max(int(self.timeout * 1000), 1)
        if self.fsync:
            return ("WAITAOF", 1, self.replicas, ms)
        return ("WAIT", self.replicas, ms)

    def check(self, reply: object) -> None:
        """Raise NotDurable unless ``reply`` (from ``command()``) confirms enough."""
        if isinstance(reply, Exception):
            text = str(reply)
            if "unknown command" in text.lower() and self.fsync:
                raise NotDurable(
                    "this server has no WAITAOF (Redis 7.2+ or Valkey needed); use "
                    "appendfsync always, or durability without fsync"
                ) from None
            raise NotDurable(f"could not confirm the write's copies: {text}") from None
        if self.fsync:
            local, replicas = reply if isinstance(reply, (list, tuple)) else (0, 0)
            if int(local) < 1:
                raise NotDurable(
                    "the write is not on disk yet (is appendonly yes set on the server?)"
                )
            if int(replicas) < self.replicas:
                raise NotDurable(
                    f"only {replicas} of {self.replicas} replicas wrote it to disk in time"
                )
        elif int(reply) < self.replicas:  # type: ignore[call-overload]
            raise NotDurable(f"only {reply} of {self.replicas} replicas acknowledged in time")
