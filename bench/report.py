"""Render bench/results.json as bench/RESULTS.md and bench/results.png.

    <bench-tools venv>/bin/python bench/report.py bench/results.json \
        [--dir bench] [--tune bench/tune.json]

Runs in the bench-tools venv (matplotlib); without matplotlib it writes the
Markdown and says the chart is missing. ``bench/run.py`` calls it at the end of a run.
Its parts: ``report_markdown`` (the page, section by section), ``report_details`` (every
run, and the sweep), ``report_targets``, ``report_work`` (the real-work rows),
``report_floor`` (the pickup floor's lines), ``report_chart`` and ``report_format`` (the
cells).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from report_chart import write_chart
from report_markdown import write_markdown

HERE = Path(__file__).resolve().parent


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
