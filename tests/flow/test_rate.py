"""durq.Rate, durq.RateLimited and the sharing of limits among shards: checked at
construction, with clear errors."""

from __future__ import annotations

from typing import Any

import pytest

from durq import InvalidArgument, Rate, RateLimited
from durq.limits import FlowInfo, ParkedGroup, merge_flow, shard_settings


def test_a_rate_defaults_to_one_per_interval_without_burst() -> None:
    rate = Rate(20)
    assert (rate.limit, rate.per, rate.burst) == (20, 1.0, 1)
    assert rate.interval == 0.05 and rate.per_second == 20
    assert rate.spec() == "20:1000:1"
    assert Rate.from_spec("20:1000:1") == rate
    assert Rate.from_spec(b"") is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, "limit must be an int in 1.."),
        ({"limit": -5}, "limit must be an int in 1.."),
        ({"limit": 2.5}, "limit must be an int"),
        ({"limit": True}, "limit must be an int"),
        ({"limit": 10, "burst": 0}, "burst must be an int in 1.."),
        ({"limit": 10, "burst": -1}, "burst must be an int in 1.."),
        ({"limit": 10, "per": 0}, "per must be between"),
        ({"limit": 10, "per": -1.0}, "per must be between"),
        ({"limit": 10, "per": float("inf")}, "per must be a number"),
        ({"limit": 10, "per": "1s"}, "per must be a number"),
        ({"limit": 10, "per": 10 * 366 * 86400.0}, "per must be between"),
    ],
)
def test_bad_rates_are_clear_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Rate(**kwargs)


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("100/s", Rate(100)),
        ("5/2.5s", Rate(5, per=2.5)),
        ("30/min", Rate(30, per=60)),
        ("1000/h", Rate(1000, per=3600)),
        ("100/s,burst=10", Rate(100, burst=10)),
        (" 7 / 250ms ", Rate(7, per=0.25)),
    ],
)
def test_rates_parse_from_text_and_print_back(text: str, rate: Rate) -> None:
    assert Rate.parse(text) == rate
    assert Rate.parse(str(rate)) == rate


@pytest.mark.parametrize("text", ["", "fast", "100", "100/", "100/week", "0/s", "5/s,burst=0"])
def test_bad_rate_texts_are_refused(text: str) -> None:
    with pytest.raises(InvalidArgument):
        Rate.parse(text)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((-1,), "retry_after must be a number of seconds"),
        ((float("nan"),), "retry_after"),
        (("5",), "retry_after"),
        ((None,), "retry_after"),
    ],
)
def test_rate_limited_refuses_a_bad_delay(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        RateLimited(*args)


def test_rate_limited_scopes() -> None:
    assert RateLimited(2).scope == "group"
    assert RateLimited(0.5, scope="queue").retry_after == 0.5
    with pytest.raises(InvalidArgument, match="scope"):
        RateLimited(1, scope="worker")  # type: ignore[arg-type]


def test_shards_share_the_queue_rate_and_max_active() -> None:
    settings = {"rate": Rate(100, burst=8), "max_active": 10, "group_rate": Rate(5)}
    shares = [shard_settings(settings, 4, i) for i in range(4)]
    assert {s["rate"] for s in shares} == {Rate(100, per=4.0, burst=2)}
    assert sum(s["rate"].per_second for s in shares) == pytest.approx(100)
    assert [s["max_active"] for s in shares] == [3, 3, 2, 2]
    assert {s["group_rate"] for s in shares} == {Rate(5)}  # a group lives in one shard
    assert shard_settings({"rate": None, "max_active": None}, 4, 0) == {
        "rate": None,
        "max_active": None,
    }
    with pytest.raises(InvalidArgument, match="shared by 4 shards"):
        shard_settings({"max_active": 3}, 4, 0)


def test_merged_shard_states_add_up() -> None:
    def info(active: int, parked: list[ParkedGroup]) -> FlowInfo:
        return FlowInfo(
            name="q~0", rate=Rate(100, per=2.0), group_rate=None, group_rates={},
            group_rates_total=0, max_active=3, active=active, paused_until=None, started=5,
            rate_limited=1, ready=10, waiting=4, parked=len(parked), parked_groups=parked,
            server_time=100.0,
        )  # fmt: skip

    merged = merge_flow(
        "q", [info(1, [ParkedGroup("b", 103, 2)]), info(2, [ParkedGroup("a", 101, 1)])]
    )
    assert merged.rate == Rate(100, per=1.0, burst=2)
    assert (merged.max_active, merged.active, merged.started, merged.waiting) == (6, 3, 10, 8)
    assert [g.name for g in merged.parked_groups] == ["a", "b"]
