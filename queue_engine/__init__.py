"""A Postgres-native job and flow engine for Django."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from queue_engine.definitions import (
        Backoff,
        Cancelled,
        Fatal,
        LeaseExpired,
        Retry,
        Snooze,
        job,
    )
    from queue_engine.enqueue import EnqueueError, JobSpec, enqueue, enqueue_many

__all__ = [
    "Backoff",
    "Cancelled",
    "EnqueueError",
    "Fatal",
    "JobSpec",
    "LeaseExpired",
    "Retry",
    "Snooze",
    "enqueue",
    "enqueue_many",
    "job",
]


def __getattr__(name: str) -> Any:
    # Lazy so that `import queue_engine` works before Django's apps are ready. The
    # submodules are imported by full name: `from queue_engine import enqueue` would
    # ask this function for the attribute `enqueue` again.
    # Cancelled and LeaseExpired are here because the engine records those names in a
    # job's errors, and django.tasks imports an error's class by its name.
    if name in ("Backoff", "Cancelled", "Fatal", "LeaseExpired", "Retry", "Snooze", "job"):
        return getattr(import_module("queue_engine.definitions"), name)
    if name in ("EnqueueError", "JobSpec", "enqueue", "enqueue_many"):
        return getattr(import_module("queue_engine.enqueue"), name)
    raise AttributeError(name)
