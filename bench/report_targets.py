"""The targets table of RESULTS.md: durq's figures against its peers' in the same run,
each checked against its target (issue 19's ratios and floors)."""

from __future__ import annotations

import math
from typing import Any

import report_floor
from report_format import fmt_ms, fmt_num, median_at
from report_row_targets import row_targets
from report_work import work_rate

# results.json's "interleaved" rows (bench/run.py), as the targets' preamble names them
INTERLEAVED_ROWS = {
    "enqueue_single": "single enqueue",
    "latency": "latency",
    "work.io_redis": "the datastore-bound drains",
    "rows.startup": "the fresh worker starts",
    "rows.pool": "the process-pool rows",
    "rows.batch": "the batch rows",
    "rows.durable": "the durable-step rows",
}


def verdict(met: bool) -> str:
    """The targets table's last column."""
    return "✔ met" if met else "✘ missed"


def work_targets(durq: dict[str, Any], others: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Issue 19's targets for the real-work scenarios."""
    rows: list[tuple[str, str, str]] = []

    def peer_best(scenario: str) -> tuple[str, float] | None:
        best = [
            (p["display"], v)
            for p in others.values()
            for e in (p.get("work") or {}).get(scenario, [])
            if (v := work_rate(e))
        ]
        return max(best, key=lambda kv: kv[1]) if best else None

    mine = durq.get("work") or {}
    peer = peer_best("io_redis")
    for procs, factor in ((1, 1.6), (2, 2.5)):
        entries = [e for e in mine.get("io_redis", []) if e["procs"] == procs and work_rate(e)]
        if not entries or not peer:
            continue
        best = max(entries, key=lambda e: work_rate(e) or 0)
        r = (work_rate(best) or 0) / peer[1]
        all_text = "; ".join(
            f"{e['label']} {fmt_num(work_rate(e))}/s"
            + (f" = {e['ratio'] * 100:.0f}% of bare" if e.get("ratio") else "")
            for e in entries
        )
        rows.append(
            (
                f"datastore-bound, {procs} process{'es' if procs > 1 else ''}: "
                f"≥ {factor}× fastest peer, ≥ 60% of the bare-body rate",
                f"{all_text}; best = {r:.2f}× {peer[0]} {fmt_num(peer[1])}/s",
                verdict(r >= factor and (best.get("ratio") or 0) >= 0.6),
            )
        )
    for scenario, what in (("io_sleep", "I/O-bound"), ("cpu", "CPU-bound")):
        entries = [e for e in mine.get(scenario, []) if work_rate(e)]
        peer = peer_best(scenario)
        if not entries or not peer:
            continue
        text = "; ".join(f"{e['label']} {fmt_num(work_rate(e))}/s" for e in entries)
        worst = min(work_rate(e) or 0 for e in entries)
        rows.append(
            (
                f"{what}: durq first (both task styles)",
                f"{text}; fastest peer {peer[0]} {fmt_num(peer[1])}/s",
                verdict(worst > peer[1]),
            )
        )
    return rows


def targets_section(results: dict[str, Any]) -> list[str]:
    """The issue's targets, checked against this run's figures (ratios in one run)."""
    peers = results.get("peers", {})
    durq = peers.get("durq")
    if not durq or durq.get("skipped"):
        return []
    others = {k: p for k, p in peers.items() if k != "durq" and not p.get("skipped")}

    def fastest(*path: str) -> tuple[str, float] | None:
        best = [(p["display"], v) for p in others.values() if (v := median_at(p, *path))]
        return max(best, key=lambda kv: kv[1]) if best else None

    rows: list[tuple[str, str, str]] = []

    peer_drain = fastest("drain_best", "rate")
    # the configurations of one worker process, told by their command line
    one_proc = [
        (desc, v)
        for m in ("default", "best", *durq.get("drain_also", []))
        if "-p 1" in (desc := durq.get("modes", {}).get(m, ""))
        and (v := median_at(durq, f"drain_{m}", "rate"))
    ]
    two_proc = median_at(durq, "drain_best", "rate")
    if peer_drain and one_proc:
        desc, v = max(one_proc, key=lambda kv: kv[1])
        r = v / peer_drain[1]
        rows.append(
            (
                "drain ≥ 3× fastest peer, 1 process",
                f"{fmt_num(v)}/s ({desc}) = {r:.1f}× {peer_drain[0]}'s best "
                f"{fmt_num(peer_drain[1])}/s",
                verdict(r >= 3),
            )
        )
    if peer_drain and two_proc:
        r = two_proc / peer_drain[1]
        rows.append(
            (
                "drain ≥ 3× fastest peer, 2 processes",
                f"{fmt_num(two_proc)}/s = {r:.1f}× {peer_drain[0]}'s best",
                verdict(r >= 3),
            )
        )
    lp = min(
        ((p["display"], v) for p in others.values() if (v := median_at(p, "latency", "p50_ms"))),
        key=lambda kv: kv[1],
        default=None,
    )
    # the target holds for both task styles: the plain `def` task of every peer's latency
    # row, and durq's `async def` task measured in the same run (LATENCY_ALSO)
    styles = [("def", durq.get("latency"))]
    styles += [(k, v) for k, v in (durq.get("latency_also") or {}).items()]
    for style, lat in styles:
        p50, p99 = median_at(lat, "p50_ms"), median_at(lat, "p99_ms")
        if p50 is None or p99 is None:
            continue
        below = all(
            (median_at(p, "latency", "p50_ms") or math.inf) > p50
            and (median_at(p, "latency", "p99_ms") or math.inf) > p99
            for p in others.values()
        )
        rows.append(
            (
                f"pickup latency p50 ≤ 0.6 ms, p99 ≤ 1.0 ms, below every peer, `{style}` task "
                "(issue 19)",
                f"{fmt_ms(p50)} / {fmt_ms(p99)} ms"
                + (f"; lowest peer p50: {lp[0]} {fmt_ms(lp[1])} ms" if lp else "")
                + report_floor.target_context(results),
                verdict(p50 <= 0.6 and p99 <= 1.0 and below),
            )
        )
    mem = (durq.get("memory") or {}).get("bytes_per_job")
    if mem:
        rows.append(("≤ 200 bytes per queued job", f"{fmt_num(mem)} B", verdict(mem <= 200)))
    single = median_at(durq, "enqueue_single", "rate")
    peer_single = fastest("enqueue_single", "rate")
    if single and peer_single:
        rows.append(
            (
                "single enqueue ≥ 1.3× fastest peer (issue 19)",
                f"{fmt_num(single)}/s vs {peer_single[0]} {fmt_num(peer_single[1])}/s "
                f"({single / peer_single[1]:.2f}×)",
                verdict(single >= 1.3 * peer_single[1]),
            )
        )
    bulk = median_at(durq, "enqueue_bulk", "rate")
    if bulk:
        peer_bulk = fastest("enqueue_bulk", "rate")
        vs = f" ({bulk / peer_bulk[1]:.1f}× {peer_bulk[0]})" if peer_bulk else ""
        rows.append(
            ("bulk enqueue ≥ 100,000 jobs/s", f"{fmt_num(bulk)}/s{vs}", verdict(bulk >= 100_000))
        )
    rows += work_targets(durq, others)
    rows += row_targets(durq, others)
    if not rows:
        return []
    together = [
        INTERLEAVED_ROWS[r]
        for r in (results.get("interleaved") or {}).get("rows", [])
        if r in INTERLEAVED_ROWS
    ]
    listed = (
        ", ".join(together[:-1]) + (" and " if len(together) > 1 else "") + "".join(together[-1:])
    )
    how = f", {listed} round-robin across them: see Order above" if together else ""
    out = [
        "## Targets, from this run",
        "",
        "Computed by `bench/report.py` from the figures above (medians; peers measured in "
        f"the same run{how}). Commands per job and the depth test come from their own "
        "scripts (`bench/commands.py`, `bench/engine.py`).",
        "",
        "| Target | This run | |",
        "|---|---|---|",
    ]
    out += [f"| {t} | {v} | {m} |" for t, v, m in rows]
    return [*out, ""]
