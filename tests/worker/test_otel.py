"""OpenTelemetry across a real worker: the enqueue's PRODUCER span and the attempt's
CONSUMER span in one trace, the handler's current span the attempt's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from queue_engine import Flow
from queue_engine.models import JobRecord
from tests.support import obs_jobs
from tests.support.obs import burst, lines
from tests.support.workers import Workers

pytestmark = pytest.mark.slow


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """This process's tracer provider, for one test: set, then unset again (the API sets
    its global provider once a process; OpenTelemetry's own tests reset it the same way)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    yield memory
    provider.shutdown()
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


def hex_id(number: int) -> str:
    return f"{number:032x}"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_run_span_is_a_consumer_child_of_the_enqueue_span_in_the_same_trace(
    workers: Workers, tmp_path: Path, exporter: InMemorySpanExporter, kind: str
) -> None:
    handler = obs_jobs.trace_id if kind == "sync" else obs_jobs.async_trace_id
    spans_file = tmp_path / "spans.jsonl"
    with trace.get_tracer("test").start_as_current_span("request") as request:
        job = handler.enqueue()

    burst(workers, OBS_SPANS=str(spans_file))

    producer = next(s for s in exporter.get_finished_spans() if s.kind.name == "PRODUCER")
    assert producer.name == f"queue_engine.enqueue {handler.kind}"
    assert producer.parent is not None
    assert producer.parent.span_id == request.get_span_context().span_id
    assert producer.attributes is not None
    assert producer.attributes["messaging.message.id"] == str(job.id)
    trace_id = hex_id(request.get_span_context().trace_id)
    [run] = [s for s in lines(spans_file) if s["kind"] == "CONSUMER"]
    assert run["name"] == f"queue_engine.run {handler.kind}"
    assert (run["trace_id"], run["parent_id"]) == (
        trace_id,
        f"{producer.context.span_id:016x}",
    )
    attributes: dict[str, Any] = run["attributes"]
    assert attributes["messaging.system"] == "queue_engine"
    assert attributes["messaging.destination.name"] == "default"
    assert attributes["messaging.message.id"] == str(job.id)
    assert attributes["job.attempt"] == 1
    # The handler's current span is the run's: same trace, its id recorded as the result.
    assert JobRecord.objects.get(pk=job.id).result == trace_id


def test_without_an_sdk_in_the_worker_the_handler_still_sees_the_enqueuers_trace(
    workers: Workers, exporter: InMemorySpanExporter
) -> None:
    with trace.get_tracer("test").start_as_current_span("request") as request:
        job = obs_jobs.trace_id.enqueue()

    burst(workers)

    assert JobRecord.objects.get(pk=job.id).result == hex_id(request.get_span_context().trace_id)


def test_a_setting_turns_it_off(workers: Workers, exporter: InMemorySpanExporter) -> None:
    from django.test import override_settings

    with (
        override_settings(QUEUE_ENGINE={"OPENTELEMETRY": False}),
        trace.get_tracer("test").start_as_current_span("request"),
    ):
        job = obs_jobs.trace_id.enqueue()

    burst(workers, {"OPENTELEMETRY": False})

    assert [s.name for s in exporter.get_finished_spans()] == ["request"]
    assert JobRecord.objects.get(pk=job.id).result == hex_id(0)


def test_json_log_lines_carry_the_trace_id_of_the_job(
    workers: Workers, exporter: InMemorySpanExporter
) -> None:
    with trace.get_tracer("test").start_as_current_span("request") as request:
        job = obs_jobs.ok.enqueue(value=1)

    output = workers.run_burst(
        "-v", "2", "--log-format", "json", env={"JOBSITE_JOB_MODULES": "tests.support.obs_jobs"}
    )

    finished = [
        json.loads(line)
        for line in (output.stdout + output.stderr).splitlines()
        if line.startswith("{") and '"outcome"' in line
    ]
    assert [(f["job_id"], f["trace_id"]) for f in finished] == [
        (job.id, hex_id(request.get_span_context().trace_id))
    ]


def test_a_flows_nodes_run_in_the_flows_trace_and_link_to_its_enqueue(
    workers: Workers, tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    spans_file = tmp_path / "spans.jsonl"
    with trace.get_tracer("test").start_as_current_span("request"):
        flow = Flow("traced")
        flow.add("first", obs_jobs.ok, value=1)
        flow.add("second", obs_jobs.async_ok, value=1, depends_on=["first"])
        flow_id = flow.submit()

    burst(workers, OBS_SPANS=str(spans_file))

    producer = next(s for s in exporter.get_finished_spans() if s.kind.name == "PRODUCER")
    assert producer.name == "queue_engine.enqueue flow traced"
    enqueue = f"{producer.context.span_id:016x}"
    runs = {
        s["attributes"]["job.node_key"]: s for s in lines(spans_file) if s["kind"] == "CONSUMER"
    }
    assert sorted(runs) == ["first", "second"]
    for run in runs.values():
        assert run["trace_id"] == f"{producer.context.trace_id:032x}"
        assert (run["parent_id"], run["links"]) == (enqueue, [enqueue])
        assert run["attributes"]["job.flow_id"] == flow_id
