"""OpenTelemetry tracing of jobs: a producer span when a task call is enqueued, a
consumer span around its execution, joined by the W3C trace context carried in the job.

The context travels in the task payload's metadata (its 4th element) under ``"trace"``:
``{"traceparent": ..., "tracestate": ...}``, written and read by the globally configured
propagator (``opentelemetry.propagate``). The worker's span is a child of the producer's,
so a trace shows the request that enqueued a job, the job's runs and what they called.

Tracing is on when the application installed an SDK tracer provider
(``opentelemetry.trace.set_tracer_provider`` or ``OTEL_PYTHON_TRACER_PROVIDER``); durq
depends only on ``opentelemetry-api``. Without a provider each hook costs one lookup and
an ``isinstance`` check: no span, no context, nothing added to the payload.

The API is imported once it can matter: an application that set a provider imported
``opentelemetry.trace`` to do so, so while that module is not loaded tracing is off, and
a producer or a worker that does not trace never imports OpenTelemetry (a fast start,
issue 33).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from durq._version import __version__
from durq.payloads import parse_call

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from durq.models import Job

__all__ = ["META_KEY", "enabled", "enqueue_meta", "traced_execution"]

META_KEY = "trace"
"""The key of the job metadata that holds the propagated trace context."""

_SYSTEM = "durq"
_NO_GLOBAL = object()
# read once: configuration by environment is fixed when the process starts
_PROVIDER_FROM_ENV = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
# (provider, tracer): get_tracer builds a new Tracer per call in the SDK, so it is kept
# for as long as the global provider stays the same
_cached: tuple[Any, Tracer] | None = None


class _HasOutcome(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def summary(self) -> str: ...


OutcomeT = TypeVar("OutcomeT", bound=_HasOutcome)


def _provider() -> Any:
    """The global tracer provider, or None while none is set.

    ``trace.get_tracer_provider()`` looks up an environment variable on every call
    (about a microsecond); the module global it reads is checked first, so the answer
    "no provider" costs a few dozen nanoseconds per job. The public call remains the
    fallback, should the API ever drop that global, and serves the environment variable
    configuration (it installs the provider on first use).
    """
    trace: Any = sys.modules.get("opentelemetry.trace")
    if trace is None:  # nobody set a provider through the API
        if not _PROVIDER_FROM_ENV:
            return None
        trace = importlib.import_module("opentelemetry.trace")
    provider = getattr(trace, "_TRACER_PROVIDER", _NO_GLOBAL)
    if provider is None and not _PROVIDER_FROM_ENV:
        return None
    return trace.get_tracer_provider() if provider is None or provider is _NO_GLOBAL else provider


def _tracer() -> Tracer | None:
    """durq's tracer, or None when no tracer provider is configured (the cheap check)."""
    global _cached
    provider = _provider()
    if provider is None:
        return None
    trace = sys.modules["opentelemetry.trace"]  # loaded: _provider found a provider
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    cached = _cached
    if cached is not None and cached[0] is provider:
        return cached[1]
    tracer: Tracer = provider.get_tracer("durq", __version__)
    _cached = (provider, tracer)
    return tracer


def enabled() -> bool:
    """True when a tracer provider is configured, so durq records spans."""
    return _tracer() is not None


def enqueue_meta(task: str, queue: str, job_id: str | None = None) -> dict[str, Any] | None:
    """Record the producer span of one task call and return the job metadata that carries
    its context, or None when tracing is off (the payload then stays ``[name, args,
    kwargs]``).

    The span is the OpenTelemetry messaging "create" span: it marks the moment the job
    was made, within the caller's trace, and ends at once; the job's execution continues
    the trace from it.
    """
    tracer = _tracer()
    if tracer is None:
        return None
    from opentelemetry import propagate
    from opentelemetry.trace import SpanKind

    attributes: dict[str, str] = {
        "messaging.system": _SYSTEM,
        "messaging.operation.type": "create",
        "messaging.destination.name": queue,
        "durq.task": task,
    }
    if job_id is not None:
        attributes["messaging.message.id"] = job_id
    with tracer.start_as_current_span(
        f"create {queue}", kind=SpanKind.PRODUCER, attributes=attributes
    ):
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
    return {META_KEY: carrier} if carrier else None


def _task_and_carrier(job: Job) -> tuple[str | None, Mapping[str, str]]:
    """The task name and the propagated context stored in the job's payload, if any."""
    try:
        name, _args, _kwargs, meta = parse_call(job.payload)
    except Exception:  # an undecodable payload is the executor's to report
        return None, {}
    carrier = meta.get(META_KEY)
    if not isinstance(carrier, dict):
        return name, {}
    return name, {k: v for k, v in carrier.items() if isinstance(k, str) and isinstance(v, str)}


async def traced_execution(job: Job, run: Callable[[Job], Awaitable[OutcomeT]]) -> OutcomeT:
    """Await ``run(job)`` inside a consumer span, a child of the producer's span when the
    job carries a trace context; without a tracer provider, just await it.

    The span is current while the task runs (in its thread too: the thread runner copies
    the context), so spans the task makes join the job's trace. The outcome (done,
    retry, dead, defer) is recorded on the span; retries and dead letters mark it as an
    error with the failure's one-line summary.
    """
    tracer = _tracer()
    if tracer is None:
        return await run(job)
    from opentelemetry import propagate
    from opentelemetry.trace import SpanKind, Status, StatusCode

    task, carrier = _task_and_carrier(job)
    parent = propagate.extract(carrier)
    attributes: dict[str, str | int] = {
        "messaging.system": _SYSTEM,
        "messaging.operation.type": "process",
        "messaging.destination.name": job.queue,
        "messaging.message.id": job.id,
        "messaging.message.delivery_count": job.deliveries,
        "durq.attempt": job.attempt,
        "durq.max_attempts": job.max_attempts,
    }
    if task is not None:
        attributes["durq.task"] = task
    if job.group is not None:
        attributes["durq.group"] = job.group
    with tracer.start_as_current_span(
        f"process {job.queue}", context=parent, kind=SpanKind.CONSUMER, attributes=attributes
    ) as span:
        outcome = await run(job)
        span.set_attribute("durq.outcome", outcome.kind)
        if outcome.kind in ("retry", "dead"):
            span.set_status(Status(StatusCode.ERROR, outcome.summary))
        return outcome
