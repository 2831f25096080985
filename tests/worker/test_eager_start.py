"""``durq.worker.eager.start_eagerly``: a coroutine's first step runs in the caller's
turn, the rest in a task, with a task's context, cancel and error behaviour."""

from __future__ import annotations

import asyncio
import contextvars
import logging

import pytest

from durq.worker.eager import start_eagerly

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="outer")


async def test_a_coroutine_that_does_not_suspend_ends_in_the_call_without_a_task() -> None:
    seen: list[str] = []

    async def body() -> None:
        VAR.set("inner")
        seen.append(VAR.get())

    assert start_eagerly(body()) is None
    assert seen == ["inner"]
    assert VAR.get() == "outer"  # its context is its own, as a task's


async def test_the_first_step_runs_at_once_and_a_task_runs_the_rest_in_the_same_context() -> None:
    steps: list[str] = []
    go = asyncio.Event()

    async def body() -> int:
        VAR.set("inner")
        steps.append("first")
        await go.wait()
        steps.append(f"rest {VAR.get()}")
        await asyncio.sleep(0)  # a bare yield passes through as well
        return 7

    task = start_eagerly(body())
    assert steps == ["first"]  # before any loop turn
    assert task is not None
    go.set()
    assert await task == 7
    assert steps == ["first", "rest inner"]
    assert VAR.get() == "outer"


async def test_a_cancel_reaches_the_coroutine() -> None:
    caught: list[str] = []

    async def body() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            caught.append("cancelled")
            raise

    task = start_eagerly(body())
    assert task is not None
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert caught == ["cancelled"]


async def test_an_exception_is_passed_in_and_out_of_later_steps() -> None:
    async def failing() -> None:
        raise ValueError("boom")

    async def body() -> str:
        await asyncio.sleep(0)
        try:
            await failing()
        except ValueError as exc:
            return str(exc)
        return "no"

    task = start_eagerly(body())
    assert task is not None
    assert await task == "boom"


async def test_an_error_in_the_first_step_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def body() -> None:
        raise RuntimeError("bug")

    with caplog.at_level(logging.ERROR, logger="durq.worker"):
        assert start_eagerly(body(), "probe") is None
    assert "probe failed" in caplog.text
