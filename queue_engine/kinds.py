"""Deprecated: `queue_engine.kinds` is now `queue_engine.definition.decorator`. Import the
public names (`job`, `Backoff`) from `queue_engine`; this alias goes in 0.3."""

from queue_engine.definition import moved

__getattr__ = moved("queue_engine.kinds", "queue_engine.definition.decorator")
