"""RESULTS.md's lines for the pickup floor (results.json's ``latency_floor``, measured
by ``bench/floor.py`` in the latency rounds): the Results table's rows, the context of
the pickup targets and the per-run details. Results without a floor (runs before it
was measured) give no lines. Standard library only, as bench/report.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

#: receiver styles in the order shown (bench/floor.py STYLES)
STYLES = ("blocking", "asyncio")
LABEL = "floor: redis-py LPUSH → BRPOP, no queue"


def _styles(results: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    floor = results.get("latency_floor") or {}
    for style in STYLES:
        if entry := floor.get(style):
            yield style, entry


def _median(entry: dict[str, Any], key: str) -> float | None:
    value = (entry.get(key) or {}).get("median")
    return float(value) if value is not None else None


def _version(desc: str) -> str:
    """'redis-py 8.1.0' from a floor run's description."""
    return " ".join(desc.split()[:2]) if desc.startswith("redis-py ") else ""


def table_rows(results: dict[str, Any], fmt_ms: Callable[[float | None], str]) -> list[str]:
    """The Results table's rows (8 columns), one per receiver style: latency only."""
    rows = []
    for style, e in _styles(results):
        cell = " / ".join(fmt_ms(_median(e, k)) for k in ("p50_ms", "p99_ms", "max_ms"))
        rows.append(f"| {LABEL} ({style}) | {_version(e.get('desc', ''))} | | | | | {cell} | |")
    return rows


def table_note(results: dict[str, Any]) -> str:
    """What the floor rows are, for the note under the Results table ('' without)."""
    if not any(_styles(results)):
        return ""
    return (
        " The floor rows are no framework: the harness LPUSHes `time.time()` and a redis-py "
        "client in another process, blocked on `BRPOP` (blocking, or asyncio), stamps its "
        "return (`bench/floor.py`; Huey's shape, without a queue's code), with the same "
        "jobs and interval, in the same latency rounds as the frameworks: the two wake-ups "
        "and round trips any Redis queue pays before its own code runs."
    )


def target_context(results: dict[str, Any]) -> str:
    """'; floor in the same rounds: ...' for the pickup targets' rows ('' without)."""
    parts = [
        f"{style} {p50:.2f} / {p99:.2f}"
        for style, e in _styles(results)
        if (p50 := _median(e, "p50_ms")) is not None and (p99 := _median(e, "p99_ms")) is not None
    ]
    return f"; floor in the same rounds (p50 / p99): {', '.join(parts)} ms" if parts else ""


def details(results: dict[str, Any], run_time: Callable[[dict[str, Any]], str]) -> list[str]:
    """A subsection of the details: each style's runs, with their start and place."""
    styles = list(_styles(results))
    errors = (results.get("latency_floor") or {}).get("errors") or []
    if not styles and not errors:
        return []
    out = ["### The pickup floor (redis-py LPUSH → BRPOP, no queue)", ""]
    for style, e in styles:
        runs = "; ".join(
            f"{r['p50_ms']:.2f} / {r['p99_ms']:.2f} / {r['max_ms']:.2f}{run_time(r)}"
            + (f" (place {r['position']})" if r.get("position") else "")
            for r in e["runs"]
        )
        out.append(f"- {style} receiver ({e.get('desc', '')}), p50 / p99 / max ms: {runs}")
    out += [f"- ⚠ {err}" for err in errors]
    return [*out, ""]


def loads(results: dict[str, Any]) -> list[float]:
    """The load averages sampled after the floor's runs."""
    return [
        float(r["loadavg"])
        for _, e in _styles(results)
        for r in e.get("runs", [])
        if r.get("loadavg") is not None
    ]
