"""The django.tasks side of a job kind: `QueueEngineTask` carries the engine's options,
and `definition_for_task` turns a Task into the definition that runs it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.tasks.base import Task

from queue_engine.conf import option
from queue_engine.definition.job import (
    DEFAULT_BACKOFF,
    Backoff,
    JobDefinition,
)
from queue_engine.durations import Seconds, to_seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueEngineTask(Task):  # type: ignore[type-arg]  # generic only in django-stubs
    max_attempts: int | None = None
    backoff: Backoff | None = None
    idle_timeout: Seconds | None = None
    dedup_key: str | None = None

    def using(  # type: ignore[override]
        self,
        *,
        priority: int | None = None,
        queue_name: str | None = None,
        run_after: datetime | None = None,
        backend: str | None = None,
        dedup_key: str | None = None,
        max_attempts: int | None = None,
    ) -> QueueEngineTask:
        task: Task[..., Any] = Task.using(
            self, priority=priority, queue_name=queue_name, run_after=run_after, backend=backend
        )
        changes: dict[str, Any] = {}
        if dedup_key is not None:
            changes["dedup_key"] = dedup_key
        if max_attempts is not None:
            changes["max_attempts"] = max_attempts
        return dataclasses.replace(task, **changes)  # type: ignore[return-value]


def definition_for_task(target: object) -> JobDefinition | None:
    """The job definition that runs a django.tasks Task, or None for anything else."""
    if not isinstance(target, Task):
        return None
    extra = target if isinstance(target, QueueEngineTask) else None
    return JobDefinition(
        func=target.func,
        kind=target.module_path,
        queue=target.queue_name,
        priority=target.priority,
        max_attempts=(
            extra.max_attempts
            if extra and extra.max_attempts is not None
            else option("DEFAULT_MAX_ATTEMPTS")
        ),
        backoff=(extra.backoff if extra and extra.backoff else DEFAULT_BACKOFF),
        idle_timeout=to_seconds(extra.idle_timeout) if extra else None,
        takes_context=target.takes_context,
        django_task=True,
    )
