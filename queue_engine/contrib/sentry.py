"""Sentry: a job middleware that reports failed attempts (`pip install jobsite[sentry]`).

    QUEUE_ENGINE = {"JOB_MIDDLEWARE": ["queue_engine.contrib.sentry.SentryMiddleware"]}

Each attempt runs in an isolation scope of its own, tagged with the job's kind, queue and
outcome, so that what the handler reports itself carries them too. An attempt that raises
is reported once: as an error, unhandled, when the job fails for good (its last attempt,
`Fatal`, or a kind that does not retry); as a handled warning when it will be retried, so
that a job that succeeds later leaves no error behind. What is control flow, not a fault,
is not reported: `Snooze`, `Retry` (a retry the handler asked for), a cancellation, a
shutdown's give-back and a lost lease.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import sentry_sdk

from queue_engine.exceptions import Retry

if TYPE_CHECKING:
    from queue_engine.worker.middleware import MiddlewareContext

MECHANISM = "queue_engine"


class SentryMiddleware:
    def __init__(self, call_next: Any) -> None:
        self.call_next = call_next

    def __call__(self, ctx: MiddlewareContext) -> Any:
        with _scoped(ctx):
            return self.call_next(ctx)

    async def __acall__(self, ctx: MiddlewareContext) -> Any:
        with _scoped(ctx):
            return await self.call_next(ctx)


@contextmanager
def _scoped(ctx: MiddlewareContext) -> Iterator[None]:
    with sentry_sdk.isolation_scope() as scope:
        scope.set_tag("job.kind", ctx.kind)
        scope.set_tag("job.queue", ctx.queue)
        scope.set_context("job", job_context(ctx))
        scope.set_transaction_name(ctx.kind)
        try:
            yield
        finally:
            report(ctx, scope)


def job_context(ctx: MiddlewareContext) -> dict[str, Any]:
    """What an event says of its job: ids, the attempt, its flow, its console page."""
    data: dict[str, Any] = {
        "id": ctx.job_id,
        "kind": ctx.kind,
        "queue": ctx.queue,
        "attempt": ctx.attempt,
        "max_attempts": ctx.max_attempts,
    }
    if ctx.flow_id is not None:
        data["flow_id"] = ctx.flow_id
        data["node_key"] = ctx.node_key
    url = console_link(ctx.job_id)
    if url:
        data["url"] = url
    return data


def console_link(job_id: int) -> str | None:
    """The job's console page, when QUEUE_ENGINE['CONSOLE_URL'] gives the site's address."""
    from django.urls import NoReverseMatch, reverse

    from queue_engine.conf import option

    base = option("CONSOLE_URL")
    if not base:
        return None
    try:
        path = reverse("queue_engine:job", args=[job_id])
    except NoReverseMatch:  # the console is not mounted in this project
        return None
    return f"{str(base).rstrip('/')}{path}"


def report(ctx: MiddlewareContext, scope: Any) -> None:
    """Send the attempt's failure, if it is one (see the module's docstring)."""
    outcome = ctx.outcome
    if outcome is None or outcome.error is None or outcome.kind not in ("retry", "failed"):
        return
    if outcome.kind == "retry" and isinstance(outcome.error, Retry):
        return  # the handler asked for it
    final = outcome.kind == "failed"
    scope.set_tag("job.outcome", "dead" if final else "retry")
    scope.set_tag("job.attempt", str(ctx.attempt))
    event, hint = sentry_sdk.utils.event_from_exception(
        outcome.error,
        client_options=sentry_sdk.get_client().options,
        mechanism={"type": MECHANISM, "handled": not final},
    )
    event["level"] = "error" if final else "warning"
    event["fingerprint"] = ["queue_engine", ctx.kind, type(outcome.error).__qualname__]
    sentry_sdk.capture_event(event, hint=hint)
