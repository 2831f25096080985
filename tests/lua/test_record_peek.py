"""lib/core/record_peek.lua reads what lib/core/record.lua's rec_decode reads, and refuses the same.

release and dequeue read each job's header with rec_peek and fall back to rec_decode only
for the rare jobs: a record one accepts and the other refuses would be handed out or
released where it should be quarantined (or the reverse).
"""

from __future__ import annotations

import struct

import redis

from durq import lua
from durq.dev.server import RedisServer
from durq.protocol.record import VERSION

# both readers applied to ARGV[1]: {decoded?, peeked?, then the fields of each}
_PROBE = (
    lua.load("lib/core/record").source
    + """
local raw = ARGV[1]
if ARGV[2] == 'false' then raw = false end
local r = rec_decode(raw)
local p = {rec_peek(raw)}
local out = {r and 1 or 0, p[1] and 1 or 0}
if r then
  for _, v in ipairs({REC_VERSION, r.state, r.prio, r.codec, r.attempts, r.max,
      r.deliveries, r.failures, r.enq, r.deq, r.req, r.flags}) do
    out[#out + 1] = tostring(v)
  end
  out[#out + 1] = r.group
  out[#out + 1] = r.key
  out[#out + 1] = rec_token(r)
end
if p[1] then
  for i = 1, 12 do out[#out + 1] = tostring(p[i]) end
  out[#out + 1] = string.sub(raw, REC_FIXED + 2, p[13] - 1)
  out[#out + 1] = string.sub(raw, p[13] + 1, p[13] + p[14])
  out[#out + 1] = rec_token_of(p[7], p[10])
end
return out
"""
)


def _record(
    state: int = 3, group: bytes = b"g1", key: bytes = b"k", payload: bytes = b"{}"
) -> bytes:
    head = struct.pack(
        ">BBbBHHIHHIHIHIB", VERSION, state, -2, 1, 3, 5, 7, 1,
        0x1234, 0x56789ABC, 0x0001, 0x23456789, 0, 42, 10,
    )  # fmt: skip
    return head + bytes([len(group)]) + group + bytes([len(key)]) + key + payload


def test_peek_and_decode_accept_and_read_the_same(server: RedisServer) -> None:
    good = [
        _record(),
        _record(state=1, group=b"", key=b"", payload=b""),
        _record(state=8, group=b"x" * 255, key=b"y" * 255),
    ]
    bad = [
        _record(state=0),
        _record(state=10),
        b"\x02" + _record()[1:],  # another version
        _record(key=b"kkk", payload=b"")[:-1],  # the key runs past the end
        _record()[:34],  # no key length byte
        b"",
        b"x" * 40,
    ]
    cuts = [_record()[:n] for n in range(40)]
    client = redis.Redis.from_url(server.url)
    try:
        for raw in [*good, *bad, *cuts]:
            out = client.eval(_PROBE, 0, raw, "")
            decoded, peeked = out[0], out[1]
            assert decoded == peeked, raw
            if decoded:
                fields = out[2:]
                half = len(fields) // 2
                assert fields[:half] == fields[half:], raw
        for raw in good:
            assert client.eval(_PROBE, 0, raw, "")[0] == 1
        for raw in bad:
            assert client.eval(_PROBE, 0, raw, "")[0] == 0
        # a missing field (HMGET gives false)
        assert client.eval(_PROBE, 0, b"", "false")[:2] == [0, 0]
    finally:
        client.close()
