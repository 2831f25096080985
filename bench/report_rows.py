"""The feature rows in RESULTS.md (results.json's ``peers[*]["rows"]``, bench/rows.py):
one table per row, every framework's variants with what each part measured, and the
datastore-bound drains overall, start-up included. Their targets: report_row_targets."""

from __future__ import annotations

import statistics
from typing import Any

from report_format import drain_cell, fmt_num, fmt_summary, peer_rows

ROWS = ("startup", "pool", "batch", "durable")
#: what each row part measures (common.ROW_PARTS, which the report cannot import: the
#: bench-tools venv renders it from results.json alone)
PART_MEASURE = {
    "start": "startup", "cpu": "drain", "io_redis": "drain", "noop": "drain",
    "latency": "latency", "per job": "drain", "per batch": "drain", "drain": "drain",
    "asleep": "asleep",
}  # fmt: skip
DURABLE_STEPS = 3  # steps per workflow of the durable row
TITLES = {
    "startup": "Startup: from launching the worker's command to the first job completed",
    "pool": "Process pool against Celery's prefork pool (issue 33)",
    "batch": "Batch consumption against celery-batches (issue 36)",
    "durable": "Durable steps against DBOS Transact on PostgreSQL (issue 37)",
}
ABOUT = {
    "startup": "Each start: the worker's command launched on queued jobs of its "
    "datastore-bound task (one Redis INCR each), timed to the first job seen done; the "
    "median (min–max) of every fresh start, several per round.",
    "pool": "`def` tasks: CPU-bound (2 ms of Python per job), datastore-bound (one "
    "blocking Redis round trip per job) and a no-op (its µs per job: the pool's "
    "overhead, against durq's thread pool with as many slots); pickup latency with the "
    "no-op's worker idle. Each framework at its best 2-core settings for each part.",
    "batch": "The same bulk-write body (one pipelined Redis write per call, holding every "
    "item's row) per job and per batch of 100; rates in items/s. Latency: one item at a "
    "time on an idle queue, sent further apart than the batch's max_wait.",
    "durable": "Workflows of 3 steps, each one Redis INCR, drained at each one's best "
    "2-core settings (workflows/s), with the store's work per step: durq's client-sent "
    "Redis commands (a bound on its round trips) and their server µs; DBOS's PostgreSQL "
    "statements and their execution µs. Asleep: jobs that sleep an hour as soon as they "
    "start; bytes per job in Redis and in the peer's own store, slots held, and the "
    "commands the stores receive per second while the workers have nothing to do. DBOS "
    "runs on a PostgreSQL the bench starts, with fsync, synchronous_commit and "
    "full_page_writes off (no durability, like the Valkey's no persistence).",
}


def row_variants(results: dict[str, Any], row: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(peer, variant) for every variant of ``row``, in peer order."""
    return [
        (p, e)
        for _, p in peer_rows(results)
        if not p.get("skipped")
        for e in (p.get("rows") or {}).get(row, [])
    ]


def median(block: dict[str, Any] | None) -> float | None:
    return float(block["median"]) if block else None


def cost_text(e: dict[str, Any], per: int) -> str:
    """A drain's store work per step (``per`` steps a job), where it was measured."""
    pj = e.get("per_job") or {}

    def each(key: str) -> float | None:
        v = median(pj.get(key))
        return None if v is None else v / per

    parts = []
    if (v := each("store_statements")) is not None:
        parts.append(f"PostgreSQL {fmt_num(v, 1)} statements, {fmt_num(each('store_us'))} µs")
    elif (cmds := each("commands")) is not None:
        parts.append(f"Redis {fmt_num(cmds, 2)} commands, {fmt_num(each('server_us'), 1)} µs")
    return f"; per step: {', '.join(parts)}" if parts else ""


def result_cell(row: str, e: dict[str, Any]) -> str:
    """A variant's figures, by what its part measures."""
    if e.get("skip"):
        return f"skipped: {e['skip']}"
    what = PART_MEASURE[e["part"]]
    if what == "startup":
        n = len(e.get("starts", []))
        return f"{fmt_summary(e.get('startup_s'), 2)} s ({n} starts)"
    if what == "latency":
        cells = [fmt_num(median(e.get(k)), 2) for k in ("p50_ms", "p99_ms", "max_ms")]
        return " / ".join(cells) + " ms (p50 / p99 / max)"
    if what == "asleep":
        store = median(e.get("store_bytes_per_job"))
        stmts = median(e.get("store_statements_per_s"))
        return (
            f"{fmt_num(median(e.get('asleep')))} asleep, "
            f"{fmt_num(median(e.get('waiting')))} waiting for a slot; "
            f"{fmt_num(median(e.get('slots_held')))} slots held; "
            f"{fmt_num(abs(round(median(e.get('redis_bytes_per_job')) or 0)))} B/job in Redis"
            + (f" + {fmt_num(store)} B/job in PostgreSQL" if store is not None else "")
            + f"; idle: {fmt_num(median(e.get('redis_commands_per_s')), 1)} Redis commands/s"
            + (f", {fmt_num(stmts, 1)} PostgreSQL statements/s" if stmts is not None else "")
        )
    unit = "workflows/s" if row == "durable" else ("items/s" if row == "batch" else "jobs/s")
    cell = f"{drain_cell(e)} {unit}"
    if e["part"] == "noop" and (rate := median(e.get("rate"))):
        cell += f" = {1e6 / rate:,.0f} µs per job"
    if row == "durable":
        cell += cost_text(e, DURABLE_STEPS)
    # the runs' size: a variant may drain more than its part's size (bench/rows.py)
    runs = f"{e['runs'][0]['target']:,} {unit[:-2]} a run; " if e.get("runs") else ""
    return cell + f" ({runs}overall {fmt_summary(e.get('overall'))}, start-up included)"


def rows_section(results: dict[str, Any]) -> list[str]:
    """One table per feature row measured, and the datastore-bound drains overall."""
    out: list[str] = []
    for row in ROWS:
        variants = row_variants(results, row)
        if not variants:
            continue
        out += [f"### {TITLES[row]}", "", ABOUT[row], ""]
        out += ["| Part | Framework | Variant | Worker | Result |", "|---|---|---|---|---|"]
        for p, e in variants:
            out.append(
                f"| {e['part']} | {p['display']} | {e['label']} | {e.get('desc', '–')} | "
                f"{result_cell(row, e)} |"
            )
        out.append("")
    out += overall_table(results)
    if not out:
        return []
    return [
        "## Feature rows: each durq feature against its anchor, in one run",
        "",
        "Measured round-robin like the rows above (see Order); `bench/rows.py`. A variant "
        "durq declares but cannot run yet is listed as skipped, with the reason.",
        "",
        *out,
    ]


def overall_table(results: dict[str, Any]) -> list[str]:
    """The datastore-bound drains with their start-up counted: a worker that restarts,
    recycles or scales from zero pays it on every start."""
    rows = [
        (p, e)
        for _, p in peer_rows(results)
        if not p.get("skipped")
        for e in (p.get("work") or {}).get("io_redis", [])
        if e.get("overall")
    ]
    if not rows:
        return []
    out = [
        "### The datastore-bound drains overall, start-up included",
        "",
        "The io_redis drains of the real-work table: jobs ÷ the time from launching the "
        "worker's command to the last job done, beside the steady rate (first to last "
        "job) and the start-up.",
        "",
        "| Framework | Worker | Steady (jobs/s) | Overall (jobs/s) | Start-up (s) |",
        "|---|---|---|---|---|",
    ]
    for p, e in sorted(rows, key=lambda pe: -(median(pe[1].get("overall")) or 0)):
        label = p["display"] if e["label"] == "best" else f"{p['display']} ({e['label']})"
        starts = [r["startup_s"] for r in e.get("runs", []) if r.get("startup_s") is not None]
        start = fmt_num(statistics.median(starts), 2) if starts else "–"
        out.append(
            f"| {label} | {e['desc']} | {fmt_summary(e.get('rate'))} | "
            f"{fmt_summary(e.get('overall'))} | {start} |"
        )
    return [*out, ""]
