"""bench/floor.py: the LPUSH -> BRPOP pickup floor, on a real server (a receiver process
per run), and its results in the drivers' latency shape."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
import redis

from bench_modules import load_bench_module
from durq.dev.server import RedisServer


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A Valkey of this module's own, started as `make bench` starts its server."""
    server = RedisServer(flavor="valkey")
    server.start()
    try:
        yield server.url
    finally:
        server.close()


@pytest.fixture(scope="module")
def floor() -> ModuleType:
    """bench/floor.py, loaded from its file."""
    return load_bench_module("floor.py", "bench_floor")


@pytest.mark.parametrize("style", ["blocking", "asyncio"])
def test_a_floor_run_measures_every_value_and_leaves_no_key(
    floor: Any, redis_url: str, style: str
) -> None:
    run = floor.measure_floor(redis_url, style, 20, 0.005)
    assert run["n"] == 20 and run["style"] == style
    assert 0 < run["min_ms"] <= run["p50_ms"] <= run["p99_ms"] <= run["max_ms"] < 1000
    assert "BRPOP" in run["desc"] and "redis-py" in run["desc"]
    assert run["send_s"] >= 19 * 0.005
    with redis.Redis.from_url(redis_url) as client:
        assert client.exists(floor.KEY) == 0


def test_an_unknown_style_is_refused_before_anything_starts(floor: Any, redis_url: str) -> None:
    with pytest.raises(ValueError, match="style"):
        floor.measure_floor(redis_url, "threads", 5, 0.01)


def test_the_result_has_the_shape_of_a_drivers_latency_run(floor: Any) -> None:
    pairs = [(1.0, 1.0005), (2.0, 2.0004), (3.0, 3.002)]
    run = floor.result(pairs, "asyncio", 0.02)
    assert run["n"] == 3
    assert run["p50_ms"] == pytest.approx(0.5)
    assert run["max_ms"] == pytest.approx(2.0) and run["min_ms"] == pytest.approx(0.4)
    assert {"p99_ms", "loadavg", "desc", "send_s"} <= set(run)
