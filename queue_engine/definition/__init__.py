"""Defining a job kind, in one place.

- `job`: `JobDefinition` (a kind's options, checked), `Backoff`, and the option checks
  that the decorator, `.using()` and enqueue share;
- `decorator`: `@job`, which turns a function into a `JobKind` that enqueues;
- `tasks`: the `django.tasks` side, `QueueEngineTask` and the definition a Task runs by;
- `registry`: the kinds this process knows, filled by each app's `jobs` module.

The public names (`job`, `Backoff`) are imported from `queue_engine` itself. ("Kinds"
elsewhere in the package, in `ops.kinds`, `reads.kinds` and the console's Kinds page,
is the kill switch that pauses a kind.)
"""

import warnings
from collections.abc import Callable
from importlib import import_module
from typing import Any


def moved(old: str, new: str) -> Callable[[str], Any]:
    """For the module `old` that 0.1.0 had and that is now `new`: warns that it is
    deprecated, and gives the `__getattr__` that forwards every name to `new`."""
    warnings.warn(
        f"{old} is deprecated: import job and Backoff from queue_engine (the module is now {new})",
        DeprecationWarning,
        stacklevel=3,
    )

    def forward(name: str) -> Any:
        return getattr(import_module(new), name)

    return forward
