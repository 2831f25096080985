"""The benchmark's round-robin order (bench/run.py): no framework is favoured.

The rows the issue-19 targets compare across frameworks are measured in rounds; these
check the order of those rounds, which is plain arithmetic (no Redis, no peers).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from bench_modules import load_bench_module


@pytest.fixture(scope="module")
def run() -> ModuleType:
    """bench/run.py, loaded from its file (bench/ is not a package; run.py puts bench/
    on sys.path for its own imports: `common`, `interleaved` and the other parts)."""
    return load_bench_module("run.py", "bench_run")


NAMES = ["durq", "rq", "celery", "dramatiq", "arq", "saq", "taskiq", "taskiq-list", "huey"]


@pytest.mark.parametrize("k", [1, 2, 3, 9])
@pytest.mark.parametrize("repeat", [1, 2, 3, 5])
def test_every_round_runs_every_framework_once(run: Any, k: int, repeat: int) -> None:
    names = NAMES[:k]
    for i in range(repeat):
        assert sorted(run.round_order(names, i, repeat)) == sorted(names)


@pytest.mark.parametrize("k", [2, 3, 9])
@pytest.mark.parametrize("repeat", [2, 3])
def test_each_framework_takes_a_different_place_each_round(run: Any, k: int, repeat: int) -> None:
    """Over the rounds no framework keeps its place (first, or last after a peer that
    heated the machine): with at least as many frameworks as rounds, every place differs."""
    if repeat > k:
        pytest.skip("more rounds than places")
    names = NAMES[:k]
    orders = [run.round_order(names, i, repeat) for i in range(repeat)]
    for name in names:
        places = [order.index(name) for order in orders]
        assert len(set(places)) == len(places), (name, orders)


def test_nine_frameworks_three_rounds_spread_early_mid_late(run: Any) -> None:
    orders = [run.round_order(NAMES, i, 3) for i in range(3)]
    assert orders[0] == NAMES
    for name in NAMES:
        thirds = sorted(order.index(name) // 3 for order in orders)
        assert thirds == [0, 1, 2], (name, orders)


def test_the_note_lists_the_rows_measured_round_robin(run: Any) -> None:
    note = run.interleaved_note(["enqueue single", "latency", "io_redis"])
    assert note.startswith("single enqueue, pickup latency (with its variants) and the ")
    assert "round-robin" in note
    assert "pickup floor" in note
    assert "floor" not in run.interleaved_note(["io_redis"])


@pytest.fixture(scope="module")
def inter() -> ModuleType:
    """bench/interleaved.py, loaded from its file."""
    return load_bench_module("interleaved.py", "bench_interleaved")


def _phases(inter: Any) -> dict[str, Any]:
    phases = inter.interleaved_phases(inter.Settings(), "redis://unused", True, ("io_redis",), None)
    return {ph.name: ph for ph in phases}


def test_only_the_latency_rounds_take_the_floor(inter: Any) -> None:
    phases = _phases(inter)
    assert [label for label, _ in phases["latency"].floor] == [
        "floor (blocking)",
        "floor (asyncio)",
    ]
    for name in ("enqueue single", "io_redis"):
        assert phases[name].floor is None
        for i in range(3):
            assert inter.phase_order(phases[name], NAMES, i, 3) == inter.round_order(NAMES, i, 3)


def test_the_floor_is_rotated_through_the_latency_rounds_like_a_framework(inter: Any) -> None:
    latency = _phases(inter)["latency"]
    orders = [inter.phase_order(latency, NAMES, i, 3) for i in range(3)]
    assert orders[0] == [*NAMES, inter.FLOOR]  # after the frameworks in the first round
    for order in orders:
        assert sorted(order) == sorted([*NAMES, inter.FLOOR])
    places = [order.index(inter.FLOOR) for order in orders]
    assert len(set(places)) == 3, orders  # late, early, midway: never the same place
    assert sorted(p * 3 // len(orders[0]) for p in places) == [0, 1, 2]


def test_the_floors_entry_has_each_styles_runs_and_summaries(inter: Any) -> None:
    def run(p50: float) -> dict[str, Any]:
        return {"p50_ms": p50, "p99_ms": 2 * p50, "max_ms": 3 * p50, "desc": "redis-py"}

    runs = {"floor (blocking)": [run(0.4), run(0.6)], "floor (asyncio)": [run(0.5)]}
    entry = inter.floor_entry(runs, [])
    assert set(entry) == {"blocking", "asyncio"}
    assert entry["blocking"]["p50_ms"] == {"median": 0.5, "min": 0.4, "max": 0.6, "n": 2}
    assert entry["asyncio"]["runs"] == runs["floor (asyncio)"]
    assert entry["asyncio"]["desc"] == "redis-py"
    failed = inter.floor_entry({"floor (asyncio)": [run(0.5)]}, ["floor (blocking): boom"])
    assert set(failed) == {"asyncio", "errors"}
