"""The rows measured round-robin across the frameworks: single enqueue, pickup latency
and the datastore-bound drains, one phase per row, in an order rotated each round."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    SCENARIOS,
    Settings,
    drain_text,
    drain_timeout,
    log,
    overall_rate,
    scenario_limit,
    summary,
    work_drain,
)
from driver_client import DriverError
from floor import STYLES, measure_floor
from peer_run import PeerRun
from phase import Measure, Phase, call
from rows import ROW_TEXT as FEATURE_ROW_TEXT
from rows import row_phases

#: the name the pickup floor (bench/floor.py) takes in the latency rounds' orders
FLOOR = "floor"


def round_order(names: list[str], i: int, repeat: int) -> list[str]:
    """Round ``i``'s order of the frameworks: the list rotated by ``i`` times
    ceil(k / repeat) places, so that over the rounds each one runs early, midway and
    late in a round (9 frameworks, 3 rounds: positions p, p - 3, p - 6 modulo 9)."""
    k = len(names)
    if not k:
        return []
    shift = i * -(-k // max(repeat, 1)) % k
    return names[shift:] + names[:shift]


ROW_TEXT = {
    "enqueue single": "single enqueue",
    "latency": "pickup latency (with its variants)",
    "io_redis": "the datastore-bound scenario's drains (with the bare-body runs of their limit)",
    **FEATURE_ROW_TEXT,
}


def interleaved_note(phases: list[str]) -> str:
    """The method, as results.json and RESULTS.md state it."""
    rows = [ROW_TEXT[p] for p in phases]
    if not rows:
        return ""
    listed = ", ".join(rows[:-1]) + (" and " if len(rows) > 1 else "") + rows[-1]
    return (
        f"{listed} were measured round-robin across the frameworks: in each round every "
        "framework got one run of each, in an order rotated each round, with FLUSHALL "
        "between runs; one row after the other (all rounds of the first, then all of the "
        "next). Their ratios compare runs made seconds to minutes apart, not one framework's "
        "section with another's half an hour later on a machine whose speed drifts. The "
        "other figures were measured framework by framework afterwards."
        + (
            " Each latency round also measured the pickup floor, as one more participant "
            "rotated like a framework (`floor` in the orders): redis-py LPUSH from the "
            "harness to a BRPOP in another process, no queue (bench/floor.py), with a "
            "blocking and an asyncio receiver."
            if "latency" in phases
            else ""
        )
    )


class Taken(NamedTuple):
    """A labelled run's outcome: the run, or the error that ended it; its seconds."""

    run: dict[str, Any] | None
    error: str | None
    seconds: float


def phase_order(phase: Phase, names: list[str], i: int, repeat: int) -> list[str]:
    """Round ``i``'s order of ``phase``: the frameworks and, where the phase has one,
    the floor after them, all rotated as one list (round_order), so that the floor too
    runs early, midway and late over the rounds."""
    return round_order([*names, FLOOR] if phase.floor else names, i, repeat)


def enqueue_phase(s: Settings) -> Phase:
    """Single enqueue: one run of ``enqueue_n`` calls per turn."""
    timeout = 30 + s.enqueue_n / 50  # generous: 50 jobs/s is far below any peer

    def turn(pr: PeerRun) -> list[tuple[str, Measure]]:
        def run() -> tuple[dict[str, Any], str]:
            r = call(pr, "enqueue", timeout, kind="single", n=s.enqueue_n, batch=s.bulk_batch)
            return r, f"{r['rate']:,.0f}/s"

        return [("enqueue single", run)]

    def store(pr: PeerRun, runs: dict[str, list[dict[str, Any]]]) -> None:
        if rs := runs.get("enqueue single"):
            pr.res["enqueue_single"] = {"runs": rs, "rate": summary([r["rate"] for r in rs])}

    return Phase("enqueue single", ("enqueue_single",), turn, store)


def latency_phase(s: Settings, url: str) -> Phase:
    """Pickup latency: one run per turn of the plain task and of each LATENCY_ALSO
    variant (durq's ``async def`` task) right after it, each with its own idle worker;
    the floor's turn: one run of each receiver style of bench/floor.py (redis-py LPUSH
    -> BRPOP, no queue), with the same ``latency_n`` and ``latency_interval``."""
    timeout = 120 + s.latency_n * s.latency_interval + 35

    def label(v: str | None) -> str:
        return "latency" + (f" ({v})" if v else "")

    def turn(pr: PeerRun) -> list[tuple[str, Measure]]:
        def run(v: str | None) -> tuple[dict[str, Any], str]:
            r = call(
                pr,
                "latency",
                timeout,
                n=s.latency_n,
                interval=s.latency_interval,
                repeat=1,
                variant=v,
            )
            x = {**r["runs"][0], "desc": r["desc"]}
            return x, f"p50 {x['p50_ms']:.2f} / p99 {x['p99_ms']:.2f} / max {x['max_ms']:.1f} ms"

        return [
            (label(v), functools.partial(run, v)) for v in (None, *pr.hello.get("latency_also", []))
        ]

    def store(pr: PeerRun, runs: dict[str, list[dict[str, Any]]]) -> None:
        for v in (None, *pr.hello.get("latency_also", [])):
            rs = runs.get(label(v))
            if not rs:
                continue
            entry = {
                "runs": rs,
                "desc": rs[0]["desc"],
                **{k: summary([x[k] for x in rs]) for k in ("p50_ms", "p99_ms", "max_ms")},
            }
            if v is None:
                pr.res["latency"] = entry
            else:
                pr.res.setdefault("latency_also", {})[v] = entry

    def floor_run(style: str) -> tuple[dict[str, Any], str]:
        x = measure_floor(url, style, s.latency_n, s.latency_interval)
        return x, f"p50 {x['p50_ms']:.2f} / p99 {x['p99_ms']:.2f} / max {x['max_ms']:.1f} ms"

    floor: list[tuple[str, Measure]] = [
        (f"floor ({st})", functools.partial(floor_run, st)) for st in STYLES
    ]
    return Phase("latency", ("latency", "latency_also"), turn, store, floor)


def floor_entry(runs: dict[str, list[dict[str, Any]]], errors: list[str]) -> dict[str, Any]:
    """results.json's ``latency_floor``: per receiver style, its runs and the summaries
    of a peer's latency entry; ``errors`` where a run failed."""
    out: dict[str, Any] = {}
    for style in STYLES:
        if rs := runs.get(f"floor ({style})"):
            out[style] = {
                "runs": rs,
                "desc": rs[0]["desc"],
                **{k: summary([x[k] for x in rs]) for k in ("p50_ms", "p99_ms", "max_ms")},
            }
    if errors:
        out["errors"] = errors
    return out


def io_redis_phase(s: Settings, variant: str | None) -> Phase:
    """The datastore-bound scenario: per turn, one drain of each of the peer's variants
    (those matching ``variant``), then one bare-body run for each distinct limit."""
    n = s.work_n["io_redis"]
    bare_n = max(n, 20_000)  # as measure_work: at least ~1 s of bodies

    def entries(pr: PeerRun) -> list[dict[str, Any]]:
        return [
            e
            for e in pr.hello.get("work", {}).get("io_redis") or []
            if not variant or variant in e["label"] or variant == e["mode"]
        ]

    def bare_label(e: dict[str, Any]) -> str:
        return f"io_redis bare body {e['procs']} x {e['slots']} {e['style']}"

    def drain(pr: PeerRun, e: dict[str, Any]) -> tuple[dict[str, Any], str]:
        r = call(pr, "drain", drain_timeout(n, s.drain_cap), **work_drain(e, n, s.drain_cap))
        return r, drain_text(r)

    def bare(pr: PeerRun, e: dict[str, Any]) -> tuple[dict[str, Any], str]:
        r = call(pr, "bare", 660, procs=e["procs"], slots=e["slots"], style=e["style"], n=bare_n)
        return r, f"{r['rate']:,.0f}/s"

    def turn(pr: PeerRun) -> list[tuple[str, Measure]]:
        mine = entries(pr)
        bares = {bare_label(e): e for e in mine}  # one per distinct limit
        drains = [(f"io_redis [{e['label']}]", functools.partial(drain, pr, e)) for e in mine]
        return drains + [(label, functools.partial(bare, pr, e)) for label, e in bares.items()]

    def store(pr: PeerRun, runs: dict[str, list[dict[str, Any]]]) -> None:
        out = pr.res.setdefault("work", {}).setdefault("io_redis", [])
        pr.interleaved_scenarios.add("io_redis")
        for e in entries(pr):
            if rs := runs.get(f"io_redis [{e['label']}]"):
                out.append(io_redis_entry(pr, e, rs, runs.get(bare_label(e))))

    return Phase("io_redis", ("work.io_redis",), turn, store)


def io_redis_entry(
    pr: PeerRun,
    e: dict[str, Any],
    runs: list[dict[str, Any]],
    bare_runs: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """A datastore-bound variant's results, in the shape measure_work writes."""
    entry = dict(e)
    entry.update(
        runs=runs,
        rate=summary([r["rate"] for r in runs if r["rate"]]),
        overall=overall_rate(runs),
        complete=all(r["complete"] for r in runs),
    )
    bare_rate = None
    if bare_runs:
        entry["bare"] = {"runs": bare_runs, "rate": summary([r["rate"] for r in bare_runs])}
        bare_rate = (entry["bare"]["rate"] or {}).get("median")
    limit = scenario_limit("io_redis", e["procs"], e["slots"], os.cpu_count() or 1, bare_rate)
    rate = (entry["rate"] or {}).get("median")
    entry.update(limit=limit, ratio=rate / limit if rate and limit else None)
    if entry["ratio"] is not None:
        log(
            f"  {pr.meta.display}: io_redis [{e['label']}]: {rate:,.0f} jobs/s = "
            f"{entry['ratio'] * 100:.0f}% of its limit {limit:,.0f}/s ({e['desc']})"
        )
    return entry


def interleaved_phases(
    s: Settings, url: str, classic: bool, scenarios: tuple[str, ...], variant: str | None
) -> list[Phase]:
    """The rows measured round-robin: single enqueue and latency in a full run, and the
    datastore-bound scenario whenever it is asked for (its targets are ratios against
    the fastest peer too, and against the bare body, measured in the same turn)."""
    phases = [enqueue_phase(s), latency_phase(s, url)] if classic else []
    if "io_redis" in scenarios:
        phases.append(io_redis_phase(s, variant))
    return phases + row_phases(s, scenarios, variant)


def measure_interleaved(
    peers: list[PeerRun],
    s: Settings,
    url: str,
    classic: bool = True,
    scenarios: tuple[str, ...] = SCENARIOS,
    variant: str | None = None,
) -> dict[str, Any]:
    """The window-sensitive rows, round-robin across ``peers`` (see interleaved_note).

    One phase per row, not one round for all: a round of single enqueues takes seconds,
    a round of latency runs a minute or two (each starts an idle worker and sends jobs
    for ``latency_n`` x ``latency_interval``), so the enqueue runs being compared stay
    seconds apart instead of being spread across the latency runs. A row that fails for
    a peer is dropped for that peer (its error recorded, as when measured in its own
    section); a peer whose driver dies leaves the phase, and the others go on."""
    import redis

    by_name = {pr.meta.name: pr for pr in peers}
    names = [pr.meta.name for pr in peers]
    phases = interleaved_phases(s, url, classic, scenarios, variant)
    method: dict[str, Any] = {
        "rows": [row for ph in phases for row in ph.rows],
        "rounds": s.repeat,
        "note": interleaved_note([ph.name for ph in phases]),
        "phases": [],
    }
    gone: set[str] = set()
    floor = _FloorRuns()
    with redis.Redis.from_url(url) as client:
        for phase in phases:
            runs: dict[str, dict[str, list[dict[str, Any]]]] = {name: {} for name in names}
            failed: dict[str, set[str]] = {name: set() for name in names}
            took_part: set[str] = set()
            orders = []
            members = [name for name in names if phase.takes(by_name[name])]
            for i in range(s.repeat):
                order = phase_order(phase, members, i, s.repeat)
                orders.append(order)
                log(f"-- {phase.name}, round {i + 1}/{s.repeat}: {', '.join(order)}")
                for pos, name in enumerate(order):
                    if name == FLOOR:
                        floor.turn(client, phase, i, pos)
                        continue
                    pr = by_name[name]
                    if not pr.alive and name not in gone:  # said once, whatever killed it
                        gone.add(name)
                        msg = f"{phase.name}: the driver had exited before its turn, round {i + 1}"
                        log(f"  {pr.meta.display}: {msg}; it leaves the interleaved phases")
                        pr.res["errors"].append(msg)
                    for label, measure in phase.turn(pr) if pr.alive else []:
                        if not pr.alive or label in failed[name]:
                            continue
                        took_part.add(name)
                        got = _take(client, pr.meta.display, label, measure, i, pos)
                        pr.busy_s += got.seconds
                        if got.run is not None:
                            runs[name].setdefault(label, []).append(got.run)
                            continue
                        pr.res["errors"].append(got.error)
                        failed[name].add(label)
                        if not pr.alive:
                            gone.add(name)
                            log(f"  {pr.meta.display}: it leaves the interleaved phases")
            method["phases"].append({"phase": phase.name, "orders": orders})
            for name in names:  # a peer that never had a turn measures it in its section
                if name in took_part or (phase.store_all and name in members):
                    ok = {k: v for k, v in runs[name].items() if k not in failed[name]}
                    phase.store(by_name[name], ok)
    method.update(floor.result())  # run.py moves it to results["latency_floor"]
    return method


def _take(client: Any, who: str, label: str, measure: Measure, i: int, pos: int) -> Taken:
    """One labelled run of round ``i``, at place ``pos``: timed, logged, FLUSHALL after
    it; a failure is returned as its message (one participant's failure never stops the
    others)."""
    t0, wall = time.monotonic(), time.time()
    try:
        run, text = measure()
    except Exception as exc:
        if not isinstance(exc, DriverError):
            traceback.print_exc()
        log(f"  {who}: {label} #{i + 1}: FAILED: {exc}")
        return Taken(None, f"{label}: {exc}", time.monotonic() - t0)
    finally:
        client.flushall()
    run.update(
        started=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall))
        + f".{int(wall % 1 * 1000):03d}Z",
        call_s=time.monotonic() - t0,
        round=i + 1,
        position=pos + 1,
    )
    log(f"  {who}: {label} #{i + 1}: {text}")
    return Taken(run, None, run["call_s"])


@dataclasses.dataclass
class _FloorRuns:
    """The floor's runs over the rounds; a style that fails once is not run again."""

    runs: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    errors: list[str] = dataclasses.field(default_factory=list)
    failed: set[str] = dataclasses.field(default_factory=set)

    def turn(self, client: Any, phase: Phase, i: int, pos: int) -> None:
        for label, measure in phase.floor or []:
            if label in self.failed:
                continue
            got = _take(client, "redis-py LPUSH -> BRPOP, no queue", label, measure, i, pos)
            if got.run is not None:
                self.runs.setdefault(label, []).append(got.run)
            else:
                self.failed.add(label)
                self.errors.append(str(got.error))

    def result(self) -> dict[str, Any]:
        """``{"latency_floor": floor_entry(...)}``, or {} where the floor never ran."""
        if not self.runs and not self.errors:
            return {}
        ok = {k: v for k, v in self.runs.items() if k not in self.failed}
        return {"latency_floor": floor_entry(ok, self.errors)}
