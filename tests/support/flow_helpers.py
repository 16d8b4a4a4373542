"""Reading a flow's state and its ended nodes, and settling a node by hand, for the flow tests."""

from __future__ import annotations

import json

from django.db import connection

from queue_engine.flows import Flow
from queue_engine.models import FlowRun, JobRecord
from tests.support import jobs
from tests.support.workers import wait_for


def flow_state(flow_id: int, state: str, timeout: float = 30) -> FlowRun:
    return wait_for(
        lambda: FlowRun.objects.filter(pk=flow_id, state=state).first(),
        timeout=timeout,
        message=f"flow {flow_id} to be {state}",
    )


def flow_settled(flow_id: int, state: str, timeout: float = 30) -> FlowRun:
    """The flow in `state` with nothing of it left to run (its finished_at set). A flow
    is failed from its first failed node on, while its other nodes may still run."""
    return wait_for(
        lambda: FlowRun.objects.filter(pk=flow_id, state=state, finished_at__isnull=False).first(),
        timeout=timeout,
        message=f"flow {flow_id} to be {state} with nothing left to run",
    )


def records(flow_id: int) -> dict[str | None, JobRecord]:
    return {r.node_key: r for r in JobRecord.objects.filter(flow_id=flow_id)}


def succeed_by_hand(job_id: int, result: str = "null") -> None:
    """Move a live job to the history as succeeded with this JSON result, as a settle
    would, without counting down any flow children (what a worker that died right after
    its settle leaves)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH gone AS (DELETE FROM queue_engine_job WHERE id = %s RETURNING *) "
            "INSERT INTO queue_engine_jobrecord (id, queue, kind, payload, attempt, "
            "max_attempts, errors, labels, flow_id, node_key, meta, progress_message, "
            "rescues, run_at, created_at, state, result, finished_at) "
            "SELECT id, queue, kind, payload, 1, max_attempts, errors, labels, flow_id, "
            "node_key, meta, '', 0, run_at, created_at, 'succeeded', %s::jsonb, now() "
            "FROM gone",
            [job_id, result],
        )


def diamond() -> int:
    """root -> (left, right) -> join; `right` fails the first time."""
    flow = Flow("etl", meta={"source": "s3://bucket"})
    flow.add("root", jobs.node, label="root")
    flow.add("left", jobs.node, label="left", depends_on=["root"])
    flow.add("right", jobs.node, label="right", fail=True, depends_on=["root"])
    flow.add("join", jobs.sum_outputs, depends_on=["left", "right"])
    return flow.submit()


def chunked(size: int) -> dict[str, str]:
    """A worker's environment with FLOW_RELEASE_CHUNK set to `size`."""
    return {
        "DJANGO_SETTINGS_MODULE": "tests.support.settings_queues",
        "TEST_QUEUE_ENGINE": json.dumps({"FLOW_RELEASE_CHUNK": size}),
    }
