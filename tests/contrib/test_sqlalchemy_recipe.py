"""The SQLAlchemy recipe (examples/sqlalchemy_on_commit.py): jobs go out with the
commit, exactly once, and not at all after a rollback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durq

sqlalchemy = pytest.importorskip("sqlalchemy")

from sqlalchemy import Column, Integer, String, create_engine, select  # noqa: E402
from sqlalchemy.orm import Session, declarative_base  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples.sqlalchemy_on_commit import enqueue_on_commit  # noqa: E402

Base = declarative_base()


class Order(Base):  # type: ignore[misc, valid-type]
    __tablename__ = "orders"
    id = Column(Integer, primary_key=True)
    item = Column(String(50))


@pytest.fixture
def engine() -> Iterator[Any]:
    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def app(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    app = durq.App(redis_url, default_queue=queue_name)
    yield app
    app.close()


def test_jobs_go_out_with_the_commit(engine: Any, app: durq.App) -> None:
    receipt = app.task(_receipt)
    queue = app.queue(app.default_queue)
    with Session(engine) as session:
        session.add(Order(id=1, item="book"))
        first = enqueue_on_commit(session, receipt, 1)
        second = enqueue_on_commit(session, receipt.options(id="receipt-2", delay=60), 2)
        assert queue.job(first) is None and queue.job(second) is None  # not before
        session.commit()
    assert getattr(queue.job(first), "state", None) is durq.JobState.PENDING
    assert getattr(queue.job("receipt-2"), "state", None) is durq.JobState.DELAYED
    assert second == "receipt-2"
    assert queue.stats().enqueued == 2


def test_nothing_goes_out_on_rollback(engine: Any, app: durq.App) -> None:
    receipt = app.task(_receipt)
    queue = app.queue(app.default_queue)
    with Session(engine) as session:
        session.add(Order(id=1, item="book"))
        job_id = enqueue_on_commit(session, receipt, 1)
        session.rollback()
        # the session goes on: a later commit does not send the dropped call
        session.add(Order(id=2, item="pen"))
        kept = enqueue_on_commit(session, receipt, 2)
        session.commit()
        assert session.scalars(select(Order.id)).all() == [2]
    assert queue.job(job_id) is None
    assert queue.job(kept) is not None
    assert queue.stats().enqueued == 1


def test_bad_arguments_fail_at_the_call(engine: Any, app: durq.App) -> None:
    receipt = app.task(_receipt)
    with Session(engine) as session, pytest.raises(durq.InvalidArgument):
        enqueue_on_commit(session, receipt, 1, 2)


def _receipt(order_id: int) -> None:
    pass
