"""The results file: its header (settings, machine, server), where it goes, writing it,
and rendering ``RESULTS.md`` + ``results.png`` from it with ``bench/report.py``."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BENCH_DIR, LOGS_DIR, Settings, log
from venvs import TOOLS_ENV, TOOLS_REQUIREMENTS, ensure_env


def new_results(s: Settings, quick: bool) -> dict[str, Any]:
    """The header of a run's results, taken as it starts; the rest is filled as it goes."""
    return {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "settings": s.__dict__,
        "quick": quick,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "peers": {},
        "loadavg_start": os.getloadavg(),
    }


def server_info(server: Any) -> dict[str, Any]:
    """What results.json says of the server (a started ``durq.dev.server.RedisServer``)."""
    import redis

    with redis.Redis.from_url(server.url) as client:
        info = client.info("server")
    return {
        "flavor": server.flavor,
        "version": ".".join(map(str, server.version)),
        "url": server.url,
        "binary": server.binary,
        "config": (
            "durq.dev.server.RedisServer defaults: no persistence (--save '', appendonly no)"
        ),
        "io_threads": info.get("io_threads_active"),
    }


def write_results(results: dict[str, Any], args: argparse.Namespace, only_work: bool) -> Path:
    """Write ``results`` to ``--out``, or by default bench/results.json (--tune:
    bench/tune.json; --scenario: bench/.logs/work-results.json or tune-work.json)."""
    default_out = BENCH_DIR / ("tune.json" if args.tune else "results.json")
    if only_work:
        default_out = LOGS_DIR / ("tune-work.json" if args.tune else "work-results.json")
    out = Path(args.out or default_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    log(f"wrote {out} ({results['seconds']:.0f} s in all)")
    return out


def render_report(results: Path, report_dir: Path) -> None:
    err = ensure_env(TOOLS_ENV, TOOLS_REQUIREMENTS)
    python = str(TOOLS_ENV / "bin" / "python") if err is None else sys.executable
    if err:
        log(f"bench-tools venv unavailable ({err}); RESULTS.md without a chart")
    subprocess.run(
        [python, str(BENCH_DIR / "report.py"), str(results), "--dir", str(report_dir)], check=False
    )
