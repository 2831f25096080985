"""Workflows: chains, groups and callbacks of task calls, with exactly-once fan-in.

    resize = [make_thumb.s(path) for path in paths]
    handle = durq.group(resize).then(build_album.s(album_id)).enqueue()
    handle.result(timeout=60)        # build_album's return value

    durq.chain(fetch.s(url), parse.s(), store.si("done")).enqueue()

A step is a task call made with ``task.s(*args, **kwargs)``. A step that runs after
another receives that one's result as its first positional argument (before ``args``);
after a group it receives the list of the group's results, in the group's order. A step
made with ``task.si(...)`` is immutable: it runs with its own arguments only.
``.then(step)`` on a group or chain appends a callback: ``group(...).then(cb)`` is
``chain(group(...), cb)``. Chains and groups nest.

Everything is checked at ``enqueue()``, before anything is written: empty groups and
chains, steps of tasks the App does not register, cycles, arguments that do not bind to
the task's signature (counting the result it will receive), arguments that are not JSON,
and a declared result type that the next step's first parameter does not accept.

See docs/workflows.md for the guarantees and the failure policies.
"""

from __future__ import annotations

import functools
import inspect
import reprlib
import secrets
import types
import typing
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeAlias, Union

import orjson

from durq._async.retry import retrying as async_retrying
from durq._sync.retry import retrying as sync_retrying
from durq.app import tracing
from durq.app.fleet import consuming, legacy_submit
from durq.app.task import Call, Task
from durq.codec import check_json
from durq.errors import (
    Cancelled,
    InvalidArgument,
    JobNotFound,
    NotSerializable,
    PayloadTooLarge,
    WorkflowFailed,
)
from durq.keys import QueueKeys, check_group, check_job_id, shard_index, shard_name, split_shard
from durq.models import CancelStatus, StepInfo, WorkflowInfo
from durq.payloads import build_call, decode_result
from durq.protocol import workflows as wf
from durq.protocol.args import PRIORITY_RANGE, delay_ms, int_in, new_ids
from durq.protocol.calls import Op
from durq.protocol.control import expiry
from durq.protocol.fleet import OldWorker
from durq.transport.cluster import is_cluster

if TYPE_CHECKING:
    from durq.app.app import App

__all__ = [
    "Chain",
    "Group",
    "StepInfo",
    "WorkflowHandle",
    "WorkflowInfo",
    "chain",
    "group",
    "step_error",
]

Flow: TypeAlias = Union[Call[Any], "Chain", "Group"]
_UNKNOWN = object()  # a result type that is not declared


def step_error(value: Any) -> dict[str, Any] | None:
    """The error of a step that was dead-lettered under ``on_failure="ignore"``, as the
    next step receives it in place of that step's result; None for any other value."""
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("durq_error"), dict):
        error: dict[str, Any] = value["durq_error"]
        return error
    return None


class _Flow:
    """What chains and groups share: callbacks and enqueueing."""

    steps: list[Flow]

    def then(self, step: Flow) -> Chain:
        """This, then ``step``, which receives this one's result (a group's: the list
        of its results, in order) as its first positional argument."""
        return Chain([self, step])  # type: ignore[list-item]

    def enqueue(
        self,
        *,
        id: str | None = None,
        on_failure: str = "fail",
        result_ttl: float | None = None,
    ) -> WorkflowHandle:
        """Check the workflow and submit it (one round trip to the home queue's slot);
        returns its handle. Enqueueing an ``id`` that exists changes nothing; once it
        is gone (``result_ttl`` after it ended), the same ``id`` runs again.

        Args:
            id: the workflow id (random by default); its steps' job ids are
                ``<id>.<run>.<node>`` (``handle.step_id(node)``), the run being a tag
                drawn for each submission. A workflow with an id lives in the App's
                default queue, whatever queues its steps use; one without, in a queue
                of the slot that holds most of its steps.
            on_failure: what a dead-lettered step does: ``"fail"`` (the workflow ends
                failed and its unstarted steps are cancelled), ``"ignore"`` (the step
                counts as done; its error takes its result's place, see ``step_error``)
                or ``"wait"`` (the workflow waits until the step is replayed and done).
            result_ttl: how long the result is kept once it ended (default: the app's).
        """
        app, sub = _prepare(self, id, on_failure, result_ttl)
        queue = app.queue(sub.home_queue)
        for name in sub.queues:
            q = app.queue(name)
            if not q._registered:
                q.register()
        for name in sub.sharded:
            s = app.sharded_queue(name)
            if not s._registered:
                s.register()

        def attempt() -> tuple[bool, str]:
            fleet = app._fleet.cached()
            if fleet is None:  # at most once per FLEET_TTL (app/fleet.py)
                fleet = queue._run(app._fleet.read(batch=not is_cluster(queue.client)))
            return queue._run(sub.op(fleet))

        created, run = sync_retrying(attempt, app.enqueue_retry_for)
        return WorkflowHandle(app, sub.home_queue, sub.id, created=created, run=run)

    async def aenqueue(
        self,
        *,
        id: str | None = None,
        on_failure: str = "fail",
        result_ttl: float | None = None,
    ) -> WorkflowHandle:
        """``enqueue`` for asyncio code."""
        app, sub = _prepare(self, id, on_failure, result_ttl)
        queue = app.aqueue(sub.home_queue)
        for name in sub.queues:
            q = app.aqueue(name)
            if not q._registered:
                await q.register()
        for name in sub.sharded:
            s = app.asharded_queue(name)
            if not s._registered:
                await s.register()

        async def attempt() -> tuple[bool, str]:
            fleet = app._fleet.cached()
            if fleet is None:  # at most once per FLEET_TTL (app/fleet.py)
                fleet = await queue._run(app._fleet.read(batch=not is_cluster(queue.client)))
            return await queue._run(sub.op(fleet))

        created, run = await async_retrying(attempt, app.enqueue_retry_for)
        return WorkflowHandle(app, sub.home_queue, sub.id, created=created, run=run)


class Chain(_Flow):
    """Steps run one after another; each receives the previous one's result."""

    def __init__(self, steps: Iterable[Flow]) -> None:
        self.steps = list(steps)

    @reprlib.recursive_repr("chain(...)")
    def __repr__(self) -> str:
        return f"chain({', '.join(map(_name, self.steps))})"


class Group(_Flow):
    """Steps run in parallel; the group's result is the list of their results."""

    def __init__(self, steps: Iterable[Flow]) -> None:
        self.steps = list(steps)

    @reprlib.recursive_repr("group(...)")
    def __repr__(self) -> str:
        return f"group([{', '.join(map(_name, self.steps))}])"


def chain(*steps: Flow) -> Chain:
    """Run ``steps`` one after another, each starting once the previous one completed
    and receiving its result as first positional argument (unless made with ``.si``)."""
    return Chain(steps)


def group(steps: Iterable[Flow]) -> Group:
    """Run ``steps`` in parallel; ``.then(cb)`` runs ``cb`` once with their results."""
    if isinstance(steps, (Call, _Flow)):
        raise InvalidArgument("group() takes an iterable of steps: group([a.s(), b.s()])")
    return Group(steps)


def _name(step: Any) -> str:
    if isinstance(step, Call):
        return f"{step.task.name}.{'si' if step.immutable else 's'}(...)"
    return repr(step)


class WorkflowHandle:
    """What ``enqueue`` returns: the workflow's id and home queue, its result, its status."""

    def __init__(
        self, app: App, queue: str, id: str, *, created: bool = True, run: str | None = None
    ) -> None:
        self.app = app
        self.queue = queue
        self.id = id
        self.created = created  # False: a workflow with this id existed already
        self.run = run  # the tag of its submission (None: not known to this handle)

    def __repr__(self) -> str:
        return f"<WorkflowHandle {self.queue}/{self.id}>"

    def step_id(self, node: int) -> str:
        """The job id of step ``node`` (its number in ``status().steps``):
        ``<id>.<run>.<node>``. Needs the run: a handle made by ``enqueue`` has it."""
        if self.run is None:
            raise InvalidArgument(
                "this handle does not know the workflow's run: read the step ids from "
                "status().steps"
            )
        return wf.step_job_id(self.id, self.run, node)

    def result(self, timeout: float = 30.0) -> Any:
        """Wait up to ``timeout`` seconds (without polling) for the workflow's result:
        the last step's, or a group's list. Raises TimeoutError, WorkflowFailed, or
        Cancelled once the workflow was cancelled."""
        return _value(self.id, self.app.queue(self.queue).wait_result(self.id, timeout), timeout)

    async def aresult(self, timeout: float = 30.0) -> Any:
        """``result`` for asyncio code."""
        raw = await self.app.aqueue(self.queue).wait_result(self.id, timeout)
        return _value(self.id, raw, timeout)

    def status(self) -> WorkflowInfo | None:
        """The workflow now: its state, each step's state, where it waits (None once
        its summary expired)."""
        return self.app.queue(self.queue).workflow(self.id)

    async def astatus(self) -> WorkflowInfo | None:
        """``status`` for asyncio code."""
        return await self.app.aqueue(self.queue).workflow(self.id)

    def cancel(self) -> CancelStatus:
        """Cancel the workflow: it ends ``cancelled`` and its callback never runs. Its
        steps that did not start never do, and its running steps are stopped as
        ``JobHandle.cancel`` stops a job; ``result()`` then raises ``durq.Cancelled``.
        Returns CANCELLED, or FINISHED when it had ended already (nothing changed: see
        ``status()``). Raises JobNotFound for a workflow unknown to its home queue (or
        whose summary expired)."""
        return _cancel_status(self, self.app.queue(self.queue).cancel_workflow(self.id)[0])

    async def acancel(self) -> CancelStatus:
        """``cancel`` for asyncio code."""
        status, _state = await self.app.aqueue(self.queue).cancel_workflow(self.id)
        return _cancel_status(self, status)


def _cancel_status(handle: WorkflowHandle, status: CancelStatus) -> CancelStatus:
    if status is CancelStatus.NOT_FOUND:
        error = JobNotFound(handle.id)
        error.args = (f"no workflow {handle.id!r} in queue {handle.queue}",)
        raise error
    return status


def _value(workflow_id: str, raw: bytes | None, timeout: float) -> Any:
    if raw is None:
        raise TimeoutError(f"no result for workflow {workflow_id} within {timeout} s")
    ok, value = decode_result(raw)
    if ok:
        return value
    if isinstance(value, dict) and value.get("reason") == "cancelled":
        # WorkflowHandle.cancel: as for a cancelled job, not a failure of one of its steps
        cancelled = Cancelled(workflow_id, {"message": "the workflow was cancelled", **value})
        cancelled.args = (f"workflow {workflow_id} was cancelled",)
        raise cancelled
    raise WorkflowFailed(workflow_id, value)


# -- checking and building ------------------------------------------------------------


class _Submission:
    """A checked workflow, ready to be submitted (again, on a retry)."""

    def __init__(
        self,
        id: str,
        policy: str,
        ttl_ms: int,
        compiled: wf.Compiled,
        keys: dict[str, QueueKeys],
    ) -> None:
        self.id = id
        self.run = wf.new_run()  # the same on a retry of this submission
        self.policy = policy
        self.ttl_ms = ttl_ms
        self.compiled = compiled
        self.home_queue = compiled.home_queue
        self.home_keys = keys[compiled.home_queue]
        # the queues to register: plain ones, and sharded ones by their name (not a shard's)
        self.queues = sorted(n for n, k in keys.items() if not k.shard_count)
        self.sharded = sorted({split_shard(n)[0] for n, k in keys.items() if k.shard_count})
        self.all_queues = sorted(keys)  # its steps' queues and its home

    def op(self, fleet: Iterable[OldWorker] = ()) -> Op[tuple[bool, str]]:
        """The submit: in durq 0.1.0's layout while a worker of ``fleet`` (the old ones)
        consumes one of the workflow's queues, so that it runs their steps too
        (app/fleet.py); raises FleetTooOld when that layout cannot hold the workflow."""
        old = consuming(fleet, self.all_queues)
        if old:
            return legacy_submit(
                old, self.home_queue, self.home_keys, self.id, self.policy, self.ttl_ms,
                self.compiled,
            )  # fmt: skip
        return wf.submit(self.home_keys, self.id, self.run, self.policy, self.ttl_ms, self.compiled)


def _prepare(
    root: _Flow, workflow_id: str | None, policy: str, result_ttl: float | None
) -> tuple[App, _Submission]:
    if policy not in wf.POLICIES:
        raise InvalidArgument(f"on_failure must be one of {', '.join(wf.POLICIES)}, not {policy!r}")
    app = _app_of(root, set())
    wid = new_ids(1)[0] if workflow_id is None else check_job_id(workflow_id)
    check_job_id(wf.step_job_id(wid, wf.new_run(), wf.MAX_NODES))  # its steps' ids too
    ttl = app.result_ttl if result_ttl is None else result_ttl
    ttl_ms = delay_ms(ttl, "result_ttl")
    builder = _Builder(app, wid)
    spec, _ = builder.node(root, False, _UNKNOWN, ())
    home = None if workflow_id is None else builder.home_of_id()
    compiled = wf.compile_workflow(spec, home)
    return app, _Submission(wid, policy, ttl_ms, compiled, builder.keys)


def _app_of(node: Any, seen: set[int]) -> App:
    """The App of the workflow's first step (every step's must be the same)."""
    if isinstance(node, Call):
        return node.task.app  # type: ignore[return-value]
    if isinstance(node, _Flow):
        if id(node) in seen:
            raise InvalidArgument(f"the workflow contains itself (a cycle): {node!r}")
        seen.add(id(node))
        if not node.steps:
            raise InvalidArgument(f"an empty {type(node).__name__.lower()}: it has no step")
        return _app_of(node.steps[0], seen)
    raise InvalidArgument(
        f"a workflow step must be a task call (task.s(...)), a chain or a group, not "
        f"{type(node).__name__}"
    )


class _Builder:
    """Checks a workflow's steps and turns them into protocol node specs."""

    def __init__(self, app: App, wid: str) -> None:
        self.app = app
        self.wid = wid
        self.keys: dict[str, QueueKeys] = {}  # the steps' queues, and the home

    def queue_keys(self, queue: str, count: int) -> QueueKeys:
        keys = self.keys.get(queue)
        if keys is None:
            keys = self.keys[queue] = QueueKeys(queue, self.app.namespace, count)
        return keys

    def home_of_id(self) -> QueueKeys:
        """The home of a workflow submitted with an id: the App's default queue (its
        shard by the id, when it is sharded), whatever queues its steps use, so that
        the id is found again in one place (docs/workflows.md)."""
        queue = self.app.default_queue
        count = self.app.shards.get(queue, 0)
        if count:
            queue = shard_name(queue, shard_index(self.wid, count))
        return self.queue_keys(queue, count)

    def node(
        self, node: Any, gets_input: bool, produced: Any, path: tuple[int, ...]
    ) -> tuple[wf.NodeSpec, Any]:
        """The spec of ``node``, and the type of its result (_UNKNOWN when undeclared)."""
        if isinstance(node, Call):
            return self.step(node, gets_input, produced), _returns(node.task)
        if not isinstance(node, _Flow):
            raise InvalidArgument(
                f"a workflow step must be a task call (task.s(...)), a chain or a group, "
                f"not {type(node).__name__}"
            )
        if id(node) in path:
            raise InvalidArgument(f"the workflow contains itself (a cycle): {node!r}")
        if not node.steps:
            raise InvalidArgument(f"an empty {type(node).__name__.lower()}: it has no step")
        path = (*path, id(node))
        if isinstance(node, Group):
            children = [self.node(c, gets_input, produced, path)[0] for c in node.steps]
            return wf.GroupSpec(tuple(children)), list
        specs = []
        for i, child in enumerate(node.steps):
            spec, produced = self.node(child, gets_input or i > 0, produced, path)
            gets_input = gets_input or i > 0
            specs.append(spec)
        return wf.ChainSpec(tuple(specs)), produced

    def step(self, call: Call[Any], gets_input: bool, produced: Any) -> wf.StepSpec:
        task = call.task
        app = self.app
        if task.app is not app:
            raise InvalidArgument(f"task {task.name} belongs to another App than the workflow")
        if app.tasks.get(task.name) is not task:
            raise InvalidArgument(
                f"task {task.name!r} is not registered on the App: its workers would dead-letter it"
            )
        if task.config.batch is not None:
            raise InvalidArgument(
                f"task {task.name!r} is a batch task: its items run in batches, and a "
                "workflow step must be a task of its own"
            )
        o = call.options
        _check_step_options(task.name, o)
        receives = gets_input and not call.immutable
        args = list(call.args)
        problem = task.arguments_problem([None, *args] if receives else args, call.kwargs)
        if problem is not None:
            note = " (counting the previous step's result, passed first)" if receives else ""
            raise InvalidArgument(problem + note)
        if receives:
            _check_type(task, produced)
        try:
            check_json(args, "args")
            check_json(call.kwargs, "kwargs")
        except NotSerializable as exc:
            raise NotSerializable(f"{task.name}(): {exc}") from None
        # the type hints of the step's own arguments (a step that receives the previous
        # result has that checked by _check_type, its own arguments not yet)
        problem = None if receives else task.types_problem(args, call.kwargs)
        if problem is not None:
            raise InvalidArgument(problem)
        queue = o.queue or task.queue
        count = app.shards.get(queue, 0)
        if count:
            # routed as ShardedQueue routes a job: by its group (so that the group's limit
            # and rate hold across the queue), else anywhere
            index = shard_index(o.group, count) if o.group else secrets.randbelow(count)
            queue = shard_name(queue, index)
        keys = self.queue_keys(queue, count)
        meta = dict(tracing.enqueue_meta(task.name, queue) or {})
        meta["wf"] = self.wid
        if task.version_meta is not None:
            meta.update(task.version_meta)
        payload = orjson.dumps(build_call(task.name, args, call.kwargs, meta))
        if len(payload) > app.max_payload_bytes:
            raise PayloadTooLarge(
                f"{task.name}: payload is {len(payload)} bytes; the limit is "
                f"{app.max_payload_bytes} (max_payload_bytes)"
            )
        # the input goes first in the argument list: ["name",[<input>,args...],...]
        head = b"[" + orjson.dumps(task.name) + b",["
        rest = payload[len(head) :]
        tail = rest if rest.startswith(b"]") else b"," + rest
        wait = o.wait
        delay = delay_ms(wait) if wait is not None else 0
        return wf.StepSpec(
            queue=queue,
            prefix=keys.prefix,
            task=task.name,
            payload=payload,
            head=head,
            tail=tail,
            mutable=not call.immutable,
            group=check_group(o.group) if o.group is not None else "",
            priority=int_in("priority", o.priority, PRIORITY_RANGE)
            if o.priority is not None
            else 0,
            max_attempts=task.config.max_attempts or app.max_attempts,
            delay_ms=delay,
            expires=_step_expiry(task.name, o.expires, delay),
        )


# Per-job options a step cannot take, and why (the others: queue, group, priority,
# delay, expires; max_attempts, timeout and the backoff come from the task)
_REFUSED = {
    "id": "its id is the workflow's, with its run and node number appended",
    "key": "its id is its dedup key already (the workflow's, with its run and node)",
    "replace": "a step has no dedup key to replace",
    "ttl": "throttling needs a dedup key, which a step has not",
    "debounce": "debouncing needs a dedup key, which a step has not",
    "max_wait": "it bounds a debounce, which needs a dedup key, which a step has not",
    "keep_last": "keep-last needs a dedup key, which a step has not",
}


def _check_step_options(task: str, options: Any) -> None:
    for name, why in _REFUSED.items():
        value = getattr(options, name)
        if value is not None and value is not False:
            raise InvalidArgument(
                f"{task}: a workflow step takes no {name} option ({name}={value!r}): {why}"
            )


def _step_expiry(task: str, value: Any, delay: int) -> str:
    """A step's ``expires`` as the engine stores it: seconds count from the step's start
    (when it becomes a job: at once for a first step, when its input is ready for a
    later one); a datetime is a fixed time."""
    if value is None:
        return ""
    try:
        expires_in, expires_at = expiry(value, delay)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{task}: {exc}") from None
    return f"at:{expires_at}" if expires_at else f"in:{expires_in}"


# -- result types -----------------------------------------------------------------------


def _hints(task: Task[Any, Any]) -> dict[str, Any]:
    return _hints_of(task.fn)


@functools.lru_cache(maxsize=1024)
def _hints_of(fn: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations: nothing to check
        return {}


def _returns(task: Task[Any, Any]) -> Any:
    hint = _hints(task).get("return", _UNKNOWN)
    return type(None) if hint is None else hint


def _first_parameter(task: Task[Any, Any]) -> inspect.Parameter | None:
    for param in task.signature.parameters.values():
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            return param
        if param.kind is param.VAR_POSITIONAL:
            return None
    return None


def _check_type(task: Task[Any, Any], produced: Any) -> None:
    """Refuse a step whose first parameter's declared type cannot take the declared
    result of the step before it (only clear mismatches between plain classes)."""
    if produced is _UNKNOWN:
        return
    param = _first_parameter(task)
    if param is None:
        return
    wanted = _hints(task).get(param.name, _UNKNOWN)
    if wanted is not _UNKNOWN and not _accepts(wanted, produced):
        raise InvalidArgument(
            f"{task.name}(): its parameter {param.name!r} is declared {_show(wanted)}, but "
            f"the step before it returns {_show(produced)} (passed as its first argument)"
        )


def _accepts(wanted: Any, produced: Any) -> bool:
    if wanted in (Any, object) or produced is Any:  # Any: undeclared, so not checked
        return True
    origin = typing.get_origin(wanted) or wanted
    if origin in (Union, types.UnionType):
        return any(_accepts(a, produced) for a in typing.get_args(wanted))
    given = typing.get_origin(produced) or produced
    if given in (Union, types.UnionType):
        return all(_accepts(wanted, a) for a in typing.get_args(produced))
    if not isinstance(origin, type) or not isinstance(given, type):
        return True  # TypeVars, Literals, protocols...: not checked
    if given is tuple:  # JSON makes a tuple a list
        given = list
    if given is int and origin is float:
        return True
    try:
        return issubclass(given, origin)
    except TypeError:
        return True


def _show(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or repr(annotation)
