"""Helpers of the flow-control tests (imported as ``flow.support``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flow.app import LEASE
from worker.support import Durq, DurqProcess

APP = "flow.app:app"


def start_workers(
    durq_cli: Durq, url: str, queue: str, n: int, *, concurrency: int = 10
) -> list[DurqProcess]:
    """``n`` worker processes of the flow test app on ``queue``."""
    argv = ["worker", APP, "-q", queue, "--url", url, "-c", str(concurrency)]
    argv += ["--lease", str(LEASE), "--grace", "1", "--heartbeat", "0.5"]
    return [durq_cli.start(*argv, url=url) for _ in range(n)]


def events(log: Path, event: str = "start") -> list[dict[str, Any]]:
    """The ``event`` lines of a task log, oldest first."""
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text().splitlines() if line]
    return [e for e in lines if e["event"] == event]


def busiest_window(times: Sequence[float], width: float) -> int:
    """The most starts in any half-open window [t, t + width) (a sliding window)."""
    ordered = sorted(times)
    most, lo = 0, 0
    for hi, t in enumerate(ordered):
        while ordered[lo] <= t - width:
            lo += 1
        most = max(most, hi - lo + 1)
    return most
