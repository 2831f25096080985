"""The report's cells: numbers, summaries and durations as RESULTS.md prints them, and
the small reads of results.json that every part of the report shares."""

from __future__ import annotations

import math
from typing import Any


def fmt_num(x: float | None, digits: int = 0) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if digits == 0:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def fmt_summary(s: dict[str, Any] | None, digits: int = 0) -> str:
    """'median (min–max)', or just the value for a single run."""
    if not s:
        return "–"
    if s.get("n", 1) == 1 or s["min"] == s["max"]:
        return fmt_num(s["median"], digits)
    return (
        f"{fmt_num(s['median'], digits)} ({fmt_num(s['min'], digits)}–{fmt_num(s['max'], digits)})"
    )


def fmt_ms(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"


def calib_rps(results: dict[str, Any], test: str, config: str) -> float | None:
    cal = results.get("calibration") or {}
    for row in cal.get("results", []):
        if row["test"] == test and row["config"] == config:
            return float(row["rps"])
    return None


def drain_cell(d: dict[str, Any] | None) -> str:
    if not d:
        return "–"
    cell = fmt_summary(d.get("rate"))
    if not d.get("complete", True):
        done = [r["done"] for r in d["runs"]]
        span = f"{min(done):,}" if min(done) == max(done) else f"{min(done):,}–{max(done):,}"
        cell += f" ⚠ partial: {span}/{d['runs'][0]['target']:,} done in the cap"
    return cell


def peer_rows(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every peer of the run, in order (a feature row's anchor too)."""
    return list(results["peers"].items())


def classic_rows(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The peers of the classic rows: all but the feature rows' anchors (celery-batches,
    DBOS), which have no enqueue, drain, latency or memory figures."""
    return [(n, p) for n, p in peer_rows(results) if p.get("classic", True)]


def main_version(p: dict[str, Any]) -> str:
    versions = p.get("versions") or {}
    main = [k for k in versions if k not in ("redis", "hiredis", "kombu")]
    return ", ".join(f"{k} {versions[k]}" for k in main) or "–"


def median_at(p: dict[str, Any] | None, *path: str) -> float | None:
    """The median at ``path`` in ``p`` (``p["drain_best"]["rate"]["median"]``), or None."""
    node: Any = p
    for part in path:
        node = (node or {}).get(part)
    return float(node["median"]) if isinstance(node, dict) and "median" in node else None


def run_time(run: dict[str, Any]) -> str:
    """A run's start, HH:MM:SS UTC, for the per-run details ('' for older results)."""
    started = run.get("started")
    return f" at {started[11:19]}" if isinstance(started, str) and len(started) >= 19 else ""
