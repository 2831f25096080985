"""Benchmark durq against its peers on one freshly started Valkey.

    .venv/bin/python bench/run.py [--peers rq,huey] [--quick] [--repeat N]
        [--out bench/results.json] [--tune]

What it does, in one run:

1. starts ``durq.dev.server.RedisServer(flavor="valkey")`` on a free loopback port;
2. calibrates that server with ``redis-benchmark`` (installed from Debian's
   ``redis-tools`` with apt-get if missing, unless ``--no-install``);
3. for each peer: creates/reuses ``bench/.envs/<env>`` (pip install from PyPI) and
   starts ``bench/driver.py`` inside it, which it asks, one JSON command at a time, to
   measure; each command has a timeout, and a peer that fails or hangs is killed and
   recorded, never fatal;
4. the figures that drift with the machine's load and that the targets compare across
   frameworks, single enqueue and enqueue-to-start latency, round-robin: ``repeat``
   rounds in which every peer gets one run, in an order rotated each round
   (``measure_interleaved``), so that all frameworks share the same windows; the
   latency rounds also measure the pickup floor (``floor.py``: redis-py LPUSH ->
   BRPOP, no queue) as one more participant, into ``results["latency_floor"]``; then,
   the same way, the datastore-bound drains and the feature rows (``rows.py``: startup,
   the process pool, batches, durable steps, each with the peers that anchor it);
5. then each peer's own section in turn: bulk enqueue, Redis memory per queued job,
   drain rates (default worker and best 2-core settings), the real-work scenarios;
6. writes the JSON results and renders ``bench/RESULTS.md`` + ``bench/results.png``
   with ``bench/report.py`` in a bench-tools venv (matplotlib).

Where the parts live: ``cli_args.py`` (flags), ``venvs.py``, ``calibration.py``,
``driver_client.py`` (a driver process and its deadlines), ``peer_run.py`` (one peer
through a run), ``interleaved.py`` (step 4), ``sections.py`` (step 5), ``tune.py``
(``--tune``), ``results_file.py`` (step 6); this file runs them in order.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration import calibrate
from cli_args import parse_args
from common import PEERS, ROW_PARTS, ROWS, SCENARIOS, Settings, log
from interleaved import interleaved_note, measure_interleaved, round_order
from peer_run import PeerRun, harness_error, new_peer_run, open_peer
from results_file import new_results, render_report, server_info, write_results
from sections import measure_peer
from tune import tune_peer

# round_order and interleaved_note are imported by bench/tests/test_bench_order.py through here
__all__ = ["interleaved_note", "main", "round_order"]


def main(argv: list[str] | None = None) -> int:  # noqa: C901
    args = parse_args(argv, __doc__)
    names = [n.strip() for n in args.peers.split(",") if n.strip()]
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        print(f"unknown peers: {unknown}; known: {list(PEERS)}", file=sys.stderr)
        return 2
    s = Settings.quick(args.repeat or 1) if args.quick else Settings(repeat=args.repeat or 3)
    if args.drain_cap is not None:
        s = dataclasses.replace(s, drain_cap=args.drain_cap)
    # the real-work scenarios, then the feature rows (bench/rows.py)
    scenarios: tuple[str, ...] = () if args.no_work else SCENARIOS + ROWS
    only_work = args.scenario is not None
    if only_work:
        asked = [x.strip() for x in args.scenario.split(",") if x.strip()]
        scenarios = SCENARIOS + ROWS if asked == ["all"] else tuple(asked)
        bad = [x for x in scenarios if x not in SCENARIOS + ROWS]
        if bad:
            known = list(SCENARIOS + ROWS)
            print(f"unknown scenarios: {bad}; known: {known}", file=sys.stderr)
            return 2
        # only the peers that take part in what was asked
        names = [n for n in names if takes_part(n, scenarios)]
        if not args.tune:
            args.no_calibration = True
            args.no_report = not args.report
            if args.repeat is None and not args.quick:
                s = dataclasses.replace(s, repeat=1)
    if args.work_n is not None:
        s = dataclasses.replace(s, work_n={k: args.work_n for k in SCENARIOS})

    from durq.dev.server import RedisServer

    t_start = time.monotonic()
    results = new_results(s, args.quick)
    peers: list[PeerRun] = []
    server = RedisServer(flavor="valkey")
    server.start()
    try:
        import redis

        results["server"] = server_info(server)
        log(f"server: {server.flavor} {results['server']['version']} at {server.url}")
        if args.tune:
            what = scenarios[0] if only_work else "noop"
            results["tuned"] = what
            for name in names:
                if what in ROWS:  # each drain part of the row, at its size
                    for key, n in row_sweeps(what, s, args.work_n):
                        log(f"== tune {PEERS[name].display} ({key})")
                        tuned = tune_peer(PEERS[name], server.url, n, s.row_cap, key)
                        results["peers"][f"{name} {key}"] = tuned
                    continue
                log(f"== tune {PEERS[name].display} ({what})")
                n = args.tune_n
                if only_work:  # half a scenario's drain per configuration, or --work-n
                    n = s.work_n[what] if args.work_n else s.work_n[what] // 2
                results["peers"][name] = tune_peer(PEERS[name], server.url, n, 30.0, what)
            args.no_report = True
        elif args.no_calibration:
            results["calibration"] = {"skipped": True, "note": "--no-calibration"}
        else:
            try:
                results["calibration"] = calibrate(server.port, args.quick, not args.no_install)
            except Exception as exc:
                results["calibration"] = {"skipped": True, "note": f"failed: {exc}"}
        peers = [] if args.tune else [new_peer_run(PEERS[name], server.url) for name in names]
        if peers:
            log("== starting the drivers: " + ", ".join(names))
        for pr in peers:
            try:
                open_peer(pr)
            except Exception as exc:  # never let one peer stop the run
                harness_error(pr, exc, skip=True)
        if peers and (not only_work or {"io_redis", *ROWS} & set(scenarios)):
            try:
                results["interleaved"] = measure_interleaved(
                    [pr for pr in peers if pr.alive],
                    s,
                    server.url,
                    not only_work,
                    scenarios,
                    args.variant,
                )
                # the pickup floor, measured in the latency rounds: a row of its own
                if floor := results["interleaved"].pop("latency_floor", None):
                    results["latency_floor"] = floor
            except Exception as exc:
                traceback.print_exc()
                results["interleaved"] = {"error": f"harness error: {exc}"}
        for pr in peers:
            log(f"== {pr.meta.display}")
            try:
                measure_peer(pr, s, not only_work, scenarios, args.variant)
            except Exception as exc:
                harness_error(pr, exc, skip=False)
            with redis.Redis.from_url(server.url) as client:
                client.flushall()
            pr.res["seconds"] = pr.busy_s
            results["peers"][pr.meta.name] = pr.res
            log(f"   {pr.meta.display} took {pr.busy_s:.0f} s")
    finally:
        for pr in peers:
            pr.close()
        server.close()
    results["seconds"] = time.monotonic() - t_start
    results["loadavg_end"] = os.getloadavg()
    out = write_results(results, args, only_work)
    if not args.no_report:
        render_report(out, Path(args.report_dir))
    return 0


def takes_part(name: str, scenarios: tuple[str, ...]) -> bool:
    """Whether peer ``name`` runs any of ``scenarios`` (a real-work scenario: the peers
    of the classic rows; a feature row: those its PeerMeta lists)."""
    meta = PEERS[name]
    return any(meta.classic if x in SCENARIOS else x in meta.rows for x in scenarios)


def row_sweeps(row: str, s: Settings, work_n: int | None) -> list[tuple[str, int]]:
    """``--tune --scenario ROW``: the sweeps of a feature row (its drain parts, as the
    peer modules' TUNE names them: "row.part") and the jobs each drain."""
    return [
        (f"{row}.{part}", work_n or s.row_n[f"{row}.{part}"])
        for part, (what, _, _) in ROW_PARTS[row].items()
        if what == "drain"
    ]


if __name__ == "__main__":
    sys.exit(main())
