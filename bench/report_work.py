"""The real-work scenarios in the report: their rows (one per peer and variant), the
limit each rate is set against, and RESULTS.md's "Jobs that do real work" tables."""

from __future__ import annotations

from typing import Any

from report_format import drain_cell, fmt_num, peer_rows

SCENARIOS = ("io_redis", "io_sleep", "cpu")
SCENARIO_TITLES = {
    "io_redis": "Datastore-bound: each job makes one Redis round trip",
    "io_sleep": "I/O-bound: each job waits 10 ms",
    "cpu": "CPU-bound: each job burns 2 ms of CPU in Python",
}
LIMIT_TEXT = {
    "io_redis": "the bare job body alone (`bench/bare.py`: no queue), with the same "
    "processes and jobs at a time, the same redis-py, on the same server",
    "io_sleep": "jobs at a time × 100/s (processes × slots each)",
    "cpu": "500/s per core the worker can use (one per process, at most the machine's)",
}


def work_rows(
    results: dict[str, Any], scenario: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(peer, entry) for every variant measured in ``scenario``, in peer order."""
    return [
        (p, e)
        for _, p in peer_rows(results)
        if not p.get("skipped")
        for e in (p.get("work") or {}).get(scenario, [])
    ]


def work_label(p: dict[str, Any], e: dict[str, Any]) -> str:
    return p["display"] if e["label"] == "best" else f"{p['display']} ({e['label']})"


def work_rate(e: dict[str, Any]) -> float | None:
    """A variant's median rate, or None if it has none."""
    r = e.get("rate")
    return float(r["median"]) if r else None


def work_section(results: dict[str, Any]) -> list[str]:
    """The "jobs that do real work" tables: rate and share of each variant's limit."""
    if not any(p.get("work") for p in results["peers"].values()):
        return []
    s = results["settings"]
    work_n = s.get("work_n", {})
    out = [
        "## Jobs that do real work",
        "",
        "The drains above run a no-op, so they measure the framework alone. Here the job "
        "body does work (`bench/work.py`; async frameworks run the async form, thread and "
        "process workers the blocking one; durq both, as `async def` and `def` tasks). Each "
        "peer runs with the configuration of a small sweep for that workload on 2 cores "
        "(`bench/run.py --tune --scenario S`); the limit each rate is compared with is "
        "given per table. Rates are medians over the runs (min–max)."
        + (
            " The datastore-bound drains and their bare-body runs were measured round-robin "
            "across the peers (see Order above); the other scenarios in each peer's section."
            if "work.io_redis" in (results.get("interleaved") or {}).get("rows", [])
            else ""
        ),
        "",
    ]
    for scenario in SCENARIOS:
        rows = work_rows(results, scenario)
        if not rows:
            continue
        out += [
            f"### {SCENARIO_TITLES[scenario]} ({work_n.get(scenario, 0):,} jobs)",
            "",
            f"Limit: {LIMIT_TEXT[scenario]}.",
            "",
            "| Peer | Worker (processes × jobs at a time) | Jobs/s | Limit (jobs/s) "
            "| Of the limit |",
            "|---|---|---|---|---|",
        ]
        for p, e in sorted(rows, key=lambda pe: -(work_rate(pe[1]) or 0)):
            ratio = e.get("ratio")
            out.append(
                f"| {work_label(p, e)} | {e['desc']} ({e['procs']} × {e['slots']}) | "
                f"{drain_cell(e)} | {fmt_num(e.get('limit'))} | "
                f"{'–' if ratio is None else f'{ratio * 100:.0f}%'} |"
            )
        out.append("")
    return out
