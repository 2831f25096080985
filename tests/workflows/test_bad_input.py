"""Bad workflows are refused at enqueue(), with a clear error and nothing written."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import redis

import durq
from durq.app.task import TaskConfig
from workflows.apps import build


def _nothing_written(raw: redis.Redis, queue: str) -> None:
    assert list(raw.scan_iter(match=f"durq:{{{queue}*", count=1000)) == []


def _cases(app: durq.App, log: str) -> dict[str, tuple[Callable[[], Any], str]]:
    t = app.tasks
    sq, collect, double, shout, total = (
        t["square"], t["collect"], t["double"], t["shout"], t["total"]
    )  # fmt: skip
    looped = durq.chain(sq.s(log, 1))
    looped.steps.append(looped)
    nested = durq.group([sq.s(log, 1)])
    nested.steps.append(durq.chain(sq.s(log, 2), nested))
    stranger = build(app.url, default_queue=app.default_queue)
    # a Task made by hand: the App does not know it, its workers would not run it
    ghost: durq.Task[Any, Any] = durq.Task(
        app, lambda x=None: x, "ghost", TaskConfig(queue=app.default_queue)
    )
    return {
        "empty group": (lambda: durq.group([]).enqueue(), "empty group"),
        "empty chain": (lambda: durq.chain().enqueue(), "empty chain"),
        "empty nested group": (
            lambda: durq.chain(sq.s(log, 1), durq.group([])).enqueue(),
            "empty group",
        ),
        "a cycle": (lambda: looped.enqueue(), "cycle"),
        "a cycle through nesting": (lambda: nested.enqueue(), "cycle"),
        "a task of another app": (
            lambda: durq.chain(sq.s(log, 1), stranger.tasks["square"].s(log, 2)).enqueue(),
            "another App",
        ),
        "an unregistered task": (
            lambda: durq.chain(sq.s(log, 1), ghost.s()).enqueue(),
            "not registered",
        ),
        "an unregistered first task": (
            lambda: durq.group([ghost.s()]).enqueue(),
            "not registered",
        ),
        "too many arguments": (lambda: durq.group([sq.s(log, 1, 2, 3)]).enqueue(), "square()"),
        "a missing argument": (lambda: durq.group([sq.s(log)]).enqueue(), "square()"),
        "an argument of the wrong type": (
            lambda: durq.group([sq.s(log, "1")]).enqueue(),
            "square(): argument 'i' is '1' (a str), expected int",
        ),
        "no room for the previous result": (
            lambda: durq.chain(sq.s(log, 1), sq.s(log, 2, 0.0)).enqueue(),
            "previous step's result",
        ),
        "a callback without a parameter for the results": (
            lambda: durq.group([sq.s(log, 1)]).then(t["echo"].s(1)).enqueue(),
            "previous step's result",
        ),
        "a result type the next step refuses": (
            lambda: durq.chain(double.si(1), shout.s()).enqueue(),
            "declared str",
        ),
        "a list for an int": (
            lambda: durq.group([double.si(1)]).then(double.s()).enqueue(),
            "declared int",
        ),
        "arguments that are not JSON": (
            lambda: durq.group([collect.s([1], log, key=object())]).enqueue(),
            "collect()",
        ),
        "an unknown failure policy": (
            lambda: durq.group([sq.s(log, 1)]).enqueue(on_failure="retry"),
            "on_failure",
        ),
        "a step with an id": (
            lambda: durq.group([sq.options(id="x").s(log, 1)]).enqueue(),
            "takes no id option",
        ),
        "not a step": (lambda: durq.chain(sq.s(log, 1), "total").enqueue(), "not str"),  # type: ignore[arg-type]
        "a bad workflow id": (lambda: durq.group([sq.s(log, 1)]).enqueue(id=""), "job id"),
        "a group of one call": (lambda: durq.group(sq.s(log, 1)).enqueue(), "iterable"),  # type: ignore[arg-type]
        "accepted for comparison": (lambda: durq.chain(total.si([1]), double.s()), ""),
    }


CASES = [
    "empty group", "empty chain", "empty nested group", "a cycle", "a cycle through nesting",
    "a task of another app", "an unregistered task", "an unregistered first task",
    "too many arguments", "a missing argument", "no room for the previous result",
    "a callback without a parameter for the results", "a result type the next step refuses",
    "a list for an int", "arguments that are not JSON", "an unknown failure policy",
    "a step with an id", "not a step", "a bad workflow id", "a group of one call",
]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_refused_at_enqueue(
    case: str, wapp: durq.App, log: str, raw: redis.Redis
) -> None:
    make, message = _cases(wapp, log)[case]
    with pytest.raises(durq.InvalidArgument, match=re.escape(message)):
        make()
    _nothing_written(raw, wapp.default_queue)


def test_matching_types_pass(wapp: durq.App, log: str, raw: redis.Redis) -> None:
    t = wapp.tasks
    durq.chain(t["total"].si([1]), t["double"].s(), t["echo"].s()).enqueue()
    durq.group([t["double"].si(1)]).then(t["total"].s()).enqueue()
    assert list(raw.scan_iter(match=f"durq:{{{wapp.default_queue}}}:wf:*"))
