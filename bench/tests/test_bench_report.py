"""bench/report.py's RESULTS.md, with and without the pickup floor of the latency rounds
(results.json's ``latency_floor``; results of runs before it have none)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from bench_modules import BENCH, load_bench_module


@pytest.fixture(scope="module")
def report() -> ModuleType:
    """bench/report.py, loaded from its file."""
    return load_bench_module("report.py", "bench_report")


def _committed() -> dict[str, Any]:
    """The committed results without their floor: as a run before the floor recorded them."""
    results: dict[str, Any] = json.loads((BENCH / "results.json").read_text())
    results.pop("latency_floor", None)
    return results


def _style(p50s: list[float], p99s: list[float], receiver: str) -> dict[str, Any]:
    runs: list[dict[str, Any]] = [
        {
            "n": 500,
            "p50_ms": p50,
            "p99_ms": p99,
            "max_ms": p99 + 1,
            "loadavg": 2.5,
            "desc": f"redis-py 8.1.0 (hiredis): LPUSH -> BRPOP in a {receiver}, no queue",
            "started": f"2026-11-25T03:1{i}:00.000Z",
            "round": i + 1,
            "position": 10 - i,
        }
        for i, (p50, p99) in enumerate(zip(p50s, p99s, strict=True))
    ]

    def summary(key: str) -> dict[str, Any]:
        values = sorted(float(r[key]) for r in runs)
        return {"median": values[len(values) // 2], "min": values[0], "max": values[-1]}

    return {
        "runs": runs,
        "desc": runs[0]["desc"],
        **{k: summary(k) for k in ("p50_ms", "p99_ms", "max_ms")},
    }


def _with_floor() -> dict[str, Any]:
    results = _committed()
    results["latency_floor"] = {
        "blocking": _style([0.41, 0.45, 0.52], [1.1, 1.2, 1.3], "redis.Redis"),
        "asyncio": _style([0.48, 0.55, 0.61], [1.2, 1.25, 1.4], "redis.asyncio.Redis"),
    }
    return results


def _render(report: Any, results: dict[str, Any], tmp_path: Path) -> str:
    out = tmp_path / "RESULTS.md"
    report.write_markdown(results, None, out, None)
    return out.read_text()


def _pickup_rows(text: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in text.splitlines()
        if line.startswith("| pickup latency p50")
    ]


def test_the_committed_results_render_without_a_floor(report: Any, tmp_path: Path) -> None:
    text = _render(report, _committed(), tmp_path)
    assert "| floor: " not in text and "floor in the same rounds" not in text
    assert "### The pickup floor" not in text
    assert _pickup_rows(text)  # the targets are still there


def test_the_floor_rows_sit_in_the_results_table(report: Any, tmp_path: Path) -> None:
    text = _render(report, _with_floor(), tmp_path)
    table = text.split("## Results", 1)[1].split("\n\n")[1].splitlines()
    rows = [line for line in table if line.startswith("| floor:")]
    assert rows == [
        "| floor: redis-py LPUSH → BRPOP, no queue (blocking) | redis-py 8.1.0 | | | | | "
        "0.5 / 1.2 / 2.2 | |",
        "| floor: redis-py LPUSH → BRPOP, no queue (asyncio) | redis-py 8.1.0 | | | | | "
        "0.6 / 1.2 / 2.2 | |",
    ]
    assert all(row.count("|") == table[0].count("|") for row in rows)  # 8 columns
    assert "The floor rows are no framework" in text


def test_the_pickup_targets_show_the_floor_and_keep_their_verdicts(
    report: Any, tmp_path: Path
) -> None:
    before = _pickup_rows(_render(report, _committed(), tmp_path))
    after = _pickup_rows(_render(report, _with_floor(), tmp_path))
    assert [row[0] for row in after] == [row[0] for row in before]
    assert [row[2] for row in after] == [row[2] for row in before]  # pass/fail unchanged
    for old, new in zip(before, after, strict=True):
        assert new[1] == old[1] + (
            "; floor in the same rounds (p50 / p99): blocking 0.45 / 1.20, asyncio 0.55 / 1.25 ms"
        )


def test_the_details_list_every_floor_run(report: Any, tmp_path: Path) -> None:
    text = _render(report, _with_floor(), tmp_path)
    section = text.split("### The pickup floor (redis-py LPUSH → BRPOP, no queue)", 1)[1]
    blocking = next(line for line in section.splitlines() if line.startswith("- blocking"))
    assert re.findall(r"\d\.\d\d / \d\.\d\d / \d\.\d\d at 03:1\d:00 \(place \d+\)", blocking) == [
        "0.41 / 1.10 / 2.10 at 03:10:00 (place 10)",
        "0.45 / 1.20 / 2.20 at 03:11:00 (place 9)",
        "0.52 / 1.30 / 2.30 at 03:12:00 (place 8)",
    ]
