"""The flow-control tables that ``durq limits`` and ``durq stats`` print."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.table import Table

from durq.cli.inert import plain
from durq.limits import FlowInfo

__all__ = ["flow_tables"]


def _until(info: FlowInfo, at: float | None) -> str:
    return "-" if at is None else f"in {max(at - info.server_time, 0):.2f}s"


def flow_tables(infos: Sequence[FlowInfo], parked: int = 10) -> list[Table]:
    """The tables ``durq limits`` and ``durq stats`` print: each queue's limits and
    state, then the parked groups that start again first (none for no queue)."""
    if not infos:
        return []
    table = Table(title="flow control", box=box.SIMPLE_HEAD)
    table.add_column("queue", no_wrap=True)
    for col in ("rate", "group rate", "own rates", "max active", "active", "started/s",
                "paused", "parked", "waiting", "rate-limited"):  # fmt: skip
        table.add_column(col, justify="right", overflow="fold")
    for info in infos:
        table.add_row(
            *map(plain, (
                info.name,
                info.rate or "-",
                info.group_rate or "-",
                info.group_rates_total or "-",
                info.max_active or "-",
                info.active,
                info.started,
                _until(info, info.paused_until),
                info.parked,
                info.waiting,
                info.rate_limited,
            ))
        )  # fmt: skip
    tables = [table]
    rows = [(info, g) for info in infos for g in info.parked_groups][:parked]
    if rows:
        groups = Table(title="parked groups (first to start again)", box=box.SIMPLE_HEAD)
        for col in ("queue", "group", "starts again", "ready", "own rate"):
            groups.add_column(col, justify="left" if col in ("queue", "group") else "right")
        for info, g in rows:
            own = info.group_rates.get(g.name)
            groups.add_row(*map(plain, (info.name, g.name or "(ungrouped)", _until(info, g.until),
                                        g.ready, own or "-")))  # fmt: skip
        tables.append(groups)
    return tables
