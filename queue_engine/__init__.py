"""A Postgres-native job and flow engine for Django."""

from typing import Any

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
    # Lazy so that `import queue_engine` works before Django's apps are ready.
    if name in ("Backoff", "Fatal", "Retry", "Snooze", "job"):
        from queue_engine import definitions

        return getattr(definitions, name)
    if name in ("EnqueueError", "JobSpec", "enqueue", "enqueue_many"):
        from queue_engine import enqueue

        return getattr(enqueue, name)
    raise AttributeError(name)
