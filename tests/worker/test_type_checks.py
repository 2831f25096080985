"""Argument values are checked at enqueue against the task's type hints: a mistake fails
in the caller's code, naming the argument and the type expected, and nothing is sent."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Literal, Optional, TypedDict

import pytest
from pydantic import BaseModel

import durq


class Address(TypedDict):
    city: str
    zip: int


@dataclasses.dataclass
class Point:
    x: float
    y: float
    label: str = ""


class Order(BaseModel):
    id: int
    items: list[str]


@pytest.fixture
def app(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    app = durq.App(redis_url, default_queue=queue_name)

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    def shapes(
        tags: list[str],
        scores: dict[str, float],
        pair: tuple[int, str],
        maybe: Optional[int] = None,  # noqa: UP045 (the spelling users write)
        mode: Literal["fast", "slow"] = "fast",
        *rest: int,
        **extra: bool,
    ) -> None: ...

    @app.task
    def records(address: Address, point: Point, order: Order) -> None: ...

    @app.task(check_types=False)
    def loose(a: int) -> None: ...

    @app.task
    def untyped(a, b=None):  # type: ignore[no-untyped-def]
        ...

    @app.task
    def anything(a: Any, b: object, c: Later) -> None: ...

    @app.task
    def partly(a: int, b: OnlyForTypeCheckers) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    yield app
    app.close()


class Later:
    """A class of the user's own, declared after the task: accepted as any value."""


def _refused(app: durq.App, task: str, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(durq.InvalidArgument) as caught:
        app.tasks[task].enqueue(*args, **kwargs)
    return str(caught.value)


def test_add_enqueued_with_strings_fails_at_enqueue_naming_the_argument_and_the_type(
    app: durq.App, queue_name: str
) -> None:
    # the step: add(a: int, b: int) accepted add.enqueue('1', '2') and returned '12'
    assert _refused(app, "add", "1", "2") == "add(): argument 'a' is '1' (a str), expected int"
    assert _refused(app, "add", 1, b=2.5) == "add(): argument 'b' is 2.5 (a float), expected int"
    with pytest.raises(durq.InvalidArgument, match="argument 'b'"):
        app.tasks["add"].enqueue_many([(1, 2), (3, "4")])  # bulk: the whole batch refused
    assert app.queue(queue_name).stats().pending == 0
    app.tasks["add"].enqueue(1, 2)
    app.tasks["add"].enqueue_many([(1, 2), (3, 4)])
    assert app.queue(queue_name).stats().pending == 3


async def test_aenqueue_checks_types_too(app: durq.App, queue_name: str) -> None:
    with pytest.raises(durq.InvalidArgument, match=r"argument 'a' is '1' \(a str\), expected int"):
        await app.tasks["add"].aenqueue("1", 2)
    with pytest.raises(durq.InvalidArgument, match="argument 'b'"):
        await app.tasks["add"].options(delay=5).aenqueue_many([(1, None)])
    await app.tasks["add"].aenqueue(True, 2)  # a bool is an int, as for type checkers
    assert (await app.aqueue(queue_name).stats()).pending == 1
    await app.aclose()


@pytest.mark.parametrize(
    ("args", "kwargs", "problem"),
    [
        (("a", {}, (1, "x")), {}, "argument 'tags' is 'a' (a str), expected list[str]"),
        (([1], {}, (1, "x")), {}, "argument 'tags' is [1] (a list), expected list[str]"),
        ((["a"], {"s": "high"}, (1, "x")), {}, "argument 'scores'"),
        ((["a"], {}, (1, 2)), {}, "argument 'pair' is (1, 2) (a tuple), expected tuple[int, str]"),
        ((["a"], {}, [1]), {}, "expected tuple[int, str]"),
        ((["a"], {}, (1, "x"), "2"), {}, "argument 'maybe' is '2' (a str), expected int | None"),
        ((["a"], {}, (1, "x")), {"mode": "slower"}, "expected 'fast' | 'slow'"),
        ((["a"], {}, (1, "x"), None, "fast", 1, "2"), {}, "argument 'rest[1]' is '2'"),
        ((["a"], {}, (1, "x")), {"dry": "yes"}, "argument 'dry' is 'yes' (a str), expected bool"),
    ],
)
def test_containers_unions_literals_and_star_arguments_are_checked_item_by_item(
    app: durq.App, args: tuple[Any, ...], kwargs: dict[str, Any], problem: str
) -> None:
    assert problem in _refused(app, "shapes", *args, **kwargs)


def test_well_typed_calls_of_every_kind_are_accepted(app: durq.App) -> None:
    shapes = app.tasks["shapes"]
    shapes.enqueue(["a"], {"s": 1}, (1, "x"))  # an int is a float
    shapes.enqueue([], {}, [2, "y"], None, "slow", 1, 2, dry=True)
    app.tasks["records"].enqueue(
        {"city": "Oslo", "zip": 150}, {"x": 1, "y": 2.5}, {"id": 7, "items": ["book"]}
    )


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (({"city": "Oslo"}, {"x": 1, "y": 2}, {"id": 1, "items": []}), "Address (missing zip)"),
        (
            ({"city": "Oslo", "zip": "0150"}, {"x": 1, "y": 2}, {"id": 1, "items": []}),
            "Address (field 'zip': int)",
        ),
        (
            ({"city": "Oslo", "zip": 1}, {"x": 1, "z": 2}, {"id": 1, "items": []}),
            "argument 'point' is {'x': 1, 'z': 2} (a dict), expected Point (a dict of its fields)",
        ),
        (
            ({"city": "Oslo", "zip": 1}, {"x": 1, "y": 2}, {"id": "seven", "items": []}),
            "argument 'order' is {'id': 'seven', 'items': []} (a dict), expected Order",
        ),
    ],
)
def test_typeddicts_dataclasses_and_pydantic_models_are_checked_as_dicts_of_their_fields(
    app: durq.App, args: tuple[Any, ...], problem: str
) -> None:
    assert problem in _refused(app, "records", *args)


def test_a_task_opts_out_and_hints_it_cannot_check_accept_any_value(app: durq.App) -> None:
    app.tasks["loose"].enqueue("not an int")
    app.tasks["untyped"].enqueue("x", b=[1])
    app.tasks["anything"].enqueue("x", 1, {"any": "thing"})
    # a hint that does not resolve (imported under TYPE_CHECKING) checks nothing, the
    # others still do
    app.tasks["partly"].enqueue(1, "anything")
    assert "argument 'a'" in _refused(app, "partly", "1", "anything")
