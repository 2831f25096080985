"""Each peer's own section, measured after the interleaved rows: bulk enqueue, memory,
the no-op drains and the "real work" scenarios not measured round-robin."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

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
from driver_client import Driver, DriverError
from peer_run import PeerRun, open_peer


def measure_peer(  # noqa: C901
    pr: PeerRun,
    s: Settings,
    classic: bool = True,
    scenarios: tuple[str, ...] = SCENARIOS,
    variant: str | None = None,
) -> dict[str, Any]:
    """The rest of one peer's figures, in its own section: bulk enqueue, memory and the
    drains unless ``classic`` is false, then the "real work" ``scenarios`` (only the
    variants whose label contains ``variant``, when given). Single enqueue and latency
    were measured before, interleaved with the other peers (measure_interleaved)."""
    res = pr.res
    started = time.monotonic()
    if res.get("skipped") or not pr.meta.classic:  # a feature row's anchor has no section
        return res
    if not pr.alive:  # the interleaved phase killed it (a timeout): a fresh one
        log("  the driver died in the interleaved phase: starting a new one")
        if not open_peer(pr):
            return res
    driver, hello, step = pr.driver, pr.hello, pr.step
    assert driver is not None
    try:
        alive = True

        def enqueue_bulk() -> None:
            runs = []
            for _ in range(s.repeat):
                r = driver.call(
                    "enqueue", 30 + s.enqueue_n / 50, kind="bulk", n=s.enqueue_n, batch=s.bulk_batch
                )
                runs.append(r)
            res["enqueue_bulk"] = {"runs": runs, "rate": summary([r["rate"] for r in runs])}
            log("  enqueue bulk: " + ", ".join(f"{r['rate']:,.0f}/s" for r in runs))

        if classic and hello["bulk_api"]:
            alive = step("enqueue bulk", enqueue_bulk)

        def memory() -> None:
            r = driver.call("memory", 60 + s.memory_n / 100, n=s.memory_n)
            res["memory"] = r
            log(
                f"  memory: {r['bytes_per_job']:,.0f} B/job ({r['queued']} queued, "
                f"{r['keys']} keys, fill {r['fill_s']:.1f} s)"
            )

        if classic and alive:
            alive = step("memory", memory)

        def drain(mode: str) -> None:
            runs = []
            for i in range(s.repeat):
                timeout = drain_timeout(s.drain_n, s.drain_cap)
                r = driver.call("drain", timeout, mode=mode, n=s.drain_n, cap=s.drain_cap, run=i)
                runs.append(r)
                log(f"  drain {mode} #{i + 1}: {drain_text(r)}")
            res[f"drain_{mode}"] = {
                "runs": runs,
                "rate": summary([r["rate"] for r in runs if r["rate"]]),
                "desc": runs[0]["desc"],
                "complete": all(r["complete"] for r in runs),
            }

        # "default" and "best" are every peer's columns; a peer module may list more
        # configurations (ALSO) to measure in the same run, shown in its details
        also = [m for m in hello["modes"] if m not in ("default", "best")]
        if also and classic:
            res["drain_also"] = also
        for mode in ("default", "best", *also):
            if alive and classic:
                alive = step(f"drain {mode}", lambda mode=mode: drain(mode))

        rest = tuple(x for x in scenarios if x in SCENARIOS and x not in pr.interleaved_scenarios)
        if alive and rest:
            res.setdefault("work", {})
            measure_work(driver, hello, s, res, rest, variant, step)
    except DriverError as exc:
        res["errors"].append(str(exc))
        log(f"  FAILED: {exc}")
    finally:
        pr.close()
        pr.busy_s += time.monotonic() - started
    res["loadavg_after"] = os.getloadavg()
    return res


def measure_work(
    driver: Driver,
    hello: dict[str, Any],
    s: Settings,
    res: dict[str, Any],
    scenarios: tuple[str, ...],
    variant: str | None,
    step: Any,
) -> None:
    """The "jobs that do real work" scenarios: drain ``s.work_n[scenario]`` jobs of the
    scenario's task with each configured variant, and relate the rate to its limit."""
    cpus = os.cpu_count() or 1
    bare_cache: dict[tuple[int, int, str], Any] = {}
    # at least ~1 s of bodies: shorter runs are dominated by the processes' start
    bare_n = max(s.work_n["io_redis"], 20_000)

    def bare(procs: int, slots: int, style: str) -> Any:
        key = (procs, slots, style)
        if key not in bare_cache:
            runs = [
                driver.call("bare", 660, procs=procs, slots=slots, style=style, n=bare_n)
                for _ in range(s.repeat)
            ]
            bare_cache[key] = {"runs": runs, "rate": summary([r["rate"] for r in runs])}
            log(
                f"  bare io_redis body, {procs} process(es) x {slots} {style}: "
                + ", ".join(f"{r['rate']:,.0f}/s" for r in runs)
            )
        return bare_cache[key]

    for scenario in scenarios:
        entries = hello.get("work", {}).get(scenario)
        if not entries:
            res["errors"].append(f"{scenario}: the peer module defines no WORK for it")
            continue
        out = res["work"].setdefault(scenario, [])
        n = s.work_n[scenario]
        for e in entries:
            if variant and variant not in e["label"] and variant != e["mode"]:
                continue
            entry = dict(e)

            def run_one(
                entry: dict[str, Any] = entry,
                scenario: str = scenario,
                n: int = n,
                out: list[dict[str, Any]] = out,
            ) -> None:
                runs = []
                for i in range(s.repeat):
                    request = work_drain(entry, n, s.drain_cap)
                    r = driver.call("drain", drain_timeout(n, s.drain_cap), run=i, **request)
                    runs.append(r)
                    log(f"  {scenario} [{entry['label']}] #{i + 1}: {drain_text(r)}")
                entry.update(
                    runs=runs,
                    rate=summary([r["rate"] for r in runs if r["rate"]]),
                    overall=overall_rate(runs),
                    complete=all(r["complete"] for r in runs),
                )
                bare_rate = None
                if scenario == "io_redis":
                    b = bare(entry["procs"], entry["slots"], entry["style"])
                    entry["bare"] = b
                    bare_rate = (b["rate"] or {}).get("median")
                limit = scenario_limit(scenario, entry["procs"], entry["slots"], cpus, bare_rate)
                entry["limit"] = limit
                rate = (entry["rate"] or {}).get("median")
                entry["ratio"] = rate / limit if rate and limit else None
                if entry["ratio"] is not None:
                    log(
                        f"  {scenario} [{entry['label']}]: {rate:,.0f} jobs/s = "
                        f"{entry['ratio'] * 100:.0f}% of its limit {limit:,.0f}/s "
                        f"({entry['desc']})"
                    )
                out.append(entry)

            if not step(f"{scenario} [{e['label']}]", run_one):
                return
