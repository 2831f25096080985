"""An interleaved row's shape (``Phase``): what each framework runs in its turn of a
round and how its runs are stored; shared by ``interleaved.py`` (the classic rows and
the order of the rounds) and ``rows.py`` (the feature rows)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_run import PeerRun

Measure = Callable[[], tuple[dict[str, Any], str]]


@dataclasses.dataclass
class Phase:
    """One interleaved row (or group of rows): what a peer runs in its turn of a round
    (labelled calls, each giving a run and its log text), and how its runs are stored."""

    name: str
    rows: tuple[str, ...]  # the keys of results.json it fills
    turn: Callable[[PeerRun], list[tuple[str, Measure]]]
    store: Callable[[PeerRun, dict[str, list[dict[str, Any]]]], None]
    # a participant that is no framework, taking its turn in the rotated order under
    # the name FLOOR: its labelled calls, as ``turn``'s (the latency rows' floor)
    floor: list[tuple[str, Measure]] | None = None
    # the frameworks that take part (default: those of the classic rows); only they are
    # in its rounds' orders
    takes: Callable[[PeerRun], bool] = lambda pr: pr.meta.classic
    # store every participant's results, even one with nothing run (a feature row's
    # variants that durq declares but cannot run yet are recorded as skipped)
    store_all: bool = False


def call(pr: PeerRun, cmd: str, timeout: float, **kwargs: Any) -> Any:
    """A driver command of ``pr``'s, with its deadline."""
    assert pr.driver is not None
    return pr.driver.call(cmd, timeout, **kwargs)
