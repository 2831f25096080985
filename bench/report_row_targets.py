"""The feature rows' targets in RESULTS.md's targets table (issues 33, 36, 37): durq's
variants against their anchors in the same run. A target whose durq variant was not
measured (its feature has not landed: the variant is declared with ``skip``) says so and
has no verdict; one with nothing to compare against is left out."""

from __future__ import annotations

from typing import Any

from report_format import fmt_num
from report_rows import DURABLE_STEPS, median

Row = tuple[str, str, str]
PENDING = "– not measured"
REPORTED = "reported"


def verdict(met: bool) -> str:
    return "✔ met" if met else "✘ missed"


def variants(p: dict[str, Any] | None, row: str, part: str) -> list[dict[str, Any]]:
    return [e for e in ((p or {}).get("rows") or {}).get(row, []) if e["part"] == part]


def first(p: dict[str, Any] | None, row: str, part: str, label: str = "") -> dict[str, Any] | None:
    """The first variant of ``part`` whose label contains ``label``."""
    return next((e for e in variants(p, row, part) if label in e["label"]), None)


def pending(e: dict[str, Any] | None) -> str | None:
    """Why durq's variant has no figure ("" when it has one, None when it has none)."""
    if e is None:
        return None
    return str(e.get("skip", ""))


def anchor_rate(others: dict[str, Any], row: str, part: str) -> tuple[str, float] | None:
    """The fastest peer's measured rate for ``part`` of ``row``."""
    best = [
        (p["display"], v)
        for p in others.values()
        for e in variants(p, row, part)
        if (v := median(e.get("rate")))
    ]
    return max(best, key=lambda kv: kv[1]) if best else None


def startup_targets(durq: dict[str, Any], others: dict[str, Any]) -> list[Row]:
    """Issue 33 point 6: ≤ 0.25 s for `durq worker`, ≤ 0.35 s for `-p 2`."""
    rows: list[Row] = []
    peers = [
        (p["display"], e["label"], v)
        for p in others.values()
        for e in variants(p, "startup", "start")
        if (v := median(e.get("startup_s")))
    ]
    fastest = min(peers, key=lambda x: x[2], default=None)
    context = f"; fastest peer: {fastest[0]} ({fastest[1]}) {fastest[2]:.2f} s" if fastest else ""
    rows += overall_target(durq, others)
    for label, limit in (("`durq worker`", 0.25), ("`durq worker -p 2`", 0.35)):
        e = first(durq, "startup", "start", label)
        v = median((e or {}).get("startup_s"))
        if v is not None:
            rows.append(
                (
                    f"startup of {label} ≤ {limit} s to the first job (issue 33)",
                    f"{v:.2f} s{context}",
                    verdict(v <= limit),
                )
            )
    return rows


def overall_target(durq: dict[str, Any], others: dict[str, Any]) -> list[Row]:
    """The datastore-bound drain overall, start-up included, against the fastest peer's
    (issue 33 found start-up a third of durq's total): reported."""

    def overall(p: dict[str, Any]) -> list[tuple[str, float]]:
        return [
            (e["label"], v)
            for e in (p.get("work") or {}).get("io_redis", [])
            if (v := median(e.get("overall")))
        ]

    peers = [(p["display"], v) for p in others.values() for _, v in overall(p)]
    mine = overall(durq)
    if not peers or not mine:
        return []
    who, theirs = max(peers, key=lambda kv: kv[1])
    text = "; ".join(f"{label} {fmt_num(v)}/s = {v / theirs:.2f}×" for label, v in mine)
    return [
        (
            "datastore-bound drain overall, start-up included, against the fastest peer's",
            f"{text} {who} {fmt_num(theirs)}/s",
            REPORTED,
        )
    ]


def pool_targets(durq: dict[str, Any], others: dict[str, Any]) -> list[Row]:
    """Issue 33: the process pool at least as fast as Celery's prefork (CPU-bound and
    datastore-bound `def`), its pickup below Celery's; its no-op overhead reported."""
    rows: list[Row] = []
    for part, what in (("cpu", "CPU-bound"), ("io_redis", "datastore-bound `def`")):
        e = first(durq, "pool", part, "--pool process")
        peer = anchor_rate(others, "pool", part)
        if e is None or peer is None:
            continue
        name = f"process pool ≥ Celery prefork, {what} (issue 33)"
        if why := pending(e):
            rows.append(
                (name, f"durq skipped ({why}); Celery prefork {fmt_num(peer[1])}/s", PENDING)
            )
            continue
        v = median(e.get("rate")) or 0.0
        rows.append((name, f"{fmt_num(v)}/s = {v / peer[1]:.2f}× {peer[0]}", verdict(v >= peer[1])))
    e = first(durq, "pool", "latency", "--pool process")
    peer_lat = [(p["display"], x) for p in others.values() if (x := first(p, "pool", "latency"))]
    if e is not None and peer_lat:
        name_p, x = peer_lat[0]
        theirs = (median(x.get("p50_ms")), median(x.get("p99_ms")))
        text = f"{name_p} prefork p50 / p99 {fmt_num(theirs[0], 2)} / {fmt_num(theirs[1], 2)} ms"
        name = "process-pool pickup latency below Celery prefork's (issue 33)"
        if why := pending(e):
            rows.append((name, f"durq skipped ({why}); {text}", PENDING))
        else:
            mine = (median(e.get("p50_ms")), median(e.get("p99_ms")))
            below = all(
                m is not None and t is not None and m < t for m, t in zip(mine, theirs, strict=True)
            )
            got = f"{fmt_num(mine[0], 2)} / {fmt_num(mine[1], 2)} ms; {text}"
            rows.append((name, got, verdict(below)))
    pool, threads = first(durq, "pool", "noop", "--pool"), first(durq, "pool", "noop", "threads")
    if pool is not None and threads is not None and (t := median(threads.get("rate"))):
        name = "process pool's overhead per no-op job against the thread pool (issue 33)"
        if why := pending(pool):
            rows.append((name, f"durq skipped ({why}); threads {1e6 / t:,.0f} µs/job", PENDING))
        elif rate := median(pool.get("rate")):
            us, ref = 1e6 / rate, 1e6 / t
            rows.append((name, f"{us:,.0f} µs/job vs {ref:,.0f} (+{us - ref:,.0f} µs)", REPORTED))
    return rows


def batch_targets(durq: dict[str, Any], others: dict[str, Any]) -> list[Row]:
    """Issue 36: batch items/s ≥ 5× per job and ahead of celery-batches; the pickup of
    an item on an idle queue reported (it waits at most max_wait)."""
    rows: list[Row] = []
    batch, job = first(durq, "batch", "per batch"), first(durq, "batch", "per job")
    peer = anchor_rate(others, "batch", "per batch")
    per_job = median((job or {}).get("rate"))
    if batch is not None:
        name = "batch items/s ≥ 5× per job, and > celery-batches (issue 36)"
        theirs = f"celery-batches {fmt_num(peer[1])}/s" if peer else "celery-batches –"
        if why := pending(batch):
            mine = f"per job {fmt_num(per_job)}/s" if per_job else "per job –"
            rows.append((name, f"durq skipped ({why}); {mine}; {theirs}", PENDING))
        elif (v := median(batch.get("rate"))) and per_job and peer:
            got = f"{fmt_num(v)}/s = {v / per_job:.1f}× per job, {v / peer[1]:.2f}× {theirs}"
            rows.append((name, got, verdict(v >= 5 * per_job and v > peer[1])))
    e = first(durq, "batch", "latency")
    if e is not None:
        anchors = "; ".join(
            f"{p['display']} {fmt_num(median(x.get('p50_ms')), 1)} / "
            f"{fmt_num(median(x.get('p99_ms')), 1)} ms"
            for p in others.values()
            if (x := first(p, "batch", "latency")) and x.get("p50_ms")
        )
        name = f"an item's pickup on an idle queue, {e['label']} (issue 36)"
        if why := pending(e):
            rows.append((name, f"durq skipped ({why}); {anchors}", PENDING))
        else:
            p50, p99 = median(e.get("p50_ms")), median(e.get("p99_ms"))
            got = f"p50 / p99 {fmt_num(p50, 1)} / {fmt_num(p99, 1)} ms; {anchors}"
            rows.append((name, got, REPORTED))
    return rows


def durable_targets(durq: dict[str, Any], others: dict[str, Any]) -> list[Row]:
    """Issue 37: durable workflows/s ≥ 3× DBOS's, the cost per step reported; sleeping
    jobs hold no slot and idle workers send (next to) no commands."""
    rows: list[Row] = []
    e, peer = first(durq, "durable", "drain"), anchor_rate(others, "durable", "drain")
    if e is not None and peer is not None:
        name = "durable workflows/s ≥ 3× DBOS Transact (issue 37)"
        if why := pending(e):
            rows.append(
                (name, f"durq skipped ({why}); DBOS {fmt_num(peer[1])} workflows/s", PENDING)
            )
        elif v := median(e.get("rate")):
            pj = e.get("per_job") or {}
            cmds, us = median(pj.get("commands")), median(pj.get("server_us"))
            cost = (
                f"; per step {fmt_num((cmds or 0) / DURABLE_STEPS, 2)} commands, "
                f"{fmt_num((us or 0) / DURABLE_STEPS, 1)} server µs"
                if cmds is not None
                else ""
            )
            got = f"{fmt_num(v)}/s = {v / peer[1]:.1f}× {peer[0]}{cost}"
            rows.append((name, got, verdict(v >= 3 * peer[1])))
    e = first(durq, "durable", "asleep")
    dbos = [x for p in others.values() if (x := first(p, "durable", "asleep"))]
    if e is not None:
        name = (
            "jobs asleep hold 0 slots; idle workers ≤ 1 Redis command/s per process (the "
            "registry heartbeat; no polling) (issue 37)"
        )
        theirs = "; ".join(
            f"DBOS {fmt_num(median(x.get('slots_held')))} slots held, "
            f"{fmt_num(median(x.get('store_statements_per_s')), 1)} statements/s idle"
            for x in dbos
        )
        if why := pending(e):
            rows.append((name, f"durq skipped ({why}); {theirs}", PENDING))
        else:
            held, cmds = median(e.get("slots_held")), median(e.get("redis_commands_per_s"))
            procs = e.get("procs") or 1
            got = (
                f"{fmt_num(held)} slots held, {fmt_num(cmds, 1)} commands/s, "
                f"{fmt_num(median(e.get('redis_bytes_per_job')))} B/job; {theirs}"
            )
            ok = held == 0 and cmds is not None and cmds <= procs
            rows.append((name, got, verdict(ok)))
    return rows


def row_targets(durq: dict[str, Any], others: dict[str, Any]) -> list[Row]:
    """Every feature row's targets, in the rows' order."""
    return [
        *startup_targets(durq, others),
        *pool_targets(durq, others),
        *batch_targets(durq, others),
        *durable_targets(durq, others),
    ]
