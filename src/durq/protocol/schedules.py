"""Periodic schedules, without IO: upsert, refill, control and list operations.

A schedule's state lives in its queue's slot (``lua/lib/schedules/keys.lua`` has the key
layout); its ticks are materialised by the dequeue script. Cron times are computed in
Python by a :class:`TickSource` (``durq.app.schedule_spec`` makes them with cronsim), which this
module calls between a read and a write, so it needs no cron code of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from durq import lua
from durq.errors import CorruptQueue
from durq.keys import QueueKeys
from durq.models import ScheduleInfo
from durq.protocol.calls import Arg, Op, Pipeline, ScriptCall, chunk_of, send_all
from durq.protocol.record import STATE_NAMES

__all__ = [
    "LIST_FIELDS",
    "ScheduleRow",
    "TickSource",
    "control",
    "get",
    "list_all",
    "list_page",
    "refill",
    "upsert",
]

#: the fields schedule_list.lua returns per schedule, in its order
LIST_FIELDS = (
    "spec", "ver", "kind", "every", "anchor", "ends", "wm", "horizon", "catch", "cap",
    "grace", "overlap", "paused", "ended", "decl", "origin", "task", "info", "current",
    "last_tick", "last_at", "fired", "skipped", "missed", "created", "updated",
)  # fmt: skip

_MAX_ROUNDS = 5  # upsert rounds lost to concurrent timing changes before giving up
_REFILL_BATCH = 20


class TickSource(Protocol):
    """Computes the ticks of a cron schedule (``durq.cron.CronTiming``)."""

    def ticks(self, after_ms: int, now_ms: int, keep_past: int) -> tuple[list[int], int, int]:
        """Ticks after ``after_ms``: of those at or before ``now_ms`` only the newest
        ``keep_past``, then :data:`durq.cron.CRON_TICKS` future ones. Returns the ticks (ms,
        ascending), the horizon (every tick up to it is returned or was left out) and
        how many past ticks were left out (at least)."""
        ...


@dataclass(frozen=True)
class ScheduleRow:
    """What ``schedule_upsert.lua`` stores for one schedule (built by durq.app.schedule_spec)."""

    name: str
    spec: str  # the timing identity: unchanged means timing and watermark are kept
    kind: str  # "every" or "cron"
    every_ms: int
    start_ms: int
    end_ms: int
    catch_up: str
    max_catch_up: int
    grace_ms: int
    overlap: str
    head: bytes  # the JSON payload up to its tick time
    max_attempts: int
    enabled: bool
    origin: str  # "code" or "api"
    task: str
    info: dict[str, Any]

    def args(self) -> list[Arg]:
        return [
            self.name, self.spec, self.kind, self.every_ms, self.start_ms, self.end_ms,
            self.catch_up, self.max_catch_up, self.grace_ms, self.overlap, self.head,
            self.max_attempts, "1" if self.enabled else "0", self.origin, self.task,
            orjson.dumps(self.info, option=orjson.OPT_SORT_KEYS),
        ]  # fmt: skip


def _call(name: str, keys: QueueKeys, args: Sequence[Arg]) -> ScriptCall:
    return ScriptCall(lua.load(name), keys.vector, args)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _num(value: Any) -> int:
    return int(float(value)) if value not in (None, False, b"") else 0


def _seconds(value: Any) -> float | None:
    ms = _num(value)
    return ms / 1000 if ms else None


def _parse(queue: str, reply: Sequence[Any]) -> list[ScheduleInfo]:
    now = int(reply[0])
    items: list[ScheduleInfo] = []
    width = 4 + len(LIST_FIELDS)
    for i in range(2, len(reply), width):
        name, due, stored, state = reply[i : i + 4]
        f = dict(zip(LIST_FIELDS, reply[i + 4 : i + width], strict=True))
        try:
            info = orjson.loads(f["info"] or b"{}")
        except orjson.JSONDecodeError:
            raise CorruptQueue(f"schedule {_text(name)!r} of {queue!r} is unreadable") from None
        current = _text(f["current"]) if f["current"] else None
        outcome = STATE_NAMES.get(int(state), "finished") if current else None
        items.append(
            ScheduleInfo(
                name=_text(name),
                queue=queue,
                task=_text(f["task"] or b""),
                kind=_text(f["kind"] or b""),
                cron=info.get("cron"),
                tz=info.get("tz"),
                every=info.get("every"),
                start_at=info.get("start_at"),
                end_at=info.get("end_at"),
                catch_up=_text(f["catch"] or b"latest"),
                max_catch_up=_num(f["cap"]),
                overlap=_text(f["overlap"] or b"allow"),
                args=list(info.get("args") or []),
                kwargs=dict(info.get("kwargs") or {}),
                paused=f["paused"] == b"1",
                ended=f["ended"] == b"1",
                origin=_text(f["origin"] or b"api"),
                next_due=None if due in (None, False) else float(due) / 1000,
                last_tick=_seconds(f["last_tick"]),
                last_fired_at=_seconds(f["last_at"]),
                last_job=current,
                last_outcome=outcome,
                fired=_num(f["fired"]),
                skipped=_num(f["skipped"]),
                missed=_num(f["missed"]),
                watermark=_num(f["wm"]) / 1000,
                stored_ticks=max(int(stored), 0),
                spec=_text(f["spec"] or b""),
                version=_num(f["ver"]),
                server_time=now / 1000,
                declared_enabled=f["decl"] != b"0",
            )
        )
    return items


# -- operations ---------------------------------------------------------------------


def upsert(keys: QueueKeys, row: ScheduleRow, source: TickSource | None) -> Op[str]:
    """Create or change a schedule; returns ``created``, ``changed`` (its timing),
    ``updated`` (its job, policies or enabled flag) or ``unchanged``. A cron schedule
    whose timing is new gets its first ticks from ``source``."""
    base = row.args()
    extra: list[Arg] = ["0", ""]
    for _ in range(_MAX_ROUNDS):
        reply = yield _call("schedule_upsert", keys, [*base, *extra])
        status = _text(reply[0])
        if status != "ticks":
            return status
        if source is None:
            raise ValueError(f"schedule {row.name!r}: a cron schedule needs a tick source")
        after = int(reply[1])
        now = int(reply[2])
        ticks, horizon, _dropped = source.ticks(after, now, 0)
        extra = ["1", reply[3], horizon, *ticks]
    raise RuntimeError(f"schedule {row.name!r}: its timing kept changing during the upsert")


def refill(keys: QueueKeys, source_for: Callable[[ScheduleInfo], TickSource | None]) -> Op[int]:
    """Store more ticks for the cron schedules that want them (their stored ticks are
    half used, or ran out during downtime); returns how many were refilled. Past ticks
    are computed only as far as the catch-up policy may fire them."""
    reply = yield _call("schedule_list", keys, ["refill", _REFILL_BATCH])
    calls: list[ScriptCall] = []
    now = int(reply[0])
    raw = {_text(reply[i]): reply[i + 4 : i + 4 + len(LIST_FIELDS)]
           for i in range(2, len(reply), 4 + len(LIST_FIELDS))}  # fmt: skip
    for info in _parse(keys.name, reply):
        source = source_for(info) if info.kind == "cron" else None
        if source is None:
            continue
        f = dict(zip(LIST_FIELDS, raw[info.name], strict=True))
        after = max(_num(f["wm"]), _num(f["horizon"]))
        keep = {"all": max(info.max_catch_up, 1), "latest": 1, "none": 1}.get(info.catch_up, 1)
        ticks, horizon, dropped = source.ticks(after, now, keep)
        calls.append(
            _call("schedule_refill", keys, [info.name, info.spec, horizon, dropped, *ticks])
        )
    if not calls:
        return 0
    replies = yield Pipeline(tuple(calls))
    for r in replies:
        if isinstance(r, Exception):
            raise r
    return sum(int(r) for r in replies)


def control(keys: QueueKeys, action: str, name: str) -> Op[Any]:
    """Pause, resume, remove or trigger schedule ``name``; None when there is none.
    Returns True (pause, remove), the next due time in seconds or False (resume), or
    the id of the job enqueued (trigger)."""
    reply = yield _call("schedule_control", keys, [action, name])
    if reply is None or reply is False:
        return None
    if action == "trigger":
        return _text(reply)
    if action == "resume":
        return int(reply) / 1000 if reply else False
    return True


def list_page(
    keys: QueueKeys, offset: int = 0, limit: int = 100
) -> Op[tuple[int, list[ScheduleInfo]]]:
    """The schedules of the queue in name order (at most 1,000), and how many it has.
    A call reads ``chunk_of("schedule_list")`` (100): a longer page takes one more round
    trip, for all its other calls."""
    offset, limit, size = max(offset, 0), max(min(limit, 1000), 1), chunk_of("schedule_list")
    first = yield _call("schedule_list", keys, ["page", offset, min(size, limit)])
    total, items = int(first[1]), _parse(keys.name, first)
    end = min(offset + limit, total)
    calls = [
        _call("schedule_list", keys, ["page", at, min(size, end - at)])
        for at in range(offset + size, end, size)
    ]
    if calls:
        replies = yield from send_all(calls)
        items += [s for reply in replies for s in _parse(keys.name, reply)]
    return total, items


def list_all(keys: QueueKeys) -> Op[list[ScheduleInfo]]:
    """Every schedule of the queue, in name order (pages of 1000)."""
    out: list[ScheduleInfo] = []
    while True:
        total, items = yield from list_page(keys, len(out), 1000)
        out += items
        if not items or len(out) >= total:
            return out


def get(keys: QueueKeys, names: Sequence[str]) -> Op[list[ScheduleInfo]]:
    """The schedules named (those that exist)."""
    if not names:
        return []
    size = chunk_of("schedule_list")
    calls = [
        _call("schedule_list", keys, ["names", *names[i : i + size]])
        for i in range(0, len(names), size)
    ]
    replies = yield from send_all(calls)
    return [s for reply in replies for s in _parse(keys.name, reply)]
