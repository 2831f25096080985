"""bench/pickup_timeline.py's reading of MONITOR and its stages (no Redis needed)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from bench_modules import load_bench_module


@pytest.fixture(scope="module")
def tl() -> ModuleType:
    """bench/pickup_timeline.py, loaded from its file."""
    return load_bench_module("pickup_timeline.py", "bench_pickup_timeline")


def test_monitor_lines_give_start_source_command_and_name(tl: Any) -> None:
    top = tl.parse_monitor_line(
        b'1700000000.250001 [0 127.0.0.1:5000] "FCALL" "durq_x_dequeue" "17"'
    )
    assert top == tl.Event(1700000000.250001, False, "FCALL", "durq_x_dequeue")
    inner = tl.parse_monitor_line(b'1700000000.250020 [0 lua] "TIME"')
    assert inner == tl.Event(1700000000.250020, True, "TIME", "")
    assert tl.parse_monitor_line(b"OK") is None


def _events(tl: Any) -> list[Any]:
    E = tl.Event
    return [
        E(10.000, False, "BZPOPMIN", "wake"),
        E(10.100, False, "FCALL", "durq_x_enqueue_single"),
        E(10.110, True, "HSET", "jobs"),
        E(10.120, True, "ZADD", "wake"),
        E(10.150, False, "FCALL", "durq_x_dequeue"),
        E(10.160, True, "LPOP", "pending"),
        E(10.300, False, "FCALL", "durq_x_release"),
    ]


def test_a_script_ends_at_its_last_inner_command_without_the_slow_log(tl: Any) -> None:
    assert tl.script_spans(_events(tl)) == [
        ("durq_x_enqueue_single", 10.100, 10.120),
        ("durq_x_dequeue", 10.150, 10.160),
        ("durq_x_release", 10.300, 10.300),
    ]


def test_the_slow_log_gives_each_script_its_end(tl: Any) -> None:
    spans = tl.script_spans(_events(tl), [25_000, 15_000, 1_000])
    assert [round(end - start, 6) for _, start, end in spans] == [0.025, 0.015, 0.001]
    # a slow log that does not match MONITOR's scripts one for one is not used
    assert tl.script_spans(_events(tl), [1, 2]) == tl.script_spans(_events(tl))


def test_a_job_takes_the_first_enqueue_after_its_t0_and_the_fetch_after_it(tl: Any) -> None:
    spans = tl.script_spans(_events(tl))
    assert dict(tl.server_stamps(10.05, spans)) == {
        "enq_start": 10.100,
        "enq_end": 10.120,
        "deq_start": 10.150,
        "deq_end": 10.160,
    }
    assert dict(tl.server_stamps(10.2, spans)) == {}


def test_stages_skip_missing_stamps_and_the_total_spans_t0_to_body(tl: Any) -> None:
    jobs = [
        {"t0": 1.0, "sent": 1.0001, "woke": 1.0005, "fed": 0.0, "parsed": 1.0007, "body": 1.001},
        {
            "t0": 2.0,
            "sent": 2.0002,
            "woke": 2.0006,
            "fed": 2.0006,
            "parsed": 2.0008,
            "body": 2.0012,
        },
    ]
    values = tl.stage_values(jobs, tl.CLIENT_STAGES)
    assert len(values["6b -> loop hands the bytes to the stream"]) == 1  # job 1 has no "fed"
    assert [round(v, 3) for v in values["total t0 -> body"]] == [1.0, 1.2]
    assert [round(v, 3) for v in values["1 producer: t0 -> request sent"]] == [0.1, 0.2]


def test_summary_keeps_each_rounds_p50_and_p99(tl: Any) -> None:
    rounds = [{"s": [float(i) for i in range(100)]}, {"s": [float(i) for i in range(1, 101)]}]
    assert tl.summarize(rounds) == [("s", [50.0, 51.0, 98.0, 99.0])]
