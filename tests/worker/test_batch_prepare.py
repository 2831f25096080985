"""A batch's items prepared together (``Executor.prepare_batch``): the common item takes a
shorter path, and every item ends as ``Executor.prepare`` would prepare it alone. IO-free:
the app is never connected."""

from __future__ import annotations

from typing import Any

import orjson

import durq
from durq.codec import PayloadCodec
from durq.models import Job
from durq.worker.executor import Executor


def job(n: int, data: Any, codec: PayloadCodec, codec_id: int = 1) -> Job:
    raw = data if isinstance(data, bytes) else orjson.dumps(data)
    return Job("q", f"j{n}", f"1.{n}", 1, 3, 1, 0, None, None, 1.0, 2.0, codec_id, raw, codec)


def test_a_batchs_items_prepared_together_end_as_each_prepared_alone() -> None:
    app = durq.App(url="redis://127.0.0.1:9/0")

    @app.task(queue="events", batch=durq.Batch(max_size=10))
    def store(items: list[durq.Item]) -> None: ...

    @app.task(queue="events-v2", batch=durq.Batch(max_size=10), version=2,
              migrate={1: lambda args, kwargs: ([*args, "upgraded"], kwargs)})  # fmt: skip
    def store_v2(items: list[durq.Item]) -> None: ...

    @app.task(queue="other")
    def other(x: int) -> None: ...

    codec = PayloadCodec(max_payload_bytes=200)
    name = store.name
    payloads: list[Any] = [
        [name, [{"id": 1}], {}],  # the common item
        [name, [], {"a": 1, "b": [2]}],
        [name, [1], {}, {"v": 1}],  # metadata: the long way
        [name, [1], {}, {"v": 7}],  # a version this worker does not run: held
        [name, [1], {}, {"v": "x"}],  # not a version
        [other.name, [1], {}],  # another task's job in the batch's queue
        ["@topic", [1], {}],  # a topic event: the queue's subscriber task
        [name, "not-a-list", {}],
        [name, [1], []],
        [name, [1]],
        {"task": name},
        b"\x00\xffgarbage",
        [name, ["x" * 300], {}],  # over max_payload_bytes: refused unread
    ]
    specs = [(p, codec, 1) for p in payloads]
    specs.append((b"[1,2]", PayloadCodec("pickle"), 2))  # not JSON
    for task, quick in ((store, {"j0", "j1"}), (store_v2, set())):
        jobs = [job(n, *spec) for n, spec in enumerate(specs)]
        executor = Executor(app, threads=1)
        slow: list[str] = []

        def prepare(j: Job, alone: Any = executor.prepare, slow: list[str] = slow) -> Any:
            slow.append(j.id)
            return alone(j)

        executor.prepare = prepare  # type: ignore[method-assign,assignment]
        together = executor.prepare_batch(jobs, task)
        alone = [Executor(app, threads=1).prepare(job(n, *spec)) for n, spec in enumerate(specs)]
        assert together == alone
        assert {j.id for j in jobs} - set(slow) == quick  # the common items' shorter path
    assert Executor(app, threads=1).prepare_batch([], store) == []


def test_a_batchs_payloads_decode_in_one_pass_as_each_alone() -> None:
    # PayloadCodec.decode_each: the value decode returns, or the error it raises in place
    codec = PayloadCodec(max_payload_bytes=20)
    payloads = [
        (1, b'["t",[1],{}]'),
        (1, b"not json"),
        (1, b'["' + b"x" * 30 + b'"]'),  # over max_payload_bytes: refused unread
        (0, b"raw bytes"),
        (3, b"\x80\x04K\x01."),  # pickle, which this queue does not accept
        (9, b"?"),  # an unknown codec
        (1, b"[]"),
    ]
    each = codec.decode_each([c for c, _ in payloads], [d for _, d in payloads])
    assert len(each) == len(payloads)
    for got, (codec_id, data) in zip(each, payloads, strict=True):
        try:
            alone = codec.decode(codec_id, data)
        except ValueError as exc:
            assert type(got) is type(exc) and str(got) == str(exc)
        else:
            assert got == alone
