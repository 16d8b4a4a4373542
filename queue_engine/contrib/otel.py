"""OpenTelemetry: an enqueue is a PRODUCER span whose W3C trace context (`traceparent`,
`tracestate`) goes into the job's meta; each attempt runs in a CONSUMER span
(`queue_engine.run <kind>`) whose parent is that context, current while the handler runs.

On when `opentelemetry-api` is installed (`pip install jobsite[otel]`) and
QUEUE_ENGINE['OPENTELEMETRY'] is True. Spans are made only when a real tracer provider
(an SDK's) is set; a worker checks once, at its first job. Without one, a worker still
makes the enqueuer's context current in the handler, so that its trace id is the
enqueuing span's, at the cost of a substring test on jobs that carry none.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from queue_engine.worker.middleware import MiddlewareContext

MIDDLEWARE = "queue_engine.contrib.otel.TracingMiddleware"
SYSTEM = "queue_engine"
KEYS = ("traceparent", "tracestate")


@functools.cache
def installed() -> bool:
    try:
        import opentelemetry.trace  # noqa: F401
    except ImportError:
        return False
    return True


def tracing() -> bool:
    """Whether a real tracer provider is set: not the API's proxy or its no-op one."""
    if not installed():
        return False
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


@functools.cache
def _propagator() -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def recording_context() -> bool:
    """Whether the current span has a valid context (a job enqueued now carries it)."""
    from opentelemetry import trace

    return bool(trace.get_current_span().get_span_context().is_valid)


def current_carrier() -> dict[str, str]:
    """The current span's W3C trace context, as headers; empty without a valid span."""
    if not recording_context():
        return {}
    carrier: dict[str, str] = {}
    _propagator().inject(carrier)
    return carrier


def parent_context(meta: Mapping[str, Any]) -> Any:
    """The OpenTelemetry context a job's meta carries, or None."""
    carrier = {key: meta[key] for key in KEYS if isinstance(meta.get(key), str)}
    if "traceparent" not in carrier:
        return None
    return _propagator().extract(carrier)


def trace_id_of(meta_text: str | None) -> str | None:
    """The trace id (32 hex digits) a job's meta carries, from its JSON text."""
    if not meta_text or "traceparent" not in meta_text:
        return None
    value = json.loads(meta_text).get("traceparent")
    parts = value.split("-") if isinstance(value, str) else []
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


def _tracer() -> Any:
    from opentelemetry import trace

    from queue_engine import __version__

    return trace.get_tracer("queue_engine", __version__)


@contextmanager
def producer(name: str) -> Iterator[Any]:
    from opentelemetry.trace import SpanKind

    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "enqueue",
    }
    with _tracer().start_as_current_span(
        f"queue_engine.enqueue {name}", kind=SpanKind.PRODUCER, attributes=attributes
    ) as span:
        yield span


def sent(span: Any, result: Any) -> None:
    """What the enqueue wrote, on its span: the job's id and queue, or how many jobs."""
    if isinstance(result, list):
        span.set_attribute("messaging.batch.message_count", len(result))
    elif isinstance(result, int):
        span.set_attribute("job.flow_id", result)
    elif hasattr(result, "pk"):
        span.set_attribute("messaging.message.id", str(result.pk))
        span.set_attribute("messaging.destination.name", str(result.queue))


class TracingMiddleware:
    """The job middleware that runs each attempt in its CONSUMER span (added first, so
    outermost, when a tracer provider is set and QUEUE_ENGINE['OPENTELEMETRY'] is on)."""

    def __init__(self, call_next: Any) -> None:
        self.call_next = call_next
        self.tracer = _tracer()

    def __call__(self, ctx: MiddlewareContext) -> Any:
        with self._span(ctx):
            return self.call_next(ctx)

    async def __acall__(self, ctx: MiddlewareContext) -> Any:
        with self._span(ctx):
            return await self.call_next(ctx)

    @contextmanager
    def _span(self, ctx: MiddlewareContext) -> Iterator[None]:
        from opentelemetry.trace import Link, SpanKind, Status, StatusCode

        meta = ctx.meta
        parent = parent_context(meta)
        links = []
        if ctx.flow_id is not None and parent is not None:
            from opentelemetry import trace

            # A flow's nodes link to the flow's enqueue (their parent, when the flow was
            # submitted, or the job that spawned them).
            links.append(Link(trace.get_current_span(parent).get_span_context()))
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "process",
            "messaging.operation.name": "run",
            "messaging.destination.name": ctx.queue,
            "messaging.message.id": str(ctx.job_id),
            "job.kind": ctx.kind,
            "job.attempt": ctx.attempt,
        }
        if ctx.flow_id is not None:
            attributes["job.flow_id"] = ctx.flow_id
            attributes["job.node_key"] = ctx.node_key or ""
        with self.tracer.start_as_current_span(
            f"queue_engine.run {ctx.kind}",
            context=parent,
            kind=SpanKind.CONSUMER,
            links=links,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield
            finally:
                outcome = ctx.outcome
                if outcome is not None:
                    span.set_attribute("job.outcome", outcome.kind)
                    if outcome.kind in ("retry", "failed") and outcome.error is not None:
                        span.record_exception(outcome.error)
                        span.set_status(Status(StatusCode.ERROR, type(outcome.error).__name__))


class RemoteParentMiddleware:
    """Without a tracer provider: the enqueuer's context is current in the handler (its
    trace id is the enqueuing span's), and no span is made."""

    def __init__(self, call_next: Any) -> None:
        self.call_next = call_next

    def __call__(self, ctx: MiddlewareContext) -> Any:
        with self._attached(ctx):
            return self.call_next(ctx)

    async def __acall__(self, ctx: MiddlewareContext) -> Any:
        with self._attached(ctx):
            return await self.call_next(ctx)

    @contextmanager
    def _attached(self, ctx: MiddlewareContext) -> Iterator[None]:
        from opentelemetry import context

        parent = parent_context(ctx.meta)
        token = context.attach(parent) if parent is not None else None
        try:
            yield
        finally:
            if token is not None:
                context.detach(token)
