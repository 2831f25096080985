"""The dashboard's settings, fixed when the app is created."""

from __future__ import annotations

from dataclasses import dataclass, field

from durq.errors import InvalidArgument
from durq.redaction import Redact

__all__ = ["LOOPBACK_HOSTS", "DashboardConfig"]

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
"""Host header values a loopback-only dashboard answers to (see ``allowed_hosts``)."""


@dataclass(frozen=True)
class DashboardConfig:
    """How one dashboard app behaves (see ``durq.dashboard.create_app``).

    Attributes:
        url: the Redis URL (resolved; shown only with its password redacted).
        namespace: the key namespace of the queues.
        token: when set, every request needs ``Authorization: Bearer <token>`` or basic
            auth with the token as password (any user name).
        read_only: no replay or purge: the buttons are not shown and POSTs are refused.
        allowed_hosts: Host header values accepted (None: any). A loopback dashboard
            without a token restricts them to loopback names, against DNS rebinding.
        show_payloads: show job payloads (off: only their size).
        sample_interval: seconds between samples of the charts' history.
        history: samples kept in memory per app (default: an hour at 5 s).
        max_queues: queues shown and sampled at most.
        refresh: seconds between live updates of the overview, queue and worker pages
            (0 turns them off).
        redact: what of task data is secret: payloads, failure reasons and progress
            are shown through it.
    """

    url: str
    namespace: str = "durq"
    token: str | None = None
    read_only: bool = False
    allowed_hosts: tuple[str, ...] | None = None
    show_payloads: bool = True
    sample_interval: float = 5.0
    history: int = 720
    max_queues: int = 200
    refresh: float = 5.0
    redact: Redact = field(default_factory=Redact)

    def __post_init__(self) -> None:
        if self.token is not None and len(self.token) < 8:
            raise InvalidArgument("the dashboard token must be at least 8 characters")
        if not self.sample_interval > 0:
            raise InvalidArgument("sample_interval must be > 0 seconds")
        if not 2 <= self.history <= 100_000:
            raise InvalidArgument("history must be in 2..100000 samples")
        if not 1 <= self.max_queues <= 10_000:
            raise InvalidArgument("max_queues must be in 1..10000")
        if self.refresh < 0:
            raise InvalidArgument("refresh must be >= 0 seconds")
        if not isinstance(self.redact, Redact):
            raise InvalidArgument("redact must be a durq.Redact")
