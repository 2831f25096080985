"""``durq deploy check NEW_MODULE:APP``: before a rollout, what Redis holds compared
with the new App (docs/deployment.md, "Deploying new code").

Read, for every queue of the namespace (every shard of a sharded one):

- every job not yet finished, and every dead letter (a replay runs it again): its task
  must be in the new App (``task_gone``), at a version the new task runs
  (``no_migration``: a newer version than the new code, or an older one its migrations do
  not reach), its migrations must take its arguments (``migration_failed``) and the
  result must bind to the new signature (``bad_arguments``);
- every schedule in Redis that the new App does not declare itself (those it declares
  are written again by its workers): its task must be in the new App
  (``schedule_task_gone``), on the schedule's queue (``schedule_task_moved``), and its
  arguments must bind (``schedule_bad_arguments``);
- every step of a running workflow not yet started: its task must be in the new App
  (``step_task_gone``).

Jobs whose payload is not a task call (a plain queue's messages) are not the App's and
are left out. The scan reads the records a page at a time (HSCAN); it changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from durq._sync.namespace import Namespace
from durq._sync.queue import Queue
from durq._sync.sharded import ShardedQueue
from durq.app.app import App
from durq.app.task import Task
from durq.app.versions import job_version
from durq.keys import split_shard
from durq.models import JobInfo, JobState
from durq.payloads import parse_call, task_name_of

__all__ = ["DeployReport", "Problem", "deploy_check"]

#: the states of jobs that may still run: waiting, running, or dead (a replay)
_LIVE = frozenset(
    {JobState.PENDING, JobState.DELAYED, JobState.ACTIVE, JobState.HELD, JobState.DEAD}
)
#: records read per round trip
PAGE = 500


@dataclass
class Problem:
    """Jobs (or schedules, or steps) of one kind of problem, one queue and one task."""

    kind: str
    queue: str
    task: str
    count: int = 0
    #: a few ids (jobs, schedules, workflows) as examples, and the first message
    examples: list[str] = field(default_factory=list)
    message: str = ""


@dataclass
class DeployReport:
    """What ``deploy_check`` found: the problems, and what it read."""

    problems: list[Problem]
    jobs: int = 0
    schedules: int = 0
    workflows: int = 0
    queues: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing would fail under the new App."""
        return not self.problems


class _Found:
    def __init__(self, examples: int) -> None:
        self.by_key: dict[tuple[str, str, str], Problem] = {}
        self.examples = examples

    def add(self, kind: str, queue: str, task: str, example: str, message: str) -> None:
        problem = self.by_key.get((kind, queue, task))
        if problem is None:
            problem = self.by_key[(kind, queue, task)] = Problem(kind, queue, task, 0, [], message)
        problem.count += 1
        if len(problem.examples) < self.examples:
            problem.examples.append(example)


def job_problem(app: App, queue: str, info: JobInfo) -> tuple[str, str, str] | None:
    """(kind, task, message) of what would fail when the new ``app`` runs the job, or
    None (nothing would, or it is no task call)."""
    try:
        name, args, kwargs, meta = parse_call(info.payload(app.codec))
        version = job_version(meta)
    except Exception:  # not a task call: a plain queue's message, not the App's
        return None
    base, _index = split_shard(queue)
    task_name = task_name_of(name, base)
    task: Task[Any, Any] | None = app.tasks.get(task_name)
    if task is None:
        return "task_gone", task_name, f"no task {task_name!r} in the new app"
    if version not in task.versions:
        return (
            "no_migration",
            task_name,
            f"a job of version {version}; the new task is at version {task.version} and "
            f"runs versions {', '.join(map(str, task.versions))}",
        )
    if version != task.version:
        try:
            args, kwargs = task.upgrade(version, args, kwargs)
        except Exception as exc:
            message = f"migrating version {version}: {type(exc).__name__}: {exc}"
            return "migration_failed", task_name, message
    problem = task.arguments_problem(args, kwargs)
    if problem is not None:
        return "bad_arguments", task_name, problem
    return None


def _shards(space: Namespace, name: str) -> Iterator[Queue]:
    handle = space.queue(name)
    if isinstance(handle, ShardedQueue):
        yield from handle.shards
    else:
        yield handle


def _scan(queue: Queue) -> Iterator[JobInfo]:
    cursor = 0
    while True:
        cursor, jobs = queue.scan_jobs(cursor, PAGE)
        yield from jobs
        if cursor == 0:
            return


def deploy_check(
    app: App,
    *,
    url: str | None = None,
    namespace: str | None = None,
    queues: Iterable[str] = (),
    examples: int = 3,
    workflows: int = 1000,
) -> DeployReport:
    """Compare what Redis holds (at ``url``, in ``namespace``: default the App's) with
    ``app``, the App about to be deployed; ``queues``: only these (default: every
    queue of the namespace); ``examples``: ids kept per problem; ``workflows``: running
    workflows read per queue at most."""
    found = _Found(examples)
    report = DeployReport([])
    seen_jobs: set[tuple[str, str]] = set()
    with Namespace(url or app.url, namespace=namespace or app.namespace) as space:
        names = list(queues) or space.queue_names()
        report.queues = names
        for name in names:
            for shard in _shards(space, name):
                for info in _scan(shard):
                    if info.state not in _LIVE or (shard.name, info.id) in seen_jobs:
                        continue
                    seen_jobs.add((shard.name, info.id))
                    report.jobs += 1
                    problem = job_problem(app, shard.name, info)
                    if problem is not None:
                        kind, task, message = problem
                        found.add(kind, name, task, info.id, message)
                report.schedules += _check_schedules(app, shard, name, found)
                report.workflows += _check_workflows(app, shard, name, found, workflows)
    report.problems = sorted(found.by_key.values(), key=lambda p: (p.queue, p.task, p.kind))
    return report


def _check_schedules(app: App, shard: Queue, name: str, found: _Found) -> int:
    declared = app.schedules.declared
    rows = [s for s in shard.schedules() if not s.ended and s.name not in declared]
    for row in rows:
        task = app.tasks.get(row.task)
        if task is None:
            message = f"schedule {row.name!r}: no task {row.task!r} in the new app"
            found.add("schedule_task_gone", name, row.task, row.name, message)
        elif task.queue != name:
            message = f"schedule {row.name!r}: task {row.task!r} now runs on queue {task.queue!r}"
            found.add("schedule_task_moved", name, row.task, row.name, message)
        else:
            problem = task.arguments_problem(row.args, row.kwargs)
            if problem is not None:
                found.add("schedule_bad_arguments", name, row.task, row.name, problem)
    return len(rows)


def _check_workflows(app: App, shard: Queue, name: str, found: _Found, limit: int) -> int:
    running = shard.running_workflows(limit)
    for workflow_id, _created in running:
        info = shard.workflow(workflow_id)
        for step in info.steps if info is not None else ():
            if step.state in ("waiting", "starting") and step.task not in app.tasks:
                message = f"workflow {workflow_id}: step {step.node} runs {step.task!r}, gone"
                found.add("step_task_gone", step.queue, step.task, workflow_id, message)
    return len(running)
