"""bench/drain_ab.py's order and ratios: neither durq tree is favoured (no Redis needed)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from bench_modules import load_bench_module


@pytest.fixture(scope="module")
def ab() -> ModuleType:
    """bench/drain_ab.py, loaded from its file; the bench modules it imports are dropped
    from sys.modules afterwards (bench/ is not a package, its names are plain)."""
    return load_bench_module("drain_ab.py", "bench_drain_ab")


def test_rounds_alternate_ab_then_ba(ab: Any) -> None:
    assert [ab.abba_order(i) for i in range(4)] == [("A", "B"), ("B", "A")] * 2


@pytest.mark.parametrize("rounds", [2, 4, 6])
def test_each_side_runs_first_as_often_as_second(ab: Any, rounds: int) -> None:
    orders = [ab.abba_order(i) for i in range(rounds)]
    assert all(sorted(order) == ["A", "B"] for order in orders)
    assert [order[0] for order in orders].count("A") == rounds // 2


def test_paired_ratios_skip_rounds_without_a_rate(ab: Any) -> None:
    assert ab.paired_ratios([100.0, None, 200.0], [110.0, 50.0, 100.0]) == [1.1, 0.5]


# The io_redis variants as a driver's hello lists them (bench/driver.py's work_entries
# of bench/peers/durq.py's WORK).
WORK = {
    "io_redis": [
        {"label": "async def, 1 process", "task": "io_redis_async", "mode": "p1-c100",
         "style": "async", "desc": "`durq worker -p 1 -c 100`", "procs": 1, "slots": 100},
        {"label": "async def, 2 processes", "task": "io_redis_async", "mode": "p2-c100",
         "style": "async", "desc": "`durq worker -p 2 -c 100`", "procs": 2, "slots": 100},
        {"label": "def, 1 process", "task": "io_redis_sync", "mode": "p1-c20",
         "style": "sync", "desc": "`durq worker -p 1 -c 20`", "procs": 1, "slots": 20},
        {"label": "def, 2 processes", "task": "io_redis_sync", "mode": "p2-c100",
         "style": "sync", "desc": "`durq worker -p 2 -c 100`", "procs": 2, "slots": 100},
    ]
}  # fmt: skip
HELLO_MODES = {"default": "`durq worker -p 1`", "best": "-p 2 -c 100", "p1-c100": "-p 1 -c 100"}


def test_io_modes_are_named_by_style_and_processes(ab: Any) -> None:
    io = ab.io_modes(WORK)
    assert list(io) == ["io-async-p1", "io-async-p2", "io-def-p1", "io-def-p2"]
    assert io["io-def-p1"]["task"] == "io_redis_sync" and io["io-def-p1"]["mode"] == "p1-c20"
    assert ab.io_modes({}) == {}


def test_modes_default_to_the_noop_rows(ab: Any) -> None:
    io = ab.io_modes(WORK)
    assert ab.parse_modes(None, HELLO_MODES, io) == ["default", "best", "p1-c100"]
    assert ab.parse_modes("best, io-def-p2", HELLO_MODES, io) == ["best", "io-def-p2"]
    assert ab.parse_modes("io,io-async-p1", HELLO_MODES, io) == list(io)


def test_unknown_io_mode_is_refused(ab: Any) -> None:
    with pytest.raises(ValueError, match="io-async-p3"):
        ab.parse_modes("io-async-p3", HELLO_MODES, ab.io_modes(WORK))


def test_io_mode_asks_the_driver_for_its_variants_drain(ab: Any) -> None:
    io = ab.io_modes(WORK)
    assert ab.drain_request("io-async-p2", io, 20_000, 15.0) == {
        "mode": "p2-c100",
        "n": 20_000,
        "cap": 15.0,
        "kind": "io_redis_async",
    }
    assert ab.drain_request("best", io, 20_000, 15.0) == {"mode": "best", "n": 20_000, "cap": 15.0}
