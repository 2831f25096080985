"""Topics for tasks: every subscriber task runs for each event published.

    uploads = app.topic("uploads")

    @uploads.subscriber("thumbs")
    def make_thumbnail(path: str) -> None: ...

    @uploads.subscriber("metadata", max_attempts=10)
    async def extract_metadata(path: str) -> None: ...

    uploads.publish("photos/cat.png")     # both tasks run, each with its own retries

A subscriber task is the task named ``<topic>/<subscriber>`` on the queue of the same
name; a worker consuming that queue registers the subscription when it starts (or call
``subscribe()``). An event's payload names the topic (``@<topic>``), and the worker runs
the subscriber task of the queue it came from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from durq._async.topic import AsyncTopic
from durq._sync.topic import Topic
from durq.app.task import Task
from durq.backoff import Backoff
from durq.codec import check_json
from durq.durability import Durability
from durq.keys import TopicKeys
from durq.models import EnqueueResult, Message
from durq.payloads import TOPIC_MARK, build_call

if TYPE_CHECKING:
    from durq._async.queue import AsyncQueue
    from durq._sync.queue import Queue

__all__ = ["AppTopic", "TopicOwner"]

P = ParamSpec("P")
R = TypeVar("R")


class TopicOwner(Protocol):
    """What a topic uses of the App that declared it. Typed by this protocol rather
    than by ``App``, which imports this module: no import circle."""

    namespace: str
    default_queue: str
    serializer: str
    max_payload_bytes: int
    max_attempts: int
    enqueue_retry_for: float
    durability: Durability | None

    def task(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        timeout: float | None = None,
        lease: float | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]:
        """Register the decorated function as a task."""
        ...

    def queue(self, name: str) -> Queue:
        """The blocking Queue ``name``."""
        ...

    def aqueue(self, name: str, *, client: Any = None) -> AsyncQueue:
        """The AsyncQueue ``name``."""
        ...


class AppTopic:
    """A topic of an App: subscriber tasks and publishing."""

    def __init__(self, app: TopicOwner, name: str) -> None:
        self.app = app
        self.keys = TopicKeys(name, app.namespace)
        self.name = name

    def subscriber(
        self,
        subscriber: str,
        *,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        timeout: float | None = None,
        lease: float | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]:
        """Register the decorated function as the task of subscription ``subscriber``."""
        queue = self.keys.subscription(subscriber)
        return self.app.task(
            name=queue, queue=queue, max_attempts=max_attempts, backoff=backoff,
            timeout=timeout, lease=lease,
        )  # fmt: skip

    def _topic(self) -> Topic:
        return Topic(self.name, client=self.app.queue(self.app.default_queue).client,
                     **self._options())  # fmt: skip

    def _options(self) -> dict[str, Any]:
        return {
            "namespace": self.app.namespace,
            "serializer": self.app.serializer,
            "max_payload_bytes": self.app.max_payload_bytes,
            "max_attempts": self.app.max_attempts,
            "enqueue_retry_for": self.app.enqueue_retry_for,
            "durability": self.app.durability,
        }

    def _message(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Message:
        check_json(list(args), "args")
        check_json(kwargs, "kwargs")
        return Message(build_call(TOPIC_MARK + self.name, list(args), kwargs))

    def subscribe(self, subscriber: str) -> str:
        """Register a subscription now; returns its queue name."""
        return self._topic().subscribe(subscriber)

    def publish(self, *args: Any, **kwargs: Any) -> dict[str, EnqueueResult]:
        """Publish an event: every subscriber task will run with these arguments."""
        results = self._topic().publish_many([self._message(args, kwargs)])
        return {sub: items[0] for sub, items in results.items()}

    async def apublish(self, *args: Any, **kwargs: Any) -> dict[str, EnqueueResult]:
        """``publish`` for asyncio code."""
        client = self.app.aqueue(self.app.default_queue).client
        topic = AsyncTopic(self.name, client=client, **self._options())
        results = await topic.publish_many([self._message(args, kwargs)])
        return {sub: items[0] for sub, items in results.items()}

    def subscription_of(self, queue: str) -> str | None:
        """The subscriber name when ``queue`` is one of this topic's subscriptions."""
        prefix = self.name + "/"
        return queue[len(prefix) :] if queue.startswith(prefix) else None
