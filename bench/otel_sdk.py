"""Imported by a worker (as one of its JOB_MODULES) to run with OpenTelemetry's SDK: a
tracer provider whose spans go through a batch processor to an exporter that drops them,
so what a run costs is the spans' making, not their shipping."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class DroppingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(DroppingExporter()))
trace.set_tracer_provider(provider)
