"""``durq workers``: the children of the workers' process pools, as their heartbeats
list them (docs/process-pool.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich import box
from rich.table import Table

from durq.cli.inert import plain

__all__ = ["children_table"]


def _mb(value: Any) -> str:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return f"{value / 1048576:.0f} MB" if ok else ""


def children_table(entries: Iterable[dict[str, Any]]) -> Table:
    """One row per child of each worker's process pool (none for thread workers); a
    heartbeat is whatever was written to Redis: shown as text, never trusted."""
    table = Table(title="process pool children", box=box.SIMPLE_HEAD)
    for col in ("worker", "pid", "state", "job", "task"):
        table.add_column(col, no_wrap=col in ("worker", "job"), overflow="fold")
    for col in ("jobs run", "memory", "age"):
        table.add_column(col, justify="right")
    for w in entries:
        children = w.get("children")
        for c in children if isinstance(children, list) else ():
            if not isinstance(c, dict):
                continue
            age = c.get("age")
            shown_age = f"{age:g} s" if isinstance(age, int | float) else ""
            row = (
                w.get("id"), c.get("pid"), c.get("state"), c.get("job") or "", c.get("task") or "",
                c.get("jobs"), _mb(c.get("rss")), shown_age,
            )  # fmt: skip
            table.add_row(*map(plain, row))
    return table
