"""``bench/run.py``'s command line: its flags and their help."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BENCH_DIR, DEFAULT_PEERS, PEERS, ROWS, SCENARIOS


def parse_args(argv: list[str] | None = None, description: str | None = None) -> argparse.Namespace:
    """The parsed flags; ``description`` heads ``--help`` (run.py passes its docstring)."""
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument(
        "--peers",
        "--only",
        dest="peers",
        default=",".join(DEFAULT_PEERS),
        help=f"comma-separated, from: {', '.join(PEERS)} (default: all)",
    )
    p.add_argument(
        "--scenario",
        default=None,
        help=f"run only these 'real work' scenarios or feature rows (comma-separated, "
        f"from: {', '.join(SCENARIOS + ROWS)},\nor 'all'), not the enqueue/memory/drain/"
        "latency figures nor the calibration, with\nthe peers that take part in them "
        "(of --peers); results go to bench/.logs/work-results.json\nunless --out is "
        "given, and no report is rendered unless --report.\nWith --tune: sweep this "
        "scenario's (or feature row's) configurations instead of the no-op drain's",
    )
    p.add_argument(
        "--variant",
        default=None,
        help="with --scenario: only the variants whose label (or feature row part)\n"
        "contains this text or whose configuration is named so (durq: 'async def,\n"
        "1 process', 'p2-c100', ...)",
    )
    p.add_argument("--work-n", type=int, default=None, help="jobs per scenario drain")
    p.add_argument(
        "--no-work", action="store_true", help="skip the 'real work' scenarios in a full run"
    )
    p.add_argument("--quick", action="store_true", help="small sizes, 1 repeat: a few minutes")
    p.add_argument(
        "--repeat", type=int, default=None, help="runs of each noisy figure (3; quick 1)"
    )
    p.add_argument(
        "--out",
        default=None,
        help="results file (default bench/results.json; with --tune bench/tune.json)",
    )
    p.add_argument("--no-calibration", action="store_true")
    p.add_argument(
        "--no-install",
        action="store_true",
        help="never apt-get install redis-tools for the calibration",
    )
    p.add_argument("--no-report", action="store_true", help="skip RESULTS.md / results.png")
    p.add_argument(
        "--report",
        action="store_true",
        help="with --scenario: render RESULTS.md and results.png into --report-dir too",
    )
    p.add_argument("--report-dir", default=str(BENCH_DIR))
    p.add_argument(
        "--tune",
        action="store_true",
        help="instead of the benchmark: drain once with every worker configuration\n"
        "each peer module lists, to choose its BEST (writes --out)",
    )
    p.add_argument("--tune-n", type=int, default=10_000)
    p.add_argument(
        "--drain-cap",
        type=float,
        default=None,
        help="seconds of draining before a drain stops with a partial rate\n"
        "(default 15; quick 10); raise it to always drain all jobs of slow peers",
    )
    return p.parse_args(argv)
