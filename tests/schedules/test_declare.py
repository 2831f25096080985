"""Bad schedule declarations fail at once, with a message that says what is wrong."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

import durq
from schedules.apps import build


@pytest.fixture
def app() -> durq.App:
    return build("redis://127.0.0.1:1/0", "q")  # never connected: declaring is offline


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron expression"),
        ({"cron": "* * * *"}, "5 fields"),
        ({"cron": "*/5 * * * * *"}, "5 fields"),
        ({"cron": "@reboot"}, "aliases are"),
        ({"cron": "0 0 30 2 *"}, "cron expression"),  # February 30th: never
        ({"cron": "0 3 * * *", "tz": "Mars/Olympus"}, "unknown time zone"),
        ({"cron": "0 3 * * *", "every": 60}, "exactly one of cron= and every="),
        ({}, "exactly one of cron= and every="),
        ({"every": 0.05}, "every must be seconds"),
        ({"every": -1}, "every must be seconds"),
        ({"every": float("nan")}, "every must be seconds"),
        ({"every": True}, "every must be seconds"),
        ({"every": 1, "tz": "Europe/Berlin"}, "tz applies to cron"),
        ({"every": 1, "catch_up": "some"}, "catch_up must be one of"),
        ({"every": 1, "overlap": "queue"}, "overlap must be one of"),
        ({"every": 1, "catch_up": "all", "max_catch_up": 0}, "max_catch_up"),
        ({"every": 1, "start_at": datetime(2030, 1, 1)}, "timezone-aware"),
        ({"every": 1, "start_at": 2000.0, "end_at": 1000.0}, "end_at must be after"),
    ],
)
def test_bad_timing_is_refused_at_declaration(
    app: durq.App, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(durq.InvalidArgument, match=message):
        app.schedule("s", "tick", args=("log",), **options)
    assert "s" not in app.schedules.declared


def test_arguments_must_fit_the_signature(app: durq.App) -> None:
    with pytest.raises(durq.InvalidArgument, match="missing a required argument"):
        app.schedule("s", "add", every=1)
    with pytest.raises(durq.InvalidArgument, match="unexpected keyword argument 'c'"):
        app.schedule("s", "add", every=1, args=(1,), kwargs={"c": 2})
    with pytest.raises(durq.InvalidArgument, match="too many positional"):
        app.schedule("s", "add", every=1, args=(1, 2, 3))
    with pytest.raises(durq.InvalidArgument, match="JSON"):
        app.schedule("s", "add", every=1, args=(object(),))
    with pytest.raises(durq.InvalidArgument, match=r"argument 'a' is '1' \(a str\), expected int"):
        app.schedule("s", "add", every=1, args=("1",))


def test_the_task_must_be_registered(app: durq.App) -> None:
    other = build("redis://127.0.0.1:1/0", "q")
    with pytest.raises(durq.InvalidArgument, match="no task named 'nope'"):
        app.schedule("s", "nope", every=1)
    with pytest.raises(durq.InvalidArgument, match="not registered in this app"):
        app.schedule("s", other.tasks["add"], every=1, args=(1,))
    with pytest.raises(durq.InvalidArgument, match="task must be a task"):
        app.schedule("s", print, every=1)  # type: ignore[arg-type]


def test_names_are_checked_and_unique(app: durq.App) -> None:
    with pytest.raises(durq.InvalidArgument, match="schedule name"):
        app.schedule("bad name", "add", every=1, args=(1,))
    app.schedule("nightly", "add", cron="@daily", args=(1,))
    with pytest.raises(durq.InvalidArgument, match="declared twice"):
        app.schedule("nightly", "add", cron="@daily", args=(1,))


def test_periodic_decorator_declares_a_task_and_its_schedule(app: durq.App) -> None:
    @app.periodic(cron="*/5 * * * *", tz="America/New_York", args=(2,))
    def double(x: int) -> int:
        return 2 * x

    assert isinstance(double, durq.Task)
    assert app.tasks["double"] is double
    schedule = app.schedules.declared["double"]
    assert schedule.cron == "*/5 * * * *"
    assert schedule.queue == "q"

    @app.periodic(name="hourly-add", every=3600, kwargs={"a": 1})
    @app.task(queue="other")
    def adder(a: int) -> int:
        return a

    assert app.schedules.declared["hourly-add"].queue == "other"
    with pytest.raises(durq.InvalidArgument, match="missing a required argument"):

        @app.periodic(every=1)
        def needs(y: int) -> int:
            return y


def test_aliases_and_bounds_are_accepted(app: durq.App) -> None:
    for i, alias in enumerate(("@hourly", "@daily", "@weekly", "@monthly", "@yearly")):
        app.schedule(f"a{i}", "add", cron=alias, args=(1,))
    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    s = app.schedule(
        "b", "add", every=0.1, args=(1,), start_at=start, end_at=start.timestamp() + 60
    )
    assert s.row().every_ms == 100
    assert s.row().start_ms == 1893456000000
