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
