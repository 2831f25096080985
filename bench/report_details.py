"""The end of RESULTS.md: every run of every peer (versions, notes, each drain, enqueue,
latency and real-work run with its start time, memory, errors) and the sweep that chose
each peer's "best" settings (bench/tune.json)."""

from __future__ import annotations

from typing import Any

from report_format import fmt_ms, fmt_num, peer_rows, run_time


def _latency_runs(runs: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{fmt_ms(r['p50_ms'])} / {fmt_ms(r['p99_ms'])} / {fmt_ms(r['max_ms'])}" + run_time(r)
        for r in runs
    )


def about_lines(p: dict[str, Any]) -> list[str]:
    """What was installed, the bulk API and the peer's notes."""
    lines = []
    if p.get("versions"):
        lines.append(
            "- Installed: "
            + ", ".join(f"{k} {v}" for k, v in p["versions"].items())
            + f" (Python {p.get('python', '?')})"
        )
    if p.get("bulk_api") is not None or p.get("bulk_note"):
        api = f"`{p['bulk_api']}`: " if p.get("bulk_api") else ""
        lines.append(f"- Bulk enqueue: {api}{p.get('bulk_note', '')}")
    lines += [f"- {note}" for note in p.get("notes", [])]
    return lines


def drain_lines(p: dict[str, Any]) -> list[str]:
    """Each no-op drain configuration's runs: rate, time draining, start-up."""
    lines = []
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
            lines.append(f"- Drain {mode} ({d['desc']}): {runs}")
    return lines


def pickup_lines(p: dict[str, Any], interval: float) -> list[str]:
    """The single enqueue and latency runs (every task style), and a warning when the
    default worker drains slower than the latency test sends."""
    lines = []
    single = p.get("enqueue_single")
    if single:
        runs = "; ".join(f"{r['rate']:,.0f}/s{run_time(r)}" for r in single["runs"])
        lines.append(f"- Enqueue single runs: {runs}")
    lat = p.get("latency")
    if lat:
        lines.append(
            f"- Latency runs p50 / p99 / max ms ({lat['desc']}, jobs sent every "
            f"{interval * 1000:g} ms): {_latency_runs(lat['runs'])}"
        )
    for variant, also in (p.get("latency_also") or {}).items():
        lines.append(
            f"- Latency runs of an `{variant}` task, p50 / p99 / max ms: "
            f"{_latency_runs(also['runs'])}"
        )
    dd = (p.get("drain_default") or {}).get("rate")
    if lat and dd and dd["median"] < 1.0 / interval:
        lines.append(
            f"- ⚠ The default worker drains {dd['median']:,.0f} jobs/s, fewer than the "
            f"{1.0 / interval:,.0f} jobs/s the latency test sends, so jobs pile "
            "up: its latency figures measure that backlog, not pickup delay."
        )
    return lines


def work_lines(p: dict[str, Any]) -> list[str]:
    """Each real-work variant's runs, with its bare-body runs where it has a bare limit."""
    lines = []
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
            lines.append(f"- {scenario} [{e['label']}] ({e['desc']}): {runs}")
    return lines


def peer_details(results: dict[str, Any]) -> list[str]:
    """ "Details per peer": a section per peer with every run."""
    interval = results["settings"]["latency_interval"]
    lines = ["## Details per peer", ""]
    for _, p in peer_rows(results):
        lines += [f"### {p['display']}", ""]
        lines += about_lines(p) + drain_lines(p) + pickup_lines(p, interval) + work_lines(p)
        mem = p.get("memory")
        if mem:
            lines.append(
                f"- Memory: used_memory {mem['before']:,} → {mem['after']:,} bytes for "
                f"{mem['n']:,} jobs ({mem['keys']:,} keys) = {mem['bytes_per_job']:,.0f} B/job"
            )
        lines += [f"- ⚠ {err}" for err in p.get("errors", [])]
        lines.append("")
    return lines


def sweep_section(results: dict[str, Any], tune: dict[str, Any] | None) -> list[str]:
    """The sweep of worker configurations (bench/run.py --tune), each peer's chosen one
    marked; nothing without a sweep."""
    if not tune:
        return []
    lines = [
        '## Sweep for the "best" settings',
        "",
        f"`{tune['command']}` ({tune['started']}): one drain of "
        f"{next(iter(next(iter(tune['peers'].values()))['runs'].values()))['target']:,} "
        "jobs per configuration (one run each, so differences of ~10% are noise).",
    ]
    for t in tune["peers"].values():
        if t.get("rerun"):  # one peer's sweep run again later, alone
            lines += [
                "",
                f"{t['display']}'s rows: `{t['rerun']['command']}` ({t['rerun']['started']}).",
            ]
    lines += ["", "| Peer | Configuration | Drain (jobs/s) | Chosen |", "|---|---|---|---|"]
    for pname, t in tune["peers"].items():
        used = ((results["peers"].get(pname) or {}).get("modes") or {}).get("best")
        for name, r in t.get("runs", {}).items():
            flag = "" if r["complete"] else f" (partial {r['done']:,})"
            chosen = "✔" if (r["desc"] == used if used else name == t.get("best")) else ""
            lines.append(
                f"| {t['display']} | {r['desc']} | {fmt_num(r['rate'])}{flag} | {chosen} |"
            )
        lines += [f"| {t['display']} | ⚠ {err[:150]} | | |" for err in t.get("errors", [])]
    return [*lines, ""]
