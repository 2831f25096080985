"""The queue protocol without IO: script calls to make and how to read their replies.

Every operation is a generator (an :data:`~durq.protocol.calls.Op`) that yields the
requests it needs (a script call, a pipeline of them, or a blocking wait) and receives
the raw replies; the sync and asyncio queues only drive these generators, so the logic
exists once (see docs/design.md, "One protocol, two front ends").

- ``lifecycle``: a job's way from enqueue (or publish) through dequeue to release,
  requeue, extend or defer, and waiting for its result;
- ``admin``: inspection and repair (stats, one job, groups, dead letters, settings);
- ``namespace``: what lives in a namespace (queues, shard counts, live workers);
- ``args``: the argument checks and encodings the operations share;
- ``calls``: the requests, and the plumbing between operations and drivers;
- ``record`` and ``status``: the job record's layout and the scripts' status codes.

Nothing here does IO or imports a Redis client: ``make check`` enforces it.
"""
