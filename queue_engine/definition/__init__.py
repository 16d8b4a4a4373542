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
