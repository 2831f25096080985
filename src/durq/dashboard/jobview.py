"""How a job is shown: its payload as text (never unpickled), and the numbers of its
life (attempts, deliveries, waits). Pure functions, no IO."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from durq.app.tracing import META_KEY
from durq.codec import Codec, PayloadCodec
from durq.errors import DurqError
from durq.models import JobInfo
from durq.payloads import decode_result, parse_call, result_summary
from durq.redaction import Redact

__all__ = ["PayloadView", "job_numbers", "payload_view", "reason_fields"]

MAX_SHOWN = 64 * 1024  # characters of a payload shown on a page at most
_PREVIEW = 160  # characters of a payload in the dead-letter list
_CODEC_NAMES = {int(c): c.name.lower() for c in Codec}


@dataclass(frozen=True)
class PayloadView:
    """A payload ready to show.

    ``kind``: ``task`` (a durq task call: ``task``, ``args``, ``kwargs`` set),
    ``data`` (any other decoded value), ``hidden`` (payloads are not shown),
    ``opaque`` (pickled, or undecodable: only its size).
    """

    kind: str
    codec: str
    size: int
    text: str = ""  # the payload (or the call's arguments) as indented JSON, truncated
    call: str = ""  # a task call on one line: name("a", 1, k=true), truncated
    task: str | None = None
    trace_id: str | None = None
    note: str = ""

    @property
    def preview(self) -> str:
        """One short line for lists."""
        if self.kind == "task":
            return self.call
        if self.kind == "data":
            return " ".join(self.text.split())[:_PREVIEW]
        return self.note


def _dump(value: Any) -> str:
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2, default=repr).decode()
    if len(text) > MAX_SHOWN:
        return text[:MAX_SHOWN] + f"\n… ({len(text) - MAX_SHOWN} more characters not shown)"
    return text


def _trace_id(meta: dict[str, Any]) -> str | None:
    carrier = meta.get(META_KEY)
    parent = carrier.get("traceparent") if isinstance(carrier, dict) else None
    parts = parent.split("-") if isinstance(parent, str) else []
    return parts[1] if len(parts) == 4 else None


def payload_view(info: JobInfo, show: bool, redact: Redact) -> PayloadView:
    """The payload of ``info`` as text, its secrets hidden by ``redact``. Pickled
    payloads are never decoded here: the dashboard's codec refuses them (unpickling
    what Redis holds would run code)."""
    if info.data is None or info.codec_id is None:
        return PayloadView("opaque", "-", 0, note="no payload stored")
    codec = _CODEC_NAMES.get(info.codec_id, f"codec {info.codec_id}")
    size = len(info.data)
    if not show:
        return PayloadView("hidden", codec, size, note=f"{size} bytes (payloads hidden)")
    if info.codec_id == Codec.RAW:
        text = redact.text(repr(info.data[:MAX_SHOWN]))
        return PayloadView("data", codec, size, text=_dump(text))
    try:
        value = info.payload(PayloadCodec())
    except DurqError as exc:
        note = redact.text(f"{size} bytes, not shown: {exc}")
        return PayloadView("opaque", codec, size, note=note)
    except Exception as exc:  # msgpack not installed, or another decoder's complaint
        note = redact.text(f"{size} bytes, not decoded: {exc}")
        return PayloadView("opaque", codec, size, note=note)
    try:
        name, args, kwargs, meta = parse_call(value)
    except ValueError:
        return PayloadView("data", codec, size, text=_dump(redact.value(value)))
    args, kwargs = redact.call(args, kwargs)
    call = {"args": args, "kwargs": kwargs} if kwargs else {"args": args}
    return PayloadView(
        "task",
        codec,
        size,
        text=_dump(call),
        call=_one_line(name, args, kwargs),
        task=name,
        trace_id=_trace_id(meta),
    )


def _one_line(name: str, args: list[Any], kwargs: dict[str, Any]) -> str:
    def js(value: Any) -> str:
        return orjson.dumps(value, default=repr).decode()

    parts = [js(a) for a in args] + [f"{k}={js(v)}" for k, v in kwargs.items()]
    inner = ", ".join(parts)
    if len(inner) > _PREVIEW:
        inner = inner[:_PREVIEW] + "…"
    return f"{name}({inner})"


def reason_fields(info: JobInfo) -> dict[str, Any]:
    """The stored failure reason, with ``kind``, ``type``, ``message`` and ``traceback``
    always present (empty when not recorded)."""
    reason = dict(info.reason or {})
    return {
        "kind": str(reason.pop("reason", "") or ""),
        "type": str(reason.pop("type", "") or ""),
        "message": str(reason.pop("message", "") or ""),
        "traceback": str(reason.pop("traceback", "") or ""),
        "extra": reason,
    }


def job_numbers(info: JobInfo, now: float) -> list[tuple[str, float]]:
    """Derived per-job numbers: waits and ages, in seconds (negative: overdue)."""
    out: list[tuple[str, float]] = []
    if info.enqueued_at is not None:
        out.append(("age", now - info.enqueued_at))
        if info.dequeued_at is not None:
            out.append(("waited before its last start", info.dequeued_at - info.enqueued_at))
        if info.died_at is not None:
            out.append(("enqueue to dead-lettered", info.died_at - info.enqueued_at))
    if info.lease_deadline is not None:
        out.append(("lease left", info.lease_deadline - now))
    if info.due_at is not None:
        out.append(("due in", info.due_at - now))
    return out


@dataclass(frozen=True)
class FinishedView:
    """What a finished job's stored result keeps of it (``durq.worker.summary``), ready
    to show: its task, worker and timings, and, unless payloads are hidden, its
    arguments and its result or error as JSON text."""

    kind: str  # "result" or "error"
    task: str | None
    worker: str | None
    started: float | None
    finished: float | None
    seconds: float | None
    arguments: str | None
    value: str | None


def finished_view(raw: bytes, show: bool, redact: Redact) -> FinishedView:
    """The view of a stored result ``raw`` (``show``: payloads, arguments and results
    shown, through ``redact``)."""
    ok, value = decode_result(raw)
    job = result_summary(raw) or {}
    started, seconds = job.get("started"), job.get("seconds")
    if not (isinstance(started, int | float) and isinstance(seconds, int | float)):
        started = seconds = None
    arguments = None
    if show and "args" in job:
        arguments = _text({"args": job.get("args"), "kwargs": job.get("kwargs")}, redact)
    elif "args_bytes" in job:
        arguments = f"not kept ({job['args_bytes']} bytes of payload)"
    task, worker = job.get("task"), job.get("worker")
    return FinishedView(
        "result" if ok else "error",
        task if isinstance(task, str) else None,
        worker if isinstance(worker, str) else None,
        started,
        None if started is None or seconds is None else started + seconds,
        seconds,
        arguments,
        _text(value, redact) if show else None,
    )


def _text(value: Any, redact: Redact) -> str:
    """``value`` as one line of JSON, its secrets hidden, truncated."""
    return orjson.dumps(redact.value(value), default=repr).decode()[:MAX_SHOWN]
