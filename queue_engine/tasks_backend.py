"""A `django.tasks` backend: `@task` functions enqueue into this engine.

    TASKS = {"default": {"BACKEND": "queue_engine.tasks_backend.QueueEngineBackend"}}

A task's kind is its module path; its payload is {"args": [...], "kwargs": {...}}.
Extra options ride on `QueueEngineTask` through Django 6.1's `task_class` hook:
`@task(max_attempts=5, backoff=Backoff.fixed(10), idle_timeout=60, dedup_key=None)`.
"""

from __future__ import annotations

from typing import Any

from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import Task, TaskError, TaskResult, TaskResultStatus
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued

from queue_engine.definition.job import (
    Backoff,
    idle_timeout_problem,
    max_attempts_problem,
)
from queue_engine.definition.tasks import QueueEngineTask, definition_for_task

STATUS = {
    "available": TaskResultStatus.READY,
    "scheduled": TaskResultStatus.READY,
    "blocked": TaskResultStatus.READY,
    "upstream_failed": TaskResultStatus.READY,  # not ended: a requeue of its flow runs it
    "running": TaskResultStatus.RUNNING,
    "parked": TaskResultStatus.RUNNING,  # started, and waits for a signal or a time
    "succeeded": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}


class QueueEngineBackend(BaseTaskBackend):
    task_class = QueueEngineTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        # Any queue name is valid unless QUEUES is given explicitly.
        if "QUEUES" not in params:
            self.queues = set()

    def validate_task(self, task: Task[..., Any]) -> None:
        super().validate_task(task)
        if not isinstance(task, QueueEngineTask):
            return
        problems = [
            None if task.max_attempts is None else max_attempts_problem(task.max_attempts),
            None
            if task.backoff is None or isinstance(task.backoff, Backoff)
            else f"backoff must be a Backoff, such as Backoff.fixed(30), not {task.backoff!r}.",
            None if task.idle_timeout is None else idle_timeout_problem(task.idle_timeout),
        ]
        for problem in problems:
            if problem is not None:
                raise InvalidTask(f"{task.module_path}: {problem}")

    def enqueue[**P, R](self, task: Task[P, R], args: Any, kwargs: Any) -> TaskResult[P, R]:
        from queue_engine.definition.registry import registry
        from queue_engine.enqueueing.prepare import JobSpec, prepare
        from queue_engine.enqueueing.single import insert_row
        from queue_engine.exceptions import EnqueueError

        self.validate_task(task)
        definition = definition_for_task(task)
        assert definition is not None
        registry.register(definition)
        extra = task if isinstance(task, QueueEngineTask) else None
        spec = JobSpec(
            kind=definition.kind,
            payload={"args": list(args), "kwargs": dict(kwargs)},
            queue=task.queue_name,
            priority=task.priority,
            run_at=task.run_after,
            dedup_key=extra.dedup_key if extra else None,
            meta={"django_task_backend": self.alias},
        )
        try:
            job = insert_row(prepare(spec, definition))
        except EnqueueError as exc:
            raise InvalidTask(str(exc)) from exc
        result = self._result(task, job)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[..., Any]:
        from queue_engine.definition.registry import registry
        from queue_engine.models import Job, JobRecord

        try:
            pk = int(result_id)
        except (TypeError, ValueError):
            raise TaskResultDoesNotExist(result_id) from None
        row: Job | JobRecord | None = Job.objects.filter(pk=pk).first()
        if row is None:
            row = JobRecord.objects.filter(pk=pk).first()
        if row is None:
            raise TaskResultDoesNotExist(result_id)
        definition = registry.get(row.kind)
        if definition is None or not definition.django_task:
            raise TaskResultDoesNotExist(f"job {result_id} is not a django.tasks task")
        from django.utils.module_loading import import_string

        task = import_string(row.kind)
        return self._result(task, row)

    def _result[**P, R](self, task: Task[P, R], row: Any) -> TaskResult[P, R]:
        errors = [
            TaskError(
                exception_class_path=e.get("class", "Exception"), traceback=e.get("traceback", "")
            )
            for e in (row.errors or [])
        ]
        workers = [e.get("worker", "") for e in (row.errors or [])]
        final_worker = getattr(row, "worker", "") or getattr(row, "lease_owner", None)
        if final_worker and row.state in ("succeeded", "running"):
            workers.append(final_worker)
        payload = row.payload or {}
        result: TaskResult[P, R] = TaskResult(
            task=task,
            id=str(row.id),
            status=STATUS[row.state],
            enqueued_at=row.created_at,
            started_at=row.started_at,
            finished_at=getattr(row, "finished_at", None),
            last_attempted_at=row.started_at,
            args=list(payload.get("args", [])),
            kwargs=dict(payload.get("kwargs", {})),
            backend=self.alias,
            errors=errors,
            worker_ids=workers,
        )
        if row.state == "succeeded":
            object.__setattr__(result, "_return_value", getattr(row, "result", None))
        return result
