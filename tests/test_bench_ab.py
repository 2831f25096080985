"""bench/drain_ab.py's order and ratios: neither durq tree is favoured (no Redis needed)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def ab() -> ModuleType:
    """bench/drain_ab.py, loaded from its file; the bench modules it imports are dropped
    from sys.modules afterwards (bench/ is not a package, its names are plain)."""
    spec = importlib.util.spec_from_file_location("bench_drain_ab", BENCH / "drain_ab.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved, had = list(sys.path), set(sys.modules)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
        for name in set(sys.modules) - had:
            file = getattr(sys.modules[name], "__file__", None) or "/"
            if name == spec.name or BENCH in Path(file).parents:
                sys.modules.pop(name, None)
    return module


def test_rounds_alternate_ab_then_ba(ab: Any) -> None:
    assert [ab.abba_order(i) for i in range(4)] == [("A", "B"), ("B", "A")] * 2


@pytest.mark.parametrize("rounds", [2, 4, 6])
def test_each_side_runs_first_as_often_as_second(ab: Any, rounds: int) -> None:
    orders = [ab.abba_order(i) for i in range(rounds)]
    assert all(sorted(order) == ["A", "B"] for order in orders)
    assert [order[0] for order in orders].count("A") == rounds // 2


def test_paired_ratios_skip_rounds_without_a_rate(ab: Any) -> None:
    assert ab.paired_ratios([100.0, None, 200.0], [110.0, 50.0, 100.0]) == [1.1, 0.5]
