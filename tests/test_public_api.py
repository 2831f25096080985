"""The public API: what ``durq`` exports, and the blocking twin of the asyncio queue."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import pytest

import durq
import durq._async
from durq import AsyncQueue, Queue, errors, models


def test_all_lists_every_public_name_and_only_existing_ones() -> None:
    # the names are imported on first use (durq.__getattr__): its table is the list
    lazy = set(durq._EXPORTS)
    assert set(durq.__all__) - {"__version__"} == lazy
    assert len(durq.__all__) == len(set(durq.__all__))
    for name in durq.__all__:
        assert hasattr(durq, name), name
        assert name in dir(durq), name
    public = {
        name
        for name, value in vars(durq).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public <= set(durq.__all__)


def test_every_name_of_durq_all_resolves_to_the_object_of_its_module() -> None:
    for name, module in durq._EXPORTS.items():
        assert getattr(durq, name) is getattr(importlib.import_module(module), name), name
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        durq.NoSuchName  # noqa: B018


@pytest.mark.parametrize("module", [errors, models])
def test_every_error_and_model_is_exported(module: types.ModuleType) -> None:
    for name in module.__all__:
        assert name in durq.__all__, f"{module.__name__}.{name} is not exported by durq"
        assert getattr(durq, name) is getattr(module, name)


def test_every_durq_error_derives_from_durq_error_but_what_a_task_raises() -> None:
    raised_by_tasks = {"Retry", "Fail", "RateLimited"}  # control flow, caught by the worker
    for name in errors.__all__:
        derives = issubclass(getattr(errors, name), durq.DurqError)
        assert derives == (name not in raised_by_tasks), name


def _public_methods(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and callable(member)
    }


def _twin_name(name: str) -> str:
    return {"aclose": "close"}.get(name, name)


def _front_end_classes() -> list[tuple[type, type]]:
    """Each public class of durq._async with its generated twin in durq._sync."""
    pairs = []
    for info in pkgutil.iter_modules(durq._async.__path__):
        async_module = importlib.import_module(f"durq._async.{info.name}")
        sync_module = importlib.import_module(f"durq._sync.{info.name}")
        for name, cls in vars(async_module).items():
            public = not name.startswith("_")
            if public and inspect.isclass(cls) and cls.__module__ == async_module.__name__:
                pairs.append((cls, getattr(sync_module, name.removeprefix("Async"))))
    return pairs


PAIRS = _front_end_classes()
METHODS = [
    (a, s, name) for a, s in PAIRS for name in sorted(_public_methods(a))
]  # fmt: skip


def test_the_asyncio_queue_and_its_twin_are_among_the_front_end_classes() -> None:
    assert (AsyncQueue, Queue) in PAIRS


@pytest.mark.parametrize(("async_cls", "sync_cls"), PAIRS, ids=lambda c: c.__name__)
def test_every_public_method_of_an_asyncio_class_has_a_twin(
    async_cls: type, sync_cls: type
) -> None:
    assert {_twin_name(n) for n in _public_methods(async_cls)} == set(_public_methods(sync_cls))


def _method_id(value: object) -> str:
    return value.__name__ if isinstance(value, type) else str(value)


@pytest.mark.parametrize(("async_cls", "sync_cls", "name"), METHODS, ids=_method_id)
def test_twins_take_the_same_parameters_with_the_same_defaults(
    async_cls: type, sync_cls: type, name: str
) -> None:
    async_sig = inspect.signature(getattr(async_cls, name))
    sync_sig = inspect.signature(getattr(sync_cls, _twin_name(name)))
    assert [(p.name, p.kind, p.default) for p in async_sig.parameters.values()] == [
        (p.name, p.kind, p.default) for p in sync_sig.parameters.values()
    ]


@pytest.mark.parametrize(("async_cls", "sync_cls", "name"), METHODS, ids=_method_id)
def test_no_blocking_method_is_a_coroutine_and_asyncqueue_methods_all_are(
    async_cls: type, sync_cls: type, name: str
) -> None:
    assert not inspect.iscoroutinefunction(getattr(sync_cls, _twin_name(name)))
    if async_cls is AsyncQueue:
        assert inspect.iscoroutinefunction(getattr(async_cls, name)), name


@pytest.mark.parametrize(("async_cls", "sync_cls"), PAIRS, ids=lambda c: c.__name__)
def test_the_constructors_take_the_same_parameters(async_cls: type, sync_cls: type) -> None:
    a = inspect.signature(async_cls).parameters
    s = inspect.signature(sync_cls).parameters
    assert [(p.name, p.kind, p.default) for p in a.values()] == [
        (p.name, p.kind, p.default) for p in s.values()
    ]


def test_both_queues_are_context_managers() -> None:
    assert hasattr(AsyncQueue, "__aenter__") and hasattr(AsyncQueue, "__aexit__")
    assert hasattr(Queue, "__enter__") and hasattr(Queue, "__exit__")


def test_the_version_is_a_string() -> None:
    assert isinstance(durq.__version__, str) and durq.__version__


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("durq.app", ["App"]),
        ("durq.worker", ["Worker", "WorkerConfig", "WorkerState"]),
        ("durq.metrics", ["serve_metrics"]),
        ("durq.redaction", ["Redact", "redact_url"]),
        ("durq.dashboard", ["create_app"]),
        ("durq.contrib.fastapi", ["dashboard", "get_app", "lifespan", "queue"]),
    ],
)
def test_the_import_paths_users_rely_on_keep_working(module: str, names: list[str]) -> None:
    imported = importlib.import_module(module)
    for name in names:
        assert hasattr(imported, name), f"{module}.{name}"


def test_the_deprecated_async_queue_names_of_an_app_warn_and_give_its_asyncio_queues() -> None:
    app = durq.App("redis://127.0.0.1:1", shards={"wide": 2})
    with pytest.warns(DeprecationWarning, match="aqueue"):
        assert app.async_queue("plain") is app.aqueue("plain")
    with pytest.warns(DeprecationWarning, match="asharded_queue"):
        assert app.async_sharded_queue("wide") is app.asharded_queue("wide")
