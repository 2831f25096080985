"""OpenTelemetry tracing: a producer span at enqueue, a consumer span around the run,
joined by the W3C trace context carried in the job; nothing at all without a provider."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import durq
from dashboard.apps import build
from dashboard.support import running_worker
from durq.app import tracing
from durq.payloads import parse_call
from helpers import eventually


@pytest.fixture
def app(redis_url: str) -> Iterator[durq.App]:
    test_app = build(redis_url)
    yield test_app
    test_app.close()


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """An SDK tracer provider installed as the global one for this test only."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # set_tracer_provider works once per process; the tests swap the global instead
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    return exporter


def _payload(app: durq.App, queue: str, job_id: str) -> Any:
    info = app.queue(queue).job(job_id)
    assert info is not None
    return info.payload()


def _named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def test_without_a_provider_jobs_carry_no_context_and_runs_make_no_span(
    app: durq.App, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not tracing.enabled()
    assert tracing.enqueue_meta("echo", queue_name) is None

    async def must_not_run(*_args: Any) -> Any:
        raise AssertionError("traced_execution called without a tracer provider")

    monkeypatch.setattr(tracing, "traced_execution", must_not_run)
    handle = app.tasks["echo"].options(queue=queue_name).enqueue("plain")
    assert len(_payload(app, queue_name, handle.id)) == 3  # [name, args, kwargs]
    with running_worker(app, queues=[queue_name]):
        assert handle.result(timeout=10) == "plain"


def test_the_worker_span_is_a_child_of_the_producer_span(
    app: durq.App, queue_name: str, spans: InMemorySpanExporter
) -> None:
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("web request") as request_span:
        handle = app.tasks["traced"].options(queue=queue_name, id="traced-1").enqueue("job")
    trace_id = request_span.get_span_context().trace_id

    name, _args, _kwargs, meta = parse_call(_payload(app, queue_name, handle.id))
    assert name == "traced"
    traceparent = meta[tracing.META_KEY]["traceparent"]
    assert traceparent.split("-")[1] == f"{trace_id:032x}"

    with running_worker(app, queues=[queue_name]):
        eventually(lambda: _named(spans, "inside job"), what="the task's own span")

    (create,) = _named(spans, f"create {queue_name}")
    (process,) = _named(spans, f"process {queue_name}")
    (inside,) = _named(spans, "inside job")
    assert create.kind is SpanKind.PRODUCER
    assert create.parent is not None
    assert create.parent.span_id == request_span.get_span_context().span_id
    assert create.attributes is not None
    assert create.attributes["messaging.system"] == "durq"
    assert create.attributes["messaging.destination.name"] == queue_name
    assert create.attributes["messaging.message.id"] == "traced-1"
    assert create.attributes["durq.task"] == "traced"

    assert process.kind is SpanKind.CONSUMER
    assert process.context.trace_id == trace_id
    assert process.parent is not None and process.parent.is_remote
    assert process.parent.span_id == create.context.span_id
    assert process.attributes is not None
    assert process.attributes["messaging.message.id"] == handle.id
    assert process.attributes["durq.task"] == "traced"
    assert process.attributes["durq.attempt"] == 1
    assert process.attributes["durq.outcome"] == "done"
    assert process.status.status_code is StatusCode.UNSET

    # the task's own span (made in its thread) is a child of the run's span
    assert inside.parent is not None and inside.parent.span_id == process.context.span_id
    assert inside.context.trace_id == trace_id


def test_failed_runs_are_error_spans_with_their_outcome(
    app: durq.App, queue_name: str, spans: InMemorySpanExporter
) -> None:
    handle = app.tasks["crash"].options(queue=queue_name).enqueue("always")
    with running_worker(app, queues=[queue_name]):
        eventually(lambda: app.queue(queue_name).stats().dead == 1, what="the dead letter")
        eventually(lambda: len(_named(spans, f"process {queue_name}")) == 2, what="2 spans")
    runs = sorted(_named(spans, f"process {queue_name}"), key=lambda s: s.start_time or 0)
    assert [r.attributes["durq.attempt"] for r in runs if r.attributes] == [1, 2]
    assert [r.attributes["durq.outcome"] for r in runs if r.attributes] == ["retry", "dead"]
    for run in runs:
        assert run.status.status_code is StatusCode.ERROR
        assert "upstream refused always" in (run.status.description or "")
        assert run.attributes is not None and run.attributes["messaging.message.id"] == handle.id
    (create,) = _named(spans, f"create {queue_name}")
    assert {r.context.trace_id for r in runs} == {create.context.trace_id}


def test_a_job_without_trace_context_gets_a_root_span(
    app: durq.App, queue_name: str, spans: InMemorySpanExporter
) -> None:
    with durq.Queue(queue_name, app.url) as queue:
        queue.enqueue(["echo", ["raw"], {}])  # enqueued by hand: no metadata at all
    with running_worker(app, queues=[queue_name]):
        eventually(lambda: _named(spans, f"process {queue_name}"), what="the run's span")
    (process,) = _named(spans, f"process {queue_name}")
    assert process.parent is None
    assert process.attributes is not None and process.attributes["durq.outcome"] == "done"
