"""Payload serialization: JSON by default, msgpack if chosen, pickle only by name.

Every stored payload carries a one-byte codec id, so a consumer knows how it was written
and refuses what its queue does not accept: a queue decodes pickle only when pickle was
chosen for it explicitly (a payload pickled by someone who can write to Redis would
otherwise run code in the worker). ``bytes`` payloads are stored as they are.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import orjson

from durq.errors import (
    InvalidArgument,
    NotSerializable,
    PayloadRefused,
    PayloadTooLarge,
)

__all__ = ["DEFAULT_MAX_PAYLOAD_BYTES", "Codec", "Encoded", "PayloadCodec", "check_json"]

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
_MAX_DEPTH = 200


class Codec(IntEnum):
    """How a stored payload was encoded (the codec byte of the record)."""

    RAW = 0
    JSON = 1
    MSGPACK = 2
    PICKLE = 3


_JSON = int(Codec.JSON)  # see PayloadCodec.decode
_SCALARS = frozenset({str, int, bool, type(None)})
_isfinite = math.isfinite


def _plain(value: Any, depth: int) -> bool:
    """True when ``value`` is plain JSON data (the fast test; see check_json)."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is float:
        return _isfinite(value)
    if depth >= _MAX_DEPTH:
        return False
    if kind is list or kind is tuple:
        for item in value:
            if type(item) not in _SCALARS and not _plain(item, depth + 1):
                return False
        return True
    if kind is dict:
        for k, item in value.items():
            if type(k) is not str:
                return False
            if type(item) not in _SCALARS and not _plain(item, depth + 1):
                return False
        return True
    return False  # subclasses and everything else: the thorough walk decides


def check_json(value: Any, where: str = "payload") -> None:
    """Raise NotSerializable, naming the place, unless ``value`` is plain JSON data.

    Plain JSON data is None, bool, int, finite float, str, list or tuple of plain data,
    and dict with str keys. Anything else (sets, datetimes, bytes inside a structure,
    NaN, objects) would be refused or silently changed by a round trip.
    """
    if _plain(value, 0):
        return
    # the thorough walk: accepts subclasses (IntEnum, StrEnum) and names what it refuses
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        kind = type(item)
        if item is None or kind is bool or kind is str or kind is int:
            continue
        if kind is float or isinstance(item, float):
            if not math.isfinite(item):
                raise NotSerializable(f"{path} is {item!r}, which JSON cannot represent")
            continue
        if isinstance(item, (str, int)):  # str and int subclasses, IntEnum, StrEnum
            continue
        if depth >= _MAX_DEPTH:
            raise NotSerializable(f"{path} is nested more than {_MAX_DEPTH} levels deep")
        if isinstance(item, (list, tuple)):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item))
        elif isinstance(item, dict):
            for k, v in item.items():
                if not isinstance(k, str):
                    raise NotSerializable(f"{path} has a key {k!r} that is not a str")
                stack.append((v, f"{path}[{k!r}]", depth + 1))
        else:
            raise NotSerializable(
                f"{path} is a {kind.__name__}, which is not JSON data "
                "(use str, int, float, bool, None, list or dict; convert it first)"
            )


def _json_dumps(value: Any) -> bytes:
    check_json(value)
    try:
        return orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError) as exc:  # e.g. ints beyond 64 bits, surrogates
        raise NotSerializable(f"payload cannot be encoded as JSON: {exc}") from None


def _msgpack() -> Any:
    try:
        import msgpack  # optional extra: durq[msgpack]
    except ImportError:
        raise InvalidArgument("the msgpack serializer needs: pip install 'durq[msgpack]'") from None
    return msgpack


def _msgpack_dumps(value: Any) -> bytes:
    try:
        data: bytes = _msgpack().packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise NotSerializable(f"payload cannot be encoded as msgpack: {exc}") from None
    return data


def _pickle_dumps(value: Any) -> bytes:
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise NotSerializable(f"payload cannot be pickled: {exc}") from None


_ENCODERS: dict[str, tuple[Codec, Callable[[Any], bytes]]] = {
    "json": (Codec.JSON, _json_dumps),
    "msgpack": (Codec.MSGPACK, _msgpack_dumps),
    "pickle": (Codec.PICKLE, _pickle_dumps),
}


@dataclass(frozen=True, slots=True)
class Encoded:
    """A payload encoded already: ``(codec, data)`` as ``PayloadCodec.encode`` returns
    them. The App checks and encodes each task call once and hands it to its queue as a
    ``Message`` of this payload, which the queue stores as it is."""

    codec: int
    data: bytes


class PayloadCodec:
    """Encodes payloads for one queue and decodes what it accepts.

    Args:
        serializer: ``"json"`` (default), ``"msgpack"`` or ``"pickle"``. Only a queue
            whose serializer is ``"pickle"`` decodes pickled payloads.
        max_payload_bytes: the largest encoded payload accepted (default 1 MiB).
    """

    __slots__ = ("_dumps", "codec", "max_payload_bytes", "serializer")

    def __init__(
        self, serializer: str = "json", max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    ) -> None:
        if serializer not in _ENCODERS:
            raise InvalidArgument(
                f"unknown serializer {serializer!r}: choose one of {sorted(_ENCODERS)}"
            )
        if not isinstance(max_payload_bytes, int) or not 0 < max_payload_bytes <= 256 << 20:
            raise InvalidArgument("max_payload_bytes must be an int in 1..268435456 (256 MiB)")
        if serializer == "msgpack":
            _msgpack()
        self.serializer = serializer
        self.codec, self._dumps = _ENCODERS[serializer]
        self.max_payload_bytes = max_payload_bytes

    def encode(self, value: Any) -> tuple[int, bytes]:
        """Return ``(codec, data)`` for ``value``; bytes are stored as they are, and an
        ``Encoded`` payload as it was encoded."""
        if type(value) is bytes:
            codec, data = Codec.RAW, value
        elif type(value) is Encoded:
            self.check_size(value.data)
            return value.codec, value.data
        else:
            codec, data = self.codec, self._dumps(value)
        self.check_size(data)
        return int(codec), data

    def encode_call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[int, bytes] | None:
        """``encode`` of a task call's payload ``[name, args, kwargs]`` for a JSON queue
        when the arguments are plain JSON data, in one pass; None when they need the
        checking path (another serializer, a subclass of a JSON type, anything
        ``encode`` words an error for)."""
        if self.codec is not Codec.JSON:
            return None
        scalars = _SCALARS
        for item in args:
            if type(item) not in scalars and not _plain(item, 2):
                return None
        for k, item in kwargs.items():
            if type(k) is not str or (type(item) not in scalars and not _plain(item, 2)):
                return None
        try:
            data = orjson.dumps([name, args, kwargs])
        except (TypeError, orjson.JSONEncodeError):  # ints beyond 64 bits, surrogates
            return None
        if len(data) > self.max_payload_bytes:
            return None
        return 1, data  # int(Codec.JSON)

    def check_size(self, data: bytes) -> None:
        """Raise PayloadTooLarge if ``data`` (an encoded payload) is over
        ``max_payload_bytes``: every path in checks it, not only ``encode``."""
        if len(data) > self.max_payload_bytes:
            raise PayloadTooLarge(
                f"payload is {len(data)} bytes encoded; this queue accepts at most "
                f"{self.max_payload_bytes} (max_payload_bytes)"
            )

    def decode_each(self, codecs: Sequence[int], datas: Sequence[bytes]) -> list[Any]:
        """``decode`` of each payload (``codecs[i]``, ``datas[i]``), in one pass (a worker
        decodes every item of a batch); a payload that cannot be decoded has the error
        that ``decode`` raises in its place (a PayloadError, or the InvalidArgument of a
        serializer that is not installed)."""
        out: list[Any] = []
        append = out.append
        loads, limit = orjson.loads, self.max_payload_bytes
        for codec, data in zip(codecs, datas, strict=True):
            if codec == _JSON and len(data) <= limit:  # what decode does first, inline
                try:
                    append(loads(data))
                    continue
                except orjson.JSONDecodeError:
                    pass  # decode words the error
            try:
                append(self.decode(codec, data))
            except ValueError as exc:  # PayloadError and InvalidArgument are ValueErrors
                append(exc)
        return out

    def decode(self, codec: int, data: bytes) -> Any:
        """Return the value stored as ``data`` with ``codec``. A payload over
        ``max_payload_bytes`` is refused unread (PayloadTooLarge): whatever wrote it
        into Redis skipped the limit, and decoding it would cost the reader memory and
        time the limit exists to bound."""
        if len(data) > self.max_payload_bytes:
            raise PayloadTooLarge(
                f"stored payload is {len(data)} bytes; this queue accepts at most "
                f"{self.max_payload_bytes} (max_payload_bytes): not decoded"
            )
        # JSON first, against a plain int: a worker decodes every job it fetches, and
        # comparing with an IntEnum member goes through the enum's class (docs/decisions/)
        if codec == _JSON:
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                raise PayloadRefused(f"stored payload is not valid JSON: {exc}") from None
        if codec == Codec.RAW:
            return data
        if codec == Codec.MSGPACK:
            try:
                return _msgpack().unpackb(data, raw=False)
            except Exception as exc:
                raise PayloadRefused(f"stored payload is not valid msgpack: {exc}") from None
        if codec == Codec.PICKLE:
            if self.serializer != "pickle":
                raise PayloadRefused(
                    "stored payload is pickled, and this queue does not accept pickle "
                    "(choose serializer='pickle' explicitly to allow it)"
                )
            try:
                return pickle.loads(data)  # opted in by name, see above
            except Exception as exc:
                raise PayloadRefused(f"stored payload cannot be unpickled: {exc}") from None
        raise PayloadRefused(f"stored payload has an unknown codec {codec}")
