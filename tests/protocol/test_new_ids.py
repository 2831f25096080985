"""Job ids made by ``new_ids``: single ids come from spares made ahead."""

from __future__ import annotations

import os
import threading

from durq.protocol.args import new_ids


def test_single_ids_are_distinct_and_well_formed() -> None:
    ids = [new_ids(1)[0] for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(len(i) == 16 and "-" not in i for i in ids)
    many = new_ids(50)
    assert len(set(many)) == 50 and not set(many) & set(ids)


def test_threads_never_share_an_id() -> None:
    taken: list[list[str]] = [[] for _ in range(4)]

    def take(out: list[str]) -> None:
        for _ in range(2000):
            out.append(new_ids(1)[0])

    threads = [threading.Thread(target=take, args=(out,)) for out in taken]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for out in taken for i in out]
    assert len(set(every)) == len(every) == 8000


def test_a_forked_child_does_not_reuse_its_parents_spares() -> None:
    new_ids(1)  # the parent now holds spares
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.write(write, "".join(new_ids(1)[0] for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 1000).decode()
    os.close(read)
    parent = "".join(new_ids(1)[0] for _ in range(10))
    child_ids = {child[i : i + 16] for i in range(0, 160, 16)}
    parent_ids = {parent[i : i + 16] for i in range(0, 160, 16)}
    assert len(child_ids) == 10 and not child_ids & parent_ids
