"""What an autoscaler needs of a queue (``lua/ops/scaling.lua``; the worker's
``/scale.json``, docs/deployment.md, "Kubernetes")."""

from __future__ import annotations

from dataclasses import dataclass

from durq.keys import QueueKeys
from durq.protocol.calls import Op, script_call

__all__ = ["QueueLoad", "load"]


@dataclass(frozen=True)
class QueueLoad:
    """One queue's load: jobs ready, leased (running or fetched), held (waiting for a
    worker that runs their task), delayed and due (delayed, their time come), and the age
    in seconds of the oldest ready job (sampled from group heads; 0 when none is
    ready)."""

    ready: int
    leased: int
    held: int
    delayed: int
    due: int
    oldest_age: float


def load(keys: QueueKeys) -> Op[QueueLoad]:
    """The load of the queue at ``keys``."""
    reply = yield script_call("scaling", keys, ())
    ready, leased, held, delayed, due, oldest, now = (int(v) for v in reply)
    age = max(now - oldest, 0) / 1000 if oldest else 0.0
    return QueueLoad(ready, leased, held, delayed, due, age)
