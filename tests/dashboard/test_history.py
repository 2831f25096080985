"""The charts' arithmetic: rates and means from samples, worker totals turned into
per-interval activity, chart geometry. No Redis, no browser."""

from __future__ import annotations

from durq.dashboard.charts import format_rate, format_seconds, line_chart
from durq.dashboard.data import WorkerEntry
from durq.dashboard.history import History, QueuePoint, Sample, Series, total_of
from durq.dashboard.sampler import _TotalsTracker


def _point(completed: int, failed: int = 0, **activity: float) -> QueuePoint:
    return QueuePoint(3, 0, 1, 0, completed, failed, **activity)


def _sample(at: float, **queues: QueuePoint) -> Sample:
    return Sample(at, queues, total_of(queues.values()))


def test_throughput_is_the_counters_change_per_second() -> None:
    history = History(10)
    history.add(_sample(100.0, a=_point(0), b=_point(10)))
    history.add(_sample(105.0, a=_point(50, 5), b=_point(20)))
    done, failed = history.throughput()
    assert done.points == [(105.0, 12.0)]
    assert failed.points == [(105.0, 1.0)]
    assert history.throughput("b")[0].points == [(105.0, 2.0)]
    recent = history.recent("a")
    assert recent.completed_rate == 10.0
    assert recent.failed_rate == 1.0


def test_a_new_queue_does_not_show_as_a_burst_in_the_sum() -> None:
    history = History(10)
    history.add(_sample(100.0, a=_point(0)))
    history.add(_sample(101.0, a=_point(1), old=_point(1_000_000)))
    assert history.throughput()[0].points == [(101.0, None)]
    assert history.throughput("a")[0].points == [(101.0, 1.0)]
    assert history.throughput("old")[0].points == [(101.0, None)]


def test_latency_is_the_mean_of_each_interval() -> None:
    history = History(10)
    history.add(_sample(1.0, a=_point(0, started=4, pickup_sum=2.0, finished=2, run_sum=1.0)))
    history.add(_sample(2.0, a=_point(0)))
    pickup, run = history.latency("a")
    assert pickup.points == [(1.0, 0.5), (2.0, None)]
    assert run.points == [(1.0, 0.5), (2.0, None)]


def test_the_ring_buffer_keeps_the_newest_samples() -> None:
    history = History(3)
    for i in range(5):
        history.add(_sample(float(i), a=_point(i)))
    assert [s.at for s in history.samples] == [2.0, 3.0, 4.0]
    assert history.depth("a")[0].points == [(2.0, 3.0), (3.0, 3.0), (4.0, 3.0)]


def _worker(wid: str, started: float, **totals: list[float]) -> WorkerEntry:
    return WorkerEntry(wid, "h", 1, list(totals), 1, started, None, 0, [], dict(totals))


def test_worker_totals_become_per_interval_activity() -> None:
    tracker = _TotalsTracker()
    assert tracker.step([_worker("w1", 0.0, q=[10, 5.0, 10, 2.0])], now=100.0) == {}
    step = tracker.step([_worker("w1", 0.0, q=[14, 7.0, 13, 2.6])], now=105.0)
    assert step == {"q": [4.0, 2.0, 3.0, 0.6000000000000001]}
    # a worker started since the last step counts from zero; w1 is gone
    step = tracker.step([_worker("w2", 106.0, q=[2, 1.0, 2, 0.5])], now=110.0)
    assert step == {"q": [2.0, 1.0, 2.0, 0.5]}


def test_chart_geometry() -> None:
    empty = line_chart("nothing", [Series("x", [(1.0, None)])])
    assert empty.empty
    chart = line_chart(
        "t", [Series("a", [(0.0, 1.0), (10.0, 3.0), (20.0, None), (30.0, 2.0), (40.0, 2.5)])]
    )
    assert not chart.empty
    (line,) = chart.lines
    assert len(line.segments) == 2  # a gap where the value is missing
    assert line.last == "2.5"
    assert [t.label for t in chart.y_ticks] == ["0", "1", "2", "3", "4"]
    assert format_seconds(0) == "0"
    assert format_seconds(0.0123) == "12ms"
    assert format_seconds(90) == "90.0s"
    assert format_rate(1234.0) == "1.2k/s"
