"""Deprecated: `queue_engine.definitions` is now `queue_engine.definition.job`. Import the
public names (`job`, `Backoff`) from `queue_engine`; this alias goes in 0.3."""

import warnings
from importlib import import_module
from typing import Any

warnings.warn(
    "queue_engine.definitions is deprecated: import job and Backoff from queue_engine "
    "(the module is now queue_engine.definition.job)",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str) -> Any:
    return getattr(import_module("queue_engine.definition.job"), name)
