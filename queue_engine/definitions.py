"""Deprecated: `queue_engine.definitions` is now `queue_engine.definition.job`. Import the
public names (`job`, `Backoff`) from `queue_engine`; this alias goes in 0.3."""

from queue_engine.definition import moved

__getattr__ = moved("queue_engine.definitions", "queue_engine.definition.job")
