"""One attempt of one job: run the handler and turn what happened into an Outcome."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from queue_engine.definition.job import DEFAULT_BACKOFF, Backoff, JobDefinition
from queue_engine.definition.registry import registry
from queue_engine.exceptions import (
    Fatal,
    IdleTimeout,
    LeaseLost,
    Parked,
    PayloadError,
    Retry,
    Snooze,
)
from queue_engine.payloads import dump_json, storable
from queue_engine.worker import middleware
from queue_engine.worker.capture import CURRENT
from queue_engine.worker.context import JobContext
from queue_engine.worker.tracebacks import format_trace, safe_str

if TYPE_CHECKING:
    from queue_engine.worker.flusher import Output
    from queue_engine.worker.steps import Steps

log = logging.getLogger("queue_engine.worker")

CancelReason = Literal["cancelled", "lease lost", "idle timeout", "shutdown"]

# Guards the making of a CancelFlag's event against its setting.
_EVENTS = threading.Lock()


class CancelFlag:
    """A threading.Event's is_set, set and wait, made for every job and waited on by few:
    the event (a Condition and its lock) is made only when a handler waits (ctx.sleep)."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        with _EVENTS:
            self._set = True
            if self._event is not None:
                self._event.set()

    def wait(self, timeout: float | None = None) -> bool:
        with _EVENTS:
            if self._event is None:
                self._event = threading.Event()
                if self._set:
                    self._event.set()
            event = self._event
        return event.wait(timeout)


OutcomeKind = Literal[
    "succeeded", "retry", "failed", "snoozed", "parked", "released", "cancelled", "dropped"
]


@dataclass(slots=True)
class Outcome:
    kind: OutcomeKind
    execution: Execution
    result: str | None = None  # JSON text
    error: str | None = None  # JSON text of this attempt's error
    delay: float = 0.0
    payload: str | None = None  # JSON text (snooze with a new payload; parked: its wait)
    until: datetime | None = None  # parked: when its wait ends by itself


# The longest a retry or a snooze waits. A delay Postgres cannot add to now() (past the
# year 294276, or infinite) would fail the whole batch's settle, every job in it.
MAX_DELAY = 10 * 365.25 * 24 * 3600  # ten years, in seconds


def bounded(delay: float) -> float:
    """A retry's or a snooze's delay, within 0 and MAX_DELAY (not a number: 0)."""
    return min(max(delay, 0.0), MAX_DELAY) if delay == delay else 0.0


class ClaimedJob(NamedTuple):
    """A row of sql.CLAIM (and of sql.RECOVER_CLAIM): a job as its worker claims it."""

    job_id: int
    kind: str
    queue: str
    payload: Any
    attempt: int
    max_attempts: int
    backoff: str | None  # JSON text
    flow_id: int | None
    node_key: str | None
    meta: str | None  # JSON text
    outputs: str | None  # JSON text of the parents' outputs (flow nodes)
    lock_seconds: float  # the job's lease; the heartbeat beats well within it
    steps: str | None  # JSON text: the durable steps earlier attempts recorded, by name
    priority: int  # with run_at and the id, its place in the claim index (worker/floors.py)
    run_at: datetime


class Execution:
    __slots__ = (
        "_log_seq",
        "_partial",
        "attempt",
        "backoff",
        "cancel_reason",
        "cancelled",
        "claimed_at",
        "completed_in_transaction",
        "definition",
        "flow_id",
        "is_async",
        "job_id",
        "kind",
        "max_attempts",
        "meta",
        "node_key",
        "output",
        "outputs",
        "payload",
        "queue",
        "recorded_steps",
        "run_at",
        "spawned",
        "steps",
        "task",
        "token",
        "touched_at",
        "worker_id",
    )

    def __init__(
        self,
        job: ClaimedJob,
        token: int,
        *,
        worker_id: str,
        output: Output,
    ) -> None:
        # The claimed job's columns (see ClaimedJob); backoff and meta arrive as JSON
        # text, parsed only when needed.
        self.job_id = job.job_id
        self.kind = job.kind
        self.queue = job.queue
        self.payload = job.payload
        self.attempt = job.attempt
        self.max_attempts = job.max_attempts
        self.backoff = job.backoff
        self.flow_id = job.flow_id
        self.node_key = job.node_key
        self.meta = job.meta
        self.outputs = job.outputs
        self.recorded_steps = job.steps
        self.run_at = job.run_at
        self.claimed_at = time.time()  # with run_at, the wait and run times of -v 2
        self.worker_id = worker_id
        self.output = output
        self.token = token
        self.definition: JobDefinition | None = registry.get(self.kind)
        self.is_async = bool(self.definition and self.definition.is_async)
        self.cancelled = CancelFlag()
        self.cancel_reason: CancelReason | None = None
        self.completed_in_transaction = False
        self.touched_at = time.monotonic()
        self.task: asyncio.Future[Any] | None = None
        self.steps: Steps | None = None  # made at the attempt's first ctx.step()
        self.spawned = 0  # children spawned without a key this attempt (their next index)
        self._log_seq = itertools.count(1)
        self._partial: dict[str, str] = {}

    def meta_dict(self) -> dict[str, Any]:
        return json.loads(self.meta) if self.meta else {}

    # --- what ctx calls (any thread) ---------------------------------------

    def touch(self) -> None:
        self.touched_at = time.monotonic()

    def report_progress(self, fraction: float, message: str) -> None:
        self.touched_at = time.monotonic()
        self.output.progress[self.job_id] = (self.token, fraction, storable(str(message)[:500]))

    def write_log(self, stream: str, text: str, *, level: str = "") -> None:
        self.output.logs.append(
            (
                self.job_id,
                self.attempt,
                next(self._log_seq),
                stream,
                level,
                datetime.now(UTC),
                storable(text),
            )
        )

    def write_stream(self, stream: str, text: str) -> None:
        buffered = self._partial.get(stream, "") + text
        *lines, rest = buffered.split("\n")
        self._partial[stream] = rest
        for line in lines:
            self.write_log(stream, line)

    def flush_streams(self) -> None:
        for stream, rest in list(self._partial.items()):  # an abandoned thread may write on
            if rest:
                self.write_log(stream, rest)
        self._partial.clear()

    def cancel(self, reason: CancelReason) -> bool:
        """Tell the handler to stop (ctx.is_cancelled(), ctx.sleep() returns, ctx.atomic()
        refuses); False if it was told already.

        An async handler is cancelled outright. A plain function cannot be stopped: on an
        idle timeout it is abandoned (its task, which waits for the thread, is cancelled,
        so the job settles and frees its slot now, and what the thread does later is
        dropped); otherwise it is left to notice.
        """
        if self.cancelled.is_set():
            return False
        self.cancel_reason = reason
        self.cancelled.set()
        if self.task is not None:
            self.task.cancel()  # only async handlers have a task
        return True

    # --- running -------------------------------------------------------------

    async def run(self) -> Outcome:
        """An async handler's attempt, in the task the worker made for it (self.task)."""
        definition = self.definition
        if definition is None:
            return self._unknown_kind()
        chain = middleware.chain()
        if chain is not None and chain.wants(self):
            return await chain.run_async(self)
        try:
            result = await self._run_async(definition)
        except asyncio.CancelledError:
            if not self.cancelled.is_set():
                raise  # the worker itself is stopping
            return self.cancelled_outcome()
        except BaseException as exc:
            return self._error_outcome(exc, definition)
        finally:
            self.flush_streams()
        return self._result_outcome(result)

    def run_sync(self) -> Outcome:
        """A plain function's attempt, in a handler thread (threads.py); never raises."""
        definition = self.definition
        if definition is None:
            return self._unknown_kind()
        try:
            chain = middleware.chain()
            if chain is not None and chain.wants(self):
                return chain.run_sync(self)
            try:
                result = self._run_sync(definition)
            except BaseException as exc:
                return self._error_outcome(exc, definition)
            finally:
                self.flush_streams()
            return self._result_outcome(result)
        except Exception as exc:  # a bug of ours: never lose the job
            log.exception("job %s: internal error", self.job_id)
            return self.failure(exc, retryable=True)

    def _unknown_kind(self) -> Outcome:
        return self.failure(
            LookupError(
                f"no @job registered for kind {self.kind!r} in this worker; import its "
                "module (QUEUE_ENGINE['JOB_MODULES'] or an app's jobs.py)"
            ),
            retryable=True,
        )

    def _error_outcome(self, exc: BaseException, definition: JobDefinition) -> Outcome:
        if self.cancelled.is_set() and self.cancel_reason in ("cancelled", "shutdown"):
            return self.cancelled_outcome()  # however the handler stopped, on request
        if isinstance(exc, Parked):
            if self.completed_in_transaction:
                return Outcome("dropped", self)  # it completed already: nothing to park
            return Outcome("parked", self, payload=json.dumps(exc.wait), until=exc.until)
        if not isinstance(exc, Exception) and not self.is_async:
            # SystemExit or KeyboardInterrupt raised by a plain function ends its
            # attempt only; the worker goes on.
            return self.failure(exc, retryable=definition.on_error == "retry")
        return self._outcome_for_error(exc, definition)

    def _result_outcome(self, result: Any) -> Outcome:
        if (
            self.cancelled.is_set()
            and self.cancel_reason != "lease lost"
            and not self.completed_in_transaction
        ):
            return self.cancelled_outcome()
        try:
            text = dump_json(result, what=f"{self.kind}: the return value")
        except PayloadError as exc:
            if self.completed_in_transaction:
                return Outcome("dropped", self)  # completed already; the value is lost
            return self.failure(exc, retryable=False)
        if self.completed_in_transaction:
            return Outcome("dropped", self, result=text)  # only the value is left to record
        return Outcome("succeeded", self, result=text)

    async def _run_async(self, definition: JobDefinition) -> Any:
        args, kwargs = self._arguments(definition)
        # Runs inside the task the worker made for this execution (self.task),
        # so cancelling that task cancels the handler.
        reset = CURRENT.set(self)
        try:
            return await definition.func(*args, **kwargs)
        finally:
            CURRENT.reset(reset)

    def _run_sync(self, definition: JobDefinition) -> Any:
        args, kwargs = self._arguments(definition)
        reset = CURRENT.set(self)
        try:
            return definition.func(*args, **kwargs)
        finally:
            CURRENT.reset(reset)

    def _arguments(self, definition: JobDefinition) -> tuple[list[Any], dict[str, Any]]:
        payload = self.payload if isinstance(self.payload, dict) else {}
        if definition.django_task:
            args, kwargs = list(payload.get("args", [])), dict(payload.get("kwargs", {}))
            if definition.takes_context:
                args.insert(0, self._task_context(definition, args, kwargs))
            return args, kwargs
        args, kwargs = definition.call_arguments(payload)
        if definition.takes_context:
            args.insert(0, JobContext(self))
        return args, kwargs

    def _task_context(
        self, definition: JobDefinition, args: list[Any], kwargs: dict[str, Any]
    ) -> Any:
        from django.tasks.base import TaskContext, TaskResult, TaskResultStatus
        from django.utils.module_loading import import_string

        result: TaskResult[..., Any] = TaskResult(
            task=import_string(self.kind),
            id=str(self.job_id),
            status=TaskResultStatus.RUNNING,
            enqueued_at=None,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.meta_dict().get("django_task_backend", "default"),
            errors=[],
            worker_ids=[self.worker_id] * self.attempt,
        )
        return TaskContext(task_result=result)

    # --- outcomes ---------------------------------------------------------------

    def _outcome_for_error(self, exc: BaseException, definition: JobDefinition) -> Outcome:
        if isinstance(exc, Snooze):
            payload = None
            if exc.payload is not None:
                try:
                    payload = dump_json(exc.payload, what=f"{self.kind}: the snooze payload")
                except PayloadError as bad:
                    return self.failure(bad, retryable=False)
            return Outcome("snoozed", self, delay=bounded(exc.delay), payload=payload)
        if isinstance(exc, LeaseLost):
            return Outcome("dropped", self)
        if isinstance(exc, Fatal):
            return self.failure(exc, retryable=False)
        if isinstance(exc, Retry):
            return self.failure(exc, retryable=True, delay=exc.delay)
        if not isinstance(exc, Exception):
            raise exc
        return self.failure(exc, retryable=definition.on_error == "retry")

    def cancelled_outcome(self) -> Outcome:
        definition = self.definition
        if self.cancel_reason == "idle timeout":
            error = IdleTimeout(
                f"no heartbeat or progress for {definition.idle_timeout if definition else '?'}s"
            )
            # An async handler was cancelled cleanly: retry it. An abandoned thread can no
            # longer act for its job (its ctx.atomic() refuses, its return is dropped), so
            # its job is retried only if its kind retries errors.
            retryable = self.is_async or (definition is not None and definition.on_error == "retry")
            return self.failure(error, retryable=retryable)
        if self.cancel_reason == "cancelled":
            return Outcome("cancelled", self)  # an operator asked: the row waits for this
        if self.cancel_reason == "shutdown":
            return Outcome("released", self)  # stopped when asked to: back to its queue
        return Outcome("dropped", self)  # the lease was lost: the row is someone else's

    def failure(
        self, exc: BaseException, *, retryable: bool, delay: float | None = None
    ) -> Outcome:
        """The outcome of an attempt that raised `exc`: failed for good when it may not
        be retried or was the last, else a retry after `delay` (the backoff's if None)."""
        error = error_json(
            self.attempt,
            f"{type(exc).__module__}.{type(exc).__qualname__}",
            safe_str(exc)[:2000],
            format_trace(exc)[-20000:],
            self.worker_id,
        )
        if not retryable or self.attempt >= self.max_attempts:
            return Outcome("failed", self, error=error)
        if delay is None:
            delay = self._backoff().delay(self.attempt)
        return Outcome("retry", self, error=error, delay=bounded(delay))

    def _backoff(self) -> Backoff:
        return (
            Backoff.from_json(json.loads(self.backoff) if self.backoff else None)
            or (self.definition.backoff if self.definition else None)
            or DEFAULT_BACKOFF
        )


def error_json(attempt: int, cls: str, message: str, trace: str, worker: str) -> str:
    """One attempt's error as JSON text Postgres can store, whatever its text holds."""
    return json.dumps(
        {
            "attempt": attempt,
            "class": storable(cls),
            "message": storable(message),
            "traceback": storable(trace),
            "worker": storable(worker),
            "at": datetime.now(UTC).isoformat(),
        }
    )
