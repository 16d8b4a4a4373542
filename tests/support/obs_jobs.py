"""Jobs and middleware for tests/worker/test_observability.py, imported by the test and by
its workers. A worker started with OBS_SPANS writes every span it ends to that file (one
JSON object a line); with OBS_SENTRY, every Sentry event; with OBS_RECORD, what the
recording middleware saw."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from queue_engine import Backoff, job
from queue_engine.exceptions import Snooze


def _append(env: str, line: dict[str, Any]) -> None:
    path = os.environ.get(env)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(line, default=str) + "\n")


# --- OpenTelemetry: an SDK with a file exporter, when the worker is told to ----------

if os.environ.get("OBS_SPANS"):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class FileExporter(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            for span in spans:
                context = span.get_span_context()
                _append(
                    "OBS_SPANS",
                    {
                        "name": span.name,
                        "kind": span.kind.name,
                        "trace_id": f"{context.trace_id:032x}" if context else None,
                        "span_id": f"{context.span_id:016x}" if context else None,
                        "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
                        "attributes": dict(span.attributes or {}),
                        "links": [f"{link.context.span_id:016x}" for link in span.links],
                    },
                )
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter()))
    trace.set_tracer_provider(provider)

if os.environ.get("OBS_SENTRY"):
    import sentry_sdk
    from sentry_sdk.transport import Transport

    class FileTransport(Transport):
        def capture_envelope(self, envelope: Any) -> None:
            for item in envelope.items:
                if item.type == "event":
                    _append("OBS_SENTRY", item.payload.json)

    sentry_sdk.init(dsn="https://key@sentry.invalid/1", transport=FileTransport)


# --- middleware -------------------------------------------------------------------


class Recording:
    """Writes what it sees before and after each attempt: its name, the job, the outcome."""

    name = "outer"

    def __init__(self, call_next: Any) -> None:
        self.call_next = call_next
        _append("OBS_RECORD", {"built": self.name, "pid": os.getpid()})

    def __call__(self, ctx: Any) -> Any:
        _append("OBS_RECORD", self._seen("before", ctx))
        try:
            return self.call_next(ctx)
        finally:
            _append("OBS_RECORD", self._seen("after", ctx))

    async def __acall__(self, ctx: Any) -> Any:
        _append("OBS_RECORD", self._seen("before", ctx))
        try:
            return await self.call_next(ctx)
        finally:
            _append("OBS_RECORD", self._seen("after", ctx))

    def _seen(self, when: str, ctx: Any) -> dict[str, Any]:
        outcome = ctx.outcome
        return {
            "mw": self.name,
            "when": when,
            "job": ctx.job_id,
            "kind": ctx.kind,
            "attempt": ctx.attempt,
            "outcome": outcome.kind if outcome else None,
            "result": outcome.result if outcome else None,
        }


class Inner(Recording):
    name = "inner"


class SyncOnly:
    """No __acall__: for an async handler, call_next hands back an awaitable."""

    def __init__(self, call_next: Any) -> None:
        self.call_next = call_next

    def __call__(self, ctx: Any) -> Any:
        _append("OBS_RECORD", {"mw": "sync_only", "job": ctx.job_id})
        return self.call_next(ctx)


class RaisesBefore:
    def __init__(self, call_next: Any) -> None:
        self.call_next = call_next

    def __call__(self, ctx: Any) -> Any:
        raise RuntimeError("middleware broken before the handler")


class RaisesAfter:
    def __init__(self, call_next: Any) -> None:
        self.call_next = call_next

    def __call__(self, ctx: Any) -> Any:
        self.call_next(ctx)
        raise RuntimeError("middleware broken after the handler")

    async def __acall__(self, ctx: Any) -> Any:
        await self.call_next(ctx)
        raise RuntimeError("middleware broken after the handler")


def stamp(job: Any) -> dict[str, Any]:
    """An enqueue hook: adds who enqueued to the job's meta."""
    return {"enqueued_by": "obs-test", "kind_seen": job.kind}


def broken_stamp(job: Any) -> dict[str, Any]:
    raise RuntimeError("enqueue hook broken")


# --- jobs -------------------------------------------------------------------------


def _trace_id() -> str:
    from opentelemetry import trace

    return f"{trace.get_current_span().get_span_context().trace_id:032x}"


@job(kind="obs.ok")
def ok(value: int) -> int:
    return value * 2


@job(kind="obs.async_ok")
async def async_ok(value: int) -> int:
    return value * 3


@job(kind="obs.flaky", max_attempts=3, backoff=Backoff.fixed(0))
def flaky(ctx: Any) -> str:
    if ctx.attempt == 1:
        raise ValueError("first attempt fails")
    return "fine"


@job(kind="obs.dead", max_attempts=1)
def dead() -> None:
    raise ValueError("this job always fails")


@job(kind="obs.snooze")
def snooze(woke: bool = False) -> str:
    if not woke:
        raise Snooze(0, payload={"woke": True})
    return "woke"


@job(kind="obs.trace_id")
def trace_id() -> str:
    return _trace_id()


@job(kind="obs.async_trace_id")
async def async_trace_id() -> str:
    return _trace_id()
