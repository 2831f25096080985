"""Socket IO below the drivers: Redis clients from URLs, Cluster routing, the reply spin.

- ``connection``: clients from URLs (TLS, ACL, Unix sockets, Sentinel) and their pools;
- ``redispy``: the fence around redis-py's internals, the only module that uses them: the
  lean exchanges the drivers send requests with, the state durq keeps on redis-py's
  objects, the Sentinel pools;
- ``cluster``: which node serves a slot, and routing a call there;
- ``spin``: how a blocking exchange waits for its reply (a short poll, then a sleep);
- ``packing``: the RESP of the drivers' requests, packed by hiredis (IO-free).

The protocol (``durq.protocol``) and the Lua scripts never import this package.
"""
