"""The feature rows (``common.ROWS``): each a phase of the interleaved rounds, in which
every framework taking part runs its variants of the row (its module's ``rows()``, as
the driver's hello reports them) once per round.

    startup   each peer's worker started fresh on queued jobs: seconds from launching
              its command to the first job done (``ROW_PARTS`` starts per turn)
    pool      durq's process pool against Celery's prefork pool: CPU-bound and
              datastore-bound `def` drains, a no-op's per-job cost, pickup latency
    batch     a bulk write per job and per batch of 100: durq against celery-batches,
              and an item's pickup on an idle queue (it waits up to the batch's max_wait)
    durable   workflows of 3 steps drained (durq.step against DBOS Transact), and jobs
              asleep: bytes each, slots held, the store's commands while workers idle

A variant the peer declares with ``skip`` (durq, before its feature lands) is stored as
declared and skipped, with the reason; the report shows it so. A variant may declare a
``scale``: it drains that many times its part's size (``part_size``), so that a drain
far faster than its peer's still lasts long enough that its start and its end (the
first and last items seen done) weigh little; the report gives each drain's items.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    BATCH_LATENCY_INTERVAL,
    ROW_PARTS,
    ROWS,
    Settings,
    drain_text,
    drain_timeout,
    overall_rate,
    summary,
)
from peer_run import PeerRun
from phase import Measure, Phase, call

#: the phases' descriptions in the interleaved note
ROW_TEXT = {
    "startup": "fresh worker starts (seconds to the first job completed)",
    "pool": "the process-pool rows against Celery's prefork pool",
    "batch": "the batch rows against celery-batches",
    "durable": "the durable-step rows against DBOS Transact",
}


def row_label(row: str, e: dict[str, Any]) -> str:
    """A variant's label in the rounds' logs and its runs' keys."""
    return f"{row} [{e['part']}: {e['label']}]"


def wanted(e: dict[str, Any], variant: str | None) -> bool:
    """``--variant``: a variant whose label or part contains it, or whose worker
    configuration is named so."""
    return not variant or variant in e["label"] or variant in e["part"] or variant == e["mode"]


def per_job(runs: list[dict[str, Any]], key: str, of: str) -> dict[str, Any] | None:
    """The summary over ``runs`` of ``run["server"][of][key]`` per job done."""
    values = []
    for r in runs:
        block = (r.get("server") or {}).get(of)
        if block is not None and r["done"]:
            values.append(block[key] / r["done"])
    return summary(values)


def drain_entry(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A drain part's figures: its rate, overall rate (start-up included), start-up, and
    per job the server's work: the client-sent Redis commands (a durq worker's round
    trips, at most) and their server µs, the Redis server's CPU, the peer's own store's
    statements and µs (DBOS: PostgreSQL)."""
    return {
        "rate": summary([r["rate"] for r in runs if r["rate"]]),
        "overall": overall_rate(runs),
        "startup_s": summary([r["startup_s"] for r in runs if r["startup_s"] is not None]),
        "complete": all(r["complete"] for r in runs),
        "desc": runs[0]["desc"],
        "per_job": {
            "commands": per_job(runs, "calls", "client"),
            "server_us": per_job(runs, "usec", "client"),
            "redis_cpu_us": summary(
                [r["server"]["cpu_s"] * 1e6 / r["done"] for r in runs if r.get("server")]
            ),
            "store_statements": per_job(runs, "statements", "store"),
            "store_us": per_job(runs, "exec_us", "store"),
        },
    }


LATENCY_KEYS = ("p50_ms", "p99_ms", "max_ms")
ASLEEP_KEYS = (
    "asleep", "waiting", "slots_held", "redis_bytes_per_job", "store_bytes_per_job",
    "redis_commands_per_s", "store_statements_per_s", "settle_s",
)  # fmt: skip


def part_entry(measure: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A variant's summaries, by what its part measures."""
    if measure == "drain":
        return drain_entry(runs)
    if measure == "latency":
        return {"desc": runs[0]["desc"], **{k: summary([r[k] for r in runs]) for k in LATENCY_KEYS}}
    if measure == "startup":
        starts = [x for r in runs for x in r["starts"] if x is not None]
        return {"startup_s": summary(starts), "starts": starts}
    if measure == "asleep":
        return {k: summary([r[k] for r in runs if r.get(k) is not None]) for k in ASLEEP_KEYS} | {
            "n": runs[0]["n"]
        }
    raise ValueError(measure)


def part_size(s: Settings, row: str, e: dict[str, Any]) -> int:
    """The items (jobs, workflows, starts) of one run of variant ``e`` of ``row``: its
    part's size, times the variant's ``scale``."""
    return s.row_n[f"{row}.{e['part']}"] * int(e.get("scale", 1))


def measure(s: Settings, row: str, pr: PeerRun, e: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """One run of variant ``e`` of ``row`` by ``pr``'s driver, and its log text."""
    what = ROW_PARTS[row][e["part"]][0]
    n = part_size(s, row, e)
    todo = {"mode": e["mode"], "kind": e["kind"]}
    if what == "drain":
        r = call(pr, "drain", drain_timeout(n, s.row_cap), n=n, cap=s.row_cap, stats=True, **todo)
        return r, drain_text(r)
    if what == "latency":
        interval = BATCH_LATENCY_INTERVAL if row == "batch" else s.latency_interval
        r = call(pr, "latency", 155 + n * interval, n=n, interval=interval, repeat=1,
                 send=e.get("send"), **todo)  # fmt: skip
        x = {**r["runs"][0], "desc": r["desc"]}
        return x, f"p50 {x['p50_ms']:.2f} / p99 {x['p99_ms']:.2f} / max {x['max_ms']:.1f} ms"
    if what == "startup":
        r = call(pr, "startup", 60 + n * 75, starts=n, **todo)
        return r, "starts " + ", ".join(f"{x:.2f}" for x in r["starts"]) + " s"
    if what == "asleep":
        r = call(pr, "asleep", 180 + n / 100 + s.asleep_window, n=n, window=s.asleep_window,
                 **todo)  # fmt: skip
        return r, (
            f"{r['asleep']:,} asleep, {r['waiting']:,} waiting, {r['slots_held']:,} slots "
            f"held, {r['redis_bytes_per_job']:,.0f} B/job in Redis, "
            f"{r['redis_commands_per_s']:,.1f} Redis commands/s idle"
        )
    raise ValueError(what)


def row_phase(s: Settings, row: str, variant: str | None) -> Phase:
    """One feature row: per turn, one run of each of the peer's variants (startup: a
    few fresh starts); results in ``res["rows"][row]``, a list of variants."""
    parts = ROW_PARTS[row]

    def entries(pr: PeerRun) -> list[dict[str, Any]]:
        return [e for e in pr.hello.get("rows", {}).get(row, []) if wanted(e, variant)]

    def turn(pr: PeerRun) -> list[tuple[str, Measure]]:
        return [
            (row_label(row, e), functools.partial(measure, s, row, pr, e))
            for e in entries(pr)
            if not e.get("skip")
        ]

    def store(pr: PeerRun, runs: dict[str, list[dict[str, Any]]]) -> None:
        out = []
        for e in entries(pr):
            entry = dict(e)
            rs = runs.get(row_label(row, e))
            if rs:
                entry.update(runs=rs, **part_entry(parts[e["part"]][0], rs))
            elif not e.get("skip"):
                continue  # it failed: its error is in the peer's errors
            out.append(entry)
        if out:
            pr.res.setdefault("rows", {})[row] = out

    return Phase(
        row,
        (f"rows.{row}",),
        turn,
        store,
        takes=lambda pr: row in pr.meta.rows,
        store_all=True,
    )


def row_phases(s: Settings, scenarios: tuple[str, ...], variant: str | None) -> list[Phase]:
    """The feature rows asked for (those of ``scenarios``), in ROWS's order."""
    return [row_phase(s, row, variant) for row in ROWS if row in scenarios]
