"""A Postgres-native job and flow engine for Django."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from queue_engine.definitions import Backoff, Fatal, Retry, Snooze, job
    from queue_engine.enqueue import EnqueueError, JobSpec, enqueue, enqueue_many

__all__ = [
    "Backoff",
    "EnqueueError",
    "Fatal",
    "JobSpec",
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
    if name in ("Backoff", "Fatal", "Retry", "Snooze", "job"):
        return getattr(import_module("queue_engine.definitions"), name)
    if name in ("EnqueueError", "JobSpec", "enqueue", "enqueue_many"):
        return getattr(import_module("queue_engine.enqueue"), name)
    raise AttributeError(name)
