"""Every exception the engine's public API raises or records, in one place.

Handlers raise `Retry`, `Fatal` and `Snooze` to steer what happens next. `Cancelled`,
`LeaseExpired` and `OutcomeRefused` are only recorded in a job's errors (django.tasks
imports an error's class by its dotted name, so each is importable as
`queue_engine.<name>`). The `...Error` classes are raised for bad input, before
anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from queue_engine.durations import Seconds, to_seconds

# --- raised by handlers -------------------------------------------------------------


class JobError(Exception):
    """Base of the errors a handler raises to steer what happens next."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class Retry(JobError):
    """Fail this attempt and retry, after `delay` seconds or the kind's backoff."""

    def __init__(self, reason: str = "", *, delay: Seconds | None = None) -> None:
        super().__init__(reason)
        self.delay = to_seconds(delay)


class Fatal(JobError):
    """Fail for good: straight to the dead letter, whatever attempts are left."""


class StepError(Fatal):
    """A durable step used wrongly: a name repeated within a job, a name that is not a
    short string, or a result that does not survive a JSON round trip. Raised inside the
    handler and fails the job for good, as running it again would fail the same way."""


class Snooze(JobError):
    """Run again after `delay` without using up an attempt, optionally with a new payload."""

    def __init__(
        self, delay: Seconds, *, payload: Mapping[str, Any] | None = None, reason: str = ""
    ) -> None:
        super().__init__(reason or f"snoozed for {to_seconds(delay)}s")
        self.delay = to_seconds(delay) or 0.0
        self.payload = dict(payload) if payload is not None else None


# --- recorded in a job's errors, never raised ------------------------------------------


class Cancelled(Exception):
    """The error recorded when an operator cancels a job; never raised by the engine."""


class LeaseExpired(Exception):
    """The error recorded when a job's worker stopped heartbeating; never raised."""


class OutcomeRefused(Exception):
    """The error recorded when Postgres refuses to store what a handler returned (text it
    cannot hold, a result too large): the job is dead-lettered with it; never raised."""


class IdleTimeout(Exception):
    """The error recorded when a handler neither heartbeated nor reported progress within
    its kind's idle timeout."""


# --- raised by the engine inside a handler -------------------------------------------


class LeaseLost(Exception):
    """Raised inside a handler whose job is no longer its own (cancelled, rescued or
    removed): its effects must not commit."""


class SignalTimeout(Exception):
    """Raised by `ctx.wait_for_signal(name, timeout=...)` when no signal came in time (or
    an operator woke the job early); the job's retry rules apply, and a retry waits
    afresh."""


class Parked(BaseException):
    """Raised by a wait that must park its job (worker/waits.py), to end the attempt
    without using it up; a BaseException, so that a handler's `except Exception` lets it
    through. `wait` is what meta.parked records; `until`, when the wait ends by itself."""

    def __init__(self, wait: Mapping[str, Any], until: datetime | None) -> None:
        super().__init__(f"parked: {dict(wait)}")
        self.wait = dict(wait)
        self.until = until


# --- raised by job_result and flow_result ---------------------------------------------


class JobFailed(Exception):
    """The job `job_result` waited for died (`state` "failed") or was cancelled; `error`
    is its last recorded error (class, message, traceback, attempt), when it has one."""

    def __init__(self, job_id: int, state: str, error: Mapping[str, Any] | None) -> None:
        how = "died" if state == "failed" else "was cancelled"
        detail = f": {error.get('class')}: {error.get('message')}" if error else ""
        super().__init__(f"job {job_id} {how}{detail}")
        self.job_id = job_id
        self.state = state
        self.error = dict(error) if error else None


class FlowFailed(Exception):
    """The flow `flow_result` waited for failed or was cancelled; `failures` lists its
    dead and cancelled nodes ({"job", "node", "state", "error"})."""

    def __init__(self, flow_id: int, state: str, failures: list[dict[str, Any]]) -> None:
        first = failures[0] if failures else None
        detail = ""
        if first is not None:
            error = first.get("error") or {}
            detail = f": node {first.get('node') or first.get('job')} {first.get('state')}"
            if error:
                detail += f" ({error.get('class')}: {error.get('message')})"
        super().__init__(f"flow {flow_id} {state}{detail}")
        self.flow_id = flow_id
        self.state = state
        self.failures = failures


class ResultTimeout(TimeoutError):
    """`job_result` or `flow_result` gave up: the job or flow had not ended in time."""


class UnknownIdError(LookupError):
    """`job_result` or `flow_result` was given an id that names no job or flow (or one
    whose history retention has removed)."""


# --- bad input: nothing was written -------------------------------------------------


class SignalError(ValueError):
    """A signal that cannot be sent as asked (no such live job, a bad name or payload);
    nothing was written."""


class PayloadError(ValueError):
    """A value that does not survive a JSON round trip, or that is too large."""


class EnqueueError(ValueError):
    """A job that cannot be enqueued as asked; nothing was written."""


class UnknownKindError(EnqueueError):
    """The kind names no registered job, and no importable function."""


class InvalidPayloadError(EnqueueError, PayloadError):
    """The payload does not survive a JSON round trip, or is too large."""


class FlowError(EnqueueError):
    """A flow that cannot be submitted as built; nothing was written."""


class ScheduleError(ValueError):
    """A schedule that cannot be declared as asked; nothing was written."""


class OpsError(ValueError):
    """An operator action that cannot be done as asked; nothing changed."""


class FilterError(ValueError):
    """A read asked with a filter or a page it cannot answer; the message says what to
    change."""


class NarrowFilter(FilterError):
    """A console or API read ran past CONSOLE_STATEMENT_TIMEOUT: narrow the filter."""

    def __init__(self, message: str = "") -> None:
        super().__init__(
            message
            or (
                "This query took too long on a table this size: narrow the filter "
                "(a queue, a state, a kind or a shorter time range) and try again."
            )
        )
