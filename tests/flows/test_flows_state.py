"""A flow's state and end time while some of its branches end badly and others run on."""

from __future__ import annotations

import pytest

from queue_engine import ops
from queue_engine.flows import Flow
from queue_engine.models import FlowRun, Job, JobRecord
from tests.support import jobs
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.slow


def submit_two_branches(name: str, *, fail: bool) -> int:
    flow = Flow(name)
    flow.add("bad", jobs.node, label="bad", fail=fail)
    flow.add("after", jobs.node, label="after", depends_on=["bad"])
    flow.add("other", jobs.node.using(queue="elsewhere"), label="other")  # no worker yet
    return flow.submit()


def test_a_failed_flow_ends_only_when_its_other_branches_have(
    workers: Workers, executions: None
) -> None:
    flow_id = submit_two_branches("half-failed", fail=True)
    workers.run_burst("--queues", "flows")

    failed = FlowRun.objects.get(pk=flow_id)
    assert (failed.state, failed.finished_at) == ("failed", None)  # "other" can still run

    workers.run_burst("--queues", "elsewhere")

    ended = FlowRun.objects.get(pk=flow_id)
    other = JobRecord.objects.get(flow_id=flow_id, node_key="other")
    assert ended.state == "failed" and other.state == "succeeded"
    assert ended.finished_at is not None and ended.finished_at >= other.finished_at
    assert Job.objects.get(flow_id=flow_id, node_key="after").state == "upstream_failed"


def test_a_cancelled_node_cancels_its_flow_only_once_nothing_else_can_run(
    workers: Workers, executions: None
) -> None:
    flow_id = submit_two_branches("half-cancelled", fail=False)

    ops.cancel_job(Job.objects.get(flow_id=flow_id, node_key="bad").id, actor="alice")

    running = FlowRun.objects.get(pk=flow_id)
    assert (running.state, running.finished_at) == ("running", None)
    workers.run_burst("--queues", "elsewhere")
    wait_for(lambda: FlowRun.objects.get(pk=flow_id).state == "cancelled", timeout=10)
    ended = FlowRun.objects.get(pk=flow_id)
    other = JobRecord.objects.get(flow_id=flow_id, node_key="other")
    assert other.state == "succeeded"
    assert ended.finished_at is not None and ended.finished_at >= other.finished_at
