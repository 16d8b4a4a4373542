"""Job middleware (QUEUE_ENGINE['JOB_MIDDLEWARE']): classes in Django's shape, built once
per worker process with the next callable and called once per attempt with its context.

The attempt's outcome is always the handler's: a middleware observes and wraps it (a span,
a context variable, a report) but cannot change it. A middleware that raises is logged and
counted, and the chain goes on as if it had called `call_next` and returned what it gave:
the handler still runs once, and the job settles as the handler decided. Only `Snooze`,
`Retry` and `Fatal` raised before `call_next` end the attempt without the handler (a
middleware that rate-limits, say).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from queue_engine.exceptions import Fatal, Retry, Snooze
from queue_engine.worker.context import JobContext

if TYPE_CHECKING:
    from queue_engine.worker.execution import Execution, Outcome, OutcomeKind

log = logging.getLogger("queue_engine.worker")

# What a middleware may raise before `call_next` to end the attempt without the handler.
STOPS = (Snooze, Retry, Fatal)

# Middleware errors in this process (each also logged): what `errors()` reports.
_errors = itertools.count()
_error_total = 0


def errors() -> int:
    """How many times a middleware raised (or skipped call_next) in this process."""
    return _error_total


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    """What an attempt came to, as `ctx.outcome` shows it once the handler has finished.

    `kind`: succeeded, retry (it runs again), failed (for good), snoozed, cancelled,
    released (back to its queue at shutdown) or dropped (its lease was lost);
    `result`: the handler's return value; `error`: what it raised (None if it returned);
    `delay`: seconds until a retry or a snoozed job runs again.
    """

    kind: OutcomeKind
    result: Any
    error: BaseException | None
    delay: float


class MiddlewareContext(JobContext):
    """The job's context as a middleware sees it: `JobContext`'s fields, and `outcome`."""

    def __init__(self, execution: Execution, *, is_async: bool) -> None:
        super().__init__(execution)
        self.is_async = is_async
        self.ran = False  # the handler has run (or a middleware ended the attempt)
        self.result: Any = None
        self.error: BaseException | None = None
        self._outcome: Outcome | None = None

    @property
    def outcome(self) -> AttemptOutcome | None:
        """None until the handler has finished; then what the attempt came to."""
        if not self.ran:
            return None
        settled = self.settled()
        return AttemptOutcome(settled.kind, self.result, self.error, settled.delay)

    def settled(self) -> Outcome:
        """The Outcome the worker settles, worked out once from what the handler did."""
        if self._outcome is None:
            execution = self._execution
            definition = execution.definition
            assert definition is not None
            error = self.error
            if error is None:
                self._outcome = execution._result_outcome(self.result)
            elif isinstance(error, asyncio.CancelledError) and self.is_async:
                if not execution.cancelled.is_set():
                    raise error  # the worker itself is stopping
                self._outcome = execution.cancelled_outcome()
            else:
                self._outcome = execution._error_outcome(error, definition)
        return self._outcome


class _Next:
    """The `call_next` a middleware is built with: the rest of the chain, run in the
    attempt's mode (for an async handler, it returns an awaitable)."""

    __slots__ = ("chain", "index")

    def __init__(self, chain: Chain, index: int) -> None:
        self.chain = chain
        self.index = index

    def __call__(self, ctx: MiddlewareContext) -> Any:
        if ctx.is_async:
            return self.chain.call_async(self.index, ctx)
        return self.chain.call_sync(self.index, ctx)


class Chain:
    """The process's middleware, outermost first."""

    def __init__(self, paths: list[str]) -> None:
        # Only the enqueuer's trace context to attach: jobs that carry none skip the chain.
        self.traced_only = False
        self.names: list[str] = []
        self.layers: list[Any] = []
        self.async_calls: list[Any] = []
        for path in paths:
            try:
                cls = import_string(path) if isinstance(path, str) else path
                layer = cls(_Next(self, len(self.layers) + 1))
            except Exception:
                _count()
                log.exception("job middleware %s could not be built; it is left out", path)
                continue
            if layer is None:  # a factory's way of saying "not in this process"
                continue
            self.names.append(path if isinstance(path, str) else repr(path))
            self.layers.append(layer)
            acall = getattr(layer, "__acall__", None)
            self.async_calls.append(acall if inspect.iscoroutinefunction(acall) else None)

    # --- the worker's side ----------------------------------------------------------

    def wants(self, execution: Execution) -> bool:
        if not self.traced_only:
            return True
        meta = execution.meta
        return meta is not None and "traceparent" in meta

    def run_sync(self, execution: Execution) -> Outcome:
        ctx = MiddlewareContext(execution, is_async=False)
        try:
            self.call_sync(0, ctx)
        except BaseException as exc:
            if not ctx.ran:  # a SystemExit or the like from a middleware, before the handler
                ctx.ran, ctx.error = True, exc
        finally:
            execution.flush_streams()
        return ctx.settled()

    async def run_async(self, execution: Execution) -> Outcome:
        ctx = MiddlewareContext(execution, is_async=True)
        try:
            await self.call_async(0, ctx)
        except BaseException as exc:
            if not ctx.ran:
                ctx.ran, ctx.error = True, exc
        finally:
            execution.flush_streams()
        return ctx.settled()

    # --- the layers -----------------------------------------------------------------

    def call_sync(self, index: int, ctx: MiddlewareContext) -> Any:
        if index == len(self.layers):
            return _handler_sync(ctx)
        try:
            self.layers[index](ctx)
        except BaseException as exc:
            if self._stopped(index, ctx, exc):
                return self.call_sync(index + 1, ctx)
        else:
            if not ctx.ran:
                self._report(index, ctx, None)
                return self.call_sync(index + 1, ctx)
        return _handed_on(ctx)

    async def call_async(self, index: int, ctx: MiddlewareContext) -> Any:
        if index == len(self.layers):
            return await _handler_async(ctx)
        try:
            acall = self.async_calls[index]
            if acall is not None:
                await acall(ctx)
            else:
                value = self.layers[index](ctx)
                if inspect.isawaitable(value):
                    await value
        except BaseException as exc:
            if self._stopped(index, ctx, exc):
                return await self.call_async(index + 1, ctx)
        else:
            if not ctx.ran:
                self._report(index, ctx, None)
                return await self.call_async(index + 1, ctx)
        return _handed_on(ctx)

    def _stopped(self, index: int, ctx: MiddlewareContext, exc: BaseException) -> bool:
        """A layer raised `exc`: True if the rest of the chain must run in its place;
        re-raises what must go on outward (a cancellation, a deliberate stop)."""
        if exc is ctx.error:
            return False  # the handler's own error, passed on
        if not isinstance(exc, Exception):
            raise exc  # the task is cancelled, the process exits
        if ctx.ran:
            self._report(index, ctx, exc)
            return False
        if isinstance(exc, STOPS):
            ctx.ran, ctx.error = True, exc  # the attempt ends here, without the handler
            raise exc
        self._report(index, ctx, exc)
        return True

    def _report(self, index: int, ctx: MiddlewareContext, exc: BaseException | None) -> None:
        count = _count()
        name = self.names[index]
        what = "raised" if exc is not None else "returned without calling call_next"
        log.error(
            "job %s: job middleware %s %s; the attempt goes on (%d middleware error(s) "
            "in this process)",
            ctx.job_id,
            name,
            what,
            count,
            exc_info=exc,
            extra={"job_id": ctx.job_id, "kind": ctx.kind, "queue": ctx.queue},
        )


def _count() -> int:
    global _error_total
    _error_total = next(_errors) + 1
    return _error_total


def _handed_on(ctx: MiddlewareContext) -> Any:
    """What a layer hands outward: the handler's result, or its error raised again."""
    if ctx.error is not None:
        raise ctx.error
    return ctx.result


def _handler_sync(ctx: MiddlewareContext) -> Any:
    execution = ctx._execution
    assert execution.definition is not None
    ctx.ran = True
    try:
        ctx.result = execution._run_sync(execution.definition)
    except BaseException as exc:
        ctx.error = exc
        raise
    return ctx.result


async def _handler_async(ctx: MiddlewareContext) -> Any:
    execution = ctx._execution
    assert execution.definition is not None
    ctx.ran = True
    try:
        ctx.result = await execution._run_async(execution.definition)
    except BaseException as exc:
        ctx.error = exc
        raise
    return ctx.result


# --- the process's chain ------------------------------------------------------------

_lock = threading.Lock()
_chain: Chain | None = None
_built = False


def chain() -> Chain | None:
    """The process's chain, built at its first attempt (after the job modules, which may
    configure an OpenTelemetry SDK, are imported); None when there is no middleware."""
    if _built:
        return _chain
    return _build()


def _build() -> Chain | None:
    global _chain, _built
    from queue_engine.conf import option

    with _lock:
        if not _built:
            paths = list(option("JOB_MIDDLEWARE"))
            traced_only = False
            if option("OPENTELEMETRY"):
                from queue_engine.contrib import otel

                if otel.installed() and otel.MIDDLEWARE not in paths:
                    # Outermost: the others run in its span.
                    if otel.tracing():
                        paths.insert(0, otel.MIDDLEWARE)
                    else:
                        traced_only = not paths
                        paths.insert(0, "queue_engine.contrib.otel.RemoteParentMiddleware")
            made = Chain(paths) if paths else None
            _chain = made if made is not None and made.layers else None
            if _chain is not None:
                _chain.traced_only = traced_only
            _built = True
    return _chain


@receiver(setting_changed)
def _settings_changed(setting: str, **kwargs: Any) -> None:
    global _chain, _built
    if setting == "QUEUE_ENGINE":
        with _lock:
            _chain, _built = None, False
