"""What a blocking client pays to sleep for a reply: one loopback round trip, asleep
in ``recv`` against polling the socket (``durq.spin``'s reason).

    .venv/bin/python bench/reply_wait.py [--calls 20000] [--passes 3]

One fresh Valkey, one raw socket with a timeout (as redis-py's are), ``LPUSH`` one call
at a time: "sleep" waits in ``recv_into``; "poll" reads the descriptor without sleeping
until the reply is there. Prints wall and CPU µs per call, per pass.
"""

from __future__ import annotations

import argparse
import os
import socket
import time

from durq.dev.server import RedisServer

COMMAND = b"*3\r\n$5\r\nLPUSH\r\n$1\r\nq\r\n$3\r\nabc\r\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    with RedisServer(flavor="valkey") as server:
        host, port = server.url.split("//")[1].split("/")[0].rsplit(":", 1)
        sock = socket.create_connection((host, int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(5.0)
        fd, buffer = sock.fileno(), bytearray(1024)

        def sleep(n: int) -> None:
            for _ in range(n):
                sock.sendall(COMMAND)
                sock.recv_into(buffer)

        def poll(n: int) -> None:
            for _ in range(n):
                sock.sendall(COMMAND)
                while True:
                    try:
                        if os.readv(fd, (buffer,)):
                            break
                    except BlockingIOError:
                        continue

        for i in range(args.passes):
            for name, run in (("sleep", sleep), ("poll", poll)):
                cpu, wall = time.process_time(), time.perf_counter()
                run(args.calls)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                print(
                    f"pass {i + 1} {name:5}: {wall / args.calls * 1e6:6.1f} µs per call, "
                    f"CPU {cpu / args.calls * 1e6:5.1f} µs"
                )
        sock.close()


if __name__ == "__main__":
    main()
