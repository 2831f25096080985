"""The table of a job's durable steps, sleeps and waits that ``durq job show`` prints
(docs/durable.md)."""

from __future__ import annotations

import datetime

from rich.table import Table

from durq.cli.inert import plain
from durq.models import StoredStep

__all__ = ["steps_table"]


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def steps_table(job_id: str, steps: list[StoredStep]) -> Table:
    """A job's steps, sleeps and waits, oldest first: no values (a step's result or a
    signal's payload may hold what a terminal must not show)."""
    table = Table(title=plain(f"{len(steps)} durable steps of {job_id}"))
    for col in ("name", "kind", "state", "recorded", "took", "tries", "until", "signal"):
        table.add_column(col, overflow="fold")
    for s in steps:
        took = f"{s.seconds:.3f} s" if s.seconds is not None else "-"
        table.add_row(
            *map(plain, (
                s.name, s.kind, s.state, _when(s.at), took,
                str(s.tries) if s.tries is not None else "-",
                _when(s.until), s.signal or "-",
            ))
        )  # fmt: skip
    return table
