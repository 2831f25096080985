"""The queue protocol without IO: script calls to make and how to read their replies.

Every operation is a generator (an :data:`~durq.protocol.calls.Op`) that yields the
requests it needs (a script call, a pipeline of them, or a blocking wait) and receives
the raw replies; the sync and asyncio queues only drive these generators, so the logic
exists once (see docs/design.md, "One protocol, two front ends").
"""
