"""Topic: fan-out of jobs to every subscription of a topic (asyncio front end).

GENERATED from durq/_async/topic.py by scripts/unasync.py: edit that file.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from redis import Redis

from durq._sync.driver import Driver
from durq._sync.queue import Queue
from durq._sync.retry import retrying
from durq.codec import DEFAULT_MAX_PAYLOAD_BYTES, PayloadCodec
from durq.durability import Durability
from durq.keys import NamespaceKeys, TopicKeys
from durq.models import EnqueueResult, Message
from durq.protocol import lifecycle, namespace
from durq.protocol.args import new_ids
from durq.protocol.calls import Command
from durq.transport import connection

__all__ = ["Topic"]


class Topic:
    """A topic: each job published goes to every subscription, used from blocking code.

    A subscription is a queue of its own (``<topic>/<subscriber>``) with its own leases,
    retries and dead letters; a subscriber added later receives only jobs published
    after it subscribed. Consume a subscription like any queue, e.g.
    ``durq worker app:app -q uploads/thumbs``.

    Args:
        name: the topic name (the rules of queue names, without '/').

    The other arguments (``url``, ``client``, ``namespace``, ``serializer``,
    ``max_payload_bytes``, ``max_attempts``, ``enqueue_retry_for``, ``durability``) are
    those of a queue.
    """

    def __init__(
        self,
        name: str,
        url: str | None = None,
        *,
        client: Redis | None = None,
        namespace: str = "durq",
        serializer: str = "json",
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_attempts: int = 5,
        enqueue_retry_for: float = 10.0,
        durability: Durability | None = None,
    ) -> None:
        self.keys = TopicKeys(name, namespace)
        self.codec = PayloadCodec(serializer, max_payload_bytes)
        self.max_attempts = max_attempts
        self.enqueue_retry_for = enqueue_retry_for
        self.durability = durability
        if client is None:
            self.client = connection.sync_client(url)
            self._owns_client = True
        else:
            connection.check_client(client)
            self.client = client
            self._owns_client = False
        self._driver = Driver(self.client)

    @property
    def name(self) -> str:
        """The topic name."""
        return self.keys.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    def close(self) -> None:
        """Close the connections, if the topic created its own client."""
        if self._owns_client:
            self.client.close()
        else:
            self._driver.release_idle()

    def __enter__(self) -> Topic:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def queue(self, subscriber: str, **options: Any) -> Queue:
        """The queue of a subscription, on this topic's client."""
        name = self.keys.subscription(subscriber)
        return Queue(name, client=self.client, namespace=self.keys.namespace, **options)

    def subscribe(self, subscriber: str) -> str:
        """Add a subscription (idempotent); returns the name of its queue. A topic takes
        at most ``durq.protocol.lifecycle.MAX_SUBSCRIBERS`` (50; InvalidArgument)."""
        name = self.keys.subscription(subscriber)
        self._driver.run(lifecycle.subscribe(self.keys, subscriber))
        self._driver.run(namespace.add_queue(NamespaceKeys(self.keys.namespace), name))
        return name

    def unsubscribe(self, subscriber: str) -> None:
        """Stop publishing to a subscription (jobs already in its queue stay there)."""
        self._driver.execute(Command(("SREM", self.keys.subscribers, subscriber)))

    def subscribers(self) -> list[str]:
        """The current subscriptions, sorted."""
        members = self._driver.execute(Command(("SMEMBERS", self.keys.subscribers)))
        return sorted(m.decode() for m in members)

    def publish(
        self,
        payload: Any,
        *,
        id: str | None = None,
        delay: float = 0,
        priority: int = 0,
        max_attempts: int | None = None,
        group: str | None = None,
        key: str | None = None,
        replace: bool = False,
    ) -> dict[str, EnqueueResult]:
        """Publish one job to every subscription; returns the result per subscriber.
        Options as for ``Queue.enqueue``; the job has the same id in every subscription."""
        message = Message(payload, id, delay, priority, max_attempts, group, key, replace)
        results = self.publish_many([message])
        return {sub: items[0] for sub, items in results.items()}

    def publish_many(
        self,
        payloads: Iterable[Any],
        *,
        delay: float = 0,
        priority: int = 0,
        max_attempts: int | None = None,
        group: str | None = None,
        key: str | None = None,
        replace: bool = False,
    ) -> dict[str, list[EnqueueResult]]:
        """Publish many jobs in one atomic step (see ``publish``)."""
        messages = [p if isinstance(p, Message) else Message(p) for p in payloads]
        if not messages:
            return {}
        # ids are fixed now so that a retry after a lost reply cannot publish twice
        fresh = new_ids(sum(1 for m in messages if m.id is None))
        attempts = self.max_attempts if max_attempts is None else max_attempts

        def attempt() -> dict[str, list[EnqueueResult]]:
            op = lifecycle.publish(
                self.keys,
                self.codec,
                messages,
                delay=delay,
                priority=priority,
                max_attempts=attempts,
                group=group,
                key=key,
                replace=replace,
                durability=self.durability,
                ids=fresh,
            )
            return self._driver.run(op)

        return retrying(attempt, self.enqueue_retry_for)
