"""Render bench/results.json as bench/RESULTS.md and bench/results.png.

    <bench-tools venv>/bin/python bench/report.py bench/results.json \
        [--dir bench] [--tune bench/tune.json]

Runs in the bench-tools venv (matplotlib); without matplotlib it writes the
Markdown and says the chart is missing. ``bench/run.py`` calls it at the end of a run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

import report_floor

HERE = Path(__file__).resolve().parent
# results.json's "interleaved" rows (bench/run.py), as the targets' preamble names them
INTERLEAVED_ROWS = {
    "enqueue_single": "single enqueue",
    "latency": "latency",
    "work.io_redis": "the datastore-bound drains",
}


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
    return list(results["peers"].items())


def main_version(p: dict[str, Any]) -> str:
    versions = p.get("versions") or {}
    main = [k for k in versions if k not in ("redis", "hiredis", "kombu")]
    return ", ".join(f"{k} {versions[k]}" for k in main) or "–"


def _median(p: dict[str, Any] | None, *path: str) -> float | None:
    node: Any = p
    for part in path:
        node = (node or {}).get(part)
    return float(node["median"]) if isinstance(node, dict) and "median" in node else None


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


def _rate(e: dict[str, Any]) -> float | None:
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
        for p, e in sorted(rows, key=lambda pe: -(_rate(pe[1]) or 0)):
            ratio = e.get("ratio")
            out.append(
                f"| {work_label(p, e)} | {e['desc']} ({e['procs']} × {e['slots']}) | "
                f"{drain_cell(e)} | {fmt_num(e.get('limit'))} | "
                f"{'–' if ratio is None else f'{ratio * 100:.0f}%'} |"
            )
        out.append("")
    return out


def work_targets(durq: dict[str, Any], others: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Issue 19's targets for the real-work scenarios."""
    rows: list[tuple[str, str, str]] = []

    def ok(met: bool) -> str:
        return "✔ met" if met else "✘ missed"

    def peer_best(scenario: str) -> tuple[str, float] | None:
        best = [
            (p["display"], v)
            for p in others.values()
            for e in (p.get("work") or {}).get(scenario, [])
            if (v := _rate(e))
        ]
        return max(best, key=lambda kv: kv[1]) if best else None

    mine = durq.get("work") or {}
    peer = peer_best("io_redis")
    for procs, factor in ((1, 1.6), (2, 2.5)):
        entries = [e for e in mine.get("io_redis", []) if e["procs"] == procs and _rate(e)]
        if not entries or not peer:
            continue
        best = max(entries, key=lambda e: _rate(e) or 0)
        r = (_rate(best) or 0) / peer[1]
        all_text = "; ".join(
            f"{e['label']} {fmt_num(_rate(e))}/s"
            + (f" = {e['ratio'] * 100:.0f}% of bare" if e.get("ratio") else "")
            for e in entries
        )
        rows.append(
            (
                f"datastore-bound, {procs} process{'es' if procs > 1 else ''}: "
                f"≥ {factor}× fastest peer, ≥ 60% of the bare-body rate",
                f"{all_text}; best = {r:.2f}× {peer[0]} {fmt_num(peer[1])}/s",
                ok(r >= factor and (best.get("ratio") or 0) >= 0.6),
            )
        )
    for scenario, what in (("io_sleep", "I/O-bound"), ("cpu", "CPU-bound")):
        entries = [e for e in mine.get(scenario, []) if _rate(e)]
        peer = peer_best(scenario)
        if not entries or not peer:
            continue
        text = "; ".join(f"{e['label']} {fmt_num(_rate(e))}/s" for e in entries)
        worst = min(_rate(e) or 0 for e in entries)
        rows.append(
            (
                f"{what}: durq first (both task styles)",
                f"{text}; fastest peer {peer[0]} {fmt_num(peer[1])}/s",
                ok(worst > peer[1]),
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
        best = [(p["display"], v) for p in others.values() if (v := _median(p, *path))]
        return max(best, key=lambda kv: kv[1]) if best else None

    rows: list[tuple[str, str, str]] = []

    def ok(met: bool) -> str:
        return "✔ met" if met else "✘ missed"

    peer_drain = fastest("drain_best", "rate")
    # the configurations of one worker process, told by their command line
    one_proc = [
        (desc, v)
        for m in ("default", "best", *durq.get("drain_also", []))
        if "-p 1" in (desc := durq.get("modes", {}).get(m, ""))
        and (v := _median(durq, f"drain_{m}", "rate"))
    ]
    two_proc = _median(durq, "drain_best", "rate")
    if peer_drain and one_proc:
        desc, v = max(one_proc, key=lambda kv: kv[1])
        r = v / peer_drain[1]
        rows.append(
            (
                "drain ≥ 3× fastest peer, 1 process",
                f"{fmt_num(v)}/s ({desc}) = {r:.1f}× {peer_drain[0]}'s best "
                f"{fmt_num(peer_drain[1])}/s",
                ok(r >= 3),
            )
        )
    if peer_drain and two_proc:
        r = two_proc / peer_drain[1]
        rows.append(
            (
                "drain ≥ 3× fastest peer, 2 processes",
                f"{fmt_num(two_proc)}/s = {r:.1f}× {peer_drain[0]}'s best",
                ok(r >= 3),
            )
        )
    lp = min(
        ((p["display"], v) for p in others.values() if (v := _median(p, "latency", "p50_ms"))),
        key=lambda kv: kv[1],
        default=None,
    )
    # the target holds for both task styles: the plain `def` task of every peer's latency
    # row, and durq's `async def` task measured in the same run (LATENCY_ALSO)
    styles = [("def", durq.get("latency"))]
    styles += [(k, v) for k, v in (durq.get("latency_also") or {}).items()]
    for style, lat in styles:
        p50, p99 = _median(lat, "p50_ms"), _median(lat, "p99_ms")
        if p50 is None or p99 is None:
            continue
        below = all(
            (_median(p, "latency", "p50_ms") or math.inf) > p50
            and (_median(p, "latency", "p99_ms") or math.inf) > p99
            for p in others.values()
        )
        rows.append(
            (
                f"pickup latency p50 ≤ 0.6 ms, p99 ≤ 1.0 ms, below every peer, `{style}` task "
                "(issue 19)",
                f"{fmt_ms(p50)} / {fmt_ms(p99)} ms"
                + (f"; lowest peer p50: {lp[0]} {fmt_ms(lp[1])} ms" if lp else "")
                + report_floor.target_context(results),
                ok(p50 <= 0.6 and p99 <= 1.0 and below),
            )
        )
    mem = (durq.get("memory") or {}).get("bytes_per_job")
    if mem:
        rows.append(("≤ 200 bytes per queued job", f"{fmt_num(mem)} B", ok(mem <= 200)))
    single, peer_single = _median(durq, "enqueue_single", "rate"), fastest("enqueue_single", "rate")
    if single and peer_single:
        rows.append(
            (
                "single enqueue ≥ 1.3× fastest peer (issue 19)",
                f"{fmt_num(single)}/s vs {peer_single[0]} {fmt_num(peer_single[1])}/s "
                f"({single / peer_single[1]:.2f}×)",
                ok(single >= 1.3 * peer_single[1]),
            )
        )
    bulk = _median(durq, "enqueue_bulk", "rate")
    if bulk:
        peer_bulk = fastest("enqueue_bulk", "rate")
        vs = f" ({bulk / peer_bulk[1]:.1f}× {peer_bulk[0]})" if peer_bulk else ""
        rows.append(
            ("bulk enqueue ≥ 100,000 jobs/s", f"{fmt_num(bulk)}/s{vs}", ok(bulk >= 100_000))
        )
    rows += work_targets(durq, others)
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
        "scripts: see the analysis below.",
        "",
        "| Target | This run | |",
        "|---|---|---|",
    ]
    out += [f"| {t} | {v} | {m} |" for t, v, m in rows]
    return [*out, ""]


def run_time(run: dict[str, Any]) -> str:
    """A run's start, HH:MM:SS UTC, for the per-run details ('' for older results)."""
    started = run.get("started")
    return f" at {started[11:19]}" if isinstance(started, str) and len(started) >= 19 else ""


def order_text(results: dict[str, Any]) -> str:
    """How the peers took turns: the interleaved rows, or one section after another."""
    inter = results.get("interleaved")
    if not inter:
        return (
            "each peer's figures were measured in its own section, one peer after another "
            "(older results: single enqueue and latency not interleaved)."
        )
    if inter.get("error"):
        return f"the interleaved phase failed ({inter['error']}); see the errors per peer."
    rounds = "; ".join(
        f"{ph['phase']}: " + " / ".join(", ".join(o) for o in ph["orders"])
        for ph in inter.get("phases", [])
    )
    return (
        f"{inter['note'][0].upper()}{inter['note'][1:]} Rounds ({inter['rounds']}), in "
        f"order: {rounds}. Each run's start time (UTC) is in the details per peer."
    )


def write_markdown(  # noqa: C901
    results: dict[str, Any], tune: dict[str, Any] | None, out: Path, chart: str | None
) -> None:
    s = results["settings"]
    srv = results.get("server", {})
    lines: list[str] = []
    add = lines.append
    add("# durq benchmark: durq and its peers on one Redis")
    add("")
    add(
        f"Generated by `bench/report.py` from `{results.get('_source', 'results.json')}`. "
        f"Run started {results['started']}, took {results.get('seconds', 0) / 60:.1f} min."
    )
    add("")
    add(f"- Command: `{results['command']}`" + (" (quick mode)" if results.get("quick") else ""))
    m = results["machine"]
    add(f"- Machine: {m['cpus']} CPUs, {m['platform']}, Python {m['python']}")
    add(
        f"- Server: {srv.get('flavor')} {srv.get('version')} on loopback TCP, started fresh by "
        f'`durq.dev.server.RedisServer(flavor="valkey")`; {srv.get("config", "")}. Every peer ran '
        "against this same server; `FLUSHALL` before each measurement."
    )
    add(f"- Order: {order_text(results)}")
    add(
        f"- Sizes: enqueue {s['enqueue_n']:,} jobs per run (bulk calls of {s['bulk_batch']:,}); "
        f"drain {s['drain_n']:,} queued jobs (cap {s['drain_cap']:g} s of draining); latency "
        f"{s['latency_n']} jobs, one every {s['latency_interval'] * 1000:g} ms; memory "
        f"{s['memory_n']:,} queued jobs"
        + (
            "; real-work scenarios "
            + ", ".join(f"{k} {v:,}" for k, v in s["work_n"].items())
            + " jobs"
            if s.get("work_n")
            else ""
        )
        + f". Noisy figures: {s['repeat']} run(s), shown as median (min–max)."
    )
    add(
        "- Task: a no-op (`noop(i)`) whose only work is bumping an in-process counter that a "
        "background thread adds to a Redis key every 3 ms; the latency task records "
        "`time.time()` first thing and compares it with the `time.time()` taken just before "
        "the enqueue call (carried in its args). Every peer runs the same task code "
        "(`bench/probe.py`), async-def for the asyncio libraries."
    )
    loads = (
        [
            r.get("loadavg")
            for p in results["peers"].values()
            for k in ("enqueue_single", "enqueue_bulk", "drain_default", "drain_best", "latency")
            for r in (p.get(k) or {}).get("runs", [])
            if r.get("loadavg") is not None
        ]
        + [
            r.get("loadavg")
            for p in results["peers"].values()
            for entries in (p.get("work") or {}).values()
            for e in entries
            for r in e.get("runs", [])
            if r.get("loadavg") is not None
        ]
        + report_floor.loads(results)
    )
    if loads:
        add(
            f"- Machine load: 1-minute load average sampled after each measurement ranged "
            f"{min(loads):.1f}–{max(loads):.1f} on {m['cpus']} CPUs. The benchmark itself keeps "
            "about 2 CPUs busy while draining; higher values mean other processes shared the "
            "machine, which lowers and spreads the figures."
        )
    add("")
    if chart:
        add(f"![results]({chart})")
        add("")
    add("## Results")
    add("")
    add(
        "| Peer | Version | Enqueue, single (jobs/s) | Enqueue, bulk (jobs/s) | Drain, 1 worker "
        "default (jobs/s) | Drain, best on 2 cores (jobs/s) | Latency p50 / p99 / max (ms) | "
        "Redis bytes per queued job |"
    )
    add("|---|---|---|---|---|---|---|---|")
    for _name, p in peer_rows(results):
        if p.get("skipped"):
            add(
                f"| {p['display']} | {main_version(p)} | skipped: "
                f"{'; '.join(p.get('errors', []))[:200]} | | | | | |"
            )
            continue
        bulk = fmt_summary((p.get("enqueue_bulk") or {}).get("rate"))
        if not p.get("bulk_api"):
            bulk = "no bulk API"
        else:
            bulk += f" `{p['bulk_api']}`"
        lat = p.get("latency") or {}
        lat_cell = "–"
        if lat:
            lat_cell = " / ".join(
                fmt_ms(lat[k]["median"]) if lat.get(k) else "–"
                for k in ("p50_ms", "p99_ms", "max_ms")
            )
        mem = p.get("memory")
        add(
            f"| {p['display']} | {main_version(p)} | "
            f"{fmt_summary((p.get('enqueue_single') or {}).get('rate'))} | {bulk} | "
            f"{drain_cell(p.get('drain_default'))} | {drain_cell(p.get('drain_best'))} | "
            f"{lat_cell} | {fmt_num(mem['bytes_per_job']) if mem else '–'} |"
        )
    lines.extend(report_floor.table_rows(results, fmt_ms))
    add("")
    add(
        "Latency cells are medians over the runs of p50, p99 and max, for a plain `def` "
        "task (durq's `async def` task, measured in the same run, is in the targets and "
        "the details); the per-run figures are below and in the JSON."
        + report_floor.table_note(results)
    )
    add("")

    # ratios to the calibration
    set1 = calib_rps(results, "SET", "1 client")
    lpush_p = calib_rps(results, "LPUSH", "50 clients, pipeline 16 (-P 16)")
    rpop50 = calib_rps(results, "RPOP", "50 clients")
    if set1 and lpush_p and rpop50:
        add("### As a fraction of what the server does raw")
        add("")
        add(
            f"Reference figures from the calibration below: SET with 1 client = {set1:,.0f}/s "
            f"(one round trip at a time, like a single enqueue call), LPUSH with 50 clients "
            f"and -P 16 = {lpush_p:,.0f}/s, RPOP with 50 clients = {rpop50:,.0f}/s."
        )
        add("")
        add(
            "| Peer | Enqueue single ÷ SET (1 client) | Enqueue bulk ÷ LPUSH (-P 16) | "
            "Drain best ÷ RPOP (50 clients) |"
        )
        add("|---|---|---|---|")
        for _, p in peer_rows(results):
            if p.get("skipped"):
                continue

            def pct(block: dict[str, Any] | None, ref: float) -> str:
                rate = (block or {}).get("rate")
                return f"{rate['median'] / ref * 100:.1f}%" if rate else "–"

            add(
                f"| {p['display']} | {pct(p.get('enqueue_single'), set1)} | "
                f"{pct(p.get('enqueue_bulk'), lpush_p)} | {pct(p.get('drain_best'), rpop50)} |"
            )
        add("")

    lines.extend(work_section(results))
    lines.extend(targets_section(results))
    add("## Worker settings")
    add("")
    add(
        '"Default" is one invocation of the peer\'s own worker CLI with its defaults, except that '
        "the number of worker processes is pinned to 1 where the CLI would start one per core "
        '(Celery `-c 1`, Dramatiq `-p 1`, taskiq `--workers 1`). "Best" is the fastest '
        "configuration of a sweep on this 2-core machine (`bench/run.py --tune`, table at the "
        "end), restricted to settings that keep the library's delivery guarantees as they are."
    )
    add("")
    add("| Peer | Default | Best on 2 cores |")
    add("|---|---|---|")
    for _, p in peer_rows(results):
        modes = p.get("modes") or {}
        add(f"| {p['display']} | {modes.get('default', '–')} | {modes.get('best', '–')} |")
    add("")

    add("## Calibration: raw server throughput (redis-benchmark)")
    add("")
    cal = results.get("calibration") or {}
    if cal.get("skipped"):
        add(f"Skipped: {cal.get('note')}")
    else:
        add(
            f"`{cal.get('version')}` against the same server, before the peers ran "
            "(client and server share the 2 cores). Requests per second:"
        )
        add("")
        configs = list(dict.fromkeys(r["config"] for r in cal.get("results", [])))
        tests = list(dict.fromkeys(r["test"] for r in cal.get("results", [])))
        add("| Test | " + " | ".join(configs) + " |")
        add("|---|" + "---|" * len(configs))
        for t in tests:
            add(f"| {t} | " + " | ".join(fmt_num(calib_rps(results, t, c)) for c in configs) + " |")
    add("")

    add("## Details per peer")
    add("")
    for _, p in peer_rows(results):
        add(f"### {p['display']}")
        add("")
        if p.get("versions"):
            add(
                "- Installed: "
                + ", ".join(f"{k} {v}" for k, v in p["versions"].items())
                + f" (Python {p.get('python', '?')})"
            )
        if p.get("bulk_api") is not None or p.get("bulk_note"):
            api = f"`{p['bulk_api']}`: " if p.get("bulk_api") else ""
            add(f"- Bulk enqueue: {api}{p.get('bulk_note', '')}")
        for note in p.get("notes", []):
            add(f"- {note}")
        for mode in ("default", "best", *p.get("drain_also", [])):
            d = p.get(f"drain_{mode}")
            if d:
                runs = "; ".join(
                    f"{r['rate'] or 0:,.0f}/s over {r['drain_s']:.2f} s "
                    f"(startup {r['startup_s'] or 0:.2f} s"
                    + ("" if r["complete"] else f", only {r['done']:,}/{r['target']:,} done")
                    + ")"
                    for r in d["runs"]
                )
                add(f"- Drain {mode} ({d['desc']}): {runs}")
        single = p.get("enqueue_single")
        if single:
            runs = "; ".join(f"{r['rate']:,.0f}/s{run_time(r)}" for r in single["runs"])
            add(f"- Enqueue single runs: {runs}")
        lat = p.get("latency")
        if lat:
            runs = "; ".join(
                f"{fmt_ms(r['p50_ms'])} / {fmt_ms(r['p99_ms'])} / {fmt_ms(r['max_ms'])}"
                + run_time(r)
                for r in lat["runs"]
            )
            add(
                f"- Latency runs p50 / p99 / max ms ({lat['desc']}, jobs sent every "
                f"{s['latency_interval'] * 1000:g} ms): {runs}"
            )
        for variant, also in (p.get("latency_also") or {}).items():
            runs = "; ".join(
                f"{fmt_ms(r['p50_ms'])} / {fmt_ms(r['p99_ms'])} / {fmt_ms(r['max_ms'])}"
                + run_time(r)
                for r in also["runs"]
            )
            add(f"- Latency runs of an `{variant}` task, p50 / p99 / max ms: {runs}")
        dd = (p.get("drain_default") or {}).get("rate")
        if lat and dd and dd["median"] < 1.0 / s["latency_interval"]:
            add(
                f"- ⚠ The default worker drains {dd['median']:,.0f} jobs/s, fewer than the "
                f"{1.0 / s['latency_interval']:,.0f} jobs/s the latency test sends, so jobs pile "
                "up: its latency figures measure that backlog, not pickup delay."
            )
        for scenario, entries in (p.get("work") or {}).items():
            for e in entries:
                runs = "; ".join(
                    f"{r['rate'] or 0:,.0f}/s over {r['drain_s']:.2f} s{run_time(r)}"
                    + ("" if r["complete"] else f", only {r['done']:,}/{r['target']:,} done")
                    for r in e.get("runs", [])
                )
                bare = (e.get("bare") or {}).get("runs")
                if bare:
                    runs += "; bare body: " + ", ".join(
                        f"{b['rate']:,.0f}/s{run_time(b)}" for b in bare
                    )
                add(f"- {scenario} [{e['label']}] ({e['desc']}): {runs}")
        mem = p.get("memory")
        if mem:
            add(
                f"- Memory: used_memory {mem['before']:,} → {mem['after']:,} bytes for "
                f"{mem['n']:,} jobs ({mem['keys']:,} keys) = {mem['bytes_per_job']:,.0f} B/job"
            )
        for err in p.get("errors", []):
            add(f"- ⚠ {err}")
        add("")
    lines.extend(report_floor.details(results, run_time))

    if tune:
        add('## Sweep for the "best" settings')
        add("")
        add(
            f"`{tune['command']}` ({tune['started']}): one drain of "
            f"{next(iter(next(iter(tune['peers'].values()))['runs'].values()))['target']:,} "
            "jobs per configuration (one run each, so differences of ~10% are noise)."
        )
        for t in tune["peers"].values():
            if t.get("rerun"):  # one peer's sweep run again later, alone
                add("")
                add(f"{t['display']}'s rows: `{t['rerun']['command']}` ({t['rerun']['started']}).")
        add("")
        add("| Peer | Configuration | Drain (jobs/s) | Chosen |")
        add("|---|---|---|---|")
        for pname, t in tune["peers"].items():
            used = ((results["peers"].get(pname) or {}).get("modes") or {}).get("best")
            for name, r in t.get("runs", {}).items():
                flag = "" if r["complete"] else f" (partial {r['done']:,})"
                chosen = "✔" if (r["desc"] == used if used else name == t.get("best")) else ""
                add(f"| {t['display']} | {r['desc']} | {fmt_num(r['rate'])}{flag} | {chosen} |")
            for err in t.get("errors", []):
                add(f"| {t['display']} | ⚠ {err[:150]} | | |")
        add("")
    analysis = HERE / "analysis.md"  # hand-written: the targets, and profiles of misses
    if analysis.exists():
        lines.extend(analysis.read_text().rstrip("\n").split("\n"))
        add("")
    add("## Reproduce")
    add("")
    add(
        "`make bench` (= `.venv/bin/python bench/run.py`); `make bench ARGS=--quick` for a "
        "few-minute run; `ARGS='--peers rq,huey --repeat 5'` etc. See `bench/README.md`."
    )
    out.write_text("\n".join(lines) + "\n")


def work_panels(fig: Any, grid: Any, results: dict[str, Any]) -> None:
    """The chart's bottom row: one panel per real-work scenario, durq in blue."""
    short_title = {
        "io_redis": "One Redis round trip per job",
        "io_sleep": "10 ms wait per job",
        "cpu": "2 ms of CPU per job",
    }
    for col, scenario in enumerate(SCENARIOS):
        ax = fig.add_subplot(grid[2, 2 * col : 2 * col + 2])
        rows = sorted(work_rows(results, scenario), key=lambda pe: _rate(pe[1]) or 0)
        ys = range(len(rows))
        vals = [_rate(e) or 0 for _, e in rows]
        colors = ["tab:blue" if p["name"] == "durq" else "tab:gray" for p, _ in rows]
        ax.barh(list(ys), vals, color=colors)
        ax.set_yticks(list(ys))
        ax.set_yticklabels(
            [work_label(p, e).replace("(RedisHuey)", "").replace("taskiq ", "taskiq\n")
             for p, e in rows],
            fontsize=7,
        )  # fmt: skip
        for y, (v, (_, e)) in enumerate(zip(vals, rows, strict=True)):
            ratio = e.get("ratio")
            text = f" {v:,.0f}" + (f" ({ratio * 100:.0f}%)" if ratio is not None else "")
            ax.text(v, y, text, va="center", fontsize=7)
        ax.set_xlim(0, max(vals or [1]) * 1.35)
        ax.xaxis.set_major_formatter(lambda v, _pos: f"{v / 1000:g}k" if v >= 1000 else f"{v:g}")
        ax.set_title(f"{short_title[scenario]}: jobs/s (% of limit)", fontsize=10)
        ax.grid(axis="x", alpha=0.3)


def write_chart(results: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    peers = [(n, p) for n, p in peer_rows(results) if not p.get("skipped")]
    if not peers:
        return False
    short = {"taskiq": "taskiq\n(stream)", "taskiq-list": "taskiq\n(list)", "huey": "Huey"}
    labels = [short.get(n, p["display"]) for n, p in peers]
    has_work = any(work_rows(results, sc) for sc in SCENARIOS)
    fig = plt.figure(figsize=(15, 16 if has_work else 10))
    grid = fig.add_gridspec(
        3 if has_work else 2, 6, height_ratios=[1, 1, 1.2][: 3 if has_work else 2]
    )
    axes = [[fig.add_subplot(grid[r, 0:3]), fig.add_subplot(grid[r, 3:6])] for r in (0, 1)]

    def bars(
        ax: Any, series: list[tuple[str, Any]], title: str, unit: str, log: bool = False
    ) -> None:
        width = 0.8 / len(series)
        for i, (label, getter) in enumerate(series):
            meds, lo, hi = [], [], []
            for _, p in peers:
                s = getter(p)
                if s:
                    meds.append(s["median"])
                    lo.append(s["median"] - s["min"])
                    hi.append(s["max"] - s["median"])
                else:
                    meds.append(0)
                    lo.append(0)
                    hi.append(0)
            xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(peers))]
            ax.bar(xs, meds, width, yerr=[lo, hi], capsize=2, label=label)
        ax.set_xticks(range(len(peers)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(title)
        ax.set_ylabel(unit)
        if log:
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)

    def rate(key: str) -> Any:
        return lambda p: (p.get(key) or {}).get("rate")

    bars(
        axes[0][0],
        [("single", rate("enqueue_single")), ("bulk", rate("enqueue_bulk"))],
        "Enqueue rate (higher is better; no bar = no bulk API)",
        "jobs/s",
        log=True,
    )
    bars(
        axes[0][1],
        [("1 worker, defaults", rate("drain_default")), ("best on 2 cores", rate("drain_best"))],
        "Drain rate of queued no-op jobs (higher is better)",
        "jobs/s",
        log=True,
    )
    bars(
        axes[1][0],
        [
            (k.split("_")[0], (lambda p, k=k: (p.get("latency") or {}).get(k)))
            for k in ("p50_ms", "p99_ms", "max_ms")
        ],
        "Enqueue-to-start latency, idle worker (lower is better)",
        "ms",
        log=True,
    )

    def mem(p: dict[str, Any]) -> Any:
        m = p.get("memory")
        return (
            {"median": m["bytes_per_job"], "min": m["bytes_per_job"], "max": m["bytes_per_job"]}
            if m
            else None
        )

    bars(axes[1][1], [("bytes/job", mem)], "Redis memory per queued job (lower is better)", "bytes")
    if has_work:
        work_panels(fig, grid, results)
    srv = results.get("server", {})
    fig.suptitle(
        f"durq bench — {srv.get('flavor')} {srv.get('version')}, "
        f"{results['machine']['cpus']} CPUs, {results['started']}"
        + (" (quick)" if results.get("quick") else "")
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="?", default=str(HERE / "results.json"))
    ap.add_argument("--dir", default=str(HERE), help="where RESULTS.md and results.png go")
    ap.add_argument(
        "--tune",
        default=str(HERE / "tune.json"),
        help="sweep results to append (skipped if the file is missing)",
    )
    args = ap.parse_args()
    src = Path(args.results)
    results = json.loads(src.read_text())
    results["_source"] = src.name
    tune_path = Path(args.tune)
    tune = json.loads(tune_path.read_text()) if tune_path.exists() else None
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    chart = "results.png" if write_chart(results, out_dir / "results.png") else None
    write_markdown(results, tune, out_dir / "RESULTS.md", chart)
    print(
        f"wrote {out_dir / 'RESULTS.md'}"
        + (f" and {out_dir / 'results.png'}" if chart else " (no chart: matplotlib missing)")
    )


if __name__ == "__main__":
    main()
